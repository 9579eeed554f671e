"""Commands that take effect once per message, however often and however late Telegram (or
a second process) delivers it.

A command may arrive twice: after a kill Telegram sends again every update the bot had not
confirmed, during a rolling update two processes may hold the same update, a failed update
is tried again. It may arrive long after a later command changed the same thing: a second
`/newgame` would open another round once the first ended, a second `/endround` end the next
round, a second `/settings`, `/ban`, `/pause` or `/weight` undo a later one.

Two guards, the durable one first:

- **The database.** Each command's effect is idempotent on its message (`values.Origin`),
  in the same transaction as the effect: a round records the message that opened it (unique,
  `usecases.start_round`), an admin command's audit row the message it came in (unique; the
  effect is written only with a new row: `usecases.audit`), and `/endround` ends only a
  round opened before it was sent (`game.rounds.opened_before`). This holds after any delay,
  after Redis lost its data, and between any number of processes. What Redis holds of the
  change (the room's card, the lanes' pause, ceiling and weights, a banned player's lanes
  emptied) is written after the commit from what the database holds then, never from the
  command's arguments (`usecases.derived`), so a delivery again makes good a process that
  died between the commit and Redis, without undoing a later command.
- **The mark in Redis** (`cmx:{q}:seen:<chat>:<message>`, state/keys.py), which keeps the
  work and the answers to once: `run:<owner>` while a process runs the command, a lease of
  `COMMAND_LEASE_S` (`state/lua/command_claim.lua`) renewed while it runs
  (`command_renew.lua`), so that a second live process waits for it (up to
  `COMMAND_WAIT_S`, then "try again": the holder is alive and slow) rather than running
  it beside it, and a dead holder lets go
  within the lease; `done` once the effect committed (`Run.took_effect`), kept for the dedupe
  window (CODEMOJEX_DEDUPE_WINDOW_S) and never taken back, whatever raises after (an
  answer's timeout, a card's write, a cancel); given back only when the command fails
  before its effect committed (`command_release.lua`), so that a delivery again runs it.

A message whose mark is `done` is not run again: the handler only makes Redis what the
database says (`Run.done`), quietly. Past the window the mark is gone and the command runs,
and the database finds its message's effect there and applies nothing, says nothing.

Guesses do not come through here: their job id is derived from the message (bot/guesses.py),
so they are deduplicated where they are stored. `/daily` does not either: opening a day's
daily is idempotent (the second time it shows where the player stands), and its day is the
day its message was sent on (bot/daily.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Final, Literal

from telegram import Message

from codemojex.outages import OUTAGES
from codemojex.state.keys import Keys
from codemojex.state.scripts import register
from codemojex.values.redistypes import AnyRedis
from codemojex.values.types import Origin

log = logging.getLogger(__name__)

DONE: Final = "done"
# A command's run mark is a lease, renewed every third of it while the command runs: a process
# that died lets go of it within this long. Another process given the same message waits up
# to COMMAND_WAIT_S (past the lease, so that a dead holder's has run out) for it to be done
# or let go, polling every COMMAND_POLL_S.
COMMAND_LEASE_S: Final = 15.0
COMMAND_WAIT_S: Final = 20.0
COMMAND_POLL_S: Final = 0.2
Taken = Literal["run", "done"]


def origin_of(message: Message) -> Origin:
    """The message a command came in, as its effect records it."""
    return Origin(message.chat.id, message.message_id, message.date)


class CommandBusy(Exception):
    """Another process has run a command message for longer than this one waits: it is
    alive and slow; the sender is asked to try again."""


class Run:
    """One handling of a command message, as `CommandMarks.once` yields it.

    `done`: the message took effect before: apply nothing, answer nothing, only make Redis
    what the database says. Otherwise run it, and call `took_effect` as soon as its effect
    (or its audit row) committed."""

    def __init__(self, marks: CommandMarks | None, key: str) -> None:
        self.done = marks is None
        self.effective = False  # its effect committed in this handling
        self._marks = marks
        self._key = key
        self._renewing: asyncio.Task[None] | None = None

    async def took_effect(self) -> None:
        """The command's effect committed: its mark is `done` from now on, never given back
        (a failure after this is no reason to run it again)."""
        if self.effective or self._marks is None:
            return
        self.effective = True
        await self._stop_renewing()
        await self._marks.mark_done(self._key)

    def _renew_while_running(self) -> None:
        assert self._marks is not None
        self._renewing = asyncio.create_task(
            self._marks.renew(self._key), name=f"command lease {self._key}"
        )

    async def _stop_renewing(self) -> None:
        task, self._renewing = self._renewing, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class CommandMarks:
    """This process's leases on command messages (see the module docstring)."""

    def __init__(
        self,
        redis: AnyRedis,
        queue: str,
        window_s: int,
        *,
        lease_s: float = COMMAND_LEASE_S,
        wait_s: float = COMMAND_WAIT_S,
        poll_s: float = COMMAND_POLL_S,
    ) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self._window_ms = window_s * 1000
        self._lease_s = lease_s
        self._wait_s = wait_s
        self._poll_s = poll_s
        self._lease = f"run:{secrets.token_hex(8)}"
        self._claim = register(redis, "command_claim")
        self._release = register(redis, "command_release")
        self._renew = register(redis, "command_renew")

    @contextlib.asynccontextmanager
    async def once(self, message: Message) -> AsyncIterator[Run]:
        """The command `message` carries, to run (`Run.done` false: this process holds its
        lease until the block ends) or not (`Run.done`). Its mark is done when the block ends
        or at `Run.took_effect`, and given back when the block raises before `Run.took_effect`."""
        key = self._keys.command_seen(message.chat.id, message.message_id)
        if await self._take(key) == DONE:
            yield Run(None, key)
            return
        run = Run(self, key)
        run._renew_while_running()
        try:
            yield run
        except BaseException:
            await run._stop_renewing()
            if not run.effective:
                await self._give_back(key)
            raise
        await run.took_effect()

    async def _take(self, key: str) -> Taken:
        """The lease, or `done`; while another holds the lease, wait for it (`CommandBusy`
        past `wait_s`)."""
        deadline = time.monotonic() + self._wait_s
        lease_ms = self._ms(self._lease_s)
        waited = False
        while True:
            state = _text(await self._claim(keys=[key], args=[self._lease, lease_ms]))
            if state == "run" or state == DONE:
                if waited:
                    log.info("command %s: the other process let go (%s)", key, state)
                return "run" if state == "run" else DONE
            if not waited:
                # Two processes with one update: a rolling update, or a retry of a slow one.
                log.info("command %s: being run by another process; waiting for it", key)
                waited = True
            if time.monotonic() >= deadline:
                raise CommandBusy(key)
            await asyncio.sleep(self._poll_s)

    async def renew(self, key: str) -> None:
        """Renew the lease every third of it while the command runs; stop when it was lost
        (ran out while this process stalled: another may hold it now)."""
        every = self._lease_s / 3
        while True:
            await asyncio.sleep(every)
            try:
                renewed = await self._renew(keys=[key], args=[self._lease, self._ms(self._lease_s)])
            except Exception as exc:  # an outage: the next renewal tries again
                OUTAGES.swallow(exc, "the bot", "a command's lease not renewed")
                continue
            if not renewed:
                log.warning("command %s: its lease ran out while it ran", key)
                return

    async def mark_done(self, key: str) -> None:
        """The command took effect: `done` for the dedupe window, whoever holds the mark."""
        try:
            await self._redis.set(key, DONE, px=self._window_ms)
        except Exception as exc:
            # The lease runs out instead; a delivery again then finds the effect in the
            # database and applies nothing.
            OUTAGES.swallow(exc, "the bot", "a finished command's mark not set done")

    async def _give_back(self, key: str) -> None:
        try:
            await self._release(keys=[key], args=[self._lease])
        except Exception as exc:  # the failure being raised matters more; the lease runs out
            OUTAGES.swallow(exc, "the bot", "a failed command's lease not given back")

    @staticmethod
    def _ms(seconds: float) -> int:
        return max(1, int(seconds * 1000))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
