"""One chat stuck holds up nobody else: a round's row held locked by another Postgres session
(the test's own, as a worker that died mid-transaction leaves it until Postgres notices),
an admin's `/endround` there first, then the guesses of other chats. The others' guesses are
in their lanes while the lock is still held (the `/endround` is parked past its deadline and
confirmed); the command's statement fails at the sessions' `lock_timeout` as a Postgres
outage, is tried again, and ends the round once the lock is gone. Polling and webhook."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from codemojex.db.engine import DB_LOCK_TIMEOUT_MS
from codemojex.outages import OUTAGES
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    MAX_DEPTH,
    World,
    bot_world,
    open_round,
    seed_round,
    start_round,
    valid_guess,
)
from tests.helpers.support import free_port

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "s3cret-Token_for-the-stuck-chat-test-0123456789"
LOCK_S = DB_LOCK_TIMEOUT_MS / 1000
DEADLINE_S = 0.5
HELD_S = LOCK_S + 3.0  # past the lock timeout, so that the command fails once at least


@pytest_asyncio.fixture(loop_scope="module", params=["polling", "webhook"])
async def world(
    request: pytest.FixtureRequest, bot_database_url: str, queue_name: str
) -> AsyncIterator[World]:
    webhook: dict[str, Any] = {}
    if request.param == "webhook":
        port = free_port()
        webhook = {
            "webhook": True,
            "webhook_url": f"http://127.0.0.1:{port}/hook",
            "webhook_secret": SECRET,
            "webhook_port": port,
        }
    async with bot_world(
        bot_database_url, queue_name, bot_update_deadline_s=DEADLINE_S, **webhook
    ) as world:
        yield world


async def test_a_stuck_chat_holds_up_no_other_chat(world: World, bot_database_url: str) -> None:
    stuck = world.new_group()
    rnd = await start_round(world, stuck)
    others = [world.new_group() for _ in range(10)]
    rounds = {chat: (await seed_round(world, chat))[1] for chat in others}
    before = await world.queued()
    started = OUTAGES.started["postgres"]
    holder = await asyncpg.connect(bot_database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        locked = holder.transaction()
        await locked.start()
        await holder.execute("SELECT id FROM rounds WHERE id = $1 FOR UPDATE", rnd.id)
        began = time.monotonic()
        world.standin.send_text(stuck, ADMIN, "/endround")
        for n in range(MAX_DEPTH):
            for chat in others:
                for player in (ALICE, BOB):
                    world.standin.send_text(chat, player, valid_guess(rounds[chat], n))
        sent = len(others) * 2 * MAX_DEPTH
        while await world.queued() < before + sent:
            assert time.monotonic() - began < HELD_S - 1.0, "the other chats were held up"
            await asyncio.sleep(0.02)
        # Before the stuck command's statement gave up on the lock (a Postgres outage, booked
        # below): none of them waited for it. How soon after the deadline: bench/, not here.
        assert OUTAGES.started["postgres"] == started, "the other chats waited for the lock"
        assert await open_round(world, stuck) is not None
        # The command waited for the lock up to the lock timeout, a Postgres outage, booked.
        while OUTAGES.started["postgres"] == started:
            assert time.monotonic() - began < LOCK_S + 3.0, "no lock timeout"
            await asyncio.sleep(0.02)
        assert time.monotonic() - began >= LOCK_S - 0.2
        remaining = HELD_S - (time.monotonic() - began)
        if remaining > 0:
            await asyncio.sleep(remaining)
        assert await open_round(world, stuck) is not None
        await locked.rollback()
    finally:
        await holder.close()
    # Tried again by the door itself (no redelivery needed): the round ends.
    await world.settle()
    assert await open_round(world, stuck) is None
    assert await world.queued() == before + sent
    assert world.errors == []
