"""What the workers delete so it does not grow forever: audit rows past their keep time.

Run from the round timer (worker/service.py): a bounded batch per tick while there is a
backlog, otherwise one look (one probe of ix_audit_log_at) every AUDIT_TRIM_EVERY_S per worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import store
from codemojex.db.models import utcnow
from codemojex.limits import AUDIT_TRIM_BATCH, AUDIT_TRIM_EVERY_S


class AuditTrim:
    """Deletes audit rows older than `keep_days`, at most `batch` per call."""

    def __init__(
        self,
        keep_days: int,
        *,
        batch: int = AUDIT_TRIM_BATCH,
        every_s: float = AUDIT_TRIM_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keep = timedelta(days=keep_days)
        self.batch = batch
        self.every_s = every_s
        self._clock = clock
        self._next = 0.0

    async def tick(self, sessionmaker: async_sessionmaker[AsyncSession]) -> int:
        """One batch when one is due; the number of rows deleted. A full batch makes the next
        one due at once (the next tick), a partial one every_s later."""
        now = self._clock()
        if now < self._next:
            return 0
        async with sessionmaker() as session:
            deleted = await store.trim_audit(session, utcnow() - self.keep, self.batch)
        self._next = now if deleted >= self.batch else now + self.every_s
        return deleted
