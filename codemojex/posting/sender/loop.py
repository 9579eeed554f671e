"""The sender's loop: which chat posts next.

The chats with unsent rows take turns in the posting ring (posting/ring.py): the process that
wrote rows adds their chat right after its commit (the worker through `poke`, the bot when it
opens or closes a round), and a slow reconciliation scan of the outbox (`poll_s`, once a
minute) adds the chats of rows a dead process never announced. A sender takes the chats whose
turn has come (at most `max_chats` in hand), each with a Redis chat lease, so a chat's
messages go out in order and a backlog is folded by one process; each chat's turn (turn.py)
posts one message and hands the chat back with its next turn after its pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex.db import store
from codemojex.db.reading import reading
from codemojex.limits import RETRIES
from codemojex.outages import OUTAGES, pause_s
from codemojex.posting.fold import MAX_MESSAGE
from codemojex.posting.keys import Keys
from codemojex.posting.pacer import Pacer
from codemojex.posting.ring import PostingRing
from codemojex.posting.sender.delivery import WHERE, Ambiguous, Delivery
from codemojex.posting.sender.stats import SenderStats
from codemojex.posting.sender.telegram import Poster
from codemojex.posting.sender.turn import Turns
from codemojex.values.redistypes import AnyRedis

log = logging.getLogger(__name__)


# How often an idle sender scans the outbox for rows a dead process never announced (its only
# SQL when idle), and looks at the ring when nobody woke it (writers of rows do).
RECONCILE_S: Final = 60.0
PEEK_S: Final = 1.0
# A chat's turn that failed (a bug, an outage mid-turn) gives the chat back after this.
TURN_FAILED_PAUSE_S: Final = 1.0
# Posts on the wire at once: the Bot API pool's connections (worker/botapi.py make_bot).
IN_FLIGHT: Final = 32
# A sender that stands back (`stand_back`) asks again this often.
STAND_BACK_S: Final = 5.0


class OutboxSender:
    """Drains the outbox to Telegram. `await sender.run(stop_event)`.

    Several senders (in one process or several) may run on one outbox and one Redis: the
    chat leases and row claims keep them off each other's rows, the pacer keeps their sum
    within Telegram's limits.
    """

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bot: Bot,
        redis: AnyRedis,
        *,
        namespace: str,
        pacer: Pacer | None = None,
        owner: str | None = None,
        max_chats: int = 32,
        poll_s: float = RECONCILE_S,
        peek_s: float = PEEK_S,
        chat_lease_ms: int = 20_000,
        claim_lease_s: float = 20.0,
        claim_limit: int = 200,
        max_message: int = MAX_MESSAGE,
        stats: SenderStats | None = None,
        ambiguous: Ambiguous = "repost",
        post_timeout_s: float = 8.0,
        stand_back: Callable[[], Awaitable[bool]] | None = None,
        stand_back_s: float = STAND_BACK_S,
        in_flight: int = IN_FLIGHT,
    ) -> None:
        """`namespace` scopes the Redis keys (use the queue name). `poll_s` is how often the
        outbox is scanned for chats with unsent rows that nobody added to the ring (a process
        that died between its commit and its `add`); `peek_s` how often an idle sender looks
        at the ring for chats other processes added (its own process wakes it at once through
        `poke`). `max_chats` bounds the chats in hand at once; the rest wait their turn in
        the posting ring. `chat_lease_ms` is a chat's lease (renewed before every post: the
        fence) and `claim_lease_s` its rows' claim, of at most `claim_limit` rows a turn; a
        post is bounded by `post_timeout_s`, well inside both, and a slot is never waited for
        past half the claim.
        `ambiguous` is what to do when a post may or may not have reached Telegram (read
        timeout, connection dropped after sending, or a sender that died while posting):
        "repost" (at least once, the default: a result is never lost, rarely duplicated) or
        "assume_sent" (at most once: never duplicated, rarely lost).
        `in_flight` posts are on the wire at once at most (the Bot API pool's connections).
        `stand_back`, asked every `stand_back_s`, says when others post instead (the worker's
        sender while `codemojex sender` processes run): the sender then takes no turn (it
        finishes those in hand) until it says otherwise."""
        if post_timeout_s * 1000 >= chat_lease_ms or post_timeout_s >= claim_lease_s / 2:
            raise ValueError("a post must end well inside the chat lease and the row claim")
        self._sessionmaker = sessionmaker
        self._keys = Keys(namespace)
        self.pacer = pacer or Pacer(redis, namespace)
        self.ring = PostingRing(redis, namespace)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._max_chats = max_chats
        self._poll_s = poll_s
        self._peek_s = peek_s
        self._chat_lease_ms = chat_lease_ms
        self.stats = stats or SenderStats()
        # Set while the sender stops: what waits (a slot, mark_sent through an outage) ends.
        self._halt = asyncio.Event()
        self._delivery = Delivery(
            sessionmaker,
            redis,
            self._keys,
            owner=self.owner,
            ambiguous=ambiguous,
            chat_lease_ms=chat_lease_ms,
            claim_lease_s=claim_lease_s,
            claim_limit=claim_limit,
            stats=self.stats,
            stop=self._halt,
        )
        self._turns = Turns(
            self.pacer,
            self._delivery,
            Poster(bot, self.pacer, self.stats, post_timeout_s, in_flight),
            self.stats,
            claim_lease_s=claim_lease_s,
            max_message=max_message,
            stop=self._halt,
        )
        self._active: dict[int, asyncio.Task[None]] = {}
        self._poked: set[int] = set()
        self._wake = asyncio.Event()
        self._stand_back = stand_back
        self._stand_back_s = stand_back_s
        self._standing_back = False
        self._asked_at = float("-inf")

    # -- the loop -----------------------------------------------------------------------------

    def poke(self, chat_id: int) -> None:
        """This chat's outbox just got rows (committed): into the ring, and look at once."""
        self._poked.add(chat_id)
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Post until `stop` is set; then let every chat finish the post in hand and return.
        May be called again after it returned."""
        self._halt.clear()
        if stop.is_set():
            self._halt.set()
        stopper = asyncio.create_task(self._watch(stop))
        next_scan, failures = 0.0, 0
        try:
            while not self._halt.is_set():
                self._wake.clear()
                if time.monotonic() >= next_scan:
                    failures = 0 if await self._reconcile() else failures + 1
                    # after a failed scan, soon again (backing off), not a whole poll_s later
                    again_s = pause_s(RETRIES.loop, failures) if failures else self._poll_s
                    next_scan = time.monotonic() + min(self._poll_s, again_s)
                next_ms = await self._take_turns(take=not await self._stands_back())
                timeout = min(self._peek_s, max(0.0, next_scan - time.monotonic()))
                if next_ms is not None:
                    timeout = min(timeout, next_ms / 1000)
                if not self._wake.is_set() and timeout > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            self._halt.set()
            stopper.cancel()
            if self._active:
                await asyncio.gather(*self._active.values(), return_exceptions=True)

    async def _stands_back(self) -> bool:
        """Whether others post instead (asked at most every `stand_back_s`; an answer that
        fails is "no": the rows must go out)."""
        if self._stand_back is None:
            return False
        if time.monotonic() - self._asked_at >= self._stand_back_s:
            self._asked_at = time.monotonic()
            try:
                standing = await self._stand_back()
            except Exception as exc:
                if OUTAGES.failed(exc, WHERE) is None:
                    raise
                standing = False
            if standing != self._standing_back:
                log.info("outbox sender %s", "stands back" if standing else "posts again")
            self._standing_back = standing
        return self._standing_back

    async def _watch(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._halt.set()
        self._wake.set()

    async def _reconcile(self) -> bool:
        """Add every chat with unsent rows to the ring (rows a dead process never announced;
        at start, whatever the last run left). False: the database was out (the loop tries
        again after RETRIES.loop's pause, taking turns meanwhile)."""
        try:
            async with reading(self._sessionmaker) as session:
                chats = await store.chats_with_unsent(session)
            OUTAGES.ok("postgres")
        except Exception as exc:
            if OUTAGES.failed(exc, WHERE) is None:
                raise
            self.stats.errors += 1
            OUTAGES.retried[RETRIES.loop.name] += 1
            return False
        self._poked.update(chats)
        return True

    async def _take_turns(self, *, take: bool = True) -> int | None:
        """Announce the poked chats, take the chats whose turn has come and start their turns
        (not with `take` false: standing back, the chats are only announced, for the senders
        that post). The ms until the ring's next turn (None: the ring is empty, we hold all
        we may, or we stand back)."""
        poked, self._poked = self._poked, set()
        try:
            if poked:
                await self.ring.add(poked)
                poked = set()
            in_hand = min(self._max_chats, self._turns.bot_serves())
            free = in_hand - len(self._active) if take else 0
            if free <= 0:
                return None  # a turn that ends wakes the loop
            token = uuid.uuid4().hex
            turns = await self.ring.take(free, self._chat_lease_ms, token)
            OUTAGES.ok("redis")
        except Exception as exc:
            self._poked |= poked
            if OUTAGES.failed(exc, WHERE) is None:
                raise
            self.stats.errors += 1
            return 1000  # the ring is looked at again in a second
        for chat_id in turns.chats:
            self._active[chat_id] = asyncio.create_task(
                self._turn_safely(chat_id, token), name=f"send:{chat_id}"
            )
        return turns.next_ms

    async def _turn_safely(self, chat_id: int, token: str) -> None:
        try:
            await self.turn(chat_id, token)
        except Exception as exc:
            self.stats.errors += 1
            if OUTAGES.failed(exc, WHERE) is None:
                log.exception("sender for chat %d failed; it will be retried", chat_id)
            await asyncio.sleep(TURN_FAILED_PAUSE_S)
        finally:
            # The chat may already be in its next turn (taken again once handed back).
            if self._active.get(chat_id) is asyncio.current_task():
                del self._active[chat_id]
            self._wake.set()

    async def turn(self, chat_id: int, token: str) -> None:
        """One turn of a chat this sender took from the ring (leased to `token`): post the next
        message (everything waiting for it), then hand the chat back to the ring."""
        delay_ms, more = 0, True
        try:
            delay_ms, more = await self._turns.post_next(
                chat_id, self._keys.chat_lease(chat_id), token
            )
        finally:
            try:
                if await self.ring.release(chat_id, token, delay_ms, more) < 0:
                    self.stats.turns_outlived += 1
            except Exception as exc:
                # The lease runs out and the ring brings the chat round again then.
                if OUTAGES.failed(exc, WHERE) is None:
                    raise
