"""The repeats setting in the store: a room with repeats off draws secrets without a repeated
emoji, and a room can never be set to repeats off with a palette shorter than its length."""

from __future__ import annotations

import asyncio
import random

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import scoring, usecases
from codemojex.db import Outbox, Room, store
from codemojex.db.engine import Sessions
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.scoring.emoji import key
from codemojex.values.types import ENDROUND, KIND_ROUND
from tests.db.helpers import new_room

ROUNDS = 150
TOO_FEW = (
    "With repeats off, the palette needs at least as many emojis as the code: "
    "4 emojis are too few for a code of 5."
)


async def _play_rounds(sessions: Sessions, room: Room, seeds: range) -> list[tuple[str, ...]]:
    """A round per seed (each ended before the next), their secrets in order."""
    secrets = []
    for seed in seeds:
        rnd = await usecases.start_round(sessions, room.id, random.Random(seed))
        assert rnd.repeats is room.repeats
        assert rnd.length == room.length and len(rnd.secret_emojis) == room.length
        assert set(rnd.secret_emojis) <= set(rnd.palette_emojis)
        secrets.append(rnd.secret_emojis)
        assert await usecases.close_round(sessions, rnd.id, ENDROUND) is not None
    return secrets


async def _settings(session: AsyncSession, room_id: str) -> tuple[int, str | None, bool]:
    room = await store.get_room(session, room_id)
    assert room is not None
    return room.length, room.palette, room.repeats


