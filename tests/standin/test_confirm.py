"""The stand-in confirms updates as Telegram does: getUpdates returns again whatever no offset
confirmed, and the webhook gets an update again until it answers 2xx, with at most
max_connections in flight and one at a time per chat."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from telegram import Bot

from codemojex.standin import StandIn
from tests.helpers.support import free_port
from tests.standin.conftest import ALICE, BOB, GROUP, OTHER_GROUP, OWNER

SECRET = "a-webhook-secret-for-the-stand-in-tests"


async def test_get_updates_returns_again_what_no_offset_confirmed(
    bot: Bot, standin: StandIn
) -> None:
    ids = [standin.send_text(GROUP, ALICE, f"m{i}") for i in range(6)]
    first = await bot.get_updates(limit=4, timeout=0)
    assert [u.message.message_id for u in first if u.message] == ids[:4]
    # A bot that died here (it confirmed nothing) gets the same updates after its restart.
    again = await bot.get_updates(limit=4, timeout=0)
    assert [u.update_id for u in again] == [u.update_id for u in first]
    # An offset in the middle confirms only the updates below it.
    rest = await bot.get_updates(offset=first[2].update_id, timeout=0)
    assert [u.message.message_id for u in rest if u.message] == ids[2:]
    assert standin.pending_updates == 4
    await bot.get_updates(offset=rest[-1].update_id + 1, timeout=0)
    assert standin.pending_updates == 0


@dataclass
class Hook:
    """A webhook that answers as `answer` says, noting what it got and how many at once."""

    answer: Callable[[dict[str, object]], Awaitable[web.StreamResponse]]
    url: str = ""
    got: list[dict[str, object]] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    now: int = 0
    most: int = 0
    chats_now: Counter[object] = field(default_factory=Counter)
    overlaps: int = 0

    async def receive(self, request: web.Request) -> web.StreamResponse:
        update = await request.json()
        chat = update["message"]["chat"]["id"]
        self.got.append(update)
        self.at.append(time.monotonic())
        self.now += 1
        self.most = max(self.most, self.now)
        self.chats_now[chat] += 1
        self.overlaps += self.chats_now[chat] > 1
        try:
            return await self.answer(update)
        finally:
            self.now -= 1
            self.chats_now[chat] -= 1

    def texts(self) -> list[str]:
        return [str(u["message"]["text"]) for u in self.got]  # type: ignore[index]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Hook], Awaitable[Hook]]]:
    runners: list[web.AppRunner] = []

    async def start(hook: Hook) -> Hook:
        app = web.Application()
        app.router.add_post("/hook", hook.receive)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        hook.url = f"http://127.0.0.1:{port}/hook"
        return hook

    yield start
    for runner in runners:
        await runner.cleanup()


async def ok(update: dict[str, object]) -> web.StreamResponse:
    return web.Response()


async def test_webhook_sends_an_update_again_until_it_is_answered_2xx(
    bot: Bot, standin: StandIn, serve: Callable[[Hook], Awaitable[Hook]]
) -> None:
    fails: Counter[str] = Counter()

    async def flaky(update: dict[str, object]) -> web.StreamResponse:
        text = str(update["message"]["text"])  # type: ignore[index]
        fails[text] += 1
        if text == "refused" and fails[text] <= 2:
            return web.Response(status=500)
        if text == "dropped" and fails[text] <= 1:
            raise ConnectionResetError  # aiohttp drops the connection, no answer
        return web.Response()

    hook = await serve(Hook(flaky))
    standin.send_text(GROUP, ALICE, "refused")
    standin.send_text(OTHER_GROUP, BOB, "dropped")
    standin.send_text(GROUP, ALICE, "after it")
    assert await bot.set_webhook(hook.url, secret_token=SECRET)
    await standin.wait_until_delivered(timeout=10)
    assert Counter(hook.texts()) == {"refused": 3, "dropped": 2, "after it": 1}
    # A chat's next update waits for its current one: "after it" came after its 2xx.
    assert hook.texts().index("after it") > max(
        i for i, t in enumerate(hook.texts()) if t == "refused"
    )
    info = await bot.get_webhook_info()
    assert info.pending_update_count == 0 and info.last_error_message


async def test_webhook_waits_the_retry_after_its_answer_gave(
    bot: Bot, standin: StandIn, serve: Callable[[Hook], Awaitable[Hook]]
) -> None:
    async def busy_once(update: dict[str, object]) -> web.StreamResponse:
        if len(hook.got) == 1:
            return web.Response(status=503, headers={"Retry-After": "1"})
        return web.Response()

    hook = await serve(Hook(busy_once))
    standin.send_text(GROUP, ALICE, "wait for me")
    assert await bot.set_webhook(hook.url, secret_token=SECRET)
    await standin.wait_until_delivered(timeout=10)
    assert hook.texts() == ["wait for me", "wait for me"]
    assert hook.at[1] - hook.at[0] >= 0.95


async def test_webhook_keeps_max_connections_in_flight_one_per_chat(
    bot: Bot, standin: StandIn, serve: Callable[[Hook], Awaitable[Hook]]
) -> None:
    async def slow(update: dict[str, object]) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.Response()

    hook = await serve(Hook(slow))
    chats = [-1_003_000_000_000 - i for i in range(12)]
    for chat in chats:
        standin.add_group(chat, f"room {chat}", admins=[OWNER], members=[ALICE, BOB])
    for n in range(3):
        for chat in chats:
            standin.send_text(chat, ALICE if n % 2 else BOB, f"{chat}:{n}")
    assert await bot.set_webhook(hook.url, secret_token=SECRET, max_connections=5)
    await standin.wait_until_delivered(timeout=20)
    assert len(hook.got) == 36
    assert hook.most == 5  # as many as allowed, never more
    assert hook.overlaps == 0  # never two of one chat at once
    for chat in chats:  # and each chat's in order
        assert [t for t in hook.texts() if t.startswith(f"{chat}:")] == [
            f"{chat}:{n}" for n in range(3)
        ]
