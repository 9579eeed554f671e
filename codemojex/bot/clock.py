"""The door's clock (door.py): updates past their deadline parked in Redis, parked ones that
finished forgotten, the parked updates' leases kept, and a dead process's parked updates taken
over.

Why park rather than hold: Telegram confirms in order (polling) and keeps at most 100
updates in hand, so one update that never finishes would hold every other chat's updates at
Telegram behind it: a row lock that a dead process holds until Postgres notices, for hours
with default keepalives. Why not park every update first (store, confirm, then handle): the
same guarantee for an extra Redis round trip per batch of updates and a copy of each in
Redis, on the path every guess takes, where almost every update finishes in milliseconds
(docs/architecture.md, "The front door", has the measurements of both).

An update past its deadline is parked if Redis can keep it; while Redis cannot, it holds its
place (polling: the window holds and the backlog waits at Telegram; webhook: given back, 503).
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
from codemojex.state.inbox import Inbox, record

log = logging.getLogger(__name__)

# The door's clock: parking and forgetting every TICK_S; a dead process's parked updates
# taken over every SWEEP_S.
TICK_S: Final = 0.1
SWEEP_S: Final = 5.0
WHERE = "the bot's inbox"


class Clock:
    """Parks the door's updates past `deadline_s`, forgets the parked ones that finished,
    keeps their leases (module docstring)."""

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
    ) -> None:
        self.inbox = inbox
        self._unsettled = unsettled  # the door's: by update id, in the order taken
        self._hooks = hooks
        self._spawn = spawn
        self._counts = counts
        self.deadline_s = deadline_s
        self._give_back = give_back
        self.parked: dict[int, Ticket] = {}  # parked and not finished: their leases renewed
        self._to_forget: list[int] = []  # parked and finished: to settle in the inbox
        self._park_failures = 0
        self._park_not_before = 0.0

    def finished(self, ticket: Ticket, *, kept: bool) -> None:
        """`ticket` is finished; a parked one is forgotten at the next tick (`kept`: the
        inbox still has it; a dead letter took it out already)."""
        if self.parked.pop(ticket.update_id, None) is not None and kept:
            self._to_forget.append(ticket.update_id)

    async def tick(self) -> None:
        """Park what passed its deadline, forget what finished parked: one Redis call each,
        for every update concerned (`keep` calls this every `TICK_S`)."""
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
            if ticket.settled.done():
                continue  # finished while the park was tried: answered 200
            ticket.dropped = True
            self._unsettled.pop(ticket.update_id, None)
            self._counts["given_back"] += 1
            ticket.settled.set_result("given_back")
            if ticket.waits and not ticket.told:
                # It comes again, maybe to another process: its sender hears why now.
                ticket.told = True
                self._spawn(self._hooks.delayed(ticket.update), "delayed")

    async def keep(
        self, may_take_over: Callable[[], bool], take_over: Callable[[], Awaitable[int]]
    ) -> None:
        """Until cancelled: `tick` every `TICK_S`, the parked updates' leases renewed every
        third of their life, and, while `may_take_over()`, the parked updates of dead
        processes taken over (`take_over`) every `SWEEP_S`."""
        renew_every = self.inbox.lease_ms / 3000
        next_renewal = next_sweep = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self.tick()
                now = time.monotonic()
                if now >= next_renewal and self.parked:
                    next_renewal = now + renew_every
                    await self.inbox.renew(list(self.parked))
                if now >= next_sweep and may_take_over():
                    next_sweep = now + SWEEP_S
                    await take_over()
            except Exception as exc:
                # Parking waits it out by itself; a lease not renewed costs an update handled
                # twice at worst; what is not taken over now is taken at the next sweep.
                OUTAGES.swallow(exc, WHERE, "a turn of the door's clock")

    async def hand_on(self) -> None:
        """Stopping: what finished parked is forgotten, what stays parked unfinished is the
        next process's at once, not after its lease."""
        try:
            await self.tick()
            await self.inbox.renew(list(self.parked), lease_ms=0)
        except Exception as exc:
            OUTAGES.swallow(exc, WHERE, "the parked updates not handed on")
