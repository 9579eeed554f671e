"""Hostile input through the real bot over the stand-in, and what may become a Redis key name.

The corpus (malformed guesses of every kind, 4,096-unit messages, zero-width and bidi
characters, control characters, markup and key-like text, group commands in private chats,
admin commands with garbage arguments, updates with no sender) goes through python-telegram-bot
and the bot's handlers. Each item gets one clear answer or is ignored as documented, nothing
reaches the error handler (the shared `clean_slate` fixture fails the test if anything does),
and the queue's keyspace is byte-for-byte what it was before: nothing was enqueued.

Then a game played by users whose names and chat title are made of key-like text: every key
of the queue matches the strict keyspace, and no key anywhere in Redis contains user text.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy import func, select

from codemojex.db import AuditLog, Ban, Guess, Player, Round
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.scoring import EMOJI_POOL, InvalidGuess, parse_guess
from codemojex.standin import GROUP_ANONYMOUS_BOT_ID
from codemojex.state.keys import Keys as StateKeys
from tests.bot.conftest import ADMIN, ALICE, BOB, E2E, MAX_DEPTH, World, seed_round, valid_guess
from tests.helpers.support import dump
from tests.reliability.keyspace import queue_keys, stray_keys

pytestmark = E2E

MAX_UNITS = 4096  # Telegram's longest message, in UTF-16 code units
ANSWER_MAX = 300


def _units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def malformed_guesses(palette: tuple[str, ...], length: int) -> list[str]:
    """Texts after `/g ` that must never be enqueued, whatever their shape."""
    a, b = palette[0], palette[1]
    outside = next(e for e in EMOJI_POOL if e not in palette)
    guess = "".join(palette[i % len(palette)] for i in range(length))
    long_emoji = a * ((MAX_UNITS - 3) // _units(a))
    return [
        "",
        " ",
        "\u200b" * length,  # zero-width spaces only
        "\u200b".join([a] * (length - 1)),  # one short, zero-width-separated
        "\u200d".join([a, b]) + a * (length - 1),  # ZWJ glues two into one cluster
        a + "\u200d" * 50,
        "\u202e" + a * (length - 1),  # bidi override, one short
        "\u2066" + guess + b + "\u2069",  # isolate around one too many
        "\u200f" * 100,
        "\u061c" + outside * length,
        a + "\U0001f3fd" + b * (length - 1),  # skin tone on a palette emoji
        a + "\ufe0e" * 3 + b,  # text presentation selectors
        outside * length,
        a * (length + 1),
        a * (length - 1),
        guess + " " + guess,
        guess.replace(a, "x", 1) if a in guess else "x" + guess[1:],
        "1️⃣2️⃣3️⃣4️⃣5️⃣6️⃣"[: 3 * length],
        "🇫🇷" * length + "🇩🇪",
        "👨‍👩‍👧" * (length + 1),
        long_emoji,  # the longest message Telegram delivers, all one palette emoji
        "x" * (MAX_UNITS - 3),
        "a" + "\u0301" * (MAX_UNITS - 4),  # one grapheme cluster of 4,093 code points
        "\u200b" * (MAX_UNITS - 3),
        "\x00\x01\x02\x1b[31m",
        "\r\n" * 10,
        "\t".join([a] * (length + 2)),
        "<b>" + guess + "</b>",
        "*" + guess + "*",
        "`" + guess + "`",
        "'; DROP TABLE guesses; --",
        "{cm}:ring",
        "emq:{cm}:ring",
        "* ? [a-z] \\",
        "%s%s%n%x",
        "مرحبا " + guess,
        "שלום",
        "\ud83d",  # a lone surrogate
        "🍎" * 3 + "\ud83d\ude00",  # ... and a pair written as escapes
        "null",
        "NaN",
        "-1",
        "9" * 100,
    ]


COMMAND_GARBAGE = [
    "/g",
    "/g@codemojex_bot",
    "/limit -1",
    "/limit 99999999999999999999",
    "/limit ٣",
    "/weight abc",
    "/weight -5",
    "/settings palette=🍎🍎🍌🍇",
    "/settings palette=abcd",
    "/settings palette=🍎🍌🍇🍒🍋🥝🍎",
    "/settings length=0",
    "/settings length=99999999999999999999",
    "/settings palette= length=",
    "/settings \u202epalette=🍎🍌🍇🍒",
    "/ban",
    "/unban",
    "/endround extra words",
    "/queue ' OR 1=1",
    "/pause \x00",
]
GROUP_ONLY_IN_PRIVATE = [
    "/newgame",
    "/g 🍎🍌🍇🍒",
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


def with_entities(message: dict[str, Any]) -> dict[str, Any]:
    """A command's bot_command entity, as Telegram marks it (filters.COMMAND looks for it)."""
    text = message.get("text") or ""
    if text.startswith("/"):
        word = text.split(maxsplit=1)[0] if text.split() else text
        message["entities"] = [{"type": "bot_command", "offset": 0, "length": _units(word)}]
    return message


