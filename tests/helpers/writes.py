"""The store's writes that no use-case wraps alone, each in a unit of work of its own, as the
tests call them: a ban, the outbox's rows and the sender's books. The processes make these
inside the use-cases' units (`codemojex.usecases`) and the sender's (`posting/sender`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.store import admin, outbox
from codemojex.db.unit import Db, uow
from codemojex.values.types import Message, OutboxRow


async def ban(session: AsyncSession, room_id: str, player_id: str, actor: int | None) -> bool:
    async with uow(session):
        return await admin.ban(session, room_id, player_id, actor)


async def unban(
    session: AsyncSession, room_id: str, player_id: str, actor: int | None = None
) -> bool:
    async with uow(session):
        return await admin.unban(session, room_id, player_id, actor)


async def write_messages(db: Db, messages: Sequence[Message], now: datetime) -> None:
    async with uow(db):
        await outbox.write_messages(db, messages, now)


async def claim_outbox(
    db: Db,
    limit: int,
    lease_s: float,
    owner: str,
    *,
    chat_id: int | None = None,
    now: datetime | None = None,
) -> list[OutboxRow]:
    async with uow(db):
        return await outbox.claim_outbox(db, limit, lease_s, owner, chat_id=chat_id, now=now)


async def release_outbox(db: Db, ids: Iterable[int], owner: str) -> int:
    async with uow(db):
        return await outbox.release_outbox(db, ids, owner)


async def mark_sent(
    db: Db, ids: Iterable[int], message_id: int | None, *, now: datetime | None = None
) -> int:
    async with uow(db):
        return await outbox.mark_sent(db, ids, message_id, now=now)
