"""The one command line: `codemojex bot | worker | sender | ops | migrate | demo | lanes …`.

Every setting comes from the environment (CODEMOJEX_*, see codemojex/settings.py); flags here
only choose what to run and how much it says. Every command starts with `_start`: the settings
(exit 2 naming the wrong one), then logging, whose every line has the secrets of those
settings masked (codemojex.secrecy). `-v` puts Codemojex's own loggers at DEBUG and nothing
else: python-telegram-bot's and httpx's DEBUG lines carry every update and every request
body, message texts included (a round's code in its reveal). `--wire-debug` lets those
through too, and says so in a WARNING when it starts.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated

import typer
from pydantic import SecretStr, ValidationError

from codemojex.logformat import TEXT, formatter
from codemojex.ops.startup import Start, Stopped, starting
from codemojex.secrecy import ALONE_MIN, mask_logs, url_password
from codemojex.settings import Settings, load_settings

# No local variables in tracebacks: a frame's locals may hold a token.
app = typer.Typer(
    no_args_is_help=True, add_completion=False, help=__doc__, pretty_exceptions_show_locals=False
)
lanes_app = typer.Typer(
    no_args_is_help=True,
    help="Inspect and mend the lanes keyspace.",
    pretty_exceptions_show_locals=False,
)
app.add_typer(lanes_app, name="lanes")

# What `codemojex demo` imports from pyproject's demo extra: the in-process Redis stand-in
# (fakeredis, its Lua through lupa) and the terminal display.
DEMO_EXTRA = ("fakeredis", "lupa", "rich")


def _start(verbose: bool = False, *, quiet: bool = False, wire: bool = False) -> Settings:
    """The settings, then logging that masks their secrets in every line: Codemojex's own
    loggers at DEBUG with `verbose`, everything at DEBUG with `wire` (message texts
    included), WARNING only when `quiet` (the demo draws its own screen)."""
    settings = _settings()
    _logging(settings, verbose=verbose or wire, quiet=quiet, wire=wire)
    return settings


# Said at the start of a process run with --wire-debug, so that nobody leaves it on unawares.
WIRE_BANNER = (
    "WIRE DEBUG IS ON: every update and every Bot API request is logged in full, MESSAGE "
    "TEXTS INCLUDED (players' guesses and names, a round's or the daily's code in its "
    "reveal). Secrets are still masked. For debugging only: never in production, and "
    "delete these logs when done."
)


def _logging(settings: Settings, *, verbose: bool, quiet: bool, wire: bool) -> None:
    # Under -v only our own loggers go to DEBUG: the libraries' DEBUG lines are the wire
    # (python-telegram-bot's every update and request body, httpcore's traffic), and a
    # library logger nobody listed here stays out with them.
    level = logging.DEBUG if wire else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format=TEXT)
    for handler in logging.getLogger().handlers:  # text, or JSON lines (CODEMOJEX_LOG_FORMAT)
        handler.setFormatter(formatter(settings.log_format))
    # Whatever the logger and the level (python-telegram-bot logs its Bot API URL, which
    # holds the token, at DEBUG; httpx every call's URL at INFO).
    too_short = mask_logs(
        {
            "CODEMOJEX_TOKEN": _secret(settings.token),
            "CODEMOJEX_OPS_TOKEN": _secret(settings.ops_token),
            "CODEMOJEX_WEBHOOK_SECRET": _secret(settings.webhook_secret),
            "the password of CODEMOJEX_REDIS_URL": url_password(settings.redis_url),
            "the password of CODEMOJEX_DATABASE_URL": url_password(settings.database_url),
        }
    )
    if verbose:
        logging.getLogger("codemojex").setLevel(logging.DEBUG)
    if not wire:
        # httpx logs every Bot API call (its method, no body) at INFO: noise for an operator,
        # but what -v is for.
        # So does our own client (posting/request.py: the bot's getUpdates, the worker's and
        # the sender's posts).
        for client in ("httpx", "codemojex.posting.request"):
            logging.getLogger(client).setLevel(logging.INFO if verbose else logging.WARNING)
        # Alembic says which dialect it found at every schema check (start-up, /readyz).
        logging.getLogger("alembic").setLevel(logging.WARNING)
        # aiohttp logs every request of /metrics, /readyz and the ops page's refreshes.
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    log = logging.getLogger("codemojex.cli")
    for name in too_short:
        log.warning(
            "%s is too short to be kept out of the logs (under %d characters): use a longer one",
            name,
            ALONE_MIN,
        )
    if wire:
        log.warning(WIRE_BANNER)


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value else None


def _settings() -> Settings:
    """The settings, or exit 2 saying which one is wrong (no traceback)."""
    try:
        return load_settings()
    except ValidationError as exc:
        typer.echo(f"invalid settings: {exc}", err=True)
        raise typer.Exit(2) from None


def _require_shared_redis(settings: Settings, what: str) -> None:
    if not settings.redis_url:
        typer.echo(
            f"{what} runs as its own process and needs a shared Redis: set CODEMOJEX_REDIS_URL "
            "(the in-process stand-in is for `codemojex demo` only).",
            err=True,
        )
        raise typer.Exit(2)


def _run_process(settings: Settings, run: Callable[[Start], Awaitable[object]]) -> None:
    """A long-running process: /healthz from its first second and /readyz saying what it
    waits for (ops/startup.py), SIGTERM heeded at any moment; the database waited for at a
    schema this version serves, then `run`. A setting that cannot work (a role, a password,
    a URL), or a schema it cannot serve, is one line and exit 2; SIGTERM during start-up,
    one line and exit 0."""

    async def process() -> int:
        async with starting(settings.metrics_host, settings.metrics_port) as start:
            try:
                problem = await _servable(settings, start)
                if problem is not None:
                    typer.echo(problem, err=True)
                    return 2
                await run(start)
            except Stopped:
                logging.getLogger("codemojex.cli").info("stopped during start-up")
        return 0

    code = asyncio.run(process())
    if code:
        raise typer.Exit(code)


async def _servable(settings: Settings, start: Start) -> str | None:
    """None when this version serves the database (a warning when it is a step ahead);
    else why not, in one line. Waits out an outage; `Stopped` when the stop comes first."""
    from codemojex.db import make_engine
    from codemojex.ops.health import wait_for_schema
    from codemojex.outages import OutageLasted

    try:
        engine = make_engine(settings.database_url)
    except Exception as exc:
        return _setting_problem(exc, settings) or f"CODEMOJEX_DATABASE_URL: {exc}"
    try:
        schema = await start.until_stopped(
            wait_for_schema(engine, stop=start.stop, waiting=start.probes.waiting)
        )
    except OutageLasted:
        raise Stopped from None
    except Stopped:
        raise
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        return _setting_problem(exc, settings) or (
            f"cannot read the database's schema: {type(exc).__name__}: {first}"
        )
    finally:
        await engine.dispose()
    if schema.warning is not None:
        logging.getLogger("codemojex.cli").warning(schema.warning)
    return schema.problem or await _redis_servable(settings, start)


async def _redis_servable(settings: Settings, start: Start) -> str | None:
    """None once Redis answers (an outage waited out, /readyz saying so meanwhile); one line
    naming CODEMOJEX_REDIS_URL when Redis refuses who we are (a wrong password, a user)."""
    from codemojex.limits import RETRIES
    from codemojex.outages import OutageLasted, retrying
    from codemojex.runtime import redis_client

    class Refused(Exception):
        """Redis refused the URL's credentials: no outage, nothing to wait for."""

    def note(exc: BaseException) -> None:
        start.probes.waiting["redis"] = f"waiting for Redis (start-up): {type(exc).__name__}"

    redis = redis_client(settings.runtime())

    async def ping() -> None:
        try:
            await redis.ping()
        except Exception as exc:
            problem = _setting_problem(exc, settings)
            if problem is not None:
                raise Refused(problem) from None
            raise

    try:
        await start.until_stopped(
            retrying(
                "redis",
                RETRIES.loop,
                where="the start-up Redis check",
                stop=start.stop,
                on_failure=note,
            )(ping)()
        )
    except OutageLasted:
        raise Stopped from None
    except Refused as exc:
        return str(exc)
    finally:
        start.probes.waiting.pop("redis", None)
        await redis.aclose()
    return None