def no_sender_updates(group: int) -> list[dict[str, Any]]:
    chat = {"id": group, "type": "supergroup", "title": "t"}
    channel = {"id": -1_002_999_000_001, "type": "channel", "title": "c"}
    base = {"message_id": 999_001, "date": 1_700_000_000, "chat": chat}
    alice = {"id": ALICE, "is_bot": False, "first_name": "A"}
    updates: list[dict[str, Any]] = [
        {"message": {**base, "text": "/limit 1"}},  # no from at all
        {"message": {**base, "text": "/g 🍎🍌🍇🍒"}},
        {"message": {**base, "sender_chat": channel, "text": "/pause"}},  # a channel speaks
        {"message": {**base, "sender_chat": channel, "text": "🍎🍌🍇🍒"}},
        {"channel_post": {**base, "chat": channel, "text": "/newgame"}},
        {"edited_channel_post": {**base, "chat": channel, "text": "/g 🍎🍌🍇🍒"}},
        {"message": {**base, "from": {"id": 5, "is_bot": True, "first_name": "b"}, "text": "/ban"}},
        {
            "message": {
                **base,
                "from": {"id": GROUP_ANONYMOUS_BOT_ID, "is_bot": True, "first_name": "Group"},
                "text": "/limit 1",
            }
        },  # "anonymous" without sender_chat: not the group speaking
        {"message": {**base, "from": alice}},  # no text at all
        {"message": {**base, "from": alice, "text": ""}},
        {"unknown_update_kind": {"x": 1}},
    ]
    for update in updates:
        for body in update.values():
            with_entities(body)
    return updates


async def settle_long(world: World, tries: int = 12) -> None:
    """world.settle, given longer on a busy machine (a timed-out barrier is simply awaited
    again: the next one comes after it)."""
    for _ in range(tries - 1):
        try:
            await world.settle()
            return
        except TimeoutError:
            continue
    await world.settle()


async def _table_counts(world: World) -> dict[str, int]:
    out = {}
    for model in (Guess, Player, Round, Ban):
        out[model.__name__] = int(await world.scalar(select(func.count()).select_from(model)))
    out["audit_allowed"] = int(
        await world.scalar(select(func.count()).select_from(AuditLog).where(AuditLog.allowed))
    )
    return out


