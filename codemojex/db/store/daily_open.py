"""Opening a player's daily in their private chat, as the store sees it: LOOK at what the
player has (the chat's room and its card, the player, today's puzzle, result and record), then
OPEN (the room and player if new, the chat's language, the round, the result row, the puzzle's
outbox row), in the caller's transaction (`codemojex.usecases.daily.open_daily` opens it,
decides in between, commits). `/daily` used to take four transactions and some twenty
statements through the ORM; this takes one, and on Postgres two fixed statements.

One interface, `Opening`, one implementation per database, as for a batch of guesses
(`batch.py`): `PG` (fixed statements, so asyncpg prepares each once per connection; the round's
id reserved by the look, so that the puzzle's keyboard, which names it, goes into the same
write) and `PORTABLE` (SQLite, the embedded demo: portable Core statements, the round's id
given by its insert). `opening(conn)` picks the connection's.

Why it is safe, the same as before it was one transaction: the day's puzzle is drawn once
(`daily.insert_puzzle`, by the caller when the look finds none); one open round per room and
one result per player and day are the database's unique keys, so of two opens of the same
daily at once one fails with IntegrityError (the caller rolls back and reads the winner's); a
room created at once by two opens makes the loser's rows miss their room (IntegrityError too,
a foreign key): the winner committed the room with its daily, in one transaction.

The look also returns what the chat's card in Redis is written from (`RoomCard`, as
`rooms.room_card` reads it), so the bot writes the card with no read of its own: the card of
the room as this transaction left it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Protocol

from sqlalchemy import and_, bindparam, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex import ids, limits
from codemojex.db.models import (
    Ban,
    DailyPuzzle,
    DailyRecord,
    DailyResult,
    Outbox,
    Player,
    Room,
    Round,
    UTCDateTime,
    split_emojis,
)
from codemojex.db.store.daily import _insert
from codemojex.db.store.outbox import message_rows
from codemojex.db.store.rooms import RoomCard
from codemojex.values import daily
from codemojex.values.types import ROUND_DAILY, TIMEOUT, Message


@dataclass(frozen=True, slots=True)
class PrivateChat:
    """The private chat a daily is opened in, and its player (as the bot sees them now)."""

    chat_id: int
    tg_user_id: int
    name: str
    title: str = ""
    thread_id: int = 0
    # a room made on first sight gets these (store.ensure_room's)
    default_ceiling: int = limits.CEILING_DEFAULT
    round_timeout_s: int = limits.ROUND_TIMEOUT_S_DEFAULT


@dataclass(frozen=True, slots=True)
class Seen:
    """What a player has, as the look read it (in the caller's transaction)."""

    puzzle: daily.Puzzle | None  # the day's puzzle (None: nobody drew it yet)
    room: Room | None  # the chat's room (None: none yet)
    player_id: str | None  # the player's id in it (None: none yet)
    player_name: str | None
    result: DailyResult | None  # the player's daily of the day (None: not opened)
    record: daily.Record
    open_round: Round | None  # the room's open round
    seats: dict[int, str] = field(default_factory=dict)
    banned: frozenset[int] = frozenset()
    new_round_id: int | None = None  # the id reserved for the round an open inserts

    def card(self) -> RoomCard | None:
        """The room's card as read (None: no room)."""
        if self.room is None:
            return None
        return RoomCard(self.room, self.open_round, dict(self.seats), self.banned)


@dataclass(frozen=True, slots=True)
class NewDaily:
    """What an open writes: the player's daily of the puzzle's day in `chat`'s room, which
    speaks `language` from now on; the puzzle's post is `message(round id)`."""

    chat: PrivateChat
    language: str
    puzzle: daily.Puzzle
    now: datetime
    expires_at: datetime
    message: Callable[[int], Message]


class Opening(Protocol):
    """Looking and opening on one kind of database (in the caller's transaction; never
    commits)."""

    async def look(self, conn: AsyncConnection, chat: PrivateChat, day: date) -> Seen:
        """What the player of `chat` has on `day`."""
        ...

    async def open(self, conn: AsyncConnection, seen: Seen, new: NewDaily) -> RoomCard:
        """Write the daily (after `seen` found none; an open round in `seen` is closed
        first, quietly, as its timer would) and return the room's card as written.
        IntegrityError when another open of the same room or daily committed first."""
        ...


def opening(conn: AsyncConnection) -> Opening:
    """The connection's database's way."""
    return PG if conn.dialect.name == "postgresql" else PORTABLE


# --- shared -----------------------------------------------------------------------------------


def _record(
    streak: int | None, best: int | None, last: date | None, histogram: str | None
) -> daily.Record:
    return daily.Record(
        streak=streak or 0,
        best=best or 0,
        last_cracked=last,
        histogram=daily.decode_histogram(histogram, daily.ATTEMPTS),
    )


def _puzzle(row: Any) -> daily.Puzzle | None:
    if row.p_number is None:
        return None
    return _puzzle_of(
        row.p_day, row.p_number, row.p_palette, row.p_secret, row.p_length, row.p_max_attempts
    )


@functools.lru_cache(maxsize=limits.DAILY_PUZZLES_SPLIT)
def _puzzle_of(
    day: date, number: int, palette: str, secret: str, length: int, max_attempts: int
) -> daily.Puzzle:
    """A stored puzzle (a pure function of its row: the same few rows all day long)."""
    return daily.Puzzle(
        day=day,
        number=number,
        palette=split_emojis(palette),
        secret=split_emojis(secret),
        length=length,
        max_attempts=max_attempts,
    )


async def _close_stale(conn: AsyncConnection, seen: Seen, now: datetime) -> None:
    """An earlier day's daily still open in the room (its midnight passed moments ago and the
    workers' round timer has not closed it yet): closed now, quietly, as the timer would."""
    if seen.open_round is None:
        return
    await conn.execute(
        update(Round)
        .where(Round.id == seen.open_round.id, Round.ended_at.is_(None))
        .values(ended_at=now, end_reason=TIMEOUT)
    )


def _written(seen: Seen, new: NewDaily, room_id: str, player_id: str, round_id: int) -> RoomCard:
    """The room's card as the open left it."""
    chat, puzzle = new.chat, new.puzzle
    room = seen.room
    if room is None:
        room = Room(
            id=room_id,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            title=chat.title[:255],
            length=limits.LENGTH_DEFAULT,
            palette=None,
            palette_size=limits.PALETTE_SIZE_DEFAULT,
            repeats=True,
            language=new.language,
            ceiling=chat.default_ceiling,
            round_timeout_s=chat.round_timeout_s,
            created=new.now,
        )
    else:
        room.language = new.language
    rnd = Round(
        id=round_id,
        room_id=room_id,
        secret="".join(puzzle.secret),
        palette="".join(puzzle.palette),
        length=puzzle.length,
        repeats=True,
        started_at=new.now,
        expires_at=new.expires_at,
        kind=ROUND_DAILY,
        max_attempts=puzzle.max_attempts,
    )
    seats = {**seen.seats, chat.tg_user_id: player_id}
    return RoomCard(room, rnd, seats, seen.banned)


# --- Postgres: two fixed statements -------------------------------------------------------------

# Everything the open decides on, in one read: the day's puzzle, the chat's room with its open
# round, seats and bans (its card), the player, today's result and the record; and, when the
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
            puzzle=_puzzle(r),
            room=room,
            player_id=r.player_id,
            player_name=r.player_name,
            result=result,
            record=_record(r.streak, r.best, r.last_cracked, r.histogram),
            open_round=open_round,
            seats=_pairs(r.seat_users, r.seat_players),
            banned=frozenset(int(u) for u in r.banned or ()),
            new_round_id=None if r.new_round is None else int(r.new_round),
        )

    async def open(self, conn: AsyncConnection, seen: Seen, new: NewDaily) -> RoomCard:
        if seen.new_round_id is None:  # pragma: no cover - the look reserves one
            raise RuntimeError("no round id reserved: the player has a daily today")
        await _close_stale(conn, seen, new.now)
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
        return _written(seen, new, room_id, found.player_id or player_id, round_id)


