"""Every route of the ops page, taken from its router (a route added later is walked too):
none is readable without a session, every parameter that is not what the page writes is a
400 (never a 500) and changes nothing, and every response carries the security headers."""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterator

import aiohttp
import pytest
from aiohttp import web

from codemojex.ops.page import auth
from codemojex.ops.page.app import HEADERS
from codemojex.values import ids
from tests.ops.conftest import Served, serve_ops

# What this test says anyone may use. Not taken from the code under test: a route opened
# there (a path added to auth.OPEN_PATHS, a new open route) must fail here.
OPEN: frozenset[tuple[str, str]] = frozenset(
    {("GET", "/login"), ("POST", "/login"), ("GET", "/static/ops.css")}
)
# The parameters of each route: every route must be listed (a new one fails until it is).
PARAMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("GET", "/login"): (),
    ("POST", "/login"): ("name", "token"),
    ("POST", "/logout"): ("csrf",),
    ("GET", "/"): ("sort", "dir", "cursor", "dead"),
    ("GET", "/live"): ("sort", "dir", "cursor", "dead"),
    ("GET", "/history.json"): (),
    ("POST", "/action"): ("csrf", "action", "room", "ceiling", "job", "back"),
    ("GET", "/static/ops.css"): (),
}


def routes(app: web.Application) -> Iterator[tuple[str, str]]:
    """(method, a path it answers) for every route of the router."""
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        resource = route.resource
        assert resource is not None
        info = resource.get_info()
        if "prefix" in info:  # the static files: one of them
            yield route.method, f"{info['prefix'].rstrip('/')}/ops.css"
        else:
            yield route.method, resource.canonical


async def test_no_route_is_readable_without_a_session(
    ops_database_url: str, queue_name: str
) -> None:
    async with serve_ops(ops_database_url, queue_name, proxies=["127.0.0.1/32"]) as ops:
        walked = set(routes(ops.page.app()))
        assert walked == set(PARAMS), "list the new route's parameters in PARAMS"
        forged = secrets.token_urlsafe(32)
        cookies: list[dict[str, str]] = [
            {},
            {"Cookie": f"{auth.COOKIE}={forged}"},
            {"Cookie": f"{auth.SECURE_COOKIE}={forged}", "X-Forwarded-Proto": "https"},
            {"Cookie": f"{auth.COOKIE}="},
        ]
        async with aiohttp.ClientSession() as http:
            sid = await ops.login(http)  # a real session exists: a forged id must not be it
            assert sid
            http.cookie_jar.clear()
            for method, path in sorted(walked | {("GET", "/nope"), ("GET", "/login/../live")}):
                for headers in cookies:
                    async with http.request(
                        method, ops.url + path, headers=headers, allow_redirects=False
                    ) as r:
                        body = await r.text()
                        if (method, path) in OPEN:
                            assert r.status in (200, 401), (method, path, r.status)
                            continue
                        redirected = r.status == 303 and r.headers["Location"] == "/login"
                        assert r.status == 401 or redirected, (method, path, headers, r.status)
                        assert "Ann" not in body and "csrf" not in body


