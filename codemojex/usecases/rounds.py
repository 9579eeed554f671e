"""Starting and ending a round (won rounds end with their guesses: `usecases.guesses`): the
store loads and locks the rows (`db/store/rounds.py`), the game draws the round and writes what
is said (`codemojex.game.rounds`, the tap keyboard `codemojex.game.taps`), the store writes it
with its outbox rows, in one transaction opened here.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import Round, utcnow
from codemojex.db.store import rounds as rounds_store
from codemojex.db.store.outbox import write_messages
from codemojex.db.unit import uow
from codemojex.game import rounds, taps
from codemojex.locale import Lang, resolve
from codemojex.values.types import KIND_ROUND, ROUND_DAILY, TIMEOUT, Message


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
    concurrent calls open exactly one round; `UnknownRoom` when there is no such room.

    `language` is the starter's: a room that has none chosen yet adopts it (its first round
    decides); a room with one keeps it."""
    now = now or utcnow()
    async with uow(session):
        room = await rounds_store.room_to_start(session, room_id)
        room_language = resolve(await rounds_store.adopt_language(session, room, language))
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
        rnd = await rounds_store.add_round(
            session,
            Round(
                room_id=room.id,
                secret="".join(new.secret),
                palette="".join(new.palette),
                length=new.length,
                repeats=new.repeats,
                started_at=new.started_at,
                expires_at=new.expires_at,
            ),
        )
        announcement = Message(
            room.chat_id,
            new.announcement,
            KIND_ROUND,
            rnd.id,
            thread_id=room.thread_id or None,
            markup=taps.keyboard(rnd.id, new.palette),
        )
        await write_messages(session, [announcement], now)
    return rnd


async def close_round(
    session: AsyncSession, round_id: int, reason: str, *, now: datetime | None = None
) -> Round | None:
    """End a round without a winner (reason "timeout", or "endround": an admin's) and queue
    the reveal.

    Returns the round when this call closed it; None when it was already closed (no second
    reveal) or does not exist."""
    if not reason or len(reason) > 16:
        raise ValueError(f"bad end reason {reason!r}")
    now = now or utcnow()
    async with uow(session):
        rnd = await rounds_store.locked_round(session, round_id)
        if rnd is None or rnd.ended_at is not None:
            return None
        await _end_with_reveal(session, rnd, now, reason)
    return rnd


async def expire_rounds(
    session: AsyncSession, now: datetime, only: Collection[int] | None = None
) -> list[Round]:
    """Close every open round whose time ran out (expires_at, fixed when it started), or
    those of them in `only`, queueing a reveal for each. Idempotent: a closed round is
    skipped."""
    closed: list[Round] = []
    async with uow(session):
        for round_id in await rounds_store.due_round_ids(session, now, only):
            rnd = await rounds_store.locked_round(session, round_id)
            if rnd is None or rnd.ended_at is not None or not rounds.is_due(rnd.expires_at, now):
                continue
            await _end_with_reveal(session, rnd, now, TIMEOUT)
            closed.append(rnd)
    return closed


async def _end_with_reveal(session: AsyncSession, rnd: Round, now: datetime, reason: str) -> None:
    rounds_store.mark_ended(rnd, now, reason)
    if rnd.kind == ROUND_DAILY:
        # Its day is over unfinished: nothing is posted (a new code is out, and a reveal in
        # every unfinished player's chat at midnight would be a burst for nothing). The tap
        # keyboard stays: a tap on it is answered "this round is over".
        return
    chat_id, thread_id, language = await rounds_store.room_address(session, rnd.room_id)
    message = rounds.reveal(
        round_id=rnd.id,
        chat_id=chat_id,
        language=resolve(language),
        secret=rnd.secret,
        reason=reason,
        started_at=rnd.started_at,
        expires_at=rnd.expires_at,
        thread_id=thread_id or None,
    )
    keys_off = rounds.keys_off(
        round_id=rnd.id, chat_id=chat_id, announce_message_id=rnd.announce_message_id
    )
    await write_messages(session, [message, keys_off], now)
