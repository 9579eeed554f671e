"""Private chats, unknown commands, updates nobody can be answered for, the command list."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from codemojex.game import texts
from codemojex.locale import EN, LANGUAGES, Lang, menu_code
from tests.bot.conftest import ADMIN, ALICE, BOB, E2E, World, room_of, seed_round, valid_guess

pytestmark = E2E

# (/g in a private chat is the daily code's guess: tests/e2e/test_daily.py)
GROUP_ONLY = [
    "/newgame",
    "/stats",
    "/top",
    "/pause",
    "/resume",
    "/limit 3",
    "/weight 2",
    "/ban",
    "/unban",
    "/endround",
    "/settings length=5",
    "/queue",
]


async def test_group_commands_in_private_get_a_clear_answer(world: World) -> None:
    for text in GROUP_ONLY:
        world.standin.send_private(ALICE, text)
    await world.settle()
    # Answers in private chats are not quoted; the bot answers in order, one each.
    assert [m.text for m in world.said(ALICE)] == [texts.group_only(EN)] * len(GROUP_ONLY)
    assert await world.audits("pause") == 0
    assert await world.queued() == 0


async def test_help_rules_me_and_chatter_in_private(world: World) -> None:
    for text in ("/help", "/rules", "/me", "/start", "hi bot", "/frobnicate"):
        world.standin.send_private(BOB, text)
    await world.settle()
    texts_in_order = [m.text for m in world.said(BOB)]
    assert len(texts_in_order) == 6
    assert texts_in_order[0] == texts.help_text(EN)
    assert "Crack a secret code" in texts_in_order[1]
    assert texts_in_order[2].startswith("Bob in 0 chats")
    assert texts_in_order[3] == texts.help_text(EN)
    assert texts_in_order[4] == texts.private_hint(EN)
    assert texts_in_order[5] == texts.unknown_command(EN)


async def test_unknown_commands_in_groups_only_when_addressed(world: World) -> None:
    chat = world.new_group()
    bare = world.standin.send_text(chat, ALICE, "/frobnicate")
    other_bot = world.standin.send_text(chat, ALICE, "/frobnicate@another_bot")
    ours = world.standin.send_text(chat, ALICE, "/frobnicate@codemojex_bot")
    ours_known = world.standin.send_text(chat, ALICE, "/help@codemojex_bot")
    theirs_known = world.standin.send_text(chat, ALICE, "/help@another_bot")
    await world.settle()
    assert world.replies_to(chat, bare) == []
    assert world.replies_to(chat, other_bot) == []
    assert world.replies_to(chat, ours) == [texts.unknown_command(EN)]
    assert world.replies_to(chat, ours_known) == [texts.help_text(EN)]
    assert world.replies_to(chat, theirs_known) == []


def _typed(message: dict[str, Any]) -> dict[str, Any]:
    """`message` as Telegram delivers a typed command: with its bot_command entity, without
    which python-telegram-bot routes nothing to a CommandHandler."""
    text = message.get("text", "")
    if text.startswith("/"):
        word = text.split(maxsplit=1)[0]
        message = {
            **message,
            "entities": [{"type": "bot_command", "offset": 0, "length": len(word)}],
        }
    return message


async def test_updates_without_a_sender_are_ignored(world: World) -> None:
    """Real commands (with their entities) that nobody we can answer to sent: no sender, a
    channel posting in the group, a channel post, an edit. The admin gate sees none of them."""
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    group = {"id": chat, "type": "supergroup", "title": "room"}
    channel = {"id": -1_009_999_999_999, "type": "channel", "title": "a channel"}
    channel_bot = {"id": 136817688, "is_bot": True, "first_name": "Channel"}
    base = {"date": 1_700_000_000, "chat": group}
    raw = [
        {"message": {**base, "message_id": 9001, "text": valid_guess(rnd)}},
        {"message": _typed({**base, "message_id": 9002, "text": f"/g {valid_guess(rnd)}"})},
        {"message": _typed({**base, "message_id": 9003, "text": "/pause"})},
        {"message": _typed({**base, "message_id": 9004, "text": "/newgame"})},
        {"message": _typed({**base, "message_id": 9010, "text": "/pause@codemojex_bot"})},
        {
            "message": _typed(
                {**base, "message_id": 9005, "text": "/pause", "sender_chat": channel}
                | {"from": channel_bot}
            )
        },
        {
            "message": _typed(
                {**base, "message_id": 9011, "text": "/limit 9", "sender_chat": channel}
                | {"from": channel_bot}
            )
        },
        {
            "message": {
                **base,
                "message_id": 9006,
                "text": valid_guess(rnd),
                "sender_chat": channel,
                "from": channel_bot,
            }
        },
        {"channel_post": _typed({**base, "chat": channel, "message_id": 9007, "text": "/pause"})},
        {"message": {**base, "message_id": 9008}},  # no text at all
        {
            "edited_message": _typed(
                {**base, "message_id": 9009, "text": "/pause", "edit_date": 1}
                | {"from": {"id": ALICE, "is_bot": False, "first_name": "Alice"}}
            )
        },
    ]
    for update in raw:
        world.standin.push_raw_update(update)
    await world.settle()
    assert world.said(chat) == []
    assert await world.queued() == 0
    assert await world.audits("pause") == 0
    assert await world.audits("limit") == 0
    room = await room_of(world, chat)
    assert not (await world.lanes.snapshot(room.id))["rooms"].get(room.id, {}).get("paused")
    assert room.ceiling == 2


async def test_anonymous_admin_cannot_play(world: World) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    asked = world.standin.send_as_anonymous_admin(chat, f"/g {valid_guess(rnd)}")
    plain = world.standin.send_as_anonymous_admin(chat, valid_guess(rnd))
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.anonymous_player(EN)]
    assert world.replies_to(chat, plain) == []
    assert await world.queued() == 0


@pytest.mark.parametrize("lang", LANGUAGES)
async def test_post_init_registered_the_command_lists(world: World, lang: Lang) -> None:
    """Per scope, in every shipped language (its two-letter code) and, for every other
    language, in English (no language code)."""
    code = "" if lang == EN else menu_code(lang)

    def menu(scope: str) -> list[tuple[str, str]]:
        found = world.standin.registered_commands({"type": scope}, code)
        return [(c["command"], c["description"]) for c in found]

    players = list(texts.player_commands(lang))
    assert menu("all_group_chats") == players
    assert menu("all_chat_administrators") == players + list(texts.admin_commands(lang))
    assert menu("all_private_chats") == list(texts.private_commands(lang))
    assert [name for name, _ in menu("all_private_chats")] == [
        "daily",
        "top",
        "rules",
        "me",
        "help",
    ]
    if lang != EN:  # described in the language itself
        assert menu("all_group_chats") != list(texts.player_commands(EN))


async def test_a_telegram_failure_after_the_effect_is_apologised_for_and_logged_without_text(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """The command took effect (audited), then Telegram failed its answer with a 5xx: the
    update ends there (trying it again could answer twice), its sender apologised to, the
    failure logged with the update's id and none of its text. (A failure before the effect
    is waited out: tests/bot/test_tries.py.)"""
    chat = world.new_group()
    world.standin.inject_error(502, "Bad Gateway", count=1, methods=["sendMessage"], chat_id=chat)
    asked = world.standin.send_text(chat, ADMIN, "/limit 3 private-words")
    with caplog.at_level(logging.ERROR, logger="codemojex.bot"):
        await world.settle()
    assert world.replies_to(chat, asked) == [texts.went_wrong(EN)]
    assert [type(e).__name__ for e in world.errors] == ["NetworkError"]
    world.errors.clear()  # expected here; every other test asserts there were none
    assert any(r.getMessage().startswith("update ") for r in caplog.records)
    assert "private-words" not in caplog.text
    assert await world.audits("limit") == 1


async def test_no_apology_when_telegram_says_retry_after(world: World) -> None:
    """Telegram answering the command's answer with a 429: the answer is dropped and the
    chat held for the wait it names; no apology (it would be refused too)."""
    chat = world.new_group()
    world.standin.inject_429(1, retry_after=1, methods=["sendMessage"], chat_id=chat)
    asked = world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    assert world.replies_to(chat, asked) == []
    assert world.errors == []