def _shown(url: str) -> str:
    from codemojex.ops.startup import shown_url

    return shown_url(url)


def _setting_problem(exc: BaseException, settings: Settings) -> str | None:
    from codemojex.ops.startup import setting_problem

    return setting_problem(exc, database_url=settings.database_url, redis_url=settings.redis_url)


@app.command()
def migrate() -> None:
    """Bring the database (CODEMOJEX_DATABASE_URL) to the latest schema."""
    from codemojex.db import upgrade
    from codemojex.outages import outage_of

    settings = _start()
    try:
        upgrade(settings.database_url)
    except Exception as exc:
        problem = _setting_problem(exc, settings)
        if problem is None and outage_of(exc) is None:
            raise
        if problem is None:  # unreachable: said in one line, for the operator to retry
            first = str(exc).splitlines()[0] if str(exc) else ""
            where = _shown(settings.database_url)
            problem = (
                f"cannot reach Postgres at CODEMOJEX_DATABASE_URL ({where}): "
                f"{type(exc).__name__}: {first}"
            )
        typer.echo(f"codemojex migrate: {problem}", err=True)
        raise typer.Exit(2) from None
    typer.echo("database is at the latest revision")


VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Codemojex's own DEBUG lines (no message text)")
]
WireDebugOption = Annotated[
    bool,
    typer.Option(
        "--wire-debug",
        help="every update and Bot API request in full, MESSAGE TEXTS INCLUDED (implies -v); "
        "for debugging only",
    ),
]


