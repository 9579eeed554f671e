"""`Lanes`: the async facade over the lanes scripts (one script, one round trip per verb).

Its verbs by family: the producer's and the consumer's here, the admin's (`admin.py`
`AdminVerbs`) and the operators' (`operators.py` `OperatorVerbs`) beside it, on the script
call they share (`calls.py`). Callers use `Lanes` alone."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Annotated, Any, Final, cast

from pydantic import Field
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection

from codemojex.lanes import admission
from codemojex.lanes import keys as K
from codemojex.lanes.admin import AdminVerbs
from codemojex.lanes.admission import Admission, Admitted
from codemojex.lanes.calls import Job, checked, job_of, token
from codemojex.lanes.errors import LaneError
from codemojex.lanes.operators import OperatorVerbs
from codemojex.limits import ROOM
from codemojex.values import ids
from codemojex.values.bounds import within
from codemojex.values.redistypes import AnyRedis

_DAY_MS: Final = 24 * 3600 * 1000
# A job's attempts when its enqueuer names none; a failed job's error as kept; jobs acked per
# script call (Lua's unpack() has a limit).
MAX_ATTEMPTS: Final = 5
MAX_ERROR_CHARS: Final = 2_000
ACK_CHUNK: Final = 1_000
# Expired leases reaped, due retries promoted, per script call of the maintenance pass.
MAINTENANCE_BATCH: Final = 1000
MAINTENANCE_BATCH_MAX: Final = 100_000
# How long an update handled is remembered (a dedupe key here; the bot's command marks and
# taps take the same setting, CODEMOJEX_DEDUPE_WINDOW_S) so that one delivered again changes
# nothing: redelivery comes within a restart. At most an hour: no key of ours outlives that
# but those docs/architecture.md lists.
DEDUPE_WINDOW_S: Final = 600
DedupeWindowS = Annotated[int, Field(ge=1, le=3600)]
# Retention (`retain`). Dead-lettered jobs are kept for a look: at most DEAD_MAX (the oldest
# go first), none older than DEAD_AGE_MS. A lane with no work and no new job for IDLE_MS is
# forgotten (the player's next guess makes it anew); one due whose room still has work in
# flight is looked at again RECHECK_MS later. The settings CODEMOJEX_LANES_DEAD_MAX,
# _DEAD_AGE_MS and _IDLE_MS; a retention of ten years (RETENTION_MS_MAX) is for ever.
DEAD_MAX: Final = 10_000
DEAD_AGE_MS: Final = 7 * _DAY_MS
IDLE_MS: Final = 7 * _DAY_MS
RECHECK_MS: Final = 60_000
RETENTION_MS_MAX: Final = 10 * 365 * _DAY_MS
# A claimed batch's lease (CODEMOJEX_LEASE_MS), a day at most; the pool's heartbeat extends it
# while the batch is handled.
LEASE_MS: Final = 30_000
LeaseMs = Annotated[int, Field(ge=1, le=_DAY_MS)]
DeadMax = Annotated[int, Field(ge=0, le=10_000_000)]
RetentionMs = Annotated[int, Field(ge=1, le=RETENTION_MS_MAX)]


def _lease(lease_ms: object) -> int:
    return within(cast(int, lease_ms), LeaseMs, "lease_ms", LaneError)  # within checks the type


def _park_cap_s(client: AnyRedis) -> float:
    """How long a BLPOP may block on this client: a little less than its socket timeout, if
    it has one, since a read that times out is taken for a dead connection. A client built
    without one has the connection class's default (5 s in redis-py 8), not none."""
    if isinstance(client, RedisCluster):
        kwargs = client.connection_kwargs
    else:
        kwargs = client.connection_pool.connection_kwargs
    timeout = kwargs["socket_timeout"] if "socket_timeout" in kwargs else _default_timeout()
    return float("inf") if timeout is None else max(0.1, float(timeout) - 1.0)


@functools.cache
def _default_timeout() -> float | None:
    param = inspect.signature(AbstractConnection.__init__).parameters.get("socket_timeout")
    if param is None or param.default is inspect.Parameter.empty:
        return None
    return cast(float | None, param.default)


