"""The posting tests share the worker tests' fixtures: Redis clients that drop the test's
`cmx:{q}:*` and `emq:{q}:*` keys, the migrated Postgres, the Bot API stand-in and a bot on it;
and a client of a Redis that is not there."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
import redis.asyncio as aioredis

from tests.support import free_port
from tests.worker.conftest import (
    bot,
    dead_sessionmaker,
    redis_any,
    redis_r,
    redis_rc,
    scorers,
    sessionmaker,
    standin,
    worker_pg_url,
)


@pytest_asyncio.fixture
async def redis_down() -> AsyncIterator[aioredis.Redis]:
    """A client of a Redis that is not there: every call is an outage."""
    down = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    yield down
    await down.aclose()


__all__ = [
    "bot",
    "dead_sessionmaker",
    "redis_any",
    "redis_r",
    "redis_rc",
    "scorers",
    "sessionmaker",
    "standin",
    "worker_pg_url",
]
