"""The embedded default: the same migrations and use-cases on SQLite (aiosqlite, a temp file)."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import Guess, LeaderboardEntry, Outbox, Room, Round, store
from codemojex.db.reading import reading
from codemojex.values.batch import Verdict
from codemojex.values.types import ENDROUND
from tests.db.helpers import attempt, job_id, new_room, record_one, wrong_guess
from tests.helpers import writes

CHAT = -9


async def test_a_round_on_sqlite(sqlite_sessions: async_sessionmaker[AsyncSession]) -> None:
    db = sqlite_sessions
    room = await new_room(db, chat_id=CHAT)
    alice = await usecases.ensure_player(db, room.id, 1, "Alice")
    bob = await usecases.ensure_player(db, room.id, 2, "Bob")
    t0 = datetime.now(UTC)
    rnd = await usecases.start_round(db, room.id, random.Random(2), now=t0)
    assert rnd.started_at == t0  # aware UTC in, aware UTC out
    with pytest.raises(store.RoundAlreadyOpen):
        await usecases.start_round(db, room.id, random.Random(3))
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    gid = job_id()
    first = await record_one(db, attempt(rnd, alice.id, miss, guess_id=gid, reply_to=3))
    again = await record_one(db, attempt(rnd, alice.id, miss, guess_id=gid, reply_to=3))
    assert not first.duplicate and again.duplicate and again.attempt_no == 1

    # Two workers' winning guesses at once, each on its own connection.
    async def win(player_id: str) -> Verdict:
        return await record_one(db, attempt(rnd, player_id, rnd.secret_emojis))

    results = await asyncio.gather(win(alice.id), win(bob.id))
    assert sum(r.won for r in results) == 1
    assert sum(r.late for r in results) == 1

    async with reading(db) as s:
        assert (await s.execute(select(func.count(Guess.id)))).scalar_one() == 3
        wins = (await s.execute(select(func.count(Outbox.id)).where(Outbox.kind == "win"))).scalar()
        assert wins == 1
        board = await store.leaderboard(s, room.id)
        assert board[0].wins == 1 and board[0].points in (90, 100)
        points = sum(e.points for e in (await s.execute(select(LeaderboardEntry))).scalars())
        assert points in (90, 100)

    rnd2 = await usecases.start_round(db, room.id, random.Random(4), now=t0)
    expired = await usecases.expire_rounds(db, t0 + timedelta(seconds=600))
    assert [r.id for r in expired] == [rnd2.id]
    assert await usecases.close_round(db, rnd2.id, ENDROUND) is None

    assert await writes.ban(db, room.id, bob.id, actor=1)
    async with reading(db) as s:
        assert await store.is_banned(s, room.id, 2)
    await usecases.audit(db, room_id=room.id, actor_tg_id=1, action="ban", args="", allowed=True)

    claimed = await writes.claim_outbox(db, 100, 30, "sender")
    kinds = [r.kind for r in claimed]
    assert kinds.count("round") == 2 and kinds.count("win") == 1 and "reveal" in kinds
    assert await writes.claim_outbox(db, 100, 30, "other") == []
    assert await writes.mark_sent(db, [r.id for r in claimed], 10) == len(claimed)
    assert await writes.mark_sent(db, [r.id for r in claimed], 11) == 0
    # The closed rounds' keyboards come off once their announcements are posted.
    keys_off = await writes.claim_outbox(db, 100, 30, "other")
    assert [(r.kind, r.reply_to_message_id) for r in keys_off] == [("keys_off", 10)] * 2
    assert await writes.mark_sent(db, [r.id for r in keys_off], 12) == 2
    async with reading(db) as s:
        assert await store.pending_outbox(s, 10) == []
        announced = await s.get(Round, rnd.id)
        assert announced is not None and announced.announce_message_id == 10


async def test_concurrent_start_round_on_sqlite(
    sqlite_sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await new_room(sqlite_sessions, chat_id=CHAT)

    async def attempt(seed: int) -> bool:
        try:
            await usecases.start_round(sqlite_sessions, room.id, random.Random(seed))
        except store.RoundAlreadyOpen:
            return False
        return True

    assert sum(await asyncio.gather(*(attempt(i) for i in range(5)))) == 1


async def test_the_card_read_does_not_queue_behind_a_writer(
    sqlite_sessions: async_sessionmaker[AsyncSession],
) -> None:
    """Every transaction takes SQLite's write lock first (BEGIN IMMEDIATE), except one marked
    read-only: the bot's read of a room's card begins DEFERRED, so a worker's group commit
    holding the lock does not hold up the guesses the bot takes (WAL: it reads the last
    commit)."""
    room = await new_room(sqlite_sessions, chat_id=CHAT, title="Before")
    await usecases.ensure_player(sqlite_sessions, room.id, 1, "Alice")
    async with sqlite_sessions() as writer:
        await writer.execute(update(Room).where(Room.id == room.id).values(title="During"))
        async with reading(sqlite_sessions) as reader:
            # a writer's BEGIN IMMEDIATE would wait the busy timeout (30 s) here
            card = await asyncio.wait_for(store.room_card(reader, room.id), 5)
        assert card is not None and card.room.title == "Before" and 1 in card.seats
        await writer.rollback()
