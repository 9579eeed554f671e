"""What operators read of the lanes (the metrics and the ops page), as typed values.

Each is built from one script reply (`stats`, `rooms`, `dead`) or one read of a book
(`rdepth`, `rseen`): see docs/lanes.md, "What operators read".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ms(value: Any) -> int | None:
    """A time in ms from a script (-1 = none)."""
    return None if int(value) < 0 else int(value)


@dataclass(frozen=True, slots=True)
class QueueStats:
    """The queue as a whole. Rooms: `waiting` have pending jobs; of them `serviceable` can
    be served now (on the room ring) and `at_ceiling` are held by their ceiling; `paused`
    counts the paused rooms, with work or not. `oldest_ms` is the enqueue time of the oldest
    pending job (None when nothing is pending), `now_ms` Redis's clock."""

    queue_paused: bool
    pending: int
    active: int
    delayed: int
    dead: int
    waiting: int
    serviceable: int
    at_ceiling: int
    paused: int
    oldest_ms: int | None
    now_ms: int
    deepest: tuple[tuple[str, int, int], ...]  # (room, pending, in flight), deepest first

    @property
    def oldest_age_s(self) -> float:
        """How long the oldest pending job has waited (0 when nothing is pending)."""
        return 0.0 if self.oldest_ms is None else max(0, self.now_ms - self.oldest_ms) / 1000

    @classmethod
    def parse(cls, reply: list[Any]) -> QueueStats:
        *numbers, deepest = reply
        qpaused, pending, active, delayed, dead, waiting, serviceable, ceiling, paused = (
            int(n) for n in numbers[:9]
        )
        return cls(
            bool(qpaused),
            pending,
            active,
            delayed,
            dead,
            waiting,
            serviceable,
            ceiling,
            paused,
            _ms(numbers[9]),
            int(numbers[10]),
            tuple((_s(r), int(p), int(a)) for r, p, a in deepest),
        )


@dataclass(frozen=True, slots=True)
class RoomQueue:
    """One room as the lanes see it: pending, in flight, its ceiling (None = none), paused,
    the enqueue time of its oldest pending job and its last enqueue (ms, None = none)."""

    room: str
    pending: int
    in_flight: int
    ceiling: int | None
    paused: bool
    oldest_ms: int | None
    last_enqueue_ms: int | None

    @classmethod
    def parse(cls, row: list[Any]) -> RoomQueue:
        room, pending, in_flight, ceiling, paused, oldest, last = row
        return cls(
            _s(room),
            int(pending),
            int(in_flight),
            None if int(ceiling) < 0 else int(ceiling),
            bool(paused),
            _ms(oldest),
            _ms(last),
        )


@dataclass(frozen=True, slots=True)
class DeadJob:
    """A dead-lettered job: when it died, where it was, its attempts and last error."""

    id: str
    died_ms: int
    room: str
    lane: str
    attempts: int
    max_attempts: int
    enqueued_ms: int
    last_error: str

    @classmethod
    def parse(cls, row: list[Any]) -> DeadJob:
        jid, died, room, lane, attempts, max_attempts, enqueued, error = row
        return cls(
            _s(jid),
            int(died),
            _s(room),
            _s(lane),
            int(attempts),
            int(max_attempts),
            int(enqueued),
            _s(error),
        )
