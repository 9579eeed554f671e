"""Every Redis key name of a lanes queue, built in one place.

The keyspace is the one of docs `lanes.md`: all keys of queue `q` start with `emq:{q}:`,
so a queue lives on one Cluster slot. The names are spelled here once: `Keys` builds them
for Python, and the Lua scripts get theirs rendered from the same spellings (`lua_names`:
the include `keys` of the lanes' scripts, codemojex/lua/loader.py): each key of `SINGLE` as
a constant in capitals (`RING`, `GACTIVE`, ...), each builder of `PER_ID` as a function
(`pending_key(lane)`, `lane_ring_key(room)`, ...) on the queue prefix the scripts get as
KEYS[1] (a lane or room found on a ring inside a script cannot be declared by its caller).
`parse` names every key a script may write, and the tests check every key they see against it.

Ids are validated before any key is built, so user text never reaches a key name.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, NamedTuple

from codemojex.lanes.errors import LaneError
from codemojex.lua.loader import key_builder, key_constant
from codemojex.values import ids

_QUEUE: Final = re.compile(r"[a-z0-9_-]{1,32}\Z")

# Keys holding one value for the whole queue, by suffix (the Lua constant is its capitals).
SINGLE: Final = (
    "seq",
    "lroom",
    "ring",
    "glimit",
    "gactive",
    "gweight",
    "paused",
    "qpaused",
    "active",
    "delayed",
    "dead",
    "wake",
    "lseen",
    "ldelayed",
    "npending",
    "rdepth",
    "lhead",
    "rseen",
)


class Shape(NamedTuple):
    """A key of one job, lane, room or dedupe digest: `before` + the id + `after`."""

    before: str
    after: str
    arg: str  # what the id is called in Lua: the builder's parameter
    brand: str | None  # the id's brand (codemojex/values/ids.py); None: a dedupe digest


# `Keys.<builder>(id)` in Python, `<builder>_key(<arg>)` in Lua.
PER_ID: Final = {
    "job": Shape("job:", "", "id", ids.JOB),
    "pending": Shape("g:", ":pending", "lane", ids.PLAYER),
    "lane_ring": Shape("r:", ":ring", "room", ids.ROOM),
    "room_lanes": Shape("r:", ":lanes", "room", ids.ROOM),
    "room_held": Shape("r:", ":held", "room", ids.ROOM),
    "dedupe": Shape("dd:", "", "digest", None),
}
_DIGEST: Final = re.compile(r"[0-9a-f]{32}\Z")

# The job hash's fields (docs/lanes.md, "The job hash"): what Python calls each -> its name in
# Redis. One letter each: a guess is stored once per pending job, and the names are a fifth of
# its hash. `attempts` is written by the first lease (absent: 0), `last_error` by a retry or a
# death. The scripts spell the short names (and lua/includes/job_long.lua and upgrade_job.lua
# the older, long ones: these keys), tests/lanes/test_cost.py checks they agree.
JOB_FIELDS: Final = {
    "payload": "p",
    "room": "r",
    "lane": "l",
    "seq": "s",
    "attempts": "a",
    "max_attempts": "m",
    "state": "t",
    "enqueued_ms": "e",
    "last_error": "x",
}


def lua_names() -> dict[str, str]:
    """The Lua definition of every key name a script may use, by the name it is used by:
    `RING` -> `local RING = P .. 'ring'`, `pending_key` -> `local function pending_key(lane)
    return P .. 'g:' .. lane .. ':pending' end` (P = KEYS[1], the queue prefix)."""
    names = {suffix.upper(): key_constant(suffix.upper(), suffix) for suffix in SINGLE}
    for builder, shape in PER_ID.items():
        name = f"{builder}_key"
        names[name] = key_builder(name, shape.arg, shape.before, shape.after)
    return names


def check_queue(queue: object) -> str:
    if not isinstance(queue, str) or not _QUEUE.match(queue):
        raise LaneError(f"queue name must match [a-z0-9_-]{{1,32}}, got {queue!r}")
    return queue


def check_room(room: object) -> str:
    if not ids.is_valid(room, ids.ROOM):
        raise LaneError(f"not a room id (ROM + 26 base32 characters): {room!r}")
    return str(room)


def check_lane(lane: object) -> str:
    if not ids.is_valid(lane, ids.PLAYER):
        raise LaneError(f"not a lane id (PLR + 26 base32 characters): {lane!r}")
    return str(lane)


def check_job(job_id: object) -> str:
    if not ids.is_valid(job_id, ids.JOB):
        raise LaneError(f"not a job id (JOB + 26 base32 characters): {job_id!r}")
    return str(job_id)


def check_room_or_lane(value: object) -> str:
    brand = ids.brand_of(value)
    if brand not in (ids.ROOM, ids.PLAYER):
        raise LaneError(f"not a room (ROM…) or lane (PLR…) id: {value!r}")
    return str(value)


def dedupe_digest(dedupe_key: str) -> str:
    """The dedupe key is caller text: only its digest becomes part of a key name."""
    return hashlib.blake2b(dedupe_key.encode("utf-8"), digest_size=16).hexdigest()


class Keys:
    """Key names of one queue."""

    __slots__ = ("prefix", "queue")

    def __init__(self, queue: str) -> None:
        self.queue = check_queue(queue)
        self.prefix = f"emq:{{{queue}}}:"

    @property
    def seq(self) -> str:
        return self.prefix + "seq"

    @property
    def lroom(self) -> str:
        return self.prefix + "lroom"

    @property
    def ring(self) -> str:
        return self.prefix + "ring"

    @property
    def glimit(self) -> str:
        return self.prefix + "glimit"

    @property
    def gactive(self) -> str:
        return self.prefix + "gactive"

    @property
    def gweight(self) -> str:
        return self.prefix + "gweight"

    @property
    def paused(self) -> str:
        return self.prefix + "paused"

    @property
    def qpaused(self) -> str:
        return self.prefix + "qpaused"

    @property
    def active(self) -> str:
        return self.prefix + "active"

    @property
    def delayed(self) -> str:
        return self.prefix + "delayed"

    @property
    def dead(self) -> str:
        return self.prefix + "dead"

    @property
    def wake(self) -> str:
        return self.prefix + "wake"

    @property
    def lseen(self) -> str:
        """Extra key: lane -> its last enqueue (ms), for every lane the lanes remember; retain
        forgets the lanes idle longest, a bounded batch at a time."""
        return self.prefix + "lseen"

    @property
    def ldelayed(self) -> str:
        """Extra key: lane -> how many of its jobs wait in `delayed` (absent when none)."""
        return self.prefix + "ldelayed"

    @property
    def npending(self) -> str:
        """Operators' book: how many jobs are pending in all (absent at 0)."""
        return self.prefix + "npending"

    @property
    def rdepth(self) -> str:
        """Operators' book: room -> its pending jobs (zset; rooms with none are absent), so
        the deepest rooms are a ZREVRANGE away."""
        return self.prefix + "rdepth"

    @property
    def lhead(self) -> str:
        """Operators' book: lane -> the seq of its oldest pending job (zset; lanes with none
        are absent), so the oldest pending job of the queue is its first member's head."""
        return self.prefix + "lhead"

    @property
    def rseen(self) -> str:
        """Operators' book: room -> its last enqueue in ms (zset), forgotten with the lanes'
        idle time: the ops page's "last activity"."""
        return self.prefix + "rseen"

    def _of(self, builder: str, ident: str) -> str:
        shape = PER_ID[builder]
        return f"{self.prefix}{shape.before}{ident}{shape.after}"

    def job(self, job_id: str) -> str:
        return self._of("job", check_job(job_id))

    def pending(self, lane: str) -> str:
        """The lane's pending jobs (`g:` for the design's "group": a lane, not a room)."""
        return self._of("pending", check_lane(lane))

    def lane_ring(self, room: str) -> str:
        """The room's lane ring: its serviceable lanes (the room ring is `ring`)."""
        return self._of("lane_ring", check_room(room))

    def room_lanes(self, room: str) -> str:
        """Extra key: the set of lanes bound to the room (until retain forgets them)."""
        return self._of("room_lanes", check_room(room))

    def room_held(self, room: str) -> str:
        """Extra key: the room's paused lanes that hold pending jobs (with its lane ring,
        every lane of the room with work: what snapshot reads)."""
        return self._of("room_held", check_room(room))

    def dedupe(self, dedupe_key: str) -> str:
        """Extra key: dedupe digest -> first job id, expiring with the window."""
        return self._of("dedupe", dedupe_digest(dedupe_key))

    def parse(self, key: str) -> tuple[str, str | None]:
        """(kind, id) of a key of this queue; LaneError when it is not one of ours."""
        if not key.startswith(self.prefix):
            raise LaneError(f"key {key!r} is not in queue {self.queue!r}")
        rest = key[len(self.prefix) :]
        if rest in SINGLE:
            return rest, None
        for builder, shape in PER_ID.items():
            if rest.startswith(shape.before) and rest.endswith(shape.after):
                ident = rest[len(shape.before) : len(rest) - len(shape.after)]
                if ids.is_valid(ident, shape.brand) if shape.brand else _DIGEST.match(ident):
                    return builder, ident
        raise LaneError(f"key {key!r} is not part of the lanes keyspace")
