"""Every handler is safe on an update delivered twice: after a kill, Telegram sends again
whatever the bot had not confirmed, so a second delivery is the normal case. Each command
below is delivered again (the same message, as Telegram sends it again) after a later command
changed the same thing: the second delivery changes nothing, and the bot answers at most once
more. Guesses: tests/bot/test_guesses.py (the lanes) and tests/e2e/test_redelivery.py (the
database, after Redis lost its data); taps: tests/e2e/test_taps.py."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from codemojex.db import Outbox, Player, Round, store
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.posting.keys import Keys
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    E2E,
    World,
    open_round,
    room_of,
    seed_round,
    valid_guess,
)

pytestmark = E2E


def deliver_again(world: World, chat: int, message_id: int) -> None:
    """The update of `message_id` delivered once more, as Telegram sends an update again."""
    message = world.standin.message(chat, message_id)
    assert message is not None
    world.standin.push_raw_update({"message": message})


async def rounds_of(world: World, chat: int) -> list[Round]:
    room = await room_of(world, chat)
    async with world.sessionmaker() as session:
        stmt = select(Round).where(Round.room_id == room.id).order_by(Round.id)
        rows = list((await session.execute(stmt)).scalars())
        await session.commit()
    return rows


async def lane_weight(world: World, chat: int, user: int) -> int:
    room = await room_of(world, chat)
    async with world.sessionmaker() as session:
        stmt = select(Player.id).where(Player.room_id == room.id, Player.tg_user_id == user)
        player_id = (await session.execute(stmt)).scalar_one()
        await session.commit()
    raw: Any = await world.redis.hget(world.lanes.keys.gweight, player_id)
    return int(raw or 1)


async def test_newgame_again_after_its_round_ended_opens_no_second_round(world: World) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/newgame")
    await world.settle()
    first = await open_round(world, chat)
    assert first is not None
    ended = world.standin.send_text(chat, ADMIN, "/endround")
    await world.settle()
    assert await open_round(world, chat) is None, world.replies_to(chat, ended)

    deliver_again(world, chat, asked)
    await world.settle()
    assert [r.id for r in await rounds_of(world, chat)] == [first.id]
    assert len(world.replies_to(chat, asked)) <= 1


async def test_a_command_whose_process_died_running_it_runs_again(world: World) -> None:
    """A process killed while running a command leaves its claim (`run:<owner>`); Telegram
    delivers the message again, as nobody confirmed it, and this process runs it."""
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/newgame")
    await world.settle()
    first = await open_round(world, chat)
    assert first is not None
    world.standin.send_text(chat, ADMIN, "/endround")
    await world.settle()
    # The state a process leaves when it is killed right after claiming the message.
    mark = Keys(world.lanes.queue).command_seen(chat, asked)
    await world.redis.set(mark, "run:0123456789abcdef", px=60_000)

    deliver_again(world, chat, asked)
    await world.settle()
    second = await open_round(world, chat)
    assert second is not None and second.id != first.id
    assert await world.redis.get(mark) == b"done"


async def test_newgame_again_while_its_round_runs_changes_nothing(world: World) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/newgame")
    await world.settle()
    deliver_again(world, chat, asked)
    await world.settle()
    assert len(await rounds_of(world, chat)) == 1
    assert len(world.replies_to(chat, asked)) <= 1


async def test_endround_again_does_not_end_the_next_round(world: World) -> None:
    chat = world.new_group()
    await seed_round(world, chat)
    ended = world.standin.send_text(chat, ADMIN, "/endround")
    await world.settle()
    world.standin.send_text(chat, BOB, "/newgame")
    await world.settle()
    second = await open_round(world, chat)
    assert second is not None

    deliver_again(world, chat, ended)
    await world.settle()
    still = await open_round(world, chat)
    assert still is not None and still.id == second.id
    assert await world.audits("endround") == 1


async def test_settings_again_do_not_undo_a_later_change(world: World) -> None:
    chat = world.new_group()
    first = world.standin.send_text(chat, ADMIN, "/settings length=5")
    await world.settle()
    world.standin.send_text(chat, ADMIN, "/settings length=4")
    await world.settle()
    assert (await room_of(world, chat)).length == 4

    deliver_again(world, chat, first)
    await world.settle()
    assert (await room_of(world, chat)).length == 4
    assert await world.audits("settings") == 2
    assert len(world.replies_to(chat, first)) <= 2


async def test_ban_again_after_an_unban_bans_nobody(world: World) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    bob_says = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    ban = world.standin.send_text(chat, ADMIN, "/ban", reply_to=bob_says)
    await world.settle()
    unban = world.standin.send_text(chat, ADMIN, "/unban", reply_to=bob_says)
    await world.settle()

    deliver_again(world, chat, ban)
    await world.settle()
    after = world.standin.send_text(chat, BOB, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, after) == []  # taken: Bob is not banned
    room = await room_of(world, chat)
    async with world.sessionmaker() as session:
        assert not await store.is_banned(session, room.id, BOB)
    assert (await world.audits("ban"), await world.audits("unban")) == (1, 1)
    assert len(world.replies_to(chat, ban)) <= 2
    assert len(world.replies_to(chat, unban)) == 1


async def test_weight_again_does_not_undo_a_later_weight(world: World) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    alice_says = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    first = world.standin.send_text(chat, ADMIN, "/weight 3", reply_to=alice_says)
    await world.settle()
    world.standin.send_text(chat, ADMIN, "/weight 2", reply_to=alice_says)
    await world.settle()
    assert await lane_weight(world, chat, ALICE) == 2

    deliver_again(world, chat, first)
    await world.settle()
    assert await lane_weight(world, chat, ALICE) == 2
    assert await world.audits("weight") == 2


async def test_daily_again_changes_nothing_and_answers_at_most_once_more(world: World) -> None:
    asked = world.standin.send_private(ALICE, "/daily")
    await world.settle()
    before = len(world.said(ALICE))
    deliver_again(world, ALICE, asked)
    await world.settle()
    assert len(world.said(ALICE)) - before <= 1
    async with world.sessionmaker() as session:
        stmt = select(func.count()).select_from(Outbox).where(Outbox.chat_id == ALICE)
        assert (await session.execute(stmt)).scalar() == 1  # one puzzle
        rounds = select(func.count()).select_from(Round)
        assert (await session.execute(rounds)).scalar() == 1
        await session.commit()
    assert texts.daily_send_first(EN) not in [m.text for m in world.said(ALICE)]