PG = _Postgres()


# --- portable (SQLite): Core statements -------------------------------------------------------


class _Portable:
    async def look(self, conn: AsyncConnection, chat: PrivateChat, day: date) -> Seen:
        puzzle_row = (await conn.execute(select(DailyPuzzle).where(DailyPuzzle.day == day))).first()
        puzzle = None
        if puzzle_row is not None:
            puzzle = _puzzle_of(
                puzzle_row.day, puzzle_row.number, puzzle_row.palette, puzzle_row.secret,
                puzzle_row.length, puzzle_row.max_attempts,
            )  # fmt: skip
        mine = (
            await conn.execute(
                select(DailyResult).where(
                    DailyResult.day == day, DailyResult.tg_user_id == chat.tg_user_id
                )
            )
        ).first()
        rec = (
            await conn.execute(select(DailyRecord).where(DailyRecord.tg_user_id == chat.tg_user_id))
        ).first()
        record = _record(
            *((rec.streak, rec.best, rec.last_cracked, rec.histogram) if rec else (0, 0, None, ""))
        )
        result = None
        if mine is not None:
            result = DailyResult(**{c: getattr(mine, c) for c in mine._fields})
        room_row = (
            await conn.execute(
                select(Room).where(Room.chat_id == chat.chat_id, Room.thread_id == chat.thread_id)
            )
        ).first()
        if room_row is None:
            return Seen(puzzle, None, None, None, result, record, None)
        room = Room(**{c: getattr(room_row, c) for c in room_row._fields})
        open_row = (
            await conn.execute(
                select(Round).where(Round.room_id == room.id, Round.ended_at.is_(None))
            )
        ).first()
        open_round = None
        if open_row is not None:
            open_round = Round(**{c: getattr(open_row, c) for c in open_row._fields})
        seats = {
            int(tg): str(pid)
            for tg, pid in await conn.execute(
                select(Player.tg_user_id, Player.id).where(Player.room_id == room.id)
            )
        }
        banned = frozenset(
            int(tg)
            for tg in (
                await conn.execute(
                    select(Player.tg_user_id)
                    .join(Ban, and_(Ban.player_id == Player.id, Ban.room_id == Player.room_id))
                    .where(Ban.room_id == room.id)
                )
            ).scalars()
        )
        player = (
            await conn.execute(
                select(Player.id, Player.display_name).where(
                    Player.room_id == room.id, Player.tg_user_id == chat.tg_user_id
                )
            )
        ).first()
        return Seen(
            puzzle,
            room,
            None if player is None else player.id,
            None if player is None else player.display_name,
            result,
            record,
            open_round,
            seats,
            banned,
        )

    async def open(self, conn: AsyncConnection, seen: Seen, new: NewDaily) -> RoomCard:
        chat, puzzle, now = new.chat, new.puzzle, new.now
        if seen.room is None:
            room_id = ids.mint(ids.ROOM)
            await conn.execute(
                insert(Room).values(
                    id=room_id, chat_id=chat.chat_id, thread_id=chat.thread_id,
                    title=chat.title[:255], length=limits.LENGTH_DEFAULT, palette=None,
                    palette_size=limits.PALETTE_SIZE_DEFAULT, repeats=True,
                    language=new.language, ceiling=chat.default_ceiling,
                    round_timeout_s=chat.round_timeout_s, created=now,
                )
            )  # fmt: skip
        else:
            room_id = seen.room.id
            await conn.execute(
                update(Room)
                .where(Room.id == room_id, Room.language.is_distinct_from(new.language))
                .values(language=new.language)
            )
        name = chat.name[:255]
        player_id = seen.player_id or ids.mint(ids.PLAYER)
        if seen.player_id is None or seen.player_name != name:
            stmt = _insert(conn, Player).values(
                id=player_id, room_id=room_id, tg_user_id=chat.tg_user_id,
                display_name=name, created=now,
            )  # fmt: skip
            await conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["room_id", "tg_user_id"],
                    set_={"display_name": stmt.excluded.display_name},
                )
            )
        await _close_stale(conn, seen, now)
        inserted = await conn.execute(
            insert(Round).values(
                room_id=room_id, secret="".join(puzzle.secret), palette="".join(puzzle.palette),
                length=puzzle.length, repeats=True, started_at=now, expires_at=new.expires_at,
                kind=ROUND_DAILY, max_attempts=puzzle.max_attempts,
            )
        )  # fmt: skip
        key = inserted.inserted_primary_key
        if key is None:  # pragma: no cover - an insert of one row has its key
            raise RuntimeError("the daily's round was inserted without an id")
        round_id = int(key[0])
        await conn.execute(
            insert(DailyResult).values(
                day=puzzle.day, tg_user_id=chat.tg_user_id, round_id=round_id,
                display_name=name, started_at=now, finished_at=None, cracked=False, rows="",
            )
        )  # fmt: skip
        await conn.execute(insert(Outbox), message_rows([new.message(round_id)], now))
        return _written(seen, new, room_id, player_id, round_id)


PORTABLE = _Portable()
