"""Lanes: a fair two-level job queue on Redis (rooms rotate, then players' lanes rotate).

The design, the keyspace and the invariants are in docs/lanes.md; every verb is one
Lua script in `lua/` (one round trip). Notes for callers:

- `Lanes(client, queue)` needs a `redis.asyncio.Redis` (or a `RedisCluster`: a queue's
  keys share the `{queue}` hash tag, so one slot) with `decode_responses=False`.
  Errors: `LaneError` (bad id/number, lane of another room, job id taken by another lane;
  nothing written), `LaneFull` (a `LaneError`: the lane holds `max_depth` pending jobs).
  Redis errors (`redis.exceptions.RedisError`) pass through unchanged.
- `admit(admissions)` enqueues a batch in one round trip, each job under admission guards of
  its producer (conditions on the producer's own keys in the queue's slot, `admission.py`)
  and with a ceiling for its room when the room has none; one `Admitted` per job.
- `retry()` answers "delayed", "dead" or "stale" (token fenced out, nothing changed).
  A delayed job is due after `delay_ms` and goes back to its lane when `promote()` runs
  (the consumer pool runs reap + promote every `maintenance_interval_s`).
- `snapshot(room=None)` -> {"queue", "paused" (queue pause), "ring" (room ring order),
  "active", "delayed", "dead" (counts), "rooms": {room: {"paused", "ceiling" (None =
  unlimited), "in_flight", "ring" (lane ring order), "pending" (total depth),
  "lanes": {lane: {"depth", "weight", "paused"}}}}} where "lanes" are the room's lanes
  holding pending jobs. No payloads.
- `retain()` deletes dead jobs beyond `dead_max` or older than `dead_age_ms` and forgets
  lanes idle for `lane_idle_ms`, one bounded batch per call (the consumer pool runs it with
  reap + promote).
- `park(timeout_s)` is a BLPOP: it holds a pooled connection while it blocks (the consumer
  pool has one waiter parked at a time, however many consumers it has).
"""

from codemojex.lanes.admission import Admission, Admitted, Guard
from codemojex.lanes.calls import Job
from codemojex.lanes.consumer import ConsumerPool, Handler, PoolStats
from codemojex.lanes.errors import LaneError, LaneFull, Retry
from codemojex.lanes.facade import Lanes

__all__ = [
    "Admission",
    "Admitted",
    "ConsumerPool",
    "Guard",
    "Handler",
    "Job",
    "LaneError",
    "LaneFull",
    "Lanes",
    "PoolStats",
    "Retry",
]
