"""The PTB Bot the worker posts with."""

from __future__ import annotations

from telegram import Bot
from telegram.request import HTTPXRequest

from codemojex.values.botapi import BotApi


def make_bot(
    api: BotApi,
    *,
    connections: int = 32,
    pool_timeout_s: float = 10.0,
    connect_timeout_s: float = 5.0,
    read_timeout_s: float = 10.0,
    write_timeout_s: float = 10.0,
) -> Bot:
    """A PTB Bot for posting (not initialised: use `async with bot:`), with a pool of
    `connections` HTTP connections: python-telegram-bot's single default connection times out
    the sender's concurrent posts (one per chat in hand). Every call is bounded by the
    timeouts."""
    if api.token is None:
        raise ValueError("the worker needs the bot token (CODEMOJEX_TOKEN) to post")
    request = HTTPXRequest(
        connection_pool_size=connections,
        pool_timeout=pool_timeout_s,
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
        write_timeout=write_timeout_s,
    )
    return Bot(
        api.token.get_secret_value(),
        base_url=api.base_url,
        base_file_url=api.base_file_url,
        request=request,
    )
