"""The books of a post: the rows' claim, the delivery markers and the ambiguous-delivery rule.

The rows a turn posts are claimed in the database (`store.outbox.claim_outbox`, FOR UPDATE SKIP
LOCKED with a lease), so even if Redis lost the chat lease two senders take disjoint rows.
Two Redis markers per row, written in round trips the sender makes anyway, tell a sender that
takes over a dead one's rows what happened to them:

- intent, `send:sending:<row>`: set just before the post, in the same atomic call that renews
  the chat lease (the fence, `fence`), with the owner and the time;
- posted, `send:posted:<row>` → message id: set right after Telegram answers, before anything
  else (one script call for all the post's rows, then `mark_sent`).

Both are deleted once `mark_sent` succeeded (they live MARKER_TTL_S otherwise). The marks of
the posts that end while one is written wait and go together, in one transaction and one
statement on Postgres (`Backend.mark_sent_many`), their markers deleted in one call (`Marks`): a
sender posting hundreds a second would otherwise spend a transaction, a statement and a Redis
round trip per post on its books. A row
with a posted marker is marked sent without posting it again. A row with neither was not being
posted: it is simply posted. A row with an intent marker and no posted marker is ambiguous:
its sender died during the post, before or after Telegram took it.

The ambiguous-delivery rule, `ambiguous` (CODEMOJEX_SENDER_AMBIGUOUS), decides both such a row
and a post whose answer was lost (telegram.py's MAYBE_SENT): "repost" (the default, at least
once: posted again, so maybe twice) or "assume_sent" (at most once: marked sent with no
message id, so maybe never).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db.engine import backend_of
from codemojex.db.reading import reading
from codemojex.db.store import lookups, outbox
from codemojex.db.unit import uow
from codemojex.limits import RETRIES
from codemojex.outages import OUTAGES, retrying
from codemojex.posting import scripts
from codemojex.posting.fold import OutMessage
from codemojex.posting.keys import Keys
from codemojex.posting.sender.stats import SenderStats
from codemojex.values.clock import utcnow
from codemojex.values.redistypes import AnyRedis
from codemojex.values.types import OutboxRow

Ambiguous = Literal["repost", "assume_sent"]
WHERE = "the outbox sender"
# A delivery marker outlives any outage between a post and its mark_sent (then deleted).
MARKER_TTL_S: Final = 7 * 24 * 3600
# A chat whose rows the database could not be asked about, or whose rows another transaction
# holds, has its turn again this much later.
RECHECK_MS: Final = 1000

log = logging.getLogger(__name__)


# Rows marked sent as carried by one message (its id; None: none known).
Mark = tuple[Sequence[int], int | None]


class Marks:
    """The marks of concurrent posts, written together: a mark asked while another is being
    written waits for it, then goes with every other that waited (one call of `write`, then
    one of `forget` for all their rows), as the score worker's group commit. A failure of the
    write fails every mark it carried."""

    def __init__(
        self,
        write: Callable[[Sequence[Mark]], Awaitable[None]],
        forget: Callable[[Sequence[int]], Awaitable[None]],
    ) -> None:
        self._write = write
        self._forget = forget
        self._waiting: list[tuple[Mark, asyncio.Future[None]]] = []
        self._writing: asyncio.Task[None] | None = None

    async def mark(self, ids: Sequence[int], message_id: int | None) -> None:
        done = asyncio.get_running_loop().create_future()
        self._waiting.append(((list(ids), message_id), done))
        if self._writing is None:
            self._writing = asyncio.get_running_loop().create_task(self._write_all())
        await done

    async def _write_all(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                marks = [mark for mark, _ in batch]
                try:
                    await self._write(marks)
                except BaseException as exc:
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                await self._forget([row for ids, _ in marks for row in ids])
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
        finally:
            self._writing = None


class Delivery:
    """One sender's claims, chat leases and markers (`owner` names it in both)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: AnyRedis,
        keys: Keys,
        *,
        owner: str,
        ambiguous: Ambiguous,
        chat_lease_ms: int,
        claim_lease_s: float,
        claim_limit: int,
        stats: SenderStats,
        stop: asyncio.Event,
    ) -> None:
        # The books are three fixed statements (store.outbox), each its own transaction.
        self._sessions = sessionmaker
        self._redis = redis
        self._keys = keys
        self.owner = owner
        self.ambiguous = ambiguous
        self._chat_lease_ms = chat_lease_ms
        self._claim_lease_s = claim_lease_s
        self.claim_limit = claim_limit
        self._stats = stats
        self._renew = scripts.register(redis, "lease_renew")
        self._fence = scripts.register(redis, "lease_fence")
        self._posted_mark = scripts.register(redis, "posted_mark")
        # mark_sent insists through a database outage (the markers keep the rows from being
        # posted again meanwhile) until the sender stops.
        self._mark_sent = retrying(
            "postgres", RETRIES.mark_sent, where=WHERE, stop=stop, on_failure=self._count
        )(self._mark_once)
        self._marks = Marks(self._mark_sent, self.forget_posted)

    def _count(self, exc: BaseException) -> None:
        self._stats.errors += 1

    # -- the rows' claim ----------------------------------------------------------------------

    async def claim(self, chat_id: int) -> list[OutboxRow]:
        """This chat's unsent rows, claimed for us, sorted out by their markers (`recover`):
        the rows to post."""
        async with uow(self._sessions) as tx:
            rows = await outbox.claim_outbox(
                tx, self.claim_limit, self._claim_lease_s, self.owner, chat_id=chat_id
            )
        return await self.recover(rows)

    async def held_ms(self, chat_id: int) -> int | None:
        """Until this chat's unsent rows that a claim keeps from us come free (None: none is
        claimed): a turn that failed, a sender that died, or a release lost to an outage left
        them claimed, and the chat's turn comes back then, not at the outbox's scan."""
        try:
            async with reading(self._sessions) as session:
                until = await lookups.claims_end(session, chat_id)
        except Exception as exc:
            if OUTAGES.failed(exc, WHERE) is None:
                raise
            return RECHECK_MS
        if until is None:
            return None
        # A claim that ran out and still kept its rows from us: they are locked by a
        # transaction of another sender (its sent-marks), which ends in a moment.
        return max(0, math.ceil((until - utcnow()).total_seconds() * 1000)) or RECHECK_MS

    async def release(self, rows: Sequence[OutboxRow]) -> None:
        if not rows:
            return
        try:
            async with uow(self._sessions) as tx:
                await outbox.release_outbox(tx, [r.id for r in rows], self.owner)
        except Exception as exc:  # the claim runs out by itself; the rows are only delayed
            OUTAGES.swallow(exc, WHERE, f"{len(rows)} outbox rows not released")

    async def mark(self, ids: Sequence[int], message_id: int | None) -> None:
        """The books say sent (with the posts ending meanwhile: `Marks`), then the markers go."""
        await self._marks.mark(ids, message_id)

    async def _mark_once(self, marks: Sequence[Mark]) -> None:
        async with uow(self._sessions) as tx:
            await backend_of(tx.conn).mark_sent_many(tx, marks, utcnow())

    # -- the chat lease and the markers --------------------------------------------------------

    async def holds(self, key: str, token: str) -> bool:
        """Renew the chat lease: False when it is no longer ours."""
        return bool(await self._renew(keys=[key], args=[token, self._chat_lease_ms]))

    async def fence(self, key: str, token: str, row_ids: Sequence[int]) -> bool:
        """The fence before a post: renew the chat lease and, only if it is still ours, note
        `row_ids` as about to go out (who and when, for an operator reading the keys)."""
        intent = f"{self.owner}:{time.time():.3f}"
        keys = [key, *(self._keys.sending(i) for i in row_ids)]
        args: list[str | int] = [token, self._chat_lease_ms, intent, MARKER_TTL_S]
        return bool(await self._fence(keys=keys, args=args))

    async def forget_intent(self, ids: Sequence[int]) -> None:
        """The post is known not to have happened: without this, a crash before the next
        attempt would make the rows look ambiguous (and "assume_sent" would drop them)."""
        if not ids:
            return
        try:
            await self._redis.delete(*[self._keys.sending(i) for i in ids])
        except Exception as exc:
            OUTAGES.swallow(exc, WHERE, f"{len(ids)} intent markers not cleared")

    async def posted(self, msg: OutMessage, message_id: int) -> None:
        """Book a message Telegram accepted (message_id 0: one we assume it did)."""
        if msg.row_ids:
            # First (but for the pace's settle): this is what keeps a crash from re-posting.
            try:
                await self._posted_mark(
                    keys=[self._keys.posted(i) for i in msg.row_ids],
                    args=[message_id, MARKER_TTL_S],
                )
            except Exception as exc:  # mark_sent below is what matters; this narrows a window
                OUTAGES.swallow(exc, WHERE, "posted rows not recorded in Redis")
            await self.mark(msg.row_ids, message_id or None)
        self._stats.messages += 1
        self._stats.rows_sent += len(msg.row_ids)
        if len(msg.row_ids) > 1:
            self._stats.coalesced_messages += 1
            self._stats.coalesced_rows += len(msg.row_ids)
        if msg.reply_to is not None and not msg.keys_off:
            self._stats.replies += 1

    async def forget_posted(self, ids: Sequence[int]) -> None:
        """The books say sent now: the markers have done their job (they would otherwise
        cost Redis memory per row for a week)."""
        keys = [self._keys.posted(i) for i in ids] + [self._keys.sending(i) for i in ids]
        try:
            await self._redis.delete(*keys)
        except Exception as exc:  # they expire by themselves
            OUTAGES.swallow(exc, WHERE, f"{len(keys)} delivery markers not deleted")

    # -- the ambiguous-delivery rule ---------------------------------------------------------

    async def maybe_sent(self, chat_id: int, msg: OutMessage) -> bool:
        """A post whose answer was lost: True when it counts as sent ("assume_sent": booked
        with no message id), False when it goes out again ("repost")."""
        if self.ambiguous == "assume_sent":
            log.warning("post to chat %d may have been lost; not reposting", chat_id)
            await self.posted(msg, 0)
            return True
        # At least once: Telegram may have it; reposting risks a duplicate, not reposting
        # risks a loss.
        log.warning("post to chat %d may have been lost; reposting", chat_id)
        return False

    async def recover(self, rows: list[OutboxRow]) -> list[OutboxRow]:
        """Sort out rows a sender may have left behind, by their Redis markers (one MGET):
        posted → mark them sent with that message id; intent without posted → the sender
        died during the post, apply the `ambiguous` rule; neither → not posted, post them.
        Returns the rows to post."""
        if not rows:
            return rows
        n = len(rows)
        markers = await self._redis.mget(
            [self._keys.posted(r.id) for r in rows] + [self._keys.sending(r.id) for r in rows]
        )
        done: dict[int, list[int]] = {}
        left: list[OutboxRow] = []
        ambiguous: list[int] = []
        for row, posted, intent in zip(rows, markers[:n], markers[n:], strict=True):
            if posted is not None:
                done.setdefault(int(posted), []).append(row.id)
            elif intent is not None:
                ambiguous.append(row.id)
                if self.ambiguous == "repost":
                    left.append(row)
            else:
                left.append(row)
        for message_id, ids in done.items():
            await self.mark(ids, message_id if message_id > 0 else None)
            self._stats.recovered_rows += len(ids)
        if ambiguous:
            self._stats.recovered_ambiguous += len(ambiguous)
            if self.ambiguous == "assume_sent":
                await self.mark(ambiguous, None)
            # The row ids let an operator (and the soak harness) match a repeated message.
            log.warning(
                "%d outbox rows were being posted when their sender died (%s); %s",
                len(ambiguous),
                ",".join(map(str, ambiguous)),
                "posting them again" if self.ambiguous == "repost" else "assuming they went out",
            )
        return left
