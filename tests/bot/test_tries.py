"""Every retry of an update has an end, and a failure before its effect is waited out
(bot/tries.py), end to end through python-telegram-bot and the Bot API stand-in:

- a statement that always times out, with the database answering, is no outage: the update's
  third try is its last, then it is a dead letter and its sender is told;
- Telegram failing the admin-list lookup (getChatAdministrators) of an admin command, before
  the command's effect, with a 429 or a 5xx: the command waits it out (a 429 by its
  `retry_after`) and takes effect, answered once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from codemojex.bot.tries import TRIES, Before
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.state.inbox import Inbox
from tests.bot.conftest import ADMIN, ALICE, E2E, World, open_round, room_of, start_round

pytestmark = E2E


@pytest_asyncio.fixture(loop_scope="module")
async def timing_out(bot_database_url: str, world: World) -> AsyncIterator[int]:
    """A group whose rounds cannot be written: every insert of one fails as a statement cut
    by the statement timeout does (SQLSTATE 57014, query_canceled), at once, while the
    database answers everything else. Its chat id."""
    chat = world.new_group()
    conn = await asyncpg.connect(bot_database_url.replace("postgresql+asyncpg", "postgresql"))
    name = f"times_out_{abs(chat)}"
    try:
        await conn.execute(
            f"""CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF (SELECT chat_id FROM rooms WHERE id = NEW.room_id) = {chat} THEN
                RAISE EXCEPTION 'canceling statement due to statement timeout'
                  USING ERRCODE = 'query_canceled';
              END IF;
              RETURN NEW;
            END $$"""
        )
        await conn.execute(
            f"CREATE TRIGGER {name} BEFORE INSERT ON rounds FOR EACH ROW EXECUTE FUNCTION {name}()"
        )
        yield chat
    finally:
        await conn.execute(f"DROP TRIGGER IF EXISTS {name} ON rounds")
        await conn.execute(f"DROP FUNCTION IF EXISTS {name}()")
        await conn.close()


async def test_a_statement_that_always_times_out_is_a_dead_letter(
    world: World, timing_out: int
) -> None:
    chat = timing_out
    inbox = Inbox(world.redis, world.settings.queue)
    before = len(await inbox.dead_letters())
    began = time.monotonic()
    asked = world.standin.send_text(chat, ALICE, "/newgame")
    told = await world.standin.wait_for_sent(
        lambda m: m.reply_to_message_id == asked, 30, chat_id=chat
    )
    assert told.text == texts.went_wrong(EN)
    assert time.monotonic() - began < 25  # three quick tries, not a try for ever
    letters = await inbox.dead_letters()
    assert len(letters) == before + 1
    letter = next(x for x in letters if x.chat_id == chat)
    assert (letter.kind, letter.user_id, letter.tries) == ("message", ALICE, TRIES)
    # The sender's next update is handled (nothing held it up), and the room has no round.
    helped = world.standin.send_text(chat, ALICE, "/help")
    await world.settle()
    assert world.replies_to(chat, helped) == [texts.help_text(EN)]
    assert world.replies_to(chat, asked) == [texts.went_wrong(EN)]
    assert await open_round(world, chat) is None


@pytest.mark.parametrize(
    "fault", ["429", "502", "500"], ids=["too-many-requests", "bad-gateway", "internal"]
)
async def test_an_admin_list_that_telegram_fails_is_waited_out(world: World, fault: str) -> None:
    chat = world.new_group()
    await start_round(world, chat)
    room = await room_of(world, chat)
    lookups = ("getChatAdministrators",)
    if fault == "429":
        world.standin.inject_429(count=2, retry_after=1, methods=lookups, chat_id=chat)
    else:
        world.standin.inject_error(
            int(fault), "Bad Gateway" if fault == "502" else "Internal Server Error",
            count=2, methods=lookups, chat_id=chat,
        )  # fmt: skip
    began = time.monotonic()
    asked = world.standin.send_text(chat, ADMIN, "/pause")
    await world.standin.wait_for_sent(
        lambda m: m.reply_to_message_id == asked and m.text == texts.paused(EN), 30, chat_id=chat
    )
    if fault == "429":
        assert time.monotonic() - began >= 2.0  # each 429's retry_after, waited out
    assert bool((await world.lanes.snapshot())["rooms"][str(room.id)]["paused"])
    await world.settle()
    # Held past its deadline, the admin may hear why first.
    answers = [t for t in world.replies_to(chat, asked) if t != texts.catching_up(EN)]
    assert answers == [texts.paused(EN)]
    assert await world.audits("pause", allowed=True) == 1
    assert [type(e) for e in world.errors] == [Before] * 2  # handed to the door, tried again
    world.errors.clear()


async def test_an_admin_list_that_telegram_keeps_failing_ends_as_a_dead_letter(
    world: World,
) -> None:
    """Telegram failing the lookup with a 5xx however often it is asked (and answering
    getMe, the probe: it is up): the budget's last try, then a dead letter and an apology."""
    chat = world.new_group()
    world.standin.inject_error(
        502, "Bad Gateway", seconds=60, methods=("getChatAdministrators",), chat_id=chat
    )
    asked = world.standin.send_text(chat, ADMIN, "/pause")
    told = await world.standin.wait_for_sent(
        lambda m: m.reply_to_message_id == asked, 30, chat_id=chat
    )
    assert told.text == texts.went_wrong(EN)
    await asyncio.sleep(0.5)
    assert world.replies_to(chat, asked) == [texts.went_wrong(EN)]
    assert await world.audits("pause") == 0
    letters = await Inbox(world.redis, world.settings.queue).dead_letters()
    assert any(x.chat_id == chat and x.tries == TRIES for x in letters)
    assert [type(e) for e in world.errors] == [Before] * TRIES
    world.errors.clear()
