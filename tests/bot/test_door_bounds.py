"""The door's bounds and leases (bot/door.py, clock.py, polling.py): a take-over never takes
more than the door has room for; the lease over parked updates runs until the drain has
finished; a Redis outage longer than the lease never makes a process take its own parked
updates again; a poller fenced out by another stops fetching; a poller with a slow update in
hand fetches on its short timer. The real door on python-telegram-bot and the stand-in."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio as aioredis
from telegram import Update
from telegram.ext import Application, ApplicationBuilder, CallbackContext, TypeHandler

from codemojex.bot.door import Door
from codemojex.bot.order import order_key
from codemojex.bot.polling import Poller, updates_request
from codemojex.bot.ticket import DoorHooks
from codemojex.outages import Component
from codemojex.standin import StandIn
from codemojex.state.inbox import Inbox, PollerLease, record
from codemojex.state.keys import Keys
from tests.bot.conftest import ALICE, BARRIERS, BOB, bot_world
from tests.bot.test_outage import OwnRedis
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys
from tests.helpers.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="module")

LEASE_MS = 1000


class Seen:
    """A handler noting every update it runs, in order, holding those saying "hold"."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self.release = asyncio.Event()

    async def __call__(self, update: Update, context: CallbackContext[Any, Any, Any, Any]) -> None:
        self.order.append(update.update_id)
        message = update.effective_message
        if message is not None and message.text == "hold":
            await self.release.wait()

    @property
    def counts(self) -> Counter[int]:
        return Counter(self.order)


async def _never_down(component: Component) -> bool:
    return False


async def _nothing(update: Update) -> None:
    pass


@dataclass
class Rig:
    standin: StandIn
    app: Application[Any, Any, Any, Any, Any, Any]
    seen: Seen

    def door(self, redis: aioredis.Redis, queue: str, **options: Any) -> Door:
        return Door(
            self.app,
            Inbox(redis, queue, lease_ms=LEASE_MS),
            DoorHooks(_nothing, _nothing, _nothing, _never_down),
            key_of=lambda u: order_key(u, frozenset()),
            **options,
        )


@asynccontextmanager
async def rig() -> AsyncIterator[Rig]:
    async with StandIn() as standin:
        for user in (ALICE, BOB):
            standin.add_user(user, "U")
        app = (
            ApplicationBuilder()
            .token(standin.token)
            .base_url(standin.base_url)
            .get_updates_request(updates_request())  # as the bot's
            .build()
        )
        seen = Seen()
        app.add_handler(TypeHandler(Update, seen))
        async with app:
            try:
                yield Rig(standin, app, seen)
            finally:
                seen.release.set()


def _update(update_id: int, user: int, text: str) -> dict[str, Any]:
    chat = {"id": user, "type": "private", "first_name": "U"}
    sender = {"id": user, "is_bot": False, "first_name": "U"}
    message = {"message_id": update_id, "date": 0, "chat": chat, "from": sender, "text": text}
    return {"update_id": update_id, "message": message}


async def _left_by_a_gone_process(redis: aioredis.Redis, queue: str, ids: list[int]) -> None:
    """Updates parked by a process that then stopped: its lease handed on."""
    gone = Inbox(redis, queue, lease_ms=LEASE_MS)
    key = f"s:{ALICE}:{ALICE}"
    await gone.park([(u, key, record(_update(u, ALICE, "hold"), 0)) for u in ids])
    await gone.renew(lease_ms=0)


async def test_a_take_over_takes_no_more_than_the_door_has_room_for(queue_name: str) -> None:
    """Five parked updates of a gone process, a door with room for three: three taken (the
    oldest, in order), the rest once there is room again, each once, in order."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    try:
        async with rig() as r:
            door = r.door(redis, queue_name, held_max=3)
            # Each holds until released: the door keeps what it took in hand.
            await _left_by_a_gone_process(redis, queue_name, [9, 10, 11, 12, 13])
            assert await door.take_over() == 3
            assert door.held == 3
            assert await door.take_over() == 0  # no room
            door.run(lambda: True)
            r.seen.release.set()
            await until(lambda: len(r.seen.order) == 5, 10)
            await door.wait_idle()
            assert r.seen.order == [9, 10, 11, 12, 13]
            await door.stop(1)
    finally:
        await drop_keys(redis, queue_name)
        await redis.aclose()


async def test_the_lease_runs_through_the_drain(queue_name: str) -> None:
    """A poller stops while a parked update still runs, longer than a lease: neither the
    parked update nor the poller's lease is anybody else's before the drain has finished."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    try:
        async with rig() as r:
            door = r.door(redis, queue_name, deadline_s=0.2)
            lease = PollerLease(redis, queue_name, r.app.bot.id, lease_ms=LEASE_MS)
            poller = Poller(r.app, door, lease, timeout=1, stop_s=5)
            await poller.start()
            r.standin.send_private(ALICE, "hold")
            await until(lambda: door.counts["parked"] == 1, 5)
            stopping = asyncio.ensure_future(poller.stop())
            peer = Inbox(redis, queue_name, lease_ms=LEASE_MS)
            standby = PollerLease(redis, queue_name, r.app.bot.id, lease_ms=LEASE_MS)
            for _ in range(12):  # 2.4 s: more than two leases
                await asyncio.sleep(0.2)
                assert await peer.take(100) == []
                assert await standby.hold() == 0
            r.seen.release.set()
            await asyncio.wait_for(stopping, 10)
            assert list(r.seen.counts.values()) == [1]
            assert await redis.hlen(Keys(queue_name).inbox_parked) == 0  # forgotten
    finally:
        await drop_keys(redis, queue_name)
        await redis.aclose()


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
async def test_an_outage_longer_than_the_lease_leaves_a_process_its_own(
    queue_name: str, tmp_path: Any
) -> None:
    """A poller's parked update still running while Redis is away for more than the leases
    (its own and the poller's): once Redis is back, the poller holds its lease again and
    takes over what is gone, never its own update (it would run it a second time)."""
    own = OwnRedis(tmp_path)
    own.start()
    redis = aioredis.Redis.from_url(own.url, socket_timeout=1, socket_connect_timeout=1)
    try:
        await until_ready(redis)
        async with rig() as r:
            door = r.door(redis, queue_name, deadline_s=0.2)
            lease = PollerLease(redis, queue_name, r.app.bot.id, lease_ms=LEASE_MS)
            poller = Poller(r.app, door, lease, timeout=0.5, stop_s=2)
            await poller.start()
            r.standin.send_private(ALICE, "hold")
            await until(lambda: door.counts["parked"] == 1, 5)
            own.stop()
            await asyncio.sleep(2.5 * LEASE_MS / 1000)
            own.start()
            await until_ready(redis)
            await until(lambda: poller.fence > 0 and not poller.standby, 10)
            await asyncio.sleep(2 * LEASE_MS / 1000)  # a few turns of the clock: sweeps
            r.seen.release.set()
            await asyncio.wait_for(door.wait_idle(), 5)
            await poller.stop()
            assert door.counts["taken_over"] == 0
            assert list(r.seen.counts.values()) == [1]
    finally:
        await redis.aclose()
        own.stop()


