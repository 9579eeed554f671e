"""Postgres away at the bot: valid guesses are still taken (they need only Redis), what needs
the database waits for it (its chat told once that the game is catching up) and takes effect
when it is back, and the bot's pool (no connection pinged before use) gets over its dropped
connections by itself.

The bot reaches Postgres through a proxy this test cuts, as a network or a restart would:
the machine's Postgres itself is never touched."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from codemojex.game import texts
from codemojex.locale import EN
from tests.bot.conftest import (
    ALICE,
    BOB,
    DAVE,
    World,
    bot_world,
    start_round,
    through,
    valid_guess,
)
from tests.helpers.support import drop_keys, wipe_tables
from tests.ops.proxy import TcpProxy

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str, proxy: TcpProxy) -> AsyncIterator[World]:
    async with bot_world(through(bot_database_url, proxy), bot_queue) as world:
        await wipe_tables(world.engine, restart_ids=False)
        await drop_keys(world.redis, bot_queue)
        yield world


async def test_guesses_are_taken_while_postgres_is_away(world: World, proxy: TcpProxy) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, BOB, valid_guess(rnd))  # a player before the outage
    await world.settle()
    before = await world.queued()

    await proxy.stop()
    # Bob again, and Alice's first guess (her player's id is fixed in Redis, not in a row).
    guesses = [
        world.standin.send_text(chat, BOB, valid_guess(rnd, 1)),
        world.standin.send_text(chat, ALICE, f"/g {valid_guess(rnd, 2)}"),
        world.standin.send_text(chat, DAVE, valid_guess(rnd, 3)),
    ]
    needs_db = [
        world.standin.send_text(chat, ALICE, "/stats"),
        world.standin.send_text(chat, DAVE, "/newgame"),
    ]
    helped = world.standin.send_text(chat, BOB, "/help")
    told = await world.standin.wait_for_sent(
        lambda m: m.text == texts.catching_up(EN), 20, chat_id=chat
    )
    assert told.reply_to_message_id in needs_db
    assert await world.queued() == before + len(guesses)
    for mid in guesses:
        assert world.replies_to(chat, mid) == []
    await world.standin.wait_for_sent(lambda m: m.reply_to_message_id == helped, 10)
    assert world.replies_to(chat, helped) == [texts.help_text(EN)]

    await proxy.start()
    await world.settle()
    stats, newgame = (world.replies_to(chat, mid) for mid in needs_db)
    assert [t for t in stats if t != texts.catching_up(EN)]  # answered once it could be
    assert texts.try_again(EN) not in stats + newgame
    notices = [m.reply_to_message_id for m in world.said(chat) if m.text == texts.catching_up(EN)]
    assert set(notices) <= set(needs_db) and len(notices) == len(set(notices))  # once a member
    assert texts.round_running(EN) in newgame  # it read the room once it could: a round runs
    assert world.errors == []


async def test_a_dropped_connection_is_got_over_unsaid(world: World, proxy: TcpProxy) -> None:
    """The pool's connections are cut while nobody uses them (no ping before use): the next
    command that needs the database finds out, is tried again at once on a new connection,
    and is answered; nobody is told anything of it."""
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/stats")
    await world.settle()
    assert world.replies_to(chat, asked) != [texts.try_again(EN)]
    await proxy.stop()
    await proxy.start()
    answers = []
    for _ in range(3):
        asked = world.standin.send_text(chat, ALICE, "/stats")
        await world.settle()
        answers += world.replies_to(chat, asked)
    assert len(answers) == 3
    assert texts.try_again(EN) not in answers
    assert texts.catching_up(EN) not in answers
    assert world.errors == []
