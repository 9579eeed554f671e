"""The Redis pacer: GCRA spacing per chat and group, the sliding minute and second, atomic
all-or-nothing grants, RetryAfter blocks, the answers' share of every limit, a deadline it
cannot meet said at once, and the per-process fallback while Redis is down (on the real Redis,
fakeredis and a Redis Cluster: every key of one take shares the `{<queue>}` slot).

A pacer keeps a book of its own process's grants and answers from it first when it already
binds, so a test of what the script decides takes through `elsewhere`: each take as a process
of its own would make it, knowing only what Redis holds."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace

import redis.asyncio as aioredis

from codemojex.outages import OUTAGES
from codemojex.posting.keys import Keys
from codemojex.posting.local_pace import LocalPace
from codemojex.posting.pace_policy import (
    BOT_CEILING_PER_S,
    BOT_FLOOR_PER_S,
    Grant,
    PacePolicy,
    Wait,
)
from codemojex.posting.pacer import Pacer
from codemojex.settings import Settings
from codemojex.values.redistypes import AnyRedis

GROUP = -1001
OTHER_GROUP = -1002
PRIVATE = 42


async def taken(pacer: Pacer, chat_id: int) -> int:
    """`pacer.take` in its own process (its book first): the wait (0: taken)."""
    return (await pacer.take(chat_id)).ms


async def elsewhere(pacer: Pacer, chat_id: int, grant: Grant | None = None) -> Wait:
    """`pacer.take` as a process that has posted nothing itself would make it: the script
    alone decides (the grant, if taken, is then in that process's book)."""
    pacer.local = LocalPace(pacer.policy)
    return await pacer.take(chat_id, grant)


async def ms(pacer: Pacer, chat_id: int) -> int:
    """The wait `elsewhere` answers (0: taken)."""
    return (await elsewhere(pacer, chat_id)).ms


async def test_one_post_per_second_per_chat(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name)
    assert await ms(pacer, GROUP) == 0
    wait = await elsewhere(pacer, GROUP)
    assert 0 < wait.ms <= 1000 + pacer.policy.margin_ms and not wait.by_bot
    # Another chat has its own pace.
    assert await ms(pacer, OTHER_GROUP) == 0
    assert await ms(pacer, PRIVATE) == 0


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
    at: list[float] = []
    while len(at) < 4:
        wait = await elsewhere(pacer, GROUP)
        if wait.ms:
            await asyncio.sleep(wait.ms / 1000)
        else:
            at.append(time.monotonic() - start)
    assert at[2] < 0.6  # the burst: three at the chat's pace (0.1 s)
    assert at[3] > 1.0  # then spaced (3 spacings after the first, less the burst credit)
    # A private chat has no group spacing.
    assert await ms(pacer, PRIVATE) == 0


async def test_the_sliding_minute_binds_a_group(redis_any: AnyRedis, queue_name: str) -> None:
    policy = PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=2, bot_limit=1000, margin_ms=0)
    pacer = Pacer(redis_any, queue_name, policy)
    assert [await ms(pacer, GROUP) for _ in range(2)] == [0, 0]
    assert await ms(pacer, GROUP) > 59_000


async def test_refusal_takes_no_slot_anywhere(redis_any: AnyRedis, queue_name: str) -> None:
    """A post refused by the bot's second must not use up the chat's pace (atomicity), and
    the answer says that it is the bot that binds."""
    policy = PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=2, bot_window_ms=60_000)
    pacer = Pacer(redis_any, queue_name, policy)
    assert await ms(pacer, -1) == 0
    assert await ms(pacer, -2) == 0
    for _ in range(5):
        wait = await elsewhere(pacer, -3)
        assert wait.ms > 0 and wait.by_bot
    keys = Keys(queue_name)
    assert await redis_any.exists(keys.chat_pace(-3), keys.group_minute(-3)) == 0


async def test_block_chat(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name, PacePolicy(margin_ms=0))
    await pacer.block_chat(GROUP, 5000)
    wait = await elsewhere(pacer, GROUP)  # every process: the block is in Redis
    assert 4000 < wait.ms <= 5000 and not wait.by_bot
    assert await ms(pacer, OTHER_GROUP) == 0
    # A shorter block never shortens a longer one.
    await pacer.block_chat(GROUP, 10)
    assert await ms(pacer, GROUP) > 4000


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

    start = time.monotonic()
    await asyncio.gather(post(a), post(b))
    assert len(grants) == 6
    # Six grants one interval apart span five intervals. A grant is read on the clock when its
    # caller wakes, never before it was given, so a busy machine can only lengthen the span;
    # gaps between consecutive readings, by contrast, shrink when one wake-up comes late.
    assert max(grants) - start >= 5 * 0.1


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
    assert 250 <= await ms(pacer, PRIVATE) <= 300


