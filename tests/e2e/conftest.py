"""Fixtures of the end-to-end tests: one fresh Stack (stand-in + real bot) per test.

The database is the session's (`pg_database_url`), migrated with Alembic once and truncated
before each test; the queue is the test's own (`queue_name`), its keys dropped after.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Callable
from datetime import datetime

import pytest
import redis.asyncio as aioredis

from codemojex.bot import BotParts, CodemojexContext, build_application, running
from codemojex.db import make_engine, make_sessionmaker, upgrade
from codemojex.lanes import Lanes
from codemojex.outages import outage_of
from codemojex.standin import StandIn
from codemojex.values.clock import utcnow
from tests.conftest import REDIS_URL
from tests.e2e.harness import NAMES, Stack, stack_settings
from tests.helpers.support import drop_keys, wipe_tables


@pytest.fixture(scope="module")
def e2e_database_url(pg_database_url: str) -> str:
    upgrade(pg_database_url)  # sync fixture: Alembic's env runs an event loop of its own
    return pg_database_url


@contextlib.asynccontextmanager
async def open_stack(
    database_url: str,
    queue: str,
    *,
    clock: Callable[[], datetime] = utcnow,
    **settings_extra: object,
) -> AsyncIterator[Stack]:
    """A Stack; `clock`: the game's now (the bot's, and the in-process worker's); with the
    setting inline_mode, the stand-in's inline mode is on too."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(database_url)
    await wipe_tables(engine)
    standin = StandIn(inline_mode=bool(settings_extra.get("inline_mode")))
    await standin.start()
    for user_id, name in NAMES.items():
        standin.add_user(user_id, name)
    settings = stack_settings(standin, queue, database_url, **settings_extra)
    lanes = Lanes(redis, queue=queue)
    sessionmaker = make_sessionmaker(engine)
    app = build_application(
        settings.bot(),
        lanes=lanes,
        sessionmaker=sessionmaker,
        redis=redis,
        clock=clock,
        parts=BotParts(rng=random.Random(11)),
    )
    stack = Stack(standin, settings, app, redis, engine, sessionmaker, lanes, clock)

    async def record_error(update: object, context: CodemojexContext) -> None:
        assert context.error is not None
        if outage_of(context.error) not in ("redis", "postgres"):  # the door waits those out
            stack.errors.append(context.error)

    app.add_error_handler(record_error)
    try:
        async with running(app, poll_timeout=1) as stack.front:
            yield stack
    finally:
        await standin.stop()
        await drop_keys(redis, queue)
        await engine.dispose()
        await redis.aclose()


@pytest.fixture
async def stack(e2e_database_url: str, queue_name: str) -> AsyncIterator[Stack]:
    async with open_stack(e2e_database_url, queue_name) as value:
        yield value
        assert value.errors == [], f"the bot's handlers failed: {value.errors!r}"
