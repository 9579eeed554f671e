"""The bot's inbox in Redis (state/inbox.py): parked updates held by the process that parked
them under one lease, taken over once it runs out (or a higher poller fence comes), whole keys
in update-id order, never by their own process; updates entering behind a key's parked ones;
forgotten once finished; the dead letters, bounded; one poller per bot, fenced. On the real
Redis, fakeredis and a Redis Cluster."""

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


def another(any_redis: AnyRedis, queue_name: str) -> Inbox:
    """Another process's view of the same inbox (a holder of its own)."""
    return Inbox(any_redis, queue_name, lease_ms=1000)


@pytest.fixture
def keys(queue_name: str) -> Keys:
    return Keys(queue_name)


KEY = "s:-100:42"


def upd(update_id: int) -> dict[str, object]:
    return {"update_id": update_id, "message": {"message_id": update_id, "text": "🍎🍌"}}


async def test_a_gone_holders_updates_are_taken_over_once_its_lease_ran_out(
    inbox: Inbox, any_redis: AnyRedis, queue_name: str
) -> None:
    taker = another(any_redis, queue_name)
    await inbox.park([(7, KEY, record(UPDATE, 1)), (5, "c:-100", record(b'{"update_id": 5}', 0))])
    assert await taker.take(100) == []  # held by whoever parked them, alive
    assert await inbox.counts() == (2, 0)
    await asyncio.sleep(1.1)
    taken = await taker.take(100)
    assert sorted((p.update_id, p.tries) for p in taken) == [(5, 0), (7, 1)]
    assert next(p for p in taken if p.update_id == 7).update == UPDATE
    assert await another(any_redis, queue_name).take(100) == []  # the taker's now, alive


async def test_a_keys_updates_are_taken_in_update_id_order_not_string_order(
    inbox: Inbox, any_redis: AnyRedis, queue_name: str
) -> None:
    """9 before 10 (which sorts first as a string), and a key whose oldest update a live
    process took is left to it: another process takes none of the rest."""
    await inbox.park([(10, KEY, record(upd(10), 0)), (9, KEY, record(upd(9), 0))])
    await inbox.park([(11, KEY, record(upd(11), 0))])
    await inbox.renew(lease_ms=0)  # gone
    first = another(any_redis, queue_name)
    assert [p.update_id for p in await first.take(1)] == [9]
    assert await another(any_redis, queue_name).take(100) == []  # 10, 11 wait behind 9
    assert [p.update_id for p in await first.settle([9], 100)] == [10, 11]  # handed on


async def test_a_process_never_takes_its_own_updates_over(inbox: Inbox) -> None:
    await inbox.park([(7, KEY, record(UPDATE, 0))])
    await asyncio.sleep(1.1)  # its lease ran out (Redis was out longer than the lease)
    assert await inbox.take(100) == []
    assert await inbox.renew() == 1  # still its own


async def test_renewed_leases_keep_updates_and_a_zero_lease_hands_them_on(
    inbox: Inbox, any_redis: AnyRedis, queue_name: str
) -> None:
    taker = another(any_redis, queue_name)
    await inbox.park([(7, KEY, record(UPDATE, 0))])
    await asyncio.sleep(0.6)
    assert await inbox.renew() == 1
    await asyncio.sleep(0.6)
    assert await taker.take(100) == []
    assert await inbox.renew(lease_ms=0) == 1
    assert [p.update_id for p in await taker.take(100)] == [7]
    assert await inbox.renew() == 0  # the taker's now


async def test_a_higher_poller_fence_takes_a_lower_ones_updates_at_once(
    inbox: Inbox, any_redis: AnyRedis, queue_name: str
) -> None:
    inbox.fence = 4
    await inbox.take(100)  # stamps its fence
    await inbox.park([(7, KEY, record(UPDATE, 0))])
    same = another(any_redis, queue_name)
    same.fence = 4
    assert await same.take(100) == []  # its lease runs, and no higher fence
    higher = another(any_redis, queue_name)
    higher.fence = 5
    assert [p.update_id for p in await higher.take(100)] == [7]


async def test_entering_updates_wait_behind_their_keys_parked_ones(
    inbox: Inbox, any_redis: AnyRedis, queue_name: str
) -> None:
    peer = another(any_redis, queue_name)
    await inbox.park([(7, KEY, record(upd(7), 0))])
    # Nothing parked of key c:-1: run; a first call sends no JSON: "give it"; a copy of 7.
    assert await peer.enter([(6, "c:-1", ""), (9, KEY, ""), (7, KEY, "")]) == [0, 4, 3]
    assert await inbox.enter([(8, KEY, record(upd(8), 0))]) == [2]  # behind its own
    assert await peer.enter([(9, KEY, record(upd(9), 0))]) == [1]  # behind another's
    assert await inbox.enter([(10, KEY, record(upd(10), 0))]) == [1]  # behind 9, not its own
    assert await peer.take(100) == []  # the key's oldest is held by a live process
    # 7 and 8 finished: what waits behind them is their holder's, in order.
    assert [p.update_id for p in await inbox.settle([7, 8], 100)] == [9, 10]
    assert await inbox.settle([9, 10], 100) == []
    assert await inbox.counts() == (0, 0)


async def test_a_finished_update_is_forgotten(
    inbox: Inbox, any_redis: AnyRedis, keys: Keys
) -> None:
    await inbox.park([(7, KEY, record(UPDATE, 0)), (8, "c:-100", record(UPDATE, 0))])
    assert await inbox.settle([7, 8], 100) == []
    assert await inbox.counts() == (0, 0)
    for key in (keys.inbox_parked, keys.inbox_where, keys.inbox_key(KEY), keys.inbox_key("c:-100"),
                keys.inbox_held(inbox.holder)):  # fmt: skip
        assert await any_redis.exists(key) == 0
    await inbox.renew(lease_ms=0)
    assert await any_redis.exists(keys.inbox_holders) == 0


async def test_dead_letters_are_bounded(inbox: Inbox, any_redis: AnyRedis, keys: Keys) -> None:
    await inbox.park([(7, KEY, record(UPDATE, 2))])
    for update_id in (1, 2, 3, 7):
        letter = {"kind": "message", "chat": -100, "user": 42, "error": "KeyError", "tries": 3}
        await inbox.dead(update_id, letter, UPDATE)
    letters = await inbox.dead_letters()
    assert [d.update_id for d in letters] == [7, 3, 2]  # the newest dead_max
    assert (letters[0].kind, letters[0].chat_id, letters[0].user_id) == ("message", -100, 42)
    assert (letters[0].error, letters[0].tries) == ("KeyError", 3)
    assert await inbox.counts() == (1, 3)  # a parked one is then settled (the door does)
    await inbox.settle([7], 100)
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
