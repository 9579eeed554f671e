"""Which of the bot's updates run in order, and the queues that keep it: the door (door.py)
runs the updates of one key one at a time, in the order taken, and keys side by side.

An admin's command, `/newgame` and a member joining or leaving are ordered per chat, whoever
sends them (a `/ban` must not overtake a later `/unban` of another admin); everything else
per chat and sender (a player's guesses reach their lane in the order typed)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator

from telegram import Update
from telegram.constants import ChatType

from codemojex.bot.ticket import Ticket
from codemojex.limits import RETRIES
from codemojex.outages import OUTAGES, pause_s
from codemojex.state.inbox import Inbox, record

log = logging.getLogger(__name__)

WHERE = "the bot's inbox"


class Behind(Exception):
    """The update's key has an older update parked by another process (webhook): found by
    the call that would have taken its effect (a guess's admission, `order_guard`), which
    took none. The door parks it behind that one."""


# The update a try runs, while other processes may hold its key's parked updates (the door
# sets it around each try of a webhook process: (order key, update id); None: polling, where
# this process holds every parked update there is).
_RUNNING: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "door_order", default=None
)


def order_guard() -> tuple[str, int] | None:
    """What the update being handled must be the oldest of, across processes: its order key
    and its id, for a call that takes its effect to check in the same step (the lanes'
    `first` guard on the key's parked updates; `Behind` when it refuses). None: nothing to
    check (polling)."""
    return _RUNNING.get()


@contextlib.contextmanager
def oldest_of_its_key(ticket: Ticket) -> Iterator[None]:
    """Around a try of `ticket` in a webhook process: `order_guard` names it."""
    token = _RUNNING.set((ticket.key, ticket.update_id))
    try:
        yield
    finally:
        _RUNNING.reset(token)


def guess_shaped(update: Update) -> bool:
    """A group's plain message: a guess, or talk the bot ignores. Its only effect is a
    guess's admission, which checks the order itself (`order_guard`), so a webhook process
    need not check it first (`Entrance`): the common path pays no call of its own."""
    message = update.message
    return (
        message is not None
        and bool(message.text)
        and not (message.text or "").startswith("/")
        and message.chat.type in (ChatType.GROUP, ChatType.SUPERGROUP)
    )


# Inbox.enter's answers (state/lua/inbox_enter.lua).
ENTER_RUN, ENTER_BEHIND, ENTER_MINE, ENTER_COPY, ENTER_NEEDS_JSON = range(5)


def order_key(update: Update, chat_ordered: frozenset[str]) -> str:
    """The key whose updates run one at a time, in order (module docstring): per chat
    (`c:<chat>`) for a command named in `chat_ordered` in a group and a member's change; per
    chat and sender (`s:<chat>:<user>`) otherwise (in a private chat, everything its one
    person sends). Made of ids only: the inbox files parked updates under it
    (state/inbox.py)."""
    change = update.chat_member or update.my_chat_member
    if change is not None:
        return f"c:{change.chat.id:d}"
    chat, user = update.effective_chat, update.effective_user
    message = update.message
    if (
        message is not None
        and chat is not None
        and chat.type != ChatType.PRIVATE
        and message.text
        and message.text.startswith("/")
        and _command(message.text) in chat_ordered
    ):
        return f"c:{chat.id:d}"
    if chat is not None:
        return f"s:{chat.id:d}:{user.id if user is not None else 0:d}"
    if user is not None:
        return f"u:{user.id:d}"
    return f"x:{update.update_id:d}"


def _command(text: str) -> str:
    """The command a message starts with ("/Ban@our_bot x" -> "ban")."""
    word = text[1:].split(maxsplit=1)
    return word[0].split("@", 1)[0].lower() if word else ""


class KeyQueues:
    """The updates of each key waiting in this process, run one at a time in the order taken
    (`run`, one drain task per key that has any), keys side by side."""

    def __init__(
        self,
        run: Callable[[Ticket], Awaitable[None]],
        spawn: Callable[[Awaitable[None], str], object],
    ) -> None:
        self._run = run
        self._spawn = spawn
        self._queues: dict[str, deque[Ticket]] = {}
        self.idle = asyncio.Event()
        self.idle.set()
        self.held = 0  # tickets in a queue (waiting, running, parked and not finished)

    def waiting(self, key: str) -> int:
        queue = self._queues.get(key)
        return len(queue) if queue is not None else 0

    def append(self, ticket: Ticket) -> None:
        """Behind every update of its key taken before."""
        self.held += 1
        self.idle.clear()
        queue = self._queues.get(ticket.key)
        if queue is None:
            self._queues[ticket.key] = deque([ticket])
            self._spawn(self._drain(ticket.key), "drain")
        else:
            queue.append(ticket)

    def insert(self, ticket: Ticket) -> None:
        """An older update of its key (taken over from the inbox): before the newer ones
        waiting by update id, never before the one running."""
        queue = self._queues.get(ticket.key)
        if queue is None:
            self.append(ticket)
            return
        start = 1 if queue[0].running else 0
        at = next(
            (i for i in range(start, len(queue)) if queue[i].update_id > ticket.update_id),
            len(queue),
        )
        queue.insert(at, ticket)
        self.held += 1

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                ticket = queue[0]
                if not ticket.dropped:
                    ticket.running = True
                    await self._run(ticket)
                queue.popleft()
                self.held -= 1
        finally:
            del self._queues[key]
            if not self._queues:
                self.idle.set()


class Entrance:
    """One order per key across processes (webhook: a balancer spreads updates over several
    processes): the updates handed to this process in one event-loop turn are checked against
    every process's parked updates in one call (state/inbox.py `Inbox.enter`), and `admit`ted
    with the answer: run here, parked behind another process's (answered, run by whoever
    holds its key), parked behind this process's own, or a copy of one parked already. Only
    an update that must wait sends its JSON, in a second call. While Redis cannot answer, the
    check is tried again until the update's deadline, then it is given back (`give_back`:
    Telegram sends it again)."""

    def __init__(
        self,
        inbox: Inbox,
        admit: Callable[[Ticket, int], None],
        give_back: Callable[[Ticket], None],
        spawn: Callable[[Awaitable[None], str], object],
        *,
        deadline_s: float,
    ) -> None:
        self._inbox = inbox
        self._admit = admit
        self._give_back = give_back
        self._spawn = spawn
        self._deadline_s = deadline_s
        self._pending: list[Ticket] = []
        self.entering = 0  # handed in, not yet admitted

    def add(self, ticket: Ticket) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(ticket)
        self.entering += 1

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            self._spawn(self._enter(batch), "enter")

    async def _enter(self, batch: list[Ticket]) -> None:
        failures, with_json = 0, False
        while batch:
            try:
                answers = await self._inbox.enter([_entry(t, with_json) for t in batch])
            except Exception as exc:
                if OUTAGES.failed(exc, WHERE) is None:
                    log.error("checking updates against the parked ones failed", exc_info=exc)
                    answers = [0] * len(batch)  # a bug of ours: run them rather than hang
                else:
                    failures += 1
                    now = time.monotonic()
                    for ticket in batch:
                        ticket.waits = True  # given back, its sender hears why
                        if now - ticket.born >= self._deadline_s:
                            self.entering -= 1
                            self._give_back(ticket)
                    batch = [t for t in batch if not t.dropped]
                    await asyncio.sleep(pause_s(RETRIES.update, failures))
                    continue
            if failures:
                failures = 0
                OUTAGES.ok("redis")
            later = []
            for ticket, answer in zip(batch, answers, strict=True):
                if answer == ENTER_NEEDS_JSON:
                    later.append(ticket)
                else:
                    self.entering -= 1
                    self._admit(ticket, answer)
            batch, with_json = later, True


def _entry(ticket: Ticket, with_json: bool) -> tuple[int, str, str]:
    return ticket.update_id, ticket.key, record(ticket.raw, ticket.tries) if with_json else ""
