"""The baseline: a plain, minimal, reliable FIFO on one Redis list.

What a user would write instead of the lanes: one list of job ids, a hash per job, a lease
zset and a fencing counter, one claim script and one ack script per job, on the same
redis-py asyncio client. No rooms, no rings, no ceilings: whoever enqueues most is served
most. It is deliberately as cheap as a reliable queue gets, so the lanes are compared with
the fastest honest alternative, not a straw man.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

_ENQUEUE = """
redis.call('HSET', ARGV[1] .. ARGV[2], 'payload', ARGV[3], 'attempts', 0)
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('LPUSH', KEYS[2], '1')
redis.call('LTRIM', KEYS[2], 0, 63)
return 1
"""

# KEYS: pending, active. ARGV: job key prefix, lease ms.
_CLAIM = """
local id = redis.call('LPOP', KEYS[1])
if not id then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local jk = ARGV[1] .. id
local attempts = redis.call('HINCRBY', jk, 'attempts', 1)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), id)
return {id, redis.call('HGET', jk, 'payload'), attempts}
"""

# KEYS: active. ARGV: job key prefix, id, fencing token.
_ACK = """
local jk = ARGV[1] .. ARGV[2]
if redis.call('HGET', jk, 'attempts') ~= ARGV[3] then return 0 end
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('DEL', jk)
return 1
"""


@dataclass(frozen=True, slots=True)
class FifoJob:
    id: str
    payload: bytes
    attempts: int


class Fifo:
    """Keys `bfifo:{<queue>}:*` (delete them with `bfifo:{<queue>}:*`)."""

    def __init__(self, client: aioredis.Redis, queue: str) -> None:
        self._client = client
        base = f"bfifo:{{{queue}}}:"
        self.pattern = base + "*"
        self._pending = base + "pending"
        self._active = base + "active"
        self.wake_key = base + "wake"
        self._job_prefix = base + "job:"
        self._enqueue = client.register_script(_ENQUEUE)
        self._claim = client.register_script(_CLAIM)
        self._ack = client.register_script(_ACK)

    async def enqueue(self, job_id: str, payload: bytes) -> None:
        await self._enqueue(
            keys=[self._pending, self.wake_key], args=[self._job_prefix, job_id, payload]
        )

    async def enqueue_many(self, jobs: list[tuple[str, bytes]]) -> None:
        """Preload in one pipeline (one script call per job, one round trip per batch)."""
        sha = await self._client.script_load(_ENQUEUE)
        pipe = self._client.pipeline(transaction=False)
        for job_id, payload in jobs:
            pipe.evalsha(sha, 2, self._pending, self.wake_key, self._job_prefix, job_id, payload)
        await pipe.execute()

    async def claim(self, lease_ms: int) -> FifoJob | None:
        row = await self._claim(
            keys=[self._pending, self._active], args=[self._job_prefix, lease_ms]
        )
        if row is None:
            return None
        return FifoJob(row[0].decode(), row[1], int(row[2]))

    async def ack(self, job: FifoJob) -> bool:
        done = await self._ack(keys=[self._active], args=[self._job_prefix, job.id, job.attempts])
        return bool(done)

    async def load_scripts(self) -> None:
        for script in (self._enqueue, self._claim, self._ack):
            await self._client.script_load(script.script)
