"""What the workers delete so it does not grow forever: audit rows past their keep time, and
players' dailies (their results, rounds and guesses) past theirs.

Run from the round timer (worker/service.py): a bounded batch per tick while there is a
backlog, otherwise one look (one index probe) every TRIM_EVERY_S per worker.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Annotated, Final

from pydantic import Field

from codemojex import usecases
from codemojex.db.engine import Sessions
from codemojex.game.daily import day_of
from codemojex.values.bounds import within
from codemojex.values.clock import utcnow

# Days rows are kept (CODEMOJEX_AUDIT_KEEP_DAYS, CODEMOJEX_DAILY_KEEP_DAYS): the audit log of
# admin commands three months, players' daily rows (results, rounds, guesses) a month; their
# puzzles, streaks and histograms are kept for good. Ten years at most.
AUDIT_KEEP_DAYS: Final = 90
DAILY_KEEP_DAYS: Final = 30
KeepDays = Annotated[int, Field(ge=1, le=3650)]
# Rows deleted per round-timer tick while behind; otherwise one look every TRIM_EVERY_S.
TRIM_BATCH: Final = 1000
TRIM_EVERY_S: Final = 60.0

# Delete up to `batch` rows older than `before`; the number deleted.
Delete = Callable[[Sessions, datetime, int], Awaitable[int]]


class Trim:
    """Deletes rows older than `keep_days`, at most `batch` per call, with `delete`."""

    def __init__(
        self,
        keep_days: int,
        delete: Delete,
        *,
        batch: int,
        every_s: float = TRIM_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keep = timedelta(days=within(keep_days, KeepDays, "keep_days"))
        self.delete = delete
        self.batch = batch
        self.every_s = every_s
        self._clock = clock
        self._next = 0.0

    async def tick(self, sessionmaker: Sessions, today: datetime | None = None) -> int:
        """One batch when one is due; the number of rows deleted (older than `keep` before
        `today`, the game's now: utcnow unless given). A full batch makes the next one due at
        once (the next tick), a partial one every_s later."""
        now = self._clock()
        if now < self._next:
            return 0
        deleted = await self.delete(sessionmaker, (today or utcnow()) - self.keep, self.batch)
        self._next = now if deleted >= self.batch else now + self.every_s
        return deleted


class AuditTrim(Trim):
    """Audit rows older than CODEMOJEX_AUDIT_KEEP_DAYS."""

    def __init__(
        self,
        keep_days: int = AUDIT_KEEP_DAYS,
        *,
        batch: int = TRIM_BATCH,
        every_s: float = TRIM_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(keep_days, usecases.trim_audit, batch=batch, every_s=every_s, clock=clock)


async def _trim_daily(sessions: Sessions, before: datetime, batch: int) -> int:
    return await usecases.trim_daily(sessions, day_of(before), batch)


class DailyTrim(Trim):
    """Players' dailies of days more than CODEMOJEX_DAILY_KEEP_DAYS ago: the day `keep_days`
    ago is the oldest kept."""

    def __init__(
        self,
        keep_days: int = DAILY_KEEP_DAYS,
        *,
        batch: int = TRIM_BATCH,
        every_s: float = TRIM_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(keep_days, _trim_daily, batch=batch, every_s=every_s, clock=clock)
