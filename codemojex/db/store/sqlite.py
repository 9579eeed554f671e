"""The SQLite backend (`backend.Backend`), the embedded demo's: portable Core statements, a
lock-free read per table (SQLite's writers are serialised by BEGIN IMMEDIATE, see `engine.py`)
and an executemany per table written; a daily's round id given by its insert."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Executable, and_, case, func, insert, or_, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.models import (
    Ban,
    DailyPuzzle,
    DailyRecord,
    DailyResult,
    Guess,
    LeaderboardEntry,
    Outbox,
    Player,
    Room,
    Round,
)
from codemojex.db.store import daily, rows
from codemojex.db.store.backend import Backend, NewDaily, Seen
from codemojex.db.store.lookups import RoomCard
from codemojex.db.store.outbox import message_rows, write_messages
from codemojex.db.store.seats import Seat, of_batch
from codemojex.scoring.rules import DEFAULT_LENGTH, DEFAULT_PALETTE_SIZE
from codemojex.values import ids
from codemojex.values.batch import Attempt, BatchState, Decision, PlayerState, StoredGuess, Tally
from codemojex.values.daily import PrivateChat, Puzzle
from codemojex.values.types import ROUND_DAILY

if TYPE_CHECKING:
    from codemojex.db.unit import Unit

# The batch's rounds with their rooms, in id order. No row lock: SQLite's writers take turns
# (BEGIN IMMEDIATE), so the transaction that reads them is the only writer until it ends.
_LOCK = (
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
    .order_by(Round.id)
)


class Sqlite(Backend):
    async def load_batch(
        self,
        tx: Unit,
        attempts: Sequence[Attempt],
        seats: Mapping[str, Seat],
        now: datetime,
    ) -> tuple[BatchState, list[Attempt]]:
        conn = tx.conn
        players = await _seat(conn, of_batch(attempts, seats), now)
        mapped = []
        for a in attempts:
            seat = seats.get(a.player_id)
            player_id = None if seat is None else players.get((seat.room_id, seat.tg_user_id))
            mapped.append(rows.as_player(a, player_id))
        return await self._state(conn, mapped), mapped

    async def _state(self, conn: AsyncConnection, attempts: Sequence[Attempt]) -> BatchState:
        round_ids = sorted({a.round_id for a in attempts})
        player_ids = sorted({a.player_id for a in attempts})
        guess_ids = sorted({a.guess_id for a in attempts})
        locked = await conn.execute(_LOCK.where(Round.id.in_(round_ids)))
        rounds = await self._round_states(conn, locked.all())
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

    async def write_batch(self, tx: Unit, decision: Decision) -> None:
        conn = tx.conn
        now = decision.now
        if decision.new_guesses:
            guesses = [
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
            await conn.execute(insert(Guess), guesses)
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
        await write_messages(tx, decision.messages, now)
        await daily.write_progress(tx, decision.daily)

    async def look_daily(self, tx: Unit, chat: PrivateChat, day: date) -> Seen:
        conn = tx.conn
        user = chat.tg_user_id
        puzzle = await _first(conn, select(DailyPuzzle.__table__).where(DailyPuzzle.day == day))
        result = await _first(
            conn,
            select(DailyResult.__table__).where(
                DailyResult.day == day, DailyResult.tg_user_id == user
            ),
        )
        record = await _first(
            conn, select(DailyRecord.__table__).where(DailyRecord.tg_user_id == user)
        )
        seen = Seen(
            puzzle=None if puzzle is None else rows.puzzle_from(puzzle),
            room=None,
            player_id=None,
            player_name=None,
            result=None if result is None else rows.entity(DailyResult, result),
            record=rows.record_from(record),
            open_round=None,
            missed=await _missed(conn, user, day),
        )
        room_row = await _first(
            conn,
            select(Room.__table__).where(
                Room.chat_id == chat.chat_id, Room.thread_id == chat.thread_id
            ),
        )
        if room_row is None:
            return seen
        room = rows.entity(Room, room_row)
        open_round = await _first(
            conn, select(Round.__table__).where(Round.room_id == room.id, Round.ended_at.is_(None))
        )
        seats = await conn.execute(
            select(Player.tg_user_id, Player.id).where(Player.room_id == room.id)
        )
        banned = await conn.execute(
            select(Player.tg_user_id)
            .join(Ban, and_(Ban.player_id == Player.id, Ban.room_id == Player.room_id))
            .where(Ban.room_id == room.id)
        )
        player = await _first(
            conn,
            select(Player.id, Player.display_name).where(
                Player.room_id == room.id, Player.tg_user_id == user
            ),
        )
        return replace(
            seen,
            room=room,
            player_id=None if player is None else player.id,
            player_name=None if player is None else player.display_name,
            open_round=None if open_round is None else rows.entity(Round, open_round),
            seats={int(tg): str(pid) for tg, pid in seats},
            banned=frozenset(int(tg) for tg in banned.scalars()),
        )

    async def open_daily(self, tx: Unit, seen: Seen, new: NewDaily) -> RoomCard:
        conn = tx.conn
        room_id = await _room(conn, seen, new)
        player_id = await _player(conn, seen, new, room_id)
        await self._close_stale(conn, seen, new.now)
        round_id = await _round(conn, new, room_id)
        await conn.execute(insert(Outbox), message_rows([new.message(round_id)], new.now))
        return self._card_written(seen, new, room_id, player_id, round_id)


# --- recording a batch ---------------------------------------------------------------------------


async def _seat(
    conn: AsyncConnection, seats: list[Seat], now: datetime
) -> dict[tuple[str, int], str]:
    """The players the batch's jobs name, written (new ones inserted under their lane's id,
    named ones renamed); the player id of each (room, user) as the database has it."""
    if not seats:
        return {}
    new = [
        {
            "id": s.lane,
            "room_id": s.room_id,
            "tg_user_id": s.tg_user_id,
            "display_name": s.name or s.fallback_name,
            "created": now,
        }
        for s in seats
    ]
    await conn.execute(sqlite_insert(Player).on_conflict_do_nothing(), new)
    for seat in seats:
        if seat.name is not None:
            await conn.execute(
                update(Player)
                .where(Player.room_id == seat.room_id, Player.tg_user_id == seat.tg_user_id)
                .values(display_name=seat.name)
            )
    theirs = [and_(Player.room_id == s.room_id, Player.tg_user_id == s.tg_user_id) for s in seats]
    found = await conn.execute(
        select(Player.room_id, Player.tg_user_id, Player.id).where(or_(*theirs))
    )
    return {(room, int(user)): player for room, user, player in found}


async def _bump_leaderboard(
    conn: AsyncConnection, tallies: Mapping[tuple[str, str], Tally]
) -> None:
    """Add each player's scored guesses (and wins) to their record, creating it if needed: one
    statement for every player of the batch, in key order (rows locked in a stable order)."""
    records = [
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
        records,
        # one statement shape whether best_solve is set or not (not one group per shape)
        execution_options={"render_nulls": True},
    )


# --- opening a daily -----------------------------------------------------------------------------


async def _first(conn: AsyncConnection, stmt: Executable) -> Any:
    """The statement's first row (None: none)."""
    return (await conn.execute(stmt)).first()


