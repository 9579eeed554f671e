"""The store's writes that no use-case wraps alone, each in a unit of work of its own, as the
tests call them: a ban, the outbox's rows and the sender's books. The processes make these
inside the use-cases' units (`codemojex.usecases`) and the sender's (`posting/sender`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from codemojex.db.engine import Sessions, backend_of
from codemojex.db.store import admin, outbox
from codemojex.db.unit import uow
from codemojex.values.clock import utcnow
from codemojex.values.types import Message, OutboxRow


async def ban(sessions: Sessions, room_id: str, player_id: str, actor: int | None) -> bool:
    async with uow(sessions) as tx:
        return await admin.ban(tx, room_id, player_id, actor)


async def unban(sessions: Sessions, room_id: str, player_id: str, actor: int | None = None) -> bool:
    async with uow(sessions) as tx:
        return await admin.unban(tx, room_id, player_id, actor)


async def write_messages(sessions: Sessions, messages: Sequence[Message], now: datetime) -> None:
    async with uow(sessions) as tx:
        await outbox.write_messages(tx, messages, now)


async def claim_outbox(
    sessions: Sessions,
    limit: int,
    lease_s: float,
    owner: str,
    *,
    chat_id: int | None = None,
    now: datetime | None = None,
) -> list[OutboxRow]:
    async with uow(sessions) as tx:
        return await outbox.claim_outbox(tx, limit, lease_s, owner, chat_id=chat_id, now=now)


async def release_outbox(sessions: Sessions, ids: Iterable[int], owner: str) -> int:
    async with uow(sessions) as tx:
        return await outbox.release_outbox(tx, ids, owner)


async def mark_sent(
    sessions: Sessions, ids: Iterable[int], message_id: int | None, *, now: datetime | None = None
) -> int:
    async with uow(sessions) as tx:
        return await outbox.mark_sent(tx, ids, message_id, now=now)


async def mark_sent_many(
    sessions: Sessions, marks: Sequence[tuple[Sequence[int], int | None]]
) -> int:
    async with uow(sessions) as tx:
        return await backend_of(tx.conn).mark_sent_many(tx, marks, utcnow())
