"""The Redis pacer: windows, atomic all-or-nothing grants, RetryAfter blocks (on the real
Redis, fakeredis and a Redis Cluster: every key of one acquire shares the `{<queue>}` slot)."""

from __future__ import annotations

import asyncio
import itertools
import time

from codemojex.posting.keys import Keys
from codemojex.posting.pacer import PacePolicy, Pacer, Window
from codemojex.redistypes import AnyRedis

GROUP = -1001
OTHER_GROUP = -1002
PRIVATE = 42


async def test_one_post_per_second_per_chat(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name)
    assert await pacer.try_acquire(GROUP) == 0
    wait = await pacer.try_acquire(GROUP)
    assert 0 < wait <= 1000 + pacer.policy.margin_ms
    # Another chat has its own pace.
    assert await pacer.try_acquire(OTHER_GROUP) == 0
    assert await pacer.try_acquire(PRIVATE) == 0


async def test_group_minute_window_and_private_chat(redis_any: AnyRedis, queue_name: str) -> None:
    policy = PacePolicy(
        chat=(Window(3, 60_000),), group=(Window(2, 60_000),), bot=(Window(100, 1000),), margin_ms=0
    )
    pacer = Pacer(redis_any, queue_name, policy)
    assert [await pacer.try_acquire(GROUP) for _ in range(3)][:2] == [0, 0]
    assert await pacer.try_acquire(GROUP) > 50_000
    assert [await pacer.try_acquire(PRIVATE) for _ in range(3)] == [0, 0, 0]
    assert await pacer.try_acquire(PRIVATE) > 50_000


async def test_refusal_takes_no_slot_anywhere(redis_any: AnyRedis, queue_name: str) -> None:
    """A post refused by the bot-wide window must not use up the chat's window (atomicity)."""
    policy = PacePolicy(group=(Window(5, 60_000),), bot=(Window(2, 60_000),), margin_ms=0)
    pacer = Pacer(redis_any, queue_name, policy)
    assert await pacer.try_acquire(-1) == 0
    assert await pacer.try_acquire(-2) == 0
    for _ in range(5):
        assert await pacer.try_acquire(-3) > 0
    chat_key = Keys(queue_name).chat_window(-3, 0)
    assert await redis_any.zcard(chat_key) == 0


async def test_block_chat_and_bot(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name, PacePolicy(margin_ms=0))
    await pacer.block_chat(GROUP, 5000)
    assert 4000 < await pacer.try_acquire(GROUP) <= 5000
    assert await pacer.try_acquire(OTHER_GROUP) == 0
    # A shorter block never shortens a longer one.
    await pacer.block_chat(GROUP, 10)
    assert await pacer.try_acquire(GROUP) > 4000
    await pacer.block_bot(3000)
    assert 2000 < await pacer.try_acquire(PRIVATE) <= 3000


async def test_acquire_waits_out_the_window(redis_any: AnyRedis, queue_name: str) -> None:
    policy = PacePolicy(chat=(Window(1, 150),), bot=(Window(100, 1000),), margin_ms=0)
    pacer = Pacer(redis_any, queue_name, policy)
    start = time.monotonic()
    for _ in range(4):
        assert await pacer.acquire(PRIVATE)
    # Three gaps of at least 150 ms each (the Redis clock decides; allow 10 ms rounding each).
    assert time.monotonic() - start >= 0.42
    # With a deadline already past, acquire gives up instead of waiting.
    assert not await pacer.acquire(PRIVATE, deadline=time.monotonic())


async def test_two_pacers_share_the_pace(redis_any: AnyRedis, queue_name: str) -> None:
    """Two sender processes (two Pacer objects on one Redis) together keep one pace."""
    policy = PacePolicy(chat=(Window(1, 100),), bot=(Window(100, 1000),), margin_ms=0)
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
    # Every consecutive grant is at least one window apart (less a little for clock reading).
    assert min(gaps) >= 0.08


async def test_the_next_post_is_measured_from_the_answer(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A slow post: granted at t, answered at t+0.35 s. The next slot opens a window after
    the answer, not after the grant, so the two posts cannot reach Telegram too close."""
    policy = PacePolicy(chat=(Window(1, 300),), bot=(Window(100, 1000),), margin_ms=0)
    pacer = Pacer(redis_any, queue_name, policy)
    grant = await pacer.acquire(PRIVATE)
    assert grant is not None
    await asyncio.sleep(0.35)  # the request is on the wire longer than a window
    await pacer.settle(grant)
    wait = await pacer.try_acquire(PRIVATE)
    assert 250 <= wait <= 300


async def test_wait_ms_peeks_without_taking(redis_any: AnyRedis, queue_name: str) -> None:
    pacer = Pacer(redis_any, queue_name, PacePolicy(margin_ms=0))
    assert await pacer.wait_ms(GROUP) == 0
    assert await pacer.wait_ms(GROUP) == 0
    assert await pacer.try_acquire(GROUP) == 0
    assert 0 < await pacer.wait_ms(GROUP) <= 1000
