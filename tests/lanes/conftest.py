"""Fixtures of the lanes tests: a Lanes facade on a fresh queue, and a keyspace dump."""

from __future__ import annotations

from typing import Any

import pytest

from codemojex.lanes import Lanes
from codemojex.lanes.keys import Keys
from codemojex.values.redistypes import AnyRedis
from tests.helpers.support import dump


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