async def test_wait_peeks_without_taking(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name, PacePolicy(margin_ms=0))
    assert (await pacer.wait(GROUP)).ms == 0
    assert (await pacer.wait(GROUP)).ms == 0
    assert await ms(pacer, GROUP) == 0
    pacer.local = LocalPace(pacer.policy)
    assert 0 < (await pacer.wait(GROUP)).ms <= 1000


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
    assert (await pacer.take(PRIVATE)).ms == 0
    assert 0 < (await pacer.take(PRIVATE)).ms <= 100
    # A group: only the answers' reserve of its minute (the results may have used the rest).
    assert (await pacer.take(GROUP)).ms == 0
    await asyncio.sleep(0.11)
    assert (await pacer.take(GROUP)).ms > 50_000
    await pacer.block_chat(OTHER_GROUP, 2000)
    assert 1000 < (await pacer.take(OTHER_GROUP)).ms <= 2000


async def test_this_process_remembers_its_posts_when_redis_comes_back(
    redis_r: aioredis.Redis, redis_down: aioredis.Redis, queue_name: str
) -> None:
    """Posts made while Redis was away are not in Redis; the process still counts them."""
    policy = PacePolicy(chat_ms=100, margin_ms=0)
    offline = Pacer(redis_down, queue_name, policy)
    await offline.take(PRIVATE)
    await asyncio.sleep(0.11)
    assert await taken(offline, PRIVATE) == 0
    back = Pacer(redis_r, queue_name, policy)
    back.local = offline.local  # the same process, Redis reachable again
    assert await taken(back, PRIVATE) > 0


def test_the_limits_are_settings() -> None:
    settings = Settings(pace_chat_per_s=2, pace_group_per_min=12, pace_bot_per_s=10)
    policy = settings.pace()
    assert policy.chat_ms == 500
    # The results keep one post a minute for the bot's answers and spread the rest evenly;
    # they may use the whole bot's second.
    assert (policy.group_spacing_ms, policy.group_limit, policy.group_total) == (5455, 11, 12)
    assert (policy.bot_limit, policy.own_bot_limit, policy.answer_gap_ms) == (10, 10, 0)
    # The answers: no spacing, but pace_policy.ANSWER_GROUP_SHARE_PCT of the minute,
    # pace_policy.ANSWER_BOT_SHARE_PCT of the bot's second, and pace_policy.ANSWER_CHAT_GAP chat
    # intervals between two of them in a chat.
    answers = settings.pace(answers=True)
    assert (answers.group_spacing_ms, answers.group_limit, answers.group_total) == (0, 3, 12)
    assert (answers.bot_limit, answers.own_bot_limit, answers.answer_gap_ms) == (10, 2, 1200)
    # The bot's rate is learned between the floor and the ceiling (equal: a fixed rate).
    learned = (BOT_FLOOR_PER_S, BOT_CEILING_PER_S)
    assert (policy.learned_floor, policy.learned_ceiling) == learned
    assert (answers.learned_floor, answers.learned_ceiling) == learned
    fixed = Settings(pace_bot_per_s=10, pace_bot_floor_per_s=10, pace_bot_ceiling_per_s=10)
    assert fixed.pace().learned_floor == 10
    assert Settings().pace() == PacePolicy(bot_floor=BOT_FLOOR_PER_S, bot_ceiling=BOT_CEILING_PER_S)
    default = Settings().pace(answers=True)
    assert (default.group_limit, default.own_bot_limit, default.answer_gap_ms) == (5, 6, 2200)


def _kinds(
    results: PacePolicy, answers: PacePolicy, redis: AnyRedis, queue: str
) -> tuple[Pacer, Pacer]:
    return Pacer(redis, queue, results), Pacer(redis, queue, replace(answers, answers=True))


