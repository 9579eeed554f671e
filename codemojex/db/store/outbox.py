"""The outbox: messages written in the transaction that decided them, posted by the sender.

A sender claims rows with a lease (FOR UPDATE SKIP LOCKED on Postgres), so two senders never
post the same row, posts them, and marks them sent; `sent_at` is only ever set once. What it
holds are `OutboxRow` values, not ORM objects: the claim, the release and the mark are each
one prepared statement, which is what a sender's turn costs the worker per post. Each is a
part of the caller's unit of work (the sender's books, `posting/sender/delivery.py`, one unit
each); what the outbox holds is looked up in `lookups.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, bindparam, exists, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import ReturningUpdate

from codemojex.db.models import Outbox, Round
from codemojex.values.clock import utcnow
from codemojex.values.types import KIND_KEYS_OFF, KIND_ROUND, Message, OutboxRow

if TYPE_CHECKING:
    from codemojex.db.unit import Unit


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


async def write_messages(tx: Unit, messages: Sequence[Message], now: datetime) -> None:
    """Queue messages in the caller's transaction, in order (their ids are the posting order)."""
    if not messages:
        return
    rows = message_rows(messages, now)
    # The rows go as parameters (one multi-row statement), not inside the statement, which
    # would then be compiled anew on every call.
    await tx.conn.execute(insert(Outbox), rows)
    await keys_off_written(tx, messages)


async def keys_off_written(tx: Unit, messages: Sequence[Message]) -> None:
    """After `messages` were queued: their keys_off rows that do not know their announcement
    yet are pointed at it (`_point_keys_off`)."""
    ended = [m.round_id for m in messages if m.kind == KIND_KEYS_OFF and m.reply_to is None]
    if ended:
        await _point_keys_off(tx.conn, [r for r in ended if r is not None])


async def _point_keys_off(conn: AsyncConnection, round_ids: list[int]) -> None:
    """Give the unsent keys_off rows of these rounds their announcement's message id, when it
    has one. Called where the round is closed (the announcement may be posted already) and
    where the announcement is marked sent (the round may be closed already): whichever comes
    second fills it in. (Closing holds the round's lock, which the announcement's update of
    the round waits for, so the second always sees what the first committed.)"""
    await conn.execute(
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


# The statements of the sender's books, built once (a statement built per call costs more CPU
# than the database spends on it): Core on the table, the rows coming back as plain values.
_TABLE = Outbox.metadata.tables[Outbox.__tablename__]
_T = _TABLE.c
_ROW_COLUMNS = tuple(getattr(_T, f.name) for f in fields(OutboxRow))
_ANNOUNCEMENT = _TABLE.alias("announcement")


def _not_ahead_of_its_announcement() -> ColumnElement[bool]:
    """Not a keys_off row whose round's announcement is still to be posted. Its edit needs the
    announcement's message id, which `mark_sent` fills in; taken before that (the announcement
    held by a sender that died, or claimed in the same batch) it would edit nothing and be
    marked done, leaving a finished round's keyboard up. Once the announcement is sent, or
    refused for good, the row is claimed as it stands."""
    a = _ANNOUNCEMENT.c
    return or_(
        _T.kind != KIND_KEYS_OFF,
        _T.reply_to_message_id.is_not(None),
        ~exists().where(
            a.chat_id == _T.chat_id,
            a.sent_at.is_(None),
            a.kind == KIND_ROUND,
            a.round_id == _T.round_id,
        ),
    )


def _claim_statement(*, of_chat: bool) -> ReturningUpdate[Any]:
    """Lease the oldest claimable rows and return them, in one statement: the rows are picked
    (FOR UPDATE SKIP LOCKED on Postgres: concurrent senders take disjoint rows without waiting
    on each other; SQLite serialises writers) and leased by the same UPDATE."""
    picked = select(_T.id).where(
        _T.sent_at.is_(None),
        or_(_T.claimed_until.is_(None), _T.claimed_until <= bindparam("now")),
        _not_ahead_of_its_announcement(),
    )
    if of_chat:
        picked = picked.where(_T.chat_id == bindparam("chat"))
    picked = picked.order_by(_T.id).limit(bindparam("limit")).with_for_update(skip_locked=True)
    return (
        update(_TABLE)
        .where(_T.id.in_(picked.scalar_subquery()))
        .values(claimed_until=bindparam("until"), claimed_by=bindparam("owner"))
        .returning(*_ROW_COLUMNS)
    )


_CLAIM_ANY = _claim_statement(of_chat=False)
_CLAIM_CHAT = _claim_statement(of_chat=True)
_RELEASE = (
    update(_TABLE)
    .where(
        _T.id.in_(bindparam("ids", expanding=True)),
        _T.sent_at.is_(None),
        _T.claimed_by == bindparam("owner"),
    )
    .values(claimed_until=None, claimed_by=None)
)
_MARK_SENT = (
    update(_TABLE)
    .where(_T.id.in_(bindparam("ids", expanding=True)), _T.sent_at.is_(None))
    .values(sent_at=bindparam("now"), sent_message_id=bindparam("message_id"), claimed_until=None)
    .returning(_T.id, _T.kind, _T.round_id)
)


async def claim_outbox(
    tx: Unit,
    limit: int,
    lease_s: float,
    owner: str,
    *,
    chat_id: int | None = None,
    now: datetime | None = None,
) -> list[OutboxRow]:
    """Take a lease of up to `limit` unsent rows (oldest first, optionally of one chat) for
    `owner`: nobody else is handed them until `now + lease_s`. Rows whose lease ran out (a
    sender died) are handed out again; concurrent senders take disjoint rows. Post them, then
    `mark_sent`; on a failure, `release_outbox`. (A sender dying between Telegram's answer and
    `mark_sent` can still lead to one re-post after the lease: the books themselves never say
    "sent" twice.)"""
    now = now or utcnow()
    params: dict[str, Any] = {
        "now": now,
        "limit": limit,
        "until": now + timedelta(seconds=lease_s),
        "owner": owner[:64],
    }
    if chat_id is not None:
        params["chat"] = chat_id
    result = await tx.conn.execute(_CLAIM_ANY if chat_id is None else _CLAIM_CHAT, params)
    return sorted((OutboxRow(*row) for row in result), key=lambda row: row.id)


async def release_outbox(tx: Unit, ids: Iterable[int], owner: str) -> int:
    """Give back unsent rows claimed by `owner` (e.g. after a 429) so they can be claimed again."""
    id_list = list(ids)
    if not id_list:
        return 0
    result = await tx.conn.execute(_RELEASE, {"ids": id_list, "owner": owner[:64]})
    return int(getattr(result, "rowcount", 0))


async def mark_sent(
    tx: Unit,
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
    params = {"ids": id_list, "now": now or utcnow(), "message_id": message_id}
    marked = (await tx.conn.execute(_MARK_SENT, params)).all()
    round_ids = [r.round_id for r in marked if r.kind == KIND_ROUND and r.round_id is not None]
    if round_ids and message_id is not None:
        await announcements_posted(tx, round_ids, message_id)
    return len(marked)


async def announcements_posted(tx: Unit, round_ids: list[int], message_id: int) -> None:
    """The announcements of these rounds were marked sent as Telegram message `message_id`:
    it becomes each round's `announce_message_id`, and their keys_off rows point at it."""
    await tx.conn.execute(
        update(Round)
        .where(Round.id.in_(round_ids), Round.announce_message_id.is_(None))
        .values(announce_message_id=message_id)
        .execution_options(synchronize_session=False)
    )
    await _point_keys_off(tx.conn, round_ids)
