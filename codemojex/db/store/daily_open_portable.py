"""Opening a daily with portable Core statements (`daily_open.Opening`; SQLite, the embedded
demo): the round's id given by its insert."""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy import and_, insert, select, update
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
)
from codemojex.db.store.daily import _insert
from codemojex.db.store.daily_open_common import (
    NewDaily,
    PrivateChat,
    Seen,
    close_stale,
    puzzle_of,
    record_of,
    written_card,
)
from codemojex.db.store.outbox import message_rows
from codemojex.db.store.rooms import RoomCard
from codemojex.values.daily import Puzzle
from codemojex.values.types import ROUND_DAILY

# --- portable (SQLite): Core statements -------------------------------------------------------


class _Portable:
    async def look(self, conn: AsyncConnection, chat: PrivateChat, day: date) -> Seen:
        puzzle_row = (await conn.execute(select(DailyPuzzle).where(DailyPuzzle.day == day))).first()
        puzzle = None
        if puzzle_row is not None:
            puzzle = puzzle_of(
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
        record = record_of(
            *((rec.streak, rec.best, rec.last_cracked, rec.histogram) if rec else (0, 0, None, ""))
        )
        result = None
        if mine is not None:
            result = DailyResult(**{c: getattr(mine, c) for c in mine._fields})
        missed = await _missed(conn, chat.tg_user_id, day)
        room_row = (
            await conn.execute(
                select(Room).where(Room.chat_id == chat.chat_id, Room.thread_id == chat.thread_id)
            )
        ).first()
        if room_row is None:
            return Seen(puzzle, None, None, None, result, record, None, missed=missed)
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
            missed=missed,
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
        await close_stale(conn, seen, now)
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
        return written_card(seen, new, room_id, player_id, round_id)


async def _missed(conn: AsyncConnection, tg_user_id: int, day: date) -> Puzzle | None:
    """The day before's puzzle when the player lost it (out of attempts)."""
    found = (
        await conn.execute(
            select(DailyPuzzle)
            .join(DailyResult, DailyResult.day == DailyPuzzle.day)
            .where(
                DailyResult.day == day - timedelta(days=1),
                DailyResult.tg_user_id == tg_user_id,
                DailyResult.finished_at.is_not(None),
                DailyResult.cracked.is_(False),
            )
        )
    ).first()
    if found is None:
        return None
    return puzzle_of(
        found.day, found.number, found.palette, found.secret, found.length, found.max_attempts
    )


PORTABLE = _Portable()
