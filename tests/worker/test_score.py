"""The ScoreWorker on the real Redis lanes and the real Postgres (through the migrations)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import Guess, Outbox, Round
from codemojex.lanes import Lanes, Retry
from codemojex.outages import is_outage
from codemojex.standin import StandIn
from codemojex.worker.score import ScoreWorker
from tests.helpers.lanes import claim_all
from tests.worker.conftest import enqueue_guess, make_table


async def guesses(sm: async_sessionmaker[AsyncSession]) -> list[Guess]:
    async with sm() as s:
        rows = list((await s.execute(select(Guess).order_by(Guess.scored_at, Guess.id))).scalars())
        await s.commit()
    return rows


async def outbox(sm: async_sessionmaker[AsyncSession]) -> list[Outbox]:
    async with sm() as s:
        rows = list((await s.execute(select(Outbox).order_by(Outbox.id))).scalars())
        await s.commit()
    return rows


async def test_batch_of_one_player_scored_in_mint_order(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1001)
    ann = next(iter(table.players))
    await lanes.limit(table.room_id, 10)
    await lanes.weight(table.players[ann], 5)
    job_ids = [
        await enqueue_guess(lanes, standin, table, ann, table.wrong_guess(i)) for i in range(4)
    ]
    worker = ScoreWorker(sessionmaker)
    [batch] = await claim_all(lanes)
    assert [j.id for j in batch] == job_ids
    await worker(batch)
    assert await lanes.ack_many(batch) == 4

    recorded = {g.id: g for g in await guesses(sessionmaker)}
    assert [recorded[j].attempt_no for j in job_ids] == [1, 2, 3, 4]
    results = [r for r in await outbox(sessionmaker) if r.guess_id is not None]
    assert sorted(r.guess_id for r in results if r.guess_id) == sorted(job_ids)
    assert all(r.chat_id == table.chat_id and r.reply_to_message_id for r in results)
    assert worker.stats.scored == 4 and worker.stats.duplicates == 0
    assert worker.stats.flushes == 1  # the batch was one transaction


async def test_redelivered_job_counts_once(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1002)
    ann = next(iter(table.players))
    job_id = await enqueue_guess(lanes, standin, table, ann, table.wrong_guess())
    worker = ScoreWorker(sessionmaker)
    [batch] = await claim_all(lanes)
    await worker(batch)
    # The worker died before its ack: the lease runs out and the job is served again (reap).
    # Same effect, without waiting: handle the same batch again, and a fresh copy of the job.
    await worker(batch)
    await lanes.ack_many(batch)
    await enqueue_guess(lanes, standin, table, ann, table.wrong_guess(), job_id=job_id)
    [again] = await claim_all(lanes)
    await worker(again)
    await lanes.ack_many(again)

    assert [g.id for g in await guesses(sessionmaker)] == [job_id]
    assert len([r for r in await outbox(sessionmaker) if r.guess_id == job_id]) == 1
    assert worker.stats.scored == 1
    assert worker.stats.duplicates == 2


async def test_concurrent_copies_of_one_job_count_once(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    """Two consumers holding the same job at once (a lease that expired under the first)."""
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1003)
    ann = next(iter(table.players))
    await enqueue_guess(lanes, standin, table, ann, table.wrong_guess())
    [batch] = await claim_all(lanes)
    w1, w2 = ScoreWorker(sessionmaker), ScoreWorker(sessionmaker)
    await asyncio.gather(w1(batch), w2(batch))
    assert len(await guesses(sessionmaker)) == 1
    assert w1.stats.scored + w2.stats.scored == 1
    assert w1.stats.duplicates + w2.stats.duplicates == 1


async def test_postgres_unreachable_raises_retry_and_nothing_is_acked(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    dead_sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1004)
    ann = next(iter(table.players))
    job_id = await enqueue_guess(lanes, standin, table, ann, table.wrong_guess())
    [batch] = await claim_all(lanes)

    down = ScoreWorker(dead_sessionmaker, hold_s=0.3)
    with pytest.raises(Retry) as info:
        await down(batch)
    assert info.value.delay_ms > 0
    assert is_outage(info.value.__cause__ or info.value)
    assert down.stats.retries == 1 and down.stats.scored == 0
    # Not acked: the job is still leased, nothing of it is in the database.
    assert await redis_r.zscore(f"emq:{{{queue_name}}}:active", job_id) is not None
    assert await guesses(sessionmaker) == []

    # What the pool does with Retry; the job comes back and is recorded once the DB is up.
    assert await lanes.retry(batch[0], 0, "database unavailable") == "delayed"
    await lanes.promote()
    [again] = await claim_all(lanes)
    assert again[0].id == job_id and again[0].attempts == 2
    up = ScoreWorker(sessionmaker)
    await up(again)
    await lanes.ack_many(again)
    assert [g.id for g in await guesses(sessionmaker)] == [job_id]


async def test_guess_for_a_closed_round_is_answered(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1005)
    ann, bob = list(table.players)[:2]
    await enqueue_guess(lanes, standin, table, ann, table.secret)
    late_id = await enqueue_guess(lanes, standin, table, bob, table.wrong_guess())
    worker = ScoreWorker(sessionmaker)
    for batch in await claim_all(lanes):
        await worker(batch)
        await lanes.ack_many(batch)
    assert worker.stats.won == 1 and worker.stats.late == 1
    rows = await outbox(sessionmaker)
    late_rows = [r for r in rows if r.guess_id == late_id]
    assert len(late_rows) == 1 and late_rows[0].kind == "late"
    assert late_rows[0].reply_to_message_id is not None
    # The secret appears in the win announcement only, never in the late answer's lookup key.
    async with sessionmaker() as s:
        scored = (await s.execute(select(func.count()).select_from(Guess))).scalar_one()
        await s.commit()
    assert scored == 2


async def test_payload_that_is_not_a_guess_changes_nothing(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1006)
    other = await make_table(sessionmaker, standin, -1007, seed=2)
    ann = next(iter(table.players))
    player = table.players[ann]
    await lanes.enqueue(table.room_id, player, b"{not json")
    # A guess naming another room's round, and one with an emoji off the palette.
    bad_round = table.__class__(**{**table.__dict__, "round_id": other.round_id})
    await enqueue_guess(lanes, standin, bad_round, ann, table.wrong_guess())
    off_palette = ("🦄",) * len(table.secret)
    await enqueue_guess(lanes, standin, table, ann, off_palette)
    worker = ScoreWorker(sessionmaker)
    for batch in await claim_all(lanes):
        await worker(batch)
        await lanes.ack_many(batch)
    assert worker.stats.rejected == 3 and worker.stats.scored == 0
    assert await guesses(sessionmaker) == []
    assert "🦄" not in caplog.text
    assert "".join(table.secret) not in caplog.text


async def test_batches_in_hand_at_once_are_recorded_in_few_transactions(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    """Group commit: the batches of many consumers (one guess each, from four rooms) handled
    at once share transactions, and every guess is recorded exactly once."""
    lanes = Lanes(redis_r, queue=queue_name)
    tables = [await make_table(sessionmaker, standin, -1100 - n, seed=n) for n in range(4)]
    job_ids = [
        await enqueue_guess(lanes, standin, table, user, table.wrong_guess(k))
        for table in tables
        for k, user in enumerate(table.players)
    ]
    batches = await claim_all(lanes)
    assert len(batches) == len(job_ids)  # weight 1: one guess per claim
    worker = ScoreWorker(sessionmaker)
    await asyncio.gather(*(worker(batch) for batch in batches))
    assert worker.stats.scored == len(job_ids)
    # The first batch flushes alone; everything that arrived while it ran goes in the next.
    assert worker.stats.flushes <= 3
    assert sorted(g.id for g in await guesses(sessionmaker)) == sorted(job_ids)
    rows = [r for r in await outbox(sessionmaker) if r.kind == "result"]
    assert sorted(r.guess_id for r in rows if r.guess_id) == sorted(job_ids)


async def test_a_failed_flush_fails_every_batch_in_it_and_each_comes_back(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    dead_sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1200)
    for k, user in enumerate(table.players):
        await enqueue_guess(lanes, standin, table, user, table.wrong_guess(k))
    batches = await claim_all(lanes)
    down = ScoreWorker(dead_sessionmaker, hold_s=0.2)
    outcomes = await asyncio.gather(*(down(b) for b in batches), return_exceptions=True)
    assert all(isinstance(o, Retry) for o in outcomes), outcomes
    assert await guesses(sessionmaker) == []
    up = ScoreWorker(sessionmaker)
    await asyncio.gather(*(up(b) for b in batches))
    assert up.stats.scored == len(batches)


async def test_a_poison_batch_fails_alone_not_the_batches_it_was_recorded_with(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    """One round's stored secret is damaged (shorter than its length), so scoring a guess of
    it raises. Recorded together with healthy batches, the flush fails; the worker then records
    each batch on its own: the healthy ones are recorded, only the poison one raises."""
    lanes = Lanes(redis_r, queue=queue_name)
    healthy = await make_table(sessionmaker, standin, -1300)
    damaged = await make_table(sessionmaker, standin, -1301, seed=3)
    async with sessionmaker() as s:
        await s.execute(
            update(Round).where(Round.id == damaged.round_id).values(secret=damaged.secret[0])
        )
        await s.commit()
    good_ids = [
        await enqueue_guess(lanes, standin, healthy, user, healthy.wrong_guess(k))
        for k, user in enumerate(healthy.players)
    ]
    poison_id = await enqueue_guess(
        lanes, standin, damaged, next(iter(damaged.players)), damaged.wrong_guess()
    )
    batches = await claim_all(lanes)
    worker = ScoreWorker(sessionmaker)
    outcomes = await asyncio.gather(*(worker(b) for b in batches), return_exceptions=True)

    failed = [b[0].id for b, o in zip(batches, outcomes, strict=True) if isinstance(o, Exception)]
    assert failed == [poison_id]
    assert all(isinstance(o, ValueError) for o in outcomes if isinstance(o, Exception)), outcomes
    assert sorted(g.id for g in await guesses(sessionmaker)) == sorted(good_ids)
    assert worker.stats.scored == len(good_ids)
