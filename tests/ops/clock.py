"""A monotonic clock the test moves: `clock()` reads it, `await clock.sleep(s)` waits until the
test has moved it s seconds on (`advance`), so a page's delays and budgets run on the test's
time, with no real waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class ManualClock:
    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    @property
    def sleeping(self) -> int:
        return len(self._sleepers)

    async def sleep(self, seconds: float) -> None:
        waker = asyncio.get_running_loop().create_future()
        entry = (self.now + seconds, waker)
        self._sleepers.append(entry)
        try:
            await waker
        finally:
            if entry in self._sleepers:  # cancelled before its time
                self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        """Move the clock on and wake every sleeper whose time has come."""
        self.now += seconds
        due = [entry for entry in self._sleepers if entry[0] <= self.now]
        for entry in due:
            self._sleepers.remove(entry)
            if not entry[1].done():
                entry[1].set_result(None)


async def settled(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    """Wait (in real time, a few ms at a time) until `condition()` holds: the requests in flight
    have each been answered or are waiting on the test's clock."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"never settled: {what}"
        await asyncio.sleep(0.005)
