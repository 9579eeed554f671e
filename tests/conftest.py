"""Shared fixtures: the real Redis and Postgres of the machine, the embedded stand-ins, and
a Redis Cluster of the session's own.

Tests never FLUSHDB: each test gets its own queue name (so its own `emq:{q}:*` keys) and
the session gets its own Postgres database, so several runs can share one server. The
cluster (`redis_cluster_url`) is three redis-server processes this session starts on free
loopback ports when a test first asks for it, and stops by PID at the end
(tests/helpers/redis_cluster.py); CODEMOJEX_TEST_REDIS_CLUSTER_URL points the tests at an existing
cluster instead.

`make test` runs three processes (pytest-xdist, `--dist loadfile`), each test file whole in
one of them (its module-scoped fixtures made once), in an order pytest-randomly shuffles.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings
from redis.asyncio.cluster import RedisCluster

from codemojex.outages import OUTAGES
from codemojex.runtime import GatedRedisCluster
from codemojex.values.redistypes import AnyRedis
from tests.helpers import redis_cluster
from tests.helpers.support import drop_keys, free_port

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

REDIS_URL = os.environ.get("CODEMOJEX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PG_ADMIN_URL = os.environ.get(
    "CODEMOJEX_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


TESTS = Path(__file__).parent


@pytest.fixture(autouse=True)
def _no_outage_open() -> None:
    """OUTAGES is process-wide: an outage a test left open would swallow the next test's
    first line about it."""
    OUTAGES.reset()


@pytest.fixture
async def redis_down() -> AsyncIterator[aioredis.Redis]:
    """A client of a Redis that is not there: every call is an outage."""
    down = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    yield down
    await down.aclose()


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
        await drop_keys(client, queue_name)
        await client.aclose()


@pytest.fixture
async def fake_redis() -> AsyncIterator[aioredis.Redis]:
    import fakeredis

    client = fakeredis.FakeAsyncRedis()
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis Cluster of three masters for this session (started on first use)."""
    url = os.environ.get("CODEMOJEX_TEST_REDIS_CLUSTER_URL")
    if url:
        yield url
        return
    why = redis_cluster.available()
    if why is not None:
        pytest.skip(f"no Redis Cluster for the tests: {why}")
    cluster = redis_cluster.LocalCluster(tmp_path_factory.mktemp("redis-cluster"))
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
async def cluster_redis(redis_cluster_url: str, queue_name: str) -> AsyncIterator[RedisCluster]:
    """A client of the session's Redis Cluster, built as the runtime builds it
    (CODEMOJEX_REDIS_CLUSTER=true), cleaned after the test."""
    client = GatedRedisCluster.from_url(redis_cluster_url, max_in_flight=200)
    try:
        yield client
    finally:
        await drop_keys(client, queue_name)
        await client.aclose()


@pytest.fixture(params=["real", "fake", "cluster"])
def any_redis(request: pytest.FixtureRequest, queue_name: str) -> AnyRedis:
    """The same test on the real Redis, on fakeredis (the embedded default) and on a
    Redis Cluster."""
    # A sync fixture: pytest-asyncio cannot set up an async fixture from inside another one.
    client: AnyRedis = request.getfixturevalue(f"{request.param}_redis")
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
