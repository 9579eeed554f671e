"""Which of the bot's updates run in order, and the queues that keep it: the door (door.py)
runs the updates of one key one at a time, in the order taken, and keys side by side.

An admin's command, `/newgame` and a member joining or leaving are ordered per chat, whoever
sends them (a `/ban` must not overtake a later `/unban` of another admin); everything else
per chat and sender (a player's guesses reach their lane in the order typed)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Hashable

from telegram import Update
from telegram.constants import ChatType

from codemojex.bot.ticket import Ticket


def order_key(update: Update, chat_ordered: frozenset[str]) -> Hashable:
    """The key whose updates run one at a time, in order (module docstring): per chat for a
    command named in `chat_ordered` in a group and a member's change; per chat and sender
    otherwise (in a private chat, everything its one person sends)."""
    change = update.chat_member or update.my_chat_member
    if change is not None:
        return ("chat", change.chat.id)
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
        return ("chat", chat.id)
    if chat is not None:
        return ("sender", chat.id, user.id if user is not None else 0)
    if user is not None:
        return ("user", user.id)
    return ("update", update.update_id)


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
        self._queues: dict[Hashable, deque[Ticket]] = {}
        self.idle = asyncio.Event()
        self.idle.set()
        self.held = 0  # tickets in a queue (waiting, running, parked and not finished)

    def waiting(self, key: Hashable) -> int:
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

    async def _drain(self, key: Hashable) -> None:
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
