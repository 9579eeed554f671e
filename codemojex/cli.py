"""The one command line: `codemojex bot | worker | ops | migrate | demo | lanes …`.

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
import json
import logging
import sys
from typing import Annotated

import typer
from pydantic import SecretStr, ValidationError

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
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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
        logging.getLogger("httpx").setLevel(logging.INFO if verbose else logging.WARNING)
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


def _require_schema(settings: Settings) -> None:
    """Bot and worker start only on a database at the latest schema: else one line and exit
    2 (a database that is down is waited for: one line when that starts, one when it ends)."""
    from codemojex.db import make_engine
    from codemojex.ops.health import wait_for_schema

    async def check() -> str | None:
        engine = make_engine(settings.database_url)
        try:
            return await wait_for_schema(engine)
        finally:
            await engine.dispose()

    problem = asyncio.run(check())
    if problem is not None:
        typer.echo(problem, err=True)
        raise typer.Exit(2)


@app.command()
def migrate() -> None:
    """Bring the database (CODEMOJEX_DATABASE_URL) to the latest schema."""
    from codemojex.db import upgrade

    settings = _start()
    upgrade(settings.database_url)
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
    from codemojex.bot.main import StartRefused, check_settings, run_bot

    try:
        check_settings(settings.bot())  # before any connection: the settings alone
        _require_schema(settings)
        run_bot(settings.bot(), settings.runtime(), settings.metrics())
    except StartRefused as exc:
        typer.echo(f"codemojex bot: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def worker(verbose: VerboseOption = False, wire_debug: WireDebugOption = False) -> None:
    """Run the ScoreWorker pool, the outbox sender and the round timer."""
    settings = _start(verbose, wire=wire_debug)
    _require_shared_redis(settings, "the worker")
    if settings.token is None:
        typer.echo("set CODEMOJEX_TOKEN: the worker posts results as the bot", err=True)
        raise typer.Exit(2)
    _require_schema(settings)
    from codemojex.worker.main import main as worker_main

    asyncio.run(
        worker_main(settings.worker(), settings.runtime(), settings.metrics(), settings.bot_api())
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
    _require_schema(settings)
    from codemojex.ops.page.main import run_ops

    asyncio.run(run_ops(settings.ops_page(), settings.runtime()))


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
    try:
        from codemojex.demo import DemoPlan, run_demo
    except ModuleNotFoundError as exc:  # fakeredis, rich: the demo extra
        typer.echo(
            f"the demo needs the demo extra ({exc.name} is missing): "
            "pip install -e '.[demo]' (make demo does it)",
            err=True,
        )
        raise typer.Exit(2) from None

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
