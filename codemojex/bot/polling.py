"""The bot's long polling: getUpdates, confirming to Telegram only what the door settled.

Why not python-telegram-bot's Updater: it asks for the next batch as soon as it has put the
last one into the Application's update queue, and asking with the next offset is what
confirms the last batch to Telegram. So a bot killed with updates in that queue loses them
(Telegram never sends a confirmed update again), and since the queue has no bound, a backlog
at Telegram becomes a backlog in the bot's memory. Neither can be changed from outside the
Updater, so this module is the fetch loop instead, on the Application's Bot, handing each
update to the door (bot/door.py `Door`).

The window: the updates fetched and not yet confirmed, in id order. The offset sent with each
getUpdates is the id of the window's first update the door has not settled (finished,
parked in Redis, or a dead letter), so every update Telegram forgets is kept somewhere: a kill
at any moment loses nothing, and what was settled but not yet confirmed comes again (every
handler is safe on an update delivered twice). getUpdates returns the updates from that
offset on, the window's own first again, so the window holds at most `in_hand` (100,
getUpdates' limit, at most): whatever waits beyond it waits at Telegram. An update that does
not finish is parked once past its deadline, so it holds the window for that long at most.

The loop asks for more once the window has room for `refill` more updates (so that a fetch
brings mostly new ones: those returned again are recognised by their id and dropped from the
raw JSON before python-telegram-bot builds an Update of them), and, while anything is in
hand, at least every tick of the door's clock (a tenth of the deadline) that it has room at
all: at a trickle, an update never waits
for the slowest one in hand before it is fetched. An empty window long-polls. Nor does it
fetch while the door holds `held_max` updates (parked ones included): memory stays bounded.
A failed getUpdates is judged by outages.py and asked again after RETRIES.loop's pause;
Telegram's RetryAfter is waited out; a rejected token ends the loop (`failure`).

Update ids: Telegram may start them anew, below the offset already sent, after a week without
updates. An update below the offset sent is no update already taken (those were confirmed):
the loop says so, counts it (`id_resets`) and starts the window again from it.

One poller per bot (state/inbox.py `PollerLease`): the loop fetches only while it holds the
lease, renewed every third of its life; another process of the same bot waits (`standby`,
logged once and on /readyz) and takes over when the lease is released or runs out. Once it
holds the lease, the poller first takes over the parked updates whose process died.

Stopping (SIGTERM): no more fetching; what is in hand finishes within `stop_s`; one last
getUpdates (timeout 0) confirms exactly what was settled; an unsettled update still running
then is cancelled and comes again from Telegram; the lease is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import warnings
from collections import deque
from collections.abc import Sequence
from typing import Any, Final

from telegram import Update
from telegram.error import Conflict, EndPointNotFound, InvalidToken, RetryAfter
from telegram.warnings import PTBUserWarning

from codemojex.bot.door import CONCURRENCY, IN_HAND, STOP_S, Door, InHand
from codemojex.bot.handling import AnyApplication
from codemojex.limits import RETRIES
from codemojex.outages import OUTAGES, pause_s, retry_after_ms
from codemojex.posting.request import AiohttpRequest
from codemojex.runtime import stop_tasks
from codemojex.state.inbox import PollerLease
from codemojex.values.bounds import within

log = logging.getLogger(__name__)

WHERE = "the bot's getUpdates"
# The long poll, and the read timeout allowed on top for its answer.
POLL_TIMEOUT_S: Final = 10
POLL_READ_MARGIN_S: Final = 5.0
_OWN_METHOD = r"Please use 'Bot\.getUpdates'"


def updates_request() -> AiohttpRequest:
    """The HTTP client the Application's getUpdates goes through (its `get_updates_request`).

    aiohttp (posting/request.py), not PTB's httpx client: a getUpdates of 100 updates on
    loopback cost about 430 µs of CPU against httpx's 1,000 (docs/benchmarks.md), and the
    loop makes one for every 50 updates or fewer. The timeouts are PTB's defaults for
    getUpdates (each long poll's read timeout is the loop's own). Two connections: on SIGTERM
    the loop's long poll is cancelled, and its connection can stay held while the one last
    getUpdates that confirms what finished goes out (with one, that call waited for the pool
    and failed)."""
    return AiohttpRequest(
        connections=2,
        pool_timeout=1.0,
        connect_timeout=5.0,
        read_timeout=5.0,
        write_timeout=5.0,
    )


class Poller:
    """Fetches updates while fewer than `in_hand` are unconfirmed; see the module docstring."""

    def __init__(
        self,
        application: AnyApplication,
        door: Door,
        lease: PollerLease,
        *,
        in_hand: int = IN_HAND,
        timeout: float = POLL_TIMEOUT_S,
        allowed_updates: Sequence[str] | None = None,
        stop_s: float = STOP_S,
        concurrency: int = CONCURRENCY,
    ) -> None:
        within(in_hand, InHand, "in_hand")
        self._app = application
        self._bot = application.bot
        self.door = door
        self._lease = lease
        self.in_hand = in_hand
        # Ask for more once fewer are in hand than the door runs at once (its slots would soon
        # idle), but for no fewer than a quarter of the window and no more than half.
        self._refill = max(1, min(in_hand // 2, max(in_hand // 4, in_hand - concurrency)))
        self._timeout = timeout
        self._allowed = list(allowed_updates) if allowed_updates is not None else None
        self._stop_s = stop_s
        # While updates are in hand, fetch again at least this often that the window has
        # room: at a trickle, a new update never waits for the slowest one in hand. The door's
        # tick (a tenth of its deadline): a new update waits no longer for it than the door
        # waits to park.
        self._refetch_s = door.clock.tick_s
        self._window: deque[int] = deque()  # update ids fetched, not confirmed, in order
        self._settled: set[int] = set()  # those of them the door settled
        self._last = 0  # the highest update id fetched
        self._confirmed = 0  # the offset last sent to Telegram
        self._moved = asyncio.Event()  # the window made room, or the door let go of one
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._renewed_at = 0.0  # time.monotonic() the lease was last held
        self.fence = 0  # the lease's fence number while held (0: not held)
        self.standby = False  # another process holds the lease
        self.failure: BaseException | None = None  # what ended the loop (a rejected token)
        self.stopped = asyncio.Event()  # the loop ended, by stop() or by `failure`
        self.fetched = 0  # new updates handed to the door
        self.dropped_again = 0  # updates Telegram returned again and the loop skipped
        self.id_resets = 0  # Telegram started its update ids anew below the offset

    @property
    def offset(self) -> int:
        """What the next getUpdates confirms below: the first unsettled update in hand."""
        return self._window[0] if self._window else self._last + 1

    @property
    def holding(self) -> int:
        return len(self._window)

    async def start(self) -> None:
        """Webhook off (a bot that served one before), then the loop in the background."""
        await self._bot.delete_webhook(drop_pending_updates=False)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._run(), name="polling"))

    async def stop(self) -> None:
        """Stop fetching, finish what is in hand within `stop_s`, confirm what was settled."""
        self._stopping.set()
        self._moved.set()
        await stop_tasks(self._tasks[:1])  # the fetching; the lease is kept through the drain
        late = await self.door.stop(self._stop_s)
        await stop_tasks(self._tasks)
        if late:
            log.warning(
                "stopping: %d updates not finished within %g s; Telegram sends them again",
                late,
                self._stop_s,
            )
        if self.fence:
            await self._confirm_settled()
            try:
                await self._lease.release()
            except Exception as exc:  # it runs out by itself; a standby waits that long
                OUTAGES.swallow(exc, WHERE, "the poller's lease not released")

    # -- the lease ----------------------------------------------------------------------------

    async def _hold_lease(self) -> None:
        """Until this process holds the poller's lease (or the poller stops)."""
        failures = 0
        while not self._stopping.is_set():
            try:
                fence = await self._lease.hold()
            except Exception as exc:
                failures += 1
                OUTAGES.failed(exc, WHERE)
                await self._pause(pause_s(RETRIES.loop, failures))
                continue
            if fence:
                self.fence, self.standby = fence, False
                self.door.inbox.fence = fence  # what a lower fence parked is this poller's
                self._renewed_at = time.monotonic()
                log.info("polling Telegram (the poller's lease, fence %d)", fence)
                return
            if not self.standby:
                self.standby = True
                log.warning(
                    "another process polls this bot; standing by until its lease (%d s) ends",
                    self._lease.lease_ms // 1000,
                )
            await self._pause(self._lease.lease_ms / 3000)

    async def _keep_lease(self) -> None:
        """Renew the lease every third of its life while the loop runs; a lease found lost
        (this process stalled past it, and another took over) stops the fetching at once."""
        while True:
            await asyncio.sleep(self._lease.lease_ms / 3000)
            if not self.fence:
                continue
            try:
                fence = await self._lease.hold()
            except Exception as exc:  # fetching stops by itself once the lease may be over
                OUTAGES.swallow(exc, WHERE, "the poller's lease not renewed")
                continue
            if fence != self.fence:
                log.error("the poller's lease was lost (fence %d); fetching stops", self.fence)
                self.fence = 0
                self._moved.set()
            else:
                self._renewed_at = time.monotonic()

    def _lease_fresh(self) -> bool:
        """Fetch only while the lease is surely ours (renewed within its life)."""
        return bool(self.fence) and (
            time.monotonic() - self._renewed_at < self._lease.lease_ms / 1000
        )

    # -- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        failures = 0
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._keep_lease(), name="polling:lease"))
        self.door.run(self._lease_fresh)
        try:
            while not self._stopping.is_set():
                if not self._lease_fresh():
                    await self._hold_lease()
                    if self._stopping.is_set():
                        return
                    await self._take_over()
                await self._room_for(self._refill)
                if self._stopping.is_set():
                    return
                if not self._lease_fresh():
                    continue
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
        finally:
            self.stopped.set()

    async def _take_over(self) -> None:
        """Every parked update the previous pollers left (a lower fence, or a lease run out),
        before any new update: their keys' newer updates come after them. As many at a time
        as the door has room for; an outage is waited out."""
        failures = 0
        while not self._stopping.is_set() and self._lease_fresh():
            room = self.door.held_max - self.door.held
            if room < 1:
                self._moved.clear()
                await self._pause_until_moved()
                continue
            try:
                taken = await self.door.take_over()
            except Exception as exc:
                failures += 1
                OUTAGES.failed(exc, WHERE)
                await self._pause(pause_s(RETRIES.loop, failures))
                continue
            if taken:
                log.info("took over %d parked updates", taken)
            if taken < room:
                return

    async def _pause_until_moved(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._moved.wait(), self._refetch_s)

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
                read_timeout=poll_s + POLL_READ_MARGIN_S,
            )
        if offset is not None:
            self._confirmed = max(self._confirmed, offset)
        return result if isinstance(result, list) else []

    def _take(self, raw: list[Any]) -> int:
        """Hand the updates not seen before to the door, in id order; how many."""
        new = 0
        for data in raw:
            update_id = data.get("update_id") if isinstance(data, dict) else None
            if not isinstance(update_id, int):
                continue  # not an update: nothing to confirm it by either
            if update_id < self._confirmed and update_id not in self._window:
                self._reset(update_id)
            if update_id <= self._last:
                self.dropped_again += 1
                continue
            self._last = update_id
            self._window.append(update_id)
            new += 1
            try:
                update = Update.de_json(data, self._bot)
            except Exception as exc:  # an update PTB cannot read: a dead letter, confirmed
                kept = self.door.unreadable(update_id, data, exc)
                kept.add_done_callback(functools.partial(self._settled_by, update_id))
                continue
            ticket = self.door.take(update, data)
            ticket.settled.add_done_callback(functools.partial(self._settled_by, update_id))
        self.fetched += new
        return new

    def _reset(self, update_id: int) -> None:
        """Telegram's ids started again below the offset: a new window from `update_id`."""
        self.id_resets += 1
        log.warning(
            "getUpdates: update id %d is below the offset %d already sent: Telegram started "
            "its update ids anew; taking updates from there",
            update_id,
            self._confirmed,
        )
        self._window.clear()
        self._settled.clear()
        self._last = update_id - 1
        self._confirmed = 0

    def _settled_by(self, update_id: int, future: asyncio.Future[Any]) -> None:
        self._settle(update_id, future.cancelled())

    def _settle(self, update_id: int, cancelled: bool) -> None:
        if cancelled:
            return  # not settled: Telegram sends it again
        self._settled.add(update_id)
        window = self._window
        if window and window[0] == update_id:
            while window and window[0] in self._settled:
                self._settled.discard(window.popleft())
            self._moved.set()

    async def _room_for(self, wanted: int) -> None:
        """Until the window has room for `wanted` more updates, or for one more when
        `refetch_s` passed with anything in hand, and the door holds fewer than `held_max`
        (or the poller stops)."""
        deadline = time.monotonic() + self._refetch_s
        while not self._stopping.is_set():
            room = self.in_hand - len(self._window)
            if self.door.held < self.door.held_max and (
                room >= wanted or (room >= 1 and time.monotonic() >= deadline)
            ):
                return
            self._moved.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._moved.wait(), max(0.0, deadline - time.monotonic()) or self._refetch_s
                )

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

    async def _confirm_settled(self) -> None:
        """One last getUpdates, timeout 0: Telegram forgets exactly what was settled."""
        if not self._last or self.offset <= self._confirmed:
            return
        try:
            await self._get_updates(poll_s=0, limit=1)
        except Exception as exc:  # they come again after the restart: taken once all the same
            OUTAGES.swallow(exc, WHERE, "the last settled updates not confirmed")
