"""The ops page shows today's daily code: how many played it and finished it (the world
board's counts in Redis; nothing about the code)."""

from __future__ import annotations

import aiohttp
import redis.asyncio as aioredis
from aiohttp.test_utils import TestServer

from codemojex.db import make_engine, make_sessionmaker
from codemojex.game import daily
from codemojex.lanes import Lanes
from codemojex.ops.page.app import OpsPage
from codemojex.ops.page.history import History
from codemojex.state.board import DailyBoard
from codemojex.values.clock import utcnow
from codemojex.values.daily import Finish
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys


async def test_the_live_page_counts_todays_daily_players_and_finishes(
    ops_database_url: str, queue_name: str
) -> None:
    redis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(ops_database_url)
    lanes = Lanes(redis, queue_name)
    sm = make_sessionmaker(engine)
    board = DailyBoard(redis, queue_name)
    now = utcnow()
    today = daily.day_of(now)
    for user in (1, 2, 3):
        await board.started(today, user)
    await board.finished([Finish(today, 1, 3, True, now), Finish(today, 2, 8, False, now)])
    await board.started(today - daily.DAY, 9)  # yesterday's is not today's
    page = OpsPage(lanes, sm, History(lanes, sm, redis, queue_name), "the-token")
    server = TestServer(page.app())
    await server.start_server()
    try:
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(
            base_url=str(server.make_url("/")), cookie_jar=jar
        ) as http:
            async with http.post("/login", data={"name": "Ann", "token": "the-token"}) as r:
                assert r.status == 200
            async with http.get("/live") as r:
                html = await r.text()
        assert '<b id="daily-played">3</b> daily players today' in html
        assert '<span id="daily-finished">2</span> finished, 1 cracked' in html
    finally:
        await server.close()
        await drop_keys(redis, queue_name)
        await engine.dispose()
        await redis.aclose()
