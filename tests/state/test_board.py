"""The daily code's world board in Redis (the real one, fakeredis and a Redis Cluster): its
order, ranks and counts, idempotent writes, and its rebuild from the real Postgres when Redis
lost it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.state.board import DailyBoard
from codemojex.state.keys import Keys
from codemojex.values.daily import Finish
from codemojex.values.redistypes import AnyRedis
from tests.helpers.dailies import daily_round, misses, open_for, play

NOON = datetime(2026, 3, 14, 12, tzinfo=UTC)
DAY = NOON.date()


def finish(user: int, attempts: int, cracked: bool, minutes: int) -> Finish:
    return Finish(DAY, user, attempts, cracked, NOON + timedelta(minutes=minutes))


async def test_the_board_ranks_and_counts(redis_any: AnyRedis, queue_name: str) -> None:
    board = DailyBoard(redis_any, queue_name)
    finishes = [
        finish(1, 4, True, 1),
        finish(2, 3, True, 9),
        finish(3, 3, True, 2),  # as few attempts as 2, and earlier
        finish(4, 8, False, 0),  # the first to finish, but not cracked
        finish(5, 8, True, 30),
    ]
    await board.finished(finishes[:3])
    await board.finished(finishes[2:])  # a finish told twice counts once
    for user in range(1, 8):
        await board.started(DAY, user)
    assert await board.top(DAY, 10) == [(3, 3), (2, 3), (1, 4), (5, 8)]
    assert await board.top(DAY, 2) == [(3, 3), (2, 3)]
    standings = {u: await board.standing(DAY, u) for u in (1, 3, 4, 6)}
    assert (standings[3].rank, standings[1].rank, standings[1].cracked) == (1, 3, 4)
    assert standings[4].finished and standings[4].rank is None  # X/8
    assert not standings[6].finished and standings[6].rank is None
    counts = await board.counts(DAY)
    assert (counts.played, counts.finished, counts.cracked, counts.complete) == (7, 5, 4, False)
    # another day's board is another set
    assert await board.top(DAY + timedelta(days=1), 10) == []
    ttl = await redis_any.ttl(Keys(queue_name).daily_board(DAY))
    assert 0 < int(ttl) <= 3 * 24 * 3600


async def test_a_lost_board_is_rebuilt_from_postgres(
    redis_any: AnyRedis, queue_name: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    users = list(range(8001, 8008))
    for user in users:
        await open_for(sessionmaker, user, NOON, random.Random(user))
    rnd = await daily_round(sessionmaker, users[0], NOON)
    # 8001 cracks it in 3, 8002 in 1, 8003 misses eight times; the rest are playing
    await play(sessionmaker, 8001, [*misses(rnd, 2), rnd.secret_emojis], NOON)
    await play(sessionmaker, 8002, [rnd.secret_emojis], NOON + timedelta(minutes=5))
    await play(sessionmaker, 8003, misses(rnd, 8), NOON)
    board = DailyBoard(redis_any, queue_name)
    assert not await board.complete(DAY)  # Redis never heard of any of it
    await board.ensure(DAY, sessionmaker)
    assert await board.complete(DAY)
    assert await board.top(DAY, 10) == [(8002, 1), (8001, 3)]
    counts = await board.counts(DAY)
    assert (counts.played, counts.finished, counts.cracked) == (7, 3, 2)
    # complete now: the next reader does not read Postgres again
    await redis_any.zrem(Keys(queue_name).daily_board(DAY), "8001")
    await board.ensure(DAY, sessionmaker)
    assert await board.top(DAY, 10) == [(8002, 1)]
    # lost again (Redis restarted empty): rebuilt again, a page at a time
    await redis_any.delete(Keys(queue_name).daily_built(DAY))
    assert await board.rebuild(DAY, sessionmaker, chunk=2)
    assert await board.top(DAY, 10) == [(8002, 1), (8001, 3)]


async def test_one_rebuild_at_a_time(
    redis_any: AnyRedis, queue_name: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    await open_for(sessionmaker, 8101, NOON)
    board = DailyBoard(redis_any, queue_name)
    keys = Keys(queue_name)
    await redis_any.set(keys.daily_rebuild(DAY), b"another process", px=60_000)
    assert not await board.rebuild(DAY, sessionmaker)
    assert not await board.complete(DAY)
    await redis_any.delete(keys.daily_rebuild(DAY))
    assert await board.rebuild(DAY, sessionmaker)
    assert await redis_any.get(keys.daily_rebuild(DAY)) is None  # released
    assert (await board.counts(DAY)).played == 1