async def until_ready(redis: aioredis.Redis) -> None:
    for _ in range(100):
        try:
            await redis.ping()
            return
        except Exception:
            await asyncio.sleep(0.1)
    raise AssertionError("redis did not come up")


async def test_a_poller_fenced_out_by_another_stops_fetching(queue_name: str) -> None:
    redis = aioredis.Redis.from_url(REDIS_URL)
    try:
        async with rig() as r:
            door = r.door(redis, queue_name)
            lease = PollerLease(redis, queue_name, r.app.bot.id, lease_ms=3000)
            poller = Poller(r.app, door, lease, timeout=0.2)
            await poller.start()
            await until(lambda: poller.fence > 0, 5)
            # Another process takes the lease (this one stalled past it): a higher fence.
            await redis.delete(Keys(queue_name).poller(r.app.bot.id))
            other = PollerLease(redis, queue_name, r.app.bot.id, lease_ms=3000)
            assert await other.hold() == poller.fence + 1
            await asyncio.sleep(1.5)  # the first poller renews within a third of its lease
            polls = r.standin.calls["getUpdates"]
            await asyncio.sleep(1.5)
            assert r.standin.calls["getUpdates"] == polls
            assert poller.fence == 0
            await poller.stop()
    finally:
        await drop_keys(redis, queue_name)
        await redis.aclose()


async def test_a_slow_update_in_hand_does_not_hold_the_fetching(
    bot_database_url: str, queue_name: str
) -> None:
    """The window (10) is nearly full behind a slow update (its deadline far): a new update
    is fetched on the short timer and answered long before the slow one is parked."""
    async with bot_world(
        bot_database_url, queue_name, bot_in_hand=10, bot_update_deadline_s=6.0
    ) as world:
        seen = Seen()
        world.app.add_handler(TypeHandler(Update, seen), group=-1)
        try:
            world.standin.send_private(ALICE, "hold")
            for user in BARRIERS[:8]:
                world.standin.send_private(user, "hi")
            await until(lambda: len(seen.order) == 9, 5)
            await asyncio.sleep(0.3)  # the window: 9 of 10, one room, less than a refill
            before = len(world.said(BARRIERS[9]))
            world.standin.send_private(BARRIERS[9], "/help")
            await world.standin.wait_for_sent_count(before + 1, chat_id=BARRIERS[9], timeout=2)
        finally:
            seen.release.set()
        await world.settle()


async def test_updates_a_bot_of_the_version_before_parked_are_taken_over(
    queue_name: str,
) -> None:
    """The version before kept a lease per parked update (`cmx:{q}:inbox:lease`): once those
    run out, the door takes them over, files them under their keys, runs each once, in order,
    and forgets them."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    keys = Keys(queue_name)
    try:
        async with rig() as r:
            door = r.door(redis, queue_name)
            for update_id in (9, 10):
                await redis.hset(keys.inbox_parked, str(update_id),
                                 record(_update(update_id, ALICE, "hi"), 0))  # fmt: skip
                await redis.zadd(keys.inbox_legacy_lease, {str(update_id): 0})
            assert await door.take_over() == 2
            assert await redis.hget(keys.inbox_where, "9") is not None  # filed as its own
            door.run(lambda: True)
            await until(lambda: len(r.seen.order) == 2, 5)
            await door.wait_idle()
            assert r.seen.order == [9, 10]
            await door.stop(1)
            assert not await redis.exists(keys.inbox_parked, keys.inbox_legacy_lease)
    finally:
        await drop_keys(redis, queue_name)
        await redis.aclose()
