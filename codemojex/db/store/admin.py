"""Bans (per room) and the audit log of admin actions: written, trimmed by age. Parts of the
caller's transaction (`usecases.moderation`, `usecases.retention`): they never commit."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, delete, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import AuditLog, Ban, Player, UTCDateTime
from codemojex.db.store.errors import UnknownPlayer
from codemojex.values.clock import utcnow
from codemojex.values.types import Origin

if TYPE_CHECKING:
    from codemojex.db.unit import Unit


async def ban(tx: Unit, room_id: str, player_id: str, actor: int | None) -> bool:
    """Ban a player in one room (only that room: the same Telegram user plays on elsewhere).
    True if newly banned, False if already banned. UnknownPlayer if not a player of the room."""
    player_room = (
        await tx.session.execute(select(Player.room_id).where(Player.id == player_id))
    ).scalar()
    if player_room != room_id:
        raise UnknownPlayer(player_id)
    if await _player_banned(tx.session, room_id, player_id):
        return False
    try:
        async with tx.savepoint():
            tx.session.add(Ban(room_id=room_id, player_id=player_id, actor_tg_id=actor))
    except IntegrityError:
        if await _player_banned(tx.session, room_id, player_id):  # banned concurrently
            return False
        raise UnknownPlayer(player_id) from None
    return True


async def unban(tx: Unit, room_id: str, player_id: str, actor: int | None = None) -> bool:
    """Lift a ban. True if there was one. (`actor` is for symmetry; the bot audits.)"""
    result = await tx.session.execute(
        delete(Ban).where(Ban.room_id == room_id, Ban.player_id == player_id)
    )
    return bool(getattr(result, "rowcount", 0))


async def audit(
    tx: Unit,
    *,
    room_id: str | None,
    actor_tg_id: int | None,
    action: str,
    args: str | Mapping[str, Any] = "",
    allowed: bool,
) -> AuditLog:
    """Write one admin action (allowed or refused) to the audit log."""
    row = _row(room_id, actor_tg_id, action, args, allowed)
    tx.session.add(row)
    return row


# One statement text for both databases (both spell INSERT … ON CONFLICT and RETURNING alike):
# the row, unless the message has one already. On Postgres an insert racing another of the
# same message waits for it to commit, then does nothing.
_AUDIT_ONCE = text(
    """
    INSERT INTO audit_log (room_id, actor_tg_id, action, args, allowed, at, chat_id, message_id)
    VALUES (:room_id, :actor_tg_id, :action, :args, :allowed, :at, :chat_id, :message_id)
    ON CONFLICT (chat_id, message_id) WHERE message_id IS NOT NULL DO NOTHING
    RETURNING id
    """
).bindparams(bindparam("at", type_=UTCDateTime()))


async def audit_once(
    tx: Unit,
    *,
    room_id: str | None,
    actor_tg_id: int | None,
    action: str,
    args: str,
    allowed: bool,
    origin: Origin,
) -> bool:
    """Write the audit row of the admin command that came in `origin`, unless that message
    has one already: True when written now. A command's effect is written in the same
    transaction only when this is True, so it applies once per message, however often and
    however late the message is delivered."""
    row = _row(room_id, actor_tg_id, action, args, allowed)
    written = await tx.session.execute(
        _AUDIT_ONCE,
        {
            "room_id": row.room_id,
            "actor_tg_id": row.actor_tg_id,
            "action": row.action,
            "args": row.args,
            "allowed": row.allowed,
            "at": utcnow(),
            "chat_id": origin.chat_id,
            "message_id": origin.message_id,
        },
    )
    return written.first() is not None


async def trim_audit(tx: Unit, before: datetime, batch: int) -> int:
    """Delete up to `batch` audit rows older than `before`, oldest first; the number deleted.
    Two index walks: the ids from ix_audit_log_at, then the rows by primary key (a DELETE with
    the subquery inside plans as a scan of the whole table on Postgres). Safe to run from
    several workers at once."""
    oldest = select(AuditLog.id).where(AuditLog.at < before).order_by(AuditLog.at).limit(batch)
    doomed = list((await tx.session.execute(oldest)).scalars())
    if not doomed:
        return 0
    result = await tx.session.execute(delete(AuditLog).where(AuditLog.id.in_(doomed)))
    return int(getattr(result, "rowcount", 0) or 0)


def _row(
    room_id: str | None,
    actor_tg_id: int | None,
    action: str,
    args: str | Mapping[str, Any],
    allowed: bool,
) -> AuditLog:
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)
    return AuditLog(
        room_id=room_id, actor_tg_id=actor_tg_id, action=action[:32], args=text, allowed=allowed
    )


async def _player_banned(session: AsyncSession, room_id: str, player_id: str) -> bool:
    stmt = select(Ban.player_id).where(Ban.room_id == room_id, Ban.player_id == player_id)
    return (await session.execute(stmt)).first() is not None
