"""How often an update is tried: one budget of tries per update, and what ends it.

Every failed try of an update counts, whatever failed: a bug, a statement that timed out, a
Redis or Postgres outage, Telegram failing a call made before the update's effect (`Before`).
Its tries travel with it when it is parked (state/inbox.py keeps them), so the budget is the
update's, not a process's.

- Within `TRIES` tries, it is tried again after `outages.pause_s(RETRIES.update, tries)` (a
  Telegram 429 after its own `retry_after`).
- Past them, it is tried again only while the failure is an outage (outages.py `outage_of`:
  Redis or Postgres unreachable, refusing connections, out of memory, failing over; Telegram
  failing before the effect): a generous budget then (`TRIES_WHILE_DOWN`, an outage of an
  hour and more), since an outage is backpressure, not a reason to give up. Where the
  component did answer, cutting the statement (a statement or lock timeout, a lost race:
  outages.py `answered`) or with a 5xx, its health probe decides (`OutageLog.down`): with the
  component answering the probe, it is no outage, and the third such try is the last.
- Past the budget, the door keeps the update as a dead letter and tells its sender
  (bot/door.py `Door`, bot/handling.py).

Telegram failing a call *before* the effect (the admin list of the chat, read to decide
whether a command may run) is waited out like any outage: its handler raises `Before` (a 429
carries Telegram's `retry_after`). A failure *after* the effect (an answer that could not be
posted) ends the update in app.py `on_error`: what it stored stays, and trying it again
could answer twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from telegram.error import RetryAfter

from codemojex.limits import RETRIES
from codemojex.outages import Component, answered, outage_of, pause_s, retry_after_ms

# Tries of an update while what it needs answers (a bug, a statement too slow, a lock held):
# the last one is the third.
TRIES: Final = 3
# Tries of an update while the health probe says what it needs is down: with the update
# policy's pause (up to RETRIES.update.cap_s, 2.5 s on average once capped), over an hour.
TRIES_WHILE_DOWN: Final = 1_500

Down = Callable[[Component], Awaitable[bool]]


class Before(Exception):
    """Telegram failed a call made before the update's effect (a read such as the chat's
    admin list): nothing was done, so the update is tried again, after Telegram's
    `retry_after` for a 429. The failure is the cause."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"Telegram failed before the effect: {type(cause).__name__}")
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Again:
    """Try the update again after `pause_s`; `outage`: it waits for a component (its sender
    may be told the bot is catching up)."""

    pause_s: float
    outage: bool


def component_of(error: BaseException) -> Component | None:
    """The component an update waits for after `error` (None: a bug)."""
    if isinstance(error, Before):
        return "telegram"
    component = outage_of(error)
    # Telegram failing after the effect ends the update in on_error: it never comes here.
    return component if component in ("redis", "postgres") else None


class TryBudget:
    """Decides, after each failed try, whether an update is tried again (`again`)."""

    def __init__(
        self, down: Down, *, tries: int = TRIES, tries_while_down: int = TRIES_WHILE_DOWN
    ) -> None:
        if not 1 <= tries <= tries_while_down:
            raise ValueError("a budget of tries needs one try, and no fewer while down")
        self._down = down
        self.tries = tries
        self.tries_while_down = tries_while_down

    async def again(self, error: BaseException, tries: int) -> Again | None:
        """After the `tries`-th failed try, failing with `error`: when to try again, or None
        (past the budget: a dead letter)."""
        component = component_of(error)
        pause = pause_s(RETRIES.update, tries)
        if isinstance(error, Before) and isinstance(error.cause, RetryAfter):
            pause = retry_after_ms(error.cause) / 1000
        if tries < self.tries:
            return Again(pause, component is not None)
        if component is None or tries >= self.tries_while_down:
            return None
        if isinstance(error, Before) and isinstance(error.cause, RetryAfter):
            return Again(pause, True)  # Telegram said it is limiting us, and for how long
        if not (isinstance(error, Before) or answered(error)):
            return Again(pause, True)  # unreachable, refusing, full, failing over: down
        return Again(pause, True) if await self._down(component) else None
