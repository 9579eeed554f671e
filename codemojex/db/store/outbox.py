"""The outbox: messages written in the transaction that decided them, posted by the sender.

A sender claims rows with a lease (FOR UPDATE SKIP LOCKED on Postgres), so two senders never
post the same row, posts them, and marks them sent; `sent_at` is only ever set once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, exists, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import aliased
from sqlalchemy.orm.attributes import set_committed_value

from codemojex.db.models import Outbox, Round, utcnow
from codemojex.values.types import KIND_KEYS_OFF, KIND_ROUND, Message


def message_rows(messages: Sequence[Message], now: datetime) -> list[dict[str, Any]]:
    """The outbox rows of these messages, in order."""
    return [
        {
            "chat_id": m.chat_id,
            "text": m.text,
            "kind": m.kind,
            "reply_to_message_id": m.reply_to,
            "round_id": m.round_id,
            "guess_id": m.guess_id,
            "player_name": m.player_name,
            "thread_id": m.thread_id,
            "markup": m.markup,
            "created_at": now,
        }
        for m in messages
    ]


async def write_messages(
    db: AsyncSession | AsyncConnection, messages: Sequence[Message], now: datetime
) -> None:
    """Queue messages in the caller's transaction, in order (their ids are the posting order)."""
    if not messages:
        return
    rows = message_rows(messages, now)
    # The rows go as parameters (one multi-row statement), not inside the statement, which
    # would then be compiled anew on every call.
    await db.execute(insert(Outbox), rows)
    await keys_off_written(db, messages)


async def keys_off_written(db: AsyncSession | AsyncConnection, messages: Sequence[Message]) -> None:
    """After `messages` were queued: their keys_off rows that do not know their announcement
    yet are pointed at it (`_point_keys_off`)."""
    ended = [m.round_id for m in messages if m.kind == KIND_KEYS_OFF and m.reply_to is None]
    if ended:
        await _point_keys_off(db, [r for r in ended if r is not None])


async def _point_keys_off(db: AsyncSession | AsyncConnection, round_ids: list[int]) -> None:
    """Give the unsent keys_off rows of these rounds their announcement's message id, when it
    has one. Called where the round is closed (the announcement may be posted already) and
    where the announcement is marked sent (the round may be closed already): whichever comes
    second fills it in. (Closing holds the round's lock, which the announcement's update of
    the round waits for, so the second always sees what the first committed.)"""
    await db.execute(
        update(Outbox)
        .where(
            Outbox.kind == KIND_KEYS_OFF,
            Outbox.round_id.in_(round_ids),
            Outbox.sent_at.is_(None),
            Outbox.reply_to_message_id.is_(None),
        )
        .values(
            reply_to_message_id=select(Round.announce_message_id)
            .where(Round.id == Outbox.round_id)
            .scalar_subquery()
        )
        .execution_options(synchronize_session=False)
    )


async def pending_outbox(
    session: AsyncSession, limit: int, chat_id: int | None = None
) -> list[Outbox]:
    """Unsent rows, oldest first (claimed or not: this is a view, `claim_outbox` is for senders)."""
    stmt = select(Outbox).where(Outbox.sent_at.is_(None))
    if chat_id is not None:
        stmt = stmt.where(Outbox.chat_id == chat_id)
    rows = list(
        (
            await session.execute(
                stmt.order_by(Outbox.id).limit(limit).execution_options(populate_existing=True)
            )
        ).scalars()
    )
    await session.commit()
    return rows


async def chats_with_unsent(session: AsyncSession) -> list[int]:
    """Every chat with unsent rows, claimed or not. A distinct scan over the pending index,
    rather than the oldest rows, so that one flooded chat cannot hide the others."""
    stmt = select(Outbox.chat_id).where(Outbox.sent_at.is_(None)).distinct()
    chats = [int(c) for c in (await session.execute(stmt)).scalars()]
    await session.commit()
    return chats


