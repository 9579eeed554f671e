"""The PTB Bot the worker posts with."""

from __future__ import annotations

from telegram import Bot
from telegram.request import HTTPXRequest

from codemojex.limits import SENDER
from codemojex.settings import Settings


def make_bot(settings: Settings, *, connections: int = SENDER.botapi_connections) -> Bot:
    """A PTB Bot for posting (not initialised: use `async with bot:`), with a pool of HTTP
    connections (SENDER.botapi_connections says why)."""
    if settings.token is None:
        raise ValueError("the worker needs the bot token (CODEMOJEX_TOKEN) to post")
    request = HTTPXRequest(
        connection_pool_size=connections,
        pool_timeout=SENDER.botapi_pool_timeout_s,
        connect_timeout=SENDER.botapi_connect_timeout_s,
        read_timeout=SENDER.botapi_read_timeout_s,
        write_timeout=SENDER.botapi_write_timeout_s,
    )
    return Bot(
        settings.token.get_secret_value(),
        base_url=settings.bot_api_base_url,
        base_file_url=settings.bot_api_base_file_url,
        request=request,
    )
