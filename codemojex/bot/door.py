"""The front door's core: every update the bot takes, handled in order where order matters,
within a deadline, and settled so that it can be confirmed to Telegram.

The polling loop (polling.py) and the webhook server (webhook.py) hand each update to the
`Door` and confirm it to Telegram once the door says it is *settled*:

- **done**: its handlers finished (a guess is in its lane, a command took effect, its answer
  is on its way);
- **parked**: it is not finished by its deadline (`deadline_s`: a lock held by a dead
  process, an outage, a slow dependency), so it is kept in Redis first (state/inbox.py)
  and handled on from there; a process that dies with it parked leaves it to another;
- **dead**: it cannot be handled (its budget of tries is spent: bot/tries.py):
  kept in the dead letters for the operator, and its sender told something went wrong;
- **shed**: its sender (or its chat's admins) has `waiting_max` updates waiting already:
  the sender is told to slow down, as a full lane does;
- **given back** (webhook only): not finished by its deadline and Redis cannot keep it
  either, so Telegram is asked to send it again later (503).

The door's parts: the order of keys (order.py: which updates share a key, and the queues
that run them), the handling of one update (handling.py: tries, outages, dead letters), the
clock (clock.py: deadlines, parking, leases, take-over); ticket.py the record they share.

Order: updates of one key (order.py `order_key`: per chat, or per chat and sender) run one at
a time, in the order taken; keys run concurrently, `concurrency` at once (a slot is taken
only once an update is at its key's head, so a flooding sender queues on their own key and
never holds the slots others need).

Failures are handling.py's; why park past a deadline rather than hold or store first is
clock.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any, Final

from pydantic import Field
from telegram import Update

from codemojex.bot.clock import Clock
from codemojex.bot.handling import AnyApplication, Handling
from codemojex.bot.order import (
    ENTER_BEHIND,
    ENTER_MINE,
    ENTER_RUN,
    WHERE,
    Entrance,
    KeyQueues,
    guess_shaped,
    oldest_of_its_key,
)
from codemojex.bot.ticket import DoorHooks, Settlement, Ticket
from codemojex.bot.tries import TRIES
from codemojex.limits import RETRIES, TELEGRAM
from codemojex.outages import retrying
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
# full lane's answer), so one flood stays bounded. One window: a key may fill all Telegram
# hands over at once, no more.
WAITING_MAX: Final = IN_HAND
# Updates a bot holds at most, parked ones it works on and those it took over included: past
# it, polling fetches nothing, the webhook answers 503 and a take-over takes no more,
# whatever is stuck. Twenty windows: everything stuck for twenty deadlines, in a few MB.
HELD_MAX: Final = 20 * IN_HAND
# SIGTERM: the updates in hand are finished and confirmed within this long, under the 20 s that
# deploy/'s systemd and Kubernetes give the process.
STOP_S: Final = 12.0


class Door:
    """Takes updates (`take`), settles each (`Ticket.settled`); see the module docstring."""

    def __init__(
        self,
        application: AnyApplication,
        inbox: Inbox,
        hooks: DoorHooks,
        *,
        key_of: Callable[[Update], str],
        concurrency: int = CONCURRENCY,
        deadline_s: float = DEADLINE_S,
        attempt_s: float = ATTEMPT_S,
        tries: int = TRIES,
        waiting_max: int = WAITING_MAX,
        held_max: int = HELD_MAX,
        give_back: bool = False,
        peers: bool = False,
    ) -> None:
        within(concurrency, Concurrency, "concurrency")
        within(deadline_s, DeadlineS, "deadline_s")
        if attempt_s <= 0 or tries < 1 or waiting_max < 1 or held_max < 1:
            raise ValueError("a door needs a try's bound, a try, and room for one")
        self._app = application
        self.inbox = inbox
        self._hooks = hooks
        self._key_of = key_of
        self.deadline_s = deadline_s
        self._waiting_max = waiting_max
        self.held_max = held_max
        self._unsettled: dict[int, Ticket] = {}  # by update id, in the order taken
        self._tasks: set[asyncio.Task[Any]] = set()
        self._clock_task: asyncio.Task[None] | None = None
        self.counts: Counter[str] = Counter()  # settlements, tries failed, take-overs
        self._handling = Handling(
            application,
            inbox,
            hooks,
            self._spawn,
            self.counts,
            concurrency=concurrency,
            deadline_s=deadline_s,
            attempt_s=attempt_s,
            tries=tries,
        )
        self._keys = KeyQueues(self._run, self._spawn)
        self.clock = Clock(
            inbox,
            self._unsettled,
            hooks,
            self._spawn,
            self.counts,
            deadline_s=deadline_s,
            give_back=give_back,
            room=lambda: self.held_max - self.held,
            hand=self.take_parked,
            key_of=self._parked_key,
        )
        # Webhook: other processes take this bot's updates too (order.py `Entrance`).
        self._entrance = (
            Entrance(inbox, self._admit, self.clock.give_back, self._spawn, deadline_s=deadline_s)
            if peers
            else None
        )

    # -- taking -------------------------------------------------------------------------------

    @property
    def unsettled(self) -> int:
        entering = self._entrance.entering if self._entrance is not None else 0
        return len(self._unsettled) + entering

    @property
    def held(self) -> int:
        """Tickets in hand (waiting, running, parked and not finished)."""
        return self._keys.held

    @property
    def bot(self) -> Any:
        """The application's Bot (what an update is read with)."""
        return self._app.bot

    def take(self, update: Update, raw: dict[str, Any] | bytes) -> Ticket:
        """Take `update` (with Telegram's JSON of it); its ticket settles as the module says."""
        ticket = Ticket(update, raw, self._key_of(update))
        if ticket.update_id in self.clock.parked:
            # Telegram sent again what this process took parked (a poller that took over
            # from one that died before it confirmed): it runs once, here already.
            self.counts["again"] += 1
            ticket.dropped = True
            ticket.settled.set_result("parked")
        elif self._keys.waiting(ticket.key) >= self._waiting_max:
            self.counts["shed"] += 1
            ticket.dropped = True
            ticket.settled.set_result("shed")
            self._spawn(self._hooks.shed(update), "shed")
        elif self._entrance is not None and not guess_shaped(update):
            self._entrance.add(ticket)
        else:
            self._admit(ticket, ENTER_RUN)
        return ticket

    def _admit(self, ticket: Ticket, how: int) -> None:
        """`ticket` checked against the parked updates (order.py `Entrance`): run here now,
        or parked behind its key's updates, or a copy of one parked already."""
        if how == ENTER_RUN:
            self._unsettled[ticket.update_id] = ticket
            self._keys.append(ticket)
            return
        ticket.parked = True
        ticket.settled.set_result("parked")
        if how == ENTER_MINE:  # behind this process's own: runs here after them
            self.counts["parked"] += 1
            self.clock.parked[ticket.update_id] = ticket
            self._keys.append(ticket)
        else:
            self.counts["behind" if how == ENTER_BEHIND else "again"] += 1

    def take_parked(self, parked: Iterable[Parked]) -> list[Ticket]:
        """Updates taken on from the inbox (a gone process's, or what waited behind a key this
        process held): already settled, handled before the newer updates of their key that
        are not running yet. Their tickets."""
        taken = []
        for item in parked:
            if item.update_id in self.clock.parked:
                continue  # this process has it already
            try:
                update = Update.de_json(item.update, self._app.bot)
            except Exception as exc:  # it was read once; a newer PTB may not
                self._spawn(self._bury_raw(item.update_id, item.update, exc), "bury")
                continue
            ticket = Ticket(update, item.update, self._key_of(update), tries=item.tries)
            ticket.parked = True
            ticket.settled.set_result("parked")
            self.clock.parked[ticket.update_id] = ticket
            self._keys.insert(ticket)
            taken.append(ticket)
        self.counts["taken_over"] += len(taken)
        return taken

    def _parked_key(self, item: Parked) -> str:
        try:
            return self._key_of(Update.de_json(item.update, self._app.bot))
        except Exception:  # unreadable: a key of its own (it becomes a dead letter)
            return f"x:{item.update_id:d}"

    async def _bury_raw(self, update_id: int, raw: Any, error: BaseException) -> None:
        await self._handling.bury_raw(update_id, raw, error)
        self.clock.forget(update_id)

    def unreadable(self, update_id: int, raw: Any, error: BaseException) -> asyncio.Task[None]:
        """An update python-telegram-bot cannot read: straight to the dead letters. The task
        ends once it is kept there (an outage is waited out)."""
        self.counts["unreadable"] += 1
        return self._spawn(self._handling.bury_raw(update_id, raw, error), "bury")

    async def _run(self, ticket: Ticket) -> None:
        while True:
            if self._entrance is None:
                how = await self._handling.handle(ticket)
            else:
                with oldest_of_its_key(ticket):
                    how = await self._handling.handle(ticket)
            if how != "behind":
                break
            if not await self._behind(ticket):
                return  # parked behind its key's older update: run where that one is
        if how is not None:
            self._finish(ticket, how)
        if ticket.parked:
            await self.clock.flush()  # the key's next update may check against it now

    async def _behind(self, ticket: Ticket) -> bool:
        """An older update of `ticket`'s key is parked by another process (its admission
        said so): parked behind it, for that process to run after it (False); or tried again
        here (True), at once when the older one is gone meanwhile, after a pause when this
        process holds `ticket` parked already (the older one's process finishes it first)."""
        entry = [(ticket.update_id, ticket.key, record(ticket.raw, ticket.tries))]
        (answer,) = await retrying("redis", RETRIES.update, where=WHERE)(self.inbox.enter)(entry)
        if answer == ENTER_BEHIND:
            self.counts["behind"] += 1
            ticket.dropped = True
            self._unsettled.pop(ticket.update_id, None)
            if not ticket.settled.done():
                ticket.settled.set_result("parked")
            return False
        if answer != ENTER_RUN:
            await asyncio.sleep(self.clock.tick_s)
        return True

    def _finish(self, ticket: Ticket, how: Settlement) -> None:
        self.counts[how] += 1
        self._unsettled.pop(ticket.update_id, None)
        if not ticket.settled.done():
            ticket.settled.set_result(how)
        self.clock.finished(ticket)  # a parked one (done or dead) forgotten, its key's next on

    # -- the clock ------------------------------------------------------------------------------

    async def tick(self) -> None:
        """One turn of the clock's parking and forgetting (clock.py `Clock.tick`)."""
        await self.clock.tick()

    async def take_over(self) -> int:
        """Take the parked updates of processes that are gone, as many as there is room for."""
        return await self.clock.take_over()

    async def keep(self, may_take_over: Callable[[], bool]) -> None:
        """The door's clock, until cancelled (clock.py `Clock.keep`)."""
        await self.clock.keep(may_take_over)

    def run(self, may_take_over: Callable[[], bool]) -> None:
        """Start the door's clock; it runs until `stop` has drained the door."""
        self._clock_task = asyncio.get_running_loop().create_task(
            self.keep(may_take_over), name="door:clock"
        )

    # -- stopping, waiting --------------------------------------------------------------------

    async def stop(self, stop_s: float) -> int:
        """Finish what is in hand within `stop_s`, the clock still running (parking, the
        lease); then cancel the rest (unsettled, it comes again from Telegram; parked, another
        process takes it over at once), and stop the clock. How many were cancelled."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._keys.idle.wait(), stop_s)
        late = [t for t in self._tasks if not t.done()]
        await stop_tasks(late)
        if self._clock_task is not None:
            await stop_tasks([self._clock_task])
            self._clock_task = None
        await self.clock.hand_on()
        return len(late)

    async def wait_idle(self) -> None:
        """Until nothing is in hand (tests: "the bot is done with what it took")."""
        await self._keys.idle.wait()

    def _spawn(self, coroutine: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("the bot's door: a task failed", exc_info=task.exception())
