"""The ops page's routes: login, the page and its live fragment, the charts' data, actions.

Every route but the login form and its assets needs a session (`_guard`, by the route the
router matched, never by a path prefix). Every action is a POST with the session's CSRF
token, is written to the audit log (the admin commands' log) naming the operator, and
answers with a redirect back to the page. Every query and form parameter is checked before
use: a bad one is a 400 saying which, never a 500. Every response, redirects and errors
included, carries the security headers (`_secure`), and HSTS over https. Nothing here reads
a round (so no secret can reach the page): rooms, lanes, the outbox count, the
processes' counters and the daily code's counts (the world board's) only.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

import jinja2
from aiohttp import web
from multidict import MultiDict, MultiMapping
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import store
from codemojex.db.reading import reading
from codemojex.game.daily import day_of
from codemojex.lanes import LaneError, Lanes
from codemojex.limits import ROOM
from codemojex.ops.page import auth
from codemojex.ops.page.history import History
from codemojex.ops.page.proxies import HSTS, Peer, TrustedProxies
from codemojex.ops.page.views import (
    CURSOR_MAX,
    OFFSET_MAX,
    SORTS,
    check_cursor,
    dead_page,
    rooms_page,
)
from codemojex.scoring.rules import ROUND_HOLD_S_MAX
from codemojex.state.board import DailyBoard
from codemojex.state.inbox import Inbox
from codemojex.values import ids
from codemojex.values.clock import utcnow

HERE: Final = Path(__file__).parent
SESSION: Final = web.RequestKey("ops_session", auth.Session)
PEER: Final = web.RequestKey("ops_peer", Peer)
ACTIONS: Final = ("pause", "resume", "limit", "pause_queue", "resume_queue", "requeue")
HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# The page's query (and an action's `back`, the query to return to): name -> allowed values.
QUERY: Final = ("sort", "dir", "cursor", "dead")
DEAD_LETTERS_SHOWN: Final = 10  # the bot's newest; the rest stay in Redis for the operator


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class OpsPage:
    def __init__(
        self,
        lanes: Lanes,
        sessionmaker: async_sessionmaker[AsyncSession],
        history: History,
        token: str,
        *,
        proxies: TrustedProxies | None = None,
        budget: auth.LoginBudget | None = None,
    ) -> None:
        self.lanes = lanes
        self.sessionmaker = sessionmaker
        self.history = history
        self.board = DailyBoard(lanes.client, lanes.queue)
        self.inbox = Inbox(lanes.client, lanes.queue)
        self.sessions = auth.Sessions(token)
        self.proxies = proxies or TrustedProxies()
        self.budget = budget or auth.LoginBudget()
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["ago"] = ago

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/login", self.login_form)
        app.router.add_post("/login", self.login)
        app.router.add_post("/logout", self.logout)
        app.router.add_get("/", self.index)
        app.router.add_get("/live", self.live)
        app.router.add_get("/history.json", self.history_json)
        app.router.add_post("/action", self.action)
        app.router.add_static("/static/", HERE / "static")
        app.on_response_prepare.append(self._secure)
        return app

    # -- access ---------------------------------------------------------------------------

    def _peer(self, request: web.Request) -> Peer:
        peer = request.get(PEER)
        if peer is None:
            peer = request[PEER] = self.proxies.peer(request)
        return peer

    @staticmethod
    def _is_open(request: web.Request) -> bool:
        """The route the router matched is one anyone may use (a path that matched no route,
        or a route not declared open, is not)."""
        resource = request.match_info.route.resource
        return resource is not None and resource.canonical.rstrip("/") in {
            path.rstrip("/") for path in auth.OPEN_PATHS
        }

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not self._is_open(request):
            peer = self._peer(request)
            sid = request.cookies.get(auth.cookie_name(peer.https), "")
            session = self.sessions.get(sid, https=peer.https)
            if session is None:
                if request.method == "GET" and request.path == "/":
                    raise web.HTTPSeeOther("/login")
                raise web.HTTPUnauthorized(text="log in first: /login")
            request[SESSION] = session
            if request.method == "POST":
                form = await request.post()
                if not auth.csrf_ok(session, str(form.get("csrf", ""))):
                    raise web.HTTPForbidden(text="stale or missing CSRF token: reload the page")
        return await handler(request)

    async def _secure(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every response (pages, redirects, errors, assets): the security headers, and HSTS
        when the client speaks https."""
        response.headers.update(HEADERS)
        if self._peer(request).https:
            response.headers["Strict-Transport-Security"] = HSTS

    def _render(self, template: str, status: int = 200, **context: Any) -> web.Response:
        html = self.templates.get_template(template).render(**context)
        return web.Response(text=html, status=status, content_type="text/html")

    async def login_form(self, request: web.Request) -> web.Response:
        return self._render("login.html", error=None, name="")

    async def login(self, request: web.Request) -> web.StreamResponse:
        peer = self._peer(request)
        # The address's try is taken before the token is read: requests in parallel cannot
        # all be compared while the first ones wait out their delay.
        if not self.budget.take(peer.address):
            response = self._render(
                "login.html",
                status=429,
                error="Too many tries: wait a minute, then log in again.",
                name="",
            )
            response.headers["Retry-After"] = str(int(self.budget.refill_addr_s) + 1)
            return response
        form = await request.post()
        name = auth.clean_name(str(form.get("name", "")))
        if not self.sessions.token_ok(str(form.get("token", ""))):
            await self.budget.hold_wrong()  # a guess costs time, more during a swarm
            return self._render(
                "login.html", status=401, error="Wrong token: access refused.", name=name
            )
        self.budget.give_back(peer.address)
        if not name:
            return self._render(
                "login.html", status=400, error="Say who you are: the audit log names you.", name=""
            )
        sid, _ = self.sessions.open(name, https=peer.https)
        response = web.HTTPSeeOther("/")
        auth.set_cookie(response, peer.https, sid, self.sessions.lifetime_s)
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        https = self._peer(request).https
        self.sessions.close(request.cookies.get(auth.cookie_name(https), ""))
        response = web.HTTPSeeOther("/login")
        response.del_cookie(auth.cookie_name(https), path="/", secure=https)
        raise response

    # -- the page ---------------------------------------------------------------------------

    @staticmethod
    def _query(q: MultiMapping[str]) -> dict[str, Any]:
        """The page's view (sort, direction, cursor, dead offset) from its query; 400 for
        anything that is not one of them as the page writes it."""

        def one(name: str, default: str) -> str:
            values = q.getall(name, [])
            if len(values) > 1:
                raise web.HTTPBadRequest(text=f"{name}: given more than once")
            return values[0] if values else default

        sort, direction = one("sort", "pending"), one("dir", "desc")
        cursor, dead = one("cursor", ""), one("dead", "0")
        if sort not in SORTS:
            raise web.HTTPBadRequest(text=f"sort: one of {', '.join(SORTS)}")
        if direction not in ("asc", "desc"):
            raise web.HTTPBadRequest(text="dir: asc or desc")
        if not _offset_ok(dead):
            raise web.HTTPBadRequest(text=f"dead: a whole number up to {OFFSET_MAX}")
        problem = check_cursor(sort, cursor)
        if problem is not None:
            raise web.HTTPBadRequest(text=f"cursor: {problem}")
        return {
            "sort": sort,
            "descending": direction == "desc",
            "cursor": cursor,
            "dead": int(dead),
        }

    async def _live_context(self, request: web.Request) -> dict[str, Any]:
        q = self._query(request.query)
        stats = await self.lanes.stats()  # one cheap script call: the tiles are current
        now_ms = int(time.time() * 1000)
        rooms = await rooms_page(
            self.lanes, self.sessionmaker, q["sort"], q["descending"], q["cursor"], now_ms
        )
        dead_total, dead = await dead_page(self.lanes, self.sessionmaker, q["dead"])
        # Today's daily code: who opened it and who finished it (O(1) reads of the board).
        daily = await self.board.counts(day_of(utcnow()))
        # The bot's updates parked past their deadline, and the newest it could not handle.
        parked, letters_total = await self.inbox.counts()
        letters = await self.inbox.dead_letters(DEAD_LETTERS_SHOWN)
        last = self.history.points[-1] if self.history.points else None

        def link(**changes: Any) -> str:
            params = {
                "sort": q["sort"],
                "dir": "desc" if q["descending"] else "asc",
                "cursor": q["cursor"],
                "dead": q["dead"],
            }
            params.update(changes)
            return "?" + urlencode({k: v for k, v in params.items() if v not in ("", None)})

        session = request[SESSION]
        return {
            "stats": stats,
            "point": last,
            "pace": self.history.pace,
            "fleet": self.history.fleet,
            "daily": daily,
            "rooms": rooms,
            "dead_total": dead_total,
            "dead": dead,
            "dead_offset": q["dead"],
            "parked": parked,
            "letters": letters,
            "letters_total": letters_total,
            "link": link,
            "here": link()[1:],
            "csrf": session.csrf,
            "operator": session.operator,
            "now_ms": now_ms,
            "hold_min": ROUND_HOLD_S_MAX // 60,
        }

    async def index(self, request: web.Request) -> web.Response:
        return self._render("index.html", **await self._live_context(request))

    async def live(self, request: web.Request) -> web.Response:
        return self._render("live.html", **await self._live_context(request))

    async def history_json(self, request: web.Request) -> web.Response:
        return web.json_response(self.history.series())

    # -- actions ----------------------------------------------------------------------------

    async def action(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        what = str(form.get("action", ""))
        room = str(form.get("room", "")) or None
        if what not in ACTIONS:
            raise web.HTTPBadRequest(text=f"unknown action {what[:64]!r}")
        if room is not None and not ids.is_valid(room, ids.ROOM):
            raise web.HTTPBadRequest(text="room: not a room id (ROM…)")
        back = "/?" + _back(str(form.get("back", "")))
        args: dict[str, Any] = {"operator": request[SESSION].operator, "via": "ops page"}
        try:
            if what in ("pause", "resume", "limit") and room is None:
                raise LaneError("which room?")
            if what in ("pause", "resume"):
                # The room's row first (what the lanes' pause is derived from: a /pause or
                # /resume delivered again then cannot undo this), then the lanes.
                await usecases.pause_room(
                    self.sessionmaker, self.lanes, str(room), paused=what == "pause"
                )
            elif what == "limit":
                args["ceiling"] = await self._limit(str(room), str(form.get("ceiling", "")))
            elif what == "pause_queue":
                await self.lanes.pause_queue()
            elif what == "resume_queue":
                await self.lanes.resume_queue()
            else:
                args["job"] = str(form.get("job", ""))
                if not ids.is_valid(args["job"], ids.JOB):
                    raise ValueError("not a job id (JOB…)")
                if not await self.lanes.requeue(args["job"]):
                    raise LaneError("that job is not dead (any more)")
        except (LaneError, ValueError) as exc:
            raise web.HTTPBadRequest(text=f"{what} refused: {exc}") from None
        if room is not None:
            async with reading(self.sessionmaker) as session:
                if await store.get_room(session, room) is None:
                    room = None  # a room the lanes know and the database does not: audit anyway
        await usecases.audit(
            self.sessionmaker, room_id=room, actor_tg_id=None, action=what, args=args, allowed=True
        )
        raise web.HTTPSeeOther(back)

    async def _limit(self, room: str, raw: str) -> int:
        """Set a room's ceiling: the room row first (the record the bot applies again on its
        next first sight of the room), then the lanes, as /limit does."""
        if not _digits(raw, 4) or not ROOM.ceiling_min <= int(raw) <= ROOM.ceiling_max:
            raise ValueError(f"a ceiling is a whole number {ROOM.ceiling_min}..{ROOM.ceiling_max}")
        ceiling = int(raw)
        with contextlib.suppress(store.UnknownRoom):
            await usecases.update_room_settings(self.sessionmaker, room, ceiling=ceiling)
        await self.lanes.limit(room, ceiling)
        return ceiling


def _digits(raw: str, most: int) -> bool:
    """ASCII digits only (str.isdigit takes "²" and "٣" too), at most `most` of them."""
    return 0 < len(raw) <= most and raw.isascii() and raw.isdigit()


def _offset_ok(raw: str) -> bool:
    return _digits(raw, len(str(OFFSET_MAX))) and int(raw) <= OFFSET_MAX


def _back(raw: str) -> str:
    """The page's query an action returns to, rebuilt from its checked parts (400 when it is
    not one): nothing else reaches the redirect."""
    if len(raw) > 4 * CURSOR_MAX:
        raise web.HTTPBadRequest(text="back: too long")
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=bool(raw))
    except ValueError:
        raise web.HTTPBadRequest(text="back: not the page's query") from None
    if any(name not in QUERY for name, _ in pairs):
        raise web.HTTPBadRequest(text="back: not the page's query")
    query: MultiDict[str] = MultiDict(pairs)
    q = OpsPage._query(query)
    return urlencode(
        {
            "sort": q["sort"],
            "dir": "desc" if q["descending"] else "asc",
            **({"cursor": q["cursor"]} if q["cursor"] else {}),
            "dead": q["dead"],
        }
    )
