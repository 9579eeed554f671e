"""Shared fixtures: the real Redis and Postgres of the machine, and the embedded stand-ins.

Tests never FLUSHDB: each test gets its own queue name (so its own `emq:{q}:*` keys) and
the session gets its own Postgres database, so several runs can share one server.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

REDIS_URL = os.environ.get("CODEMOJEX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PG_ADMIN_URL = os.environ.get(
    "CODEMOJEX_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture
def queue_name() -> str:
    """A queue of its own for every test: its keys are `emq:{<name>}:*`."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
async def real_redis(queue_name: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        yield client
    finally:
        keys = [key async for key in client.scan_iter(match=f"emq:{{{queue_name}}}:*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture
async def fake_redis() -> AsyncIterator[aioredis.Redis]:
    import fakeredis

    client = fakeredis.FakeAsyncRedis()
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture(params=["real", "fake"])
def any_redis(request: pytest.FixtureRequest, queue_name: str) -> aioredis.Redis:
    """The same test on the real Redis and on fakeredis (the embedded default)."""
    # A sync fixture: pytest-asyncio cannot set up an async fixture from inside another one.
    client: aioredis.Redis = request.getfixturevalue(f"{request.param}_redis")
    return client


async def _admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """A fresh, empty Postgres database for this test session (asyncpg URL), dropped after."""
    name = "cmtest_" + uuid.uuid4().hex[:10]
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    try:
        yield f"{base}/{name}"
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
