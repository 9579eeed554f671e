"""The bot confirms to Telegram only updates whose handlers finished, and holds at most
`bot_in_hand` of them: polling (codemojex.bot.polling) and webhook (codemojex.bot.webhook),
the real bot on the stand-in, with one update held in its handler."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from telegram import Update
from telegram.ext import ApplicationBuilder, CallbackContext, TypeHandler

from codemojex.bot.polling import Poller
from codemojex.bot.processor import PerSenderUpdateProcessor
from codemojex.standin import StandIn
from tests.bot.conftest import ALICE, BARRIERS, BOB, CAROL, World, bot_world
from tests.support import free_port

SECRET = "s3cret-Token_for-the-front-door-0123456789"


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


async def until(probe: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(0.01)


async def test_polling_holds_a_window_and_confirms_only_what_finished(
    bot_database_url: str, bot_queue: str
) -> None:
    async with bot_world(bot_database_url, bot_queue, bot_in_hand=10) as world:
        standin = world.standin
        async with holding(world) as hold:
            standin.send_private(ALICE, "hold")
            others = list(BARRIERS[:40])
            for user in others:
                standin.send_private(user, "hi")
            await until(lambda: len(hold.seen) == 10)
            polls = standin.calls["getUpdates"]
            await asyncio.sleep(0.5)
            # The held update and the 9 after it are the window: nothing more is fetched
            # (no getUpdates in a loop either), and nothing is confirmed, since the first
            # update in it has not finished.
            assert len(hold.seen) == 10
            assert standin.calls["getUpdates"] - polls <= 1
            assert standin.pending_updates == 41
            hold.release.set()
            await standin.wait_until_delivered(timeout=20)
        assert len(hold.seen) == 41 and set(hold.seen.values()) == {1}


async def test_webhook_answers_once_handled_and_503_past_the_bound(
    bot_database_url: str, bot_queue: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram/hook"
    async with bot_world(
        bot_database_url,
        bot_queue,
        webhook=True,
        webhook_url=url,
        webhook_secret=SECRET,
        webhook_listen="127.0.0.1",
        webhook_port=port,
        bot_in_hand=2,
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
            hold.release.set()
            await standin.wait_until_delivered(timeout=20)
        assert sorted(hold.seen.values()) == [1, 1]


def _private(user: int) -> dict[str, object]:
    return {
        "message_id": 1,
        "date": 0,
        "chat": {"id": user, "type": "private", "first_name": "B"},
        "from": {"id": user, "is_bot": False, "first_name": "B"},
    }


async def test_a_stop_that_times_out_confirms_only_what_finished() -> None:
    """An update still held when the stop timeout ends is cancelled, never confirmed: it and
    the ones after it come again; the one before it finished and is confirmed."""
    async with StandIn() as standin:
        for user in (ALICE, BOB, CAROL):
            standin.add_user(user, "U")
        app = (
            ApplicationBuilder()
            .token(standin.token)
            .base_url(standin.base_url)
            .updater(None)
            .concurrent_updates(PerSenderUpdateProcessor(8))
            .build()
        )
        hold = Hold()
        app.add_handler(TypeHandler(Update, hold))
        async with app:
            poller = Poller(app, timeout=1, stop_s=0.3)
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
