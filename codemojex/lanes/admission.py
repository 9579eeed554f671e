"""What `Lanes.admit` takes and answers: jobs under their producer's admission guards.

A producer that must check something of its own atomically with the enqueue (the bot: that
the room's open round is still the one a guess was parsed against, that the player is not
banned, which lane is the player's) states it as guards on keys it owns. The lanes do not
know what the keys mean: a guard compares a hash field with a value (`eq`), sets one if it is
absent and compares it (`nx`: the first writer's value stands), requires a member absent
from a set (`out`), or requires a sorted set to hold nothing scored below a value (`first`:
the bot's order per key across processes, bot/order.py). Guard keys must carry the queue's
`{q}` hash tag (so a Redis Cluster runs the script on the slot that holds them) and lie
outside the lanes' own keyspace, whose invariants only the verbs may change. A job may also
carry notes: hash fields of the producer's keys set when (and only when) the job is admitted.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import Field

from codemojex.lanes import keys as K
from codemojex.lanes.errors import LaneError
from codemojex.limits import ROOM
from codemojex.values import ids
from codemojex.values.bounds import limits_of

# Guesses a player may have waiting in their lane before "slow down" (CODEMOJEX_MAX_DEPTH).
DEPTH: Final = 20
Depth = Annotated[int, Field(ge=1, le=10_000)]

# Read per admitted guess: bound once.
_DEPTH_MIN: Final[int] = limits_of(Depth)["ge"]
_DEPTH_MAX: Final[int] = limits_of(Depth)["le"]
_CEILING_MIN: Final = ROOM.ceiling_min
_CEILING_MAX: Final = ROOM.ceiling_max

GuardOp = Literal["eq", "nx", "out", "first"]
GUARD_OPS: Final = ("eq", "nx", "out", "first")

Status = Literal["enqueued", "duplicate", "full", "refused", "error"]
_STATUS: Final[dict[bytes, Status]] = {
    b"ok": "enqueued",
    b"dup": "duplicate",
    b"full": "full",
    b"guard": "refused",
    b"err": "error",
}


@dataclass(frozen=True, slots=True)
class Guard:
    """One admission condition (see the module docstring)."""

    op: GuardOp
    key: str
    field: str
    value: str = ""


@dataclass(frozen=True, slots=True)
class Admission:
    """A job to admit, as `Lanes.enqueue` takes it, with its guards and a default ceiling:
    when the room has none, it gets `ceiling_from`'s hash field (a whole number within the
    ceiling's range) or else `ceiling`."""

    room: str
    lane: str
    payload: bytes
    max_attempts: int = 5
    max_depth: int | None = None
    dedupe_key: str | None = None
    job_id: str | None = None
    guards: tuple[Guard, ...] = ()
    ceiling: int | None = None
    ceiling_from: tuple[str, str] | None = None
    notes: tuple[tuple[str, str, str], ...] = ()  # (key, field, value): HSET when admitted


@dataclass(frozen=True, slots=True)
class Admitted:
    """What became of one admission.

    enqueued / duplicate: `job_id` (a duplicate's is the first job's); full: the lane holds
    max_depth pending jobs; refused: guard number `guard` (0-based) refused, having found
    `found` ("" for nothing); error: the lane belongs to another room or the job id is taken
    elsewhere (`error` says which). `paused`: the room is paused (its jobs wait)."""

    status: Status
    job_id: str | None = None
    paused: bool = False
    guard: int | None = None
    found: str | None = None
    error: str | None = None

    @property
    def taken(self) -> bool:
        return self.status in ("enqueued", "duplicate")


def _number(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LaneError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _own_key(key: object, keys: K.Keys) -> str:
    """A producer's key: text in the queue's hash slot, not a lanes key."""
    tag = "{" + keys.queue + "}"
    if not isinstance(key, str) or key.startswith(keys.prefix):
        raise LaneError(f"a guard's key must be outside the lanes keyspace: {key!r}")
    opening = key.find("{")
    if opening < 0 or not key.startswith(tag, opening):
        raise LaneError(f"a guard's key must carry the queue's hash tag {tag}: {key!r}")
    return key


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise LaneError(f"{name} must be text, got {value!r}")
    return value


def _netstring(value: str | bytes | int) -> bytes:
    if isinstance(value, str):
        return _text_netstring(value)
    raw = b"%d" % value if isinstance(value, int) else value
    return b"%d:%b" % (len(raw), raw)


@functools.lru_cache(maxsize=8192)
def _text_netstring(value: str) -> bytes:
    """Keys, ids and field names come again with every job of a room: encoded once."""
    raw = value.encode()
    return b"%d:%b" % (len(raw), raw)


def encode(admissions: Sequence[Admission], keys: K.Keys) -> list[bytes]:
    """admit.lua's records for these admissions (ARGV[3..]), every field checked: one
    argument per job, its fields as netstrings run together."""
    records: list[bytes] = []
    for a in admissions:
        K.check_room(a.room)
        K.check_lane(a.lane)
        if not isinstance(a.payload, bytes | bytearray | memoryview):
            raise LaneError(f"payload must be bytes, got {type(a.payload).__name__}")
        _number(a.max_attempts, "max_attempts", 1, 1_000)
        depth = (
            0 if a.max_depth is None else _number(a.max_depth, "max_depth", _DEPTH_MIN, _DEPTH_MAX)
        )
        digest = ""
        if a.dedupe_key is not None:
            if not isinstance(a.dedupe_key, str) or not a.dedupe_key:
                raise LaneError("dedupe_key must be a non-empty string")
            digest = K.dedupe_digest(a.dedupe_key)
        job_id = ids.mint(ids.JOB) if a.job_id is None else K.check_job(a.job_id)
        ceiling = 0
        if a.ceiling is not None:
            ceiling = _number(a.ceiling, "ceiling", _CEILING_MIN, _CEILING_MAX)
        source, field = ("", "") if a.ceiling_from is None else a.ceiling_from
        if source:
            source, field = _own_key(source, keys), _text(field, "ceiling_from's field")
        # admit.lua's record: the job, the room's ceiling (and where to read it when the
        # lanes lost it), then its guards and notes, each counted first
        parts: list[str | bytes | int] = [
            a.room,
            a.lane,
            job_id,
            bytes(a.payload),
            a.max_attempts,
            depth,
            digest,
            ceiling,
            source,
            field,
            len(a.guards),
            len(a.notes),
        ]
        for guard in a.guards:
            if guard.op not in GUARD_OPS:
                raise LaneError(f"unknown guard {guard.op!r}")
            parts += [
                guard.op,
                _own_key(guard.key, keys),
                _text(guard.field, "a guard's field"),
                _text(guard.value, "a guard's value"),
            ]
        for key, note, value in a.notes:
            parts += [
                _own_key(key, keys),
                _text(note, "a note's field"),
                _text(value, "a note's value"),
            ]
        records.append(b"".join([_netstring(part) for part in parts]))
    return records


def decode(reply: list[bytes | int]) -> list[Admitted]:
    """admit.lua's reply: 4 values per job."""
    out: list[Admitted] = []
    for at in range(0, len(reply), 4):
        raw, value, paused, guard = reply[at : at + 4]
        status = _STATUS[raw if isinstance(raw, bytes) else str(raw).encode()]
        text = value.decode() if isinstance(value, bytes) else str(value)
        out.append(
            Admitted(
                status,
                job_id=text if status in ("enqueued", "duplicate") else None,
                paused=bool(paused),
                guard=int(guard) - 1 if status == "refused" else None,
                found=text if status == "refused" else None,
                error=text if status in ("full", "error") else None,
            )
        )
    return out
