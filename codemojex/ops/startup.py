"""A process's start: probed from its first second, stopped by SIGTERM at any moment.

Every long-running process (bot, worker, ops page) runs inside `starting()`. Before it
connects to anything, /healthz answers (the process is alive: its event loop turns) on
CODEMOJEX_METRICS_PORT, and /readyz answers 503 naming what start-up waits for (Postgres
down, or at a schema this version does not serve yet); SIGTERM and SIGINT set the process's
stop event, and a start-up still waiting for a dependency ends at once (`Stopped`). Once the
process runs, it hands /readyz and /metrics their answers (`Probes.serve`: ops/server.py).

A setting that cannot work (a database role that does not exist, a wrong password, a URL
that is no database's) is one line naming the setting (`setting_problem`), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

from redis.exceptions import AuthenticationError, AuthorizationError, ResponseError
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

if TYPE_CHECKING:  # aiohttp is imported only when a metrics port is set: a faster start
    from aiohttp import web

T = TypeVar("T")
log = logging.getLogger(__name__)

# What /readyz says while start-up has not handed it over yet.
STARTING: Final = "starting"
# Postgres refusing who we are or where we point: role, password, database (SQLSTATE).
_PG_REFUSALS: Final = {
    "28000": "the role",  # invalid_authorization_specification: no such role
    "28P01": "the password",  # invalid_password
    "3D000": "the database",  # invalid_catalog_name: no such database
    "42501": "the role's rights",  # insufficient_privilege
}

ReadyCheck = Callable[[], Awaitable[tuple[dict[str, str], dict[str, str]]]]
MetricsBody = Callable[[], Awaitable[tuple[bytes, str]]]


class Stopped(Exception):
    """SIGTERM or SIGINT came while start-up waited: the process ends, exit 0."""


@dataclass
class Probes:
    """/healthz, /readyz and /metrics on `host`:`port` (none without a port)."""

    host: str
    port: int | None
    # What start-up waits for, by dependency: /readyz's problems until `serve`.
    waiting: dict[str, str] = field(default_factory=lambda: {"start-up": STARTING})
    _ready: ReadyCheck | None = None
    _metrics: MetricsBody | None = None
    _runner: web.AppRunner | None = None

    async def start(self) -> None:
        if self.port is None:
            return
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_page)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        log.info("health and metrics on http://%s:%d/ (/healthz, /readyz)", self.host, self.port)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def serve(self, ready: ReadyCheck, metrics: MetricsBody | None = None) -> None:
        """Start-up is over: /readyz asks `ready` (problems, warnings), /metrics `metrics`."""
        self._ready = ready
        self._metrics = metrics
        self.waiting = {}

    async def _healthz(self, _: web.Request) -> web.Response:
        from aiohttp import web

        return web.json_response({"status": "ok"})

    async def _readyz(self, _: web.Request) -> web.Response:
        from aiohttp import web

        if self._ready is None:
            problems, warnings = dict(self.waiting), dict[str, str]()
        else:
            problems, warnings = await self._ready()
        body: dict[str, object] = {"ready": not problems, "problems": problems}
        if warnings:
            body["warnings"] = warnings
        return web.json_response(body, status=503 if problems else 200)

    async def _metrics_page(self, _: web.Request) -> web.Response:
        from aiohttp import web

        if self._metrics is None:  # still starting, or a process without metrics (ops page)
            if self._ready is None:
                return web.Response(status=503, text=STARTING)
            return web.Response(status=404, text="this process serves no metrics")
        body, content_type = await self._metrics()
        return web.Response(body=body, headers={"Content-Type": content_type})


@dataclass
class Start:
    """The running process's probes and stop event (set by SIGTERM or SIGINT)."""

    probes: Probes
    stop: asyncio.Event

    async def until_stopped(self, work: Awaitable[T]) -> T:
        """`work`'s result, or `Stopped` (the work cancelled) when the stop comes first."""
        task = asyncio.ensure_future(work)
        stopping = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise Stopped


@contextlib.asynccontextmanager
async def starting(host: str, port: int | None) -> AsyncIterator[Start]:
    """The probes served and the signals heeded, for the whole life of the process."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    probes = Probes(host, port)
    try:
        await probes.start()
        yield Start(probes, stop)
    finally:
        await probes.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def shown_url(url: str) -> str:
    """A URL as an operator may read it in a log: its password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(not a URL)"


def setting_problem(exc: BaseException, *, database_url: str, redis_url: str | None) -> str | None:
    """One line naming the setting whose value makes `exc` (Postgres or Redis refusing who
    we are, a URL no driver takes); None when `exc` is something else."""
    seen: BaseException | None = exc
    for _ in range(8):  # the drivers' errors arrive wrapped
        if seen is None:
            break
        state = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None)
        if state in _PG_REFUSALS:
            first = str(seen).splitlines()[0] if str(seen) else type(seen).__name__
            return (
                f"CODEMOJEX_DATABASE_URL ({shown_url(database_url)}): Postgres refused "
                f"{_PG_REFUSALS[state]}: {first}"
            )
        if isinstance(seen, AuthenticationError | AuthorizationError) or (
            isinstance(seen, ResponseError) and str(seen).startswith(("NOAUTH", "WRONGPASS"))
        ):
            return f"CODEMOJEX_REDIS_URL ({shown_url(redis_url or '')}): Redis refused it: {seen}"
        if isinstance(seen, sa_exc.NoSuchModuleError | sa_exc.ArgumentError):
            return (
                f"CODEMOJEX_DATABASE_URL ({shown_url(database_url)}): not a database URL "
                "Codemojex runs on (postgresql+asyncpg://… or sqlite+aiosqlite://…)"
            )
        seen = seen.__cause__ or seen.__context__
    return None
