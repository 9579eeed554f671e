"""The PTB Bot the worker posts with."""

from __future__ import annotations

from telegram import Bot
from telegram.request import HTTPXRequest

from codemojex import limits
from codemojex.settings import Settings


def make_bot(settings: Settings, *, connections: int = limits.BOTAPI_CONNECTIONS) -> Bot:
    """A PTB Bot for posting (not initialised: use `async with bot:`), with a pool of HTTP
    connections (limits.BOTAPI_CONNECTIONS says why)."""
    if settings.token is None:
        raise ValueError("the worker needs the bot token (CODEMOJEX_TOKEN) to post")
    request = HTTPXRequest(
        connection_pool_size=connections,
        pool_timeout=limits.BOTAPI_POOL_TIMEOUT_S,
        connect_timeout=limits.BOTAPI_CONNECT_TIMEOUT_S,
        read_timeout=limits.BOTAPI_READ_TIMEOUT_S,
        write_timeout=limits.BOTAPI_WRITE_TIMEOUT_S,
    )
    return Bot(
        settings.token.get_secret_value(),
        base_url=settings.bot_api_base_url,
        base_file_url=settings.bot_api_base_file_url,
        request=request,
    )
