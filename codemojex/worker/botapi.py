"""The PTB Bot the worker posts with."""

from __future__ import annotations

from telegram import Bot
from telegram.request import HTTPXRequest

from codemojex.settings import Settings


def make_bot(settings: Settings, *, connections: int = 32) -> Bot:
    """A PTB Bot for posting (not initialised: use `async with bot:`). PTB's default HTTP pool
    has ONE connection and a 1 s pool timeout, which turns a busy sender's concurrent posts
    into spurious TimedOut errors; the sender posts to many chats at once, so it gets a pool."""
    if settings.token is None:
        raise ValueError("the worker needs the bot token (CODEMOJEX_TOKEN) to post")
    request = HTTPXRequest(
        connection_pool_size=connections,
        pool_timeout=10.0,
        connect_timeout=5.0,
        read_timeout=10.0,
        write_timeout=10.0,
    )
    return Bot(
        settings.token.get_secret_value(),
        base_url=settings.bot_api_base_url,
        base_file_url=settings.bot_api_base_file_url,
        request=request,
    )
