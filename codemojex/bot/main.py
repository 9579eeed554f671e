"""`codemojex bot`: the bot process, polling by default, a webhook when configured."""

from __future__ import annotations

from codemojex.bot.app import ALLOWED_UPDATES, build_application, webhook_options
from codemojex.bot.context import CodemojexApp
from codemojex.db import make_engine, make_sessionmaker
from codemojex.runtime import make_lanes, redis_client
from codemojex.settings import Settings


def run_bot(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM. python-telegram-bot owns the event loop here; the Redis client
    and the engine connect lazily inside it and are closed by post_shutdown."""
    redis = redis_client(settings)
    engine = make_engine(settings.database_url)
    application = build_application(
        settings,
        lanes=make_lanes(redis, settings),
        sessionmaker=make_sessionmaker(engine),
        redis=redis,
    )

    async def close_storage(_: CodemojexApp) -> None:
        await engine.dispose()
        await redis.aclose()

    application.post_shutdown = close_storage
    if settings.webhook_url:
        application.run_webhook(**webhook_options(settings))
    else:
        application.run_polling(allowed_updates=ALLOWED_UPDATES)
