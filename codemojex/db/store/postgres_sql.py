"""The statements of the Postgres backend (`postgres.py` binds them), fixed texts that asyncpg
prepares once per connection: arrays in (`unnest`), so their number does not grow with a batch;
data-modifying CTEs, so one statement writes what several tables get.

Recording a batch: LOCK, SEAT (only when the jobs name players), LOOKUP, WRITE. Opening a daily:
LOOK, OPEN.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, bindparam, text

from codemojex.db.models import UTCDateTime

# --- recording a batch of guesses --------------------------------------------------------------

# The batch's rounds, locked in id order (two workers never deadlock), with their rooms.
LOCK: Final[TextClause] = text(
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
LOOKUP: Final[TextClause] = text(
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

# One statement: the named players already there renamed, the new ones inserted (under the
# id their lane has). Both work on the statement's snapshot, so no row is written twice; a
# row another transaction inserts meanwhile is waited for and left alone (DO NOTHING), and
# the lookup that follows, a statement of its own, sees it.
SEAT: Final[TextClause] = text(
    """
    WITH s AS (
        SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:rooms AS text[]),
                             CAST(:users AS bigint[]), CAST(:names AS text[]),
                             CAST(:fallbacks AS text[]))
             AS s(id, room_id, tg_user_id, name, fallback)
    ), renamed AS (
        UPDATE players p SET display_name = s.name FROM s
        WHERE s.name IS NOT NULL AND p.room_id = s.room_id AND p.tg_user_id = s.tg_user_id
          AND p.display_name <> s.name
    )
    INSERT INTO players (id, room_id, tg_user_id, display_name, created)
    SELECT s.id, s.room_id, s.tg_user_id, coalesce(s.name, s.fallback), :now FROM s
    ON CONFLICT DO NOTHING
    """
).bindparams(bindparam("now", type_=UTCDateTime()))

# Everything a decision writes, in one statement: data-modifying CTEs, each over the arrays
# of its rows (an empty array writes nothing). Leaderboard rows arrive in key order (rows
# locked in a stable order); outbox rows are inserted in the order given (their ids are the
# posting order).
WRITE: Final[TextClause] = text(
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

# --- opening a daily ---------------------------------------------------------------------------

# Everything the open decides on, in one read: the day's puzzle, the chat's room with its open
# round, seats and bans (its card), the player, today's result and the record, the day
# before's puzzle when the player lost it (out of attempts); and, when the
# player has no daily today, an id reserved for its round (nextval: the puzzle's keyboard names
# the round, and is written with it).
LOOK: Final[TextClause] = text(
    """
    SELECT dp.day AS p_day, dp.number AS p_number, dp.palette AS p_palette,
           dp.secret AS p_secret, dp.length AS p_length, dp.max_attempts AS p_max_attempts,
           rm.id AS room_id, rm.title, rm.length AS room_length, rm.palette AS room_palette,
           rm.palette_size, rm.repeats AS room_repeats, rm.language, rm.ceiling,
           rm.round_timeout_s, rm.created,
           pl.id AS player_id, pl.display_name AS player_name,
           dr.round_id AS r_round, dr.display_name AS r_name, dr.started_at AS r_started,
           dr.finished_at AS r_finished, dr.cracked AS r_cracked, dr.rows AS r_rows,
           rec.streak, rec.best, rec.last_cracked, rec.histogram,
           o.id AS o_id, o.secret AS o_secret, o.palette AS o_palette, o.length AS o_length,
           o.repeats AS o_repeats, o.started_at AS o_started, o.expires_at AS o_expires,
           o.kind AS o_kind, o.max_attempts AS o_max_attempts,
           s.users AS seat_users, s.players AS seat_players, b.users AS banned,
           yp.day AS y_day, yp.number AS y_number, yp.palette AS y_palette,
           yp.secret AS y_secret, yp.length AS y_length, yp.max_attempts AS y_max_attempts,
           CASE WHEN dr.round_id IS NULL
                THEN nextval(pg_get_serial_sequence('rounds', 'id')) END AS new_round
    FROM (SELECT 1) AS one
    LEFT JOIN daily_puzzles dp ON dp.day = CAST(:day AS date)
    LEFT JOIN rooms rm ON rm.chat_id = CAST(:chat AS bigint)
                      AND rm.thread_id = CAST(:thread AS bigint)
    LEFT JOIN players pl ON pl.room_id = rm.id AND pl.tg_user_id = CAST(:user AS bigint)
    LEFT JOIN daily_results dr ON dr.day = CAST(:day AS date)
                              AND dr.tg_user_id = CAST(:user AS bigint)
    LEFT JOIN daily_records rec ON rec.tg_user_id = CAST(:user AS bigint)
    LEFT JOIN rounds o ON o.room_id = rm.id AND o.ended_at IS NULL
    LEFT JOIN daily_results ydr ON ydr.day = CAST(:day AS date) - 1
                               AND ydr.tg_user_id = CAST(:user AS bigint)
                               AND ydr.finished_at IS NOT NULL AND NOT ydr.cracked
    LEFT JOIN daily_puzzles yp ON yp.day = ydr.day
    LEFT JOIN LATERAL (
        SELECT array_agg(p.tg_user_id) AS users, array_agg(p.id) AS players
        FROM players p WHERE p.room_id = rm.id
    ) s ON rm.id IS NOT NULL
    LEFT JOIN LATERAL (
        SELECT array_agg(bp.tg_user_id) AS users
        FROM bans bn JOIN players bp ON bp.id = bn.player_id AND bp.room_id = bn.room_id
        WHERE bn.room_id = rm.id
    ) b ON rm.id IS NOT NULL
    """
)

# Everything an open writes, in one statement: data-modifying CTEs (the room and the player
# only when new or renamed). Their foreign keys are checked at the statement's end, when the
# rows inserted beside them are there: a room that another open inserted first (ON CONFLICT
# DO NOTHING here) leaves this one's rows without it, and the statement fails.
OPEN: Final[TextClause] = text(
    """
    WITH new_room AS (
        INSERT INTO rooms (id, chat_id, thread_id, title, length, palette, palette_size,
                           repeats, language, ceiling, round_timeout_s, created)
        SELECT CAST(:room AS varchar), CAST(:chat AS bigint), CAST(:thread AS bigint),
               CAST(:title AS varchar), CAST(:room_length AS int), NULL,
               CAST(:palette_size AS int), true, CAST(:lang AS varchar),
               CAST(:ceiling AS int), CAST(:timeout AS int), CAST(:now AS timestamptz)
        WHERE CAST(:new_room AS boolean)
        ON CONFLICT (chat_id, thread_id) DO NOTHING
    ), spoken AS (
        UPDATE rooms SET language = CAST(:lang AS varchar)
        WHERE id = CAST(:room AS varchar) AND NOT CAST(:new_room AS boolean)
          AND language IS DISTINCT FROM CAST(:lang AS varchar)
    ), seat AS (
        INSERT INTO players AS p (id, room_id, tg_user_id, display_name, created)
        SELECT CAST(:player AS varchar), CAST(:room AS varchar), CAST(:user AS bigint),
               CAST(:name AS varchar), CAST(:now AS timestamptz)
        WHERE CAST(:write_player AS boolean)
        ON CONFLICT (room_id, tg_user_id) DO UPDATE SET display_name = excluded.display_name
        RETURNING p.id
    ), new_round AS (
        INSERT INTO rounds (id, room_id, secret, palette, length, repeats, started_at,
                            expires_at, kind, max_attempts)
        VALUES (CAST(:round AS bigint), CAST(:room AS varchar), CAST(:secret AS text),
                CAST(:palette AS text), CAST(:length AS int), true,
                CAST(:now AS timestamptz), CAST(:expires AS timestamptz),
                CAST(:kind AS varchar), CAST(:max_attempts AS int))
    ), result AS (
        INSERT INTO daily_results (day, tg_user_id, round_id, display_name, started_at,
                                   finished_at, cracked, rows)
        VALUES (CAST(:day AS date), CAST(:user AS bigint), CAST(:round AS bigint),
                CAST(:name AS varchar), CAST(:now AS timestamptz), NULL, false, '')
    )
    INSERT INTO outbox (chat_id, thread_id, text, kind, reply_to_message_id, markup, round_id,
                        guess_id, player_name, created_at)
    VALUES (CAST(:chat AS bigint), CAST(:m_thread AS bigint), CAST(:m_text AS text),
            CAST(:m_kind AS varchar), NULL, CAST(:m_markup AS text), CAST(:round AS bigint),
            NULL, NULL, CAST(:now AS timestamptz))
    RETURNING (SELECT id FROM seat) AS player_id
    """
).bindparams(
    bindparam("now", type_=UTCDateTime()),
    bindparam("expires", type_=UTCDateTime()),
)


# --- the sender's books -----------------------------------------------------------------------

# Many posts' sent-marks in one statement: the rows and the message id each was carried by as
# two arrays, each row marked with its own post's id. As outbox.mark_sent, only rows not yet
# sent are touched, and the marked ones come back (their kind and round: the announcements).
MARK_SENT_MANY: Final[TextClause] = text(
    """
    UPDATE outbox AS o
    SET sent_at = :now, sent_message_id = m.message_id, claimed_until = NULL
    FROM unnest(CAST(:ids AS bigint[]), CAST(:message_ids AS bigint[])) AS m(id, message_id)
    WHERE o.id = m.id AND o.sent_at IS NULL
    RETURNING o.id, o.kind, o.round_id, o.sent_message_id
    """
).bindparams(bindparam("now", type_=UTCDateTime()))
