"""The door's handling of one update (door.py): its handlers run in tries, each bounded, until
they finish or the update is given up as a dead letter.

Failures: the handlers' one error handler (app.py `on_error`) hands the failure here
(`failed`). Every failed try counts in the update's one budget of tries (bot/tries.py
`TryBudget`): a bug, a statement that timed out, and Telegram failing before the effect are
tried again a few times; a Redis, Postgres or Telegram outage is waited out for as long as it
lasts (where the component answered, as long as its health probe says it is down). Meanwhile
the update stays at its key's head (the player's order holds through it), its sender told
once that the bot is catching up once it is past its deadline; the door's clock (clock.py)
parks it, if Redis can keep it. Past the budget, a dead letter. Telegram failing to take an
answer finishes the update (its effect is stored; the answer was a courtesy). A try is
bounded by `attempt_s`, past which it is cancelled and counts as failed.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from telegram import Update
from telegram.ext import Application

from codemojex.bot.order import Behind
from codemojex.bot.ticket import DoorHooks, Settlement, Ticket
from codemojex.bot.tries import TryBudget
from codemojex.limits import RETRIES
from codemojex.outages import OUTAGES, pause_s
from codemojex.state.inbox import Inbox

log = logging.getLogger(__name__)

# An unreadable body is kept up to this many characters (an update is a few kB).
DEAD_TEXT_MAX: Final = 16_384
WHERE = "the bot's inbox"

AnyApplication = Application[Any, Any, Any, Any, Any, Any]


class TryTimedOut(Exception):
    """A try of an update ran past `attempt_s` and was cancelled."""


class _Failure:
    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: BaseException | None = None


# The try being run in this task: on_error (in the same task, PTB awaits error handlers
# inline) books its failure here.
_TRY: contextvars.ContextVar[_Failure | None] = contextvars.ContextVar("door_try", default=None)


def failed(error: BaseException) -> None:
    """The handlers' error handler hands their failure to the door's try that ran them."""
    current = _TRY.get()
    if current is not None and current.error is None:
        current.error = error


class Handling:
    """Runs an update's handlers until it is done or dead (module docstring), `concurrency`
    tries at once across keys."""

    def __init__(
        self,
        application: AnyApplication,
        inbox: Inbox,
        hooks: DoorHooks,
        spawn: Callable[[Awaitable[Any], str], asyncio.Task[Any]],
        counts: Counter[str],
        *,
        concurrency: int,
        deadline_s: float,
        attempt_s: float,
        tries: int,
    ) -> None:
        self._app = application
        self._inbox = inbox
        self._hooks = hooks
        self._spawn = spawn
        self._counts = counts
        self._slots = asyncio.Semaphore(concurrency)
        self._deadline_s = deadline_s
        self._attempt_s = attempt_s
        self._budget = TryBudget(hooks.down, tries=tries)

    async def handle(self, ticket: Ticket) -> Settlement | Literal["behind"] | None:
        """Try `ticket` until its handlers finish ("done") or it is given up ("dead", kept in
        the dead letters); "behind" when an older update of its key is parked by another
        process (order.py `Behind`); None when it was dropped meanwhile (given back: Telegram
        sends it again)."""
        while True:
            async with self._slots:
                error = await self._try(ticket)
            if ticket.dropped:
                return None
            if error is None:
                return "done"
            if isinstance(error, Behind):
                return "behind"  # nothing was done: the door parks it behind its key
            ticket.tries += 1
            again = await self._budget.again(error, ticket.tries)
            waits = again is not None and again.outage
            self._counts["outage_tries" if waits else "failed_tries"] += 1
            if again is None:
                await self._bury(ticket, error)
                return "dead"
            ticket.waits = again.outage
            if again.outage and time.monotonic() - ticket.born >= self._deadline_s:
                # Held past its deadline: its sender hears why, once while the outage lasts
                # (a blip retried at once says nothing).
                ticket.told = True
                self._spawn(self._hooks.delayed(ticket.update), "delayed")
            await asyncio.sleep(again.pause_s)
            if ticket.dropped:
                return None

    async def _try(self, ticket: Ticket) -> BaseException | None:
        """One try of the update's handlers: the failure they had, None when they finished."""
        box = _Failure()
        token = _TRY.set(box)
        try:
            async with asyncio.timeout(self._attempt_s):
                await self._app.process_update(ticket.update)
        except TimeoutError:
            log.warning(
                "update %d: a try ran past %g s, cancelled", ticket.update_id, self._attempt_s
            )
            return TryTimedOut()
        except Exception as exc:  # PTB reports the handlers' errors itself: this is ours
            return exc
        finally:
            _TRY.reset(token)
        return box.error

    async def _bury(self, ticket: Ticket, error: BaseException) -> None:
        log.error(
            "update %d: given up after %d tries (%s); kept in the dead letters",
            ticket.update_id,
            ticket.tries,
            type(error).__name__,
        )
        await self._keep_dead(
            ticket.update_id, _letter(ticket.update, error, ticket.tries), ticket.raw
        )
        self._spawn(self._hooks.dead(ticket.update), "dead")

    async def bury_raw(self, update_id: int, raw: Any, error: BaseException) -> None:
        """An update that cannot be read: into the dead letters (an outage waited out)."""
        log.error(
            "update %d could not be read (%s); kept in the dead letters",
            update_id,
            type(error).__name__,
        )
        letter = {"kind": "unreadable", "error": type(error).__name__, "tries": 0}
        await self._keep_dead(update_id, letter, raw)

    async def _keep_dead(self, update_id: int, letter: dict[str, Any], raw: Any) -> None:
        """Into the dead letters, waiting out an outage (until then it is not confirmed)."""
        body = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if isinstance(body, str) and len(body) > DEAD_TEXT_MAX:
            body = body[:DEAD_TEXT_MAX] + "…"  # an unreadable body kept in part
        failures = 0
        while True:
            try:
                await self._inbox.dead(update_id, letter, body)
                return
            except Exception as exc:
                if OUTAGES.failed(exc, WHERE) is None:
                    raise
                failures += 1
                await asyncio.sleep(pause_s(RETRIES.update, failures))


_KINDS = ("message", "callback_query", "inline_query", "chat_member", "my_chat_member")


def _letter(update: Update, error: BaseException, tries: int) -> dict[str, Any]:
    chat, user = update.effective_chat, update.effective_user
    kind = next((name for name in _KINDS if getattr(update, name) is not None), "other")
    return {
        "kind": kind,
        "chat": chat.id if chat is not None else None,
        "user": user.id if user is not None else None,
        "error": type(error).__name__,
        "tries": tries,
    }
