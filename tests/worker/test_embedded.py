"""The worker on the embedded defaults of `codemojex demo`: SQLite and the in-process Redis
stand-in (fakeredis), one process. Pacing, leases and claims must hold there too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import fakeredis
import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex.db import Guess, Outbox, make_engine, make_sessionmaker, upgrade
from codemojex.lanes import Lanes
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.worker.service import WorkerStats, WorkerTimings, run_worker
from tests.worker.conftest import enqueue_guess, make_table


@pytest.fixture
async def sqlite_sm(tmp_path: Path) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"
    await asyncio.to_thread(upgrade, url)
    engine = make_engine(url)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


@pytest.fixture
async def fake() -> AsyncIterator[aioredis.Redis]:
    client: aioredis.Redis = fakeredis.FakeAsyncRedis()
    try:
        yield client
    finally:
        await client.aclose()


async def test_worker_on_sqlite_and_fakeredis(
    sqlite_sm: async_sessionmaker[AsyncSession],
    fake: aioredis.Redis,
    standin: StandIn,
    bot: Bot,
) -> None:
    standin.enforce_rate_limits()
    lanes = Lanes(fake, queue="cm")
    table = await make_table(sqlite_sm, standin, -4001, users=4)
    await lanes.limit(table.room_id, 2)
    total = 0
    for i in range(3):
        for user in table.players:
            await enqueue_guess(lanes, standin, table, user, table.wrong_guess(i))
            total += 1
    settings = Settings(
        token=SecretStr(standin.token),
        bot_api_base_url=standin.base_url,
        queue="cm",
        concurrency=3,
        lease_ms=5000,
    )
    stats = WorkerStats()
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_worker(
            settings.worker(),
            lanes=lanes,
            sessionmaker=sqlite_sm,
            bot=bot,
            redis=fake,
            stop_event=stop,
            stats=stats,
            timings=WorkerTimings(sender_poll_s=0.2),
        )
    )
    deadline = time.monotonic() + 60
    try:
        while True:
            async with sqlite_sm() as s:
                recorded = (await s.execute(select(func.count()).select_from(Guess))).scalar_one()
                unsent = (
                    await s.execute(
                        select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
                    )
                ).scalar_one()
                await s.commit()
            if recorded == total and unsent == 0:
                break
            assert time.monotonic() < deadline, (recorded, unsent, stats.as_dict())
            assert not task.done()
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert stats.score.scored == total and stats.score.duplicates == 0
    assert standin.rate_violations == 0
    lines = [ln for m in standin.sent_messages(table.chat_id) for ln in m.text.split("\n")]
    assert sum("→" in ln for ln in lines) == total
