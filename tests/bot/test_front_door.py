"""The front door (codemojex.bot.polling, .webhook, .door): an update is confirmed to
Telegram once settled (finished, parked in Redis past its deadline, or a dead letter), at
most `bot_in_hand` unsettled; the real bot on the stand-in, with updates held in a handler."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis.asyncio as aioredis
from telegram import Update
from telegram.ext import ApplicationBuilder, CallbackContext, MessageHandler, TypeHandler, filters

from codemojex.bot import build_application, running
from codemojex.bot.door import Door
from codemojex.bot.order import order_key
from codemojex.bot.polling import Poller, updates_request
from codemojex.bot.ticket import DoorHooks
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.outages import Component
from codemojex.standin import StandIn
from codemojex.state.inbox import Inbox, PollerLease
from codemojex.state.keys import Keys
from tests.bot.conftest import ALICE, BARRIERS, BOB, CAROL, World, bot_world
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, free_port
from tests.helpers.waiting import until

SECRET = "s3cret-Token_for-the-front-door-0123456789"

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Hold:
    """A first handler that notes every update it sees and holds those saying "hold"."""

    def __init__(self) -> None:
        self.seen: Counter[int] = Counter()
        self.release = asyncio.Event()

    async def __call__(self, update: Update, context: CallbackContext[Any, Any, Any, Any]) -> None:
        self.seen[update.update_id] += 1
        message = update.effective_message
        if message is not None and message.text == "hold":
            await self.release.wait()


@asynccontextmanager
async def holding(world: World) -> AsyncIterator[Hold]:
    hold = Hold()
    world.app.add_handler(TypeHandler(Update, hold), group=-1)
    try:
        yield hold
    finally:
        hold.release.set()


async def parked(world: World) -> int:
    return int(await world.redis.hlen(Keys(world.settings.queue).inbox_parked))


async def forgotten(world: World, timeout_s: float = 5.0) -> None:
    """Until no update is parked (a finished one is forgotten at the door's next tick)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while await parked(world):
        assert asyncio.get_running_loop().time() < deadline, "still parked"
        await asyncio.sleep(0.02)


async def test_polling_holds_a_window_until_its_head_is_parked(
    bot_database_url: str, queue_name: str
) -> None:
    async with bot_world(
        bot_database_url, queue_name, bot_in_hand=10, bot_update_deadline_s=0.6
    ) as world:
        standin = world.standin
        async with holding(world) as hold:
            standin.send_private(ALICE, "hold")
            for user in BARRIERS[:40]:
                standin.send_private(user, "hi")
            await until(lambda: len(hold.seen) == 10)
            polls = standin.calls["getUpdates"]
            await asyncio.sleep(0.3)
            # Within the held update's deadline the window holds: the held update and the 9
            # after it, nothing more fetched (no getUpdates in a loop either), nothing
            # confirmed, since the first update in it is not settled.
            assert len(hold.seen) == 10
            assert standin.calls["getUpdates"] - polls <= 4  # the refetch timer, no more
            assert standin.pending_updates == 41
            # Past it, the held update is parked in Redis: confirmed, and the others flow.
            await until(lambda: len(hold.seen) == 41, 5)
            await standin.wait_until_delivered(timeout=5)
            assert await parked(world) == 1
            hold.release.set()
            await world.settle()
        await forgotten(world)
        assert set(hold.seen.values()) == {1}


async def test_webhook_answers_once_settled_and_503_past_the_bound(
    bot_database_url: str, queue_name: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram/hook"
    async with bot_world(
        bot_database_url,
        queue_name,
        webhook=True,
        webhook_url=url,
        webhook_secret=SECRET,
        webhook_listen="127.0.0.1",
        webhook_port=port,
        bot_in_hand=2,
        bot_update_deadline_s=0.8,
    ) as world:
        standin = world.standin
        assert (await world.app.bot.get_webhook_info()).max_connections == 2
        async with holding(world) as hold:
            standin.send_private(ALICE, "hold")
            standin.send_private(BOB, "hold")
            await until(lambda: len(hold.seen) == 2)
            await asyncio.sleep(0.2)
            # Both are being handled, neither is answered: Telegram still has them.
            assert standin.pending_updates == 2
            extra = {"message": {**_private(BARRIERS[0]), "text": "past the bound"}}
            assert await standin.post_update_to_webhook(url, extra, SECRET) == 503
            # Past their deadline both are parked and answered, still held.
            await standin.wait_until_delivered(timeout=5)
            assert await parked(world) == 2
            hold.release.set()
            await world.settle()
        assert sorted(hold.seen.values()) == [1, 1, 1]  # the barrier's /help too
        await forgotten(world)


def _private(user: int) -> dict[str, object]:
    return {
        "message_id": 1,
        "date": 0,
        "chat": {"id": user, "type": "private", "first_name": "B"},
        "from": {"id": user, "is_bot": False, "first_name": "B"},
    }


async def _nothing(update: Update) -> None:
    pass


async def _never_down(component: Component) -> bool:
    return False


async def test_a_stop_that_times_out_confirms_only_what_was_settled(queue_name: str) -> None:
    """An update still held when the stop timeout ends is cancelled, never confirmed: it and
    the ones after it come again; the one before it finished and is confirmed."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    try:
        async with StandIn() as standin:
            for user in (ALICE, BOB, CAROL):
                standin.add_user(user, "U")
            app = (
                ApplicationBuilder()
                .token(standin.token)
                .base_url(standin.base_url)
                .get_updates_request(updates_request())  # as the bot's: the last confirm's own
                .build()
            )
            hold = Hold()
            app.add_handler(TypeHandler(Update, hold))
            async with app:
                door = Door(
                    app,
                    Inbox(redis, queue_name),
                    DoorHooks(_nothing, _nothing, _nothing, _never_down),
                    key_of=lambda u: order_key(u, frozenset()),
                    deadline_s=30,
                )
                lease = PollerLease(redis, queue_name, app.bot.id, lease_ms=5_000)
                poller = Poller(app, door, lease, timeout=1, stop_s=0.3)
                await poller.start()
                standin.send_private(ALICE, "fine")
                standin.send_private(BOB, "hold")
                standin.send_private(CAROL, "fine too")
                await until(lambda: len(hold.seen) == 3)
                await asyncio.sleep(0.1)
                await poller.stop()
                assert standin.pending_updates == 2
                again = await app.bot.get_updates(timeout=0)
            assert [u.effective_message.text for u in again if u.effective_message] == [
                "hold",
                "fine too",
            ]
            # It handed its lease on: the next poller need not wait for it to run out.
            assert not await redis.exists(Keys(queue_name).poller(app.bot.id))
    finally:
        await drop_keys(redis, queue_name)
        await redis.aclose()


async def test_update_ids_started_anew_below_the_offset_are_taken(world: World) -> None:
    front = world.front
    assert front is not None and front.poller is not None
    await world.settle()
    await world.standin.wait_until_delivered()
    resets = front.poller.id_resets
    world.standin.restart_update_ids(7)  # far below the offset already sent
    await world.settle()  # a /help sent now is answered: the bot hears the new ids
    assert front.poller.id_resets == resets + 1
    polls = world.standin.calls["getUpdates"]
    await asyncio.sleep(0.5)
    assert world.standin.calls["getUpdates"] - polls <= 2  # long polls, no hot loop
    await world.settle()


async def test_one_poller_per_bot(world: World) -> None:
    """A second bot process of the same token stands by (its /readyz says so) and polls
    nothing; when the first stops, it takes over."""
    second = build_application(
        world.settings.bot(),
        lanes=world.lanes,
        sessionmaker=world.sessionmaker,
        redis=world.redis,
    )
    async with running(second, poll_timeout=1) as standby:
        await until(lambda: standby.standby, 5)
        assert standby.poller is not None and standby.poller.fence == 0
        await world.settle()  # the first still answers
        assert standby.gauges()["standby"] == 1.0
    assert world.front is not None and not world.front.standby


async def test_a_standby_takes_over_when_the_poller_stops(
    bot_database_url: str, queue_name: str
) -> None:
    async with bot_world(bot_database_url, queue_name) as world:
        second = build_application(
            world.settings.bot(),
            lanes=world.lanes,
            sessionmaker=world.sessionmaker,
            redis=world.redis,
        )
        first = world.front
        assert first is not None and first.poller is not None
        async with running(second, poll_timeout=1) as standby:
            await until(lambda: standby.standby, 5)
            await first.poller.stop()  # the first process stops; it releases the lease
            await until(lambda: not standby.standby, 10)
            before = len(world.said(BARRIERS[3]))
            world.standin.send_private(BARRIERS[3], "/help")
            await world.standin.wait_for_sent_count(before + 1, chat_id=BARRIERS[3], timeout=10)


async def test_an_unreadable_update_is_a_dead_letter_and_holds_nothing(world: World) -> None:
    inbox = Inbox(world.redis, world.settings.queue)
    before = len(await inbox.dead_letters())
    bad = world.standin.push_raw_update({"message": "not a message"})
    await world.settle()  # the updates after it are handled
    letters = await inbox.dead_letters()
    assert len(letters) == before + 1
    assert letters[0].update_id == bad and letters[0].kind == "unreadable"
    await world.standin.wait_until_delivered()


async def test_a_handler_that_fails_every_try_is_a_dead_letter(world: World) -> None:
    """A bug: tried `door.TRIES` times, then a dead letter and one apology; the
    sender's next update is handled."""

    async def boom(update: Update, context: CallbackContext[Any, Any, Any, Any]) -> None:
        raise RuntimeError("a bug")

    world.app.add_handler(MessageHandler(filters.Text(["boom"]), boom), group=-2)
    inbox = Inbox(world.redis, world.settings.queue)
    before = len(await inbox.dead_letters())
    chat = world.new_group()
    boom_id = world.standin.send_text(chat, ALICE, "boom")
    after = world.standin.send_text(chat, ALICE, "/help")
    await world.settle()
    assert world.replies_to(chat, boom_id) == [texts.went_wrong(EN)]
    assert world.replies_to(chat, after) == [texts.help_text(EN)]
    letters = await inbox.dead_letters()
    assert len(letters) == before + 1
    letter = letters[0]
    assert (letter.kind, letter.chat_id, letter.user_id) == ("message", chat, ALICE)
    assert (letter.error, letter.tries) == ("RuntimeError", 3)
    assert [type(e) for e in world.errors] == [RuntimeError] * 3
    world.errors.clear()


@pytest.mark.parametrize("body", [{"message": "not a message"}, {"callback_query": {"id": "1"}}])
async def test_an_unreadable_webhook_update_is_answered_200_and_kept(
    bot_database_url: str, queue_name: str, body: dict[str, Any]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    async with bot_world(
        bot_database_url,
        queue_name,
        webhook=True,
        webhook_url=url,
        webhook_secret=SECRET,
        webhook_port=port,
    ) as world:
        assert await world.standin.post_update_to_webhook(url, body, SECRET) == 200
        letters = await Inbox(world.redis, world.settings.queue).dead_letters()
        assert letters[0].kind == "unreadable"


async def test_an_update_that_finishes_while_it_is_parked_is_settled_once(
    queue_name: str,
) -> None:
    """The park call is in flight when the update's handler finishes: it is settled done
    (once), and what the park wrote is forgotten at the next tick."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    parking, let_park, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    parked = asyncio.Event()

    class SlowInbox(Inbox):
        """The real inbox, its park held until the test lets it go."""

        async def park(self, records: Any) -> None:
            parking.set()
            await let_park.wait()
            await super().park(records)
            parked.set()

    async def hold(update: Update, context: CallbackContext[Any, Any, Any, Any]) -> None:
        await release.wait()

    standin = StandIn()
    await standin.start()
    app = ApplicationBuilder().token(standin.token).base_url(standin.base_url).build()
    app.add_handler(TypeHandler(Update, hold))
    await app.initialize()
    door = Door(
        app,
        SlowInbox(redis, queue_name),
        DoorHooks(_nothing, _nothing, _nothing, _never_down),
        key_of=lambda u: order_key(u, frozenset()),
        deadline_s=0.05,
    )
    clock = asyncio.ensure_future(door.keep(lambda: False))
    try:
        data = {"update_id": 5, "message": {**_private(ALICE), "text": "hold"}}
        ticket = door.take(Update.de_json(data, app.bot), data)
        await asyncio.wait_for(parking.wait(), 5)  # past its deadline, being parked
        release.set()
        await asyncio.wait_for(door.wait_idle(), 5)
        let_park.set()
        assert await asyncio.wait_for(ticket.settled, 5) == "done"
        # What the park wrote is there once it returns (looked at before, an empty hash would
        # pass for forgotten), and forgotten at a tick after.
        await asyncio.wait_for(parked.wait(), 5)
        for _ in range(100):
            if not await redis.hlen(Keys(queue_name).inbox_parked):
                break
            await asyncio.sleep(0.05)
        assert await redis.hlen(Keys(queue_name).inbox_parked) == 0
        assert (door.counts["done"], door.counts["parked"]) == (1, 0)
    finally:
        clock.cancel()
        await app.shutdown()
        await standin.stop()
        await drop_keys(redis, queue_name)
        await redis.aclose()
