"""The rooms table a page at a time: by title (a keyset over the rooms-title index), by
pending guesses and by last guess (ranks in the lanes' books), each page in order and the
pages together every room once."""

from __future__ import annotations

import time

import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import make_engine, make_sessionmaker
from codemojex.lanes import Lanes
from codemojex.ops.page.views import RoomsPage, Sort, rooms_page
from codemojex.values import ids
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, wipe_tables


async def walk(
    lanes: Lanes, sm: async_sessionmaker[AsyncSession], sort: Sort, descending: bool
) -> list[RoomsPage]:
    pages, cursor = [], ""
    while True:
        page = await rooms_page(
            lanes,
            sm,
            sort,
            descending,
            cursor,
            int(time.time() * 1000),
            rows=4,
        )
        pages.append(page)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


async def test_rooms_are_paged_by_title_pending_and_activity(
    ops_database_url: str, queue_name: str
) -> None:
    redis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(ops_database_url)
    await wipe_tables(engine)
    sm = make_sessionmaker(engine)
    lanes = Lanes(redis, queue_name)
    try:
        rooms = {}
        for n in range(10):
            room = await usecases.ensure_room(
                sm, -1000 - n, f"chat {n:02d}", default_ceiling=2, round_timeout_s=60
            )
            rooms[room.id] = n
            for _ in range(n % 4):  # rooms 0, 4, 8 have nothing pending
                await lanes.enqueue(room.id, ids.mint(ids.PLAYER), b"x")
        titles = [[r.title for r in p.rows] for p in await walk(lanes, sm, "title", False)]
        assert titles == [[f"chat {n:02d}" for n in range(k, min(k + 4, 10))] for k in (0, 4, 8)]
        back = [r.title for p in await walk(lanes, sm, "title", True) for r in p.rows]
        assert back == [f"chat {n:02d}" for n in reversed(range(10))]
        deep = await walk(lanes, sm, "pending", True)
        pending = [(r.pending, r.players) for p in deep for r in p.rows]
        assert [n for n, _ in pending] == sorted((n % 4 for n in range(10) if n % 4), reverse=True)
        assert deep[0].total == 7 and deep[1].prev_cursor == "0" and deep[0].prev_cursor is None
        latest = [r.id for p in await walk(lanes, sm, "activity", True) for r in p.rows]
        assert len(latest) == 7 and rooms[latest[0]] == 9  # the last room enqueued into
    finally:
        await drop_keys(redis, queue_name)
        await engine.dispose()
        await redis.aclose()


async def test_a_forum_topics_rooms_are_told_apart_by_their_topic(
    ops_database_url: str, queue_name: str
) -> None:
    redis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(ops_database_url)
    sm = make_sessionmaker(engine)
    lanes = Lanes(redis, queue_name)
    try:
        for thread_id in (0, 40):
            room = await usecases.ensure_room(
                sm, -2000, "forum", default_ceiling=2, round_timeout_s=60,
                thread_id=thread_id,
            )  # fmt: skip
            await lanes.enqueue(room.id, ids.mint(ids.PLAYER), b"x")
        [page] = await walk(lanes, sm, "title", False)
        assert sorted(r.title for r in page.rows) == ["forum", "forum · topic 40"]
    finally:
        await drop_keys(redis, queue_name)
        await engine.dispose()
        await redis.aclose()
