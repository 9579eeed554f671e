"""Starting and ending a round (won rounds end with their guesses: `usecases.guesses`): the
store loads and locks the rows (`db/store/rounds.py`), the game draws the round and writes what
is said (`codemojex.game.rounds`, the tap keyboard `codemojex.game.taps`), the store writes it
with its outbox rows, in one transaction opened here.

A command does it once per message, however often and however late the message comes: a
round opened by /newgame records that message (a second round of the same message is refused
by a unique index), and an admin's /endround writes its audit row with the close
(`audit.first_time`), and ends only a round opened before it was sent
(`game.rounds.opened_before`): delivered again after a new round opened, it ends nothing.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from codemojex.db.engine import Sessions
from codemojex.db.models import Round
from codemojex.db.reading import reading
from codemojex.db.store import rounds as rounds_store
from codemojex.db.store.errors import CommandRepeated, RoundAlreadyOpen
from codemojex.db.store.outbox import write_messages
from codemojex.db.unit import Unit, uow
from codemojex.game import rounds, taps
from codemojex.locale import Lang, resolve
from codemojex.usecases.audit import Audit, first_time
from codemojex.values.clock import utcnow
from codemojex.values.types import ENDROUND, KIND_ROUND, ROUND_DAILY, TIMEOUT, Message, Origin


async def start_round(
    sessions: Sessions,
    room_id: str,
    rng: random.Random,
    *,
    now: datetime | None = None,
    language: Lang | None = None,
    origin: Origin | None = None,
) -> Round:
    """Open a round drawn by `rng` under the room's settings (length, palette, repeats: the
    round keeps them), and queue its announcement in the room's language. Raises
    `RoundAlreadyOpen` when the room has one: the partial unique index decides, so two
    concurrent calls open exactly one round; `UnknownRoom` when there is no such room.

    `language` is the starter's: a room that has none chosen yet adopts it (its first round
    decides); a room with one keeps it. `origin`: the command message asking for it, which
    the round records; `CommandRepeated` when that message opened a round already (open or
    ended since)."""
    now = now or utcnow()
    try:
        return await _start(sessions, room_id, rng, now, language, origin)
    except RoundAlreadyOpen:
        # The same message may have opened it meanwhile (another process that had it too).
        if origin is not None:
            async with reading(sessions) as session:
                if await rounds_store.round_of_origin(session, origin) is not None:
                    raise CommandRepeated(origin.chat_id, origin.message_id) from None
        raise


async def _start(
    sessions: Sessions,
    room_id: str,
    rng: random.Random,
    now: datetime,
    language: Lang | None,
    origin: Origin | None,
) -> Round:
    async with uow(sessions) as tx:
        opened = None if origin is None else await rounds_store.round_of_origin(tx.session, origin)
        if origin is not None and opened is not None:
            raise CommandRepeated(origin.chat_id, origin.message_id)
        room = await rounds_store.room_to_start(tx, room_id)
        room_language = resolve(await rounds_store.adopt_language(tx, room, language))
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
            tx,
            Round(
                room_id=room.id,
                secret="".join(new.secret),
                palette="".join(new.palette),
                length=new.length,
                repeats=new.repeats,
                started_at=new.started_at,
                expires_at=new.expires_at,
                origin_chat_id=None if origin is None else origin.chat_id,
                origin_message_id=None if origin is None else origin.message_id,
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
        await write_messages(tx, [announcement], now)
    return rnd


async def close_round(
    sessions: Sessions, round_id: int, reason: str, *, now: datetime | None = None
) -> Round | None:
    """End a round without a winner (reason "timeout", or "endround": an admin's) and queue
    the reveal.

    Returns the round when this call closed it; None when it was already closed (no second
    reveal) or does not exist."""
    if not reason or len(reason) > 16:
        raise ValueError(f"bad end reason {reason!r}")
    now = now or utcnow()
    async with uow(sessions) as tx:
        rnd = await rounds_store.locked_round(tx, round_id)
        if rnd is None or rnd.ended_at is not None:
            return None
        await _end_with_reveal(tx, rnd, now, reason)
    return rnd


@dataclass(frozen=True, slots=True)
class Ended:
    """What an admin's /endround came to: the round it `ended`, `none` open that it may end
    (none at all, or one opened after the command was sent), or `repeated` (its message took
    effect before: nothing this time)."""

    status: Literal["ended", "none", "repeated"]
    round: Round | None = None


async def end_round(
    sessions: Sessions, room_id: str, command: Audit, *, now: datetime | None = None
) -> Ended:
    """An admin's /endround (`command`: its audit row, written in the same transaction as the
    close): the room's open round ends, its secret revealed through the outbox, when it was
    opened before the command was sent; once per message."""
    now = now or utcnow()
    async with uow(sessions) as tx:
        if not await first_time(tx, command):
            return Ended("repeated")
        rnd = await rounds_store.locked_open_round(tx, room_id)
        if rnd is None or not rounds.opened_before(
            command.origin,
            origin_chat_id=rnd.origin_chat_id,
            origin_message_id=rnd.origin_message_id,
            started_at=rnd.started_at,
        ):
            return Ended("none")
        await _end_with_reveal(tx, rnd, now, ENDROUND)
    return Ended("ended", rnd)


async def expire_rounds(
    sessions: Sessions, now: datetime, only: Collection[int] | None = None
) -> list[Round]:
    """Close every open round whose time ran out (expires_at, fixed when it started), or
    those of them in `only`, queueing a reveal for each. Idempotent: a closed round is
    skipped."""
    closed: list[Round] = []
    async with uow(sessions) as tx:
        for round_id in await rounds_store.due_round_ids(tx.session, now, only):
            rnd = await rounds_store.locked_round(tx, round_id)
            if rnd is None or rnd.ended_at is not None or not rounds.is_due(rnd.expires_at, now):
                continue
            await _end_with_reveal(tx, rnd, now, TIMEOUT)
            closed.append(rnd)
    return closed


async def _end_with_reveal(tx: Unit, rnd: Round, now: datetime, reason: str) -> None:
    rounds_store.mark_ended(rnd, now, reason)
    if rnd.kind == ROUND_DAILY:
        # Its day is over unfinished: nothing is posted (a new code is out, and a reveal in
        # every unfinished player's chat at midnight would be a burst for nothing). The tap
        # keyboard stays: a tap on it is answered "this round is over".
        return
    chat_id, thread_id, language = await rounds_store.room_address(tx.session, rnd.room_id)
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
    await write_messages(tx, [message, keys_off], now)