async def test_the_answers_take_their_share_of_a_groups_minute_and_no_more(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """The answers may take their share of a group's minute, and then nothing: whatever a
    chat's members send, the rest of the minute is the results'. The results take their own
    share, within what every post together may."""
    results, answers = _kinds(
        PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=4, group_total=5, margin_ms=0),
        PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=2, group_total=5, margin_ms=0),
        redis_any,
        queue_name,
    )
    assert [await ms(answers, GROUP) for _ in range(2)] == [0, 0]
    assert await ms(answers, GROUP) > 59_000  # the answers' share is spent
    assert [await ms(results, GROUP) for _ in range(3)] == [0, 0, 0]
    assert await ms(results, GROUP) > 59_000  # every post's limit is
    # In another group, the results alone: their share, 4 (one kept for the answers).
    assert [await ms(results, OTHER_GROUP) for _ in range(4)] == [0, 0, 0, 0]
    assert await ms(results, OTHER_GROUP) > 59_000
    assert await ms(answers, OTHER_GROUP) == 0  # the answers' reserve


async def test_the_answers_never_push_the_results_spacing(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A group's results are spread over their own posts: answers posted just before a result
    do not make it wait for the spacing (a member's commands cannot delay a result)."""
    results, answers = _kinds(
        PacePolicy(chat_ms=0, group_spacing_ms=5000, group_burst=1, margin_ms=0),
        PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=5, margin_ms=0),
        redis_any,
        queue_name,
    )
    assert [await ms(answers, GROUP) for _ in range(3)] == [0, 0, 0]
    assert await ms(results, GROUP) == 0
    assert 4000 < await ms(results, GROUP) <= 5000  # its own spacing binds it


async def test_the_answers_take_their_share_of_the_bots_second_and_no_more(
    redis_any: AnyRedis, queue_name: str
) -> None:
    results, answers = _kinds(
        PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=4, bot_window_ms=60_000),
        PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=4, bot_share=1, bot_window_ms=60_000),
        redis_any,
        queue_name,
    )
    assert await ms(answers, -1) == 0
    wait = await elsewhere(answers, -2)
    assert wait.by_bot and wait.ms > 59_000  # the answers' share is in flight
    assert [await ms(results, -n) for n in range(3, 6)] == [0, 0, 0]
    assert (await elsewhere(results, -6)).by_bot  # the bot's whole second is


async def test_the_answers_take_what_the_results_leave_of_a_groups_minute(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """Past their reserve, the answers post only while the minute has room for the results'
    part: a busy room's results are never crowded out by answers (the reserve is never
    theirs)."""
    results, answers = _kinds(
        PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=4, group_total=5, margin_ms=0),
        PacePolicy(chat_ms=0, group_spacing_ms=0, group_limit=2, group_total=5, margin_ms=0),
        redis_any,
        queue_name,
    )
    assert [await ms(results, GROUP) for _ in range(3)] == [0, 0, 0]  # the results' part
    assert await ms(answers, GROUP) == 0  # the answers' reserve
    assert await ms(answers, GROUP) > 59_000  # their share is not spent; the results' room is
    assert await ms(results, GROUP) == 0  # the results' fourth
    # A group whose results are quiet: the answers' whole share.
    assert [await ms(answers, OTHER_GROUP) for _ in range(3)][:2] == [0, 0]


async def test_the_answers_take_none_of_the_bots_second_the_results_need(
    redis_any: AnyRedis, queue_name: str
) -> None:
    results, answers = _kinds(
        PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=5, bot_window_ms=60_000),
        PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=5, bot_share=2, bot_window_ms=60_000),
        redis_any,
        queue_name,
    )
    assert [await ms(results, -n) for n in range(1, 4)] == [0, 0, 0]  # the results' part
    wait = await elsewhere(answers, -4)
    assert wait.by_bot and wait.ms > 59_000  # their share is not spent; the results' room is
    assert [await ms(results, -n) for n in range(4, 6)] == [0, 0]


async def test_two_answers_to_a_chat_leave_a_slot_between_for_a_result(
    redis_any: AnyRedis, queue_name: str
) -> None:
    results, answers = _kinds(
        PacePolicy(chat_ms=100, margin_ms=0),
        PacePolicy(chat_ms=100, margin_ms=0, answer_gap_ms=400),
        redis_any,
        queue_name,
    )
    assert await ms(answers, PRIVATE) == 0
    await asyncio.sleep(0.11)
    wait = await elsewhere(answers, PRIVATE)
    assert 250 <= wait.ms <= 300 and not wait.by_bot  # the chat's second is free; not for it
    assert await ms(results, PRIVATE) == 0  # the slot between is the result's
    await asyncio.sleep(0.3)
    assert await ms(answers, PRIVATE) == 0


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
    assert (await elsewhere(pacer, -1, first)).ms == 0
    assert (await elsewhere(pacer, -2, second)).ms == 0
    await asyncio.sleep(0.45)  # longer than the window: both posts still on the wire
    wait = await elsewhere(pacer, -3)
    assert wait.by_bot and wait.ms == 300  # at least a window after an answer yet to come
    await pacer.settle(first)
    wait = await elsewhere(pacer, -3)
    assert wait.by_bot and 250 <= wait.ms <= 300  # a window after the first one's answer
    await asyncio.sleep(0.31)
    assert await ms(pacer, -3) == 0


