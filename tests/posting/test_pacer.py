"""The Redis pacer: GCRA spacing per chat and group, the sliding minute and second, atomic
all-or-nothing grants, RetryAfter blocks, a deadline it cannot meet said at once, and the
per-process fallback while Redis is down (on the real Redis, fakeredis and a Redis Cluster:
every key of one take shares the `{<queue>}` slot)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import AsyncIterator

import pytest_asyncio
import redis.asyncio as aioredis

from codemojex.outages import OUTAGES
from codemojex.posting.keys import Keys
from codemojex.posting.pacer import Grant, LocalPace, PacePolicy, Pacer
from codemojex.redistypes import AnyRedis
from codemojex.settings import Settings
from tests.support import free_port

GROUP = -1001
OTHER_GROUP = -1002
PRIVATE = 42


@pytest_asyncio.fixture
async def redis_down() -> AsyncIterator[aioredis.Redis]:
    """A client of a Redis that is not there: every call is an outage."""
    down = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    yield down
    await down.aclose()


# Limits that never bind, to look at one limit at a time.
FREE = PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=1000, bot_limit=1000, margin_ms=0)


async def test_one_post_per_second_per_chat(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name)
    assert await pacer.try_acquire(GROUP) == 0
    wait = await pacer.take(GROUP)
    assert 0 < wait.ms <= 1000 + pacer.policy.margin_ms and not wait.by_bot
    # Another chat has its own pace.
    assert await pacer.try_acquire(OTHER_GROUP) == 0
    assert await pacer.try_acquire(PRIVATE) == 0


async def test_a_group_is_spaced_evenly_after_a_small_burst(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A quiet group posts its burst at its second's pace, then one per spacing: never its
    whole minute at once and then silence."""
    policy = PacePolicy(
        chat_ms=100, group_spacing_ms=1000, group_burst=3, bot_limit=1000, margin_ms=0
    )
    pacer = Pacer(redis_any, queue_name, policy)
    start = time.monotonic()
    at = []
    for _ in range(4):
        assert await pacer.acquire(GROUP)
        at.append(time.monotonic() - start)
    assert at[2] < 0.6  # the burst: three at the chat's pace (0.1 s)
    assert at[3] > 1.0  # then spaced (3 spacings after the first, less the burst credit)
    # A private chat has no group spacing.
    assert [await pacer.try_acquire(PRIVATE) for _ in range(1)] == [0]


async def test_the_sliding_minute_binds_a_group(redis_any: AnyRedis, queue_name: str) -> None:
    policy = PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=2, bot_limit=1000, margin_ms=0)
    pacer = Pacer(redis_any, queue_name, policy)
    assert [await pacer.try_acquire(GROUP) for _ in range(2)] == [0, 0]
    assert await pacer.try_acquire(GROUP) > 59_000


async def test_refusal_takes_no_slot_anywhere(redis_any: AnyRedis, queue_name: str) -> None:
    """A post refused by the bot's second must not use up the chat's pace (atomicity), and
    the answer says that it is the bot that binds."""
    policy = PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=2, bot_window_ms=60_000)
    pacer = Pacer(redis_any, queue_name, policy)
    assert await pacer.try_acquire(-1) == 0
    assert await pacer.try_acquire(-2) == 0
    for _ in range(5):
        wait = await pacer.take(-3)
        assert wait.ms > 0 and wait.by_bot
    keys = Keys(queue_name)
    assert await redis_any.exists(keys.chat_pace(-3), keys.group_minute(-3)) == 0


async def test_block_chat_and_bot(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name, PacePolicy(margin_ms=0))
    await pacer.block_chat(GROUP, 5000)
    wait = await pacer.take(GROUP)
    assert 4000 < wait.ms <= 5000 and not wait.by_bot
    assert await pacer.try_acquire(OTHER_GROUP) == 0
    # A shorter block never shortens a longer one.
    await pacer.block_chat(GROUP, 10)
    assert await pacer.try_acquire(GROUP) > 4000
    await pacer.block_bot(3000)
    wait = await pacer.take(PRIVATE)
    assert 2000 < wait.ms <= 3000 and wait.by_bot


