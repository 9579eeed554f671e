"""A guess counts by when the bot took it, not when it is scored: a room paused over a round's
deadline holds the round open for the guesses taken before it, which are scored on resume
(not "too late"); a guess taken after the deadline is too late; the round then closes once,
with several workers' timers at it. A pause longer than the hold ends the round as before.
On the real Redis, the real Postgres and the Bot API stand-in."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import timedelta

import redis.asyncio as aioredis
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex.db import Guess, Outbox, Round
from codemojex.game import texts
from codemojex.lanes import Lanes
from codemojex.locale import EN
from codemojex.standin import StandIn
from codemojex.values.clock import utcnow
from codemojex.worker.service import WorkerStats
from tests.worker.conftest import Table, enqueue_guess, make_table
from tests.worker.test_service import QUICK, Running, count, settings_for, wait_for


async def _deadline_in(sm: async_sessionmaker[AsyncSession], table: Table, s: float) -> None:
    """The round's time runs out `s` seconds from now."""
    async with sm() as session:
        await session.execute(
            update(Round)
            .where(Round.id == table.round_id)
            .values(expires_at=utcnow() + timedelta(seconds=s))
        )
        await session.commit()


async def _round(sm: async_sessionmaker[AsyncSession], table: Table) -> Round:
    async with sm() as session:
        rnd = await session.get(Round, table.round_id, populate_existing=True)
        await session.commit()
    assert rnd is not None
    return rnd


async def _guesses(sm: async_sessionmaker[AsyncSession]) -> dict[str, Guess]:
    async with sm() as session:
        rows = (await session.execute(select(Guess))).scalars().all()
        await session.commit()
    return {g.id: g for g in rows}


async def test_a_guess_taken_before_the_deadline_of_a_paused_room_is_scored_on_resume(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -3101, users=2)
    ann, bob = table.players
    await lanes.pause(table.room_id)  # an admin's /pause (or the ops page)
    in_time = await enqueue_guess(lanes, standin, table, ann, table.wrong_guess(1))
    await _deadline_in(sessionmaker, table, 1.0)
    settings = settings_for(standin, queue_name)
    stats = [WorkerStats(), WorkerStats()]
    async with AsyncExitStack() as workers:
        for each in stats:  # two workers: two round timers at the same round
            await workers.enter_async_context(
                Running(
                    settings=settings,
                    lanes=lanes,
                    sessionmaker=sessionmaker,
                    bot=bot,
                    redis=redis_r,
                    stats=each,
                )
            )
        await asyncio.sleep(2.5)  # the deadline passes while the room is paused
        rnd = await _round(sessionmaker, table)
        assert rnd.ended_at is None, "closed while a guess taken in time waited"
        too_late = await enqueue_guess(lanes, standin, table, bob, table.wrong_guess(2))
        await asyncio.sleep(1.0)
        assert (await _round(sessionmaker, table)).ended_at is None
        assert await _guesses(sessionmaker) == {}  # paused: nothing scored
        await lanes.resume(table.room_id)

        async def closed() -> bool:
            return (await _round(sessionmaker, table)).ended_at is not None

        await wait_for(closed, 20)
        reveal = await standin.wait_for_sent(
            lambda m: "".join(table.secret) in m.text, 15, chat_id=table.chat_id
        )
    guesses = await _guesses(sessionmaker)
    assert not guesses[in_time].late and guesses[in_time].attempt_no == 1
    assert guesses[too_late].late and guesses[too_late].attempt_no is None
    rnd = await _round(sessionmaker, table)
    assert rnd.end_reason == "timeout"
    assert sum(s.rounds_expired for s in stats) == 1  # closed once, by one of the two
    # what the room was told: the result before the reveal, and "too late" for Bob
    async with sessionmaker() as session:
        rows = (await session.execute(select(Outbox).order_by(Outbox.id))).scalars().all()
        await session.commit()
    kinds = [(row.kind, row.guess_id) for row in rows]
    assert kinds.index(("result", in_time)) < kinds.index(("reveal", None))
    late_text = texts.already_over(EN, table.wrong_guess(2))
    assert any(row.text == late_text for row in rows)
    assert reveal.chat_id == table.chat_id


async def test_a_pause_longer_than_the_hold_ends_the_round_as_before(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -3102, users=1)
    (ann,) = table.players
    await lanes.pause(table.room_id)
    waited = await enqueue_guess(lanes, standin, table, ann, table.wrong_guess(1))
    await _deadline_in(sessionmaker, table, 0.5)
    stats = WorkerStats()
    async with Running(
        settings=settings_for(standin, queue_name),
        lanes=lanes,
        sessionmaker=sessionmaker,
        bot=bot,
        redis=redis_r,
        stats=stats,
        timings=replace(QUICK, round_hold_s=1.5),
    ):

        async def closed() -> bool:
            return (await _round(sessionmaker, table)).ended_at is not None

        await wait_for(closed, 20)  # held 1.5 s past the deadline at most, then closed
        rnd = await _round(sessionmaker, table)
        assert rnd.ended_at is not None
        held_s = (rnd.ended_at - rnd.expires_at).total_seconds()
        assert 1.0 <= held_s < 10, held_s
        await lanes.resume(table.room_id)

        async def scored() -> bool:
            n = await count(sessionmaker, select(func.count()).select_from(Guess))
            return n == 1

        await wait_for(scored, 20)
    assert (await _guesses(sessionmaker))[waited].late
