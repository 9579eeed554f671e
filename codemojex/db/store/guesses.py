"""Recording guesses, many at once: load what the game needs under the rounds' locks, let
`codemojex.game.decide` decide, write the decision in bulk, in ONE transaction.

Why it is safe: the rounds of the batch are locked first (FOR NO KEY UPDATE, in id order, so two
workers recording overlapping batches never deadlock), so the guesses of one round are decided
one transaction after another and the first all-exact guess is its only winner; everything else
is read after the lock, so it includes what the previous holder wrote. The guess id (the lane
job id) is the primary key, so a re-delivered job finds its own row and changes nothing.

Why it is fast: the statements are few and do not grow with the batch (one lock, four lookups,
one insert or update per table), which is what lets the worker record every batch in hand at
once (group commit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import (
    Ban,
    Guess,
    LeaderboardEntry,
    Player,
    Room,
    Round,
    split_emojis,
    utcnow,
)
from codemojex.db.store.outbox import write_messages
from codemojex.game.decide import (
    Attempt,
    BatchState,
    Decision,
    PlayerState,
    RoundState,
    StoredGuess,
    Tally,
    Verdict,
    decide,
)
from codemojex.game.types import SOLVED
from codemojex.locale import resolve


async def record_guesses(
    session: AsyncSession, attempts: Sequence[Attempt], *, now: datetime | None = None
) -> list[Verdict]:
    """Decide and record a batch of guesses in ONE transaction, with their outbox rows and
    leaderboard changes: one verdict per attempt, in order (see `codemojex.game.decide`).
    Idempotent per guess id: recording a batch again changes nothing and reports duplicates."""
    if not attempts:
        return []
    now = now or utcnow()
    for attempt in (1, 2):
        try:
            decision = decide(attempts, await load_batch(session, attempts), now)
            await write_decision(session, decision)
            await session.commit()
            return decision.verdicts
        except IntegrityError:
            # A copy of one of these jobs, delivered twice at once, committed first; its round
            # lock has been released, so the second go finds it and reports a duplicate.
            await session.rollback()
            if attempt == 2:
                raise
        except BaseException:
            await session.rollback()
            raise
    raise AssertionError("unreachable")


async def load_batch(session: AsyncSession, attempts: Sequence[Attempt]) -> BatchState:
    """Lock the batch's rounds and read what deciding it needs (in the caller's transaction)."""
    round_ids = sorted({a.round_id for a in attempts})
    player_ids = sorted({a.player_id for a in attempts})
    guess_ids = sorted({a.guess_id for a in attempts})
    locked = await session.execute(
        select(
            Round.id,
            Round.room_id,
            Room.chat_id,
            Round.length,
            Round.palette,
            Round.secret,
            Round.ended_at,
            Round.end_reason,
            Round.winning_guess_id,
            Room.language,
            Room.thread_id,
        )
        .join(Room, Room.id == Round.room_id)
        .where(Round.id.in_(round_ids))
        .order_by(Round.id)
        .with_for_update(of=Round, key_share=True)
    )
    rounds = {
        r.id: RoundState(
            id=r.id,
            room_id=r.room_id,
            chat_id=int(r.chat_id),
            length=r.length,
            palette=frozenset(split_emojis(r.palette)),
            secret=split_emojis(r.secret),
            ended=r.ended_at is not None,
            end_reason=r.end_reason,
            winning_guess_id=r.winning_guess_id,
            language=resolve(r.language),
            thread_id=int(r.thread_id),
        )
        for r in locked
    }
    recorded = await session.execute(
        select(
            Guess.id, Guess.round_id, Guess.exact, Guess.misplaced, Guess.attempt_no, Guess.late
        ).where(Guess.id.in_(guess_ids))
    )
    players = await session.execute(
        select(Player.id, Player.room_id, Player.display_name).where(Player.id.in_(player_ids))
    )
    banned = await session.execute(
        select(Ban.room_id, Ban.player_id).where(Ban.player_id.in_(player_ids))
    )
    scored_before = await session.execute(
        select(Guess.round_id, Guess.player_id, func.count(Guess.id))
        .where(
            Guess.round_id.in_(round_ids),
            Guess.player_id.in_(player_ids),
            Guess.late.is_(False),
        )
        .group_by(Guess.round_id, Guess.player_id)
    )
    return BatchState(
        rounds=rounds,
        players={p.id: PlayerState(p.room_id, p.display_name) for p in players},
        banned=frozenset((room_id, player_id) for room_id, player_id in banned),
        scored_before={(r, p): int(n) for r, p, n in scored_before},
        recorded={
            g.id: StoredGuess(g.round_id, g.exact, g.misplaced, g.attempt_no, g.late)
            for g in recorded
        },
    )


async def write_decision(session: AsyncSession, decision: Decision) -> None:
    """Write what `decide` decided (in the caller's transaction, under the rounds' locks)."""
    now = decision.now
    if decision.new_guesses:
        rows: list[dict[str, Any]] = [
            {
                "id": attempt.guess_id,
                "round_id": attempt.round_id,
                "player_id": attempt.player_id,
                "text": "".join(attempt.emojis),
                "exact": verdict.exact,
                "misplaced": verdict.misplaced,
                "attempt_no": verdict.attempt_no,
                "late": verdict.late,
                "scored_at": now,
            }
            for attempt, verdict in decision.new_guesses
        ]
        await session.execute(insert(Guess), rows)
    if decision.tallies:
        await _bump_leaderboard(session, decision.tallies)
    if decision.closings:
        await session.execute(
            update(Round),
            [
                {
                    "id": c.round_id,
                    "ended_at": now,
                    "end_reason": SOLVED,
                    "winner_player_id": c.winner_player_id,
                    "winning_guess_id": c.winning_guess_id,
                }
                for c in decision.closings
            ],
        )
    await write_messages(session, decision.messages, now)


async def _bump_leaderboard(
    session: AsyncSession, tallies: Mapping[tuple[str, str], Tally]
) -> None:
    """Add each player's scored guesses (and wins) to their record, creating it if needed: one
    statement for every player of the batch, in key order (rows locked in a stable order)."""
    dialect = session.get_bind().dialect.name
    upsert = pg_insert if dialect == "postgresql" else sqlite_insert
    rows = [
        {
            "room_id": room_id,
            "player_id": player_id,
            "points": tally.points,
            "wins": tally.wins,
            "guesses": tally.guesses,
            "best_solve": tally.best_solve,
        }
        for (room_id, player_id), tally in sorted(tallies.items())
    ]
    stmt = upsert(LeaderboardEntry)
    table = LeaderboardEntry.__table__.c
    new = stmt.excluded
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=[table.room_id, table.player_id],
            set_={
                "points": table.points + new.points,
                "wins": table.wins + new.wins,
                "guesses": table.guesses + new.guesses,
                "best_solve": case(
                    (new.best_solve.is_(None), table.best_solve),
                    (table.best_solve.is_(None), new.best_solve),
                    (new.best_solve < table.best_solve, new.best_solve),
                    else_=table.best_solve,
                ),
            },
        ),
        rows,
        # one statement shape whether best_solve is set or not (not one group per shape)
        execution_options={"render_nulls": True},
    )
