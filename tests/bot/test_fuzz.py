"""Property: whatever update JSON arrives, the bot does not crash, and nothing is written to
Redis or Postgres beyond what the rules allow (valid guesses are enqueued, non-admins' admin
commands are refused and audited as refused up to the refused-attempt limit, rooms and players
are bookkept). Every batch holds a player's admin command (`admin_attempts`).

The updates go through the stand-in and the bot's real polling path, so python-telegram-bot's
own parsing and filters are part of what is fuzzed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from codemojex.db import AuditLog, Ban, Round
from codemojex.scoring import InvalidGuess, parse_guess
from codemojex.standin import GROUP_ANONYMOUS_BOT_ID
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import ALICE, BOB, E2E, World, room_of, seed_round

pytestmark = E2E

ADMIN_COMMANDS = [
    "/pause", "/resume", "/limit", "/weight", "/ban", "/unban", "/endround", "/settings", "/queue",
]  # fmt: skip
COMMANDS = [
    *ADMIN_COMMANDS, "/g", "/help", "/rules", "/stats", "/top", "/me", "/start", "/frobnicate",
]  # fmt: skip
ODD = ["\u200b", "\u200d", "\u202e", "\u2066", "\ufe0f", " ", "\n", "\x00", "a", "1", "#", "🏽"]


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def texts(palette: list[str], length: int) -> st.SearchStrategy[str]:
    emojis = st.lists(st.sampled_from(palette), min_size=length - 1, max_size=length + 1).map(
        "".join
    )
    return st.one_of(
        st.text(max_size=40),
        emojis,
        emojis.map(lambda e: f"/g {e}"),
        st.tuples(
            st.sampled_from(COMMANDS),
            st.sampled_from(["", "@codemojex_bot", "@other_bot"]),
            st.sampled_from(["", " "]),
            st.one_of(
                st.text(max_size=30),
                st.lists(st.sampled_from(palette + ODD + ["🐶", "❤", "3️⃣"]), max_size=8).map(
                    "".join
                ),
                st.integers().map(str),
                st.sampled_from(["length=5", "palette=🍎🍎", "length=4 palette=🍎🍌🍇🍒"]),
            ),
        ).map(lambda t: f"{t[0]}{t[1]}{t[2]}{t[3]}"),
        st.lists(st.sampled_from(palette + ODD), min_size=1, max_size=12).map("".join),
    )


@st.composite
def updates(
    draw: st.DrawFn,
    group: int,
    bot_message: int,
    alice_message: int,
    palette: list[str],
    length: int,
) -> dict[str, Any]:
    text = draw(texts(palette, length))
    where = draw(st.sampled_from(["group", "group", "group", "private"]))
    people = ["alice", "bob"] * 3
    who = draw(st.sampled_from([*people, "none", "channel", "bot", "anonymous_bot"]))
    user = {"alice": ALICE, "bob": BOB}.get(who, ALICE)
    chat: dict[str, Any] = (
        {"id": group, "type": "supergroup", "title": "fuzz"}
        if where == "group"
        else {"id": user, "type": "private", "first_name": "x"}
    )
    message: dict[str, Any] = {
        "message_id": draw(st.integers(min_value=1, max_value=2**31 - 1)),
        "date": int(time.time()),
        "chat": chat,
    }
    if text:
        message["text"] = text
        if text.startswith("/"):
            word = text.split(maxsplit=1)[0] if text.strip() else text
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": _utf16(word)}]
    if who in ("alice", "bob"):
        message["from"] = {"id": user, "is_bot": False, "first_name": who.title()}
    elif who == "channel":
        message["from"] = {"id": 136817688, "is_bot": True, "first_name": "Channel"}
        message["sender_chat"] = {"id": -1_009_999_999_999, "type": "channel", "title": "c"}
    elif who == "bot":
        message["from"] = {"id": 777, "is_bot": True, "first_name": "OtherBot"}
    elif who == "anonymous_bot":
        # GroupAnonymousBot without sender_chat: not an anonymous admin, nor a person.
        message["from"] = {"id": GROUP_ANONYMOUS_BOT_ID, "is_bot": True, "first_name": "Group"}
    reply = draw(st.sampled_from([None, bot_message, alice_message])) if where == "group" else None
    if reply is not None:
        message["reply_to_message"] = {
            "message_id": reply,
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": 123, "is_bot": True, "first_name": "Codemojex"}
            if reply == bot_message
            else {"id": ALICE, "is_bot": False, "first_name": "Alice"},
            "text": "earlier",
        }
    kind = draw(st.sampled_from(["message", "message", "edited_message"]))
    if kind == "edited_message":
        message["edit_date"] = int(time.time())
    return {kind: message}


@st.composite
def admin_attempts(draw: st.DrawFn, group: int, alice_message: int) -> dict[str, Any]:
    """A player's admin command in the group, as Telegram delivers a typed one: a new message
    from a person, with its bot_command entity, maybe addressed to us, maybe with arguments,
    maybe a reply to a player. Every batch holds one, so an admin check that lets everybody
    through is caught on every run, not when the general strategy happens to draw one."""
    word = draw(st.sampled_from(ADMIN_COMMANDS)) + draw(st.sampled_from(["", "@codemojex_bot"]))
    args = draw(st.sampled_from(["", " 3", " 1000", " length=5 repeats=off", " palette=🍎🍌🍇🍒"]))
    user = draw(st.sampled_from([ALICE, BOB]))
    message: dict[str, Any] = {
        "message_id": draw(st.integers(min_value=1, max_value=2**31 - 1)),
        "date": int(time.time()),
        "chat": {"id": group, "type": "supergroup", "title": "fuzz"},
        "from": {"id": user, "is_bot": False, "first_name": "Player"},
        "text": word + args,
        "entities": [{"type": "bot_command", "offset": 0, "length": _utf16(word)}],
    }
    if draw(st.booleans()):
        message["reply_to_message"] = {
            "message_id": alice_message,
            "date": int(time.time()),
            "chat": message["chat"],
            "from": {"id": ALICE, "is_bot": False, "first_name": "Alice"},
            "text": "earlier",
        }
    return {"message": message}


async def test_fuzzed_updates_change_nothing_they_should_not(world: World) -> None:
    group = world.new_group()
    room, rnd = await seed_round(world, group)
    for user in (ALICE, BOB):
        world.standin.send_private(user, "/help")
    asked = world.standin.send_text(group, ALICE, "/rules")
    alice_message = world.standin.send_text(group, ALICE, "hello")
    await world.settle()
    (rules,) = [m for m in world.said(group) if m.reply_to_message_id == asked]

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        batch=st.lists(
            updates(group, rules.message_id, alice_message, list(rnd.palette_emojis), rnd.length),
            max_size=4,
        ),
        attempt=admin_attempts(group, alice_message),
        at=st.integers(min_value=0, max_value=4),
    )
    def run(batch: list[dict[str, Any]], attempt: dict[str, Any], at: int) -> None:
        pending.append([*batch[:at], attempt, *batch[at:]])

    pending: list[list[dict[str, Any]]] = []
    # Hypothesis draws the batches; the running bot gets them below, on this event loop. (The
    # property is checked after each batch, so a failure names the batch, unshrunk.)
    run()
    sent = 0
    for batch in pending:
        for update in batch:
            world.standin.push_raw_update(update)
            sent += 1
        await world.settle()
        assert world.errors == [], batch

    # Nothing an admin alone may do happened; the players' admin commands reached the gate.
    assert await world.scalar(select(func.count()).select_from(Ban)) == 0
    audits = select(func.count()).select_from(AuditLog)
    assert await world.scalar(audits.where(AuditLog.allowed.is_(True))) == 0
    assert await world.scalar(audits.where(AuditLog.allowed.is_(False))) > 0
    after = await room_of(world, group)
    assert (after.ceiling, after.length, after.palette) == (room.ceiling, room.length, room.palette)
    assert await world.scalar(select(func.count()).select_from(Round)) == 1
    view = (await world.lanes.snapshot(room.id))["rooms"][room.id]
    # The room's ceiling reaches the lanes with its first guess taken (Lanes.admit).
    assert view["ceiling"] == (2 if view["pending"] else None) and not view["paused"]
    assert all(lane["weight"] == 1 and not lane["paused"] for lane in view["lanes"].values())
    # Every job in the queue is a valid guess for the round.
    jobs = 0
    while (job := await world.lanes.claim(60_000)) is not None:
        jobs += 1
        payload = GuessJob.decode(job.payload)
        try:
            parse_guess("".join(payload.emojis), rnd.palette_emojis, rnd.length)
        except InvalidGuess as exc:  # pragma: no cover - the assertion below reports it
            pytest.fail(f"an invalid guess was enqueued: {exc}")
        assert payload.round_id == rnd.id
        await world.lanes.ack(job)
    assert jobs <= sent
