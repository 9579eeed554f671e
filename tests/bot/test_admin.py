"""Admin commands through the real bot: who may run them, what they change, what is audited."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import regex

from codemojex import usecases
from codemojex.db import Room, store
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.state.budget import BUDGET
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    DAVE,
    E2E,
    OPERATOR,
    World,
    open_round,
    room_of,
    seed_round,
    valid_guess,
)
from tests.helpers import writes

pytestmark = E2E


async def _room_view(world: World, room: Room) -> dict[str, Any]:
    snapshot = await world.lanes.snapshot(room.id)
    view: dict[str, Any] = snapshot["rooms"][room.id]
    return view


async def _alice(world: World, room: Room) -> str:
    """Alice's lane: her seat in the room's card (her guess took it; no worker runs here to
    write her player row), else her player row."""
    cards = world.app.bot_data.cards.shared
    read = await cards.read(room.chat_id, room.thread_id, user_id=ALICE, room_id=room.id)
    if read.seat is not None:
        return read.seat
    player = await usecases.ensure_player(world.sessionmaker, room.id, ALICE, "Alice")
    return player.id


async def _paused(world: World, room: Room) -> bool:
    return bool((await _room_view(world, room))["paused"])


async def _resumed(world: World, room: Room) -> bool:
    return not await _paused(world, room)


async def _limited(world: World, room: Room) -> bool:
    fresh = await room_of(world, room.chat_id)
    return (await _room_view(world, room))["ceiling"] == 7 and fresh.ceiling == 7


async def _weighted(world: World, room: Room) -> bool:
    lanes = (await _room_view(world, room))["lanes"]
    return bool(lanes[await _alice(world, room)]["weight"] == 3)


async def _banned(world: World, room: Room) -> bool:
    async with world.sessionmaker() as session:
        banned = await store.is_banned(session, room.id, ALICE)
    # a room's snapshot lists its lanes holding pending jobs: a purged lane has none
    lanes = (await _room_view(world, room))["lanes"]
    alice = await _alice(world, room)
    depth = lanes[alice]["depth"] if alice in lanes else 0
    return banned and depth == 0


async def _unbanned(world: World, room: Room) -> bool:
    async with world.sessionmaker() as session:
        return not await store.is_banned(session, room.id, ALICE)


async def _ended(world: World, room: Room) -> bool:
    return await open_round(world, room.chat_id) is None


async def _set(world: World, room: Room) -> bool:
    fresh = await room_of(world, room.chat_id)
    return fresh.length == 5 and fresh.repeats is False


async def _pause_first(world: World, room: Room) -> None:
    await world.lanes.pause(room.id)


async def _ban_first(world: World, room: Room) -> None:
    await writes.ban(world.sessionmaker, room.id, await _alice(world, room), ADMIN)


@dataclass(frozen=True)
class Case:
    action: str
    text: str
    effect: Callable[[World, Room], Awaitable[bool]] | None  # None: /queue, judged by its answer
    on_reply: bool = False
    prepare: Callable[[World, Room], Awaitable[None]] | None = None


CASES = [
    Case("pause", "/pause", _paused),
    Case("resume", "/resume", _resumed, prepare=_pause_first),
    Case("limit", "/limit 7", _limited),
    Case("weight", "/weight 3", _weighted, on_reply=True),
    Case("ban", "/ban", _banned, on_reply=True),
    Case("unban", "/unban", _unbanned, on_reply=True, prepare=_ban_first),
    Case("endround", "/endround", _ended),
    Case("settings", "/settings length=5 repeats=off", _set),
    Case("queue", "/queue", None),
]
ACTORS = ["admin", "anonymous_admin", "operator", "player"]


@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("case", CASES, ids=[c.action for c in CASES])
async def test_admin_commands(world: World, case: Case, actor: str) -> None:
    chat = world.new_group()
    room, rnd = await seed_round(world, chat)
    if case.prepare is not None:
        await case.prepare(world, room)
    alice_says = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()  # senders are handled concurrently: let Alice's guess land first

    reply_to = alice_says if case.on_reply else None
    if actor == "anonymous_admin":
        asked = world.standin.send_as_anonymous_admin(chat, case.text, reply_to=reply_to)
    else:
        who = {"admin": ADMIN, "operator": OPERATOR, "player": BOB}[actor]
        asked = world.standin.send_text(chat, who, case.text, reply_to=reply_to)
    await world.settle()

    answers = world.replies_to(chat, asked)
    allowed = actor != "player"
    if case.effect is None:
        done = any("in flight" in answer for answer in answers)
    else:
        done = await case.effect(world, room)
    assert done is allowed, answers
    assert (texts.not_admin(EN) in answers) is not allowed
    assert await world.audits(case.action, allowed=allowed) == 1
    assert await world.audits(case.action, allowed=not allowed) == 0


async def test_promotion_takes_effect_at_once(world: World) -> None:
    """The admin list is cached, and a chat_member update refreshes it."""
    chat = world.new_group()
    first = world.standin.send_text(chat, BOB, "/pause")
    await world.settle()
    assert world.replies_to(chat, first) == [texts.not_admin(EN)]
    world.standin.set_admins(chat, [ADMIN, BOB])
    await world.settle()  # the chat_member update and Bob's command are handled concurrently
    second = world.standin.send_text(chat, BOB, "/pause")
    await world.settle()
    assert world.replies_to(chat, second) == [texts.paused(EN)]
    world.standin.set_admins(chat, [ADMIN])
    await world.settle()
    third = world.standin.send_text(chat, BOB, "/resume")
    await world.settle()
    assert world.replies_to(chat, third) == [texts.not_admin(EN)]


async def test_a_spammer_is_answered_and_audited_only_within_the_answer_budget(
    budgeted: World,
) -> None:
    """Refused admin commands spend their sender's answer budget like any answer: within it,
    answered and audited; then told once to slow down; then neither answered nor audited."""
    world = budgeted
    chat = world.new_group()
    budget = BUDGET
    spam = [world.standin.send_text(chat, BOB, f"/pause {i}") for i in range(budget + 15)]
    await world.settle()
    answers = [text for mid in spam for text in world.replies_to(chat, mid)]
    assert answers == [texts.not_admin(EN)] * budget + [texts.answers_spent(EN)]
    assert await world.audits("pause", allowed=False) == budget
    # Another player is still answered, and an admin still acts and is audited.
    alice = world.standin.send_text(chat, ALICE, "/pause")
    admin = world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    assert world.replies_to(chat, alice) == [texts.not_admin(EN)]
    assert world.replies_to(chat, admin) == [texts.paused(EN)]
    assert await world.audits("pause", allowed=False) == budget + 1
    assert await world.audits("pause", allowed=True) == 1


async def test_answers_name_players_without_bidi_controls(world: World) -> None:
    """/queue, /weight, /stats and /me (results, wins and /top: tests/e2e/test_names.py)."""
    eve, shown = 1077, "Evegnp.exe"
    world.standin.add_user(eve, "Eve\u202egnp.exe", last_name="\u2067\u200f")
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    await world.lanes.pause((await room_of(world, chat)).id)
    mids = [world.standin.send_text(chat, eve, valid_guess(rnd, i)) for i in range(2)]
    await world.settle()
    asked = {
        "queue": world.standin.send_text(chat, ADMIN, "/queue"),
        "weight": world.standin.send_text(chat, ADMIN, "/weight 2", reply_to=mids[0]),
        "stats": world.standin.send_text(chat, eve, "/stats"),
        "me": world.standin.send_text(chat, eve, "/me"),
    }
    await world.settle()
    said = {what: world.replies_to(chat, mid) for what, mid in asked.items()}
    assert f"{shown}: 2 waiting" in said["queue"][0]
    assert said["weight"] == [texts.weight_set(EN, shown, 2)]
    assert said["stats"][0].startswith(f"{shown} here: ")
    assert said["me"][0].startswith(f"{shown} in 0 chats: ")
    bidi = regex.compile(r"\p{Bidi_Control}")
    assert [m.text for m in world.said(chat) if bidi.search(m.text)] == []


def _member_change(chat: int, user: int, old: str, new: str) -> dict[str, Any]:
    person = {"id": user, "is_bot": False, "first_name": f"user {user}"}
    return {
        "chat_member": {
            "chat": {"id": chat, "type": "supergroup", "title": f"room {chat}"},
            "from": person,
            "date": 1_700_000_000,
            "old_chat_member": {"user": person, "status": old, "until_date": 0},
            "new_chat_member": {"user": person, "status": new, "until_date": 0},
        }
    }


async def test_joins_and_leaves_keep_the_cached_admin_list(world: World) -> None:
    """Only a change that makes or unmakes an admin costs a getChatAdministrators."""
    chat = world.new_group()
    asked = world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.paused(EN)]
    calls = world.standin.calls["getChatAdministrators"]
    for user, old, new in [
        (DAVE, "left", "member"),
        (ALICE, "member", "left"),
        (DAVE, "member", "kicked"),
    ]:
        world.standin.push_raw_update(_member_change(chat, user, old, new))
    await world.settle()
    asked = world.standin.send_text(chat, ADMIN, "/resume")
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.resumed(EN)]
    assert world.standin.calls["getChatAdministrators"] == calls
    # A promotion does cost one: the list changed.
    world.standin.set_admins(chat, [ADMIN, BOB])
    await world.settle()
    asked = world.standin.send_text(chat, BOB, "/pause")
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.paused(EN)]
    assert world.standin.calls["getChatAdministrators"] == calls + 1


@pytest.mark.parametrize(
    "text",
    [
        "/limit -1",
        "/limit abc",
        "/limit 99999999999999999999",
        "/limit",
        "/limit 0",
        "/limit 1001",
        "/limit 1 2",
        "/limit ３",
        "/limit 3.5",
        "/limit 0x10",
        "/weight abc",
        "/weight 0",
        "/weight 101",
        "/settings length=9",
        "/settings length=five",
        "/settings palette=🍎🍎🍌🍇",
        "/settings palette=abcd",
        "/settings palette=",
        "/settings colour=red",
        "/settings length=4 length=5",
        "/settings repeats=maybe",
        "/settings repeats=off length=5 palette=🍎🍌🍇🍒",
    ],
)
async def test_garbage_arguments_are_refused_and_change_nothing(world: World, text: str) -> None:
    chat = world.new_group()
    before, rnd = await seed_round(world, chat)
    alice_says = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    asked = world.standin.send_text(chat, ADMIN, text, reply_to=alice_says)
    await world.settle()
    (answer,) = world.replies_to(chat, asked)
    assert answer and len(answer) < 300
    after = await room_of(world, chat)
    assert (after.ceiling, after.length, after.palette, after.repeats) == (
        before.ceiling,
        before.length,
        before.palette,
        before.repeats,
    )
    view = await _room_view(world, after)
    assert view["ceiling"] == 2
    assert all(lane["weight"] == 1 for lane in view["lanes"].values())


async def test_ban_is_per_room(world: World) -> None:
    first, second = world.new_group(), world.new_group()
    _, rnd1 = await seed_round(world, first)
    _, rnd2 = await seed_round(world, second)
    pending = [world.standin.send_text(first, ALICE, valid_guess(rnd1, i)) for i in range(3)]
    await world.settle()
    assert await world.queued() == 3
    ban = world.standin.send_text(first, ADMIN, "/ban", reply_to=pending[0])
    await world.settle()
    assert world.replies_to(first, ban) == [texts.player_banned(EN, "Alice", 3)]
    assert await world.queued() == 0

    refused = world.standin.send_text(first, ALICE, valid_guess(rnd1))
    refused_g = world.standin.send_text(first, ALICE, f"/g {valid_guess(rnd1)}")
    elsewhere = world.standin.send_text(second, ALICE, valid_guess(rnd2))
    await world.settle()
    assert world.replies_to(first, refused) == [texts.banned(EN)]
    assert world.replies_to(first, refused_g) == [texts.banned(EN)]
    assert world.replies_to(second, elsewhere) == []
    assert await world.queued() == 1

    unban = world.standin.send_text(first, ADMIN, "/unban", reply_to=pending[0])
    await world.settle()
    again = world.standin.send_text(first, ALICE, valid_guess(rnd1))
    await world.settle()
    assert world.replies_to(first, unban) == [texts.player_unbanned(EN, "Alice")]
    assert world.replies_to(first, again) == []
    assert await world.queued() == 2


async def test_reply_commands_need_a_player_to_reply_to(world: World) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ADMIN, "/ban")
    bot_msg = world.standin.send_text(chat, ADMIN, "/rules")
    await world.settle()
    (rules,) = [m for m in world.said(chat) if m.reply_to_message_id == bot_msg]
    at_bot = world.standin.send_text(chat, ADMIN, "/weight 2", reply_to=rules.message_id)
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.reply_to_player(EN)]
    assert world.replies_to(chat, at_bot) == [texts.reply_to_player(EN)]


async def test_queue_shows_depths_by_name_without_ids_or_secret(world: World) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    for i in range(3):
        world.standin.send_text(chat, ALICE, valid_guess(rnd, i))
    world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    asked = world.standin.send_text(chat, ADMIN, "/queue")
    await world.settle()
    (answer,) = world.replies_to(chat, asked)
    assert "Alice: 3 waiting" in answer
    assert "Bob: 1 waiting" in answer
    assert "in flight 0/2" in answer
    assert "PLR" not in answer and "ROM" not in answer and "JOB" not in answer
    assert rnd.secret not in answer
    assert world.settings.webhook_secret is None or (
        world.settings.webhook_secret.get_secret_value() not in answer
    )


async def test_limit_reaches_the_lanes_and_the_room(world: World) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ADMIN, "/limit 5")
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.limit_set(EN, 5)]
    room = await room_of(world, chat)
    assert room.ceiling == 5
    assert (await _room_view(world, room))["ceiling"] == 5


async def test_admin_commands_of_a_chat_apply_in_the_order_sent_whoever_sends_them(
    world: World,
) -> None:
    """Carol's /ban waits for Telegram's admin list (slow now); Dave's /unban, sent after it,
    waits for it in turn (a chat's admin commands are ordered per chat, not per sender), so
    Alice ends unbanned, as the two admins meant."""
    chat = world.new_group(admins=(ADMIN, DAVE))
    room, rnd = await seed_round(world, chat)
    guess = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    world.standin.inject_latency(1.0, 1, methods=["getChatAdministrators"], chat_id=chat)
    ban = world.standin.send_text(chat, ADMIN, "/ban", reply_to=guess)
    unban = world.standin.send_text(chat, DAVE, "/unban", reply_to=guess)
    await world.settle()
    assert world.replies_to(chat, ban) == [texts.player_banned(EN, "Alice", 1)]
    assert world.replies_to(chat, unban) == [texts.player_unbanned(EN, "Alice")]
    assert await _unbanned(world, room)
