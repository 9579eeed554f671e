"""The outbox sender against the Bot API stand-in (through PTB's HTTP stack), on the real
Redis (pacing, chat leases) and the real Postgres (outbox claims). The tests taking
`redis_rc` run on a Redis Cluster too (the fence, the markers' MGET/DEL and pipeline)."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex.db import Outbox, make_engine, make_sessionmaker, store
from codemojex.lanes import Lanes
from codemojex.posting.fold import tg_len
from codemojex.posting.keys import Keys
from codemojex.posting.pace_policy import PacePolicy
from codemojex.posting.pacer import Pacer
from codemojex.posting.ring import PostingRing
from codemojex.posting.sender import OutboxSender
from codemojex.posting.sender.delivery import RECHECK_MS, Delivery
from codemojex.posting.sender.stats import SenderStats
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.values.clock import utcnow
from codemojex.values.redistypes import AnyRedis
from codemojex.values.types import Message
from codemojex.worker.botapi import make_bot
from codemojex.worker.score import ScoreWorker
from tests.helpers import writes
from tests.helpers.support import free_port
from tests.ops.proxy import TcpProxy
from tests.worker.conftest import enqueue_guess, make_table


async def unsent(sm: async_sessionmaker[AsyncSession]) -> int:
    async with sm() as s:
        n = (
            await s.execute(
                select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
            )
        ).scalar_one()
        await s.commit()
    return int(n)


async def run_senders(
    senders: list[OutboxSender],
    until: Callable[[], Awaitable[bool]],
    limit_s: float = 60.0,
    during: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> None:
    """Run the senders (and `during`, e.g. a producer) until `until()` holds, then stop them."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(s.run(stop)) for s in senders]
    producer = asyncio.create_task(during()) if during else None
    deadline = time.monotonic() + limit_s
    try:
        if producer:
            await producer
        while not await until():
            assert time.monotonic() < deadline, "senders did not drain the outbox in time"
            for t in tasks:
                if t.done():
                    t.result()
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def run_for(sender: OutboxSender, seconds: float, poke: int | None = None) -> None:
    """Run one sender for a while (poking `poke`'s chat first), then stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    if poke is not None:
        sender.poke(poke)
    await asyncio.sleep(seconds)
    stop.set()
    await task


async def add_rows(
    sm: async_sessionmaker[AsyncSession], chat_id: int, texts: list[str], spacing_s: float = 0.0
) -> None:
    for text in texts:
        async with sm() as s:
            await writes.write_messages(sm, [Message(chat_id, text, "notice", None)], utcnow())
            await s.commit()
        if spacing_s:
            await asyncio.sleep(spacing_s)


def lines_posted(standin: StandIn, chat_id: int | None = None) -> Counter[str]:
    return Counter(
        line for m in standin.sent_messages(chat_id) for line in m.text.split("\n") if line
    )


def new_sender(
    sm: async_sessionmaker[AsyncSession],
    bot: Bot,
    redis: AnyRedis,
    namespace: str,
    **kw: object,
) -> OutboxSender:
    return OutboxSender(sm, bot, redis, namespace=namespace, poll_s=0.2, **kw)  # type: ignore[arg-type]


async def test_scored_guesses_are_posted_as_replies_in_a_quiet_room(
    redis_rc: AnyRedis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    lanes = Lanes(redis_rc, queue=queue_name)
    table = await make_table(sessionmaker, standin, -2001)
    ann = next(iter(table.players))
    sender = new_sender(sessionmaker, bot, redis_rc, queue_name)
    # The round announcement goes out first, on its own.
    await run_senders([sender], lambda: _zero(sessionmaker))
    [announce] = standin.sent_messages(table.chat_id)

    await enqueue_guess(lanes, standin, table, ann, table.wrong_guess())
    worker = ScoreWorker(sessionmaker)
    batch = await lanes.wclaim(10_000)
    await worker(batch)
    await lanes.ack_many(batch)
    await run_senders([sender], lambda: _zero(sessionmaker))

    posted = standin.sent_messages(table.chat_id)
    assert len(posted) == 2
    guess_message = posted[1].reply_to_message_id
    assert guess_message is not None and guess_message != announce.message_id
    assert "→" in posted[1].text
    async with sessionmaker() as s:
        rows = list((await s.execute(select(Outbox).order_by(Outbox.id))).scalars())
        await s.commit()
    assert [r.sent_message_id for r in rows] == [announce.message_id, posted[1].message_id]
    assert sender.stats.replies >= 1


async def _zero(sm: async_sessionmaker[AsyncSession]) -> bool:
    return await unsent(sm) == 0


async def test_burst_for_one_chat_is_coalesced_within_the_pace(
    redis_rc: AnyRedis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    chat = -2002
    standin.add_group(chat, "busy")
    standin.enforce_rate_limits()
    texts = [f"row {i:03d} 🍎🍌" for i in range(60)]
    sender = new_sender(sessionmaker, bot, redis_rc, queue_name)
    await run_senders(
        [sender],
        lambda: _zero(sessionmaker),
        during=lambda: add_rows(sessionmaker, chat, texts, spacing_s=0.05),
    )
    posted = standin.sent_messages(chat)
    assert standin.rate_violations == 0
    assert lines_posted(standin, chat) == Counter(texts)
    # Sixty results in about three seconds: a handful of messages, not sixty replies.
    assert len(posted) <= 10
    assert sender.stats.coalesced_messages >= 1
    assert sender.stats.rows_sent == 60
    # Rows come out in the order they were written.
    order = [line for m in posted for line in m.text.split("\n")]
    assert order == texts


async def test_a_backlog_longer_than_a_message_is_split(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    chat = -2003
    standin.add_group(chat, "backlog")
    standin.enforce_rate_limits()
    texts = [f"{i:04d} " + "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)" for i in range(200)]
    texts.append("👨‍👩‍👧" * 1000)  # one row longer than a message by itself
    await add_rows(sessionmaker, chat, texts)
    sender = new_sender(sessionmaker, bot, redis_r, queue_name)
    await run_senders([sender], lambda: _zero(sessionmaker))
    posted = standin.sent_messages(chat)
    assert standin.rate_violations == 0
    assert all(tg_len(m.text) <= 4096 for m in posted)
    assert lines_posted(standin, chat) - Counter(texts[-1:]) >= Counter(texts[:-1])
    assert "".join(m.text for m in posted[-2:]) == texts[-1]
    assert len(posted) <= 8


async def test_429_storm_delays_but_loses_and_duplicates_nothing(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    chats = [-2010, -2011, -2012]
    for chat in chats:
        standin.add_group(chat, f"g{chat}")
    standin.enforce_rate_limits()
    standin.inject_429(seconds=2.5, retry_after=1)
    expected: Counter[str] = Counter()
    for chat in chats:
        texts = [f"{chat} row {i}" for i in range(10)]
        expected.update(texts)
        await add_rows(sessionmaker, chat, texts)
    sender = new_sender(sessionmaker, bot, redis_r, queue_name)
    await run_senders([sender], lambda: _zero(sessionmaker))
    assert lines_posted(standin) == expected
    assert sender.stats.retry_after >= 1
    assert standin.rate_violations == 0


async def test_results_that_are_not_replies_go_to_their_forum_topic(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """A reply lands in its guess's topic anyway; a tapped guess's result (no message to reply
    to) and a busy topic's folded results reply to nothing: they carry the topic themselves."""
    chat = -2025
    standin.add_user(2025, "Ann")
    standin.add_group(chat, "forum", admins=[2025], forum=True)
    topic = standin.add_topic(chat, "Puzzles", 2025)

    async def write(*rows: tuple[str, int | None]) -> None:
        async with sessionmaker() as s:
            messages = [
                Message(chat, text, "result", None, reply_to, player_name="Ann", thread_id=topic)
                for text, reply_to in rows
            ]
            await writes.write_messages(sessionmaker, messages, utcnow())
            await s.commit()

    sender = new_sender(sessionmaker, bot, redis_r, queue_name)
    await write(("tapped", None))
    await run_senders([sender], lambda: _zero(sessionmaker))
    await write(("one", topic + 1), ("two", topic + 2), ("three", topic + 3))
    await run_senders([sender], lambda: _zero(sessionmaker))
    posted = [(m.text, m.reply_to_message_id, m.thread_id) for m in standin.sent_messages(chat)]
    assert posted == [
        ("Ann: tapped", None, topic),
        ("Ann: one\nAnn: two\nAnn: three", None, topic),
    ]


