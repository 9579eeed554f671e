"""The audit log of admin actions, allowed or refused (the bot's admin commands, the operators'
page), and what makes an admin command apply once per message: its row.

An admin command's row is keyed by the message it came in (`Audit.origin`: the chat and the
message id, unique in the table): `first_time` writes it in the transaction of the command's
effect, and the effect is written only when the row is new. A message delivered again, at
once or a day later, after a later command changed the same thing, finds its row and applies
nothing (bot/once.py says where this sits among the guards). The operators' page writes rows
with no message (`audit`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codemojex.db.engine import Sessions
from codemojex.db.models import AuditLog
from codemojex.db.store import admin
from codemojex.db.unit import Unit, uow
from codemojex.values.types import Origin

# What a use-case that writes Redis after its commit awaits right after the commit, before
# Redis: the bot marks its command done there (bot/once.py).
Committed = Callable[[], Awaitable[None]]


async def not_told() -> None:
    """A `Committed` for callers that need no word of the commit."""


@dataclass(frozen=True, slots=True)
class Audit:
    """An admin command's audit row, and the message it came in (what it applies once on).
    `applies` False: the message is known to have taken effect before (its mark in Redis says
    so), so nothing is written whatever the table holds, and only Redis is made what the
    database says."""

    room_id: str | None
    actor_tg_id: int | None
    action: str
    args: str
    allowed: bool
    origin: Origin
    applies: bool = True


async def first_time(tx: Unit, command: Audit) -> bool:
    """In the caller's transaction: the command's row written, True; or False, written
    nothing, when its message has a row already (it took effect before), or is known to have
    taken effect (`Audit.applies`)."""
    if not command.applies:
        return False
    return await admin.audit_once(
        tx,
        room_id=command.room_id,
        actor_tg_id=command.actor_tg_id,
        action=command.action,
        args=command.args,
        allowed=command.allowed,
        origin=command.origin,
    )


async def audit_command(sessions: Sessions, command: Audit) -> bool:
    """An admin command with no effect of its own in the database (refused, a usage error, a
    read such as /queue): its row alone, in one transaction. True when written now, False
    when its message had one (the command was answered before: not again)."""
    async with uow(sessions) as tx:
        return await first_time(tx, command)


async def audit(
    sessions: Sessions,
    *,
    room_id: str | None,
    actor_tg_id: int | None,
    action: str,
    args: str | Mapping[str, Any] = "",
    allowed: bool,
) -> AuditLog:
    """Write one admin action with no command message (the operators' page) to the log."""
    async with uow(sessions) as tx:
        return await admin.audit(
            tx,
            room_id=room_id,
            actor_tg_id=actor_tg_id,
            action=action,
            args=args,
            allowed=allowed,
        )
