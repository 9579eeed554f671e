"""/settings through the real bot: repeats on and off, showing the settings, refusals."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from codemojex import usecases
from codemojex.db import AuditLog, Outbox, Room
from codemojex.game import texts
from codemojex.locale import EN
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    E2E,
    OPERATOR,
    World,
    open_round,
    room_of,
    seed_round,
    start_round,
)

pytestmark = E2E

TOO_FEW = (
    "With repeats off, the palette needs at least as many emojis as the code: "
    "4 emojis are too few for a code of 5."
)
BAD_REPEATS = "Repeats is on or off (yes/no and true/false work too), e.g. repeats=off."


async def _ask(world: World, chat: int, who: int, text: str) -> str:
    asked = world.standin.send_text(chat, who, text)
    await world.settle()
    (answer,) = world.replies_to(chat, asked)
    return answer


def _settings(room: Room) -> tuple[int, str | None, bool, int]:
    return room.length, room.palette, room.repeats, room.ceiling


async def _audited(world: World, room: Room) -> list[tuple[int | None, str, bool]]:
    async with world.sessionmaker() as session:
        rows = (
            await session.execute(
                select(AuditLog)
                .where(AuditLog.room_id == room.id, AuditLog.action == "settings")
                .order_by(AuditLog.id)
            )
        ).scalars()
        return [(row.actor_tg_id, row.args, row.allowed) for row in rows]


async def _announcement(world: World, round_id: int) -> str:
    stmt = select(Outbox.text).where(Outbox.round_id == round_id, Outbox.kind == "round")
    return str(await world.scalar(stmt))


async def test_repeats_off_applies_to_the_next_round_and_is_audited(world: World) -> None:
    chat = world.new_group()
    room, running = await seed_round(world, chat)
    assert running.repeats is True

    answer = await _ask(world, chat, ADMIN, "/settings repeats=off")
    assert answer == texts.settings_changed(EN, 4, None, repeats=False)
    assert answer == (
        "Settings saved for the next round: length 4, palette drawn fresh each round, repeats off, "
        "language English (en)."
    )
    assert (await room_of(world, chat)).repeats is False
    assert await _audited(world, room) == [(ADMIN, "repeats=off", True)]

    # The running round keeps the rules it started with, and /rules says so.
    still = await open_round(world, chat)
    assert still is not None and still.id == running.id and still.repeats is True
    assert "Emojis may repeat in the code." in await _ask(world, chat, ALICE, "/rules")

    # The next round is drawn without repeats, and its announcement and /rules say so.
    world.standin.send_text(chat, ADMIN, "/endround")
    await world.settle()
    following = await start_round(world, chat)
    assert following.id != running.id and following.repeats is False
    assert len(set(following.secret_emojis)) == following.length
    assert "(no emoji repeats)" in await _announcement(world, following.id)
    rules = await _ask(world, chat, BOB, "/rules")
    assert "No emoji repeats in the code." in rules
    assert rules == texts.rules_text(EN, 4, following.palette, 600, repeats=False)

    # And back on.
    assert await _ask(world, chat, ADMIN, "/settings repeats=on") == texts.settings_changed(
        EN, 4, None, repeats=True
    )
    assert (await room_of(world, chat)).repeats is True


@pytest.mark.parametrize(
    ("text", "repeats"),
    [
        ("/settings repeats=OFF", False),
        ("/settings Repeats=No", False),
        ("/settings repeats = false", False),
        ("/settings repeats=yes", True),
        ("/settings REPEATS=True", True),
        ("/settings repeats=On length=5", True),
    ],
)
async def test_repeats_values(world: World, text: str, repeats: bool) -> None:
    chat = world.new_group()
    room, _ = await seed_round(world, chat)
    # Start from the other value.
    await usecases.update_room_settings(world.sessionmaker, room.id, repeats=not repeats)
    answer = await _ask(world, chat, ADMIN, text)
    after = await room_of(world, chat)
    assert after.repeats is repeats
    assert answer == texts.settings_changed(EN, after.length, None, repeats=repeats)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("/settings repeats=maybe", BAD_REPEATS),
        ("/settings repeats=", BAD_REPEATS),
        ("/settings repeats=0", BAD_REPEATS),
        ("/settings repeats=offf length=5", BAD_REPEATS),
        ("/settings repeats=ｏｆｆ", BAD_REPEATS),
        ("/settings repeats=off repeats=on", "repeats is given twice."),
        ("/settings length=5 palette=🍎🍌🍇🍒 repeats=off", TOO_FEW),
    ],
)
async def test_bad_repeats_are_refused_and_change_nothing(
    world: World, text: str, said: str
) -> None:
    chat = world.new_group()
    before, _ = await seed_round(world, chat)
    assert await _ask(world, chat, ADMIN, text) == said
    after = await room_of(world, chat)
    assert _settings(after) == _settings(before)
    assert after.repeats is True


@pytest.mark.parametrize(
    "text", ["/settings repeats=off", "/settings length=5", "/settings palette=🍎🍌🍇🍒"]
)
async def test_repeats_off_with_a_short_palette_is_refused_whichever_changes(
    world: World, text: str
) -> None:
    chat = world.new_group()
    room, _ = await seed_round(world, chat)
    # Each command alone would make a code that cannot be drawn without repeats.
    setup = {
        "/settings repeats=off": {"length": 5, "palette": "🍎🍌🍇🍒"},
        "/settings length=5": {"length": 4, "palette": "🍎🍌🍇🍒", "repeats": False},
        "/settings palette=🍎🍌🍇🍒": {"length": 5, "palette": "🍎🍌🍇🍒🍋", "repeats": False},
    }[text]
    before = await usecases.update_room_settings(world.sessionmaker, room.id, **setup)  # type: ignore[arg-type]
    assert await _ask(world, chat, ADMIN, text) == TOO_FEW
    assert _settings(await room_of(world, chat)) == _settings(before)
    assert (await _audited(world, room))[-1] == (ADMIN, text.removeprefix("/settings "), True)


async def test_non_admins_cannot_change_or_see_repeats(world: World) -> None:
    chat = world.new_group()
    room, _ = await seed_round(world, chat)
    assert await _ask(world, chat, BOB, "/settings repeats=off") == texts.not_admin(EN)
    assert await _ask(world, chat, ALICE, "/settings") == texts.not_admin(EN)
    assert (await room_of(world, chat)).repeats is True
    assert await _audited(world, room) == [
        (BOB, "repeats=off", False),
        (ALICE, "", False),
    ]


async def test_settings_alone_shows_the_current_settings(world: World) -> None:
    chat = world.new_group()
    room, _ = await seed_round(world, chat)
    shown = await _ask(world, chat, ADMIN, "/settings")
    assert shown == texts.settings_shown(EN, 4, None, repeats=True)
    assert shown.startswith(
        "Settings for the next round: length 4, palette drawn fresh each round, repeats on, "
        "language English (en)."
    )
    await _ask(world, chat, ADMIN, "/settings repeats=no length=5 palette=🍎🍌🍇🍒🍋")
    shown = await _ask(world, chat, OPERATOR, "/settings   ")
    assert shown.splitlines()[0] == (
        "Settings for the next round: length 5, palette 🍎 🍌 🍇 🍒 🍋, repeats off, "
        "language English (en)."
    )
    assert _settings(await room_of(world, chat)) == (5, "🍎🍌🍇🍒🍋", False, 2)
    assert [args for _, args, _ in await _audited(world, room)] == [
        "",
        "repeats=no length=5 palette=🍎🍌🍇🍒🍋",
        "",
    ]
