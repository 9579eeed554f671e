"""Recording guesses, many at once: load what the game needs under the rounds' locks, let
`codemojex.game.decide` decide, write the decision in bulk, in ONE transaction.

Why it is safe: the rounds of the batch are locked first (FOR NO KEY UPDATE, in id order, so two
workers recording overlapping batches never deadlock), so the guesses of one round are decided
one transaction after another and the first all-exact guess is its only winner; everything else
is read after the lock, so it includes what the previous holder wrote. The guess id (the lane
job id) is the primary key, so a re-delivered job finds its own row and changes nothing.

Why it is fast: the statements are few and do not grow with the batch, which is what lets the
worker record every batch in hand at once (group commit). On Postgres a batch is six round
trips whatever its size: BEGIN, the lock, ONE write of the batch's players (`seats.py`: the
bot writes no row per guess), ONE lookup (recorded guesses, players, bans and attempts so far,
per guess, with LATERAL), ONE write (guess rows, leaderboard upserts, closed rounds and outbox
rows as data-modifying CTEs over arrays) and COMMIT; the statements are
fixed texts, so asyncpg prepares each once per connection. SQLite (the embedded demo) runs
the same decisions through portable Core statements: a lock-free lookup per table (its
transactions are serialised by BEGIN IMMEDIATE) and an executemany per table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, func, insert, select, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from codemojex.db.models import (
    Ban,
    Guess,
    LeaderboardEntry,
    Player,
    Room,
    Round,
    UTCDateTime,
    split_emojis,
    utcnow,
)
from codemojex.db.store import daily
from codemojex.db.store.outbox import keys_off_written, write_messages
from codemojex.db.store.seats import Seat, by_lane, distinct, seat_pg, seat_portable
from codemojex.game.daily import DailyRound
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
from codemojex.game.rounds import deadline_ms
from codemojex.game.types import ROUND_DAILY
from codemojex.locale import resolve


async def record_guesses(
    db: AsyncSession | AsyncConnection,
    attempts: Sequence[Attempt],
    *,
    seats: Sequence[Seat] = (),
    now: datetime | None = None,
    share: bool = False,
) -> list[Verdict]:
    """Decide and record a batch of guesses in ONE transaction, with their players' rows
    (`seats`: written if new, renamed if named anew, see `store.seats`), outbox rows and
    leaderboard changes: one verdict per attempt, in order (see `codemojex.game.decide`;
    `share`: daily cards carry a Share button, inline mode being on). An attempt whose lane
    has a seat is recorded as the player of the seat's (room, user).
    Idempotent per guess id: recording a batch again changes nothing and reports duplicates.
    `db` is a session or a connection (the score worker's flush holds one), outside a
    transaction; the transaction is committed, or rolled back on a failure."""
    if not attempts:
        return []
    now = now or utcnow()
    lanes = by_lane(seats)
    for attempt in (1, 2):
        try:
            conn = db if isinstance(db, AsyncConnection) else await db.connection()
            if conn.dialect.name == "postgresql":
                state, mapped = await _load_pg(conn, attempts, lanes, now)
                decision = decide(mapped, state, now, share=share)
                await _write_pg(conn, decision)
            else:
                mapped = await _seat_portable(conn, attempts, lanes, now)
                decision = decide(mapped, await load_batch(conn, mapped), now, share=share)
                await write_decision(conn, decision)
            await db.commit()
            return decision.verdicts
        except IntegrityError:
            # A copy of one of these jobs, delivered twice at once, committed first; its round
            # lock has been released, so the second go finds it and reports a duplicate.
            await db.rollback()
            if attempt == 2:
                raise
        except BaseException:
            await db.rollback()
            raise
    raise AssertionError("unreachable")


async def _round_states(conn: AsyncConnection, locked: Sequence[Any]) -> dict[int, RoundState]:
    """The locked rounds as the game sees them; a daily one with its player's progress."""
    dailies = await daily.load_rounds(conn, [r.id for r in locked if r.kind == ROUND_DAILY])
    return {r.id: _round_state(r, dailies.get(r.id)) for r in locked}


def _round_state(r: Any, progress: DailyRound | None) -> RoundState:
    return RoundState(
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
        deadline_ms=deadline_ms(r.expires_at),
        max_attempts=r.max_attempts,
        daily=progress,
    )


# -- Postgres: fixed statements over arrays ------------------------------------------------

# The batch's rounds, locked in id order (two workers never deadlock), with their rooms.
_PG_LOCK = text(
    """
    SELECT r.id, r.room_id, rm.chat_id, r.length, r.palette, r.secret, r.ended_at,
           r.end_reason, r.winning_guess_id, rm.language, rm.thread_id, r.expires_at,
           r.kind, r.max_attempts
    FROM rounds r JOIN rooms rm ON rm.id = r.room_id
    WHERE r.id = ANY(CAST(:round_ids AS bigint[]))
    ORDER BY r.id
    FOR NO KEY UPDATE OF r
    """
)

# Per guess of the batch, read after the lock (a statement of its own, so that its snapshot
# includes what the lock's previous holder committed): the guess row if it was recorded
# before, its player (the row of the seat's (room, user) when the job names the user, else
# the lane's), whether the player is banned in their room, and the player's scored guesses in
# the round so far.
_PG_LOOKUP = text(
    """
    SELECT a.guess_id, a.round_id, coalesce(ps.id, pl.id) AS player_id,
           g.round_id AS g_round_id, g.exact, g.misplaced, g.attempt_no, g.late,
           coalesce(ps.room_id, pl.room_id) AS p_room_id,
           coalesce(ps.display_name, pl.display_name) AS display_name,
           EXISTS (SELECT 1 FROM bans b WHERE b.room_id = coalesce(ps.room_id, pl.room_id)
                                          AND b.player_id = coalesce(ps.id, pl.id)) AS banned,
           s.scored
    FROM unnest(CAST(:guess_ids AS text[]), CAST(:round_ids AS bigint[]),
                CAST(:player_ids AS text[]), CAST(:room_ids AS text[]),
                CAST(:users AS bigint[])) AS a(guess_id, round_id, player_id, room_id, tg)
    LEFT JOIN guesses g ON g.id = a.guess_id
    LEFT JOIN players ps ON a.tg <> 0 AND ps.room_id = a.room_id AND ps.tg_user_id = a.tg
    LEFT JOIN players pl ON a.tg = 0 AND pl.id = a.player_id
    CROSS JOIN LATERAL (
        SELECT count(*) AS scored FROM guesses c
        WHERE c.round_id = a.round_id AND c.player_id = coalesce(ps.id, pl.id)
          AND NOT c.late
    ) s
    """
)


async def _load_pg(
    conn: AsyncConnection,
    attempts: Sequence[Attempt],
    seats: Mapping[str, Seat],
    now: datetime,
) -> tuple[BatchState, list[Attempt]]:
    """The batch's state, and its attempts as their players' (see record_guesses)."""
    round_ids = sorted({a.round_id for a in attempts})
    locked = (await conn.execute(_PG_LOCK, {"round_ids": round_ids})).all()
    rounds = await _round_states(conn, locked)
    await seat_pg(conn, distinct(seats[a.player_id] for a in attempts if a.player_id in seats), now)
    rows = await conn.execute(
        _PG_LOOKUP,
        {
            "guess_ids": [a.guess_id for a in attempts],
            "round_ids": [a.round_id for a in attempts],
            "player_ids": [a.player_id for a in attempts],
            "room_ids": [a.room_id for a in attempts],
            "users": [seats[a.player_id].tg_user_id if a.player_id in seats else 0
                      for a in attempts],
        },
    )  # fmt: skip
    players: dict[str, PlayerState] = {}
    banned: set[tuple[str, str]] = set()
    scored_before: dict[tuple[int, str], int] = {}
    recorded: dict[str, StoredGuess] = {}
    player_of: dict[str, str] = {}
    for row in rows:
        if row.g_round_id is not None:
            recorded[row.guess_id] = StoredGuess(
                row.g_round_id, row.exact, row.misplaced, row.attempt_no, row.late
            )
        if row.p_room_id is not None:
            player_of[row.guess_id] = row.player_id
            players[row.player_id] = PlayerState(row.p_room_id, row.display_name)
            if row.banned:
                banned.add((row.p_room_id, row.player_id))
        if row.scored:
            scored_before[(row.round_id, row.player_id)] = int(row.scored)
    state = BatchState(
        rounds=rounds,
        players=players,
        banned=frozenset(banned),
        scored_before=scored_before,
        recorded=recorded,
    )
    return state, [_as(a, player_of.get(a.guess_id)) for a in attempts]


def _as(attempt: Attempt, player_id: str | None) -> Attempt:
    """The attempt as its player's (the lane's own id unless the database has another)."""
    if player_id is None or player_id == attempt.player_id:
        return attempt
    return replace(attempt, player_id=player_id)


async def _seat_portable(
    conn: AsyncConnection, attempts: Sequence[Attempt], seats: Mapping[str, Seat], now: datetime
) -> list[Attempt]:
    batch = distinct(seats[a.player_id] for a in attempts if a.player_id in seats)
    players = await seat_portable(conn, batch, now)
    mapped = []
    for a in attempts:
        seat = seats.get(a.player_id)
        mapped.append(a if seat is None else _as(a, players.get((seat.room_id, seat.tg_user_id))))
    return mapped


# Everything a decision writes, in one statement: data-modifying CTEs, each over the arrays
# of its rows (an empty array writes nothing). Leaderboard rows arrive in key order (rows
# locked in a stable order); outbox rows are inserted in the order given (their ids are the
# posting order).
_PG_WRITE = text(
    """
    WITH new_guesses AS (
        INSERT INTO guesses (id, round_id, player_id, text, exact, misplaced, attempt_no,
                             late, scored_at)
        SELECT g.id, g.round_id, g.player_id, g.text, g.exact, g.misplaced, g.attempt_no,
               g.late, :now
        FROM unnest(CAST(:g_ids AS text[]), CAST(:g_rounds AS bigint[]),
                    CAST(:g_players AS text[]), CAST(:g_texts AS text[]),
                    CAST(:g_exact AS int[]), CAST(:g_misplaced AS int[]),
                    CAST(:g_attempts AS int[]), CAST(:g_late AS bool[]))
             AS g(id, round_id, player_id, text, exact, misplaced, attempt_no, late)
    ), board AS (
        INSERT INTO leaderboard AS lb (room_id, player_id, points, wins, guesses, best_solve)
        SELECT t.room_id, t.player_id, t.points, t.wins, t.guesses, t.best_solve
        FROM unnest(CAST(:t_rooms AS text[]), CAST(:t_players AS text[]),
                    CAST(:t_points AS int[]), CAST(:t_wins AS int[]),
                    CAST(:t_guesses AS int[]), CAST(:t_best AS int[]))
             WITH ORDINALITY AS t(room_id, player_id, points, wins, guesses, best_solve, n)
        ORDER BY t.n
        ON CONFLICT (room_id, player_id) DO UPDATE SET
            points = lb.points + excluded.points,
            wins = lb.wins + excluded.wins,
            guesses = lb.guesses + excluded.guesses,
            best_solve = CASE
                WHEN excluded.best_solve IS NULL THEN lb.best_solve
                WHEN lb.best_solve IS NULL THEN excluded.best_solve
                ELSE least(lb.best_solve, excluded.best_solve) END
    ), closed AS (
        UPDATE rounds r SET ended_at = :now, end_reason = c.reason,
                            winner_player_id = c.winner, winning_guess_id = c.guess
        FROM unnest(CAST(:c_rounds AS bigint[]), CAST(:c_winners AS text[]),
                    CAST(:c_guesses AS text[]), CAST(:c_reasons AS text[]))
             AS c(id, winner, guess, reason)
        WHERE r.id = c.id
    )
    INSERT INTO outbox (chat_id, thread_id, text, kind, reply_to_message_id, markup, round_id,
                        guess_id, player_name, created_at)
    SELECT m.chat_id, m.thread_id, m.text, m.kind, m.reply_to, m.markup, m.round_id,
           m.guess_id, m.player_name, :now
    FROM unnest(CAST(:m_chats AS bigint[]), CAST(:m_threads AS bigint[]),
                CAST(:m_texts AS text[]), CAST(:m_kinds AS text[]),
                CAST(:m_replies AS bigint[]), CAST(:m_markups AS text[]),
                CAST(:m_rounds AS bigint[]), CAST(:m_guesses AS text[]),
                CAST(:m_names AS text[]))
         WITH ORDINALITY AS m(chat_id, thread_id, text, kind, reply_to, markup, round_id,
                              guess_id, player_name, n)
    ORDER BY m.n
    """
).bindparams(bindparam("now", type_=UTCDateTime()))


async def _write_pg(conn: AsyncConnection, decision: Decision) -> None:
    guesses = decision.new_guesses
    tallies = sorted(decision.tallies.items())
    messages = decision.messages
    if not (guesses or tallies or decision.closings or messages):
        return
    await conn.execute(
        _PG_WRITE,
        {
            "now": decision.now,
            "g_ids": [a.guess_id for a, _ in guesses],
            "g_rounds": [a.round_id for a, _ in guesses],
            "g_players": [a.player_id for a, _ in guesses],
            "g_texts": ["".join(a.emojis) for a, _ in guesses],
            "g_exact": [v.exact for _, v in guesses],
            "g_misplaced": [v.misplaced for _, v in guesses],
            "g_attempts": [v.attempt_no for _, v in guesses],
            "g_late": [v.late for _, v in guesses],
            "t_rooms": [room for (room, _), _ in tallies],
            "t_players": [player for (_, player), _ in tallies],
            "t_points": [t.points for _, t in tallies],
            "t_wins": [t.wins for _, t in tallies],
            "t_guesses": [t.guesses for _, t in tallies],
            "t_best": [t.best_solve for _, t in tallies],
            "c_rounds": [c.round_id for c in decision.closings],
            "c_winners": [c.winner_player_id for c in decision.closings],
            "c_guesses": [c.winning_guess_id for c in decision.closings],
            "c_reasons": [c.reason for c in decision.closings],
            "m_chats": [m.chat_id for m in messages],
            "m_threads": [m.thread_id for m in messages],
            "m_texts": [m.text for m in messages],
            "m_kinds": [m.kind for m in messages],
            "m_replies": [m.reply_to for m in messages],
            "m_markups": [m.markup for m in messages],
            "m_rounds": [m.round_id for m in messages],
            "m_guesses": [m.guess_id for m in messages],
            "m_names": [m.player_name for m in messages],
        },
    )
    # a won round's keys_off row learns its announcement's message id (a statement of its
    # own: it must see the row just inserted; only when a round closes)
    await keys_off_written(conn, messages)
    await daily.write_progress(conn, decision.daily)


# -- SQLite (and any other dialect): portable Core statements -----------------------------


async def load_batch(conn: AsyncConnection, attempts: Sequence[Attempt]) -> BatchState:
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
    rounds = await _round_states(conn, locked.all())
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


async def write_decision(conn: AsyncConnection, decision: Decision) -> None:
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