def browser() -> aiohttp.ClientSession:
    """A client that keeps the page's cookie (of an IP address: 127.0.0.1)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


def _bad_values() -> dict[str, list[str]]:
    huge = "9" * 400
    return {
        "sort": ["x", "", "title\x00", "pending ", "TITLE"],
        "dir": ["up", "", "asc\x00"],
        "cursor": ["\x00", huge, "-1", "1.5", "²", "٣", "1e9", "99999999999"],
        "dead": [huge, "-1", "x", "", "²", "0x10", "99999999999"],
    }


async def _session(ops: Served, http: aiohttp.ClientSession) -> str:
    await ops.login(http)
    async with http.get(f"{ops.url}/") as r:
        html = await r.text()
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def test_every_bad_parameter_is_a_400_and_changes_nothing(
    ops_database_url: str, queue_name: str
) -> None:
    async with serve_ops(ops_database_url, queue_name) as ops, browser() as http:
        csrf = await _session(ops, http)
        room = ids.mint(ids.ROOM)
        # the ones the review found: a NUL in a title cursor, a huge offset
        for query in ("sort=title&cursor=%00", f"dead={'9' * 300}", f"cursor={'9' * 300}"):
            for path in ("/", "/live"):
                async with http.get(f"{ops.url}{path}?{query}") as r:
                    assert r.status == 400, (path, query, r.status)
        for path in ("/", "/live"):
            for name, values in _bad_values().items():
                sorts = ["title", "pending", "activity"] if name == "cursor" else ["pending"]
                for sort in sorts:
                    for value in values:
                        params = {"sort": sort, name: value}
                        async with http.get(ops.url + path, params=params) as r:
                            assert r.status == 400, (path, params, r.status)
                            assert HEADERS.items() <= r.headers.items()
            async with http.get(f"{ops.url}{path}?sort=title&sort=pending") as r:
                assert r.status == 400  # given twice
        title_cursors = ["", f"Room 1\x1f{room}", f"\x1f{room}"]
        for cursor in title_cursors:  # what the page itself writes: fine
            async with http.get(f"{ops.url}/live", params={"sort": "title", "cursor": cursor}) as r:
                assert r.status == 200, cursor
        for cursor in ("Room 1\x1fROMnope", "Room 1", f"x\x1f{room}\x1fmore"):
            params = {"sort": "title", "cursor": cursor}
            async with http.get(f"{ops.url}/live", params=params) as r:
                assert r.status == 400, cursor
        for raw in (f"%ED%A0%80%1F{room}", f"%FF%1F{room}", "%1F"):  # not UTF-8, no id
            async with http.get(f"{ops.url}/live?sort=title&cursor={raw}") as r:
                assert r.status in (200, 400), raw  # a title the URL decoder made of it
        actions: list[dict[str, str]] = [
            {"action": "pause", "room": "ROM-not-an-id"},
            {"action": "pause", "room": room + "\x00"},
            {"action": "pause", "room": room, "back": "sort=nope"},
            {"action": "pause", "room": room, "back": "x=1"},
            {"action": "pause", "room": room, "back": "sort=pending\r\nSet-Cookie: x=1"},
            {"action": "pause", "room": room, "back": "dead=" + "9" * 300},
            {"action": "pause", "room": room, "back": "&&=&"},
            {"action": "limit", "room": room, "ceiling": "²"},
            {"action": "limit", "room": room, "ceiling": "9" * 300},
            {"action": "limit", "room": room, "ceiling": "-1"},
            {"action": "requeue", "job": "../../etc"},
            {"action": "requeue", "job": "9" * 300},
            {"action": "nope"},
            {"action": "x" * 100_000},
        ]
        for form in actions:
            async with http.post(f"{ops.url}/action", data={**form, "csrf": csrf}) as r:
                assert r.status == 400, (form, r.status, await r.text())
                assert "Set-Cookie" not in r.headers
        assert not await ops.lanes.is_paused(room)
        snapshot = await ops.lanes.snapshot(room)
        assert snapshot["rooms"] == {} or snapshot["rooms"][room]["ceiling"] is None
        data = {"action": "pause", "room": room, "csrf": csrf, "back": "sort=title&dir=asc"}
        async with http.post(f"{ops.url}/action", data=data, allow_redirects=False) as r:
            assert r.status == 303
            assert r.headers["Location"].startswith("/?sort=title&dir=asc")
        assert await ops.lanes.is_paused(room)


# What a fuzzer types into a parameter: edge characters, digits, long runs, any code point.
ALPHABET = "\x00\x1f\x7f%&=;+/\\?#0129²٣-. aZé\u202e\U0001f34e\r\n" + ids.ROOM


def _fuzz(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.1:
        return rng.choice("9x%") * rng.choice([50, 400, 5000])
    if pick < 0.2:
        points = (rng.randrange(0x20, 0x2FFFF) for _ in range(rng.randrange(1, 20)))
        return "".join(chr(p) for p in points if not 0xD800 <= p <= 0xDFFF)
    if pick < 0.3:
        return ids.mint(ids.ROOM) + rng.choice(["", "\x00", "\x1f", "x"])
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 30)))


async def test_no_parameter_of_any_route_is_a_500(ops_database_url: str, queue_name: str) -> None:
    """300 rounds of random values for every parameter of every route (a fixed seed, so a
    failure comes back): an answer each time, never a server error."""
    rng = random.Random(22)
    async with serve_ops(ops_database_url, queue_name) as ops, browser() as http:
        csrf = await _session(ops, http)
        for _ in range(300):
            for (method, path), names in sorted(PARAMS.items()):
                if path in ("/login", "/logout"):
                    continue  # the login's are the budget's (test_login); logout ends it
                values = {n: _fuzz(rng) for n in names}
                if "csrf" in values and rng.random() < 0.7:
                    values["csrf"] = csrf
                if "action" in values and rng.random() < 0.7:
                    values["action"] = rng.choice(["pause", "limit", "requeue", "resume"])
                if method == "GET":
                    async with http.get(ops.url + path, params=values) as r:
                        assert r.status < 500, (path, values, r.status)
                else:
                    request = http.post(ops.url + path, data=values, allow_redirects=False)
                    async with request as r:
                        assert r.status < 500, (path, values, r.status)


@pytest.mark.parametrize("https", [False, True], ids=["http", "https-via-proxy"])
async def test_every_response_carries_the_security_headers(
    ops_database_url: str, queue_name: str, https: bool
) -> None:
    proxies = ["127.0.0.1/32"] if https else []
    forwarded = {"X-Forwarded-Proto": "https"} if https else {}
    cookie = auth.SECURE_COOKIE if https else auth.COOKIE
    async with (
        serve_ops(ops_database_url, queue_name, proxies=proxies) as ops,
        aiohttp.ClientSession() as http,
    ):
        sid = await ops.login(http, **forwarded)
        http.cookie_jar.clear()
        session = {**forwarded, "Cookie": f"{cookie}={sid}"}
        anonymous = dict(forwarded)
        requests = [
            ("GET", "/login", anonymous, {}, 200),
            ("GET", "/static/ops.css", anonymous, {}, 200),
            ("GET", "/", anonymous, {}, 303),
            ("GET", "/live", anonymous, {}, 401),
            ("GET", "/nope", anonymous, {}, 401),
            ("POST", "/login", anonymous, {"name": "x", "token": "wrong"}, 401),
            ("GET", "/", session, {}, 200),
            ("GET", "/live?sort=bad", session, {}, 400),
            ("GET", "/nope", session, {}, 404),
            ("POST", "/action", session, {"action": "pause"}, 403),  # no CSRF token
            ("PUT", "/live", session, {}, 405),
            ("GET", "/history.json", session, {}, 200),
        ]
        for method, path, headers, form, status in requests:
            async with http.request(
                method, ops.url + path, headers=headers, data=form, allow_redirects=False
            ) as r:
                assert r.status == status, (method, path, r.status)
                for name, value in HEADERS.items():
                    assert r.headers.get(name) == value, (method, path, name)
                assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
                assert ("Strict-Transport-Security" in r.headers) == https, (method, path)
        # a 429 too
        ops.page.budget = auth.LoginBudget(burst_addr=0)
        form = {"name": "x", "token": "wrong"}
        async with http.post(ops.url + "/login", headers=anonymous, data=form) as r:
            assert r.status == 429
            assert HEADERS.items() <= r.headers.items()
