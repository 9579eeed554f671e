"""Guesses through the real bot: validated before enqueue, enqueued once, floods refused."""

from __future__ import annotations

from typing import Any

from telegram import Update

from codemojex.game import texts
from codemojex.locale import EN
from codemojex.scoring import EMOJI_POOL
from codemojex.standin.markup import utf16_len
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    E2E,
    MAX_DEPTH,
    World,
    flood_gets_one_slow_down,
    open_round,
    paused_room_notes_once_per_player,
    start_round,
    valid_guess,
)

pytestmark = E2E


async def test_valid_guess_enqueued_once_even_when_the_update_comes_twice(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    guess = valid_guess(rnd)
    mid = world.standin.send_text(chat, ALICE, guess)
    await world.settle()
    assert await world.queued() == 1
    assert world.replies_to(chat, mid) == []  # the result comes from the worker, not the bot

    # The same message delivered again (a redelivered or reprocessed update).
    message = world.standin.message(chat, mid)
    assert message is not None
    world.standin.push_raw_update({"message": message})
    world.standin.push_raw_update({"message": message})
    await world.settle()
    assert await world.queued() == 1

    job = await world.lanes.claim(10_000)
    assert job is not None
    payload = GuessJob.decode(job.payload)
    assert (payload.round_id, payload.message_id) == (rnd.id, mid)
    assert "".join(payload.emojis) == guess


async def test_g_command_and_reply_to_the_bot_are_guesses(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, ALICE, f"/g {valid_guess(rnd)}")
    # A reply to one of the bot's messages is addressed to the bot: a guess, even a bad one.
    asked = world.standin.send_text(chat, BOB, "/rules")
    await world.settle()
    (rules,) = [m for m in world.said(chat) if m.reply_to_message_id == asked]
    bad = world.standin.send_text(chat, BOB, "what?", reply_to=rules.message_id)
    good = world.standin.send_text(chat, BOB, valid_guess(rnd, 1), reply_to=rules.message_id)
    await world.settle()
    assert await world.queued() == 2
    assert len(world.replies_to(chat, bad)) == 1
    assert world.replies_to(chat, good) == []


def _outside(palette: tuple[str, ...]) -> str:
    return next(e for e in EMOJI_POOL if e not in palette)


async def test_invalid_guesses_get_a_reason_and_enqueue_nothing(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    pal, n = rnd.palette_emojis, rnd.length
    hostile = [
        "",
        "hello",
        pal[0],
        pal[0] * (n - 1),
        pal[0] * (n + 1),
        _outside(pal) * n,
        pal[0] * (3_800 // utf16_len(pal[0])),  # long, but one message (a flag takes 4 units)
        "a" * 4000,
        "\u202e" + pal[0] * n,  # bidi override: invisible, ignored like spaces
        pal[0] + "\u200b" + "x" * 3,
        "1234",
        "<b>" + pal[0] * n + "</b>",
        "\x00" * 4,
    ]
    asked = [world.standin.send_text(chat, ALICE, f"/g {text}") for text in hostile]
    await world.settle()
    answers = {text: world.replies_to(chat, mid) for text, mid in zip(hostile, asked, strict=True)}
    # The bidi mark is invisible: that one is a valid guess, every other one is refused.
    valid = "\u202e" + pal[0] * n
    assert answers.pop(valid) == []
    for text, said in answers.items():
        assert len(said) == 1, (text[:20], said)
        assert said[0] and len(said[0]) < 300
    assert await world.queued() == 1


async def test_plain_chat_is_ignored_and_plain_emoji_guesses_are_answered(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    pal, n = rnd.palette_emojis, rnd.length
    chatter = ["hello everyone", "👍", "😂😂", f"{pal[0]}{pal[1]} lol", "/g@some_other_bot 🍎"]
    quiet = [world.standin.send_text(chat, BOB, text) for text in chatter]
    too_many = world.standin.send_text(chat, BOB, pal[0] * (n + 2))
    wrong = world.standin.send_text(chat, BOB, _outside(pal) * n)
    # Spaced emoji by emoji (a flag is two code points: joining the string's characters
    # would split it).
    good = world.standin.send_text(chat, BOB, " ".join(pal[i % len(pal)] for i in range(n)))
    await world.settle()
    for mid in quiet:
        assert world.replies_to(chat, mid) == []
    assert "Too long" in world.replies_to(chat, too_many)[0]
    assert "palette" in world.replies_to(chat, wrong)[0]
    assert world.replies_to(chat, good) == []
    assert await world.queued() == 1


async def test_edited_messages_are_not_guesses(world: World) -> None:
    """The bot does not ask for edited_message updates (allowed_updates), so the stand-in does
    not even deliver these edits; the next test delivers them anyway."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    first = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    chat_line = world.standin.send_text(chat, BOB, "hmm")
    await world.settle()
    world.standin.edit_text(chat, first, valid_guess(rnd, 1))
    world.standin.edit_text(chat, chat_line, valid_guess(rnd, 2))
    world.standin.edit_text(chat, chat_line, f"/g {valid_guess(rnd, 2)}")
    await world.settle()
    assert await world.queued() == 1
    assert world.replies_to(chat, chat_line) == []


def _edited(world: World, chat: int, message_id: int, text: str) -> dict[str, Any]:
    """The author edits a message to `text`: the edited_message update Telegram would send
    (text, entities and edit_date updated), pushed straight to the bot whatever allowed_updates
    says."""
    world.standin.edit_text(chat, message_id, text)
    message = world.standin.message(chat, message_id)
    assert message is not None and "edit_date" in message
    world.standin.push_raw_update({"edited_message": message})
    return message


async def test_delivered_edits_are_not_guesses_and_do_not_rerun_commands(world: World) -> None:
    """Edits delivered as Telegram would if the bot asked for them (push_raw_update ignores
    allowed_updates): messages edited into a guess, a /g, a reply-guess, /pause and /newgame
    enqueue nothing, answer nothing and change nothing."""
    chat, idle = world.new_group(), world.new_group()
    rnd = await start_round(world, chat)
    asked = world.standin.send_text(chat, BOB, "/rules")
    await world.settle()
    (rules,) = [m for m in world.said(chat) if m.reply_to_message_id == asked]
    plain = world.standin.send_text(chat, ALICE, "hmm")
    command = world.standin.send_text(chat, BOB, "/help")  # answered: a command that ran once
    reply = world.standin.send_text(chat, ALICE, "nice", reply_to=rules.message_id)  # refused
    admin = world.standin.send_text(chat, ADMIN, "ok")
    elsewhere = world.standin.send_text(idle, ALICE, "hi")
    await world.settle()
    said = {c: list(world.said(c)) for c in (chat, idle)}
    lanes = await world.lanes.snapshot()
    assert await world.queued() == 0

    edits = [
        _edited(world, chat, plain, valid_guess(rnd)),
        _edited(world, chat, command, f"/g {valid_guess(rnd, 1)}"),
        _edited(world, chat, reply, valid_guess(rnd, 2)),
        _edited(world, chat, admin, "/pause"),
        _edited(world, idle, elsewhere, "/newgame"),
    ]
    await world.settle()
    assert await world.queued() == 0
    assert await world.lanes.snapshot() == lanes  # nothing enqueued, no room paused
    assert {c: list(world.said(c)) for c in (chat, idle)} == said  # nothing answered
    assert await world.audits("pause") == 0
    assert await open_round(world, idle) is None

    # The same payloads as new messages are acted on: the edits above were delivered and
    # well formed, and only their being edits kept them out.
    for n, edit in enumerate(edits):
        fresh = {k: v for k, v in edit.items() if k != "edit_date"}
        world.standin.push_raw_update({"message": {**fresh, "message_id": 900_000 + n}})
    await world.settle()
    assert await world.queued() == 3
    assert await world.audits("pause", allowed=True) == 1
    assert await open_round(world, idle) is not None


async def test_no_handler_takes_an_edited_message(world: World) -> None:
    """The filter itself (filters.UpdateType.MESSAGE on every message handler): a message
    edited into a guess, a /g, an admin, player or unknown command matches no handler in any
    group, while the same message new matches one. (The handlers read update.message, which an
    edit leaves empty, so the filter's loss alone would not show in the bot's answers.)"""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    mids = [world.standin.send_text(chat, ALICE, text) for text in ("a", "b", "c", "d", "e")]
    await world.settle()
    edits = [valid_guess(rnd), f"/g {valid_guess(rnd)}", "/pause", "/stats", "/whatever"]
    handlers = [h for group in world.app.handlers.values() for h in group]
    for mid, text in zip(mids, edits, strict=True):
        world.standin.edit_text(chat, mid, text)
        edited = Update.de_json(
            {"update_id": 1, "edited_message": world.standin.message(chat, mid)}, world.app.bot
        )
        as_new = Update.de_json(
            {"update_id": 2, "message": world.standin.message(chat, mid)}, world.app.bot
        )
        assert [h for h in handlers if h.check_update(edited)] == [], text
        assert any(h.check_update(as_new) for h in handlers), text


async def test_no_round_running(world: World) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/g 🍎🍌🍇🍒")
    plain = world.standin.send_text(chat, ALICE, "🍎🍌🍇🍒")
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.no_round(EN)]
    assert world.replies_to(chat, plain) == []
    assert await world.queued() == 0


async def test_second_newgame_is_refused_while_a_round_runs(world: World) -> None:
    chat = world.new_group()
    await start_round(world, chat)
    again = world.standin.send_text(chat, BOB, "/newgame")
    await world.settle()
    assert world.replies_to(chat, again) == [texts.round_running(EN)]


async def test_a_flood_gets_one_slow_down_and_does_not_block_others(world: World) -> None:
    await flood_gets_one_slow_down(world)


async def test_a_players_guesses_enter_the_lane_in_the_order_typed(world: World) -> None:
    """Updates are handled concurrently, but one sender's in order (PerSenderUpdateProcessor)."""
    chat, other = world.new_group(), world.new_group()
    rnd = await start_round(world, chat)
    rnd_other = await start_round(world, other)
    typed = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(MAX_DEPTH)]
    for i in range(MAX_DEPTH):
        world.standin.send_text(other, BOB, valid_guess(rnd_other, i))
    await world.settle()
    served: list[int] = []
    while (job := await world.lanes.claim(10_000)) is not None:
        payload = GuessJob.decode(job.payload)
        if payload.round_id == rnd.id:
            served.append(payload.message_id)
        await world.lanes.ack(job)
    assert served == typed


async def test_guesses_in_a_paused_room_are_kept_with_one_note_per_player(world: World) -> None:
    await paused_room_notes_once_per_player(world)