@app.command()
def bot(verbose: VerboseOption = False, wire_debug: WireDebugOption = False) -> None:
    """Run the Telegram bot (polling, or webhook when CODEMOJEX_WEBHOOK_URL is set)."""
    settings = _start(verbose, wire=wire_debug)
    _require_shared_redis(settings, "the bot")
    if settings.token is None:
        typer.echo("set CODEMOJEX_TOKEN to the bot's token", err=True)
        raise typer.Exit(2)
    from codemojex.bot.main import StartRefused, check_settings, serve

    try:
        check_settings(settings.bot())  # before any connection: the settings alone
        _run_process(
            settings,
            lambda start: serve(settings.bot(), settings.runtime(), settings.metrics(), start),
        )
    except StartRefused as exc:
        typer.echo(f"codemojex bot: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def worker(verbose: VerboseOption = False, wire_debug: WireDebugOption = False) -> None:
    """Run the ScoreWorker pool, the outbox sender and the round timer."""
    from codemojex.worker.main import main

    _run_poster("worker", main, verbose, wire_debug)


@app.command()
def sender(verbose: VerboseOption = False, wire_debug: WireDebugOption = False) -> None:
    """Run an outbox sender of its own: posts results at the bot's learned pace, scaled like
    the worker (every sender shares the posting ring and the pace)."""
    from codemojex.worker.sender import main

    _run_poster("sender", main, verbose, wire_debug)


def _run_poster(
    role: str, main: Callable[..., Awaitable[object]], verbose: bool, wire_debug: bool
) -> None:
    """`codemojex worker` and `codemojex sender`: both post as the bot, so both need its token;
    `main` is the process's (worker/main.py, worker/sender.py)."""
    settings = _start(verbose, wire=wire_debug)
    _require_shared_redis(settings, f"the {role}")
    if settings.token is None:
        typer.echo(f"set CODEMOJEX_TOKEN: the {role} posts results as the bot", err=True)
        raise typer.Exit(2)
    _run_process(
        settings,
        lambda start: main(
            settings.worker(), settings.runtime(), settings.metrics(), settings.bot_api(), start
        ),
    )


@app.command()
def ops(verbose: VerboseOption = False) -> None:
    """Serve the operator page (CODEMOJEX_OPS_HOST:CODEMOJEX_OPS_PORT, login with
    CODEMOJEX_OPS_TOKEN): charts, rooms, dead guesses, pause/resume, ceilings."""
    from codemojex.ops.page.main import start_problem

    settings = _start(verbose)
    _require_shared_redis(settings, "the ops page")
    problem = start_problem(settings.ops_page())  # before any connection: the settings alone
    if problem is not None:
        typer.echo(f"codemojex ops: {problem}", err=True)
        raise typer.Exit(2)
    from codemojex.ops.page.main import run_ops

    _run_process(
        settings,
        lambda start: run_ops(settings.ops_page(), settings.runtime(), start.stop, start.probes),
    )


@app.command()
def demo(
    rooms: Annotated[int, typer.Option(help="quiet rooms besides the flooding one")] = 6,
    players: Annotated[int, typer.Option(help="players per quiet room")] = 3,
    flood_players: Annotated[int, typer.Option(help="players in the flooding room")] = 8,
    flood_burst: Annotated[
        int, typer.Option(help="guesses each flooding player pastes at once")
    ] = 30,
    seconds: Annotated[float, typer.Option(help="how long the rooms play")] = 40.0,
    seed: Annotated[int, typer.Option(help="seed for the simulated players")] = 7,
) -> None:
    """Play real rounds through the real bot and worker on embedded defaults, then summarise."""
    # The demo extra's modules are imported as the demo goes (the Redis stand-in once the
    # demo opens it): all of them are looked for first, so that a plain install gets one line.
    missing = [name for name in DEMO_EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        typer.echo(
            f"codemojex demo needs the demo extra ({', '.join(missing)} missing): "
            "pip install 'codemojex[demo]' (make demo does it in a checkout)",
            err=True,
        )
        raise typer.Exit(2)
    from codemojex.demo import DemoPlan, run_demo

    plan = DemoPlan(
        quiet_rooms=rooms,
        players_per_room=players,
        flood_players=flood_players,
        flood_burst=flood_burst,
        seconds=seconds,
        seed=seed,
    )
    sys.exit(asyncio.run(run_demo(_start(quiet=True), plan)))


async def _with_lanes(action: str, room: str | None) -> object:
    from codemojex.runtime import make_lanes, redis_client

    settings = _settings()
    # These scripts read the whole queue in one call: a large one takes longer than the hot
    # path's socket timeout allows.
    redis = redis_client(settings.runtime(), admin=True)
    try:
        lanes = make_lanes(redis, settings.runtime())
        if action == "check":
            return await lanes.check()
        if action == "repair":
            return await lanes.repair()
        return await lanes.snapshot(room)
    finally:
        await redis.aclose()


@lanes_app.command("check")
def lanes_check() -> None:
    """List every violated invariant of the lanes keyspace (exit 1 when there is any)."""
    settings = _start()
    _require_shared_redis(settings, "lanes check")
    faults = asyncio.run(_with_lanes("check", None))
    assert isinstance(faults, list)
    for fault in faults:
        typer.echo(fault)
    typer.echo(f"{len(faults)} fault(s)")
    raise typer.Exit(1 if faults else 0)


@lanes_app.command("repair")
def lanes_repair() -> None:
    """Recompute in-flight counts from the leases and rebuild both rings; print what changed."""
    settings = _start()
    _require_shared_redis(settings, "lanes repair")
    fixes = asyncio.run(_with_lanes("repair", None))
    assert isinstance(fixes, list)
    for fix in fixes:
        typer.echo(fix)
    typer.echo(f"{len(fixes)} fix(es)")


@lanes_app.command("snapshot")
def lanes_snapshot(
    room: Annotated[str | None, typer.Option(help="one room (ROM…)")] = None,
) -> None:
    """Depths, in-flight counts, ceilings, weights, ring order and pauses, as JSON."""
    settings = _start()
    _require_shared_redis(settings, "lanes snapshot")
    typer.echo(json.dumps(asyncio.run(_with_lanes("snapshot", room)), indent=2, default=str))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
