"""record_guesses: many guesses of many rooms in one transaction, decided exactly as if they
had been recorded one by one, on the real Postgres."""

from __future__ import annotations

import asyncio
import random

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import scoring, usecases
from codemojex.db import Guess, LeaderboardEntry, Outbox, Round
from codemojex.values.batch import Attempt, Verdict
from tests.db.helpers import job_id, new_room, wrong_guess


async def _count(s: AsyncSession, model: type, *where: object) -> int:
    stmt = select(func.count()).select_from(model).where(*where)  # type: ignore[arg-type]
    return int((await s.execute(stmt)).scalar_one())


async def test_a_batch_is_decided_in_order_like_one_guess_at_a_time(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    rng = random.Random(5)
    async with sessions() as s:
        room_a = await new_room(sessions, chat_id=-1, title="A")
        room_b = await new_room(sessions, chat_id=-2, title="B")
        ann = await usecases.ensure_player(sessions, room_a.id, 1, "Ann")
        bob = await usecases.ensure_player(sessions, room_a.id, 2, "Bob")
        cat = await usecases.ensure_player(sessions, room_b.id, 3, "Cat")
        round_a = await usecases.start_round(sessions, room_a.id, rng)
        round_b = await usecases.start_round(sessions, room_b.id, rng)
    wrong_a = wrong_guess(round_a.secret_emojis, round_a.palette_emojis)
    wrong_b = wrong_guess(round_b.secret_emojis, round_b.palette_emojis)
    twice = job_id()

    def item(guess_id: str, rnd: Round, player_id: str, emojis: tuple[str, ...]) -> Attempt:
        return Attempt(guess_id, rnd.id, player_id, rnd.room_id, emojis, 7)

    items = [
        item(job_id(), round_a, ann.id, wrong_a),  # Ann's 1st
        item(job_id(), round_b, cat.id, wrong_b),  # Cat's 1st, another room
        item(twice, round_a, ann.id, wrong_a),  # Ann's 2nd
        item(twice, round_a, ann.id, wrong_a),  # the same job again: nothing new
        item(job_id(), round_a, bob.id, round_a.secret_emojis),  # Bob wins on his 1st
        item(job_id(), round_a, ann.id, round_a.secret_emojis),  # too late for Ann
        item(job_id(), round_a, cat.id, wrong_a),  # Cat is not in room A (a forged lane)
        item(job_id(), round_b, cat.id, ("x",) * round_b.length),  # not the palette
        Attempt(job_id(), 10**9, cat.id, room_b.id, wrong_b, None),  # no such round
        Attempt(job_id(), round_b.id, cat.id, room_a.id, wrong_b, None),  # forged
        item(job_id(), round_b, cat.id, round_b.secret_emojis),  # Cat wins B on her 2nd
    ]
    async with sessions() as s:
        results = await usecases.record_guesses(sessions, items)

    kinds = [r.kind for r in results]
    assert [r.attempt_no for r in results] == [1, 1, 2, 2, 1, None] + [None] * 4 + [2]
    assert kinds[6:10] == ["unknown_player", "mismatch", "unknown_round", "unknown_round"]
    _, _, second, again, bob_wins, late, *_, cat_wins = results
    assert second.kind == "scored" and not second.duplicate
    assert again.duplicate and again.attempt_no == 2
    assert bob_wins.kind == "scored" and bob_wins.won
    assert bob_wins.points == scoring.points_for(1)
    assert late.kind == "late" and late.late and not late.won
    assert cat_wins.kind == "scored" and cat_wins.won
    assert cat_wins.points == scoring.points_for(2)

    async with sessions() as s:
        assert await _count(s, Guess) == 6  # 11 items - 1 repeat - 4 refused
        assert await _count(s, Guess, Guess.late.is_(True)) == 1
        closed_a = await s.get(Round, round_a.id)
        closed_b = await s.get(Round, round_b.id)
        assert closed_a is not None and closed_a.winner_player_id == bob.id
        assert closed_b is not None and closed_b.winner_player_id == cat.id
        board = {
            e.player_id: (e.points, e.wins, e.guesses, e.best_solve)
            for e in (await s.execute(select(LeaderboardEntry))).scalars()
        }
        assert board == {
            ann.id: (0, 0, 2, None),
            bob.id: (scoring.points_for(1), 1, 1, 1),
            cat.id: (scoring.points_for(2), 1, 2, 2),
        }
        # One result row per new guess (the late one answered "already solved"), one win each.
        assert await _count(s, Outbox, Outbox.kind == "result") == 5
        assert await _count(s, Outbox, Outbox.kind == "late") == 1
        assert await _count(s, Outbox, Outbox.kind == "win") == 2

    # Delivered again as a whole: every recorded guess is a duplicate, nothing changes.
    async with sessions() as s:
        again_all = await usecases.record_guesses(sessions, items)
    for before, after in zip(results, again_all, strict=True):
        if not before.refused:
            assert after.duplicate
            assert (after.exact, after.attempt_no, after.won) == (
                before.exact,
                before.attempt_no,
                before.won,
            )
        else:
            assert after.kind == before.kind
    async with sessions() as s:
        assert await _count(s, Guess) == 6
        assert await _count(s, Outbox, Outbox.kind.not_in(("round", "keys_off"))) == 8


async def test_overlapping_batches_race_to_one_winner_per_round_without_deadlock(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """Four workers each record one batch touching every room (rounds listed in different
    orders): no deadlock, one winner per round, every guess stored exactly once."""
    rng = random.Random(8)
    rooms = []
    async with sessions() as s:
        for n in range(6):
            room = await new_room(sessions, chat_id=-100 - n, title=f"R{n}")
            players = [
                await usecases.ensure_player(sessions, room.id, 10 * n + k, f"P{k}")
                for k in range(4)
            ]
            rnd = await usecases.start_round(sessions, room.id, rng)
            rooms.append((rnd, players))

    batches: list[list[Attempt]] = []
    for worker in range(4):
        batch = [
            Attempt(job_id(), rnd.id, players[worker].id, rnd.room_id, rnd.secret_emojis, None)
            for rnd, players in rooms
        ]
        random.Random(worker).shuffle(batch)
        batches.append(batch)

    async def record(batch: list[Attempt]) -> list[Verdict]:
        return await usecases.record_guesses(sessions, batch)

    results = await asyncio.wait_for(asyncio.gather(*(record(b) for b in batches)), 60)
    flat = [r for batch in results for r in batch]
    assert all(r.kind in ("scored", "late") for r in flat)
    assert sum(r.won for r in flat) == len(rooms)
    async with sessions() as s:
        assert await _count(s, Guess) == 4 * len(rooms)
        assert await _count(s, Outbox, Outbox.kind == "win") == len(rooms)
        for rnd, _players in rooms:
            closed = await s.get(Round, rnd.id)
            assert closed is not None and closed.winning_guess_id is not None