class Lanes(AdminVerbs, OperatorVerbs):
    """A fair two-level queue (rooms, then players' lanes) in one Redis.

    `client` is a `redis.asyncio.Redis` or `redis.asyncio.cluster.RedisCluster` with
    `decode_responses=False`. Each verb is one script call whose declared keys (the queue
    prefix and its mint counter) carry the queue's `{q}` hash tag, so a cluster client sends
    it to the node owning that slot (and loads the script there again on NOSCRIPT, after a
    failover). `park` holds a pooled connection while it blocks, so the client's pool needs a
    connection per parked consumer on top of the busy ones.

    Retention (`retain`, run by the consumers' maintenance): at most `dead_max` dead jobs
    are kept, none older than `dead_age_ms`; a lane with no job and no enqueue for
    `lane_idle_ms` is forgotten.
    """

    def __init__(
        self,
        client: AnyRedis,
        queue: str = "cm",
        *,
        dedupe_window_ms: int = DEDUPE_WINDOW_S * 1000,
        batch: int = MAINTENANCE_BATCH,
        dead_max: int = DEAD_MAX,
        dead_age_ms: int = DEAD_AGE_MS,
        lane_idle_ms: int = IDLE_MS,
    ) -> None:
        super().__init__(client, queue)
        # Checked as the setting is, in whole seconds (a test's shorter window rounds up).
        seconds = -(-checked(dedupe_window_ms, "dedupe_window_ms", 1, 2**40) // 1000)
        within(seconds, DedupeWindowS, "the dedupe window in seconds", LaneError)
        self.dedupe_window_ms = dedupe_window_ms
        self.batch = checked(batch, "batch", 1, MAINTENANCE_BATCH_MAX)
        self.dead_max = within(dead_max, DeadMax, "dead_max", LaneError)
        self.dead_age_ms = within(dead_age_ms, RetentionMs, "dead_age_ms", LaneError)
        self.lane_idle_ms = within(lane_idle_ms, RetentionMs, "lane_idle_ms", LaneError)

    # -- plumbing -------------------------------------------------------------------------

    @staticmethod
    def _jobs(reply: list[Any], at: int = 0) -> list[Job]:
        """The jobs of a serve reply ({room, lane, ring length, 6 fields per job}) that
        starts at reply[at]."""
        if len(reply) <= at:
            return []
        room = reply[at].decode()
        lane = reply[at + 1].decode()
        return [job_of(room, lane, reply[i : i + 6]) for i in range(at + 3, len(reply), 6)]

    @staticmethod
    def _pairs(jobs: list[Job]) -> list[str | int]:
        args: list[str | int] = []
        for job in jobs:
            args.extend(token(job))
        return args

    # -- producer -------------------------------------------------------------------------

    async def enqueue(
        self,
        room: str,
        lane: str,
        payload: bytes,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        max_depth: int | None = None,
        dedupe_key: str | None = None,
        job_id: str | None = None,
    ) -> str:
        """Admit a job into `lane` of `room`; its id (the first job's id on a dedupe hit)."""
        K.check_room(room)
        K.check_lane(lane)
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise LaneError(f"payload must be bytes, got {type(payload).__name__}")
        checked(max_attempts, "max_attempts", 1, 1_000)
        if max_depth is not None:
            within(max_depth, admission.Depth, "max_depth", LaneError)
        digest = ""
        if dedupe_key is not None:
            if not isinstance(dedupe_key, str) or not dedupe_key:
                raise LaneError("dedupe_key must be a non-empty string")
            digest = K.dedupe_digest(dedupe_key)
        jid = ids.mint(ids.JOB) if job_id is None else K.check_job(job_id)
        reply = await self._call(
            "enqueue",
            room,
            lane,
            jid,
            bytes(payload),
            max_attempts,
            max_depth or 0,
            digest,
            self.dedupe_window_ms,
        )
        return str(reply[0].decode())

    async def admit(self, admissions: Sequence[Admission]) -> list[Admitted]:
        """Admit a batch in one round trip, each job under its own guards (`admission`): one
        `Admitted` per admission, in order. Raises LaneError (nothing written) when any of
        them is malformed."""
        if not admissions:
            return []
        records = admission.encode(admissions, self.keys)
        reply = await self._call("admit", self.dedupe_window_ms, ROOM.ceiling_max, *records)
        return admission.decode(reply)

    # -- consumer -------------------------------------------------------------------------

    async def claim(self, lease_ms: int) -> Job | None:
        """Lease the head of the next lane in the rota, or None when there is nothing."""
        jobs = self._jobs(await self._call("claim", _lease(lease_ms)))
        return jobs[0] if jobs else None

    async def wclaim(self, lease_ms: int) -> list[Job]:
        """Lease K = min(weight, depth, ceiling headroom) heads of one lane, in mint order."""
        return self._jobs(await self._call("wclaim", _lease(lease_ms)))

    async def ack(self, job: Job) -> bool:
        """Complete a job; False (and nothing changed) when its token is stale."""
        return bool(await self._call("ack", *token(job)))

    async def ack_many(self, jobs: list[Job]) -> int:
        """Complete a batch in one round trip; how many were acked (stale ones are not)."""
        pairs = self._pairs(jobs)  # every token checked before the first chunk is acked
        acked = 0
        for start in range(0, len(pairs), 2 * ACK_CHUNK):
            acked += await self._call("ack_many", *pairs[start : start + 2 * ACK_CHUNK])
        return acked

    async def ack_wclaim(self, done: list[Job], lease_ms: int) -> tuple[int, list[Job], bool]:
        """ack_many(done), then wclaim, in one round trip: how many of `done` were acked,
        the next batch, and whether the room ring still held work after it (a consumer
        woken from the wake list passes the wake on then). A consumer's loop pays one
        script call per batch this way instead of two; `done` may be empty."""
        lease = _lease(lease_ms)
        pairs = self._pairs(done)  # every token checked before anything is acked
        acked = 0
        if len(done) > ACK_CHUNK:
            acked = await self.ack_many(done[:-ACK_CHUNK])
            pairs = pairs[-2 * ACK_CHUNK :]
        reply = await self._call("ack_wclaim", lease, *pairs)
        return acked + reply[0], self._jobs(reply, 1), len(reply) > 1 and reply[3] > 0

    async def ack_wclaims(
        self, done: list[Job], lease_ms: int, wanted: int
    ) -> tuple[int, list[list[Job]], bool]:
        """ack_many(done), then up to `wanted` wclaims, in one round trip (a consumer pool's
        round: the finished batches of all its consumers, a batch for each that asks): how
        many of `done` were acked, the batches (fewer than `wanted` when the rota ran dry),
        and whether the room ring still held work after the last one."""
        lease = _lease(lease_ms)
        checked(wanted, "wanted", 0, ACK_CHUNK)
        pairs = self._pairs(done)  # every token checked before anything is acked
        acked = 0
        if len(done) > ACK_CHUNK:
            acked = await self.ack_many(done[:-ACK_CHUNK])
            pairs = pairs[-2 * ACK_CHUNK :]
        reply = await self._call("ack_wclaims", lease, wanted, *pairs)
        batches: list[list[Job]] = []
        at, end = 2, len(reply)
        while at < end:
            fields = reply[at]
            room = reply[at + 1].decode()
            lane = reply[at + 2].decode()
            first = at + 3
            batches.append(
                [job_of(room, lane, reply[i : i + 6]) for i in range(first, first + fields, 6)]
            )
            at = first + fields
        return acked + reply[0], batches, bool(batches) and reply[1] > 0

    async def retry(self, job: Job, delay_ms: int, error: str) -> str:
        """'delayed' (due after delay_ms) or 'dead' (attempts spent); 'stale' when fenced out."""
        job_id, attempts = token(job)
        checked(delay_ms, "delay_ms", 0, 2**40)
        reply = await self._call("retry", job_id, attempts, delay_ms, error[:MAX_ERROR_CHARS])
        return str(reply.decode())

    async def extend(self, job: Job, lease_ms: int) -> bool:
        return bool(await self._call("extend", *token(job), _lease(lease_ms)))

    async def reap(self) -> int:
        """Expired leases back to their lanes (or dead); how many."""
        return int(await self._call("reap", self.batch))

    async def promote(self) -> int:
        """Due delayed jobs back to their lanes; how many."""
        return int(await self._call("promote", self.batch))

    async def retain(self) -> tuple[int, int]:
        """One bounded batch (`batch` of each) of retention: dead jobs beyond `dead_max`,
        the oldest first, and those older than `dead_age_ms` are deleted with their hashes;
        lanes with nothing pending, delayed or in flight and no enqueue for `lane_idle_ms` are
        forgotten (an admin's weight or pause on one stays). (dead jobs deleted, lanes
        forgotten)."""
        dead, forgotten = await self._call(
            "retain",
            self.dead_max,
            self.dead_age_ms,
            self.lane_idle_ms,
            RECHECK_MS,
            self.batch,
        )
        return int(dead), int(forgotten)

    async def park(self, timeout_s: float) -> bool:
        """Block until a wake token arrives (True) or the timeout passes (False). A park longer
        than the client's socket timeout allows ends early (False), like a timeout."""
        timeout = min(timeout_s, _park_cap_s(self.client))
        return await self.client.blpop([self.keys.wake], timeout=timeout) is not None

    async def wake(self, n: int = 1) -> None:
        """Push `n` wake tokens (capped like the scripts' own)."""
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.lpush(self.keys.wake, *([b"1"] * max(1, min(n, 64))))
            pipe.ltrim(self.keys.wake, 0, 63)
            await pipe.execute()