async def claim_outbox(
    session: AsyncSession,
    limit: int,
    lease_s: float,
    owner: str,
    *,
    chat_id: int | None = None,
    now: datetime | None = None,
) -> list[Outbox]:
    """Take a lease of up to `limit` unsent rows (oldest first, optionally of one chat) for
    `owner`: nobody else is handed them until `now + lease_s`. Rows whose lease ran out (a
    sender died) are handed out again. On Postgres the rows are picked with FOR UPDATE SKIP
    LOCKED, so concurrent senders take disjoint rows without waiting on each other; SQLite
    serialises the whole claim. Post them, then `mark_sent`; on a failure, `release_outbox`.
    (A sender dying between Telegram's answer and `mark_sent` can still lead to one re-post
    after the lease: the books themselves never say "sent" twice.)"""
    now = now or utcnow()
    stmt = select(Outbox).where(
        Outbox.sent_at.is_(None),
        or_(Outbox.claimed_until.is_(None), Outbox.claimed_until <= now),
        _not_ahead_of_its_announcement(),
    )
    if chat_id is not None:
        stmt = stmt.where(Outbox.chat_id == chat_id)
    stmt = stmt.order_by(Outbox.id).limit(limit).with_for_update(skip_locked=True)
    try:
        rows = list(
            (await session.execute(stmt.execution_options(populate_existing=True))).scalars()
        )
        until = now + timedelta(seconds=lease_s)
        if rows:
            # One statement for the lease of every row (not one per row at the flush): a
            # busy chat's claim takes dozens.
            await session.execute(
                update(Outbox)
                .where(Outbox.id.in_([row.id for row in rows]))
                .values(claimed_until=until, claimed_by=owner[:64])
                .execution_options(synchronize_session=False)
            )
            for row in rows:
                set_committed_value(row, "claimed_until", until)
                set_committed_value(row, "claimed_by", owner[:64])
        await session.commit()
        return rows
    except BaseException:
        await session.rollback()
        raise


def _not_ahead_of_its_announcement() -> ColumnElement[bool]:
    """Not a keys_off row whose round's announcement is still to be posted. Its edit needs the
    announcement's message id, which `mark_sent` fills in; taken before that (the announcement
    held by a sender that died, or claimed in the same batch) it would edit nothing and be
    marked done, leaving a finished round's keyboard up. Once the announcement is sent, or
    refused for good, the row is claimed as it stands."""
    announcement = aliased(Outbox)
    return or_(
        Outbox.kind != KIND_KEYS_OFF,
        Outbox.reply_to_message_id.is_not(None),
        ~exists().where(
            announcement.chat_id == Outbox.chat_id,
            announcement.sent_at.is_(None),
            announcement.kind == KIND_ROUND,
            announcement.round_id == Outbox.round_id,
        ),
    )


async def release_outbox(session: AsyncSession, ids: Iterable[int], owner: str) -> int:
    """Give back unsent rows claimed by `owner` (e.g. after a 429) so they can be claimed again."""
    id_list = list(ids)
    if not id_list:
        return 0
    result = await session.execute(
        update(Outbox)
        .where(Outbox.id.in_(id_list), Outbox.sent_at.is_(None), Outbox.claimed_by == owner[:64])
        .values(claimed_until=None, claimed_by=None)
    )
    await session.commit()
    return int(getattr(result, "rowcount", 0))


async def mark_sent(
    session: AsyncSession,
    ids: Iterable[int],
    message_id: int | None,
    *,
    now: datetime | None = None,
) -> int:
    """Record that rows were posted (as Telegram message `message_id`). Only rows not yet sent
    are touched, so a row is never "sent" twice in the books; returns how many were marked.
    A round announcement that is marked sent also becomes its round's `announce_message_id`."""
    id_list = list(ids)
    if not id_list:
        return 0
    now = now or utcnow()
    try:
        marked = (
            await session.execute(
                update(Outbox)
                .where(Outbox.id.in_(id_list), Outbox.sent_at.is_(None))
                .values(sent_at=now, sent_message_id=message_id, claimed_until=None)
                .returning(Outbox.id, Outbox.kind, Outbox.round_id)
                .execution_options(synchronize_session=False)
            )
        ).all()
        round_ids = [r.round_id for r in marked if r.kind == KIND_ROUND and r.round_id is not None]
        if round_ids and message_id is not None:
            await session.execute(
                update(Round)
                .where(Round.id.in_(round_ids), Round.announce_message_id.is_(None))
                .values(announce_message_id=message_id)
                .execution_options(synchronize_session=False)
            )
            await _point_keys_off(session, round_ids)
        await session.commit()
        return len(marked)
    except BaseException:
        await session.rollback()
        raise
