"""Updates handled concurrently across senders and in order for each sender.

Handled one at a time, a flooding player's hundred messages would hold every other room's
guesses behind them in the bot (each costs a few storage round trips) before the lanes ever
see them. Handled fully concurrently, one player's guesses could reach their lane out of the
order they were typed. So: one lock per (chat, sender), taken *before* one of the
`max_concurrent_updates` slots, so that a flood queues on its own lock and never occupies the
slots other senders need.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from telegram import Update
from telegram.ext import Application, BaseUpdateProcessor

from codemojex.limits import BOT

SenderKey = tuple[int, int]


def sender_key(update: object) -> SenderKey | None:
    if not isinstance(update, Update):
        return None
    chat, user = update.effective_chat, update.effective_user
    if chat is None or user is None:
        return None
    return chat.id, user.id


async def handle_update(
    application: Application[Any, Any, Any, Any, Any, Any], update: Update
) -> None:
    """Handle one update through the application's update processor, as PTB's own update
    queue would: returns once its handlers finished (a handler that raised has finished too,
    its error handler ran). The polling loop and the webhook confirm an update to Telegram
    only after this returned."""
    await application.update_processor.process_update(update, application.process_update(update))


class PerSenderUpdateProcessor(BaseUpdateProcessor):
    """`concurrency` updates handled at once, each sender's in the order they were fetched.

    PTB's own bound (taken before `do_process_update`) is set out of the way (`backlog`); ours
    is taken after the sender's lock.
    """

    def __init__(
        self,
        concurrency: int = BOT.concurrency_default,
        *,
        backlog: int = BOT.update_backlog,
    ) -> None:
        super().__init__(backlog)
        self._slots = asyncio.Semaphore(concurrency)
        self._locks: dict[SenderKey, asyncio.Lock] = {}
        self._queued: dict[SenderKey, int] = {}
        self._active = 0
        self._idle: asyncio.Event | None = None

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        self._active += 1
        if self._idle is not None:
            self._idle.clear()
        try:
            key = sender_key(update)
            if key is None:
                async with self._slots:
                    await coroutine
                return
            # No await between task start and taking the lock: tasks start in the order the
            # updates were fetched, so each sender's updates take the lock in that order.
            lock = self._locks.setdefault(key, asyncio.Lock())
            self._queued[key] = self._queued.get(key, 0) + 1
            try:
                async with lock, self._slots:
                    await coroutine
            finally:
                self._queued[key] -= 1
                if not self._queued[key]:
                    # Nobody else is queued behind this sender: forget the lock (no growth).
                    del self._queued[key]
                    del self._locks[key]
        finally:
            self._active -= 1
            if not self._active and self._idle is not None:
                self._idle.set()

    async def wait_idle(self) -> None:
        """Until no update is being handled (tests: "the bot is done with what it fetched")."""
        if not self._active:
            return
        if self._idle is None:
            self._idle = asyncio.Event()
        await self._idle.wait()

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass
