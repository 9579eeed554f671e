"""Builds the shared parts a process needs (Redis client, database, lanes) from Settings.

Nothing here runs at import time; each `open_*` is called by the CLI or the demo.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex.db import make_engine, make_sessionmaker
from codemojex.lanes import Lanes
from codemojex.settings import Settings


def redis_client(settings: Settings) -> aioredis.Redis:
    """The real Redis when a URL is configured, else an in-process stand-in (one process only)."""
    if settings.redis_url:
        # Parked consumers hold a connection each while they BLPOP the wake list, so the pool
        # must be larger than the number of consumers plus the bot's and sender's traffic.
        # And blocking: the sender drains every chat with rows waiting at once, and a pool
        # that raises "Too many connections" when they all speak together fails claims, acks
        # and the sender's posted-markers (the soak with 200 rooms saw over a thousand);
        # the surplus now waits for a free connection instead.
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=max(64, 4 * settings.concurrency + 16),
            timeout=10,
        )
        return aioredis.Redis.from_pool(pool)
    import fakeredis

    client: aioredis.Redis = fakeredis.FakeAsyncRedis()
    return client


@dataclass
class Runtime:
    settings: Settings
    redis: aioredis.Redis
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    lanes: Lanes


@asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    redis = redis_client(settings)
    engine = make_engine(settings.database_url)
    try:
        yield Runtime(
            settings=settings,
            redis=redis,
            engine=engine,
            sessionmaker=make_sessionmaker(engine),
            lanes=Lanes(redis, queue=settings.queue),
        )
    finally:
        await engine.dispose()
        await redis.aclose()
