"""`codemojex bot`: the bot process, polling by default, a webhook when configured."""

from __future__ import annotations

import asyncio

from telegram import Bot
from telegram.error import InvalidToken

from codemojex.bot.app import build_application, running
from codemojex.bot.context import BotConfig
from codemojex.bot.webhook import WeakWebhook
from codemojex.db import make_engine, make_sessionmaker
from codemojex.limits import RETRIES
from codemojex.ops.collect import BotCollector
from codemojex.ops.server import MetricsConfig, ProcessOps
from codemojex.ops.startup import Start, starting
from codemojex.outages import OutageLasted, retrying
from codemojex.runtime import (
    RuntimeConfig,
    make_lanes,
    redis_client,
    settle_process,
    warn_without_persistence,
)

TOKEN_REJECTED = (
    "the token was rejected by Telegram: check CODEMOJEX_TOKEN (a revoked or mistyped token; "
    "@BotFather shows the current one)"
)


STANDBY = "standby: another process polls this bot (one poller per token); this one waits"


class StartRefused(Exception):
    """The bot cannot start with these settings; str() says why, without any secret."""


def check_settings(config: BotConfig) -> None:
    """StartRefused when the settings alone cannot work (a weak webhook secret): checked
    before anything is connected to."""
    if config.webhook_url:
        try:
            config.webhook()
        except WeakWebhook as exc:
            raise StartRefused(str(exc)) from None


def run_bot(config: BotConfig, runtime: RuntimeConfig, metrics: MetricsConfig) -> None:
    """Run until SIGINT/SIGTERM (`serve` in a process of its own: its start-up's probes and
    signals, ops/startup.py)."""

    async def alone() -> None:
        async with starting(metrics.host, metrics.port) as start:
            await serve(config, runtime, metrics, start)

    asyncio.run(alone())


async def serve(
    config: BotConfig, runtime: RuntimeConfig, metrics: MetricsConfig, start: Start
) -> None:
    """Run until `start.stop` (SIGTERM, SIGINT), on the Redis and database of `runtime`,
    serving /metrics as `metrics` says. StartRefused when the settings cannot work: a weak
    webhook secret (before anything is started) or a token Telegram rejects
    (python-telegram-bot's InvalidToken names the token, so it is replaced by a message
    that does not)."""
    check_settings(config)
    try:
        await _serve(config, runtime, metrics, start)
    except InvalidToken:
        raise StartRefused(TOKEN_REJECTED) from None


async def _serve(
    config: BotConfig, runtime: RuntimeConfig, metrics: MetricsConfig, start: Start
) -> None:
    stop = start.stop
    redis = redis_client(runtime)
    await warn_without_persistence(redis)
    # As many connections as updates handled at once (up to CODEMOJEX_DB_POOL_SIZE: a guess
    # needs none), so that none is opened per update.
    engine = make_engine(
        runtime.database_url,
        pool_size=min(config.bot_concurrency, runtime.db_pool_size),
        pool_overflow=runtime.db_pool_overflow,
    )
    lanes = make_lanes(redis, runtime)
    sessionmaker = make_sessionmaker(engine)
    try:
        application = build_application(config, lanes=lanes, sessionmaker=sessionmaker, redis=redis)
        if not await _bot_api_answers(application.bot, start):
            return  # stopped while waiting for it
        async with running(application, webhook=bool(config.webhook_url), stop=stop) as front:
            ops = ProcessOps(
                "bot",
                metrics,
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
