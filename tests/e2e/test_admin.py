"""Admin commands end to end: refused for players, allowed for the chat's administrators,
for an anonymous admin (posting as the group) and for an operator id from the settings."""

from __future__ import annotations

from sqlalchemy import select

from codemojex.db import AuditLog, Ban, Guess, Room, Round
from codemojex.game import texts
from codemojex.locale import EN
from tests.e2e.harness import (
    ADMIN,
    ALICE,
    BOB,
    DAVE,
    OPERATOR,
    Stack,
    eventually,
    in_process_worker,
)
from tests.helpers.support import wrong_guess


async def test_only_admins_anonymous_admins_and_operators_run_admin_commands(
    stack: Stack,
) -> None:
    chat = stack.new_group(admins=(ADMIN,))
    say = stack.standin.send_text
    async with in_process_worker(stack):
        ann, rnd = await stack.new_round(chat, by=ALICE)
        room = await stack.room_id(chat)
        guess = "".join(ann.palette[: ann.length])
        # A guess first: the room's ceiling reaches the lanes with it (Lanes.admit).
        first = "".join(wrong_guess(rnd.secret_emojis, ann.palette))
        await stack.result(chat, say(chat, DAVE, first), "Dave", first)

        # A player (not an administrator) tries every kind of admin command.
        bobs = say(chat, BOB, "hello")
        refused = [
            say(chat, ALICE, "/pause"),
            say(chat, ALICE, "/limit 1"),
            say(chat, ALICE, "/endround"),
            say(chat, ALICE, "/ban", reply_to=bobs),
            say(chat, DAVE, "/settings length=5"),  # Alice's answer budget is spent
        ]
        # Each refused (the group's pace allows a post a second: the answers waiting for it
        # are folded into one message).
        await stack.answered(chat, refused, texts.not_admin(EN))
        # ... and nothing changed.
        view = (await stack.lanes.snapshot(room))["rooms"][room]
        assert view["paused"] is False and view["ceiling"] == 2
        room_row = await stack.scalar(select(Room).where(Room.id == room))
        assert room_row.ceiling == 2 and room_row.length == ann.length
        assert (await stack.open_round(chat)) is not None
        assert await stack.all(select(Ban)) == []
        denied = await stack.all(select(AuditLog).where(AuditLog.allowed.is_(False)))
        assert sorted(a.action for a in denied) == ["ban", "endround", "limit", "pause", "settings"]
        assert {a.actor_tg_id for a in denied} == {ALICE, DAVE}

        # The chat's administrator can.
        mid = say(chat, ADMIN, "/limit 3")
        assert await stack.reply_to(chat, mid) == texts.limit_set(EN, 3)
        view = (await stack.lanes.snapshot(room))["rooms"][room]
        assert view["ceiling"] == 3
        assert (await stack.scalar(select(Room.ceiling).where(Room.id == room))) == 3

        # An anonymous admin (posting as the group) can: the room's scoring stops.
        mid = stack.standin.send_as_anonymous_admin(chat, "/pause")
        assert await stack.reply_to(chat, mid) == texts.paused(EN)
        waiting = say(chat, DAVE, guess)
        await stack.settle()
        view = (await stack.lanes.snapshot(room))["rooms"][room]
        assert view["paused"] is True and view["pending"] == 1
        assert await stack.guess_count() == 1

        # An operator from the settings (not an administrator of the chat) can: the kept
        # guess is scored and answered.
        assert OPERATOR in stack.settings.operator_ids
        mid = say(chat, OPERATOR, "/resume")
        assert await stack.reply_to(chat, mid) == texts.resumed(EN)
        await stack.result(chat, waiting, "Dave", guess)
        assert await stack.guess_count() == 2

        mid = say(chat, OPERATOR, "/endround")
        reveal = texts.ended_by_admin(EN, rnd.secret_emojis)
        await stack.standin.wait_for_sent(lambda m: m.text == reveal, 15, chat_id=chat)

        async def closed() -> bool:
            ended = await stack.scalar(select(Round.end_reason).where(Round.id == rnd.id))
            return bool(ended == "endround")

        await eventually(closed, timeout=5, what="round closed by /endround")

    allowed = await stack.all(select(AuditLog).where(AuditLog.allowed.is_(True)))
    assert sorted((a.action, a.actor_tg_id) for a in allowed) == sorted(
        [("limit", ADMIN), ("pause", chat), ("resume", OPERATOR), ("endround", OPERATOR)]
    )
    assert len(await stack.all(select(Guess))) == 2
