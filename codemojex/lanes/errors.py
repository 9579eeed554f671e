"""Exceptions of the lanes library."""

from __future__ import annotations


class LaneError(ValueError):
    """A request the lanes refuse (malformed id, lane of another room, bad number).

    Nothing was written when this is raised.
    """


class LaneFull(LaneError):
    """The lane already holds `max_depth` pending jobs (backpressure)."""


class Retry(Exception):
    """Raised by a consumer handler: retry the whole batch after `delay_ms`."""

    def __init__(self, delay_ms: int = 0, reason: str = "retry requested") -> None:
        super().__init__(reason)
        self.delay_ms = max(0, int(delay_ms))
        self.reason = reason
