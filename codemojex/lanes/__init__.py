"""Lanes: a fair two-level job queue on Redis (rooms rotate, then players' lanes rotate).

See docs in /work/shared/design/lanes.md (the keyspace and the invariants) and the README.
"""

from codemojex.lanes.consumer import ConsumerPool, Handler, PoolStats
from codemojex.lanes.errors import LaneError, LaneFull, Retry
from codemojex.lanes.facade import Job, Lanes

__all__ = [
    "ConsumerPool",
    "Handler",
    "Job",
    "LaneError",
    "LaneFull",
    "Lanes",
    "PoolStats",
    "Retry",
]
