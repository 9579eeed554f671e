"""The worker's side of the daily code, on the real Redis lanes and the real Postgres: a
daily's guesses come through the player's lane like any guess, the finish goes onto the world
board once committed (again when its guess comes back after the board was out), the card gets
its Share button when inline mode is on, and old dailies are trimmed."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import DailyRecord, DailyResult, Outbox
from codemojex.game import daily
from codemojex.lanes import Lanes, Retry
from codemojex.state.board import DailyBoard
from codemojex.values import ids
from codemojex.values.clock import utcnow
from codemojex.values.jobs import GuessJob
from codemojex.values.types import KIND_CARD
from codemojex.worker.retention import DailyTrim
from codemojex.worker.score import ScoreWorker
from codemojex.worker.service import Expiry, expire_rounds_once
from tests.helpers.dailies import daily_round, misses, open_for, player_of
from tests.helpers.lanes import claim_all

ALICE, BOB = 9101, 9102


async def enqueue_daily(
    lanes: Lanes,
    sm: async_sessionmaker[AsyncSession],
    user: int,
    guesses: list[tuple[str, ...]],
    day: datetime | None = None,
) -> None:
    """What the guess intake does with a daily's guesses (of `day`'s daily: today's unless
    given): jobs in the player's lane, under their private chat's room."""
    room_id, player_id = await player_of(sm, user)
    rnd = await daily_round(sm, user, day or utcnow())
    for n, emojis in enumerate(guesses):
        payload = GuessJob(round_id=rnd.id, message_id=n + 1, emojis=emojis).encode()
        await lanes.enqueue(room_id, player_id, payload, job_id=ids.mint(ids.JOB), max_attempts=20)


async def test_a_daily_played_through_the_lanes_lands_on_the_board(
    redis_r: aioredis.Redis, queue_name: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    board = DailyBoard(redis_r, queue_name)
    now = utcnow()
    for user in (ALICE, BOB):
        await open_for(sessionmaker, user, now, random.Random(user))
        room_id, _ = await player_of(sessionmaker, user)
        await lanes.limit(room_id, 4)
    rnd = await daily_round(sessionmaker, ALICE, now)
    await enqueue_daily(lanes, sessionmaker, ALICE, [*misses(rnd, 2), rnd.secret_emojis])
    await enqueue_daily(lanes, sessionmaker, BOB, [rnd.secret_emojis])
    worker = ScoreWorker(sessionmaker, on_finished=board.finished, share=True)
    while batches := await claim_all(lanes):
        for batch in batches:
            await worker(batch)
            await lanes.ack_many(batch)
    assert worker.stats.scored == 4 and worker.stats.won == 2
    assert await board.top(daily.day_of(now), 10) == [(BOB, 1), (ALICE, 3)]
    async with sessionmaker() as session:
        cards = list(
            (await session.execute(select(Outbox).where(Outbox.kind == KIND_CARD))).scalars()
        )
        await session.commit()
    assert sorted(c.chat_id for c in cards) == [ALICE, BOB]
    assert all(c.markup is not None and "switch_inline_query" in c.markup for c in cards)


async def test_a_finish_the_board_missed_is_told_again_when_its_guess_comes_back(
    redis_r: aioredis.Redis,
    redis_down: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    now = utcnow()
    await open_for(sessionmaker, ALICE, now)
    rnd = await daily_round(sessionmaker, ALICE, now)
    await enqueue_daily(lanes, sessionmaker, ALICE, [rnd.secret_emojis])
    [batch] = await claim_all(lanes)
    # the finish is committed, but the board's Redis is out: the batch is handed back
    out = ScoreWorker(sessionmaker, on_finished=DailyBoard(redis_down, queue_name).finished)
    with pytest.raises(Retry):
        await out(batch)
    assert out.stats.retries == 1
    async with sessionmaker() as session:
        result = await session.get(DailyResult, (daily.day_of(now), ALICE))
        await session.commit()
    assert result is not None and result.cracked
    # it comes back: recorded already (a duplicate), its finish goes onto the board now
    board = DailyBoard(redis_r, queue_name)
    back = ScoreWorker(sessionmaker, on_finished=board.finished)
    await back(batch)
    assert back.stats.duplicates == 1 and back.stats.scored == 0
    assert await board.top(daily.day_of(now), 10) == [(ALICE, 1)]


async def test_the_round_timer_closes_a_daily_at_its_midnight_and_its_waiting_crack_counts(
    redis_r: aioredis.Redis, queue_name: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    board = DailyBoard(redis_r, queue_name)
    # The game's clock (the worker's) a day ahead of the lanes' (Redis's, the real one): a
    # guess enqueued now is taken before the midnight of the day it is played on.
    noon = daily.day_start(daily.day_of(utcnow()) + timedelta(days=1)) + timedelta(hours=12)
    await open_for(sessionmaker, ALICE, noon)
    room_id, _ = await player_of(sessionmaker, ALICE)
    await lanes.limit(room_id, 4)
    rnd = await daily_round(sessionmaker, ALICE, noon)
    await enqueue_daily(lanes, sessionmaker, ALICE, [rnd.secret_emojis], noon)
    midnight = daily.next_code_at(noon)
    after = midnight + timedelta(seconds=1)
    # the timer closes the daily at once: not held, though its crack waits in the lane
    expiry = await expire_rounds_once(sessionmaker, lanes, clock=lambda: after)
    assert expiry == Expiry(closed=1, held=0)
    worker = ScoreWorker(sessionmaker, on_finished=board.finished, clock=lambda: after)
    for batch in await claim_all(lanes):
        await worker(batch)
        await lanes.ack_many(batch)
    assert worker.stats.won == 1 and worker.stats.late == 0
    async with sessionmaker() as session:
        result = await session.get(DailyResult, (noon.date(), ALICE))
        record = await session.get(DailyRecord, ALICE)
        await session.commit()
    assert result is not None and result.cracked
    assert result.finished_at is not None and result.finished_at < midnight
    assert record is not None and (record.streak, record.last_cracked) == (1, noon.date())
    assert await board.top(noon.date(), 10) == [(ALICE, 1)]


async def test_old_dailies_are_trimmed_by_the_workers(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    today = datetime.now(UTC)
    for days_ago in (40, 31, 30, 1):
        await open_for(sessionmaker, ALICE, today - timedelta(days=days_ago))
    clock = [0.0]
    trim = DailyTrim(30, batch=1, every_s=60, clock=lambda: clock[0])
    assert await trim.tick(sessionmaker) == 1  # a full batch: the next one is due at once
    assert await trim.tick(sessionmaker) == 1
    assert await trim.tick(sessionmaker) == 0  # nothing older: the next look in a minute
    clock[0] = 59
    assert await trim.tick(sessionmaker) == 0
    async with sessionmaker() as session:
        kept = (await session.execute(select(func.count()).select_from(DailyResult))).scalar()
        await session.commit()
    assert kept == 2  # 30 days ago is kept, 31 is not
    # on the game's clock (the worker's, which a test moves): two days on, that one goes too
    clock[0] = 120
    assert await trim.tick(sessionmaker, today + timedelta(days=2)) == 1