async def test_hostile_corpus_is_answered_or_ignored_and_enqueues_nothing(world: World) -> None:
    chat = world.new_group()
    room, rnd = await seed_round(world, chat)
    palette, length = rnd.palette_emojis, rnd.length
    # First sight of the room (its ceiling goes into the lanes), and one real guess in a lane:
    # both belong to "before".
    world.standin.send_text(chat, BOB, f"/g {valid_guess(rnd)}")
    await world.settle()
    queue = world.settings.queue
    before_keys = _without_pace(await dump(world.redis, queue, cmx=True))
    before_rows = await _table_counts(world)
    assert await world.queued() == 1

    corpus = malformed_guesses(palette, length)
    for text in corpus:
        try:
            parse_guess(text, palette, length)
        except InvalidGuess:
            continue
        raise AssertionError(f"corpus item is a valid guess: {text[:40]!r}")

    asked: dict[int, str] = {}
    ignored_or_answered: dict[int, str] = {}
    for text in corpus:
        command = f"/g {text}"
        if "\ud83d" in text:
            continue
        if text.strip() and _units(command) <= MAX_UNITS:
            asked[world.standin.send_text(chat, ALICE, command)] = text
        # The same text typed as a plain message: a guess attempt is answered, chat ignored.
        if text.strip():
            ignored_or_answered[world.standin.send_text(chat, ALICE, text)] = text
    for text in corpus:
        if text.strip() and "\ud83d" in text:
            # Clients never send lone surrogates; a raw update can carry one anyway.
            world.standin.push_raw_update(
                {
                    "message": with_entities(
                        {
                            "message_id": 990_000 + len(ignored_or_answered),
                            "date": 1_700_000_000,
                            "chat": {"id": chat, "type": "supergroup", "title": "t"},
                            "from": {"id": ALICE, "is_bot": False, "first_name": "Alice"},
                            "text": f"/g {text}",
                        }
                    )
                }
            )
    # NUL and a lone surrogate in what the audit log keeps of a refused command.
    raw_refused = world.standin.push_raw_update(
        {
            "message": with_entities(
                {
                    "message_id": 980_001,
                    "date": 1_700_000_000,
                    "chat": {"id": chat, "type": "supergroup", "title": "t\x00\ud83d"},
                    "from": {"id": BOB, "is_bot": False, "first_name": "B\x00\ud83d"},
                    "text": "/pause \x00\ud83d",
                }
            )
        }
    )
    # Each from a player of its own: one player's answers are limited by their answer budget
    # (tests/bot/test_admin.py), and every item is checked here.
    players = range(3_100, 3_100 + len(COMMAND_GARBAGE))
    for user_id in players:
        world.standin.add_user(user_id, f"Player {user_id}")
    garbage = {
        world.standin.send_text(chat, user_id, text): text
        for user_id, text in zip(players, COMMAND_GARBAGE, strict=True)
    }
    admin_garbage = {
        world.standin.send_text(chat, ADMIN, text): text
        for text in COMMAND_GARBAGE
        if not text.startswith(("/ban", "/unban", "/endround", "/pause", "/g"))
    }
    private = {world.standin.send_private(ALICE, text): text for text in GROUP_ONLY_IN_PRIVATE}
    for update in no_sender_updates(chat):
        world.standin.push_raw_update(update)
    await settle_long(world)

    for mid, text in asked.items():
        said = world.replies_to(chat, mid)
        assert len(said) == 1, (text[:30], said)
        assert 0 < len(said[0]) < ANSWER_MAX, (text[:30], said)
    for mid, text in ignored_or_answered.items():
        said = world.replies_to(chat, mid)
        assert len(said) <= 1, (text[:30], said)
        assert all(0 < len(s) < ANSWER_MAX for s in said)
    for mid, text in garbage.items():
        said = world.replies_to(chat, mid)
        assert len(said) == 1 and 0 < len(said[0]) < ANSWER_MAX, (text, said)
        if not text.startswith("/g"):
            assert said == [texts.not_admin(EN)], (text, said)
    # (the stand-in does not know message 980001, so the refusal is not posted as a reply)
    assert (
        await world.scalar(
            select(func.count())
            .select_from(AuditLog)
            .where(AuditLog.action == "pause", AuditLog.args == "?", ~AuditLog.allowed)
        )
        == 1
    )
    del raw_refused
    for mid, text in admin_garbage.items():
        said = world.replies_to(chat, mid)
        assert len(said) == 1 and 0 < len(said[0]) < ANSWER_MAX, (text, said)
    # In a private chat the answer is not quoted: count them. /g there is a guess at the daily
    # code, which Alice has not opened: "send /daily", and nothing is created.
    in_private = [m.text for m in world.said(ALICE)]
    expected = [
        texts.daily_send_first(EN) if text.startswith("/g") else texts.group_only(EN)
        for text in private.values()
    ]
    assert in_private == expected, in_private
    secret = "".join(rnd.secret_emojis)
    assert not any(secret in m.text for m in world.said(chat))

    assert world.errors == []
    # An update past its deadline on a loaded host is parked, finished, and forgotten at the
    # door's next tick: nothing stays parked.
    await _inbox_empty(world)
    # The bot's answers take posting slots (the pacer's keys) and spend their members' answer
    # budgets: that is bookkeeping of posts, not queue state, so it is left out of the
    # comparison.
    assert _without_pace(await dump(world.redis, queue, cmx=True)) == before_keys
    rows = await _table_counts(world)
    assert rows["Guess"] == before_rows["Guess"] == 0
    assert rows["Player"] == before_rows["Player"]
    assert rows["Round"] == before_rows["Round"]
    assert rows["Ban"] == 0
    # Only the queue's own commands by the admin were allowed; they changed nothing above.
    assert rows["audit_allowed"] == before_rows["audit_allowed"] + len(admin_garbage)
    del room


