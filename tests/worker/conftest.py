"""Fixtures of the worker tests.

Redis clients here drop this test's `cmx:{<queue>}:*` keys (pacing, sender leases) and
`emq:{<queue>}:*` keys (lanes) afterwards, never anything else on the shared server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from tests.conftest import REDIS_URL


async def _drop_keys(client: aioredis.Redis, queue: str) -> None:
    for pattern in (f"cmx:{{{queue}}}:*", f"emq:{{{queue}}}:*"):
        keys = [key async for key in client.scan_iter(match=pattern, count=1000)]
        if keys:
            await client.delete(*keys)


@pytest.fixture(params=["real", "fake"])
async def redis_any(
    request: pytest.FixtureRequest, queue_name: str
) -> AsyncIterator[aioredis.Redis]:
    """The real Redis and fakeredis (the embedded demo's), cleaned after the test."""
    if request.param == "real":
        client: aioredis.Redis = aioredis.Redis.from_url(REDIS_URL)
    else:
        import fakeredis

        client = fakeredis.FakeAsyncRedis()
    try:
        yield client
    finally:
        await _drop_keys(client, queue_name)
        await client.aclose()


@pytest.fixture
async def redis_r(queue_name: str) -> AsyncIterator[aioredis.Redis]:
    """The real Redis, cleaned after the test."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        yield client
    finally:
        await _drop_keys(client, queue_name)
        await client.aclose()
