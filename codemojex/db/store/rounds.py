"""A round's rows as a transaction writes them: a new round, a round locked to close it, the
rounds whose time ran out. `codemojex.usecases.rounds` opens and closes rounds with these (the
game's `rounds` draws them and writes what is said); winning one is part of recording its
guesses.

One open round per room is a partial unique index: two concurrent starts open exactly one.
Closing locks the round row, as recording a guess does, so a round is closed once and a guess
is scored either before the close or as late after it.

All of them are parts of the caller's transaction: they never commit. Looking a room's open
round up, and the rounds due to close, is `lookups.py`.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import Room, Round
from codemojex.db.store.errors import RoundAlreadyOpen, UnknownRoom
from codemojex.values.types import Origin

if TYPE_CHECKING:
    from codemojex.db.unit import Unit


async def room_to_start(tx: Unit, room_id: str) -> Room:
    """The room, read fresh, about to get a new round: `UnknownRoom` when there is none,
    `RoundAlreadyOpen` when it has an open round."""
    room = (
        await tx.session.execute(
            select(Room).where(Room.id == room_id).execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if room is None:
        raise UnknownRoom(room_id)
    existing = await _open_round_id(tx.session, room_id)
    if existing is not None:
        raise RoundAlreadyOpen(room_id, existing)
    return room


async def adopt_language(tx: Unit, room: Room, language: str | None) -> str | None:
    """The room's language; a room without one takes `language` (only if still without one
    when written: an admin's concurrent /settings lang=… wins)."""
    if room.language is None and language is not None:
        await tx.session.execute(
            update(Room)
            .where(Room.id == room.id, Room.language.is_(None))
            .values(language=language)
        )
        stmt = select(Room.language).where(Room.id == room.id)
        room.language = (await tx.session.execute(stmt)).scalar_one()
    return room.language


async def add_round(tx: Unit, rnd: Round) -> Round:
    """Insert a new round (its id is set on return); `RoundAlreadyOpen` when a concurrent start
    opened the room's round first."""
    try:
        # A savepoint, so that losing the race leaves the caller's objects alone.
        async with tx.savepoint():
            tx.session.add(rnd)
    except IntegrityError:
        # `from None`: the failed INSERT's parameters (the secret) stay out of tracebacks.
        raise RoundAlreadyOpen(rnd.room_id, await _open_round_id(tx.session, rnd.room_id)) from None
    return rnd


async def _open_round_id(session: AsyncSession, room_id: str) -> int | None:
    stmt = select(Round.id).where(Round.room_id == room_id, Round.ended_at.is_(None))
    return (await session.execute(stmt)).scalar_one_or_none()


async def round_of_origin(session: AsyncSession, origin: Origin) -> int | None:
    """The round the command message `origin` opened, if any (open or ended)."""
    stmt = select(Round.id).where(
        Round.origin_chat_id == origin.chat_id, Round.origin_message_id == origin.message_id
    )
    return (await session.execute(stmt)).scalar_one_or_none()


async def locked_open_round(tx: Unit, room_id: str) -> Round | None:
    """The room's open round, locked as `locked_round` locks it (None: none open, or it
    closed between the look and the lock)."""
    round_id = await _open_round_id(tx.session, room_id)
    if round_id is None:
        return None
    rnd = await locked_round(tx, round_id)
    return rnd if rnd is not None and rnd.ended_at is None else None


async def locked_round(tx: Unit, round_id: int) -> Round | None:
    # FOR NO KEY UPDATE: exclusive among guesses and closers of the round, yet rows that only
    # reference the round (outbox, guesses: FOR KEY SHARE) are not held up by it.
    stmt = (
        select(Round)
        .where(Round.id == round_id)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    return (await tx.session.execute(stmt)).scalar_one_or_none()


def mark_ended(rnd: Round, now: datetime, reason: str) -> None:
    """The locked round ends now (written with the caller's commit)."""
    rnd.ended_at = now
    rnd.end_reason = reason


async def room_address(session: AsyncSession, room_id: str) -> tuple[int, int, str | None]:
    """Where a room's messages go and in what: (chat id, forum topic or 0, language)."""
    chat_id, thread_id, language = (
        await session.execute(
            select(Room.chat_id, Room.thread_id, Room.language).where(Room.id == room_id)
        )
    ).one()
    return int(chat_id), int(thread_id), language


async def due_round_ids(
    session: AsyncSession, now: datetime, only: Collection[int] | None = None
) -> list[int]:
    """The open rounds whose time ran out (expires_at, fixed when they started), or those of
    them in `only`, in id order: one lock order for every caller."""
    if only is not None and not only:
        return []
    stmt = (
        select(Round.id)
        .where(Round.ended_at.is_(None), Round.expires_at <= now)  # rounds.is_due
        .order_by(Round.id)
    )
    if only is not None:
        stmt = stmt.where(Round.id.in_(sorted(only)))
    return list((await session.execute(stmt)).scalars())
