"""Opening, closing and expiring rounds: `codemojex.game.rounds` decides what is drawn and said,
this module writes it. Winning a round is recorded with the guesses (`store.guesses`).

One open round per room is a partial unique index: two concurrent starts open exactly one.
Closing locks the round row, as recording a guess does, so a round is closed once and a guess
is scored either before the close or as late after it.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import Room, Round, utcnow
from codemojex.db.store.errors import RoundAlreadyOpen, StoreError, UnknownRoom
from codemojex.db.store.outbox import write_messages
from codemojex.game import rounds, taps
from codemojex.game.types import KIND_ROUND, ROUND_DAILY, TIMEOUT, Message
from codemojex.locale import Lang, resolve


async def open_round(session: AsyncSession, room_id: str) -> Round | None:
    stmt = (
        select(Round)
        .where(Round.room_id == room_id, Round.ended_at.is_(None))
        .execution_options(populate_existing=True)
    )
    rnd = (await session.execute(stmt)).scalar_one_or_none()
    await session.commit()
    return rnd


async def start_round(
    session: AsyncSession,
    room_id: str,
    rng: random.Random,
    *,
    now: datetime | None = None,
    language: Lang | None = None,
) -> Round:
    """Open a round drawn by `rng` under the room's settings (length, palette, repeats: the
    round keeps them), and queue its announcement in the room's language. Raises
    `RoundAlreadyOpen` when the room has one: the partial unique index decides, so two
    concurrent calls open exactly one round.

    `language` is the starter's: a room that has none chosen yet adopts it (its first round
    decides); a room with one keeps it."""
    now = now or utcnow()
    try:
        room = (
            await session.execute(
                select(Room).where(Room.id == room_id).execution_options(populate_existing=True)
            )
        ).scalar_one_or_none()
        if room is None:
            raise UnknownRoom(room_id)
        existing = await _open_round_id(session, room_id)
        if existing is not None:
            raise RoundAlreadyOpen(room_id, existing)
        room_language = await _adopt_language(session, room, language)
        new = rounds.new_round(
            length=room.length,
            palette=room.palette_emojis,
            palette_size=room.palette_size,
            repeats=room.repeats,
            timeout_s=room.round_timeout_s,
            rng=rng,
            now=now,
            language=room_language,
        )
        rnd = Round(
            room_id=room.id,
            secret="".join(new.secret),
            palette="".join(new.palette),
            length=new.length,
            repeats=new.repeats,
            started_at=new.started_at,
            expires_at=new.expires_at,
        )
        try:
            # A savepoint, so that losing the race leaves the caller's objects alone.
            async with session.begin_nested():
                session.add(rnd)
        except IntegrityError:
            # `from None`: the failed INSERT's parameters (the secret) stay out of tracebacks.
            raise RoundAlreadyOpen(room_id, await _open_round_id(session, room_id)) from None
        announcement = Message(
            room.chat_id,
            new.announcement,
            KIND_ROUND,
            rnd.id,
            thread_id=room.thread_id or None,
            markup=taps.keyboard(rnd.id, new.palette),
        )
        await write_messages(session, [announcement], now)
        await session.commit()
        return rnd
    except StoreError:
        await session.commit()  # nothing was written: end the read transaction
        raise
    except BaseException:
        await session.rollback()
        raise


async def _adopt_language(session: AsyncSession, room: Room, language: Lang | None) -> Lang:
    """The room's language; a room without one takes `language` (only if still without one
    when written: an admin's concurrent /settings lang=… wins)."""
    if room.language is None and language is not None:
        await session.execute(
            update(Room)
            .where(Room.id == room.id, Room.language.is_(None))
            .values(language=language)
        )
        stmt = select(Room.language).where(Room.id == room.id)
        room.language = (await session.execute(stmt)).scalar_one()
    return resolve(room.language)


async def _open_round_id(session: AsyncSession, room_id: str) -> int | None:
    stmt = select(Round.id).where(Round.room_id == room_id, Round.ended_at.is_(None))
    return (await session.execute(stmt)).scalar_one_or_none()


