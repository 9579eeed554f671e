"""Opening a daily on Postgres (`daily_open.Opening`): two fixed statements, prepared once per
connection by asyncpg; the round's id reserved by the look."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex import ids, limits
from codemojex.db.models import (
    DailyResult,
    Room,
    Round,
    UTCDateTime,
)
from codemojex.db.store.daily_open_common import (
    NewDaily,
    PrivateChat,
    Seen,
    close_stale,
    puzzle_from,
    record_of,
    written_card,
)
from codemojex.db.store.rooms import RoomCard
from codemojex.values.types import ROUND_DAILY

# --- Postgres: two fixed statements -------------------------------------------------------------

# Everything the open decides on, in one read: the day's puzzle, the chat's room with its open
# round, seats and bans (its card), the player, today's result and the record, the day
# before's puzzle when the player lost it (out of attempts); and, when the
# player has no daily today, an id reserved for its round (nextval: the puzzle's keyboard names
# the round, and is written with it).
_PG_LOOK = text(
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
_PG_OPEN = text(
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


def _pairs(users: list[Any] | None, players: list[Any] | None) -> dict[int, str]:
    return {int(u): str(p) for u, p in zip(users or [], players or [], strict=True)}


class _Postgres:
    async def look(self, conn: AsyncConnection, chat: PrivateChat, day: date) -> Seen:
        params = {"day": day, "chat": chat.chat_id, "thread": chat.thread_id,
                  "user": chat.tg_user_id}  # fmt: skip
        r = (await conn.execute(_PG_LOOK, params)).one()
        room = None
        if r.room_id is not None:
            room = Room(
                id=r.room_id, chat_id=chat.chat_id, thread_id=chat.thread_id, title=r.title,
                length=r.room_length, palette=r.room_palette, palette_size=r.palette_size,
                repeats=r.room_repeats, language=r.language, ceiling=r.ceiling,
                round_timeout_s=r.round_timeout_s, created=r.created,
            )  # fmt: skip
        open_round = None
        if r.o_id is not None:
            open_round = Round(
                id=r.o_id, room_id=r.room_id, secret=r.o_secret, palette=r.o_palette,
                length=r.o_length, repeats=r.o_repeats, started_at=r.o_started,
                expires_at=r.o_expires, ended_at=None, kind=r.o_kind,
                max_attempts=r.o_max_attempts,
            )  # fmt: skip
        result = None
        if r.r_round is not None:
            result = DailyResult(
                day=day, tg_user_id=chat.tg_user_id, round_id=r.r_round,
                display_name=r.r_name, started_at=r.r_started, finished_at=r.r_finished,
                cracked=r.r_cracked, rows=r.r_rows,
            )  # fmt: skip
        return Seen(
            puzzle=puzzle_from(r),
            room=room,
            player_id=r.player_id,
            player_name=r.player_name,
            result=result,
            record=record_of(r.streak, r.best, r.last_cracked, r.histogram),
            open_round=open_round,
            seats=_pairs(r.seat_users, r.seat_players),
            banned=frozenset(int(u) for u in r.banned or ()),
            new_round_id=None if r.new_round is None else int(r.new_round),
            missed=puzzle_from(r, "y"),
        )

    async def open(self, conn: AsyncConnection, seen: Seen, new: NewDaily) -> RoomCard:
        if seen.new_round_id is None:  # pragma: no cover - the look reserves one
            raise RuntimeError("no round id reserved: the player has a daily today")
        await close_stale(conn, seen, new.now)
        chat, puzzle, round_id = new.chat, new.puzzle, seen.new_round_id
        room_id = seen.room.id if seen.room is not None else ids.mint(ids.ROOM)
        player_id = seen.player_id or ids.mint(ids.PLAYER)
        name = chat.name[:255]
        message = new.message(round_id)
        params = {
            "room": room_id, "chat": chat.chat_id, "thread": chat.thread_id,
            "title": chat.title[:255], "room_length": limits.LENGTH_DEFAULT,
            "palette_size": limits.PALETTE_SIZE_DEFAULT, "lang": new.language,
            "ceiling": chat.default_ceiling, "timeout": chat.round_timeout_s,
            "now": new.now, "new_room": seen.room is None, "player": player_id,
            "user": chat.tg_user_id, "name": name,
            "write_player": seen.player_id is None or seen.player_name != name,
            "round": round_id, "secret": "".join(puzzle.secret),
            "palette": "".join(puzzle.palette), "length": puzzle.length,
            "expires": new.expires_at, "kind": ROUND_DAILY,
            "max_attempts": puzzle.max_attempts, "day": puzzle.day,
            "m_thread": message.thread_id, "m_text": message.text,
            "m_kind": message.kind, "m_markup": message.markup,
        }  # fmt: skip
        found = (await conn.execute(_PG_OPEN, params)).one()
        # the player's id as the database has it (another process may have seated them first)
        return written_card(seen, new, room_id, found.player_id or player_id, round_id)


PG = _Postgres()
