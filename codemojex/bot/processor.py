"""The front door's core: every update the bot takes, handled in order where order matters,
within a deadline, and settled so that it can be confirmed to Telegram.

The polling loop (polling.py) and the webhook server (webhook.py) hand each update to the
`Door` and confirm it to Telegram once the door says it is *settled*:

- **done**: its handlers finished (a guess is in its lane, a command took effect, its answer
  is on its way);
- **parked**: it is not finished by its deadline (`deadline_s`: a lock held by a dead
  process, an outage, a slow dependency), so it is kept in Redis first (state/inbox.py)
  and handled on from there; a process that dies with it parked leaves it to another;
- **dead**: it cannot be handled (its tries are spent: bot/tries.py): kept in the dead
  letters for the operator, and its sender told something went wrong;
- **shed**: its sender (or its chat's admins) has `waiting_max` updates waiting already:
  the sender is told to slow down, as a full lane does;
- **given back** (webhook only): not finished by its deadline and Redis cannot keep it
  either, so Telegram is asked to send it again later (503).

Why park rather than hold: Telegram confirms in order (polling) and keeps at most 100
updates in hand, so one update that never finishes would hold every other chat's updates at
Telegram behind it: a row lock that a dead process holds until Postgres notices, for hours
with default keepalives. Why not park every update first (store, confirm, then handle): the
same guarantee for an extra Redis round trip per batch of updates and a copy of each in
Redis, on the path every guess takes, where almost every update finishes in milliseconds
(docs/architecture.md, "The front door", has the measurements of both).

Order: updates of one key (order.py `order_key`: per chat, or per chat and sender) run one at
a time, in the order taken; keys run concurrently, `concurrency` at once (a slot is taken
only once an update is at its key's head, so a flooding sender queues on their own key and
never holds the slots others need).

Failures: the handlers' one error handler (app.py `on_error`) hands the failure here
(`failed`). Every failed try counts in the update's one budget of tries (bot/tries.py
`TryBudget`): a bug, a statement that timed out, and Telegram failing before the effect are
tried again a few times; a Redis, Postgres or Telegram outage that the component's health
probe confirms is waited out for as long as an outage lasts. Meanwhile the update stays at its
key's head (the player's order holds through it), its sender told once that the bot is
catching up; past its deadline it is parked, if Redis can keep it, else it holds its place
(polling: the window holds and the backlog waits at Telegram; webhook: given back). Past
the budget, a dead letter. Telegram failing to take an answer finishes the update (its
effect is stored; the answer was a courtesy). A try is bounded by `attempt_s`, past which it
is cancelled and counts as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import Field
from telegram import Update
from telegram.ext import Application

from codemojex.bot.tries import TRIES, Down, TryBudget
from codemojex.limits import RETRIES, TELEGRAM
from codemojex.outages import OUTAGES, pause_s
from codemojex.runtime import stop_tasks
from codemojex.state.inbox import Inbox, Parked, record
from codemojex.values.bounds import within

log = logging.getLogger(__name__)

# Updates handled at once (CODEMOJEX_BOT_CONCURRENCY): half those in hand, one half handled
# while the other is fetched. With cores of its own a bot may take more; beside a worker,
# more takes the worker's CPU.
CONCURRENCY: Final = 50
Concurrency = Annotated[int, Field(ge=1, le=1024)]
# Updates held unsettled, confirmed once finished or parked (CODEMOJEX_BOT_IN_HAND): a backlog
# waits at Telegram. Polling confirms in order, so this window must stay wider than
# CONCURRENCY, or a slow update at its front idles the slots: the most Telegram allows (a
# getUpdates's most, and setWebhook's max_connections).
IN_HAND: Final = TELEGRAM.updates_max
InHand = Annotated[int, Field(ge=1, le=TELEGRAM.updates_max)]
# An update not finished this long after it was taken is parked in Redis (and confirmed), so
# that it holds neither the window nor its webhook request (CODEMOJEX_BOT_UPDATE_DEADLINE_S):
# long enough for every handler on a busy host, short enough that a stuck one costs the
# others only this.
DEADLINE_S: Final = 1.0
DeadlineS = Annotated[float, Field(gt=0, le=30.0)]
# One try of an update's handlers at most: past it the try is cancelled and counts as failed
# (every call under it has a timeout of its own well within this).
ATTEMPT_S: Final = 30.0
# Updates of one key waiting behind each other: past it the sender is told to slow down (a
# full lane's answer), so one flood stays bounded.
WAITING_MAX: Final = 100
# Updates a bot holds at most, parked ones it works on included: past it, polling fetches
# nothing and the webhook answers 503, whatever is stuck.
HELD_MAX: Final = 2_000
# The door's clock: parking and forgetting every TICK_S; a dead process's parked updates
# taken over every SWEEP_S.
TICK_S: Final = 0.1
SWEEP_S: Final = 5.0
# An unreadable body is kept up to this many characters (an update is a few kB).
DEAD_TEXT_MAX: Final = 16_384
# SIGTERM: the updates in hand are finished and confirmed within this long, under the 20 s that
# deploy/'s systemd and Kubernetes give the process.
STOP_S: Final = 12.0

AnyApplication = Application[Any, Any, Any, Any, Any, Any]
Settlement = Literal["done", "parked", "dead", "shed", "given_back"]
WHERE = "the bot's inbox"


class TryTimedOut(Exception):
    """A try of an update ran past `attempt_s` and was cancelled."""


@dataclass(frozen=True, slots=True)
class DoorHooks:
    """What the door has the handlers' side do for it (app.py wires these; each is best
    effort, run off the update's path, never awaited by it)."""

    # An outage holds it past its deadline (each try): "catching up", once per outage.
    delayed: Callable[[Update], Awaitable[None]]
    shed: Callable[[Update], Awaitable[None]]  # too many waiting: "slow down"
    dead: Callable[[Update], Awaitable[None]]  # given up: "something went wrong"
    down: Down  # is this component down? (its health probe: bot/tries.py)


