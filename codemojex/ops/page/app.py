"""The ops page's routes: login, the page and its live fragment, the charts' data, actions.

Every action is a POST with the session's CSRF token, is written to the audit log (the
admin commands' log) naming the operator, and answers with a redirect back to the page.
Nothing here reads a round (so no secret can reach the page): rooms, lanes, the outbox
count, the processes' counters and the daily code's counts (the world board's) only.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

import jinja2
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import limits
from codemojex.db import store
from codemojex.db.models import utcnow
from codemojex.game.daily import day_of
from codemojex.lanes import LaneError, Lanes
from codemojex.ops.page import auth
from codemojex.ops.page.history import History
from codemojex.ops.page.views import SORTS, Sort, dead_page, rooms_page
from codemojex.posting.board import DailyBoard

HERE: Final = Path(__file__).parent
SESSION: Final = web.RequestKey("ops_session", auth.Session)
ACTIONS: Final = ("pause", "resume", "limit", "pause_queue", "resume_queue", "requeue")
HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


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
    ) -> None:
        self.lanes = lanes
        self.sessionmaker = sessionmaker
        self.history = history
        self.board = DailyBoard(lanes.client, lanes.queue)
        self.sessions = auth.Sessions(token)
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
        return app

    # -- access ---------------------------------------------------------------------------

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not request.path.startswith(auth.OPEN_PATHS):
            session = self.sessions.get(request)
            if session is None:
                if request.method == "GET" and request.path == "/":
                    raise web.HTTPSeeOther("/login")
                raise web.HTTPUnauthorized(text="log in first: /login")
            request[SESSION] = session
            if request.method == "POST":
                form = await request.post()
                if not auth.csrf_ok(session, str(form.get("csrf", ""))):
                    raise web.HTTPForbidden(text="stale or missing CSRF token: reload the page")
        response = await handler(request)
        response.headers.update(HEADERS)
        return response

    def _render(self, template: str, status: int = 200, **context: Any) -> web.Response:
        html = self.templates.get_template(template).render(**context)
        return web.Response(text=html, status=status, content_type="text/html")

    async def login_form(self, request: web.Request) -> web.Response:
        return self._render("login.html", error=None, name="")

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name = auth.clean_name(str(form.get("name", "")))
        if not self.sessions.token_ok(str(form.get("token", ""))):
            await asyncio.sleep(0.5)  # a guess costs time
            return self._render(
                "login.html", status=401, error="Wrong token: access refused.", name=name
            )
        if not name:
            return self._render(
                "login.html", status=400, error="Say who you are: the audit log names you.", name=""
            )
        sid, _ = self.sessions.open(name)
        response = web.HTTPSeeOther("/")
        auth.set_cookie(response, request, sid, self.sessions.lifetime_s)
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        self.sessions.close(request)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(auth.COOKIE, path="/")
        raise response

    # -- the page ---------------------------------------------------------------------------

    def _query(self, request: web.Request) -> dict[str, Any]:
        q = request.query
        sort: Sort = q.get("sort", "pending") if q.get("sort") in SORTS else "pending"  # type: ignore[assignment]
        dead = q.get("dead", "0")
        return {
            "sort": sort,
            "descending": q.get("dir", "desc") != "asc",
            "cursor": q.get("cursor", ""),
            "dead": int(dead) if dead.isdigit() else 0,
        }

    async def _live_context(self, request: web.Request) -> dict[str, Any]:
        q = self._query(request)
        stats = await self.lanes.stats()  # one cheap script call: the tiles are current
        now_ms = int(time.time() * 1000)
        rooms = await rooms_page(
            self.lanes, self.sessionmaker, q["sort"], q["descending"], q["cursor"], now_ms
        )
        dead_total, dead = await dead_page(self.lanes, self.sessionmaker, q["dead"])
        # Today's daily code: who opened it and who finished it (O(1) reads of the board).
        daily = await self.board.counts(day_of(utcnow()))
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
            "fleet": self.history.fleet,
            "daily": daily,
            "rooms": rooms,
            "dead_total": dead_total,
            "dead": dead,
            "dead_offset": q["dead"],
            "link": link,
            "here": link()[1:],
            "csrf": session.csrf,
            "operator": session.operator,
            "now_ms": now_ms,
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
        back = "/?" + str(form.get("back", ""))
        if what not in ACTIONS:
            raise web.HTTPBadRequest(text=f"unknown action {what!r}")
        args: dict[str, Any] = {"operator": request[SESSION].operator, "via": "ops page"}
        try:
            if what in ("pause", "resume", "limit") and room is None:
                raise LaneError("which room?")
            if what == "pause":
                await self.lanes.pause(str(room))
            elif what == "resume":
                await self.lanes.resume(str(room))
            elif what == "limit":
                args["ceiling"] = await self._limit(str(room), str(form.get("ceiling", "")))
            elif what == "pause_queue":
                await self.lanes.pause_queue()
            elif what == "resume_queue":
                await self.lanes.resume_queue()
            else:
                args["job"] = str(form.get("job", ""))
                if not await self.lanes.requeue(args["job"]):
                    raise LaneError("that job is not dead (any more)")
        except (LaneError, ValueError) as exc:
            raise web.HTTPBadRequest(text=f"{what} refused: {exc}") from None
        async with self.sessionmaker() as session:
            if room is not None and await store.get_room(session, room) is None:
                room = None  # a room the lanes know and the database does not: audit anyway
            await store.audit(
                session, room_id=room, actor_tg_id=None, action=what, args=args, allowed=True
            )
        raise web.HTTPSeeOther(back)

    async def _limit(self, room: str, raw: str) -> int:
        """Set a room's ceiling: the room row first (the record the bot applies again on its
        next first sight of the room), then the lanes, as /limit does."""
        if not raw.isdigit() or not limits.CEILING_MIN <= int(raw) <= limits.CEILING_MAX:
            raise ValueError(
                f"a ceiling is a whole number {limits.CEILING_MIN}..{limits.CEILING_MAX}"
            )
        ceiling = int(raw)
        async with self.sessionmaker() as session:
            with contextlib.suppress(store.UnknownRoom):
                await store.update_room_settings(session, room, ceiling=ceiling)
        await self.lanes.limit(room, ceiling)
        return ceiling
