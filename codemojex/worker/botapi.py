"""The PTB Bot the worker and the sender post with."""

from __future__ import annotations

import asyncio

from telegram import Bot

from codemojex.posting.request import AiohttpRequest
from codemojex.values.botapi import BotApi


class PostingBot(Bot):
    """A Bot whose `shutdown` closes its connections whether or not it was initialised: PTB's
    skips a Bot never initialised, and the worker and the sender post through one (no getMe:
    a Bot API down at start-up must not hold them up)."""

    async def shutdown(self) -> None:
        await super().shutdown()
        await asyncio.gather(*(request.shutdown() for request in self._request))


def make_bot(
    api: BotApi,
    *,
    connections: int = 32,
    pool_timeout_s: float = 10.0,
    connect_timeout_s: float = 5.0,
    read_timeout_s: float = 10.0,
    write_timeout_s: float = 10.0,
) -> PostingBot:
    """A PTB Bot for posting (not initialised: use `async with bot:`, or `bot.shutdown()`
    after, which closes its connections), with a pool of `connections` HTTP connections:
    python-telegram-bot's single default connection times out the sender's concurrent posts
    (one per chat in hand). Its requests go through aiohttp (`AiohttpRequest`: a fraction of
    PTB's httpx client's CPU per post). Every call is bounded by the timeouts."""
    if api.token is None:
        raise ValueError("the worker needs the bot token (CODEMOJEX_TOKEN) to post")
    request = AiohttpRequest(
        connections=connections,
        pool_timeout=pool_timeout_s,
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
        write_timeout=write_timeout_s,
    )
    return PostingBot(
        api.token.get_secret_value(),
        base_url=api.base_url,
        base_file_url=api.base_file_url,
        request=request,
    )
