"""`codemojex bot`: the bot process, polling by default, a webhook when configured."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from telegram import Bot
from telegram.error import InvalidToken

from codemojex.bot.app import build_application, running
from codemojex.bot.webhook import WeakWebhook, webhook_config
from codemojex.db import make_engine, make_sessionmaker
from codemojex.limits import RETRIES
from codemojex.ops.collect import BotCollector
from codemojex.ops.server import ProcessOps
from codemojex.ops.startup import Start, starting
from codemojex.outages import OutageLasted, retrying
from codemojex.runtime import make_lanes, redis_client, settle_process, warn_without_persistence

if TYPE_CHECKING:  # Settings sits above its readers: they take it, never build it
    from codemojex.settings import Settings

TOKEN_REJECTED = (
    "the token was rejected by Telegram: check CODEMOJEX_TOKEN (a revoked or mistyped token; "
    "@BotFather shows the current one)"
)


STANDBY = "standby: another process polls this bot (one poller per token); this one waits"


class StartRefused(Exception):
    """The bot cannot start with these settings; str() says why, without any secret."""


def check_settings(settings: Settings) -> None:
    """StartRefused when the settings alone cannot work (a weak webhook secret): checked
    before anything is connected to."""
    if settings.webhook_url:
        try:
            webhook_config(settings)
        except WeakWebhook as exc:
            raise StartRefused(str(exc)) from None


def run_bot(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM (`serve` in a process of its own: its start-up's probes and
    signals, ops/startup.py)."""

    async def alone() -> None:
        async with starting(settings.metrics_host, settings.metrics_port) as start:
            await serve(settings, start)

    asyncio.run(alone())


async def serve(settings: Settings, start: Start) -> None:
    """Run until `start.stop` (SIGTERM, SIGINT). StartRefused when the settings cannot work:
    a weak webhook secret (before anything is started) or a token Telegram rejects
    (python-telegram-bot's InvalidToken names the token, so it is replaced by a message
    that does not)."""
    check_settings(settings)
    try:
        await _serve(settings, start)
    except InvalidToken:
        raise StartRefused(TOKEN_REJECTED) from None


async def _serve(settings: Settings, start: Start) -> None:
    stop = start.stop
    redis = redis_client(settings)
    await warn_without_persistence(redis)
    # As many connections as updates handled at once (up to CODEMOJEX_DB_POOL_SIZE: a guess
    # needs none), so that none is opened per update.
    engine = make_engine(
        settings.database_url,
        pool_size=min(settings.bot_concurrency, settings.db_pool_size),
        pool_overflow=settings.db_pool_overflow,
    )
    lanes = make_lanes(redis, settings)
    sessionmaker = make_sessionmaker(engine)
    try:
        application = build_application(
            settings, lanes=lanes, sessionmaker=sessionmaker, redis=redis
        )
        if not await _bot_api_answers(application.bot, start):
            return  # stopped while waiting for it
        async with running(application, webhook=bool(settings.webhook_url), stop=stop) as front:
            ops = ProcessOps(
                "bot",
                settings,
                redis=redis,
                engine=engine,
                sessionmaker=sessionmaker,
                lanes=lanes,
                collectors=[
                    BotCollector(
                        application.bot_data.guesses.outcomes, front.door.counts, front.gauges
                    )
                ],
                problems=lambda: {"bot": STANDBY} if front.standby else {},
                probes=start.probes,
            )
            await ops.start()
            settle_process()
            try:
                await stop.wait()
            finally:
                await ops.stop()
    finally:
        await engine.dispose()
        await redis.aclose()


async def _bot_api_answers(bot: Bot, start: Start) -> bool:
    """Start-up: the Bot API's getMe (python-telegram-bot's initialize), a Bot API that does
    not answer waited out as an outage (/readyz saying so meanwhile) rather than a traceback;
    False when the stop came first. A token Telegram rejects is raised (InvalidToken)."""

    def note(exc: BaseException) -> None:
        start.probes.waiting["telegram"] = f"waiting for the Bot API (start-up): {_name(exc)}"

    try:
        await retrying(
            "telegram",
            RETRIES.loop,
            where="the start-up Bot API check",
            stop=start.stop,
            on_failure=note,
        )(bot.initialize)()
    except OutageLasted:
        return False
    start.probes.waiting.pop("telegram", None)
    return True


def _name(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]
