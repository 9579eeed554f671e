"""The outbox sender: posts what the game decided, paced, coalesced, at least once.

Who posts what
    The chats with unsent rows take turns in the posting ring (posting/ring.py): the process
    that wrote rows adds their chat right after its commit (the worker through `poke`, the bot
    when it opens or closes a round), and a slow reconciliation scan of the outbox (`poll_s`,
    once a minute) adds the chats of rows a dead process never announced. A sender takes the
    chats whose turn has come (at most `max_chats` in hand), each with a Redis chat lease, so
    a chat's messages go out in order and a backlog is folded by one process; it posts one
    message to each and hands it back with its next turn after its pace. The rows it posts
    are also claimed in the database (`store.claim_outbox`, FOR UPDATE SKIP LOCKED with a
    lease), so even if Redis lost the chat lease (a restart without persistence) two senders
    would still take disjoint rows.

The pace, and folding instead of holding
    Before each post the sender takes a slot from the shared `Pacer` (Redis): one message a
    second per chat, a group's twenty a minute spread three seconds apart, thirty a second for
    the bot, for all processes together. A chat whose own pace does not allow a post yet is
    handed back to the ring with its turn at the moment it does (it holds no rows and no
    task meanwhile); a chat waiting only for the bot's second waits in hand, one at a time
    per sender (`_bot_turn`, first come first served). Everything waiting for the chat when
    its turn comes goes into that one message (fold.py): a quiet room gets a reply to the
    guess, a busy one one message with every result in it, instead of each result waiting
    for a slot of its own.

What is guaranteed (at least once by default, with one narrow window for a duplicate)
    - A row is marked sent only after Telegram accepted the message that carried it (or,
      under "assume_sent", after a post that may have gone out; see below).
    - Two Redis markers per row, written in round trips the sender makes anyway, tell a
      sender that takes over a dead one's rows what happened to them:
        * intent, `send:sending:<row>`: set just before the post, in the same atomic call
          that renews the chat lease (the fence), with the owner and the time;
        * posted, `send:posted:<row>` → message id: set right after Telegram answers, before
          anything else (one pipelined round trip, then `mark_sent`).
      Both are deleted once `mark_sent` succeeded (they live a week otherwise). A row with
      a posted marker is marked sent without posting it again (a crash or a database outage
      between the post and `mark_sent` does not re-post). A row with neither was not being
      posted: it is simply posted. A row with an intent marker and no posted marker is
      ambiguous: its sender died during the post, before or after Telegram took it. The
      `ambiguous` policy (CODEMOJEX_SENDER_AMBIGUOUS) decides: "repost" (the default, at
      least once: posted again, so maybe twice) or "assume_sent" (at most once: marked sent
      with no message id, so maybe never). Counted in `recovered_ambiguous`.
    - So a row is posted twice only if (a) the process dies in the instant between Telegram
      accepting the post and the posted-marker write (a few milliseconds: an HTTP answer
      and one Redis round trip), or (b) the answer itself is lost (a read timeout, or the
      connection dropped after the request went out) although Telegram carried the post
      out. Both are decided by the same policy; under "assume_sent" neither reposts. A
      refused connection, a connect or pool timeout, or an error answer are known not to
      have posted: the intent marker is withdrawn and the rows retried; a 429 (RetryAfter)
      is a refusal too, the rows stay unsent and go out after the wait. The soak harness
      (`bench/soak.py`) checks that every double post it sees has a worker SIGKILL within
      a second of its first copy.
    - Two senders never post the same row: the chat lease keeps them off the same chat,
      and the database claim keeps them off the same rows even if the lease were lost; a
      sender posts only after re-checking (and renewing) its chat lease, and never waits
      for a slot longer than half its row claim.
    - A row Telegram refuses for good (the bot was kicked, the chat is gone, the text is
      refused: BadRequest, Forbidden, ChatMigrated) is marked done with no message id
      (`sent_message_id` NULL) and counted as failed, instead of being retried forever.
    - An outage of Redis or the database (`codemojex.outages.is_outage`) is waited out and
      logged as one warning line; any other failure is a bug and is logged with its
      traceback.

Why one module of about 600 lines: the chat lease, the row claim, the fence, the markers and
the ambiguous policy are the steps of one post, and these guarantees hold only in the order
they are taken here; the parts that stand alone are elsewhere (pace: pacer.py, the chats'
turns: ring.py, folding rows into messages: fold.py, key names: keys.py, scripts: lua/).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot, InlineKeyboardMarkup
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from codemojex.db import Outbox, store
from codemojex.limits import SENDER_HOLD_DEFAULT, SENDER_PEEK_S, SENDER_RECONCILE_S
from codemojex.ops import metrics
from codemojex.outages import OUTAGES, backoff_ms, is_outage, retry_after_ms
from codemojex.posting import scripts
from codemojex.posting.fold import MAX_MESSAGE, OutMessage, fold
from codemojex.posting.keys import Keys
from codemojex.posting.pacer import Grant, Pacer, Wait
from codemojex.posting.ring import PostingRing
from codemojex.redistypes import AnyRedis

log = logging.getLogger(__name__)

# A chat whose own pace frees it within this long waits in hand; a longer wait goes back to
# the ring (a turn costs a few round trips; a sleep this short costs less).
SHORT_WAIT_MS: Final = 50

# A marker outlives any plausible outage between a post and its mark_sent (it is deleted as
# soon as mark_sent succeeded; only the markers of a crash or an outage wait for this).
POSTED_TTL_S: Final = 7 * 24 * 3600


@dataclass
class SenderStats:
    """Counters for the demo summary and the metrics endpoint."""

    messages: int = 0  # messages Telegram accepted
    rows_sent: int = 0  # outbox rows those messages carried
    coalesced_messages: int = 0  # messages that carried more than one row
    coalesced_rows: int = 0  # rows that went out inside such a message
    replies: int = 0  # messages posted as a reply to the guess (quiet room)
    retry_after: int = 0  # 429 answers honoured
    failed_rows: int = 0  # rows Telegram refused for good
    recovered_rows: int = 0  # rows found already posted (marker) and only marked
    recovered_ambiguous: int = 0  # rows a dead sender was posting when it died (intent only)
    errors: int = 0  # transient failures (network, database) waited out
    ambiguous: int = 0  # posts that failed in a way that leaves delivery unknown

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def maybe_delivered(exc: NetworkError) -> bool:
    """Whether Telegram may have carried out a post that failed with `exc`.

    An answer with an error status, a refused connection, a connect timeout or no free
    connection in the pool mean the request was not carried out. A read timeout or a
    connection dropped after the request went out leave it unknown."""
    if isinstance(exc, BadRequest):
        return False
    cause = exc.__cause__
    if cause is None:
        return False
    return not isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


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
        max_chats: int = SENDER_HOLD_DEFAULT,
        poll_s: float = SENDER_RECONCILE_S,
        peek_s: float = SENDER_PEEK_S,
        chat_lease_ms: int = 20_000,
        claim_lease_s: float = 20.0,
        claim_limit: int = 200,
        max_message: int = MAX_MESSAGE,
        stats: SenderStats | None = None,
        ambiguous: Literal["repost", "assume_sent"] = "repost",
        post_timeout_s: float = 8.0,
    ) -> None:
        """`namespace` scopes the Redis keys (use the queue name). `poll_s` is how often the
        outbox is scanned for chats with unsent rows that nobody added to the ring (a process
        that died between its commit and its `add`); `peek_s` how often an idle sender looks
        at the ring for chats other processes added (its own process wakes it at once through
        `poke`). `max_chats` bounds the chats in hand at once.
        `ambiguous` is what to do when a post may or may not have reached Telegram (read
        timeout, connection dropped after sending, or a sender that died while posting):
        "repost" (at least once, the default: a result is never lost, rarely duplicated) or
        "assume_sent" (at most once: never duplicated, rarely lost)."""
        self._sessionmaker = sessionmaker
        self._bot = bot
        self._redis = redis
        self._keys = Keys(namespace)
        self.pacer = pacer or Pacer(redis, namespace)
        self.ring = PostingRing(redis, namespace)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._max_chats = max_chats
        self._poll_s = poll_s
        self._peek_s = peek_s
        self._chat_lease_ms = chat_lease_ms
        self._claim_lease_s = claim_lease_s
        self._claim_limit = claim_limit
        self._max_message = max_message
        self.stats = stats or SenderStats()
        self._ambiguous = ambiguous
        if post_timeout_s * 1000 >= chat_lease_ms or post_timeout_s >= claim_lease_s / 2:
            raise ValueError("a post must end well inside the chat lease and the row claim")
        self._post_timeout_s = post_timeout_s
        self._renew = scripts.register(redis, "lease_renew")
        self._fence = scripts.register(redis, "lease_fence")
        self._release = scripts.register(redis, "lease_release")
        self._active: dict[int, asyncio.Task[None]] = {}
        self._poked: set[int] = set()
        # The chats in hand that wait for the bot's second queue here, first come first
        # served, so that they do not all ask the pace again each time a slot opens.
        self._bot_turn = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stopping = False

    # -- the loop -----------------------------------------------------------------------------

    def poke(self, chat_id: int) -> None:
        """This chat's outbox just got rows (committed): into the ring, and look at once."""
        self._poked.add(chat_id)
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Post until `stop` is set; then let every chat finish the post in hand and return.
        May be called again after it returned."""
        self._stopping = stop.is_set()
        stopper = asyncio.create_task(self._watch(stop))
        next_scan, failures = 0.0, 0
        try:
            while not self._stopping:
                self._wake.clear()
                if time.monotonic() >= next_scan:
                    failures = 0 if await self._reconcile() else failures + 1
                    # after a failed scan, soon again (backing off), not a whole poll_s later
                    again_s = max(0.2, backoff_ms(failures) / 1000) if failures else self._poll_s
                    next_scan = time.monotonic() + min(self._poll_s, again_s)
                next_ms = await self._take_turns()
                timeout = min(self._peek_s, max(0.0, next_scan - time.monotonic()))
                if next_ms is not None:
                    timeout = min(timeout, next_ms / 1000)
                if not self._wake.is_set() and timeout > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            self._stopping = True
            stopper.cancel()
            if self._active:
                await asyncio.gather(*self._active.values(), return_exceptions=True)

    async def _watch(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._stopping = True
        self._wake.set()

    async def _reconcile(self) -> bool:
        """Add every chat with unsent rows to the ring (rows a dead process never announced;
        at start, whatever the last run left). False: the database was out."""
        try:
            async with self._sessionmaker() as session:
                chats = await store.chats_with_unsent(session)
            OUTAGES.ok("postgres")
        except Exception as exc:
            if not is_outage(exc):
                raise
            self.stats.errors += 1
            OUTAGES.failed(exc, "the outbox sender")
            return False
        self._poked.update(chats)
        return True

    async def _take_turns(self) -> int | None:
        """Announce the poked chats, take the chats whose turn has come and start their turns.
        The ms until the ring's next turn (None: the ring is empty, or we hold all we may)."""
        poked, self._poked = self._poked, set()
        try:
            if poked:
                await self.ring.add(poked)
                poked = set()
            free = self._max_chats - len(self._active)
            if free <= 0:
                return None  # a turn that ends wakes the loop
            token = uuid.uuid4().hex
            turns = await self.ring.take(free, self._chat_lease_ms, token)
            OUTAGES.ok("redis")
        except Exception as exc:
            self._poked |= poked
            if not is_outage(exc):
                raise
            self.stats.errors += 1
            OUTAGES.failed(exc, "the outbox sender")
            return 1000
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
            if is_outage(exc):
                OUTAGES.failed(exc, "the outbox sender")
            else:
                log.exception("sender for chat %d failed; it will be retried", chat_id)
            await asyncio.sleep(1.0)
        finally:
            # The chat may already be in its next turn (taken again once handed back).
            if self._active.get(chat_id) is asyncio.current_task():
                del self._active[chat_id]
            self._wake.set()

    # -- one chat's turn ----------------------------------------------------------------------

    async def turn(self, chat_id: int, token: str) -> None:
        """One turn of a chat this sender took from the ring (leased to `token`): post the next
        message (everything waiting for it), then hand the chat back to the ring."""
        key = self._keys.chat_lease(chat_id)
        delay_ms, more = 0, True
        try:
            delay_ms, more = await self._post_next(chat_id, key, token)
        finally:
            try:
                await self.ring.release(chat_id, token, delay_ms, more)
            except Exception as exc:
                # The lease runs out and the ring brings the chat round again then.
                if not is_outage(exc):
                    raise
                OUTAGES.failed(exc, "the outbox sender")

    async def _holds(self, key: str, token: str) -> bool:
        return bool(await self._renew(keys=[key], args=[token, self._chat_lease_ms]))

    async def _holds_and_intends(self, key: str, token: str, row_ids: Sequence[int]) -> bool:
        """The fence before a post: renew the chat lease and, only if it is still ours, note
        `row_ids` as about to go out (who and when, for an operator reading the keys)."""
        intent = f"{self.owner}:{time.time():.3f}"
        keys = [key, *(self._keys.sending(i) for i in row_ids)]
        args: list[str | int] = [token, self._chat_lease_ms, intent, POSTED_TTL_S]
        return bool(await self._fence(keys=keys, args=args))

    async def _forget_intent(self, ids: Sequence[int]) -> None:
        """The post is known not to have happened: without this, a crash before the next
        attempt would make the rows look ambiguous (and "assume_sent" would drop them)."""
        if not ids:
            return
        try:
            await self._redis.delete(*[self._keys.sending(i) for i in ids])
        except Exception as exc:
            log.warning("could not clear %d intent markers (%s)", len(ids), type(exc).__name__)

    async def _claim(self, chat_id: int) -> list[Outbox]:
        async with self._sessionmaker() as session:
            return await store.claim_outbox(
                session, self._claim_limit, self._claim_lease_s, self.owner, chat_id=chat_id
            )

    async def _release_rows(self, rows: Sequence[Outbox]) -> None:
        if not rows:
            return
        try:
            async with self._sessionmaker() as session:
                await store.release_outbox(session, [r.id for r in rows], self.owner)
        except Exception as exc:
            # The claim lease runs out by itself; the rows are only delayed.
            log.warning("could not release %d outbox rows (%s)", len(rows), type(exc).__name__)

    async def _mark(self, ids: Sequence[int], message_id: int | None) -> None:
        """mark_sent, insisting through a database outage (the Redis markers already keep
        the rows from being posted again meanwhile)."""
        pause = 0.2
        while True:
            try:
                async with self._sessionmaker() as session:
                    await store.mark_sent(session, ids, message_id)
                return
            except Exception as exc:
                if not is_outage(exc) or self._stopping:
                    raise
                self.stats.errors += 1
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)

    async def _forget_posted(self, ids: Sequence[int]) -> None:
        """The books say sent now: the markers have done their job (they would otherwise
        cost Redis memory per row for a week)."""
        keys = [self._keys.posted(i) for i in ids] + [self._keys.sending(i) for i in ids]
        with contextlib.suppress(Exception):
            await self._redis.delete(*keys)

    async def _recover_posted(self, rows: list[Outbox]) -> list[Outbox]:
        """Sort out rows a sender may have left behind, by their Redis markers (one MGET):
        posted → mark them sent with that message id; intent without posted → the sender
        died during the post, apply the `ambiguous` policy; neither → not posted, post them.
        Returns the rows to post."""
        if not rows:
            return rows
        n = len(rows)
        markers = await self._redis.mget(
            [self._keys.posted(r.id) for r in rows] + [self._keys.sending(r.id) for r in rows]
        )
        done: dict[int, list[int]] = {}
        left: list[Outbox] = []
        ambiguous: list[int] = []
        for row, posted, intent in zip(rows, markers[:n], markers[n:], strict=True):
            if posted is not None:
                done.setdefault(int(posted), []).append(row.id)
            elif intent is not None:
                ambiguous.append(row.id)
                if self._ambiguous == "repost":
                    left.append(row)
            else:
                left.append(row)
        for message_id, ids in done.items():
            await self._mark(ids, message_id if message_id > 0 else None)
            await self._forget_posted(ids)
            self.stats.recovered_rows += len(ids)
        if ambiguous:
            self.stats.recovered_ambiguous += len(ambiguous)
            if self._ambiguous == "assume_sent":
                await self._mark(ambiguous, None)
                await self._forget_posted(ambiguous)
            # The row ids let an operator (and the soak harness) match a repeated message.
            log.warning(
                "%d outbox rows were being posted when their sender died (%s); %s",
                len(ambiguous),
                ",".join(map(str, ambiguous)),
                "posting them again" if self._ambiguous == "repost" else "assuming they went out",
            )
        return left

    async def _post_next(self, chat_id: int, key: str, token: str) -> tuple[int, bool]:
        """Post the next message of this chat: everything waiting for it, folded. Returns when
        its next turn may come (ms) and whether it has more to post (False: it leaves the ring
        unless it was given rows meanwhile)."""
        wait = await self.pacer.wait(chat_id)
        if not wait.by_bot and wait.ms > SHORT_WAIT_MS:
            return wait.ms, True  # not yet: its turn comes when its pace allows
        try:
            rows = await self._recover_posted(await self._claim(chat_id))
        except Exception as exc:
            if not is_outage(exc):
                raise
            self.stats.errors += 1
            log.warning("outbox claim failed (%s); chat %d later", type(exc).__name__, chat_id)
            return 1000, True
        if not rows:
            return 0, False
        full = len(rows) >= self._claim_limit
        claimed_at = time.monotonic()

        async def ride_along() -> None:
            """Results that landed while we waited ride along in the same message: claimed
            before the slot is taken, not after, so that the slot is answered sooner."""
            nonlocal full
            try:
                more_rows = await self._recover_posted(await self._claim(chat_id))
            except Exception as exc:
                if not is_outage(exc):
                    raise
                return
            full = full or len(more_rows) >= self._claim_limit
            rows.extend(more_rows)

        # Wait for our slot, but never past half the claim lease: a claim that ran out could
        # be handed to another sender while we post.
        got = await self._acquire(
            chat_id, key, token, deadline=claimed_at + self._claim_lease_s / 2, waited=ride_along
        )
        if not isinstance(got, Grant):
            await self._release_rows(rows)
            return got.ms, True
        grant = got
        rows.sort(key=lambda r: r.id)
        messages = fold(rows, self._max_message)
        to_send = _until_first_complete(messages)
        sent_ids: set[int] = set()
        for msg in to_send:
            # The rows this post carries (a long row's leading piece: that row).
            carried = msg.row_ids or to_send[-1].row_ids
            # The fence: post only while the chat is still ours; the intent marker rides along.
            if not await self._holds_and_intends(key, token, carried):
                # The grant goes unused; settled, it stops counting as a post in flight.
                with contextlib.suppress(Exception):
                    await self.pacer.settle(grant)
                await self._release_rows([r for r in rows if r.id not in sent_ids])
                return 0, True
            outcome = await self._send(chat_id, msg, grant)
            if outcome in ("retry", "not_posted"):
                if outcome == "not_posted":
                    await self._forget_intent(carried)
                await self._release_rows([r for r in rows if r.id not in sent_ids])
                return 0, True  # its block (a RetryAfter, a failure's pause) sets the next turn
            if outcome == "failed":
                # The rows this message (or, for a leading piece, its long row) carries.
                dead = to_send[-1].row_ids
                await self._mark(dead, None)
                await self._forget_posted(dead)
                self.stats.failed_rows += len(dead)
                log.warning("chat %d refused %d outbox rows for good", chat_id, len(dead))
                await self._release_rows([r for r in rows if r.id not in sent_ids | set(dead)])
                return 0, True
            sent_ids.update(msg.row_ids)
            metrics.posted(msg, rows)  # codemojex_posts_total, result_post_delay_seconds
            # A long row's next piece needs a slot of its own, waited for in hand: handed back
            # half posted, the row would look ambiguous to the next turn.
            if msg is not to_send[-1]:
                got = await self._acquire(
                    chat_id, key, token, deadline=claimed_at + self._claim_lease_s / 2, hold=True
                )
                if not isinstance(got, Grant):
                    break
                grant = got
        left = [r for r in rows if r.id not in sent_ids]
        await self._release_rows(left)
        # Its next turn (or, when it gets rows again, its place in the ring) comes when its
        # pace allows a post.
        return (await self.pacer.wait(chat_id)).ms, bool(left) or full

    async def _acquire(
        self,
        chat_id: int,
        key: str,
        token: str,
        deadline: float,
        *,
        hold: bool = False,
        waited: Callable[[], Awaitable[None]] | None = None,
    ) -> Grant | Wait:
        """A pace slot, or the wait that stands between (the chat's own pace: its turn comes
        back then; `deadline` passed, the chat lease was lost or we are stopping: at once).
        A wait for the bot's second is waited out here, in turn with the other chats in hand
        (`_bot_turn`), and with `hold` a wait for the chat's own pace too; the chat lease is
        renewed meanwhile. `waited` is called before a take that follows a wait of more than
        SHORT_WAIT_MS since the last call (or since this one began)."""
        grant = Grant(chat_id)
        since = time.monotonic()
        wait = await self.pacer.take(chat_id, grant)
        if wait.ms <= 0:
            return grant
        while hold and not wait.by_bot and not self._stopping:
            pause = wait.ms / 1000
            if time.monotonic() + pause > deadline or not await self._holds(key, token):
                return wait
            await asyncio.sleep(min(pause, 1.0))
            wait = await self.pacer.take(chat_id, grant)
            if wait.ms <= 0:
                return grant
        if not wait.by_bot and wait.ms > SHORT_WAIT_MS:
            return wait
        async with self._bot_turn:
            while not self._stopping:
                if waited is not None and time.monotonic() - since > SHORT_WAIT_MS / 1000:
                    await waited()
                    since = time.monotonic()
                # Asked again now that it is this chat's turn for the bot's second: the wait
                # seen before queueing for it is stale.
                wait = await self.pacer.take(chat_id, grant)
                if wait.ms <= 0:
                    return grant
                if not wait.by_bot and wait.ms > SHORT_WAIT_MS:
                    return wait
                pause = min(wait.ms / 1000, 1.0)
                if time.monotonic() + pause > deadline or not await self._holds(key, token):
                    return wait
                await asyncio.sleep(pause)
        return Wait(0)

    async def _send(self, chat_id: int, msg: OutMessage, grant: Grant) -> str:
        """Post one message: "sent", "failed" (never will), "not_posted" (known not to have
        gone out: try again later) or "retry" (may have gone out, reposting anyway)."""
        try:
            try:
                # Bounded, so that a post always ends well inside the chat lease (renewed just
                # before) and the row claim (at least half of it left): nobody else can have
                # taken the chat or the rows while this post is in flight.
                sent = await asyncio.wait_for(post(self._bot, chat_id, msg), self._post_timeout_s)
            finally:
                # At once, answered or not: until then the post counts as in flight in the
                # bot's second, and every millisecond there is a millisecond of its pace.
                with contextlib.suppress(Exception):
                    await self.pacer.settle(grant)
        except RetryAfter as exc:
            self.stats.retry_after += 1
            wait_ms = retry_after_ms(exc)
            await self.pacer.block_chat(chat_id, wait_ms)
            log.info("429 for chat %d: waiting %d ms", chat_id, wait_ms)
            return "not_posted"
        except (BadRequest, Forbidden, ChatMigrated) as exc:
            log.warning("chat %d refused a message: %s", chat_id, type(exc).__name__)
            return "failed"
        except (TimedOut, NetworkError, TimeoutError) as exc:
            self.stats.errors += 1
            if isinstance(exc, TimeoutError) or maybe_delivered(exc):
                self.stats.ambiguous += 1
                if self._ambiguous == "assume_sent":
                    # At most once: count it as posted, with no message id to show for it.
                    log.warning("post to chat %d may have been lost; not reposting", chat_id)
                    await self._record_posted(msg, 0)
                    return "sent"
                # At least once: Telegram may have it; reposting risks a duplicate, not
                # reposting risks a loss (see the module docstring).
                log.warning("post to chat %d may have been lost; reposting", chat_id)
                await self.pacer.block_chat(chat_id, 1000 + random.randint(0, 1000))
                return "retry"
            log.warning("posting to chat %d failed (%s); retrying", chat_id, type(exc).__name__)
            await self.pacer.block_chat(chat_id, 1000 + random.randint(0, 1000))
            return "not_posted"
        except TelegramError as exc:
            self.stats.errors += 1
            log.warning("posting to chat %d failed (%s); retrying", chat_id, type(exc).__name__)
            await self.pacer.block_chat(chat_id, 1000 + random.randint(0, 1000))
            return "not_posted"
        await self._record_posted(msg, sent)
        return "sent"

    async def _record_posted(self, msg: OutMessage, message_id: int) -> None:
        """Book a message Telegram accepted (message_id 0: one we assume it did)."""
        if msg.row_ids:
            # First (but for the pace's settle): this is what keeps a crash from re-posting.
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for row_id in msg.row_ids:
                        pipe.set(self._keys.posted(row_id), message_id, ex=POSTED_TTL_S)
                    await pipe.execute()
            except Exception as exc:  # mark_sent below is what matters; this narrows a window
                log.warning("could not record posted rows in Redis (%s)", type(exc).__name__)
        if msg.row_ids:
            await self._mark(msg.row_ids, message_id or None)
            await self._forget_posted(msg.row_ids)
        self.stats.messages += 1
        self.stats.rows_sent += len(msg.row_ids)
        if len(msg.row_ids) > 1:
            self.stats.coalesced_messages += 1
            self.stats.coalesced_rows += len(msg.row_ids)
        if msg.reply_to is not None and not msg.keys_off:
            self.stats.replies += 1


async def post(bot: Bot, chat_id: int, msg: OutMessage) -> int:
    """Carry out one message: a post (in its forum topic, with its keyboard), or the removal
    of a round's keyboard (`keys_off`: an edit of message `reply_to`, nothing when the
    announcement was never posted). The id of the message posted or edited (0: none)."""
    if msg.keys_off:
        if msg.reply_to is None:
            return 0
        await bot.edit_message_reply_markup(chat_id=chat_id, message_id=msg.reply_to)
        return msg.reply_to
    markup = None
    if msg.markup is not None:
        markup = InlineKeyboardMarkup.de_json(json.loads(msg.markup), bot)
    sent = await bot.send_message(
        chat_id=chat_id,
        text=msg.text,
        message_thread_id=msg.thread_id,
        reply_to_message_id=msg.reply_to,
        allow_sending_without_reply=True if msg.reply_to is not None else None,
        reply_markup=markup,
    )
    return int(sent.message_id)


def _until_first_complete(messages: Sequence[OutMessage]) -> list[OutMessage]:
    """The leading messages up to and including the first that completes rows."""
    out: list[OutMessage] = []
    for msg in messages:
        out.append(msg)
        if msg.row_ids:
            break
    return out
