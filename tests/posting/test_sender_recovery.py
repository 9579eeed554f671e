"""What a sender does with the rows of a sender that died, by their Redis markers (real Redis,
real Postgres, the Bot API stand-in): "posted" → only marked; "sending" (intent) without
"posted" → the `ambiguous` policy; neither → posted. And how outages are logged. The marker
tests (`redis_rc`) run on a Redis Cluster too."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex.db import Outbox, make_engine, make_sessionmaker
from codemojex.posting.keys import Keys
from codemojex.posting.pace_policy import Wait
from codemojex.posting.sender import OutboxSender
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.values.redistypes import AnyRedis
from codemojex.worker.botapi import make_bot
from tests.helpers import writes
from tests.helpers.support import free_port
from tests.ops.proxy import TcpProxy
from tests.posting.test_sender import (
    _zero,
    add_rows,
    lines_posted,
    new_sender,
    run_for,
    run_senders,
    unsent,
)


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
    claimed = await writes.claim_outbox(sessionmaker, 3, 0.3, "dead-sender", chat_id=chat)
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
        ).bot_api()
    )
    first = new_sender(sessionmaker, down_bot, redis_r, queue_name, ambiguous="assume_sent")
    await run_for(first, 1.0)
    await down_bot.shutdown()
    assert first.stats.errors >= 1 and first.stats.ambiguous == 0
    assert await unsent(sessionmaker) == 1
    assert await _markers(redis_r, queue_name) == []

    async with make_bot(
        Settings(token=SecretStr(standin.token), bot_api_base_url=standin.base_url).bot_api()
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


@pytest.mark.parametrize(
    ("answer", "policy"),
    [("answered", "repost"), ("answered", "assume_sent"), ("timed out", "assume_sent")],
)
async def test_a_folded_post_is_not_posted_again_when_its_sender_dies_before_the_books(
    answer: str,
    policy: str,
    redis_rc: AnyRedis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    worker_pg_url: str,
    standin: StandIn,
    bot: Bot,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three rows folded into one message. Telegram takes it (answered, or it answers after
    the sender gave up waiting: the ambiguous delivery, booked as sent under "assume_sent"),
    and the sender marks every row the post carried as posted, in Redis; then Postgres goes
    away before the books say sent, and the sender stops. The next sender takes the rows
    over: every one of them is booked with the message that carried it, none posted again,
    none taken for a post the dead sender may or may not have made."""
    chat = -2145
    standin.add_group(chat, "folded")
    lines = ["first of three", "second of three", "third of three"]
    await add_rows(sessionmaker, chat, lines)
    row_ids = sorted(r.id for r in (await _rows(sessionmaker, chat)).values())
    # The first sender reaches Postgres through a proxy, cut while its post is in flight.
    target = urlsplit(worker_pg_url)
    assert target.hostname is not None and target.port is not None
    proxy = TcpProxy(free_port(), target.hostname, target.port)
    await proxy.start()
    cut_url = worker_pg_url.replace(target.netloc, f"{target.username}@127.0.0.1:{proxy.port}")
    engine = make_engine(cut_url)
    # Answered after 1 s, inside the sender's patience (2.5 s); or after 4 s, beyond it.
    standin.inject_latency(1.0 if answer == "answered" else 4.0, 1)
    first = new_sender(
        make_sessionmaker(engine),
        bot,
        redis_rc,
        queue_name,
        ambiguous=policy,
        post_timeout_s=2.5,
        claim_lease_s=6.0,
        chat_lease_ms=3000,
    )
    keys = Keys(queue_name)
    stop = asyncio.Event()
    task = asyncio.create_task(first.run(stop))
    first.poke(chat)
    try:
        await _until(lambda: _exists(redis_rc, keys.sending(row_ids[0])), "no post began")
        await proxy.stop()  # the post is in flight: the books are out of reach from now on
        await _until(lambda: _exists(redis_rc, keys.posted(row_ids[0])), "nothing marked posted")
        await asyncio.sleep(0.3)  # (every marker is set in the same call)
        stop.set()
        await asyncio.wait_for(task, 30)
        post = await standin.wait_for_sent(None, 10, chat_id=chat)
    finally:
        stop.set()
        await proxy.stop()
        await engine.dispose()
    assert post.text.split("\n") == lines  # one message carried the three rows
    assert await unsent(sessionmaker) == 3  # the books never heard of it

    await asyncio.sleep(6.0)  # the dead sender's claim on the rows runs out
    second = new_sender(sessionmaker, bot, redis_rc, queue_name, ambiguous=policy)
    with caplog.at_level(logging.WARNING, logger="codemojex.posting.sender"):
        await run_senders([second], lambda: _zero(sessionmaker), limit_s=30)

    assert standin.sent_messages(chat) == [post]  # nothing posted again
    books = await _rows(sessionmaker, chat)
    expected = post.message_id if answer == "answered" else None
    assert [books[line].sent_message_id for line in lines] == [expected] * 3
    assert second.stats.recovered_rows == 3
    assert second.stats.recovered_ambiguous == 0
    assert not any("sender died" in r.getMessage() for r in caplog.records)
    assert await _markers(redis_rc, queue_name) == []


async def _exists(redis: AnyRedis, key: str) -> bool:
    return bool(await redis.exists(key))


async def _until(check: Callable[[], Awaitable[bool]], what: str, limit_s: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)
