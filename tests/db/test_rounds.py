"""Starting, closing and expiring rounds."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import scoring, usecases
from codemojex.db import Outbox, Round, store
from codemojex.db.engine import Sessions
from codemojex.values.types import ENDROUND, KIND_KEYS_OFF
from tests.db.helpers import new_room
from tests.helpers import writes

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


async def test_start_round_draws_from_a_seeded_rng(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    rnd = await usecases.start_round(sessions, room.id, random.Random(7), now=T0)

    palette = scoring.draw_palette(random.Random(7), scoring.DEFAULT_PALETTE_SIZE)
    expect_rng = random.Random(7)
    scoring.draw_palette(expect_rng, scoring.DEFAULT_PALETTE_SIZE)
    secret = scoring.draw_secret(expect_rng, palette, scoring.DEFAULT_LENGTH)

    assert rnd.palette_emojis == palette
    assert rnd.secret_emojis == secret
    assert rnd.length == scoring.DEFAULT_LENGTH
    assert rnd.started_at == T0
    assert rnd.expires_at == T0 + timedelta(seconds=600)
    assert rnd.is_open
    rows = list((await session.execute(select(Outbox))).scalars())
    assert [(r.kind, r.round_id, r.chat_id) for r in rows] == [("round", rnd.id, room.chat_id)]
    assert all(e in rows[0].text for e in palette)
    assert rnd.secret not in rows[0].text or len(set(secret)) == 1


async def test_round_repr_never_shows_the_secret(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room = await new_room(sessions)
    rnd = await usecases.start_round(sessions, room.id, rng)
    for emoji in set(rnd.secret_emojis):
        assert emoji not in repr(rnd)
        assert emoji not in str(rnd)


async def test_start_round_uses_room_settings(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room = await new_room(sessions)
    await usecases.update_room_settings(sessions, room.id, length=5, palette="🍎🍌🍇🍒")
    rnd = await usecases.start_round(sessions, room.id, rng)
    assert rnd.length == 5
    assert rnd.palette_emojis == ("🍎", "🍌", "🍇", "🍒")
    assert len(rnd.secret_emojis) == 5
    assert set(rnd.secret_emojis) <= set(rnd.palette_emojis)


async def test_second_round_is_refused_while_one_is_open(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room_id = (await new_room(sessions)).id
    first = await usecases.start_round(sessions, room_id, rng)
    first_id, secret = first.id, first.secret  # (the refusal's rollback expires them)
    with pytest.raises(store.RoundAlreadyOpen) as caught:
        await usecases.start_round(sessions, room_id, rng)
    assert caught.value.round_id == first_id
    assert secret not in str(caught.value)
    # Refused means unchanged: still one round, one announcement.
    assert (await session.execute(select(func.count(Round.id)))).scalar_one() == 1
    assert (await session.execute(select(func.count(Outbox.id)))).scalar_one() == 1
    await session.commit()
    # Once closed, a new one may start.
    assert await usecases.close_round(sessions, first_id, ENDROUND) is not None
    second = await usecases.start_round(sessions, room_id, rng)
    assert second.id != first_id


async def test_two_rooms_each_have_their_round(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    a = await new_room(sessions, chat_id=-1)
    b = await new_room(sessions, chat_id=-2)
    ra = await usecases.start_round(sessions, a.id, rng)
    rb = await usecases.start_round(sessions, b.id, rng)
    assert (await store.open_round(session, a.id)).id == ra.id  # type: ignore[union-attr]
    assert (await store.open_round(session, b.id)).id == rb.id  # type: ignore[union-attr]


async def test_database_refuses_a_second_open_round_even_bypassing_the_code(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    from sqlalchemy.exc import IntegrityError

    room = await new_room(sessions)
    await usecases.start_round(sessions, room.id, rng)
    session.add(
        Round(room_id=room.id, secret="🍎🍎🍎🍎", palette="🍎🍌🍇🍒", length=4, expires_at=T0)
    )
    with pytest.raises(IntegrityError) as caught:
        await session.commit()
    await session.rollback()
    # Statement parameters (here a secret) stay out of error messages.
    assert "🍎🍎🍎🍎" not in str(caught.value)


async def test_concurrent_start_round_opens_exactly_one(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with sessions() as s:
        room = await new_room(sessions)

    async def attempt(seed: int) -> int | None:
        try:
            return (await usecases.start_round(sessions, room.id, random.Random(seed))).id
        except store.RoundAlreadyOpen:
            return None

    for repeat in range(5):
        started = await asyncio.gather(*(attempt(seed) for seed in range(8)))
        opened = [r for r in started if r is not None]
        assert len(opened) == 1, started
        async with sessions() as s:
            open_now = (
                await s.execute(
                    select(func.count(Round.id)).where(
                        Round.room_id == room.id, Round.ended_at.is_(None)
                    )
                )
            ).scalar_one()
            announcements = (
                await s.execute(select(func.count(Outbox.id)).where(Outbox.kind == "round"))
            ).scalar_one()
            assert open_now == 1
            assert announcements == repeat + 1
            await usecases.close_round(sessions, opened[0], ENDROUND)


async def test_close_round_reveals_once(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room = await new_room(sessions)
    rnd = await usecases.start_round(sessions, room.id, rng)
    closed = await usecases.close_round(sessions, rnd.id, ENDROUND, now=T0)
    assert closed is not None
    assert closed.ended_at == T0
    assert closed.end_reason == "endround"
    assert closed.winner_player_id is None
    assert await usecases.close_round(sessions, rnd.id, ENDROUND) is None
    assert await usecases.close_round(sessions, 999_999, ENDROUND) is None
    reveals = list((await session.execute(select(Outbox).where(Outbox.kind == "reveal"))).scalars())
    assert len(reveals) == 1
    assert rnd.secret in reveals[0].text
    assert await store.open_round(session, room.id) is None


async def test_expire_rounds_closes_only_overdue_rounds(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    early = await new_room(sessions, chat_id=-10)
    late = await new_room(sessions, chat_id=-20)
    await usecases.update_room_settings(sessions, late.id, round_timeout_s=3600)
    r_early = await usecases.start_round(sessions, early.id, rng, now=T0)
    r_late = await usecases.start_round(sessions, late.id, rng, now=T0)

    assert await usecases.expire_rounds(sessions, T0 + timedelta(seconds=599)) == []
    expired = await usecases.expire_rounds(sessions, T0 + timedelta(seconds=600))
    assert [r.id for r in expired] == [r_early.id]
    assert expired[0].end_reason == "timeout"
    # Idempotent: nothing more to expire at the same time.
    assert await usecases.expire_rounds(sessions, T0 + timedelta(seconds=601)) == []
    still = await session.get(Round, r_late.id, populate_existing=True)
    assert still is not None and still.is_open
    expired = await usecases.expire_rounds(sessions, T0 + timedelta(hours=2))
    assert [r.id for r in expired] == [r_late.id]
    reveals = (
        await session.execute(select(func.count(Outbox.id)).where(Outbox.kind == "reveal"))
    ).scalar_one()
    assert reveals == 2


async def test_announcement_sent_becomes_the_round_message(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    room = await new_room(sessions)
    rnd = await usecases.start_round(sessions, room.id, rng)
    [row] = await store.pending_outbox(session, 10)
    assert await writes.mark_sent(sessions, [row.id], 4242) == 1
    announced = await session.get(Round, rnd.id, populate_existing=True)
    assert announced is not None and announced.announce_message_id == 4242


async def test_start_round_in_unknown_room(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    with pytest.raises(store.UnknownRoom):
        await usecases.start_round(sessions, "ROM00000000000000000000000000", rng)


async def test_announcements_marked_together_each_become_their_rounds_message(
    sessions: Sessions, rng: random.Random
) -> None:
    """The sender's marks of many posts at once (`mark_sent_many`, one statement on
    Postgres): each row gets its own post's message id, an announcement's becomes its
    round's, a row already sent keeps its first mark, and a round's keyboard row then points
    at its announcement."""
    await _announcements_marked_together(sessions, rng)


async def test_announcements_marked_together_on_sqlite(
    sqlite_sessions: Sessions, rng: random.Random
) -> None:
    """The same on SQLite (a statement per post there: the embedded demo)."""
    await _announcements_marked_together(sqlite_sessions, rng)


async def _announcements_marked_together(db: Sessions, rng: random.Random) -> None:
    rooms = [await new_room(db, chat_id=-70 - i) for i in range(3)]
    rounds = [await usecases.start_round(db, room.id, rng) for room in rooms]
    async with db() as s:
        announcement = {r.chat_id: r.id for r in await store.pending_outbox(s, 10)}
    first, second, third = (announcement[room.chat_id] for room in rooms)
    assert await writes.mark_sent(db, [third], 300) == 1
    marks = [([first], 100), ([second], 200), ([third], 301)]
    assert await writes.mark_sent_many(db, marks) == 2
    assert await writes.mark_sent_many(db, marks) == 0
    async with db() as s:
        ids = {r.id: await s.get(Round, r.id, populate_existing=True) for r in rounds}
        sent = {o.id: o.sent_message_id for o in (await s.execute(select(Outbox))).scalars()}
    assert [ids[r.id].announce_message_id for r in rounds] == [100, 200, 300]  # type: ignore[union-attr]
    assert (sent[first], sent[second], sent[third]) == (100, 200, 300)
    # A round closed now: its keyboard comes off its announcement.
    await usecases.close_round(db, rounds[0].id, ENDROUND)
    async with db() as s:
        pending = await store.pending_outbox(s, 10)
    assert [r.reply_to_message_id for r in pending if r.kind == KIND_KEYS_OFF] == [100]
