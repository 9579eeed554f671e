"""`codemojex bot`: the bot process, polling by default, a webhook when configured."""

from __future__ import annotations

import asyncio
import signal

from telegram.error import InvalidToken

from codemojex.bot.app import build_application, running
from codemojex.bot.context import BotConfig
from codemojex.bot.webhook import WeakWebhook
from codemojex.db import make_engine, make_sessionmaker
from codemojex.db.engine import DB_POOL_SIZE
from codemojex.ops.collect import BotCollector
from codemojex.ops.server import MetricsConfig, ProcessOps
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
    """Run until SIGINT/SIGTERM, on the Redis and database of `runtime`, serving /metrics
    as `metrics` says. StartRefused when the settings cannot work: a weak webhook secret
    (before anything is started) or a token Telegram rejects (python-telegram-bot's
    InvalidToken names the token, so it is replaced by a message that does not)."""
    check_settings(config)
    try:
        asyncio.run(_serve(config, runtime, metrics))
    except InvalidToken:
        raise StartRefused(TOKEN_REJECTED) from None


async def _serve(config: BotConfig, runtime: RuntimeConfig, metrics: MetricsConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    redis = redis_client(runtime)
    await warn_without_persistence(redis)
    # As many connections as updates handled at once (up to engine.DB_POOL_SIZE: a guess
    # needs none), so that none is opened per update.
    engine = make_engine(runtime.database_url, pool_size=min(config.bot_concurrency, DB_POOL_SIZE))
    lanes = make_lanes(redis, runtime)
    sessionmaker = make_sessionmaker(engine)
    try:
        application = build_application(config, lanes=lanes, sessionmaker=sessionmaker, redis=redis)
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
