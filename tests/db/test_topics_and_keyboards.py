"""Rooms per forum topic and the round keyboard's rows, on Postgres through the migrations."""

from __future__ import annotations

import json
import random

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import usecases
from codemojex.db import Outbox, Round, store
from codemojex.db.engine import Sessions
from codemojex.game import taps
from codemojex.values.types import ENDROUND, KIND_KEYS_OFF, KIND_ROUND
from tests.db.helpers import attempt, new_room, record_one
from tests.helpers import writes

CHAT = -100_777


async def _rows(session: AsyncSession) -> list[Outbox]:
    stmt = select(Outbox).order_by(Outbox.id).execution_options(populate_existing=True)
    rows = list((await session.execute(stmt)).scalars())
    await session.commit()
    return rows


async def test_each_topic_of_a_forum_is_a_room_of_its_own(
    session: AsyncSession, sessions: Sessions
) -> None:
    general = await new_room(sessions, CHAT)
    puzzles = await usecases.ensure_room(
        sessions, CHAT, "Forum", default_ceiling=2, round_timeout_s=600, thread_id=42
    )
    again = await usecases.ensure_room(
        sessions, CHAT, "Forum", default_ceiling=2, round_timeout_s=600, thread_id=42
    )
    assert general.thread_id == 0 and puzzles.thread_id == 42
    assert again.id == puzzles.id != general.id
    assert (await store.room_by_chat(session, CHAT, 42)).id == puzzles.id  # type: ignore[union-attr]
    assert (await store.room_by_chat(session, CHAT)).id == general.id  # type: ignore[union-attr]
    assert await store.room_by_chat(session, CHAT, 43) is None

    # Both rooms run a round at once; the topic's posts carry its thread.
    rng = random.Random(3)
    first = await usecases.start_round(sessions, general.id, rng)
    second = await usecases.start_round(sessions, puzzles.id, rng)
    card = await store.room_card(session, puzzles.id)
    assert card is not None and card.open_round is not None and card.open_round.id == second.id
    rows = await _rows(session)
    assert [(r.kind, r.round_id, r.thread_id) for r in rows] == [
        (KIND_ROUND, first.id, None),
        (KIND_ROUND, second.id, 42),
    ]
    # Each announcement carries its round's keyboard: palette buttons, then ⌫ and ✖.
    keyboard = json.loads(rows[1].markup or "")["inline_keyboard"]
    buttons = [b for row in keyboard for b in row]
    assert [b["text"] for b in buttons] == [*second.palette_emojis, "⌫", "✖"]
    parsed = [taps.parse_tap(b["callback_data"]) for b in buttons]
    assert all(t is not None and t.round_id == second.id for t in parsed)
    assert all(len(b["callback_data"].encode()) <= 64 for b in buttons)

    # A win in the topic is posted in the topic.
    player = await usecases.ensure_player(sessions, puzzles.id, 5, "Ann")
    verdict = await record_one(sessions, attempt(second, player.id, second.secret_emojis))
    assert verdict.won
    after = (await _rows(session))[2:]
    assert [r.kind for r in after] == ["result", "win", KIND_KEYS_OFF]
    assert [r.thread_id for r in after] == [42, 42, None]


async def test_keys_off_points_at_the_announcement_whichever_comes_first(
    session: AsyncSession,
    sessions: Sessions,
) -> None:
    room = await new_room(sessions, CHAT)
    rng = random.Random(5)

    # Posted first, then closed: the row is written with the announcement's id.
    rnd = await usecases.start_round(sessions, room.id, rng)
    (announcement,) = await _rows(session)
    await writes.mark_sent(sessions, [announcement.id], 501)
    await usecases.close_round(sessions, rnd.id, ENDROUND)
    keys_off = [r for r in await _rows(session) if r.kind == KIND_KEYS_OFF]
    assert [(k.round_id, k.reply_to_message_id) for k in keys_off] == [(rnd.id, 501)]

    # Closed before the announcement went out: marking it sent fills the id in.
    rnd2 = await usecases.start_round(sessions, room.id, rng)
    announcement2 = next(r for r in await _rows(session) if r.round_id == rnd2.id)
    await usecases.close_round(sessions, rnd2.id, ENDROUND)
    pending = [r for r in await _rows(session) if r.round_id == rnd2.id]
    assert [(r.kind, r.reply_to_message_id) for r in pending[-1:]] == [(KIND_KEYS_OFF, None)]
    await writes.mark_sent(sessions, [announcement2.id], 777)
    rows = [r for r in await _rows(session) if r.round_id == rnd2.id]
    assert [(r.kind, r.reply_to_message_id) for r in rows if r.kind == KIND_KEYS_OFF] == [
        (KIND_KEYS_OFF, 777)
    ]
    fresh = select(Round).where(Round.id == rnd2.id).execution_options(populate_existing=True)
    stored = (await session.execute(fresh)).scalar_one()
    assert stored.announce_message_id == 777


async def test_keys_off_waits_for_its_announcement_to_be_posted(
    session: AsyncSession, sessions: Sessions
) -> None:
    """A round closed before its announcement went out: while the announcement is unsent (held
    by a sender that died, or in the same claim) its keys_off row is not handed out, so it
    cannot edit nothing and be marked done with the keyboard still up."""
    room = await new_room(sessions, CHAT)
    rnd = await usecases.start_round(sessions, room.id, random.Random(7))
    await usecases.close_round(sessions, rnd.id, ENDROUND)
    rows = [r for r in await _rows(session) if r.round_id == rnd.id]
    (announcement,) = [r for r in rows if r.kind == KIND_ROUND]
    (keys_off,) = [r for r in rows if r.kind == KIND_KEYS_OFF]

    claimed = await writes.claim_outbox(sessions, 10, 30, "sender-a", chat_id=CHAT)
    assert announcement.id in {r.id for r in claimed}
    assert keys_off.id not in {r.id for r in claimed}
    # sender-a dies holding the announcement: the keys_off row is not anyone's to post yet.
    assert await writes.claim_outbox(sessions, 10, 30, "sender-b", chat_id=CHAT) == []
    await writes.mark_sent(sessions, [announcement.id], 901)
    (later,) = await writes.claim_outbox(sessions, 10, 30, "sender-b", chat_id=CHAT)
    assert (later.id, later.reply_to_message_id) == (keys_off.id, 901)


async def test_keys_off_of_an_announcement_refused_for_good_is_claimed(
    session: AsyncSession,
    sessions: Sessions,
) -> None:
    """The announcement could not be posted (the chat refused it): its keys_off row has
    nothing to edit, and is handed out to be marked done rather than left pending."""
    room = await new_room(sessions, CHAT)
    rnd = await usecases.start_round(sessions, room.id, random.Random(8))
    await usecases.close_round(sessions, rnd.id, ENDROUND)
    rows = [r for r in await _rows(session) if r.round_id == rnd.id]
    (announcement,) = [r for r in rows if r.kind == KIND_ROUND]
    (keys_off,) = [r for r in rows if r.kind == KIND_KEYS_OFF]
    await writes.mark_sent(sessions, [announcement.id], None)
    claimed = await writes.claim_outbox(sessions, 10, 30, "sender", chat_id=CHAT)
    assert [(r.id, r.reply_to_message_id) for r in claimed if r.kind == KIND_KEYS_OFF] == [
        (keys_off.id, None)
    ]
