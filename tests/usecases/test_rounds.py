"""usecases.rounds and usecases.settings over the store's parts (`db/store/rounds.py`,
`db/store/rooms.py`): what the game drew and said is written with the round in one
transaction, and a refusal writes nothing."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import scoring, usecases
from codemojex.db import Outbox, Round, store
from codemojex.db.engine import Sessions
from codemojex.db.store import rounds as rounds_store
from codemojex.game import taps
from codemojex.values.clock import utcnow
from codemojex.values.types import ENDROUND, KIND_KEYS_OFF, KIND_REVEAL, KIND_ROUND, TIMEOUT
from tests.db.helpers import new_room


async def _outbox(session: AsyncSession) -> list[tuple[str, int | None, str | None]]:
    rows = (await session.execute(select(Outbox.kind, Outbox.round_id, Outbox.markup))).all()
    await session.commit()
    return [(k, r, m) for k, r, m in rows]


async def test_a_round_starts_with_its_announcement_and_keyboard(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room_id = (await new_room(sessions)).id
    rnd = await usecases.start_round(sessions, room_id, rng)
    assert await _outbox(session) == [
        (KIND_ROUND, rnd.id, taps.keyboard(rnd.id, rnd.palette_emojis))
    ]
    with pytest.raises(store.RoundAlreadyOpen):
        await usecases.start_round(sessions, room_id, rng)
    with pytest.raises(store.UnknownRoom):
        await usecases.start_round(sessions, "ROM00000000000000000000000000", rng)
    assert len(await _outbox(session)) == 1  # the refusals wrote nothing
    assert (await store.open_round(session, room_id)) is not None


async def test_ending_a_round_reveals_it_once(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room = await new_room(sessions)
    rnd = await usecases.start_round(sessions, room.id, rng)
    closed = await usecases.close_round(sessions, rnd.id, ENDROUND)
    assert closed is not None and closed.end_reason == ENDROUND
    assert await usecases.close_round(sessions, rnd.id, ENDROUND) is None
    kinds = [k for k, _, _ in await _outbox(session)]
    assert kinds == [KIND_ROUND, KIND_REVEAL, KIND_KEYS_OFF]
    with pytest.raises(ValueError):
        await usecases.close_round(sessions, rnd.id, "")


async def test_only_due_rounds_expire(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    now = utcnow()
    due = await usecases.start_round(sessions, (await new_room(sessions, -1)).id, rng, now=now)
    later = await usecases.start_round(
        sessions, (await new_room(sessions, -2)).id, rng, now=now + timedelta(seconds=300)
    )
    at = due.expires_at + timedelta(seconds=1)
    assert await rounds_store.due_round_ids(session, at) == [due.id]
    assert await rounds_store.due_round_ids(session, at, only=[later.id]) == []
    assert await rounds_store.due_round_ids(session, at, only=[]) == []
    await session.commit()
    assert [r.id for r in await usecases.expire_rounds(sessions, at)] == [due.id]
    assert await usecases.expire_rounds(sessions, at) == []  # idempotent
    ended = (await session.execute(select(Round.id, Round.end_reason))).all()
    await session.commit()
    assert dict(ended) == {due.id: TIMEOUT, later.id: None}


async def test_settings_are_checked_before_the_room_is_touched(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    room_id, before = room.id, (room.length, room.repeats, room.ceiling)
    with pytest.raises(store.SettingOutOfRange):
        await usecases.update_room_settings(sessions, room_id, length=5, ceiling=10_000)
    with pytest.raises(scoring.InvalidSettings):
        # drawable only with repeats: four emojis for a code of five
        await usecases.update_room_settings(
            sessions, room_id, length=5, palette="🍎🍌🍇🍒", repeats=False
        )
    fresh = await store.get_room(session, room_id)
    assert fresh is not None and (fresh.length, fresh.repeats, fresh.ceiling) == before
    changed = await usecases.update_room_settings(sessions, room_id, length=5, ceiling=3)
    assert (changed.length, changed.ceiling) == (5, 3)
    # the session's transaction is over: another one may lock the room at once
    assert (await session.scalar(select(func.count()).select_from(Round))) == 0
    await session.commit()
