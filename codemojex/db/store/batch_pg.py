"""Recording a batch on Postgres (`batch.BatchStore`): fixed statements over arrays.

The statements are few and do not grow with the batch, which is what lets the worker record
every batch in hand at once (group commit): BEGIN, the lock, ONE write of the batch's players
(`seats.py`: the bot writes no row per guess), ONE lookup (recorded guesses, players, bans and
attempts so far, per guess, with LATERAL), ONE write (guess rows, leaderboard upserts, closed
rounds and outbox rows as data-modifying CTEs over arrays) and COMMIT; a daily round's progress
and a won round's keys_off row add theirs only when there are any. The statements are fixed
texts, so asyncpg prepares each once per connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.models import UTCDateTime
from codemojex.db.store import daily
from codemojex.db.store.batch_common import as_player, round_states
from codemojex.db.store.outbox import keys_off_written
from codemojex.db.store.seats import Seat, distinct, seat_pg
from codemojex.values.batch import (
    Attempt,
    BatchState,
    Decision,
    PlayerState,
    StoredGuess,
)

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


async def _load(
    conn: AsyncConnection,
    attempts: Sequence[Attempt],
    seats: Mapping[str, Seat],
    now: datetime,
) -> tuple[BatchState, list[Attempt]]:
    """The batch's state, and its attempts as their players' (see `batch.BatchStore.load`)."""
    round_ids = sorted({a.round_id for a in attempts})
    locked = (await conn.execute(_PG_LOCK, {"round_ids": round_ids})).all()
    rounds = await round_states(conn, locked)
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
    return state, [as_player(a, player_of.get(a.guess_id)) for a in attempts]


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


async def _write(conn: AsyncConnection, decision: Decision) -> None:
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


class _Postgres:
    async def load(
        self,
        conn: AsyncConnection,
        attempts: Sequence[Attempt],
        seats: Mapping[str, Seat],
        now: datetime,
    ) -> tuple[BatchState, list[Attempt]]:
        return await _load(conn, attempts, seats, now)

    async def write(self, conn: AsyncConnection, decision: Decision) -> None:
        await _write(conn, decision)


PG = _Postgres()