async def _missed(conn: AsyncConnection, tg_user_id: int, day: date) -> Puzzle | None:
    """The day before's puzzle when the player lost it (out of attempts)."""
    found = await conn.execute(
        select(DailyPuzzle.__table__)
        .join(DailyResult, DailyResult.day == DailyPuzzle.day)
        .where(
            DailyResult.day == day - timedelta(days=1),
            DailyResult.tg_user_id == tg_user_id,
            DailyResult.finished_at.is_not(None),
            DailyResult.cracked.is_(False),
        )
    )
    row = found.first()
    return None if row is None else rows.puzzle_from(row)


async def _room(conn: AsyncConnection, seen: Seen, new: NewDaily) -> str:
    """The chat's room's id: inserted when new, else told the language it speaks now."""
    chat = new.chat
    if seen.room is not None:
        await conn.execute(
            update(Room)
            .where(Room.id == seen.room.id, Room.language.is_distinct_from(new.language))
            .values(language=new.language)
        )
        return seen.room.id
    room_id = ids.mint(ids.ROOM)
    room = {
        "id": room_id,
        "chat_id": chat.chat_id,
        "thread_id": chat.thread_id,
        "title": chat.title[:255],
        "length": DEFAULT_LENGTH,
        "palette": None,
        "palette_size": DEFAULT_PALETTE_SIZE,
        "repeats": True,
        "language": new.language,
        "ceiling": chat.default_ceiling,
        "round_timeout_s": chat.round_timeout_s,
        "created": new.now,
    }
    await conn.execute(insert(Room).values(room))
    return room_id


async def _player(conn: AsyncConnection, seen: Seen, new: NewDaily, room_id: str) -> str:
    """The player's id: written when new or renamed."""
    chat = new.chat
    name = chat.name[:255]
    player_id = seen.player_id or ids.mint(ids.PLAYER)
    if seen.player_id is None or seen.player_name != name:
        player = {
            "id": player_id,
            "room_id": room_id,
            "tg_user_id": chat.tg_user_id,
            "display_name": name,
            "created": new.now,
        }
        stmt = sqlite_insert(Player).values(player)
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["room_id", "tg_user_id"],
                set_={"display_name": stmt.excluded.display_name},
            )
        )
    return player_id


async def _round(conn: AsyncConnection, new: NewDaily, room_id: str) -> int:
    """The daily's round and the player's result of the day; the round's id."""
    puzzle = new.puzzle
    rnd = {
        "room_id": room_id,
        "secret": "".join(puzzle.secret),
        "palette": "".join(puzzle.palette),
        "length": puzzle.length,
        "repeats": True,
        "started_at": new.now,
        "expires_at": new.expires_at,
        "kind": ROUND_DAILY,
        "max_attempts": puzzle.max_attempts,
    }
    inserted = await conn.execute(insert(Round).values(rnd))
    key = inserted.inserted_primary_key
    if key is None:  # pragma: no cover - an insert of one row has its key
        raise RuntimeError("the daily's round was inserted without an id")
    round_id = int(key[0])
    result = {
        "day": puzzle.day,
        "tg_user_id": new.chat.tg_user_id,
        "round_id": round_id,
        "display_name": new.chat.name[:255],
        "started_at": new.now,
        "finished_at": None,
        "cracked": False,
        "rows": "",
    }
    await conn.execute(insert(DailyResult).values(result))
    return round_id
