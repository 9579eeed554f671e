"""Recording a batch on SQLite, the embedded demo, or any other dialect (`batch.BatchStore`):
portable Core statements, a lock-free lookup per table (SQLite's transactions are serialised by
BEGIN IMMEDIATE, see `engine.py`) and an executemany per table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, insert, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.models import Ban, Guess, LeaderboardEntry, Player, Room, Round
from codemojex.db.store import daily
from codemojex.db.store.batch_common import as_player, round_states
from codemojex.db.store.outbox import write_messages
from codemojex.db.store.seats import Seat, distinct, seat_portable
from codemojex.values.batch import (
    Attempt,
    BatchState,
    Decision,
    PlayerState,
    StoredGuess,
    Tally,
)


async def _seat(
    conn: AsyncConnection, attempts: Sequence[Attempt], seats: Mapping[str, Seat], now: datetime
) -> list[Attempt]:
    batch = distinct(seats[a.player_id] for a in attempts if a.player_id in seats)
    players = await seat_portable(conn, batch, now)
    mapped = []
    for a in attempts:
        seat = seats.get(a.player_id)
        mapped.append(
            a if seat is None else as_player(a, players.get((seat.room_id, seat.tg_user_id)))
        )
    return mapped


async def _load_state(conn: AsyncConnection, attempts: Sequence[Attempt]) -> BatchState:
    """Lock the batch's rounds and read what deciding it needs (in the caller's transaction)."""
    round_ids = sorted({a.round_id for a in attempts})
    player_ids = sorted({a.player_id for a in attempts})
    guess_ids = sorted({a.guess_id for a in attempts})
    locked = await conn.execute(
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
            Round.expires_at,
            Round.kind,
            Round.max_attempts,
        )
        .join(Room, Room.id == Round.room_id)
        .where(Round.id.in_(round_ids))
        .order_by(Round.id)
        .with_for_update(of=Round, key_share=True)
    )
    rounds = await round_states(conn, locked.all())
    recorded = await conn.execute(
        select(
            Guess.id, Guess.round_id, Guess.exact, Guess.misplaced, Guess.attempt_no, Guess.late
        ).where(Guess.id.in_(guess_ids))
    )
    players = await conn.execute(
        select(Player.id, Player.room_id, Player.display_name).where(Player.id.in_(player_ids))
    )
    banned = await conn.execute(
        select(Ban.room_id, Ban.player_id).where(Ban.player_id.in_(player_ids))
    )
    scored_before = await conn.execute(
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


async def _write(conn: AsyncConnection, decision: Decision) -> None:
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
        await conn.execute(insert(Guess), rows)
    if decision.tallies:
        await _bump_leaderboard(conn, decision.tallies)
    for c in decision.closings:
        await conn.execute(
            update(Round)
            .where(Round.id == c.round_id)
            .values(
                ended_at=now,
                end_reason=c.reason,
                winner_player_id=c.winner_player_id,
                winning_guess_id=c.winning_guess_id,
            )
        )
    await write_messages(conn, decision.messages, now)
    await daily.write_progress(conn, decision.daily)


async def _bump_leaderboard(
    conn: AsyncConnection, tallies: Mapping[tuple[str, str], Tally]
) -> None:
    """Add each player's scored guesses (and wins) to their record, creating it if needed: one
    statement for every player of the batch, in key order (rows locked in a stable order)."""
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
    stmt = sqlite_insert(LeaderboardEntry)
    table = LeaderboardEntry.__table__.c
    new = stmt.excluded
    await conn.execute(
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


class _Portable:
    async def load(
        self,
        conn: AsyncConnection,
        attempts: Sequence[Attempt],
        seats: Mapping[str, Seat],
        now: datetime,
    ) -> tuple[BatchState, list[Attempt]]:
        mapped = await _seat(conn, attempts, seats, now)
        return await _load_state(conn, mapped), mapped

    async def write(self, conn: AsyncConnection, decision: Decision) -> None:
        await _write(conn, decision)


PORTABLE = _Portable()
