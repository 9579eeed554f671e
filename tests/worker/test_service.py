"""run_worker: the consumer pool with the ScoreWorker, the sender and the round timer, end to
end on the real Redis, the real Postgres and the Bot API stand-in."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta

import redis.asyncio as aioredis
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex import usecases
from codemojex.db import Guess, Outbox, Round
from codemojex.lanes import Lanes
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.values.clock import utcnow
from codemojex.worker.service import WorkerStats, WorkerTimings, run_worker
from tests.worker.conftest import enqueue_guess, make_table


def settings_for(standin: StandIn, queue: str) -> Settings:
    return Settings(
        token=SecretStr(standin.token),
        bot_api_base_url=standin.base_url,
        bot_api_base_file_url=standin.base_file_url,
        queue=queue,
        concurrency=4,
        lease_ms=5_000,
    )


async def count(sm: async_sessionmaker[AsyncSession], stmt: object) -> int:
    async with sm() as s:
        n = (await s.execute(stmt)).scalar_one()  # type: ignore[call-overload]
        await s.commit()
    return int(n)


async def wait_for(cond: Callable[[], Awaitable[bool]], limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not await cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


# The round timer and the sender look often: a test sees a timeout or a post within seconds.
QUICK = WorkerTimings(timer_s=0.5, sender_poll_s=0.2)


class Running:
    """run_worker in a task, stopped through its stop_event."""

    def __init__(
        self,
        *,
        settings: Settings,
        lanes: Lanes,
        sessionmaker: async_sessionmaker[AsyncSession],
        bot: Bot,
        redis: aioredis.Redis,
        stats: WorkerStats | None = None,
        timings: WorkerTimings = QUICK,
    ) -> None:
        self.stop = asyncio.Event()
        self.settings = settings
        self.parts = (lanes, sessionmaker, bot, redis)
        self.stats_in = stats
        self.timings = timings
        self.task: asyncio.Task[WorkerStats] | None = None

    async def __aenter__(self) -> Running:
        lanes, sessionmaker, bot, redis = self.parts
        self.task = asyncio.create_task(
            run_worker(
                self.settings.worker(),
                lanes=lanes,
                sessionmaker=sessionmaker,
                bot=bot,
                redis=redis,
                stop_event=self.stop,
                stats=self.stats_in,
                timings=self.timings,
            )
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 30)

    @property
    def stats(self) -> WorkerStats:
        assert self.task is not None
        return self.task.result()


async def test_guesses_scored_posted_and_round_won(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    standin.enforce_rate_limits()
    lanes = Lanes(redis_r, queue=queue_name)
    quiet = await make_table(sessionmaker, standin, -3001, users=2, seed=3)
    busy = await make_table(sessionmaker, standin, -3002, users=5, seed=4)
    ann = next(iter(quiet.players))
    expected = 0
    for n, user in enumerate(busy.players):
        for i in range(4):
            await enqueue_guess(lanes, standin, busy, user, busy.wrong_guess(n * 10 + i))
            expected += 1
    await enqueue_guess(lanes, standin, quiet, ann, quiet.wrong_guess())
    await enqueue_guess(lanes, standin, quiet, ann, quiet.secret)
    expected += 2

    stats = WorkerStats()
    async with Running(
        settings=settings_for(standin, queue_name),
        lanes=lanes,
        sessionmaker=sessionmaker,
        bot=bot,
        redis=redis_r,
        stats=stats,
    ):
        await wait_for(lambda: _all_done(sessionmaker, expected))
    assert stats.score.scored == expected and stats.score.won == 1
    assert stats.pool.acked == expected and stats.pool.dead == 0
    assert standin.rate_violations == 0, (
        standin.violations,
        [(m.chat_id, m.ts) for m in standin.sent_messages()],
    )
    # Every outbox row went out once; the busy room's 20 results came in a few messages.
    async with sessionmaker() as s:
        rows = list((await s.execute(select(Outbox))).scalars())
        await s.commit()
    assert all(r.sent_message_id is not None for r in rows)
    busy_posts = standin.sent_messages(busy.chat_id)
    assert len(busy_posts) < 20
    assert stats.sender.rows_sent == len(rows)
    win = await standin.wait_for_sent(lambda m: "".join(quiet.secret) in m.text, 1)
    assert win.chat_id == quiet.chat_id
    assert await redis_r.zcard(f"emq:{{{queue_name}}}:active") == 0


async def _all_done(sm: async_sessionmaker[AsyncSession], guesses: int) -> bool:
    recorded = await count(sm, select(func.count()).select_from(Guess))
    unsent = await count(
        sm, select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
    )
    return recorded >= guesses and unsent == 0


async def test_round_timeout_reveals_the_secret(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    chat = -3003
    standin.add_group(chat, "slow room")
    async with sessionmaker() as s:
        room = await usecases.ensure_room(
            sessionmaker, chat, "slow", default_ceiling=2, round_timeout_s=60
        )
    async with sessionmaker() as s:
        rnd = await usecases.start_round(
            sessionmaker, room.id, random.Random(5), now=utcnow() - timedelta(seconds=120)
        )
    async with Running(
        settings=settings_for(standin, queue_name),
        lanes=Lanes(redis_r, queue=queue_name),
        sessionmaker=sessionmaker,
        bot=bot,
        redis=redis_r,
    ) as running:
        reveal = await standin.wait_for_sent(lambda m: rnd.secret in m.text, 15, chat_id=chat)
    assert reveal.chat_id == chat
    assert running.stats.rounds_expired == 1
    async with sessionmaker() as s:
        closed = await s.get(Round, rnd.id)
        await s.commit()
    assert closed is not None and closed.end_reason == "timeout"


async def test_database_outage_loses_nothing(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    dead_sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """A worker whose Postgres is unreachable acks nothing and kills nothing; once a worker
    with a database runs, every guess is recorded exactly once."""
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -3004, users=3)
    job_ids = [
        await enqueue_guess(lanes, standin, table, user, table.wrong_guess(i))
        for i, user in enumerate(table.players)
    ]
    settings = settings_for(standin, queue_name)
    down = WorkerStats()
    async with Running(
        settings=settings,
        lanes=lanes,
        sessionmaker=dead_sessionmaker,
        bot=bot,
        redis=redis_r,
        stats=down,
        timings=replace(QUICK, score_hold_s=0.2),
    ):
        await wait_for(lambda: _retried(down, len(job_ids)), 20)
    assert down.pool.acked == 0 and down.pool.dead == 0
    assert down.score.scored == 0
    assert await redis_r.zcard(f"emq:{{{queue_name}}}:dead") == 0

    up = WorkerStats()
    async with Running(
        settings=settings,
        lanes=lanes,
        sessionmaker=sessionmaker,
        bot=bot,
        redis=redis_r,
        stats=up,
    ):
        await wait_for(lambda: _all_done(sessionmaker, len(job_ids)), 30)
    async with sessionmaker() as s:
        recorded = sorted(g.id for g in (await s.execute(select(Guess))).scalars())
        await s.commit()
    assert recorded == sorted(job_ids)
    assert up.score.scored == len(job_ids)


async def _retried(stats: WorkerStats, n: int) -> bool:
    return stats.pool.retried >= n


async def test_stop_finishes_and_acks_what_is_in_hand(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -3005, users=4)
    await lanes.limit(table.room_id, 4)
    total = 0
    for i in range(10):
        for user in table.players:
            await enqueue_guess(lanes, standin, table, user, table.wrong_guess(i))
            total += 1
    stats = WorkerStats()
    async with Running(
        settings=settings_for(standin, queue_name),
        lanes=lanes,
        sessionmaker=sessionmaker,
        bot=bot,
        redis=redis_r,
        stats=stats,
        timings=replace(QUICK, drain_s=20.0),
    ):
        await wait_for(lambda: _some_scored(stats), 20)
    # Stopped mid-backlog: nothing left leased, everything scored was acked, the rest waits.
    assert await redis_r.zcard(f"emq:{{{queue_name}}}:active") == 0
    assert stats.pool.acked == stats.score.scored
    recorded = await count(sessionmaker, select(func.count()).select_from(Guess))
    assert recorded == stats.score.scored
    depths = [
        await redis_r.zcard(f"emq:{{{queue_name}}}:g:{lane}:pending")
        for lane in table.players.values()
    ]
    pending = sum(depths)
    assert pending == total - recorded
    # drain_s: the results of what was scored were posted before run_worker returned.
    unsent = select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
    assert await count(sessionmaker, unsent) == 0


async def _some_scored(stats: WorkerStats) -> bool:
    return stats.score.scored >= 3