async def test_a_grant_never_answered_stops_counting(redis_any: AnyRedis, queue_name: str) -> None:
    """A process that died with a post in flight holds the bot's slot at most `flight_ms`."""
    policy = PacePolicy(
        chat_ms=0, group_spacing_ms=0, bot_limit=1, bot_window_ms=100, flight_ms=200
    )
    pacer = Pacer(redis_any, queue_name, policy)
    assert await taken(pacer, -1) == 0
    pacer.local = LocalPace(policy)  # another process: it sees only what Redis holds
    assert (await pacer.take(-2)).by_bot
    await asyncio.sleep(0.35)
    assert await taken(pacer, -2) == 0


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
    assert local.wait(-1).ms == 0
    local.book(grant)
    time.sleep(0.08)
    assert local.wait(-2).by_bot  # still in flight
    local.settle(grant)
    assert 40 <= local.wait(-2).ms <= 50
    time.sleep(0.06)
    assert local.wait(-2).ms == 0


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
    assert await taken(online, GROUP) == 0  # through Redis: the reserve is used
    await asyncio.sleep(0.11)
    assert await taken(offline, GROUP) > 50_000
    await asyncio.sleep(0.11)  # a chat interval into the outage
    assert await taken(offline, OTHER_GROUP) == 0  # alone, in another group
    OUTAGES.reset()  # Redis is back (and the pause that follows is over)
    assert await taken(online, OTHER_GROUP) > 50_000  # Redis says yes; not here
    assert await taken(online, PRIVATE) == 0


async def test_an_answer_redis_missed_is_settled_once_it_is_back(
    redis_r: aioredis.Redis, redis_down: aioredis.Redis, queue_name: str
) -> None:
    """A post answered while Redis was away would count as in flight in Redis for
    `flight_ms` (a slot of the bot's second nobody uses): its process tells Redis with its
    next take through it."""
    policy = PacePolicy(chat_ms=0, group_spacing_ms=0, bot_limit=1, bot_window_ms=200, margin_ms=0)
    policy = replace(policy, flight_ms=60_000)
    online = Pacer(redis_r, queue_name, policy)
    offline = Pacer(redis_down, queue_name, policy)
    offline.local = online.local  # one process: Redis goes away, comes back
    grant = Grant(-1)
    assert (await online.take(-1, grant)).ms == 0
    await offline.settle(grant)  # answered while Redis was away
    await asyncio.sleep(0.25)
    assert (await elsewhere(online, -2)).by_bot  # another process: in flight for a minute
    online.local = offline.local
    assert (await online.take(-3)).by_bot  # this one tells Redis first: answered just now
    await asyncio.sleep(0.21)
    assert await ms(online, -2) == 0


async def test_nothing_is_posted_for_a_chat_interval_after_redis_comes_back(
    redis_r: aioredis.Redis, redis_down: aioredis.Redis, queue_name: str
) -> None:
    """Another process may have posted alone to any chat just before Redis came back."""
    policy = PacePolicy(chat_ms=300, margin_ms=0)
    await Pacer(redis_down, queue_name, policy).take(PRIVATE)  # this process sees the outage
    back = Pacer(redis_r, queue_name, policy)
    wait = await back.take(OTHER_GROUP)
    assert wait.by_bot and 250 <= wait.ms <= 300
    # Only asked, by the take that found Redis back and by the ones after it in the quiet: a
    # slot taken and not used would count as a post in flight in the bot's second.
    assert (await back.take(PRIVATE)).by_bot
    keys = Keys(queue_name)
    assert await redis_r.exists(keys.chat_pace(OTHER_GROUP), keys.chat_pace(PRIVATE)) == 0
    assert await redis_r.zcard(keys.bot_second(0)) == 0
    assert (await back.wait(OTHER_GROUP)).ms > 200
    await asyncio.sleep(0.31)
    assert await taken(back, OTHER_GROUP) == 0
