"""A round's row held locked by another Postgres session (the test's own, as a worker that died
mid-transaction or an admin's open session would hold it): the bot's statement that needs it
fails within the sessions' `lock_timeout` (limits.CONNECTIONS) as a Postgres outage, not a bug
and not a wait as long as the lock's, and the command takes effect once the lock is gone."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from codemojex.limits import CONNECTIONS
from codemojex.outages import OUTAGES
from tests.bot.conftest import ADMIN, E2E, World, open_round, start_round
from tests.bot.test_redelivery import deliver_again

pytestmark = E2E

LOCK_S = CONNECTIONS.db_lock_timeout_ms / 1000


async def test_endround_on_a_locked_round_fails_within_the_lock_timeout_then_ends_it(
    world: World, bot_database_url: str
) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    started = OUTAGES.started["postgres"]
    holder = await asyncpg.connect(bot_database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        locked = holder.transaction()
        await locked.start()
        await holder.execute("SELECT id FROM rounds WHERE id = $1 FOR UPDATE", rnd.id)
        began = time.monotonic()
        ended = world.standin.send_text(chat, ADMIN, "/endround")
        # Its statement waits for the lock, and fails at the lock timeout: a Postgres outage,
        # booked then (not a bug, not a wait as long as the lock's), the lock still held.
        while OUTAGES.started["postgres"] == started:
            assert time.monotonic() - began < LOCK_S + 3.0, "no lock timeout"
            await asyncio.sleep(0.05)
        assert time.monotonic() - began >= LOCK_S - 0.2
        await world.settle()
        assert await open_round(world, chat) is not None
        await locked.rollback()
    finally:
        await holder.close()
    # Delivered again (Telegram does, or the front door retries it): now it ends the round.
    deliver_again(world, chat, ended)
    await world.settle()
    assert await open_round(world, chat) is None
    assert world.errors == []