async def close_round(
    session: AsyncSession, round_id: int, reason: str, *, now: datetime | None = None
) -> Round | None:
    """End a round without a winner (reason "timeout" or "endround") and queue the reveal.

    Returns the round when this call closed it; None when it was already closed (no second
    reveal) or does not exist."""
    if not reason or len(reason) > 16:
        raise ValueError(f"bad end reason {reason!r}")
    now = now or utcnow()
    try:
        rnd = await _locked_round(session, round_id)
        if rnd is None or rnd.ended_at is not None:
            await session.commit()
            return None
        await _close_with_reveal(session, rnd, now, reason)
        await session.commit()
        return rnd
    except BaseException:
        await session.rollback()
        raise


async def next_expiry(session: AsyncSession) -> datetime | None:
    """When the first open round runs out of time (None: no round is open). One probe of
    ix_rounds_open_expiry."""
    stmt = select(func.min(Round.expires_at)).where(Round.ended_at.is_(None))
    try:
        return (await session.execute(stmt)).scalar_one()
    finally:
        await session.commit()


async def due_rounds(session: AsyncSession, now: datetime) -> list[tuple[int, str, datetime]]:
    """The open rounds whose time ran out: (id, room id, expires_at), by id."""
    stmt = (
        select(Round.id, Round.room_id, Round.expires_at)
        .where(Round.ended_at.is_(None), Round.expires_at <= now)  # rounds.is_due
        .order_by(Round.id)
    )
    try:
        return [(int(i), str(room), at) for i, room, at in await session.execute(stmt)]
    finally:
        await session.commit()


async def expire_rounds(
    session: AsyncSession, now: datetime, only: Collection[int] | None = None
) -> list[Round]:
    """Close every open round whose time ran out (expires_at, fixed when it started), or
    those of them in `only`, queueing a reveal for each. Idempotent: a closed round is
    skipped."""
    due_stmt = (
        select(Round.id)
        .where(Round.ended_at.is_(None), Round.expires_at <= now)  # rounds.is_due
        .order_by(Round.id)  # one lock order for every caller
    )
    if only is not None:
        if not only:
            return []
        due_stmt = due_stmt.where(Round.id.in_(sorted(only)))
    try:
        due = list((await session.execute(due_stmt)).scalars())
        closed: list[Round] = []
        for round_id in due:
            rnd = await _locked_round(session, round_id)
            if rnd is None or rnd.ended_at is not None or not rounds.is_due(rnd.expires_at, now):
                continue
            await _close_with_reveal(session, rnd, now, TIMEOUT)
            closed.append(rnd)
        await session.commit()
        return closed
    except BaseException:
        await session.rollback()
        raise


async def _locked_round(session: AsyncSession, round_id: int) -> Round | None:
    # FOR NO KEY UPDATE: exclusive among guesses and closers of the round, yet rows that only
    # reference the round (outbox, guesses: FOR KEY SHARE) are not held up by it.
    stmt = (
        select(Round)
        .where(Round.id == round_id)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    return (await session.execute(stmt)).scalar_one_or_none()


async def _close_with_reveal(session: AsyncSession, rnd: Round, now: datetime, reason: str) -> None:
    rnd.ended_at = now
    rnd.end_reason = reason
    if rnd.kind == ROUND_DAILY:
        # Its day is over unfinished: nothing is posted (a new code is out, and a reveal in
        # every unfinished player's chat at midnight would be a burst for nothing). The tap
        # keyboard stays: a tap on it is answered "this round is over".
        return
    chat_id, thread_id, language = (
        await session.execute(
            select(Room.chat_id, Room.thread_id, Room.language).where(Room.id == rnd.room_id)
        )
    ).one()
    message = rounds.reveal(
        round_id=rnd.id,
        chat_id=int(chat_id),
        language=resolve(language),
        secret=rnd.secret,
        reason=reason,
        started_at=rnd.started_at,
        expires_at=rnd.expires_at,
        thread_id=int(thread_id) or None,
    )
    keys_off = rounds.keys_off(
        round_id=rnd.id, chat_id=int(chat_id), announce_message_id=rnd.announce_message_id
    )
    await write_messages(session, [message, keys_off], now)
