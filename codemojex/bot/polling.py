"""The bot's long polling: getUpdates, confirming to Telegram only what the handlers finished.

Why not python-telegram-bot's Updater: it asks for the next batch as soon as it has put the
last one into the Application's update queue, and asking with the next offset is what
confirms the last batch to Telegram. So a bot killed with updates in that queue loses them
(Telegram never sends a confirmed update again), and since the queue has no bound, a backlog
at Telegram becomes a backlog in the bot's memory. Neither can be changed from outside the
Updater, so this module is the fetch loop instead, on the Application's Bot, handing each
update to the Application's update processor (bot/processor.py `handle_update`: each
sender's updates in order, `bot_concurrency` at once).

The window: the updates fetched and not yet confirmed, in id order. The offset sent with each
getUpdates is the id of the window's first update whose handler has not finished, so every
update Telegram forgets has been handled: a kill at any moment loses nothing, and what was
handled but not yet confirmed comes again (every handler is safe on an update delivered
twice: a guess's job id is derived from its origin). getUpdates returns the updates from
that offset on, the window's own first again, so the window holds at most `in_hand` (100,
getUpdates' limit, at most): whatever waits beyond it waits at Telegram.

The loop asks for more once the window has room for `refill` more updates: once it holds
fewer than the processor runs at once (a quarter to half of the window), so that the fetch
overlaps the handling and brings mostly new updates. The ones it returns again are
recognised by their id and dropped from the raw JSON, before python-telegram-bot builds an
Update of them (that costs more than the rest of a guess's way through the bot). When
Telegram had no more than it returned, the loop waits until the window made room for a
refill more (an empty window long-polls), never a hot loop; so at a trickle an update may
wait for the slowest one in hand before it is fetched. A failed getUpdates is judged by
outages.py and asked again after RETRIES.loop's pause; Telegram's RetryAfter is waited out; a
rejected token ends the loop (`failure`).

Stopping (SIGTERM): no more fetching; what is in hand finishes within `stop_s`; one last
getUpdates (timeout 0) confirms exactly what finished; an update still running then is
cancelled and comes again from Telegram.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections import deque
from collections.abc import Sequence
from typing import Any

from telegram import Update
from telegram.error import Conflict, EndPointNotFound, InvalidToken, RetryAfter
from telegram.ext import Application
from telegram.warnings import PTBUserWarning

from codemojex.bot.processor import handle_update
from codemojex.limits import BOT, RETRIES
from codemojex.outages import OUTAGES, pause_s, retry_after_ms

log = logging.getLogger(__name__)

AnyApplication = Application[Any, Any, Any, Any, Any, Any]
WHERE = "the bot's getUpdates"
_OWN_METHOD = r"Please use 'Bot\.getUpdates'"


class Poller:
    """Fetches updates while fewer than `in_hand` are unconfirmed; see the module docstring."""

    def __init__(
        self,
        application: AnyApplication,
        *,
        in_hand: int = BOT.in_hand_default,
        timeout: float = BOT.poll_timeout_s,
        allowed_updates: Sequence[str] | None = None,
        stop_s: float = BOT.stop_s,
        concurrency: int = BOT.concurrency_default,
    ) -> None:
        if not 1 <= in_hand <= BOT.in_hand_max:
            raise ValueError(f"in_hand must be 1 to {BOT.in_hand_max}")
        self._app = application
        self._bot = application.bot
        self.in_hand = in_hand
        # Ask for more once fewer are in hand than the processor runs at once (its slots
        # would soon idle), but for no fewer than a quarter of the window and no more than
        # half: a fetch brings mostly new updates.
        self._refill = max(1, min(in_hand // 2, max(in_hand // 4, in_hand - concurrency)))
        self._timeout = timeout
        self._allowed = list(allowed_updates) if allowed_updates is not None else None
        self._stop_s = stop_s
        self._window: deque[int] = deque()  # update ids fetched, not confirmed, in order
        self._finished: set[int] = set()  # those of them whose handlers finished
        self._last = 0  # the highest update id fetched
        self._confirmed = 0  # the offset last sent to Telegram
        self._moved = asyncio.Event()  # the window made the room the loop waits for
        self._wanted = 1  # how much room that is
        self._stopping = asyncio.Event()
        self._handlers: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None  # what ended the loop (a rejected token)
        self.stopped = asyncio.Event()  # the loop ended, by stop() or by `failure`
        self.fetched = 0  # new updates handed to the handlers
        self.dropped_again = 0  # updates Telegram returned again and the loop skipped

    @property
    def offset(self) -> int:
        """What the next getUpdates confirms below: the first unfinished update in hand."""
        return self._window[0] if self._window else self._last + 1

    @property
    def holding(self) -> int:
        return len(self._window)

    async def start(self) -> None:
        """Webhook off (a bot that served one before), then the loop in the background."""
        await self._bot.delete_webhook(drop_pending_updates=False)
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="polling")

    async def stop(self) -> None:
        """Stop fetching, finish what is in hand within `stop_s`, confirm what finished."""
        self._stopping.set()
        self._moved.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._handlers:
            _, late = await asyncio.wait(set(self._handlers), timeout=self._stop_s)
            if late:
                log.warning(
                    "stopping: %d updates not finished within %g s; Telegram sends them again",
                    len(late),
                    self._stop_s,
                )
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
        await self._confirm_finished()

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        failures = 0
        try:
            while not self._stopping.is_set():
                await self._room_for(self._refill)
                if self._stopping.is_set():
                    return
                try:
                    raw = await self._get_updates(poll_s=0 if self._window else self._timeout)
                except (InvalidToken, EndPointNotFound) as exc:
                    # EndPointNotFound: do_api_request's name for a 401/404 once the bot
                    # started, which for getUpdates is a token revoked since.
                    self.failure = exc
                    log.error("getUpdates: the token was rejected; polling stops")
                    return
                except RetryAfter as exc:
                    await self._pause(retry_after_ms(exc) / 1000)
                    continue
                except Exception as exc:
                    failures += 1
                    self._failed(exc)
                    await self._pause(pause_s(RETRIES.loop, failures))
                    continue
                if failures:
                    failures = 0
                    OUTAGES.ok("telegram")
                self._take(raw)
                if len(raw) < self.in_hand and self._window:
                    # Telegram had no more: ask again once the window made room for a refill
                    # more than now (an empty one long-polls), not at once for nothing new.
                    room = self.in_hand - len(self._window)
                    await self._room_for(min(self.in_hand, room + self._refill))
        finally:
            self.stopped.set()

    async def _get_updates(self, *, poll_s: float, limit: int | None = None) -> list[Any]:
        offset = self.offset if self._last else None
        # Bot.do_api_request returns the raw JSON (Bot.get_updates would build an Update of
        # every update returned, the window's own again included). PTB warns, before its first
        # await, that a method of its own is called that way, which is the point here.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _OWN_METHOD, PTBUserWarning)
            result = await self._bot.do_api_request(
                "getUpdates",
                api_kwargs={
                    "offset": offset,
                    "limit": limit or self.in_hand,
                    "timeout": poll_s,
                    "allowed_updates": self._allowed,
                },
                read_timeout=poll_s + BOT.poll_read_margin_s,
            )
        if offset is not None:
            self._confirmed = max(self._confirmed, offset)
        return result if isinstance(result, list) else []

    def _take(self, raw: list[Any]) -> int:
        """Hand the updates not seen before to the handlers, in id order; how many."""
        new = 0
        for data in raw:
            update_id = data.get("update_id") if isinstance(data, dict) else None
            if not isinstance(update_id, int):
                continue  # not an update: nothing to confirm it by either
            if update_id <= self._last:
                self.dropped_again += 1
                continue
            self._last = update_id
            self._window.append(update_id)
            new += 1
            try:
                update = Update.de_json(data, self._bot)
            except Exception:  # an update PTB cannot read: confirmed, never handled
                log.exception("update %d could not be read; skipped", update_id)
                self._finish(update_id)
                continue
            task = asyncio.get_running_loop().create_task(self._handle(update))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        self.fetched += new
        return new

    async def _handle(self, update: Update) -> None:
        # Cancelled (a stop that timed out): not finished, so never confirmed; it comes again.
        try:
            await handle_update(self._app, update)
        except Exception:  # PTB's process_update reports handler errors itself: a bug here
            log.exception("update %d: its handling failed", update.update_id)
        self._finish(update.update_id)

    def _finish(self, update_id: int) -> None:
        self._finished.add(update_id)
        window = self._window
        if window and window[0] == update_id:
            while window and window[0] in self._finished:
                self._finished.discard(window.popleft())
            if self.in_hand - len(window) >= self._wanted:
                self._moved.set()

    async def _room_for(self, wanted: int) -> None:
        """Until the window has room for `wanted` more updates (or the poller stops)."""
        while self.in_hand - len(self._window) < wanted and not self._stopping.is_set():
            self._wanted = wanted
            self._moved.clear()
            await self._moved.wait()

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _failed(self, exc: BaseException) -> None:
        if OUTAGES.failed(exc, WHERE) is not None:
            return  # an outage: one line when it starts, one when it ends
        if isinstance(exc, Conflict):
            log.warning("getUpdates: conflict (another poller of this token, or a webhook)")
        else:
            log.error("getUpdates failed: %s", type(exc).__name__, exc_info=exc)

    async def _confirm_finished(self) -> None:
        """One last getUpdates, timeout 0: Telegram forgets exactly what finished."""
        if not self._last or self.offset <= self._confirmed:
            return
        try:
            await self._get_updates(poll_s=0, limit=1)
        except Exception as exc:  # they come again after the restart: taken once all the same
            OUTAGES.swallow(exc, WHERE, "the last finished updates not confirmed")
