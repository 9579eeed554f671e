"""The door's clock (door.py): updates past their deadline parked in Redis, parked ones that
finished forgotten (and what waits behind them in their keys handed on), this process's one
lease over what it holds kept, and the parked updates of a process that is gone taken over.

Why park rather than hold: Telegram confirms in order (polling) and keeps at most 100
updates in hand, so one update that never finishes would hold every other chat's updates at
Telegram behind it: a row lock that a dead process holds until Postgres notices, for hours
with default keepalives. Why not park every update first (store, confirm, then handle): the
same guarantee for an extra Redis round trip per batch of updates and a copy of each in
Redis, on the path every guess takes, where almost every update finishes in milliseconds
(docs/architecture.md, "The front door", has the measurements of both).

An update past its deadline is parked if Redis can keep it; while Redis cannot, it holds its
place (polling: the window holds and the backlog waits at Telegram; webhook: given back, 503).

Its pace, derived: a tick every tenth of the deadline (an update is parked at most that late);
the lease renewed, and a gone process's updates taken over, every third of the lease (a
process that died is taken over within 4/3 of a lease; a poller's at once by the next one).
Taking over takes no more than the door has room for (`room`): what is left is taken at the
next turn. The clock runs until the door's drain has finished (door.py `Door.stop`), so no
lease runs out under an update still running; a Redis outage longer than the lease leaves
this process's updates its own (the inbox never hands a process its own), at worst another
process's too, which then handles them once more.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Final

from codemojex.bot.ticket import DoorHooks, Ticket
from codemojex.limits import RETRIES
from codemojex.outages import OUTAGES, pause_s
from codemojex.state.inbox import Inbox, Parked, record

log = logging.getLogger(__name__)

# The door's clock turns at most this often, however short the deadline.
TICK_MIN_S: Final = 0.01
WHERE = "the bot's inbox"


def tick_s(deadline_s: float) -> float:
    """How often the clock turns for a deadline: an update is parked within a tenth of it."""
    return max(TICK_MIN_S, deadline_s / 10)


class Clock:
    """Parks the door's updates past `deadline_s`, forgets the parked ones that finished,
    keeps this process's lease, takes over (module docstring)."""

    def __init__(
        self,
        inbox: Inbox,
        unsettled: dict[int, Ticket],
        hooks: DoorHooks,
        spawn: Callable[[Awaitable[Any], str], asyncio.Task[Any]],
        counts: Counter[str],
        *,
        deadline_s: float,
        give_back: bool,
        room: Callable[[], int],
        hand: Callable[[list[Parked]], list[Ticket]],
        key_of: Callable[[Parked], str],
    ) -> None:
        self.inbox = inbox
        self._unsettled = unsettled  # the door's: by update id, in the order taken
        self._hooks = hooks
        self._spawn = spawn
        self._counts = counts
        self.deadline_s = deadline_s
        self.tick_s = tick_s(deadline_s)
        self._give_back = give_back
        self._room = room  # how many more updates the door may hold
        self._hand = hand  # the door takes these parked updates on (in order per key)
        self._key_of = key_of  # a parked update's order key
        self.parked: dict[int, Ticket] = {}  # parked and not finished
        self._to_forget: list[int] = []  # parked and finished: to settle in the inbox
        self._park_failures = 0
        self._park_not_before = 0.0

    def finished(self, ticket: Ticket) -> None:
        """`ticket` is finished; a parked one is forgotten at the next tick."""
        if self.parked.pop(ticket.update_id, None) is not None:
            self._to_forget.append(ticket.update_id)

    def forget(self, update_id: int) -> None:
        """A parked update this process holds and will not run (a dead letter): forgotten at
        the next tick, what waits behind it handed on."""
        self.parked.pop(update_id, None)
        self._to_forget.append(update_id)

    async def tick(self) -> None:
        """Park what passed its deadline, forget what finished parked: one Redis call each,
        for every update concerned (`keep` calls this every `tick_s`)."""
        now = time.monotonic()
        due = []
        for ticket in self._unsettled.values():
            if now - ticket.born < self.deadline_s:
                break  # taken in order: the rest are younger
            if not ticket.dropped:
                due.append(ticket)
        if due and now >= self._park_not_before:
            await self._park(due)
        await self._forget()

    async def flush(self) -> None:
        """Forget now what finished parked: a key's next update, about to run, then finds
        nothing older parked (a webhook process checks)."""
        try:
            await self._forget()
        except Exception as exc:  # forgotten at the next tick
            OUTAGES.swallow(exc, WHERE, "finished parked updates not forgotten yet")

    async def _forget(self) -> None:
        if self._to_forget:
            forget, self._to_forget = self._to_forget, []
            try:
                after = await self.inbox.settle(forget, self._room())
            except Exception:
                self._to_forget[:0] = forget  # forgotten at a later tick
                raise
            if after:
                self._hand(after)

    async def _park(self, due: list[Ticket]) -> None:
        try:
            await self.inbox.park([(t.update_id, t.key, record(t.raw, t.tries)) for t in due])
        except Exception as exc:
            if OUTAGES.failed(exc, WHERE) is None:
                raise
            self._park_failures += 1
            self._park_not_before = time.monotonic() + pause_s(RETRIES.update, self._park_failures)
            if self._give_back:
                self._given_back(due)
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
            self.parked[ticket.update_id] = ticket
            self._unsettled.pop(ticket.update_id, None)
            self._counts["parked"] += 1
            ticket.settled.set_result("parked")
        log.info("%d updates past their %g s deadline parked", len(due), self.deadline_s)

    def _given_back(self, due: list[Ticket]) -> None:
        for ticket in due:
            if not ticket.settled.done():  # else finished while the park was tried: 200
                self.give_back(ticket)

    def give_back(self, ticket: Ticket) -> None:
        """Webhook: `ticket` is not done by its deadline and Redis cannot keep it: 503, and
        Telegram sends it again."""
        ticket.dropped = True
        self._unsettled.pop(ticket.update_id, None)
        self._counts["given_back"] += 1
        ticket.settled.set_result("given_back")
        if ticket.waits and not ticket.told:
            # It comes again, maybe to another process: its sender hears why now.
            ticket.told = True
            self._spawn(self._hooks.delayed(ticket.update), "delayed")

    async def take_over(self) -> int:
        """The parked updates of processes that are gone, as many as the door has room for,
        taken on here (those a bot of the version before left too, filed under their keys as
        this process's own). How many."""
        taken = self._hand(await self.inbox.take(self._room()))
        legacy = await self.inbox.legacy(self._room())
        if legacy:
            await self.inbox.park(
                [(p.update_id, self._key_of(p), record(p.update, p.tries)) for p in legacy]
            )
        return len(taken) + len(self._hand(legacy))

    async def keep(self, may_take_over: Callable[[], bool]) -> None:
        """Until cancelled: `tick` every `tick_s`; every third of the lease, the lease renewed
        and, while `may_take_over()`, the parked updates of gone processes taken over."""
        every = self.inbox.lease_ms / 3000
        next_turn = time.monotonic()
        while True:
            await asyncio.sleep(self.tick_s)
            try:
                await self.tick()
                now = time.monotonic()
                if now >= next_turn:
                    if self.parked:
                        await self._renew()
                    if may_take_over():
                        await self.take_over()
                    next_turn = now + every
            except Exception as exc:
                # Parking waits it out by itself; the lease is renewed at the next turn (it
                # lasts three); what is not taken over now is taken at the next turn.
                OUTAGES.swallow(exc, WHERE, "a turn of the door's clock")

    async def _renew(self) -> None:
        held = await self.inbox.renew()
        if held < len(self.parked):
            log.warning(
                "%d parked updates were taken over by another process while this one's lease "
                "had run out; both handle them",
                len(self.parked) - held,
            )

    async def hand_on(self) -> None:
        """Stopping: what finished parked is forgotten (what waits behind it is handed on to
        nobody here), what stays parked unfinished is another process's at once, not after
        the lease."""
        self._room = lambda: 0
        try:
            await self.tick()
            await self.inbox.renew(lease_ms=0)
        except Exception as exc:
            OUTAGES.swallow(exc, WHERE, "the parked updates not handed on")