@dataclass(eq=False, slots=True)
class Ticket:
    """One update in the door's hands, until it is settled and then finished."""

    update: Update
    raw: dict[str, Any] | bytes  # Telegram's JSON as it came: what parking keeps
    key: Hashable
    born: float = field(default_factory=time.monotonic)
    tries: int = 0  # tries failed, whatever failed them (bot/tries.py)
    waits: bool = False  # its last try failed with an outage, waited out
    parked: bool = False
    running: bool = False
    told: bool = False  # its sender was told it waits for an outage
    dropped: bool = False  # given back or shed: the door no longer works on it
    settled: asyncio.Future[Settlement] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def update_id(self) -> int:
        return self.update.update_id


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


class Door:
    """Takes updates (`take`), settles each (`Ticket.settled`); see the module docstring."""

    def __init__(
        self,
        application: AnyApplication,
        inbox: Inbox,
        hooks: DoorHooks,
        *,
        key_of: Callable[[Update], Hashable],
        concurrency: int = CONCURRENCY,
        deadline_s: float = DEADLINE_S,
        attempt_s: float = ATTEMPT_S,
        tries: int = TRIES,
        waiting_max: int = WAITING_MAX,
        give_back: bool = False,
    ) -> None:
        within(concurrency, Concurrency, "concurrency")
        within(deadline_s, DeadlineS, "deadline_s")
        if attempt_s <= 0 or waiting_max < 1:
            raise ValueError("a door needs a try's bound and room for one")
        self._app = application
        self.inbox = inbox
        self._hooks = hooks
        self._key_of = key_of
        self._slots = asyncio.Semaphore(concurrency)
        self.deadline_s = deadline_s
        self._attempt_s = attempt_s
        self._budget = TryBudget(hooks.down, tries=tries)
        self._waiting_max = waiting_max
        self._give_back = give_back
        self._keys: dict[Hashable, deque[Ticket]] = {}
        self._unsettled: dict[int, Ticket] = {}  # by update id, in the order taken
        self._parked: dict[int, Ticket] = {}  # parked and not finished: their leases renewed
        self._to_forget: list[int] = []  # parked and finished: to settle in the inbox
        self._tasks: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._park_failures = 0
        self._park_not_before = 0.0
        self.held = 0  # tickets in hand (waiting, running, parked and not finished)
        self.counts: Counter[str] = Counter()  # settlements, tries failed, take-overs

    # -- taking -------------------------------------------------------------------------------

    @property
    def unsettled(self) -> int:
        return len(self._unsettled)

    @property
    def bot(self) -> Any:
        """The application's Bot (what an update is read with)."""
        return self._app.bot

    def take(self, update: Update, raw: dict[str, Any] | bytes) -> Ticket:
        """Take `update` (with Telegram's JSON of it); its ticket settles as the module says."""
        ticket = Ticket(update, raw, self._key_of(update))
        queue = self._keys.get(ticket.key)
        if queue is not None and len(queue) >= self._waiting_max:
            self.counts["shed"] += 1
            ticket.dropped = True
            ticket.settled.set_result("shed")
            self._spawn(self._hooks.shed(update), "shed")
            return ticket
        self._unsettled[ticket.update_id] = ticket
        self._add(ticket, queue)
        return ticket

    def take_parked(self, parked: Iterable[Parked]) -> int:
        """Updates taken over from the inbox (their process died): already settled, handled
        before the newer updates of their key that are not running yet. How many."""
        taken = 0
        for item in parked:
            try:
                update = Update.de_json(item.update, self._app.bot)
            except Exception as exc:  # it was read once; a newer PTB may not
                self._spawn(self._bury_raw(item.update_id, item.update, exc), "bury")
                continue
            ticket = Ticket(update, item.update, self._key_of(update), tries=item.tries)
            ticket.parked = True
            ticket.settled.set_result("parked")
            self._parked[ticket.update_id] = ticket
            queue = self._keys.get(ticket.key)
            if queue is not None:
                # Before the newer ones waiting (a taken-over update is older than any update
                # of its key taken since), never before the one running.
                start = 1 if queue[0].running else 0
                at = next(
                    (i for i in range(start, len(queue)) if queue[i].update_id > ticket.update_id),
                    len(queue),
                )
                queue.insert(at, ticket)
                self.held += 1
            else:
                self._add(ticket, None)
            taken += 1
        self.counts["taken_over"] += taken
        return taken

    def unreadable(self, update_id: int, raw: Any, error: BaseException) -> asyncio.Task[None]:
        """An update python-telegram-bot cannot read: straight to the dead letters. The task
        ends once it is kept there (an outage is waited out)."""
        self.counts["unreadable"] += 1
        return self._spawn(self._bury_raw(update_id, raw, error), "bury")

    def _add(self, ticket: Ticket, queue: deque[Ticket] | None) -> None:
        self.held += 1
        self._idle.clear()
        if queue is None:
            self._keys[ticket.key] = deque([ticket])
            self._spawn(self._drain(ticket.key), "drain")
        else:
            queue.append(ticket)

    # -- handling -----------------------------------------------------------------------------

    async def _drain(self, key: Hashable) -> None:
        queue = self._keys[key]
        try:
            while queue:
                ticket = queue[0]
                if not ticket.dropped:
                    ticket.running = True
                    await self._handle(ticket)
                queue.popleft()
                self.held -= 1
        finally:
            del self._keys[key]
            if not self._keys:
                self._idle.set()

    async def _handle(self, ticket: Ticket) -> None:
        while True:
            async with self._slots:
                error = await self._try(ticket)
            if ticket.dropped:
                return  # given back meanwhile: Telegram sends it again
            if error is None:
                self._finish(ticket, "done")
                return
            ticket.tries += 1
            again = await self._budget.again(error, ticket.tries)
            self.counts[
                "outage_tries" if again is not None and again.outage else "failed_tries"
            ] += 1
            if again is None:
                await self._bury(ticket, error)
                return
            ticket.waits = again.outage
            if again.outage and time.monotonic() - ticket.born >= self.deadline_s:
                # Held past its deadline: its sender hears why, once while the outage lasts
                # (a blip retried at once says nothing).
                ticket.told = True
                self._spawn(self._hooks.delayed(ticket.update), "delayed")
            await asyncio.sleep(again.pause_s)
            if ticket.dropped:
                return

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

    def _finish(self, ticket: Ticket, how: Settlement) -> None:
        self.counts[how] += 1
        self._unsettled.pop(ticket.update_id, None)
        if not ticket.settled.done():
            ticket.settled.set_result(how)
        if self._parked.pop(ticket.update_id, None) is not None:
            self._to_forget.append(ticket.update_id)

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
        self._parked.pop(ticket.update_id, None)  # the dead letter took it out of the inbox
        self._finish(ticket, "dead")
        self._spawn(self._hooks.dead(ticket.update), "dead")

    async def _bury_raw(self, update_id: int, raw: Any, error: BaseException) -> None:
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
                await self.inbox.dead(update_id, letter, body)
                return
            except Exception as exc:
                if OUTAGES.failed(exc, WHERE) is None:
                    raise
                failures += 1
                await asyncio.sleep(pause_s(RETRIES.update, failures))

    # -- the clock: parking, forgetting, leases -----------------------------------------------

    async def tick(self) -> None:
        """Park what passed its deadline, forget what finished parked: one Redis call each,
        for every update concerned (the front door calls this every `TICK_S`)."""
        now = time.monotonic()
        due = []
        for ticket in self._unsettled.values():
            if now - ticket.born < self.deadline_s:
                break  # taken in order: the rest are younger
            if not ticket.dropped:
                due.append(ticket)
        if due and now >= self._park_not_before:
            await self._park(due)
        if self._to_forget:
            forget, self._to_forget = self._to_forget, []
            try:
                await self.inbox.settle(forget)
            except Exception as exc:
                # Taken over and handled again after their lease runs out: harmless.
                OUTAGES.swallow(exc, WHERE, "finished parked updates not forgotten")

    async def _park(self, due: list[Ticket]) -> None:
        try:
            await self.inbox.park([(t.update_id, record(t.raw, t.tries)) for t in due])
        except Exception as exc:
            if OUTAGES.failed(exc, WHERE) is None:
                raise
            self._park_failures += 1
            self._park_not_before = time.monotonic() + pause_s(RETRIES.update, self._park_failures)
            if self._give_back:
                for ticket in due:
                    if ticket.settled.done():
                        continue  # finished while the park was tried: answered 200
                    ticket.dropped = True
                    self._unsettled.pop(ticket.update_id, None)
                    self.counts["given_back"] += 1
                    ticket.settled.set_result("given_back")
                    if ticket.waits and not ticket.told:
                        # It comes again, maybe to another process: its sender hears why now.
                        ticket.told = True
                        self._spawn(self._hooks.delayed(ticket.update), "delayed")
            return
        if self._park_failures:
            self._park_failures = 0
            OUTAGES.ok("redis")
        for ticket in due:
            if ticket.settled.done():
                # Finished while it was being parked: forgotten at the next tick.
                self._to_forget.append(ticket.update_id)
                continue
            ticket.parked = True
            self._parked[ticket.update_id] = ticket
            self._unsettled.pop(ticket.update_id, None)
            self.counts["parked"] += 1
            ticket.settled.set_result("parked")
        log.info("%d updates past their %g s deadline parked", len(due), self.deadline_s)

    async def take_over(self) -> int:
        """Take the parked updates whose process died, and handle them here."""
        return self.take_parked(await self.inbox.take())

    async def keep(self, may_take_over: Callable[[], bool]) -> None:
        """The door's clock, until cancelled: `tick` every `TICK_S`, the parked updates'
        leases renewed every third of their life, and, while `may_take_over()`, the parked
        updates of dead processes taken over every `SWEEP_S`."""
        renew_every = self.inbox.lease_ms / 3000
        next_renewal = next_sweep = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self.tick()
                now = time.monotonic()
                if now >= next_renewal and self._parked:
                    next_renewal = now + renew_every
                    await self.inbox.renew(list(self._parked))
                if now >= next_sweep and may_take_over():
                    next_sweep = now + SWEEP_S
                    await self.take_over()
            except Exception as exc:
                # Parking waits it out by itself; a lease not renewed costs an update handled
                # twice at worst; what is not taken over now is taken at the next sweep.
                OUTAGES.swallow(exc, WHERE, "a turn of the door's clock")

    # -- stopping, waiting --------------------------------------------------------------------

    async def stop(self, stop_s: float) -> int:
        """Finish what is in hand within `stop_s`; then cancel the rest (unsettled, it comes
        again from Telegram; parked, another process takes it over once its lease runs out).
        How many were cancelled."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), stop_s)
        late = [t for t in self._tasks if not t.done()]
        await stop_tasks(late)
        try:
            await self.tick()  # forget what finished parked
            # What stays parked unfinished is the next process's at once, not after its lease.
            await self.inbox.renew(list(self._parked), lease_ms=0)
        except Exception as exc:
            OUTAGES.swallow(exc, WHERE, "the parked updates not handed on")
        return len(late)

    async def wait_idle(self) -> None:
        """Until nothing is in hand (tests: "the bot is done with what it took")."""
        await self._idle.wait()

    def _spawn(self, coroutine: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("the bot's door: a task failed", exc_info=task.exception())


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
