"""A chat's turn: the next message of one chat the sender took from the ring, and when it
posts again.

A turn claims everything waiting for the chat, waits for a slot of the shared pace (a chat
whose own pace does not allow a post yet is handed back with its turn at the moment it does;
a chat waiting only for the bot's second waits in hand, first come first served through
`bot_turn`), claims what landed meanwhile so that it rides along, folds it all into as few
messages as possible (fold.py) and posts the first, through the fence (delivery.py). A long
row's further pieces each wait for a slot of their own, in hand. Rows not posted are handed
back, so that the next turn takes them.

A slot is never waited for past half the row claim, queueing for the bot's second included: a
claim that ran out could be handed to another sender while we post, and a chat lease that ran
out (it is renewed only once the chat's turn for the bot's second has come) to another turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from codemojex import metrics
from codemojex.outages import OUTAGES
from codemojex.posting.fold import OutMessage, fold
from codemojex.posting.pace_policy import Grant, Wait
from codemojex.posting.pacer import Pacer
from codemojex.posting.sender.delivery import RECHECK_MS, WHERE, Delivery
from codemojex.posting.sender.stats import SenderStats
from codemojex.posting.sender.telegram import Outcome, Poster, failed_post_pause_ms
from codemojex.values.types import OutboxRow

log = logging.getLogger(__name__)
# A chat freed within this long waits in hand (cheaper than a turn of the ring).
SHORT_WAIT_MS: Final = 50

# A turn's answer: the ms until the chat's next turn, and whether it has more to post (False:
# it leaves the ring unless it was given rows meanwhile).
Next = tuple[int, bool]


@dataclass
class _Hand:
    """What one turn holds: the chat (leased under `key` to `token`) and its claimed rows."""

    chat_id: int
    key: str
    token: str
    deadline: float  # time.monotonic() past which no slot is waited for (half the claim)
    rows: list[OutboxRow] = field(default_factory=list)
    full: bool = False  # a claim came back full: more rows wait in the outbox
    sent: set[int] = field(default_factory=set)

    def left(self, *also: int) -> list[OutboxRow]:
        return [r for r in self.rows if r.id not in self.sent and r.id not in also]


class Turns:
    """The turns of one sender's chats (they share its pace, books and bot's-second queue)."""

    def __init__(
        self,
        pacer: Pacer,
        delivery: Delivery,
        poster: Poster,
        stats: SenderStats,
        *,
        claim_lease_s: float,
        max_message: int,
        stop: asyncio.Event,
    ) -> None:
        self._pacer = pacer
        self._delivery = delivery
        self._poster = poster
        self._stats = stats
        self._claim_lease_s = claim_lease_s
        self._max_message = max_message
        self._stop = stop
        # The chats in hand that wait for the bot's second queue here, first come first
        # served, so that they do not all ask the pace again each time a slot opens.
        self._bot_turn = asyncio.Lock()

    def bot_serves(self) -> int:
        """How many chats the bot's second serves in half a turn's deadline: more in hand,
        when that second binds, would only reach their deadline in its queue and go back to
        the ring behind the others, having claimed and released their rows for nothing."""
        return max(1, int(self._pacer.limit * self._claim_lease_s / 4))

    async def post_next(self, chat_id: int, key: str, token: str) -> Next:
        """Post the next message of this chat: everything waiting for it, folded."""
        wait = await self._pacer.wait(chat_id)
        if not wait.by_bot and wait.ms > SHORT_WAIT_MS:
            return wait.ms, True  # not yet: its turn comes when its pace allows
        hand = _Hand(chat_id, key, token, time.monotonic() + self._claim_lease_s / 2)
        if not await self._claim(hand):
            return RECHECK_MS, True
        if not hand.rows:
            # Rows still claimed (a turn that failed, a release lost to an outage) keep the
            # chat in the ring until the claim runs out: out of it, they would wait for the
            # outbox's scan, a minute.
            held = await self._delivery.held_ms(chat_id)
            return (0, False) if held is None else (held, True)
        got = await self._slot(hand, ride_along=True)
        if not isinstance(got, Grant):
            await self._delivery.release(hand.rows)
            return got.ms, True
        hand.rows.sort(key=lambda r: r.id)
        to_send = until_first_complete(fold(hand.rows, self._max_message))
        for msg in to_send:
            # The rows this post carries (a long row's leading piece: that row).
            carried = msg.row_ids or to_send[-1].row_ids
            done = await self._post_one(hand, msg, carried, to_send[-1].row_ids, got)
            if done is not None:
                return done
            # A long row's next piece needs a slot of its own, waited for in hand: handed back
            # half posted, the row would look ambiguous to the next turn.
            if msg is not to_send[-1]:
                got = await self._slot(hand, hold=True)
                if not isinstance(got, Grant):
                    break
        left = hand.left()
        await self._delivery.release(left)
        # Its next turn (or, when it gets rows again, its place in the ring) comes when its
        # pace allows a post.
        return (await self._pacer.wait(chat_id)).ms, bool(left) or hand.full

    async def _post_one(
        self,
        hand: _Hand,
        msg: OutMessage,
        carried: Sequence[int],
        completes: Sequence[int],
        grant: Grant,
    ) -> Next | None:
        """Post `msg` (carrying `carried`; the last piece completes `completes`) under
        `grant`: None when it went out, else the turn's answer (its rows handed back)."""
        # The fence: post only while the chat is still ours; the intent marker rides along.
        if not await self._delivery.fence(hand.key, hand.token, carried):
            await self._poster.settle(grant)  # unused, it stops counting as in flight
            await self._delivery.release(hand.left())
            return 0, True
        answer = await self._poster.attempt(hand.chat_id, msg, grant)
        outcome = answer.outcome
        if outcome is Outcome.MAYBE_SENT:
            if await self._delivery.maybe_sent(hand.chat_id, msg):
                outcome = Outcome.SENT
            else:
                await self._pacer.block_chat(hand.chat_id, failed_post_pause_ms())
        elif outcome is Outcome.SENT:
            await self._delivery.posted(msg, answer.message_id)
        if outcome is Outcome.NOT_SENT:
            await self._delivery.forget_intent(carried)
        if outcome in (Outcome.NOT_SENT, Outcome.MAYBE_SENT):
            await self._delivery.release(hand.left())
            return 0, True  # its block (a RetryAfter, a failure's pause) sets the next turn
        if outcome is Outcome.REFUSED:
            await self._delivery.mark(completes, None)
            self._stats.failed_rows += len(completes)
            log.warning("chat %d refused %d outbox rows for good", hand.chat_id, len(completes))
            await self._delivery.release(hand.left(*completes))
            return 0, True
        hand.sent.update(msg.row_ids)
        metrics.posted(msg, hand.rows)  # codemojex_posts_total, result_post_delay_seconds
        return None

    async def _claim(self, hand: _Hand) -> bool:
        """Claim (more of) the chat's rows into `hand`. False: the database or Redis is out
        (booked, one line when it starts)."""
        try:
            rows = await self._delivery.claim(hand.chat_id)
        except Exception as exc:
            if OUTAGES.failed(exc, WHERE) is None:
                raise
            self._stats.errors += 1
            log.warning("outbox claim failed (%s); chat %d later", type(exc).__name__, hand.chat_id)
            return False
        hand.full = hand.full or len(rows) >= self._delivery.claim_limit
        hand.rows.extend(rows)
        return True

    async def _slot(
        self, hand: _Hand, *, hold: bool = False, ride_along: bool = False
    ) -> Grant | Wait:
        """A pace slot, or the wait that stands between (the chat's own pace: its turn comes
        back then; the deadline passed, the chat lease was lost or we are stopping: at once).
        A wait for the bot's second is waited out here, in turn with the other chats in hand
        (queued until the deadline at most), and with `hold` a wait for the chat's own pace
        too; the chat lease is renewed meanwhile. With `ride_along`, results that landed while
        we waited are claimed before a take that follows a wait of more than SHORT_WAIT_MS: in
        the same message, and claimed before the slot is taken, not after, so that the slot is
        answered sooner."""
        grant = Grant(hand.chat_id)
        since = time.monotonic()
        wait = await self._pacer.take(hand.chat_id, grant)
        if wait.ms <= 0:
            return grant
        while hold and not wait.by_bot and not self._stop.is_set():
            pause = wait.ms / 1000
            if not await self._may_wait(hand, pause):
                return wait
            await asyncio.sleep(min(pause, 1.0))
            wait = await self._pacer.take(hand.chat_id, grant)
            if wait.ms <= 0:
                return grant
        if not wait.by_bot and wait.ms > SHORT_WAIT_MS:
            return wait
        # Queued behind the other chats in hand no longer than the turn may wait: the chat
        # lease is renewed only once it is this chat's turn for the bot's second, and a chat
        # that outlived its lease would be given to another turn that finds its rows still
        # claimed, and waits for that claim to run out too.
        return await self._bot_second(hand, grant, since, ride_along=ride_along)

    async def _bot_second(
        self, hand: _Hand, grant: Grant, since: float, *, ride_along: bool
    ) -> Grant | Wait:
        """Wait for the bot's second in turn with the other chats in hand (see `_slot`)."""
        try:
            async with asyncio.timeout(max(0.0, hand.deadline - time.monotonic())):
                await self._bot_turn.acquire()
        except TimeoutError:
            return Wait(0, by_bot=True)
        try:
            while not self._stop.is_set():
                if ride_along and time.monotonic() - since > SHORT_WAIT_MS / 1000:
                    await self._claim(hand)
                    since = time.monotonic()
                # Asked again now that it is this chat's turn for the bot's second: the wait
                # seen before queueing for it is stale.
                wait = await self._pacer.take(hand.chat_id, grant)
                if wait.ms <= 0:
                    return grant
                if not wait.by_bot and wait.ms > SHORT_WAIT_MS:
                    return wait
                pause = min(wait.ms / 1000, 1.0)
                if not await self._may_wait(hand, pause):
                    return wait
                await asyncio.sleep(pause)
        finally:
            self._bot_turn.release()
        return Wait(0)

    async def _may_wait(self, hand: _Hand, pause: float) -> bool:
        """A pause of `pause` s ends before the deadline, and the chat is still ours."""
        if time.monotonic() + pause > hand.deadline:
            return False
        return await self._delivery.holds(hand.key, hand.token)


def until_first_complete(messages: Sequence[OutMessage]) -> list[OutMessage]:
    """The leading messages up to and including the first that completes rows."""
    out: list[OutMessage] = []
    for msg in messages:
        out.append(msg)
        if msg.row_ids:
            break
    return out
