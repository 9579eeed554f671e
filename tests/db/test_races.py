"""Concurrency on the real Postgres: workers racing on one round, duplicate deliveries."""

from __future__ import annotations

import asyncio
import random

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import scoring, usecases
from codemojex.db import Guess, LeaderboardEntry, Outbox, Round
from codemojex.values.batch import Attempt, Verdict
from tests.db.helpers import job_id, new_room, record_one, wrong_guess

CHAT = -4242
REPEATS = 20


async def _record_in_own_session(
    sessions: async_sessionmaker[AsyncSession],
    *,
    guess_id: str,
    rnd: Round,
    player_id: str,
    emojis: tuple[str, ...],
) -> Verdict:
    return await record_one(
        sessions, Attempt(guess_id, rnd.id, player_id, rnd.room_id, emojis, reply_to=1)
    )


async def test_two_winning_guesses_at_once_make_one_winner(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    rng = random.Random(99)
    async with sessions() as s:
        room = await new_room(sessions, chat_id=CHAT)
        players = [
            await usecases.ensure_player(sessions, room.id, uid, f"P{uid}") for uid in (1, 2, 3)
        ]

    winners: list[str] = []
    for _ in range(REPEATS):
        async with sessions() as s:
            rnd = await usecases.start_round(sessions, room.id, rng)
        ids_by_player = {p.id: job_id() for p in players}
        results = await asyncio.gather(
            *(
                _record_in_own_session(
                    sessions,
                    guess_id=ids_by_player[p.id],
                    rnd=rnd,
                    player_id=p.id,
                    emojis=rnd.secret_emojis,
                )
                for p in players
            )
        )
        won = [r for r in results if r.won]
        assert len(won) == 1, results
        assert won[0].points == scoring.points_for(1)
        assert sum(r.late for r in results) == len(players) - 1
        assert all(r.round_closed and not r.duplicate for r in results)
        async with sessions() as s:
            closed = await s.get(Round, rnd.id)
            assert closed is not None and closed.end_reason == "solved"
            winner_guess = await s.get(Guess, closed.winning_guess_id)
            assert winner_guess is not None and winner_guess.player_id == closed.winner_player_id
            assert ids_by_player[closed.winner_player_id] == closed.winning_guess_id
            wins = (
                await s.execute(
                    select(func.count(Outbox.id)).where(
                        Outbox.round_id == rnd.id, Outbox.kind == "win"
                    )
                )
            ).scalar_one()
            assert wins == 1
            winners.append(closed.winner_player_id)

    async with sessions() as s:
        entries = {e.player_id: e for e in (await s.execute(select(LeaderboardEntry))).scalars()}
    # Points booked exactly once per round, to that round's winner.
    assert sum(e.wins for e in entries.values()) == REPEATS
    assert sum(e.points for e in entries.values()) == REPEATS * scoring.points_for(1)
    for pid, entry in entries.items():
        assert entry.wins == winners.count(pid)
        assert entry.guesses == winners.count(pid)  # late guesses are not counted


async def test_concurrent_duplicate_delivery_records_once(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    rng = random.Random(5)
    async with sessions() as s:
        room = await new_room(sessions, chat_id=CHAT)
        alice = await usecases.ensure_player(sessions, room.id, 1, "Alice")
        rnd = await usecases.start_round(sessions, room.id, rng)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    for _ in range(REPEATS):
        gid = job_id()
        results = await asyncio.gather(
            *(
                _record_in_own_session(
                    sessions, guess_id=gid, rnd=rnd, player_id=alice.id, emojis=miss
                )
                for _ in range(4)
            )
        )
        assert sorted(r.duplicate for r in results) == [False, True, True, True]
        assert len({(r.exact, r.misplaced, r.attempt_no) for r in results}) == 1
    async with sessions() as s:
        guesses = (await s.execute(select(func.count(Guess.id)))).scalar_one()
        rows = (
            await s.execute(select(func.count(Outbox.id)).where(Outbox.kind == "result"))
        ).scalar_one()
        attempts = sorted(a or 0 for a in (await s.execute(select(Guess.attempt_no))).scalars())
        entry = await s.get(LeaderboardEntry, (room.id, alice.id))
    assert guesses == rows == REPEATS
    assert attempts == list(range(1, REPEATS + 1))
    assert entry is not None and entry.guesses == REPEATS


async def test_duplicate_of_a_winner_racing_a_rival(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """The same winning job twice plus a rival's winning guess, all at once: one winner, the
    duplicate agrees with the original, one win announcement."""
    rng = random.Random(11)
    async with sessions() as s:
        room = await new_room(sessions, chat_id=CHAT)
        alice = await usecases.ensure_player(sessions, room.id, 1, "Alice")
        bob = await usecases.ensure_player(sessions, room.id, 2, "Bob")
    for _ in range(10):
        async with sessions() as s:
            rnd = await usecases.start_round(sessions, room.id, rng)
        a_id, b_id = job_id(), job_id()
        calls = [(a_id, alice.id), (a_id, alice.id), (b_id, bob.id)]
        results = await asyncio.gather(
            *(
                _record_in_own_session(
                    sessions, guess_id=g, rnd=rnd, player_id=p, emojis=rnd.secret_emojis
                )
                for g, p in calls
            )
        )
        a1, a2, b = results
        assert a1.won == a2.won
        assert a1.won != b.won
        assert sorted([a1.duplicate, a2.duplicate]) == [False, True]
        async with sessions() as s:
            wins = (
                await s.execute(
                    select(func.count(Outbox.id)).where(
                        Outbox.round_id == rnd.id, Outbox.kind == "win"
                    )
                )
            ).scalar_one()
        assert wins == 1