async def _inbox_empty(world: World, timeout_s: float = 10.0) -> None:
    keys = StateKeys(world.settings.queue)
    async with asyncio.timeout(timeout_s):
        while await world.redis.exists(keys.inbox_parked, keys.inbox_where):  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def _without_pace(keys: dict[str, Any]) -> dict[str, Any]:
    """The queue's state, without the bookkeeping of posts (the pacer's and the answer
    budget's keys), of the commands seen (bot/once.py: a message's mark, expiring with the
    dedupe window), of whom the bot saw in a group (its members, by user id), of the
    processes themselves (the poller's lease and its fence, which a renewal late on a loaded
    host moves on; the inbox's holders and their fences; what the processes publish for the
    ops page) and of a chat's title: a raw update may name the chat otherwise, and the room's
    card then says so (its generation moves with it)."""
    kept = {}
    for key, value in keys.items():
        parts = (
            ":pace:",
            ":answers:",
            ":seen:",
            ":members:",
            ":poller:",
            ":ops:",
            ":inbox:holders",
            ":inbox:fences",
        )
        bookkeeping = any(part in key for part in parts)
        if bookkeeping or key.endswith(":gen"):
            continue
        if ":card:" in key and isinstance(value, dict) and "title" in value:
            value = {field: v for field, v in value.items() if field != "title"}
        kept[key] = value
    return kept


async def test_user_text_never_becomes_part_of_a_key_name(world: World) -> None:
    marker = "ZQX" + uuid.uuid4().hex[:10]
    chat = world.new_group()
    hostile = {
        2_001: f"{{{marker}}}:*",
        2_002: f"emq:{{cm}}:ring {marker}\n\r\x00",
        2_003: f"\u202e{marker}" + "🍎" * 30,
    }
    for user_id, name in hostile.items():
        world.standin.add_user(user_id, name, username=f"u{marker}{user_id}"[:32])
    world.standin.chats[chat].title = f"{marker} *{{room}}* ../../"
    _, rnd = await seed_round(world, chat)
    guesses = []
    for user_id in hostile:
        for shift in range(MAX_DEPTH + 2):  # past the lane's depth: the flood flag is set
            guesses.append(
                world.standin.send_text(chat, user_id, f"/g {valid_guess(rnd, shift % 3)}")
            )
    victim = guesses[0]
    for text in ("/weight 3", "/ban", "/unban"):
        world.standin.send_text(chat, ADMIN, text, reply_to=victim)
    for text in ("/limit 3", "/pause", "/resume", f"/settings palette={marker}", "/queue"):
        world.standin.send_text(chat, ADMIN, text)
    world.standin.send_as_anonymous_admin(chat, "/limit 4")
    world.standin.push_raw_update(  # a name no database column can hold as is
        {
            "message": with_entities(
                {
                    "message_id": 970_001,
                    "date": 1_700_000_000,
                    "chat": {"id": chat, "type": "supergroup", "title": f"{marker}\x00"},
                    "from": {"id": 2_099, "is_bot": False, "first_name": f"\ud83d{marker}\x00"},
                    "text": f"/g {valid_guess(rnd)}",
                }
            )
        }
    )
    await settle_long(world)
    assert await world.queued() > 0

    queue = world.settings.queue
    keys = await queue_keys(world.redis, queue)
    assert any(":flood:" in k for k in keys)  # the flood path was exercised
    assert stray_keys(keys, queue) == []
    # And nowhere in the whole Redis: no key holds the users' text.
    leaked = [k async for k in world.redis.scan_iter(match=f"*{marker}*", count=1000)]
    assert leaked == []
