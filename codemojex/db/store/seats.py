"""Players written with their guesses: the bot writes no row per guess.

The bot gives a Telegram user's first guess in a room a player id of its own minting (fixed
in Redis, first writer wins: posting/cards.py) and names the user in the job (`jobs.py`). The
score worker writes the player's row in the transaction that records the guess: inserted if
the (room, user) has none, renamed when the job carries a new name. The database's row wins:
when the (room, user) already has a player (Redis lost the id the bot had given, say), the
guess is recorded as that player's, whatever its lane is called.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, bindparam, or_, select, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.models import Player, UTCDateTime


@dataclass(frozen=True, slots=True)
class Seat:
    """A player as a guess job names them: its lane (the id the bot gave), the lane's room,
    the Telegram user, and the name when the job carries it."""

    lane: str
    room_id: str
    tg_user_id: int
    name: str | None = None

    @property
    def fallback_name(self) -> str:
        """A new row's name when no job named the player yet (the bot sends it with the
        first guess it takes from them; a retried job may be recorded after a later one)."""
        return f"player {self.tg_user_id}"


def by_lane(seats: Iterable[Seat]) -> dict[str, Seat]:
    """One seat per lane, the last named one winning (a batch is in order: the last name
    sent is the player's name now)."""
    out: dict[str, Seat] = {}
    for seat in seats:
        if seat.lane not in out or seat.name is not None:
            out[seat.lane] = seat
    return out


def distinct(seats: Iterable[Seat]) -> list[Seat]:
    """One seat per (room, user), the last named one winning."""
    out: dict[tuple[str, int], Seat] = {}
    for seat in seats:
        held = out.get((seat.room_id, seat.tg_user_id))
        if held is None or seat.name is not None:
            out[(seat.room_id, seat.tg_user_id)] = seat
    return list(out.values())


# One statement: the named players already there renamed, the new ones inserted (under the
# id their lane has). Both work on the statement's snapshot, so no row is written twice; a
# row another transaction inserts meanwhile is waited for and left alone (DO NOTHING), and
# the lookup that follows, a statement of its own, sees it.
_PG_SEAT = text(
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


async def seat_pg(conn: AsyncConnection, seats: list[Seat], now: datetime) -> None:
    if not seats:
        return
    await conn.execute(
        _PG_SEAT,
        {
            "ids": [s.lane for s in seats],
            "rooms": [s.room_id for s in seats],
            "users": [s.tg_user_id for s in seats],
            "names": [s.name for s in seats],
            "fallbacks": [s.fallback_name for s in seats],
            "now": now,
        },
    )


async def seat_portable(
    conn: AsyncConnection, seats: list[Seat], now: datetime
) -> dict[tuple[str, int], str]:
    """The same with portable statements (SQLite: its transactions are serialised); the
    player id of each (room, user)."""
    if not seats:
        return {}
    await conn.execute(
        sqlite_insert(Player).on_conflict_do_nothing(),
        [
            {"id": s.lane, "room_id": s.room_id, "tg_user_id": s.tg_user_id,
             "display_name": s.name or s.fallback_name, "created": now}
            for s in seats
        ],
    )  # fmt: skip
    for seat in seats:
        if seat.name is not None:
            await conn.execute(
                update(Player)
                .where(Player.room_id == seat.room_id, Player.tg_user_id == seat.tg_user_id)
                .values(display_name=seat.name)
            )
    rows = await conn.execute(
        select(Player.room_id, Player.tg_user_id, Player.id).where(
            or_(*(and_(Player.room_id == s.room_id, Player.tg_user_id == s.tg_user_id)
                  for s in seats))
        )
    )  # fmt: skip
    return {(room, int(user)): player for room, user, player in rows}