async def refused(standin: StandIn, before: int, timeout: float = 10.0) -> float:  # noqa: ASYNC109
    """When the stand-in answered an injected fault past the `before`-th (time.monotonic())."""
    deadline = time.monotonic() + timeout
    while standin.injected_errors <= before:
        assert time.monotonic() < deadline, "no post was refused"
        await asyncio.sleep(0.005)
    return time.monotonic()


async def test_a_429s_retry_after_holds_the_chats_next_post_for_all_of_it(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """Telegram's retry_after (3 s, longer than the chat's own pace of 1.1 s) is waited out
    in full before the chat's next post, by every sender. The chat had posted nothing: its
    own pace cannot explain the 429, so it is the bot's, and another chat waits it out too
    (tests/posting/test_learned_pace.py has the 429 a chat's own pace explains)."""
    chat, other = -2020, -2021
    for c in (chat, other):
        standin.add_group(c, f"g{c}")
    standin.inject_429(count=1, retry_after=3, chat_id=chat)
    await add_rows(sessionmaker, chat, ["held"])
    sender = new_sender(sessionmaker, bot, redis_r, queue_name)
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        sender.poke(chat)
        at = await refused(standin, 0)
        await add_rows(sessionmaker, other, ["meanwhile"])
        sender.poke(other)
        held = await standin.wait_for_sent(lambda m: m.text == "held", 15, chat_id=chat)
    finally:
        stop.set()
        await task
    assert held.ts - at >= 2.95
    assert [m.ts - at >= 2.95 for m in standin.sent_messages(other)] == [True]
    assert sender.stats.retry_after == 1


async def test_two_senders_never_post_a_row_twice(
    redis_rc: AnyRedis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    chats = [-2020 - i for i in range(8)]
    for chat in chats:
        standin.add_group(chat, f"g{chat}")
    standin.enforce_rate_limits()
    expected: Counter[str] = Counter()

    async def produce() -> None:
        for wave in range(3):
            for chat in chats:
                texts = [f"{chat} w{wave} r{i}" for i in range(4)]
                expected.update(texts)
                await add_rows(sessionmaker, chat, texts)
            await asyncio.sleep(0.3)

    a = new_sender(sessionmaker, bot, redis_rc, queue_name)
    b = new_sender(sessionmaker, bot, redis_rc, queue_name)
    await run_senders([a, b], lambda: _zero(sessionmaker), during=produce)
    assert lines_posted(standin) == expected
    assert standin.rate_violations == 0
    assert a.stats.rows_sent + b.stats.rows_sent == sum(expected.values())


async def test_database_claims_alone_keep_two_senders_apart(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """Even with no shared chat lease (two Redis namespaces: as if Redis had lost its keys),
    the row claims in Postgres keep every row to one sender."""
    chats = [-2030 - i for i in range(4)]
    for chat in chats:
        standin.add_group(chat, f"g{chat}")
    expected: Counter[str] = Counter()

    async def produce() -> None:
        for wave in range(5):
            for chat in chats:
                texts = [f"{chat} w{wave} r{i}" for i in range(3)]
                expected.update(texts)
                await add_rows(sessionmaker, chat, texts)
            await asyncio.sleep(0.2)

    a = new_sender(sessionmaker, bot, redis_r, queue_name)
    b = new_sender(sessionmaker, bot, redis_r, queue_name + "b")
    try:
        await run_senders([a, b], lambda: _zero(sessionmaker), during=produce)
    finally:
        keys = [k async for k in redis_r.scan_iter(match=f"cmx:{{{queue_name}b}}:*")]
        if keys:
            await redis_r.delete(*keys)
    assert lines_posted(standin) == expected


async def test_post_recorded_before_a_crash_is_not_posted_again(
    redis_rc: AnyRedis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """A sender died after Telegram accepted its message and it wrote the posted marker, but
    before mark_sent; its row claim then ran out. The next sender marks, does not re-post."""
    chat = -2040
    standin.add_group(chat, "crash")
    await add_rows(sessionmaker, chat, ["posted before the crash", "never posted"])
    async with sessionmaker() as s:
        claimed = await writes.claim_outbox(sessionmaker, 1, 0.3, "dead-sender", chat_id=chat)
    message_id = 4242
    await redis_rc.set(f"cmx:{{{queue_name}}}:send:posted:{claimed[0].id}", message_id)
    await asyncio.sleep(0.35)
    sender = new_sender(sessionmaker, bot, redis_rc, queue_name)
    await run_senders([sender], lambda: _zero(sessionmaker))
    assert [m.text for m in standin.sent_messages(chat)] == ["never posted"]
    async with sessionmaker() as s:
        row = await s.get(Outbox, claimed[0].id)
        await s.commit()
    assert row is not None and row.sent_message_id == message_id
    assert sender.stats.recovered_rows == 1
    # Markers live only between a post and its mark_sent.
    assert [k async for k in redis_rc.scan_iter(match=f"cmx:{{{queue_name}}}:send:posted:*")] == []


async def test_rows_claimed_by_a_dead_sender_go_out_after_its_lease(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    chat = -2041
    standin.add_group(chat, "orphans")
    await add_rows(sessionmaker, chat, ["a", "b", "c"])
    await writes.claim_outbox(sessionmaker, 10, 0.5, "dead-sender", chat_id=chat)
    sender = new_sender(sessionmaker, bot, redis_r, queue_name)
    await run_senders([sender], lambda: _zero(sessionmaker))
    assert lines_posted(standin, chat) == Counter(["a", "b", "c"])


async def test_chat_that_refuses_for_good_is_not_retried_forever(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    kicked, unknown, fine = -2050, -2051, -2052
    standin.add_group(kicked, "kicked")
    standin.add_group(fine, "fine")
    standin.remove_bot(kicked)
    await add_rows(sessionmaker, kicked, ["k1", "k2"])
    await add_rows(sessionmaker, unknown, ["u1"])
    await add_rows(sessionmaker, fine, ["f1"])
    sender = new_sender(sessionmaker, bot, redis_r, queue_name)
    await run_senders([sender], lambda: _zero(sessionmaker), limit_s=20)
    assert lines_posted(standin) == Counter(["f1"])
    assert sender.stats.failed_rows == 3
    async with sessionmaker() as s:
        dead = list(
            (await s.execute(select(Outbox).where(Outbox.chat_id.in_([kicked, unknown])))).scalars()
        )
        await s.commit()
    assert len(dead) == 3
    assert all(r.sent_at is not None and r.sent_message_id is None for r in dead)


async def test_lost_answer_is_reposted_by_default_and_not_with_assume_sent(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """Telegram carried the post out but the answer never came back: the sender cannot know.
    By default it reposts (at least once: nothing lost, one duplicate); with
    ambiguous="assume_sent" it does not (at most once)."""
    chat = -2060
    standin.add_group(chat, "lossy")
    await add_rows(sessionmaker, chat, ["first"])
    standin.inject_lost_response(1)
    repost = new_sender(sessionmaker, bot, redis_r, queue_name)
    await run_senders([repost], lambda: _zero(sessionmaker), limit_s=20)
    assert lines_posted(standin, chat) == Counter({"first": 2})
    assert repost.stats.ambiguous == 1

    await add_rows(sessionmaker, chat, ["second"])
    standin.inject_lost_response(1)
    once = new_sender(sessionmaker, bot, redis_r, queue_name, ambiguous="assume_sent")
    await run_senders([once], lambda: _zero(sessionmaker), limit_s=20)
    assert lines_posted(standin, chat)["second"] == 1
    assert once.stats.ambiguous == 1


async def test_refused_connection_is_retried_without_duplicate(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    """A Bot API that is down (connection refused) posted nothing: retry, no duplicate."""
    chat = -2061
    standin.add_group(chat, "later")
    await add_rows(sessionmaker, chat, ["hello"])
    settings = Settings(
        token=SecretStr(standin.token),
        bot_api_base_url=f"http://127.0.0.1:{free_port()}/bot",
    )
    # Not initialised (that would call getMe, which cannot succeed either).
    down_bot = make_bot(settings.bot_api())
    sender = new_sender(sessionmaker, down_bot, redis_r, queue_name)
    await run_for(sender, 1.0)
    await down_bot.shutdown()
    assert sender.stats.errors >= 1 and sender.stats.ambiguous == 0
    assert await unsent(sessionmaker) == 1
    async with make_bot(
        Settings(token=SecretStr(standin.token), bot_api_base_url=standin.base_url).bot_api()
    ) as up_bot:
        again = new_sender(sessionmaker, up_bot, redis_r, queue_name)
        await run_senders([again], lambda: _zero(sessionmaker), limit_s=20)
    assert lines_posted(standin, chat) == Counter(["hello"])


async def test_a_chat_waiting_for_its_pace_does_not_hold_up_others(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """One chat in hand only, and a busy room that has used up its minute: the quiet room's
    result still goes out at once, because the busy room goes back to the ring with its turn
    after its pace, and is not waited for."""
    busy, quiet = -2070, -2071
    standin.add_group(busy, "busy")
    standin.add_group(quiet, "quiet")
    policy = PacePolicy(group_spacing_ms=1000, group_burst=1, group_limit=2)
    sender = new_sender(
        sessionmaker,
        bot,
        redis_r,
        queue_name,
        pacer=Pacer(redis_r, queue_name, policy),
        max_chats=1,
    )

    async def produce() -> None:
        for i in range(3):
            await add_rows(sessionmaker, busy, [f"busy {i}"])
            await asyncio.sleep(1.3)
        await add_rows(sessionmaker, quiet, ["quiet one"])

    async def quiet_posted() -> bool:
        return bool(standin.sent_messages(quiet))

    await run_senders([sender], quiet_posted, limit_s=15, during=produce)
    assert [m.text for m in standin.sent_messages(busy)] == ["busy 0", "busy 1"]
    assert await unsent(sessionmaker) == 1  # "busy 2" waits for the busy room's minute


async def test_a_post_slower_than_its_bound_is_an_unknown_outcome(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """A post that outlives `post_timeout_s` is abandoned (so that it always ends inside the
    leases); Telegram may still carry it out, so it is treated like a lost answer."""
    chat = -2062
    standin.add_group(chat, "slow api")
    await add_rows(sessionmaker, chat, ["slow"])
    standin.inject_latency(1.5, 1)
    sender = new_sender(sessionmaker, bot, redis_r, queue_name, post_timeout_s=0.5)
    await run_senders([sender], lambda: _zero(sessionmaker), limit_s=20)
    await asyncio.sleep(1.2)  # the abandoned call lands
    assert sender.stats.ambiguous == 1
    assert lines_posted(standin, chat) == Counter({"slow": 2})


async def test_an_idle_sender_hears_of_rows_from_their_writer_not_from_a_scan(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the default reconciliation (once a minute), an idle sender scans the outbox once
    at start; rows reach it through its process's `poke` at once, and through the ring when
    another process wrote them (the bot's round announcements)."""
    mine, theirs = -2080, -2081
    standin.add_group(mine, "worker's")
    standin.add_group(theirs, "bot's")
    scans = 0
    scan = store.chats_with_unsent

    async def counted(session: AsyncSession) -> list[int]:
        nonlocal scans
        scans += 1
        return await scan(session)

    monkeypatch.setattr(store, "chats_with_unsent", counted)
    sender = OutboxSender(sessionmaker, bot, redis_r, namespace=queue_name)
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        await asyncio.sleep(0.3)
        await add_rows(sessionmaker, mine, ["poked"])
        sender.poke(mine)
        await standin.wait_for_sent_count(1, chat_id=mine, timeout=5)
        await add_rows(sessionmaker, theirs, ["announced"])
        await PostingRing(redis_r, queue_name).add([theirs])
        await standin.wait_for_sent_count(1, chat_id=theirs, timeout=5)
        await asyncio.sleep(1.5)
    finally:
        stop.set()
        await task
    assert scans == 1
    assert await unsent(sessionmaker) == 0


async def test_when_the_bot_limit_binds_chats_take_turns(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """The bot may post 5 a second; six groups have results waiting all along, one of them
    five times as many. They take turns in the ring: the flooding chat gets no more posts
    than a quiet one, and nothing waits more than a turn or so."""
    chats = [-2090 - i for i in range(6)]
    flood = chats[0]
    for chat in chats:
        standin.add_group(chat, f"turns {chat}")
    standin.enforce_rate_limits()
    policy = PacePolicy(group_spacing_ms=0, group_limit=20, bot_limit=5)
    sender = new_sender(
        sessionmaker, bot, redis_r, queue_name, pacer=Pacer(redis_r, queue_name, policy)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        until = time.monotonic() + 3.0
        i = 0
        while time.monotonic() < until:
            for chat in chats:
                await add_rows(sessionmaker, chat, [f"r{i}"] * (5 if chat == flood else 1))
                sender.poke(chat)
            i += 1
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task
    posts = {chat: len(standin.sent_messages(chat)) for chat in chats}
    assert standin.rate_violations == 0
    assert sum(posts.values()) >= 6  # the bot's limit binds: about 5 a second
    assert max(posts.values()) - min(posts.values()) <= 1, posts


async def test_results_that_land_while_a_chat_waits_for_the_bot_ride_along(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """The bot may post once a second. A chat waiting for that second gets another result
    meanwhile: both go out in one message (claimed before its slot is taken)."""
    first, second = -2101, -2102
    for chat in (first, second):
        standin.add_group(chat, f"ride {chat}")
    policy = PacePolicy(group_spacing_ms=0, group_limit=20, bot_limit=1)
    sender = new_sender(
        sessionmaker, bot, redis_r, queue_name, pacer=Pacer(redis_r, queue_name, policy)
    )
    await add_rows(sessionmaker, first, ["one"])
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        sender.poke(first)
        await standin.wait_for_sent_count(1, timeout=5)
        await add_rows(sessionmaker, second, ["two"])
        sender.poke(second)
        await asyncio.sleep(0.3)  # the second chat waits for the bot's second
        await add_rows(sessionmaker, second, ["three"])
        await standin.wait_for_sent_count(2, timeout=5)
    finally:
        stop.set()
        await task
    texts = sorted(m.text for m in standin.sent_messages())
    assert texts == ["one", "two\nthree"], texts


async def test_a_sender_that_stands_back_posts_nothing_but_announces_its_chats(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """The worker's sender while `codemojex sender` processes post: it takes no turn, but
    the chats it is told of join the ring at once, for the senders that post; once nobody
    posts instead, it posts again."""
    chat = -2201
    standin.add_group(chat, "stands back")
    others_post = True

    async def stand_back() -> bool:
        return others_post

    sender = new_sender(
        sessionmaker, bot, redis_r, queue_name, stand_back=stand_back, stand_back_s=0.1
    )
    await add_rows(sessionmaker, chat, ["waits"])
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        sender.poke(chat)
        await asyncio.sleep(1.0)
        assert standin.sent_messages(chat) == []
        assert await redis_r.zscore(Keys(queue_name).ring, str(chat)) is not None
        others_post = False
        sender.poke(chat)
        await standin.wait_for_sent_count(1, chat_id=chat, timeout=10)
    finally:
        stop.set()
        await task


async def test_the_marks_of_posts_answered_together_are_one_statement(
    redis_r: aioredis.Redis, queue_name: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    """Twenty posts answered while the books are being written: their rows are marked sent
    together, in one transaction and one statement (a sender posting hundreds a second spends
    a statement per batch of posts on its books, not one per post), each row with its own
    post's message id; a row already sent keeps its first mark."""
    chats = [-2300 - i for i in range(20)]
    for chat in chats:
        await add_rows(sessionmaker, chat, [f"row of {chat}"])
    async with sessionmaker() as s:
        row_of = {r.chat_id: r.id for r in (await s.execute(select(Outbox))).scalars()}
    assert await writes.mark_sent(sessionmaker, [row_of[chats[0]]], 999) == 1
    delivery = Delivery(
        sessionmaker, redis_r, Keys(queue_name), owner="t", ambiguous="repost",
        chat_lease_ms=20_000, claim_lease_s=20.0, claim_limit=200, stats=SenderStats(),
        stop=asyncio.Event(),
    )  # fmt: skip
    engine = sessionmaker.kw["bind"].sync_engine
    marks: list[str] = []

    def seen(*args: Any) -> None:
        statement = str(args[2])
        if re.search(r"sent_message_id\s*=", statement):  # a mark sets it
            marks.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        await asyncio.gather(
            *(delivery.mark([row_of[chat]], 1000 + i) for i, chat in enumerate(chats))
        )
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(marks) == 1, marks
    async with sessionmaker() as s:
        sent = {r.chat_id: r.sent_message_id for r in (await s.execute(select(Outbox))).scalars()}
    assert sent == {chat: 999 if i == 0 else 1000 + i for i, chat in enumerate(chats)}


async def test_rows_still_claimed_keep_their_chat_in_the_ring_until_the_claim_ends(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """A chat's turn finds its rows claimed by a turn that failed (or a sender that died):
    the chat keeps its place in the ring until the claim runs out, and the rows go out
    then, not at the outbox's next scan (here an hour away)."""
    chat = -2042
    standin.add_group(chat, "held")
    await add_rows(sessionmaker, chat, ["a", "b"])
    await writes.claim_outbox(sessionmaker, 10, 1.0, "failed-turn", chat_id=chat)
    sender = OutboxSender(sessionmaker, bot, redis_r, namespace=queue_name, poll_s=3600)
    start = time.monotonic()
    await run_senders([sender], lambda: _zero(sessionmaker), limit_s=10)
    assert lines_posted(standin, chat) == Counter(["a", "b"])
    assert time.monotonic() - start >= 0.9  # not before the claim ran out


async def test_chats_queued_for_the_bots_second_never_outwait_their_lease(
    redis_r: aioredis.Redis,
    queue_name: str,
    worker_pg_url: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """The bot may post twice a second, twenty groups have a result each, and the sender's
    database answers 50 ms late. The chats in hand wait for the bot's second in turn, each
    with a chat lease that is renewed only once it is its turn: a chat must leave that queue
    by its deadline (half its claim), not when the chats ahead of it have each claimed again
    in turn, or it outlives its lease, the ring gives it to another turn that finds its rows
    still claimed, and its result waits for that claim to run out too (a 50 s straggler in
    the 1000-group world run). Nor does the sender hold more chats than the bot's second
    serves before their deadlines."""
    chats = [-2110 - i for i in range(20)]
    for chat in chats:
        standin.add_group(chat, f"queued {chat}")
        await add_rows(sessionmaker, chat, [f"for {chat}"])
    target = urlsplit(worker_pg_url)
    assert target.hostname is not None and target.port is not None
    proxy = TcpProxy(free_port(), target.hostname, target.port, delay_s=0.05)
    await proxy.start()
    engine = make_engine(
        worker_pg_url.replace(target.netloc, f"{target.username}@127.0.0.1:{proxy.port}")
    )
    claims = 0

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        nonlocal claims
        if statement.startswith("UPDATE outbox SET claimed_until") and "RETURNING" in statement:
            claims += 1

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    policy = PacePolicy(group_spacing_ms=0, group_limit=20, bot_limit=2)
    sender = OutboxSender(
        make_sessionmaker(engine),
        bot,
        redis_r,
        namespace=queue_name,
        pacer=Pacer(redis_r, queue_name, policy),
        poll_s=3600,
        chat_lease_ms=5000,
        claim_lease_s=6.0,
        post_timeout_s=2.0,
    )
    try:
        await run_senders([sender], lambda: _zero(sessionmaker), limit_s=40)
    finally:
        await engine.dispose()
        await proxy.stop()
    assert sum(lines_posted(standin).values()) == len(chats)
    assert sender.stats.turns_outlived == 0
    # Each chat claimed about twice (its turn, then what landed while it waited), not taken
    # into hand again and again to reach its deadline in the queue (67-74 claims so).
    assert claims <= 2.5 * len(chats), claims


async def test_rows_whose_claim_ran_out_but_another_holds_are_looked_at_again_in_a_moment(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """A chat's rows whose claim ran out are still kept from a turn while another sender's
    transaction holds them (its sent-marks): the chat's turn comes back in a moment
    (RECHECK_MS), not at once and again and again, nor when no claim is left (it left the
    ring)."""
    chat = -2150
    await add_rows(sessionmaker, chat, ["locked"])
    await writes.claim_outbox(sessionmaker, 10, 0.01, "other", chat_id=chat)
    await asyncio.sleep(0.05)  # that claim ran out
    delivery = Delivery(
        sessionmaker, redis_r, Keys(queue_name), owner="t", ambiguous="repost",
        chat_lease_ms=20_000, claim_lease_s=20.0, claim_limit=200, stats=SenderStats(),
        stop=asyncio.Event(),
    )  # fmt: skip
    async with sessionmaker() as other:
        await other.execute(select(Outbox).where(Outbox.chat_id == chat).with_for_update())
        assert await delivery.claim(chat) == []
        assert await delivery.held_ms(chat) == RECHECK_MS
        await other.rollback()
    assert [r.text for r in await delivery.claim(chat)] == ["locked"]
