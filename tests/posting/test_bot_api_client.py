"""The Bot API client the worker and the sender post with (worker/botapi.py `make_bot`:
python-telegram-bot over aiohttp, posting/request.py), against the Bot API stand-in: PTB's
answers and errors as its own client gives them, its timeouts honoured, whether a failed post
may have gone out said right, and its connections closed on shutdown, initialised or not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr
from telegram.error import BadRequest, NetworkError, RetryAfter, TimedOut

from codemojex.outages import outage_of, retry_after_ms
from codemojex.posting.request import AiohttpRequest
from codemojex.posting.sender import maybe_delivered
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.worker.botapi import PostingBot, make_bot
from tests.helpers.support import free_port

GROUP = -5001


def _bot(
    url: str,
    token: str,
    *,
    connections: int = 32,
    pool_timeout_s: float = 10.0,
    connect_timeout_s: float = 5.0,
    read_timeout_s: float = 10.0,
) -> PostingBot:
    settings = Settings(token=SecretStr(token), bot_api_base_url=url)
    return make_bot(
        settings.bot_api(),
        connections=connections,
        pool_timeout_s=pool_timeout_s,
        connect_timeout_s=connect_timeout_s,
        read_timeout_s=read_timeout_s,
    )


@pytest.fixture
async def posting(standin: StandIn) -> AsyncIterator[PostingBot]:
    standin.add_group(GROUP, "g")
    bot = _bot(standin.base_url, standin.token, read_timeout_s=0.5)
    try:
        yield bot
    finally:
        await bot.shutdown()


async def test_posts_go_through_aiohttp_and_shutdown_closes_them_uninitialised(
    standin: StandIn, posting: PostingBot
) -> None:
    """Never initialised (no getMe, as the worker and the sender post): it posts, and its
    shutdown closes its session all the same (PTB's own skips a Bot never initialised)."""
    request = posting.request
    assert isinstance(request, AiohttpRequest)
    sent = await posting.send_message(chat_id=GROUP, text="hello")
    assert [m.text for m in standin.sent_messages(GROUP)] == ["hello"]
    assert sent.message_id == standin.sent_messages(GROUP)[0].message_id
    assert not request.closed
    await posting.shutdown()
    assert request.closed


async def test_telegrams_refusals_are_ptbs_errors(standin: StandIn, posting: PostingBot) -> None:
    """A 429 is RetryAfter with its retry_after (PTB's own parsing of the answer), a 400
    BadRequest: neither may have gone out, and neither is an outage but the 429's wait."""
    standin.inject_429(count=1, retry_after=3, chat_id=GROUP)
    with pytest.raises(RetryAfter) as refused:
        await posting.send_message(chat_id=GROUP, text="too soon")
    assert retry_after_ms(refused.value) == 3000
    standin.inject_error(400, "Bad Request: message text is empty", count=1)
    with pytest.raises(BadRequest) as bad:
        await posting.send_message(chat_id=GROUP, text="x")
    assert not maybe_delivered(bad.value) and outage_of(bad.value) is None
    assert standin.sent_messages(GROUP) == []


async def test_a_read_timeout_is_timed_out_and_may_have_gone_out(
    standin: StandIn, posting: PostingBot
) -> None:
    """Telegram slower than the read timeout: TimedOut at the timeout (not later), a
    Telegram outage, and the post may have gone out (the stand-in carries it out after)."""
    standin.inject_latency(1.5, 1)
    start = time.monotonic()
    with pytest.raises(TimedOut) as timed_out:
        await posting.send_message(chat_id=GROUP, text="slow")
    assert time.monotonic() - start < 1.2
    assert maybe_delivered(timed_out.value) and outage_of(timed_out.value) == "telegram"
    await asyncio.sleep(1.3)
    assert [m.text for m in standin.sent_messages(GROUP)] == ["slow"]


async def test_no_free_connection_in_time_is_timed_out_and_never_went_out(
    standin: StandIn,
) -> None:
    """One connection, held by a slow post: the next waits the pool's and the connect's
    timeouts (aiohttp bounds the two together) and fails TimedOut, known not to have gone
    out."""
    standin.add_group(GROUP, "g")
    one = _bot(
        standin.base_url, standin.token, connections=1, pool_timeout_s=0.2, connect_timeout_s=0.2
    )
    try:
        standin.inject_latency(1.5, 1)
        slow = asyncio.ensure_future(one.send_message(chat_id=GROUP, text="slow"))
        await asyncio.sleep(0.2)
        start = time.monotonic()
        with pytest.raises(TimedOut) as timed_out:
            await one.send_message(chat_id=GROUP, text="queued")
        assert time.monotonic() - start < 1.0
        assert not maybe_delivered(timed_out.value)
        await slow
    finally:
        await one.shutdown()
    assert [m.text for m in standin.sent_messages(GROUP)] == ["slow"]


async def test_a_refused_connection_never_went_out(standin: StandIn) -> None:
    bot = _bot(f"http://127.0.0.1:{free_port()}/bot", standin.token, connect_timeout_s=1.0)
    try:
        with pytest.raises(NetworkError) as refused:
            await bot.send_message(chat_id=GROUP, text="nobody there")
    finally:
        await bot.shutdown()
    assert not maybe_delivered(refused.value) and outage_of(refused.value) == "telegram"


async def test_a_lost_answer_may_have_gone_out(standin: StandIn, posting: PostingBot) -> None:
    """The stand-in posts and drops the connection instead of answering: NetworkError, and
    the post may have gone out (it did)."""
    standin.inject_lost_response(1)
    with pytest.raises(NetworkError) as lost:
        await posting.send_message(chat_id=GROUP, text="lost")
    assert maybe_delivered(lost.value) and outage_of(lost.value) == "telegram"
    assert [m.text for m in standin.sent_messages(GROUP)] == ["lost"]
