"""`codemojex bot`: the bot process, polling by default, a webhook when configured."""

from __future__ import annotations

from codemojex.bot.app import ALLOWED_UPDATES, build_application, webhook_options
from codemojex.bot.context import CodemojexApp
from codemojex.db import make_engine, make_sessionmaker
from codemojex.ops.collect import BotCollector
from codemojex.ops.server import ProcessOps
from codemojex.runtime import make_lanes, redis_client
from codemojex.settings import Settings


def run_bot(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM. python-telegram-bot owns the event loop here; the Redis client
    and the engine connect lazily inside it and are closed by post_shutdown."""
    redis = redis_client(settings)
    engine = make_engine(settings.database_url)
    lanes = make_lanes(redis, settings)
    sessionmaker = make_sessionmaker(engine)
    application = build_application(settings, lanes=lanes, sessionmaker=sessionmaker, redis=redis)
    ops = ProcessOps(
        "bot",
        settings,
        redis=redis,
        engine=engine,
        sessionmaker=sessionmaker,
        lanes=lanes,
        collectors=[BotCollector(application.bot_data.guess_outcomes)],
    )
    registered = application.post_init

    async def start_ops(app: CodemojexApp) -> None:
        if registered is not None:
            await registered(app)
        await ops.start()

    async def close_storage(_: CodemojexApp) -> None:
        await ops.stop()
        await engine.dispose()
        await redis.aclose()

    application.post_init = start_ops

    application.post_shutdown = close_storage
    if settings.webhook_url:
        application.run_webhook(**webhook_options(settings))
    else:
        application.run_polling(allowed_updates=ALLOWED_UPDATES)
