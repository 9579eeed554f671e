"""Fixtures of the lanes tests: a Lanes facade on a fresh queue, and a keyspace dump."""

from __future__ import annotations

from typing import Any

import pytest

from codemojex.lanes import Lanes
from codemojex.lanes.keys import Keys
from codemojex.redistypes import AnyRedis


async def dump(client: AnyRedis, queue: str) -> dict[str, Any]:
    """Every key of the queue (suffix after `emq:{q}:`) with its contents, typed:
    string -> str, hash -> dict, list -> list, set -> set, zset -> [(member, score), ...].
    On a cluster, the client's SCAN visits every master (the queue's keys are all on the
    one owning the `{q}` slot)."""
    keys = Keys(queue)
    out: dict[str, Any] = {}
    c: Any = client  # redis-py types replies as bytes | str; this client returns bytes
    async for raw in c.scan_iter(match=keys.prefix + "*", count=1000):
        name = raw.decode()
        keys.parse(name)  # every key written must belong to the documented keyspace
        kind = (await c.type(raw)).decode()
        value: Any
        if kind == "none":  # deleted since the SCAN (a pool may be running)
            continue
        if kind == "string":
            value = await c.get(raw)
            if value is None:  # expired since the TYPE (a dedupe window)
                continue
            value = value.decode()
        elif kind == "hash":
            value = {k.decode(): v.decode() for k, v in (await c.hgetall(raw)).items()}
        elif kind == "list":
            value = [v.decode() for v in await c.lrange(raw, 0, -1)]
        elif kind == "set":
            value = {v.decode() for v in await c.smembers(raw)}
        elif kind == "zset":
            value = [(m.decode(), int(s)) for m, s in await c.zrange(raw, 0, -1, withscores=True)]
        else:  # pragma: no cover - the lanes write no other type
            raise AssertionError(f"unexpected type {kind} for {name}")
        out[name[len(keys.prefix) :]] = value
    return out


class Env:
    def __init__(self, client: AnyRedis, queue: str) -> None:
        self.client = client
        self.queue = queue
        self.keys = Keys(queue)
        self.lanes = Lanes(client, queue)

    async def dump(self) -> dict[str, Any]:
        return await dump(self.client, self.queue)

    async def expire(self, *job_ids: str) -> None:
        """Move leases into the past, deterministically (instead of sleeping)."""
        for n, job_id in enumerate(job_ids, start=1):
            await self.client.zadd(self.keys.active, {job_id: n}, xx=True)

    async def make_due(self, *job_ids: str) -> None:
        for n, job_id in enumerate(job_ids, start=1):
            await self.client.zadd(self.keys.delayed, {job_id: n}, xx=True)


@pytest.fixture
def env(any_redis: AnyRedis, queue_name: str) -> Env:
    return Env(any_redis, queue_name)


@pytest.fixture
def real_env(real_redis: AnyRedis, queue_name: str) -> Env:
    return Env(real_redis, queue_name)
