"""The bot's learned pace: Telegram's bot-wide limit is not published, so the pace learns it from
the 429s (posting/pacer.py, lua/pace_take.lua and pace_refused.lua). Against the Bot API
stand-in with a bot-wide limit the pace is not told, through the real outbox sender (its claims
on the real Postgres, its pace and ring on the real Redis), and with two `codemojex sender`
processes of their own."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex.lanes import Lanes
from codemojex.ops.collect import Shared, SharedCollector
from codemojex.posting.keys import Keys, bot_id
from codemojex.posting.pace_policy import Grant, PacePolicy
from codemojex.posting.pacer import Pacer
from codemojex.posting.ring import PostingRing
from codemojex.posting.sender import OutboxSender
from codemojex.standin import StandIn
from codemojex.values.clock import utcnow
from codemojex.values.types import Message
from tests.helpers import writes
from tests.helpers.support import ROOT
from tests.posting.test_sender import unsent

GROUP, OTHER = -3001, -3002


def learned(start: int) -> PacePolicy:
    """Results' pace starting at `start` a second, learned between 1 and 200; a group may post
    once a second (the stand-in's group minute is off: the bot-wide limit is the one tested)."""
    return PacePolicy.from_rates(group_per_min=60, bot_per_s=start, bot_floor=1, bot_ceiling=200)


async def produce(
    sm: async_sessionmaker[AsyncSession],
    chats: list[int],
    until: float,
    poke: list[OutboxSender],
    per_tick: dict[int, int] | None = None,
    ring: PostingRing | None = None,
) -> int:
    """Results for every chat all along (one each every 0.3 s; `per_tick` more for some), as
    the worker writes them (one transaction) and announces them (`poke`; or, for senders of
    their own processes, into the posting `ring`, as a worker's sender standing back does).
    How many."""
    written, tick = 0, 0
    while time.monotonic() < until:
        messages = [
            Message(chat, f"t{tick}c{chat}n{n}", "result", None)
            for chat in chats
            for n in range((per_tick or {}).get(chat, 1))
        ]
        await writes.write_messages(sm, messages, utcnow())
        written += len(messages)
        for sender in poke:
            for chat in chats:
                sender.poke(chat)
        if ring is not None:
            await ring.add(chats)
        tick += 1
        await asyncio.sleep(0.3)
    return written


def groups(standin: StandIn, n: int, first: int = -4000) -> list[int]:
    chats = [first - i for i in range(n)]
    for chat in chats:
        standin.add_group(chat, f"g{chat}")
    return chats


def hidden_limit(standin: StandIn, per_s: int) -> None:
    standin.enforce_rate_limits(per_chat_per_s=1, per_group_per_min=None, global_per_s=per_s)


async def run_sender(sender: OutboxSender, during: asyncio.Future[int] | None = None) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        if during is not None:
            await during
    finally:
        stop.set()
        await task


def posted_between(standin: StandIn, start: float, end: float) -> int:
    return sum(1 for m in standin.sent_messages() if start <= m.ts < end)


async def test_the_learned_rate_converges_up_under_a_roomy_limit_and_down_under_a_strict_one(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    chats = groups(standin, 30)
    # Roomy: Telegram would take 100 a second; the pace starts at 5 and results wait.
    hidden_limit(standin, 100)
    pacer = Pacer(redis_r, queue_name, learned(5), bot=bot_id(standin.token))
    sender = OutboxSender(sessionmaker, bot, redis_r, namespace=queue_name, pacer=pacer, poll_s=1)
    start = time.monotonic()
    producing = asyncio.ensure_future(produce(sessionmaker, chats, start + 8, [sender]))
    await run_sender(sender, producing)
    roomy = await pacer.bot_pace()
    assert roomy.rate is not None and roomy.rate >= 12, roomy
    assert posted_between(standin, start + 6, start + 8) / 2 > 8  # past the start's 5 a second
    assert standin.rate_violations == 0
    # Strict: Telegram takes 4 a second; the pace starts at 30.
    hidden_limit(standin, 4)
    strict_queue = queue_name + "s"
    pacer = Pacer(redis_r, strict_queue, learned(30), bot=bot_id(standin.token))
    sender = OutboxSender(sessionmaker, bot, redis_r, namespace=strict_queue, pacer=pacer, poll_s=1)
    start = time.monotonic()
    producing = asyncio.ensure_future(produce(sessionmaker, chats, start + 14, [sender]))
    try:
        await run_sender(sender, producing)
        strict = await pacer.bot_pace()
    finally:
        await redis_r.delete(*[k async for k in redis_r.scan_iter(f"cmx:{{{strict_queue}}}:*")])
    assert strict.rate is not None and strict.rate <= 6, strict
    assert strict.refused["bot"] >= 1 and strict.cuts >= 1
    # Converged: nothing refused in the run's last 5 seconds, and about 4 a second posted.
    late = [v for v in standin.violations if v.ts >= start + 9]
    assert late == [], late
    assert 2.5 <= posted_between(standin, start + 9, start + 14) / 5 <= 4.5


async def test_an_unexplained_429_pauses_the_whole_bot_for_its_retry_after(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """A 429 for a chat that posted nothing for a while (its own pace cannot explain it)
    stops every chat's posts for its retry_after, and cuts the learned rate; every result
    goes out after it."""
    chats = groups(standin, 6)
    pacer = Pacer(redis_r, queue_name, learned(30), bot=bot_id(standin.token))
    sender = OutboxSender(sessionmaker, bot, redis_r, namespace=queue_name, pacer=pacer, poll_s=1)
    standin.inject_429(count=1, retry_after=2, chat_id=chats[0])
    start = time.monotonic()
    producing = asyncio.ensure_future(produce(sessionmaker, chats, start + 5, [sender]))
    await run_sender(sender, producing)
    [refused] = [c for c in standin.call_log if c.status == 429]
    # Posts already on the wire when the 429 came may land just after it; then none, to
    # any chat, until its retry_after is over; then they go on.
    after = [m.ts - refused.ts for m in standin.sent_messages() if m.ts > refused.ts + 0.2]
    assert after, "nothing was posted after the 429"
    assert min(after) >= 1.9, "a chat posted within the bot-wide 429's wait"
    pace = await pacer.bot_pace()
    assert pace.refused == {"chat": 0, "group": 0, "bot": 1} and pace.cuts == 1
    # Its metrics, as every process exports them.
    shared = Shared(Lanes(redis_r, queue_name), sessionmaker, redis=redis_r, bot=pacer.bot)
    await shared.refresh()
    series = {m.name: m for m in SharedCollector(shared).collect()}
    assert series["codemojex_pace_bot_rate"].samples[0].value == pace.rate
    refused_by = {s.labels["cause"]: s.value for s in series["codemojex_pace_refused"].samples}
    assert refused_by == {"chat": 0, "group": 0, "bot": 1}
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        sender.poke(chats[0])
        deadline = time.monotonic() + 20
        while await unsent(sessionmaker):
            assert time.monotonic() < deadline, "results left unsent"
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await task


async def test_a_429_the_chats_or_the_groups_own_pace_explains_blocks_that_chat_alone(
    redis_r: aioredis.Redis, queue_name: str
) -> None:
    """Two posts to one chat within its second (Telegram's per-chat limit explains the 429),
    or a group's full minute: that chat waits, the rest of the bot does not, the rate holds."""
    fast = PacePolicy(chat_ms=0, margin_ms=0, group_spacing_ms=0, group_limit=2, group_total=2)
    pacer = Pacer(redis_r, queue_name, fast)
    first, second = Grant(GROUP), Grant(GROUP)
    assert (await pacer.take(GROUP, first)).ms == 0
    assert (await pacer.take(GROUP, second)).ms == 0
    assert await pacer.refused(second, 3000) == "chat"
    assert (await pacer.wait(OTHER)).ms == 0
    assert (await pacer.wait(GROUP)).ms > 2000
    # A group whose minute is full: its own pace explains it.
    chat = -3003
    grants = [Grant(chat), Grant(chat)]
    for grant in grants:
        assert (await pacer.take(chat, grant)).ms == 0
        await pacer.settle(grant)
    await asyncio.sleep(0.15)  # past the chat's second: only the minute can explain it
    assert await pacer.refused(grants[-1], 3000) == "group"
    assert (await pacer.wait(OTHER)).ms == 0
    pace = await pacer.bot_pace()
    assert pace.refused == {"chat": 1, "group": 1, "bot": 0} and pace.cuts == 0


async def test_when_telegram_is_the_limit_every_group_gets_its_turn(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    bot: Bot,
) -> None:
    """Telegram takes 5 a second, the pace starts at 30; 8 groups have results all along (each
    could post almost once a second: 7 a second in all), one of them five times as many.
    Every group gets about as many posts (Jain >= 0.9 once the rate is learned), each post
    carries all its chat had waiting, and every result goes out."""
    chats = groups(standin, 8)
    flood = chats[0]
    hidden_limit(standin, 5)
    pacer = Pacer(redis_r, queue_name, learned(30), bot=bot_id(standin.token))
    sender = OutboxSender(sessionmaker, bot, redis_r, namespace=queue_name, pacer=pacer, poll_s=1)
    start = time.monotonic()
    producing = asyncio.ensure_future(
        produce(sessionmaker, chats, start + 14, [sender], per_tick={flood: 5})
    )
    stop = asyncio.Event()
    task = asyncio.create_task(sender.run(stop))
    try:
        written = await producing
        deadline = time.monotonic() + 40
        while await unsent(sessionmaker):
            assert time.monotonic() < deadline, "results left unsent"
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await task
    posts = [
        sum(1 for m in standin.sent_messages(c) if start + 3 <= m.ts < start + 14) for c in chats
    ]
    jain = sum(posts) ** 2 / (len(posts) * sum(p * p for p in posts))
    assert jain >= 0.9, posts
    lines = [line for m in standin.sent_messages() for line in m.text.split("\n")]
    assert len(lines) == len(set(lines)) == written  # every result once
    # A flooding chat's results ride together: far fewer posts than results.
    assert len(standin.sent_messages(flood)) * 3 < sum(1 for ln in lines if f"c{flood}n" in ln)
    assert standin.rate_violations <= 20  # the start above the limit, then (nearly) none


async def test_a_learned_rate_is_spread_evenly_over_many_chats(
    redis_r: aioredis.Redis, queue_name: str
) -> None:
    """A learned rate of 20 a second (one post every 50 ms, bursts of 100 ms' worth: two),
    and 30 chats all wanting a post at once: at most the burst goes at once, then one every
    50 ms, never the whole second's 20 together (the first second above Telegram's limit
    would be refused post after post). The grants' times are Redis's own (the bot's second
    logs each at its grant, plus the flight, while unanswered)."""
    policy = replace(
        PacePolicy.from_rates(bot_per_s=20, bot_floor=1, bot_ceiling=20), bot_burst_ms=100
    )
    pacer = Pacer(redis_r, queue_name, policy, bot=7)
    chats = list(range(1, 31))  # private chats: no group's minute
    grants = await asyncio.gather(*(pacer.acquire(chat) for chat in chats))
    assert all(grant is not None for grant in grants)
    logged = await redis_r.zrange(Keys(queue_name).bot_second(7), 0, -1, withscores=True)
    granted = sorted(float(entry[1]) - policy.flight_ms for entry in logged)
    assert len(granted) == len(chats)
    spacing, burst, window = 50, 2, 200
    # A GCRA lets at most its burst and one more per spacing into any window (1 ms of rounding).
    crowded = max(sum(1 for t in granted if at <= t < at + window) for at in granted)
    assert crowded <= burst + window // spacing + 1, granted
    # And the whole spreads over 30 spacings less the burst, not a second's 20 at once.
    assert granted[-1] - granted[0] >= (len(chats) - burst) * spacing - 30, granted


@pytest.fixture
async def sender_env(standin: StandIn, worker_pg_url: str, queue_name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    env.update(
        CODEMOJEX_TOKEN=standin.token,
        CODEMOJEX_BOT_API_BASE_URL=standin.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=standin.base_file_url,
        CODEMOJEX_REDIS_URL=os.environ.get("CODEMOJEX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        CODEMOJEX_DATABASE_URL=worker_pg_url,
        CODEMOJEX_QUEUE=queue_name,
        CODEMOJEX_PACE_GROUP_PER_MIN="60",
        CODEMOJEX_PACE_BOT_PER_S="30",
        CODEMOJEX_PACE_BOT_FLOOR_PER_S="1",
        PYTHONPATH=str(ROOT),
    )
    return env


@pytest.fixture
async def workdir() -> AsyncIterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="cmx-senders-"))  # no stray .env is read
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_two_sender_processes_share_one_learned_rate(
    redis_r: aioredis.Redis,
    queue_name: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
    sender_env: dict[str, str],
    workdir: Path,
) -> None:
    """Two `codemojex sender` processes on one queue: Telegram takes 6 a second, each process
    starts at 30. Both post, one rate is learned for both (Redis), and together they keep to
    Telegram's limit once it is learned: not twice it."""
    chats = groups(standin, 16)
    hidden_limit(standin, 6)
    procs = []
    logs = [workdir / f"sender{i}.log" for i in range(2)]
    for log_path in logs:
        with log_path.open("wb") as log:
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "codemojex.cli", "sender", env=sender_env,
                    cwd=workdir, stdin=asyncio.subprocess.DEVNULL, stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                )
            )  # fmt: skip
    try:
        await asyncio.sleep(3)  # both up
        start = time.monotonic()
        # The chats go into the ring as the workers' senders announce them while senders of
        # their own run: without it only the outbox's minute scan would find them, and the
        # sender scanning first would take every chat at once.
        ring = PostingRing(redis_r, queue_name)
        written = await produce(sessionmaker, chats, start + 12, [], ring=ring)
        deadline = time.monotonic() + 60
        while await unsent(sessionmaker):
            assert time.monotonic() < deadline, "results left unsent"
            await asyncio.sleep(0.2)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        for proc in procs:
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
    posted = [
        int(m[1])
        for log in logs
        for m in [re.search(r"sender stopped: .*'messages': (\d+)", log.read_text())]
        if m is not None
    ]
    assert len(posted) == 2 and min(posted) > 0, [log.read_text()[-2000:] for log in logs]
    pacer = Pacer(redis_r, queue_name, learned(30), bot=bot_id(standin.token))
    pace = await pacer.bot_pace()
    assert pace.rate is not None and pace.rate <= 8, pace
    # Once learned, both together post about Telegram's 6 a second, not twice it.
    late = posted_between(standin, start + 7, start + 12) / 5
    assert late <= 7, late
    # Not a 429 storm (a fixed 30 against 6 has two sends refused for each one taken): the
    # law's probes now and then, each refusing the posts in flight when its first 429 came
    # back (many at once here: the stand-in shares this test's busy event loop, so posts
    # reach it in bunches).
    late_429s = [v for v in standin.violations if start + 7 <= v.ts < start + 12]
    assert len(late_429s) <= posted_between(standin, start + 7, start + 12), late_429s
    lines = [line for m in standin.sent_messages() for line in m.text.split("\n")]
    assert len(lines) == len(set(lines)) == written
