"""The bot's languages through the real bot: a group takes the language of whoever starts its
first round, an admin changes it with /settings lang=…, a private chat follows the user's
Telegram language; /top and /top week answer in the chat's language."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from codemojex.db import Outbox, store
from codemojex.game import texts
from codemojex.locale import EN, Lang
from codemojex.scoring import InvalidGuess, InvalidSettings, parse_guess, parse_settings
from tests.bot.conftest import ADMIN, ALICE, E2E, World, open_round, room_of

pytestmark = E2E

RU, UK, ES, PT, ID = (Lang(code) for code in ("ru", "uk", "es", "pt_BR", "id"))
IVAN, OKSANA, LUCIA, JOAO, PUTRI, HANS = range(1201, 1207)
PEOPLE = (
    (IVAN, "Иван", "ru"),
    (OKSANA, "Оксана", "uk"),
    (LUCIA, "Lucía", "es-419"),  # a regional variant: the Spanish catalog
    (JOAO, "João", "pt-br"),
    (PUTRI, "Putri", "id"),
    (HANS, "Hans", "de"),  # no German catalog: English
)


@pytest.fixture(autouse=True)
def people(world: World) -> None:
    for user_id, name, code in PEOPLE:
        world.standin.add_user(user_id, name, language_code=code)


async def ask(world: World, chat: int, user: int, text: str) -> str:
    """The bot's one answer to `text` sent by `user` in the group `chat`."""
    asked = world.standin.send_text(chat, user, text)
    await world.settle()
    [said] = world.replies_to(chat, asked)
    return said


async def ask_privately(world: World, user: int, text: str) -> str:
    before = len(world.said(user))
    world.standin.send_private(user, text)
    await world.settle()
    [said] = [m.text for m in world.said(user)[before:]]
    return said


async def announcements(world: World, chat: int) -> list[str]:
    stmt = select(Outbox.text).where(Outbox.chat_id == chat, Outbox.kind == "round")
    async with world.sessionmaker() as session:
        return list((await session.execute(stmt.order_by(Outbox.id))).scalars())


def refusal(typed: str, palette: tuple[str, ...], length: int) -> InvalidGuess:
    with pytest.raises(InvalidGuess) as info:
        parse_guess(typed, palette, length)
    return info.value


async def test_a_group_speaks_the_language_of_whoever_starts_its_first_round(
    world: World,
) -> None:
    chat = world.new_group()
    # before its first round, everyone is answered in their own language
    assert await ask(world, chat, IVAN, "/g 🍎") == texts.no_round(RU)
    assert await ask(world, chat, ALICE, "/g 🍎") == texts.no_round(EN)
    world.standin.send_text(chat, JOAO, "/newgame")
    await world.settle()
    assert (await room_of(world, chat)).language == "pt_BR"
    rnd = await open_round(world, chat)
    assert rnd is not None
    assert await announcements(world, chat) == [
        texts.round_started(PT, rnd.palette_emojis, rnd.length, 600)
    ]
    # from now on, the group's language for everyone
    said = await ask(world, chat, IVAN, "/g 🦄")
    assert said == texts.guess_refused(PT, refusal("🦄", rnd.palette_emojis, rnd.length))
    assert await ask(world, chat, ALICE, "/newgame") == texts.round_running(PT)
    rules = await ask(world, chat, OKSANA, "/rules")
    assert rules == texts.rules_text(PT, rnd.length, rnd.palette, 600)
    # a later round, started by someone else, keeps it
    world.standin.send_text(chat, ADMIN, "/endround")  # the reveal goes out via the outbox
    await world.settle()
    stmt = select(Outbox.text).where(Outbox.chat_id == chat, Outbox.kind == "reveal")
    async with world.sessionmaker() as session:
        assert list((await session.execute(stmt)).scalars()) == [
            texts.ended_by_admin(PT, rnd.secret)
        ]
    world.standin.send_text(chat, IVAN, "/newgame")
    await world.settle()
    assert (await room_of(world, chat)).language == "pt_BR"
    assert all(a.startswith("🎯 Nova rodada!") for a in await announcements(world, chat))


async def test_a_starter_without_a_catalog_makes_an_english_group(world: World) -> None:
    chat = world.new_group()
    world.standin.send_text(chat, HANS, "/newgame")
    await world.settle()
    assert (await room_of(world, chat)).language == "en"
    assert await ask(world, chat, IVAN, "/top") == texts.leaderboard(EN, [])


async def test_an_admin_changes_the_language(world: World) -> None:
    chat = world.new_group(admins=(ADMIN, OKSANA))
    world.standin.send_text(chat, IVAN, "/newgame")
    await world.settle()
    assert (await room_of(world, chat)).language == "ru"
    # a player may not
    assert await ask(world, chat, IVAN, "/settings lang=es") == texts.not_admin(RU)
    # an admin may; the answer is in the new language
    said = await ask(world, chat, OKSANA, "/settings lang=uk")
    assert said == texts.settings_changed(UK, 4, None, repeats=True)
    assert "мова: Українська (uk)" in said
    assert (await room_of(world, chat)).language == "uk"
    shown = await ask(world, chat, ADMIN, "/settings")
    assert shown == texts.settings_shown(UK, 4, None, repeats=True)
    with pytest.raises(InvalidSettings) as unknown:
        parse_settings("lang=klingon")
    said = await ask(world, chat, OKSANA, "/settings lang=klingon")
    assert said == texts.settings_refused(UK, unknown.value)
    assert (await room_of(world, chat)).language == "uk"
    assert await ask(world, chat, ADMIN, "/settings lang=PT-BR") == texts.settings_changed(
        PT, 4, None, repeats=True
    )
    # the open round keeps its rules; everything said from now on is in Portuguese
    assert await ask(world, chat, IVAN, "/g") == texts.guess_refused(
        PT,
        refusal("", (await open_round(world, chat)).palette_emojis, 4),  # type: ignore[union-attr]
    )


async def test_private_chats_follow_the_users_language(world: World) -> None:
    assert await ask_privately(world, OKSANA, "/help") == texts.help_text(UK)
    assert await ask_privately(world, LUCIA, "/help") == texts.help_text(ES)
    assert await ask_privately(world, PUTRI, "hai") == texts.private_hint(ID)
    assert await ask_privately(world, HANS, "hallo") == texts.private_hint(EN)
    assert await ask_privately(world, IVAN, "/newgame") == texts.group_only(RU)
    me = await ask_privately(world, JOAO, "/me")
    assert me == "\n\n".join(
        (
            texts.player_stats(PT, "João", 0, 0, 0, None, rooms=0),
            texts.daily_record(PT, 0, 0, 0, 0, ()),
        )
    )
    rules = await ask_privately(world, IVAN, "/rules")
    assert rules == texts.rules_text(RU, 4, None, 600)


async def test_top_week_and_top_in_the_groups_language(world: World) -> None:
    chat = world.new_group()
    world.standin.send_text(chat, LUCIA, "/newgame")
    await world.settle()
    assert await ask(world, chat, ALICE, "/top week") == texts.leaderboard(ES, [], week=True)
    assert await ask(world, chat, ALICE, "/top WEEK") == texts.leaderboard(ES, [], week=True)
    assert await ask(world, chat, ALICE, "/top") == texts.leaderboard(ES, [])
    assert await ask(world, chat, ALICE, "/top month") == texts.top_usage(ES)
    async with world.sessionmaker() as session:
        room = await room_of(world, chat)
        assert await store.weekly_board(session, room.id) == []
