"""Every handler is safe on an update delivered twice: after a kill, Telegram sends again
whatever the bot had not confirmed, so a second delivery is the normal case. Each command
below is delivered again (the same message, as Telegram sends it again) after a later command
changed the same thing, with its mark in Redis still there and after the dedupe window (the
mark gone: only the database remembers): the second delivery changes nothing and is not
answered again. A command's effect is idempotent on its message (bot/once.py): so too when it
comes late, when its answer raised after the commit, and when two bot Applications handle
it at once. Guesses: tests/bot/test_guesses.py (the lanes) and tests/e2e/test_redelivery.py
(the database, after Redis lost its data); taps: tests/e2e/test_taps.py."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import delete, func, select

from codemojex.db import AuditLog, Outbox, Player, Round, store
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.state.keys import Keys
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

# The message delivered again while its mark is in Redis, and after the dedupe window.
WINDOW = pytest.mark.parametrize("window_over", [False, True], ids=["marked", "window_over"])


def deliver_again(world: World, chat: int, message_id: int) -> None:
    """The update of `message_id` delivered once more, as Telegram sends an update again."""
    message = world.standin.message(chat, message_id)
    assert message is not None
    world.standin.push_raw_update({"message": message})


def command_sent_as(world: World, chat: int, message_id: int, text: str) -> dict[str, Any]:
    """Message `message_id` of the chat as if its text had been the command `text` (its
    sender, id and date kept): a command the bot never saw, sent back then."""
    message = world.standin.message(chat, message_id)
    assert message is not None
    word = text.split()[0]
    entity = {"type": "bot_command", "offset": 0, "length": len(word)}
    return {**message, "text": text, "entities": [entity]}


async def forget(world: World, chat: int, message_id: int) -> None:
    """The dedupe window over: the message's mark in Redis is gone (expired, or Redis lost
    its data); only the database remembers the command."""
    assert await world.redis.delete(Keys(world.lanes.queue).command_seen(chat, message_id))


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


@WINDOW
async def test_newgame_again_after_its_round_ended_opens_no_second_round(
    world: World, window_over: bool
) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/newgame")
    await world.settle()
    first = await open_round(world, chat)
    assert first is not None
    ended = world.standin.send_text(chat, ADMIN, "/endround")
    await world.settle()
    assert await open_round(world, chat) is None, world.replies_to(chat, ended)
    if window_over:
        await forget(world, chat, asked)

    deliver_again(world, chat, asked)
    await world.settle()
    assert [r.id for r in await rounds_of(world, chat)] == [first.id]
    assert len(world.replies_to(chat, asked)) <= 1


async def test_a_command_whose_process_died_before_its_commit_runs_again(world: World) -> None:
    """A process killed while running a command, before its effect committed, leaves its
    lease (`run:<owner>`), renewed no more; Telegram delivers the message again, as nobody
    confirmed it, and this process waits for the lease to run out, then runs it."""
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/newgame")
    await world.settle()
    died = await open_round(world, chat)
    assert died is not None
    # What the killed process left: no round committed, its lease on the message.
    async with world.sessionmaker() as session:
        await session.execute(delete(Outbox).where(Outbox.round_id == died.id))
        await session.execute(delete(Round).where(Round.id == died.id))
        await session.commit()
    mark = Keys(world.lanes.queue).command_seen(chat, asked)
    await world.redis.set(mark, "run:0123456789abcdef", px=500)

    deliver_again(world, chat, asked)
    await world.settle()
    opened = await open_round(world, chat)
    assert opened is not None and opened.origin_message_id == asked
    assert await world.redis.get(mark) == b"done"


async def test_a_command_whose_process_died_after_its_commit_is_made_good_not_run_again(
    world: World,
) -> None:
    """Killed between the commit and Redis: the delivery again applies nothing (the audit row
    is there), answers nothing, and makes the lanes what the database says."""
    chat = world.new_group()
    await seed_round(world, chat)
    pause = world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    room = await room_of(world, chat)
    assert room.paused and await world.lanes.is_paused(room.id)
    # What the killed process left: the pause committed, the lanes never told, its lease.
    await world.lanes.resume(room.id)
    mark = Keys(world.lanes.queue).command_seen(chat, pause)
    await world.redis.set(mark, "run:0123456789abcdef", px=500)

    deliver_again(world, chat, pause)
    await world.settle()
    assert await world.lanes.is_paused(room.id)
    assert await world.audits("pause") == 1
    assert world.replies_to(chat, pause) == [texts.paused(EN)]


async def test_a_pause_again_after_a_resume_and_the_window_leaves_it_resumed(
    world: World,
) -> None:
    chat = world.new_group()
    await seed_round(world, chat)
    pause = world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    world.standin.send_text(chat, ADMIN, "/resume")
    await world.settle()
    await forget(world, chat, pause)

    deliver_again(world, chat, pause)
    await world.settle()
    room = await room_of(world, chat)
    assert not room.paused and not await world.lanes.is_paused(room.id)
    assert (await world.audits("pause"), await world.audits("resume")) == (1, 1)
    assert world.replies_to(chat, pause) == [texts.paused(EN)]


async def test_newgame_again_while_its_round_runs_changes_nothing(world: World) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/newgame")
    await world.settle()
    deliver_again(world, chat, asked)
    await world.settle()
    assert len(await rounds_of(world, chat)) == 1
    assert len(world.replies_to(chat, asked)) <= 1


@WINDOW
async def test_endround_again_does_not_end_the_next_round(world: World, window_over: bool) -> None:
    chat = world.new_group()
    await seed_round(world, chat)
    ended = world.standin.send_text(chat, ADMIN, "/endround")
    await world.settle()
    world.standin.send_text(chat, BOB, "/newgame")
    await world.settle()
    second = await open_round(world, chat)
    assert second is not None
    if window_over:
        await forget(world, chat, ended)

    deliver_again(world, chat, ended)
    await world.settle()
    still = await open_round(world, chat)
    assert still is not None and still.id == second.id
    assert await world.audits("endround") == 1
    assert world.replies_to(chat, ended) == []  # the reveal is the worker's post


async def test_a_late_endround_ends_nothing_opened_after_it_was_sent(world: World) -> None:
    """An /endround whose first delivery never took effect (its process failed before the
    commit) comes after the round it meant ended and another opened: the new round stays
    open, and the admin is told there is none (as of when they sent it)."""
    chat = world.new_group()
    said = world.standin.send_text(chat, ADMIN, "not a guess")  # the admin's message...
    await world.settle()
    world.standin.send_text(chat, BOB, "/newgame")
    await world.settle()
    opened = await open_round(world, chat)
    assert opened is not None and opened.origin_message_id is not None
    assert opened.origin_message_id > said

    late = command_sent_as(world, chat, said, "/endround")  # ...was this /endround
    world.standin.push_raw_update({"message": late})
    await world.settle()
    still = await open_round(world, chat)
    assert still is not None and still.id == opened.id
    assert world.replies_to(chat, said) == [texts.no_round(EN)]
    assert await world.audits("endround") == 1


@WINDOW
async def test_settings_again_do_not_undo_a_later_change(world: World, window_over: bool) -> None:
    chat = world.new_group()
    first = world.standin.send_text(chat, ADMIN, "/settings length=5")
    await world.settle()
    world.standin.send_text(chat, ADMIN, "/settings length=4")
    await world.settle()
    assert (await room_of(world, chat)).length == 4
    if window_over:
        await forget(world, chat, first)

    deliver_again(world, chat, first)
    await world.settle()
    assert (await room_of(world, chat)).length == 4
    assert await world.audits("settings") == 2
    assert len(world.replies_to(chat, first)) == 1


@WINDOW
async def test_ban_again_after_an_unban_bans_nobody(world: World, window_over: bool) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    bob_says = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    ban = world.standin.send_text(chat, ADMIN, "/ban", reply_to=bob_says)
    await world.settle()
    unban = world.standin.send_text(chat, ADMIN, "/unban", reply_to=bob_says)
    await world.settle()
    if window_over:
        await forget(world, chat, ban)

    deliver_again(world, chat, ban)
    await world.settle()
    after = world.standin.send_text(chat, BOB, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, after) == []  # taken: Bob is not banned
    room = await room_of(world, chat)
    async with world.sessionmaker() as session:
        assert not await store.is_banned(session, room.id, BOB)
    assert (await world.audits("ban"), await world.audits("unban")) == (1, 1)
    assert len(world.replies_to(chat, ban)) == 1
    assert len(world.replies_to(chat, unban)) == 1


async def test_a_ban_whose_answer_raised_after_its_commit_is_not_run_again(world: World) -> None:
    """The ban committed, then its answer failed (Telegram answered 502): the mark is done,
    not given back, so the message delivered again (after a later /unban) bans nobody."""
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    bob_says = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    world.standin.inject_error(502, "Bad Gateway", count=1, chat_id=chat)
    ban = world.standin.send_text(chat, ADMIN, "/ban", reply_to=bob_says)
    await world.settle()
    assert [type(e).__name__ for e in world.errors] == ["NetworkError"]
    world.errors.clear()
    # The answer was lost; the error handler's apology went out.
    assert world.replies_to(chat, ban) == [texts.went_wrong(EN)]
    mark = Keys(world.lanes.queue).command_seen(chat, ban)
    assert await world.redis.get(mark) == b"done"
    room = await room_of(world, chat)
    async with world.sessionmaker() as session:
        assert await store.is_banned(session, room.id, BOB)
    world.standin.send_text(chat, ADMIN, "/unban", reply_to=bob_says)
    await world.settle()

    deliver_again(world, chat, ban)
    await world.settle()
    async with world.sessionmaker() as session:
        assert not await store.is_banned(session, room.id, BOB)
    assert await world.audits("ban") == 1
    assert world.replies_to(chat, ban) == [texts.went_wrong(EN)]  # nothing more


@WINDOW
async def test_weight_again_does_not_undo_a_later_weight(world: World, window_over: bool) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    alice_says = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    first = world.standin.send_text(chat, ADMIN, "/weight 3", reply_to=alice_says)
    await world.settle()
    world.standin.send_text(chat, ADMIN, "/weight 2", reply_to=alice_says)
    await world.settle()
    assert await lane_weight(world, chat, ALICE) == 2
    if window_over:
        await forget(world, chat, first)

    deliver_again(world, chat, first)
    await world.settle()
    assert await lane_weight(world, chat, ALICE) == 2
    assert await world.audits("weight") == 2
    assert len(world.replies_to(chat, first)) == 1


async def test_one_audit_row_per_command_message(world: World) -> None:
    """Every admin command delivered three times (at once, and after the window): one row
    each, allowed or refused."""
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    alice_says = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    asked = [
        world.standin.send_text(chat, ADMIN, text, reply_to=alice_says)
        for text in ("/pause", "/resume", "/limit 3", "/weight 2", "/queue", "/settings")
    ]
    asked.append(world.standin.send_text(chat, BOB, "/pause"))  # refused: not an admin
    asked.append(world.standin.send_text(chat, ADMIN, "/weight x", reply_to=alice_says))
    await world.settle()
    for message_id in asked:
        deliver_again(world, chat, message_id)
    await world.settle()
    for message_id in asked:
        await forget(world, chat, message_id)
        deliver_again(world, chat, message_id)
    await world.settle()

    async with world.sessionmaker() as session:
        stmt = (
            select(AuditLog.message_id, func.count())
            .where(AuditLog.chat_id == chat)
            .group_by(AuditLog.message_id)
        )
        rows = dict((await session.execute(stmt)).tuples().all())
        await session.commit()
    assert rows == dict.fromkeys(asked, 1)
    assert [len(world.replies_to(chat, m)) for m in asked] == [1] * len(asked)


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
