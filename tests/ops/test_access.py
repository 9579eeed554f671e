"""The ops page's access rules, over HTTP without a browser: no session, no page; a wrong
token is refused; the cookie is HttpOnly and SameSite=Strict; an action without the
session's CSRF token is refused and changes nothing; the page refuses to start without a
token."""

from __future__ import annotations

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestServer

from codemojex.db import make_engine, make_sessionmaker
from codemojex.lanes import Lanes
from codemojex.ops.page.app import OpsPage
from codemojex.ops.page.history import History
from codemojex.ops.page.main import run_ops
from codemojex.settings import Settings
from codemojex.values import ids
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys


async def test_the_page_is_for_the_token_holder_and_every_action_needs_csrf(
    ops_database_url: str, queue_name: str
) -> None:
    redis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(ops_database_url)
    lanes = Lanes(redis, queue_name)
    sm = make_sessionmaker(engine)
    page = OpsPage(lanes, sm, History(lanes, sm, redis, queue_name), "the-token")
    room = ids.mint(ids.ROOM)
    server = TestServer(page.app())
    await server.start_server()
    try:
        jar = aiohttp.CookieJar(unsafe=True)  # keep cookies of an IP address (127.0.0.1)
        async with aiohttp.ClientSession(
            base_url=str(server.make_url("/")), cookie_jar=jar
        ) as http:
            async with http.get("/", allow_redirects=False) as r:
                assert r.status == 303 and r.headers["Location"] == "/login"
            async with http.post("/action", data={"action": "pause_queue"}) as r:
                assert r.status == 401
            async with http.post("/login", data={"name": "Ann", "token": "nope"}) as r:
                assert r.status == 401 and "Wrong token" in await r.text()
            async with http.post(
                "/login", data={"name": "Ann", "token": "the-token"}, allow_redirects=False
            ) as r:
                assert r.status == 303
                cookie = r.headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            async with http.get("/") as r:
                html = await r.text()
                assert r.status == 200 and "Ann" in html
                assert r.headers["Content-Security-Policy"].startswith("default-src 'self'")
            csrf = html.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            for bad in ({}, {"csrf": "forged"}):
                data = {"action": "pause", "room": room, **bad}
                async with http.post("/action", data=data) as r:
                    assert r.status == 403
            assert not await lanes.is_paused(room)
            data = {"action": "pause", "room": room, "csrf": csrf}
            async with http.post("/action", data=data, allow_redirects=False) as r:
                assert r.status == 303
            assert await lanes.is_paused(room)
            data = {"action": "limit", "room": room, "ceiling": "0", "csrf": csrf}
            async with http.post("/action", data=data) as r:
                assert r.status == 400 and "ceiling" in await r.text()
    finally:
        await server.close()
        await drop_keys(redis, queue_name)
        await engine.dispose()
        await redis.aclose()


async def test_the_page_will_not_start_without_a_token() -> None:
    with pytest.raises(ValueError, match="OPS_TOKEN"):
        settings = Settings(redis_url=REDIS_URL)
        await run_ops(settings.ops_page(), settings.runtime())
