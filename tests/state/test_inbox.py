"""The bot's inbox in Redis (state/inbox.py): parked updates leased to the process that
parked them, taken over once a lease runs out, forgotten once finished; the dead letters,
bounded; one poller per bot, fenced. On the real Redis, fakeredis and a Redis Cluster."""

from __future__ import annotations

import asyncio

import pytest

from codemojex.state.inbox import Inbox, PollerLease, record
from codemojex.state.keys import Keys
from codemojex.values.redistypes import AnyRedis

UPDATE = {"update_id": 7, "message": {"message_id": 1, "text": "🍎🍌"}}


@pytest.fixture
def inbox(any_redis: AnyRedis, queue_name: str) -> Inbox:
    return Inbox(any_redis, queue_name, lease_ms=1000, dead_max=3, dead_ttl_s=60)


@pytest.fixture
def keys(queue_name: str) -> Keys:
    return Keys(queue_name)


async def test_a_parked_update_is_taken_over_only_once_its_lease_ran_out(
    inbox: Inbox, any_redis: AnyRedis
) -> None:
    await inbox.park([(7, record(UPDATE, 1)), (5, record(b'{"update_id": 5}', 0))])
    assert await inbox.take() == []  # leased to whoever parked them
    assert await inbox.counts() == (2, 0)
    await asyncio.sleep(1.1)
    taken = await inbox.take()
    assert [(p.update_id, p.tries) for p in taken] == [(5, 0), (7, 1)]  # oldest first
    assert taken[1].update == UPDATE
    assert await inbox.take() == []  # leased anew to the taker


async def test_renewed_leases_keep_updates_and_a_zero_lease_hands_them_on(
    inbox: Inbox,
) -> None:
    await inbox.park([(7, record(UPDATE, 0))])
    await asyncio.sleep(0.6)
    assert await inbox.renew([7, 8]) == 1  # 8 was never parked: left alone
    await asyncio.sleep(0.6)
    assert await inbox.take() == []
    assert await inbox.renew([7], lease_ms=0) == 1
    assert [p.update_id for p in await inbox.take()] == [7]


async def test_a_finished_update_is_forgotten(
    inbox: Inbox, any_redis: AnyRedis, keys: Keys
) -> None:
    await inbox.park([(7, record(UPDATE, 0)), (8, record(UPDATE, 0))])
    await inbox.settle([7, 8])
    assert await inbox.counts() == (0, 0)
    assert await any_redis.exists(keys.inbox_parked) == 0
    assert await any_redis.exists(keys.inbox_lease) == 0


async def test_dead_letters_are_bounded_and_leave_the_parked(
    inbox: Inbox, any_redis: AnyRedis, keys: Keys
) -> None:
    await inbox.park([(7, record(UPDATE, 2))])
    for update_id in (1, 2, 3, 7):
        letter = {"kind": "message", "chat": -100, "user": 42, "error": "KeyError", "tries": 3}
        await inbox.dead(update_id, letter, UPDATE)
    letters = await inbox.dead_letters()
    assert [d.update_id for d in letters] == [7, 3, 2]  # the newest dead_max
    assert (letters[0].kind, letters[0].chat_id, letters[0].user_id) == ("message", -100, 42)
    assert (letters[0].error, letters[0].tries) == ("KeyError", 3)
    assert await inbox.counts() == (0, 3)
    ttl = await any_redis.ttl(keys.inbox_dead)
    assert 0 < ttl <= 60


async def test_one_poller_per_bot_fenced(any_redis: AnyRedis, queue_name: str) -> None:
    first = PollerLease(any_redis, queue_name, 123, lease_ms=1000)
    second = PollerLease(any_redis, queue_name, 123, lease_ms=1000)
    other_bot = PollerLease(any_redis, queue_name, 456, lease_ms=1000)
    fence = await first.hold()
    assert fence >= 1
    assert await second.hold() == 0  # stands by
    assert await first.hold() == fence  # renewed, same fence
    assert await other_bot.hold() >= 1  # another bot's lease is its own
    await second.release()  # not its lease: nothing happens
    assert await second.hold() == 0
    await first.release()
    assert await second.hold() == fence + 1  # taken over, a higher fence
    await asyncio.sleep(1.1)  # the second dies: its lease runs out
    assert await first.hold() == fence + 2
    ttl = await any_redis.ttl(Keys(queue_name).poller_fence(123))
    assert ttl > 0  # the fence expires too, long after
