"""What the workers delete so it does not grow forever (`codemojex.worker.retention` paces
it): a batch of audit rows past their keep time, a batch of players' dailies past theirs. Each
one transaction opened here, under the maintenance bounds (no hot path's timeouts: `uow`)."""

from __future__ import annotations

from datetime import date, datetime

from codemojex.db.engine import Sessions
from codemojex.db.store import admin, daily
from codemojex.db.unit import uow


async def trim_audit(sessions: Sessions, before: datetime, batch: int) -> int:
    """Up to `batch` audit rows older than `before` deleted, oldest first; how many."""
    async with uow(sessions, maintenance=True) as tx:
        return await admin.trim_audit(tx, before, batch)


async def trim_daily(sessions: Sessions, before: date, batch: int) -> int:
    """Up to `batch` players' dailies of days before `before` deleted (their rounds, results and
    guesses), oldest first; how many."""
    async with uow(sessions, maintenance=True) as tx:
        return await daily.trim_daily(tx, before, batch)