async def test_acquire_waits_out_the_pace(redis_any: AnyRedis, queue_name: str) -> None:
    policy = PacePolicy(chat_ms=150, bot_limit=100, margin_ms=0)
    pacer = Pacer(redis_any, queue_name, policy)
    start = time.monotonic()
    for _ in range(4):
        assert await pacer.acquire(PRIVATE)
    # Three gaps of at least 150 ms each (the Redis clock decides; allow 10 ms rounding each).
    assert time.monotonic() - start >= 0.42
    # With a deadline already past, acquire gives up instead of waiting.
    assert not await pacer.acquire(PRIVATE, deadline=time.monotonic())


async def test_a_deadline_that_cannot_be_met_is_said_at_once(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """Asked to wait past the caller's deadline, the pacer says so without sleeping to it."""
    pacer = Pacer(redis_any, queue_name)
    await pacer.block_chat(GROUP, 30_000)
    start = time.monotonic()
    assert await pacer.acquire(GROUP, deadline=start + 10) is None
    assert time.monotonic() - start < 5  # a sleep to the deadline would take 10 s


async def test_two_pacers_share_the_pace(redis_any: AnyRedis, queue_name: str) -> None:
    """Two sender processes (two Pacer objects on one Redis) together keep one pace."""
    policy = PacePolicy(chat_ms=100, bot_limit=100, margin_ms=0)
    a, b = Pacer(redis_any, queue_name, policy), Pacer(redis_any, queue_name, policy)
    grants: list[float] = []

    async def post(p: Pacer) -> None:
        for _ in range(3):
            await p.acquire(PRIVATE)
            grants.append(time.monotonic())

    await asyncio.gather(post(a), post(b))
    grants.sort()
    gaps = [later - earlier for earlier, later in itertools.pairwise(grants)]
    assert len(grants) == 6
    # Every consecutive grant is at least one interval apart (less a little for clock reading).
    assert min(gaps) >= 0.08


async def test_the_next_post_is_measured_from_the_answer(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A slow post: granted at t, answered at t+0.35 s. The next slot opens an interval after
    the answer, not after the grant, so the two posts cannot reach Telegram too close."""
    policy = PacePolicy(chat_ms=300, bot_limit=100, margin_ms=0)
    pacer = Pacer(redis_any, queue_name, policy)
    grant = await pacer.acquire(PRIVATE)
    assert grant is not None
    await asyncio.sleep(0.35)  # the request is on the wire longer than an interval
    await pacer.settle(grant)
    wait = await pacer.try_acquire(PRIVATE)
    assert 250 <= wait <= 300


async def test_wait_ms_peeks_without_taking(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name, PacePolicy(margin_ms=0))
    assert await pacer.wait_ms(GROUP) == 0
    assert await pacer.wait_ms(GROUP) == 0
    assert await pacer.try_acquire(GROUP) == 0
    assert 0 < await pacer.wait_ms(GROUP) <= 1000


async def test_without_redis_the_process_keeps_the_pace_alone(
    redis_down: aioredis.Redis, queue_name: str
) -> None:
    """A Redis outage is no burst: the pacer falls back on this process's own pace, keeping to
    what the other processes cannot have used (they may have posted just before)."""
    policy = PacePolicy(chat_ms=100, margin_ms=0)
    pacer = Pacer(redis_down, queue_name, policy)
    # A chat interval after the outage began, not before (another process's last post).
    first = await pacer.take(PRIVATE)
    assert 0 < first.ms <= 100
    await asyncio.sleep(0.11)
    assert await pacer.try_acquire(PRIVATE) == 0
    assert 0 < await pacer.try_acquire(PRIVATE) <= 100
    # A group: only the answers' reserve of its minute (the results may have used the rest).
    assert await pacer.try_acquire(GROUP) == 0
    await asyncio.sleep(0.11)
    assert await pacer.try_acquire(GROUP) > 50_000
    await pacer.block_bot(2000)
    assert (await pacer.take(OTHER_GROUP)).by_bot


async def test_this_process_remembers_its_posts_when_redis_comes_back(
    redis_r: aioredis.Redis, redis_down: aioredis.Redis, queue_name: str
) -> None:
    """Posts made while Redis was away are not in Redis; the process still counts them."""
    policy = PacePolicy(chat_ms=100, margin_ms=0)
    offline = Pacer(redis_down, queue_name, policy)
    await offline.take(PRIVATE)
    await asyncio.sleep(0.11)
    assert await offline.try_acquire(PRIVATE) == 0
    back = Pacer(redis_r, queue_name, policy)
    back.local = offline.local  # the same process, Redis reachable again
    assert await back.try_acquire(PRIVATE) > 0


def test_the_limits_are_settings() -> None:
    settings = Settings(pace_chat_per_s=2, pace_group_per_min=12, pace_bot_per_s=10)
    policy = PacePolicy.from_settings(settings)
    assert policy.chat_ms == 500
    # The results keep one post a minute for the bot's answers and spread the rest evenly.
    assert (policy.group_spacing_ms, policy.group_limit) == (5455, 11)
    answers = PacePolicy.from_settings(settings, answers=True)
    assert (answers.group_spacing_ms, answers.group_limit) == (0, 12)
    assert policy.bot_limit == 10
    assert PacePolicy.from_settings(Settings()) == PacePolicy()


async def test_answers_and_results_share_a_groups_minute(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """The results take their share of the minute, spread; the answers may take the rest at
    once (Telegram's limits only); neither ever makes the minute hold more than its limit."""
    results = Pacer(
        redis_any,
        queue_name,
        PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=3, bot_limit=100, margin_ms=0),
    )
    answers = Pacer(
        redis_any,
        queue_name,
        PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=4, bot_limit=100, margin_ms=0),
    )
    assert [await results.try_acquire(GROUP) for _ in range(4)][:3] == [0, 0, 0]
    assert await results.try_acquire(GROUP) > 59_000  # the results' share is spent
    assert await answers.try_acquire(GROUP) == 0  # the reserve
    assert await answers.try_acquire(GROUP) > 59_000  # the whole minute is


async def test_the_bots_second_counts_a_post_in_flight_until_its_answer(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """The bot's second has no margin for the wire: a grant whose post is not yet answered
    counts as "now", however long it is in flight; answered, it counts from the answer."""
    policy = PacePolicy(
        chat_ms=0, group_spacing_ms=0, group_limit=1000, bot_limit=2, bot_window_ms=300
    )
    pacer = Pacer(redis_any, queue_name, policy)
    first, second = Grant(-1), Grant(-2)
    assert (await pacer.take(-1, first)).ms == 0
    assert (await pacer.take(-2, second)).ms == 0
    await asyncio.sleep(0.45)  # longer than the window: both posts still on the wire
    wait = await pacer.take(-3)
    assert wait.by_bot and wait.ms == 300  # at least a window after an answer yet to come
    await pacer.settle(first)
    wait = await pacer.take(-3)
    assert wait.by_bot and 250 <= wait.ms <= 300  # a window after the first one's answer
    await asyncio.sleep(0.31)
    assert await pacer.try_acquire(-3) == 0


async def test_a_grant_never_answered_stops_counting(redis_any: AnyRedis, queue_name: str) -> None:
    """A process that died with a post in flight holds the bot's slot at most `flight_ms`."""
    policy = PacePolicy(
        chat_ms=0, group_spacing_ms=0, bot_limit=1, bot_window_ms=100, flight_ms=200
    )
    pacer = Pacer(redis_any, queue_name, policy)
    assert await pacer.try_acquire(-1) == 0
    pacer.local = LocalPace(policy)  # another process: it sees only what Redis holds
    assert (await pacer.take(-2)).by_bot
    await asyncio.sleep(0.35)
    assert await pacer.try_acquire(-2) == 0


async def test_posts_slow_on_the_wire_never_reach_telegram_too_close(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """Posters with random times on the wire, before and after Telegram receives the post:
    no window ever holds more than the bot's limit of arrivals, with no margin at all."""
    policy = PacePolicy(
        chat_ms=0, group_spacing_ms=0, group_limit=1000, bot_limit=3, bot_window_ms=100, margin_ms=0
    )
    rng = random.Random(5)
    arrivals: list[float] = []
    until = time.monotonic() + 1.5

    async def poster(n: int) -> None:
        pacer = Pacer(redis_any, queue_name, policy)  # a process of its own
        while time.monotonic() < until:
            grant = await pacer.acquire(-n)
            assert grant is not None
            # Longer on the wire than the window, either way.
            await asyncio.sleep(rng.uniform(0, 0.15))  # to Telegram
            arrivals.append(time.monotonic())
            await asyncio.sleep(rng.uniform(0, 0.15))  # the answer back
            await pacer.settle(grant)

    await asyncio.gather(*(poster(n) for n in range(1, 9)))
    arrivals.sort()
    assert len(arrivals) >= 12
    busiest = max(
        sum(1 for t in arrivals if start <= t < start + policy.bot_window_ms / 1000)
        for start in arrivals
    )
    assert busiest <= policy.bot_limit


def test_the_local_pace_counts_posts_in_flight_too() -> None:
    policy = PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=1, bot_window_ms=50)
    local = LocalPace(policy)
    grant = Grant(-1)
    assert local.take(grant).ms == 0
    time.sleep(0.08)
    assert local.wait(-2).by_bot  # still in flight
    local.settle(grant)
    assert 40 <= local.wait(-2).ms <= 50
    time.sleep(0.06)
    assert local.take(Grant(-2)).ms == 0


async def test_a_post_made_alone_keeps_to_the_answers_reserve_of_a_groups_minute(
    redis_r: aioredis.Redis, redis_down: aioredis.Redis, queue_name: str
) -> None:
    """The results may fill a group's minute but the answers' reserve, so: no post alone
    where this process already used the reserve through Redis, and once it posted alone
    (Redis never saw it), nothing more to the group from here for that minute."""
    policy = PacePolicy(chat_ms=100, margin_ms=0)
    online = Pacer(redis_r, queue_name, policy)
    offline = Pacer(redis_down, queue_name, policy)
    offline.local = online.local  # one process: Redis goes away, comes back
    assert await online.try_acquire(GROUP) == 0  # through Redis: the reserve is used
    await asyncio.sleep(0.11)
    assert await offline.try_acquire(GROUP) > 50_000
    await asyncio.sleep(0.11)  # a chat interval into the outage
    assert await offline.try_acquire(OTHER_GROUP) == 0  # alone, in another group
    OUTAGES.reset()  # Redis is back (and the pause that follows is over)
    assert await online.try_acquire(OTHER_GROUP) > 50_000  # Redis says yes; not here
    assert await online.try_acquire(PRIVATE) == 0


async def test_nothing_is_posted_for_a_chat_interval_after_redis_comes_back(
    redis_r: aioredis.Redis, redis_down: aioredis.Redis, queue_name: str
) -> None:
    """Another process may have posted alone to any chat just before Redis came back."""
    policy = PacePolicy(chat_ms=300, margin_ms=0)
    await Pacer(redis_down, queue_name, policy).take(PRIVATE)  # this process sees the outage
    back = Pacer(redis_r, queue_name, policy)
    wait = await back.take(OTHER_GROUP)
    assert wait.by_bot and 250 <= wait.ms <= 300
    assert await redis_r.exists(Keys(queue_name).chat_pace(OTHER_GROUP)) == 0  # only asked
    assert (await back.wait(OTHER_GROUP)).ms > 200
    await asyncio.sleep(0.31)
    assert await back.try_acquire(OTHER_GROUP) == 0
