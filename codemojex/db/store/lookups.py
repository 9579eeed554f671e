"""What the processes look up: a room, a player, a room's card, a room's open round, the rounds
due to close, what the outbox holds, a ban. Reads only, each in the caller's read
(`codemojex.db.unit.reading`) or in a use-case's transaction; rows are read anew, never the
session's cached copy."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, TypeVar

from sqlalchemy import Select, and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import Ban, Outbox, Player, Room, Round

_Row = TypeVar("_Row")


async def _fresh_one(session: AsyncSession, stmt: Select[_Row]) -> _Row | None:
    """One row read anew from the database (not the session's cached copy)."""
    return (await session.execute(stmt.execution_options(populate_existing=True))).scalar()


# --- rooms and players ---------------------------------------------------------------------------


async def get_room(session: AsyncSession, room_id: str) -> Room | None:
    return await _fresh_one(session, select(Room).where(Room.id == room_id))


async def room_by_chat(session: AsyncSession, chat_id: int, thread_id: int = 0) -> Room | None:
    """The room of a chat, or of one forum topic of it (`thread_id`)."""
    stmt = select(Room).where(Room.chat_id == chat_id, Room.thread_id == thread_id)
    return await _fresh_one(session, stmt)


async def get_player(session: AsyncSession, player_id: str) -> Player | None:
    return await _fresh_one(session, select(Player).where(Player.id == player_id))


async def room_chats(session: AsyncSession, room_ids: Iterable[str]) -> list[int]:
    """The chats of these rooms."""
    stmt = select(Room.chat_id).where(Room.id.in_(list(room_ids)))
    return [int(c) for c in (await session.execute(stmt)).scalars()]


async def is_banned(session: AsyncSession, room_id: str, tg_user_id: int) -> bool:
    stmt = (
        select(Ban.player_id)
        .join(Player, Player.id == Ban.player_id)
        .where(Ban.room_id == room_id, Player.tg_user_id == tg_user_id)
    )
    return (await session.execute(stmt)).first() is not None


@dataclass(frozen=True, slots=True)
class RoomCard:
    """What taking a guess in a room needs, as the database has it: the room, its open
    round, its players' ids (Telegram user -> player) and its banned users."""

    room: Room
    open_round: Round | None
    seats: dict[int, str]
    banned: frozenset[int]


async def room_card(session: AsyncSession, room_id: str) -> RoomCard | None:
    """The room's card (None: no such room), read in one transaction: the bot keeps it in
    Redis (codemojex.state.cards) and reads it from here when Redis has lost it."""
    row = (
        await session.execute(
            select(Room, Round)
            .outerjoin(Round, and_(Round.room_id == Room.id, Round.ended_at.is_(None)))
            .where(Room.id == room_id)
            .execution_options(populate_existing=True)
        )
    ).first()
    seats = await session.execute(
        select(Player.tg_user_id, Player.id).where(Player.room_id == room_id)
    )
    banned = await session.execute(
        select(Player.tg_user_id)
        .join(Ban, and_(Ban.player_id == Player.id, Ban.room_id == Player.room_id))
        .where(Ban.room_id == room_id)
    )
    if row is None:
        return None
    return RoomCard(
        room=row[0],
        open_round=row[1],
        seats={int(tg): str(pid) for tg, pid in seats},
        banned=frozenset(int(tg) for tg in banned.scalars()),
    )


# --- rounds ---------------------------------------------------------------------------------------


async def open_round(session: AsyncSession, room_id: str) -> Round | None:
    stmt = select(Round).where(Round.room_id == room_id, Round.ended_at.is_(None))
    return await _fresh_one(session, stmt)


async def next_expiry(session: AsyncSession) -> datetime | None:
    """When the first open round runs out of time (None: no round is open). One probe of
    ix_rounds_open_expiry."""
    stmt = select(func.min(Round.expires_at)).where(Round.ended_at.is_(None))
    return (await session.execute(stmt)).scalar_one()


class DueRound(NamedTuple):
    """An open round whose time ran out."""

    id: int
    room_id: str
    expires_at: datetime
    kind: str  # values.types ROUND_GROUP or ROUND_DAILY


async def due_rounds(session: AsyncSession, now: datetime) -> list[DueRound]:
    """The open rounds whose time ran out, by id."""
    stmt = (
        select(Round.id, Round.room_id, Round.expires_at, Round.kind)
        .where(Round.ended_at.is_(None), Round.expires_at <= now)  # rounds.is_due
        .order_by(Round.id)
    )
    return [
        DueRound(int(i), str(room), at, str(kind))
        for i, room, at, kind in await session.execute(stmt)
    ]


# --- the outbox -----------------------------------------------------------------------------------


async def pending_outbox(
    session: AsyncSession, limit: int, chat_id: int | None = None
) -> list[Outbox]:
    """Unsent rows, oldest first (claimed or not: this is a view, the sender claims its own:
    `usecases.outbox`)."""
    stmt = select(Outbox).where(Outbox.sent_at.is_(None))
    if chat_id is not None:
        stmt = stmt.where(Outbox.chat_id == chat_id)
    stmt = stmt.order_by(Outbox.id).limit(limit).execution_options(populate_existing=True)
    return list((await session.execute(stmt)).scalars())


async def claims_end(session: AsyncSession, chat_id: int) -> datetime | None:
    """When the first claim on this chat's unsent rows runs out (None: none is claimed)."""
    stmt = select(func.min(Outbox.claimed_until)).where(
        Outbox.chat_id == chat_id, Outbox.sent_at.is_(None), Outbox.claimed_until.is_not(None)
    )
    return (await session.execute(stmt)).scalar()


async def chats_with_unsent(session: AsyncSession) -> list[int]:
    """Every chat with unsent rows, claimed or not. A distinct scan over the pending index,
    rather than the oldest rows, so that one flooded chat cannot hide the others."""
    stmt = select(Outbox.chat_id).where(Outbox.sent_at.is_(None)).distinct()
    return [int(c) for c in (await session.execute(stmt)).scalars()]