async def test_rooms_and_rounds_allow_repeats_by_default(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room = await new_room(sessions)
    assert room.repeats is True
    rnd = await usecases.start_round(sessions, room.id, rng)
    assert rnd.repeats is True
    announcement = (await session.execute(select(Outbox.text))).scalar_one()
    assert "(emojis may repeat)" in announcement
    # With repeats allowed, the same seeds do repeat emojis now and then: the distinctness
    # below is the setting's doing, not the seeds'.
    await usecases.close_round(sessions, rnd.id, ENDROUND)
    room = await usecases.update_room_settings(sessions, room.id, length=6, palette="🍎🍌🍇🍒🍋🥝")
    secrets = await _play_rounds(sessions, room, range(ROUNDS))
    assert any(len(set(secret)) < len(secret) for secret in secrets)


@pytest.mark.parametrize(
    ("length", "palette"),
    [
        (6, "🍎🍌🍇🍒🍋🥝"),  # every secret is a permutation of the palette
        (4, "🍎🍌🍇🍒"),
        (5, "🐶🐱🐭🐰🦊🐻🐼🐨🐯🦁"),
        (6, None),  # a fresh palette of 6 per round
    ],
)
async def test_repeats_off_draws_secrets_with_distinct_emojis(
    session: AsyncSession, sessions: Sessions, length: int, palette: str | None
) -> None:
    room = await new_room(sessions)
    room = await usecases.update_room_settings(
        sessions, room.id, length=length, palette=palette, repeats="off"
    )
    assert (room.length, room.repeats) == (length, False)
    secrets = await _play_rounds(sessions, room, range(ROUNDS))
    for secret in secrets:
        assert len(secret) == length
        assert len({key(e) for e in secret}) == length, secret
    assert len(set(secrets)) >= 20  # drawn, not one fixed code (4 of 4 has 24 orders)
    announcements = list(
        (await session.execute(select(Outbox.text).where(Outbox.kind == KIND_ROUND)))
        .scalars()
        .all()
    )
    assert len(announcements) == ROUNDS
    assert all("(no emoji repeats)" in text for text in announcements)


async def test_a_round_keeps_the_repeats_it_started_with(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room = await new_room(sessions)
    running = await usecases.start_round(sessions, room.id, rng)
    await usecases.update_room_settings(sessions, room.id, repeats=False)
    still = await store.open_round(session, room.id)
    assert still is not None and still.id == running.id and still.repeats is True
    await usecases.close_round(sessions, running.id, ENDROUND)
    following = await usecases.start_round(sessions, room.id, rng)
    assert following.repeats is False
    assert texts.round_started(
        EN, following.palette_emojis, following.length, 600, repeats=False
    ) in list((await session.execute(select(Outbox.text))).scalars())
    back = await usecases.update_room_settings(sessions, room.id, repeats="ON")
    assert back.repeats is True


async def test_repeats_off_with_a_short_palette_is_refused_whichever_setting_changes(
    session: AsyncSession,
    sessions: Sessions,
) -> None:
    # (a refusal rolls its unit back, which expires what the session holds: ids are kept)
    room_id = (await new_room(sessions)).id
    # Length 5 over four emojis is fine while emojis may repeat ...
    await usecases.update_room_settings(sessions, room_id, length=5, palette="🍎🍌🍇🍒")
    # ... but not with repeats off: changing repeats alone is refused,
    attempts: list[tuple[dict[str, object], tuple[int, str | None, bool]]] = [
        ({"repeats": False}, (5, "🍎🍌🍇🍒", True)),
        ({"repeats": "no"}, (5, "🍎🍌🍇🍒", True)),
        ({"repeats": False, "ceiling": 5}, (5, "🍎🍌🍇🍒", True)),  # all or nothing
    ]
    for kwargs, before in attempts:
        with pytest.raises(scoring.InvalidSettings) as info:
            await usecases.update_room_settings(sessions, room_id, **kwargs)  # type: ignore[arg-type]
        assert info.value.kind == "repeats_palette"
        assert texts.settings_refused(EN, info.value) == TOO_FEW
        assert await _settings(session, room_id) == before
    assert (await store.get_room(session, room_id)).ceiling == 2  # type: ignore[union-attr]

    # With repeats off and four emojis (length 4), a longer code is refused,
    await usecases.update_room_settings(sessions, room_id, length=4, repeats=False)
    assert await _settings(session, room_id) == (4, "🍎🍌🍇🍒", False)
    with pytest.raises(scoring.InvalidSettings) as info:
        await usecases.update_room_settings(sessions, room_id, length=5)
    assert texts.settings_refused(EN, info.value) == TOO_FEW
    assert await _settings(session, room_id) == (4, "🍎🍌🍇🍒", False)
    # ... and with a code of 5 over five emojis, a palette of four is refused.
    await usecases.update_room_settings(sessions, room_id, length=5, palette="🍎🍌🍇🍒🍋")
    with pytest.raises(scoring.InvalidSettings) as info:
        await usecases.update_room_settings(sessions, room_id, palette="🍎 🍌 🍇 🍒")
    assert texts.settings_refused(EN, info.value) == TOO_FEW
    # All three at once, too.
    with pytest.raises(scoring.InvalidSettings) as info:
        await usecases.update_room_settings(
            sessions, room_id, length=6, palette="🐶🐱🐭🐰🦊", repeats=False
        )
    assert info.value.kind == "repeats_palette"
    assert await _settings(session, room_id) == (5, "🍎🍌🍇🍒🍋", False)

    # What can be drawn is accepted: repeats back on, then a short palette; a palette of 6
    # holds a code of 6 without repeats.
    await usecases.update_room_settings(sessions, room_id, repeats=True, palette="🍎🍌🍇🍒")
    fresh = await usecases.update_room_settings(
        sessions, room_id, palette="🐶🐱🐭🐰🦊🐻", length=6, repeats=False
    )
    assert (fresh.length, fresh.palette, fresh.repeats) == (6, "🐶🐱🐭🐰🦊🐻", False)
    # Refusals are values the parser would also refuse.
    with pytest.raises(scoring.InvalidSettings) as info:
        await usecases.update_room_settings(sessions, room_id, repeats="maybe")
    assert info.value.kind == "repeats_value"
    assert await _settings(session, room_id) == (6, "🐶🐱🐭🐰🦊🐻", False)


async def test_a_refusal_leaves_no_lock_behind(sessions: async_sessionmaker[AsyncSession]) -> None:
    room_id = (await new_room(sessions)).id
    await usecases.update_room_settings(sessions, room_id, length=5, palette="🍎🍌🍇🍒")
    with pytest.raises(scoring.InvalidSettings):
        await usecases.update_room_settings(sessions, room_id, repeats=False)
    # The refused call's row lock is gone: the next change is made at once.
    changed = await asyncio.wait_for(
        usecases.update_room_settings(sessions, room_id, length=4, repeats=False), 5
    )
    assert (changed.length, changed.repeats) == (4, False)
