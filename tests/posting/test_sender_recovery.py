"""What a sender does with the rows of a sender that died, by their Redis markers (real Redis,
real Postgres, the Bot API stand-in): "posted" → only marked; "sending" (intent) without
"posted" → the `ambiguous` policy; neither → posted. And how outages are logged. The marker
tests (`redis_rc`) run on a Redis Cluster too."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex.db import Outbox, store
from codemojex.posting.pacer import Wait
from codemojex.posting.sender import OutboxSender
from codemojex.redistypes import AnyRedis
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.worker.botapi import make_bot
from tests.posting.test_sender import (
    _zero,
    add_rows,
    lines_posted,
    new_sender,
    run_for,
    run_senders,
    unsent,
)
from tests.support import free_port


async def _rows(sm: async_sessionmaker[AsyncSession], chat_id: int) -> dict[str, Outbox]:
    async with sm() as s:
        rows = (await s.execute(select(Outbox).where(Outbox.chat_id == chat_id))).scalars()
        out = {r.text: r for r in rows}
        await s.commit()
    return out


async def _markers(redis: AnyRedis, queue: str) -> list[bytes]:
    return [k async for k in redis.scan_iter(match=f"cmx:{{{queue}}}:send:*:*")]


@pytest.mark.parametrize("policy", ["repost", "assume_sent"])
async def test_rows_of_a_dead_sender_are_sorted_out_by_their_markers(
    policy: str,
    redis_rc: AnyRedis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sender claimed three rows and died: one it had posted and recorded ("posted"), one
    it was posting (intent only: Telegram may or may not have it), one it had not reached.
    Its row claim runs out; the next sender takes over."""
    chat = -2140
    standin.add_group(chat, "takeover")
    await add_rows(sessionmaker, chat, ["was posted", "was being posted", "not reached"])
    async with sessionmaker() as s:
        claimed = await store.claim_outbox(s, 3, 0.3, "dead-sender", chat_id=chat)
    by_text = {r.text: r.id for r in claimed}
    prefix = f"cmx:{{{queue_name}}}:send"
    await redis_rc.set(f"{prefix}:posted:{by_text['was posted']}", 4242)
    await redis_rc.set(f"{prefix}:sending:{by_text['was posted']}", "dead-sender:1")
    await redis_rc.set(f"{prefix}:sending:{by_text['was being posted']}", "dead-sender:1")
    await asyncio.sleep(0.35)

    sender = new_sender(sessionmaker, bot, redis_rc, queue_name, ambiguous=policy)
    with caplog.at_level(logging.WARNING, logger="codemojex.posting.sender"):
        await run_senders([sender], lambda: _zero(sessionmaker), limit_s=20)

    if policy == "repost":
        assert lines_posted(standin, chat) == Counter(["was being posted", "not reached"])
    else:
        assert lines_posted(standin, chat) == Counter(["not reached"])
    rows = await _rows(sessionmaker, chat)
    assert rows["was posted"].sent_message_id == 4242
    assert rows["not reached"].sent_message_id is not None
    if policy == "repost":
        assert rows["was being posted"].sent_message_id is not None
    else:
        being = rows["was being posted"]
        assert being.sent_at is not None and being.sent_message_id is None
    assert sender.stats.recovered_rows == 1
    assert sender.stats.recovered_ambiguous == 1
    # The warning names the row, so that a repeated message can be traced to it.
    assert any(
        f"sender died ({by_text['was being posted']})" in r.getMessage() for r in caplog.records
    )
    # Both kinds of marker live only between a post and its mark_sent.
    assert await _markers(redis_rc, queue_name) == []


async def test_each_post_notes_its_rows_as_being_sent_until_marked(
    redis_rc: AnyRedis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """While a post is in flight its rows carry an intent marker (that is what tells the next
    sender a crash happened mid-post); once marked sent, no marker is left."""
    chat = -2141
    standin.add_group(chat, "intent")
    await add_rows(sessionmaker, chat, ["slow one"])
    [row_id] = [r.id for r in (await _rows(sessionmaker, chat)).values()]
    standin.inject_latency(1.0, 1)
    sender = new_sender(sessionmaker, bot, redis_rc, queue_name)
    seen: list[str] = []

    async def watch() -> None:
        while not standin.sent_messages(chat):
            raw = await redis_rc.get(f"cmx:{{{queue_name}}}:send:sending:{row_id}")
            if raw is not None:
                seen.append(raw.decode() if isinstance(raw, bytes) else raw)
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    await run_senders([sender], lambda: _zero(sessionmaker), limit_s=20)
    await watcher
    assert seen and seen[-1].startswith(sender.owner)
    assert lines_posted(standin, chat) == Counter(["slow one"])
    assert await _markers(redis_rc, queue_name) == []


async def test_a_post_known_not_to_have_gone_out_leaves_no_intent(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    """A refused connection posted nothing: the intent marker is withdrawn, so that even an
    "assume_sent" sender taking over later posts the row instead of dropping it."""
    chat = -2142
    standin.add_group(chat, "refused")
    await add_rows(sessionmaker, chat, ["must not be dropped"])
    down_bot = make_bot(
        Settings(
            token=SecretStr(standin.token),
            bot_api_base_url=f"http://127.0.0.1:{free_port()}/bot",
        )
    )
    first = new_sender(sessionmaker, down_bot, redis_r, queue_name, ambiguous="assume_sent")
    await run_for(first, 1.0)
    await down_bot.shutdown()
    assert first.stats.errors >= 1 and first.stats.ambiguous == 0
    assert await unsent(sessionmaker) == 1
    assert await _markers(redis_r, queue_name) == []

    async with make_bot(
        Settings(token=SecretStr(standin.token), bot_api_base_url=standin.base_url)
    ) as up_bot:
        again = new_sender(sessionmaker, up_bot, redis_r, queue_name, ambiguous="assume_sent")
        await run_senders([again], lambda: _zero(sessionmaker), limit_s=20)
    assert lines_posted(standin, chat) == Counter(["must not be dropped"])
    assert again.stats.recovered_ambiguous == 0


async def test_a_redis_outage_is_one_warning_without_traceback(
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat = -2143
    standin.add_group(chat, "no redis")
    await add_rows(sessionmaker, chat, ["waits"])
    down = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    sender = OutboxSender(sessionmaker, bot, down, namespace=queue_name, poll_s=0.2)
    with caplog.at_level(logging.WARNING):
        await run_for(sender, 0.8, poke=chat)
    await down.aclose()
    # the outage is told by codemojex.outages, once, whoever in the sender met it
    loggers = ("codemojex.posting.sender", "codemojex.outages")  # and the sender's modules
    records = [r for r in caplog.records if r.name.startswith(loggers)]
    told = [r.getMessage() for r in records if "unavailable (ConnectionError" in r.getMessage()]
    assert len(told) == 1 and "redis" in told[0] and "outbox sender" in told[0]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in records)
    assert await unsent(sessionmaker) == 1


async def test_a_bug_is_still_logged_with_its_traceback(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chat = -2144
    standin.add_group(chat, "bug")
    await add_rows(sessionmaker, chat, ["waits"])
    sender = new_sender(sessionmaker, bot, redis_r, queue_name)

    async def broken(chat_id: int) -> Wait:
        raise KeyError("a bug")

    monkeypatch.setattr(sender.pacer, "wait", broken)
    with caplog.at_level(logging.WARNING, logger="codemojex.posting.sender"):
        await run_for(sender, 0.5, poke=chat)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and errors[0].exc_info is not None
