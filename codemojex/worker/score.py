"""The ScoreWorker: the consumer pool's handler for one batch of one player's guesses.

Per batch (jobs of one lane, i.e. one player in one room, in mint order):
decode each payload, check it against the round it names (a small cache of the round's
immutable data), then `store.record_guess` it. `record_guess` is one transaction per guess,
idempotent by the guess id (= the lane job id) and decides under the round's row lock whether
the round is still open; it writes the result (or "round already solved") outbox row in the
same transaction. Returning lets the pool ack the batch.

Why one transaction per guess and not one per batch: a guess is the unit that must be
recorded exactly once, and record_guess already makes it atomic and idempotent. If the
database fails half-way through a batch, the guesses already committed are recognised as
duplicates when the batch is delivered again, so nothing is counted twice; and the round's
row lock is held for one guess at a time, never across a whole batch, so other players of
the room are not held up behind a spammer's batch.

A database that is down (connection refused, timeouts, OperationalError…) is transient:
the worker waits a little for it (up to `hold_s`, extending the batch's lease) and then
raises `Retry(delay)` so the batch goes back to its lane with a back-off. Nothing is acked,
nothing is lost. The secret code and the guess text are never logged.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import ids
from codemojex.db import store
from codemojex.db.errors import is_transient
from codemojex.jobs import GuessJob
from codemojex.lanes import Job, Lanes, Retry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RoundInfo:
    """What never changes about a round once it is drawn. The secret is deliberately not
    kept: only record_guess needs it, and it reads it under the row lock."""

    room_id: str
    palette: frozenset[str]
    length: int


class RoundCache:
    """A small LRU of RoundInfo with a TTL. Never asked whether a round is open: that is
    decided by record_guess under its row lock."""

    def __init__(self, size: int = 1024, ttl_s: float = 300.0) -> None:
        self._size = size
        self._ttl = ttl_s
        self._items: OrderedDict[int, tuple[float, RoundInfo]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, round_id: int) -> RoundInfo | None:
        entry = self._items.get(round_id)
        if entry is None or entry[0] < time.monotonic():
            return None
        self._items.move_to_end(round_id)
        return entry[1]

    def put(self, round_id: int, info: RoundInfo) -> None:
        self._items[round_id] = (time.monotonic() + self._ttl, info)
        self._items.move_to_end(round_id)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    async def load(self, session: AsyncSession, round_id: int) -> RoundInfo | None:
        info = self.get(round_id)
        if info is not None:
            self.hits += 1
            return info
        self.misses += 1
        rnd = await store.get_round(session, round_id)
        if rnd is None:
            return None
        info = RoundInfo(
            room_id=rnd.room_id, palette=frozenset(rnd.palette_emojis), length=rnd.length
        )
        self.put(round_id, info)
        return info


@dataclass
class ScoreStats:
    """Counters for the demo summary and the metrics endpoint."""

    batches: int = 0
    scored: int = 0  # guesses recorded for the first time (including late ones)
    duplicates: int = 0  # re-deliveries recognised by guess id
    won: int = 0
    late: int = 0  # answered "round already solved/ended"
    rejected: int = 0  # payloads that cannot be a guess (dropped, logged without text)
    banned: int = 0  # guesses of a player banned meanwhile (nothing written, no answer)
    retries: int = 0  # batches handed back with Retry
    # accepted-by-the-bot to recorded, per scored guess (the most recent ones)
    wait_ms: deque[int] = field(default_factory=lambda: deque(maxlen=100_000))

    def as_dict(self) -> dict[str, int]:
        return {
            "batches": self.batches,
            "scored": self.scored,
            "duplicates": self.duplicates,
            "won": self.won,
            "late": self.late,
            "rejected": self.rejected,
            "banned": self.banned,
            "retries": self.retries,
        }


def backoff_ms(attempts: int, *, base_ms: int = 500, cap_ms: int = 30_000) -> int:
    """Exponential back-off with full jitter on the upper half."""
    ceiling = min(cap_ms, base_ms * 2 ** max(0, attempts - 1))
    return int(ceiling / 2 + random.random() * ceiling / 2)


class ScoreWorker:
    """`await worker(jobs)`: the ConsumerPool handler."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        lanes: Lanes | None = None,
        lease_ms: int = 30_000,
        hold_s: float = 5.0,
        cache: RoundCache | None = None,
        stats: ScoreStats | None = None,
        on_recorded: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        """`lanes` (optional) lets the worker extend the batch's lease while it waits out a
        short database outage; `hold_s` is how long it waits before handing the batch back
        with Retry. `on_recorded(chat_id)` is told after a batch wrote outbox rows for a chat
        (the sender uses it to look at that chat sooner)."""
        self._sessionmaker = sessionmaker
        self._lanes = lanes
        self._lease_ms = lease_ms
        self._hold_s = hold_s
        self.cache = cache or RoundCache()
        self.stats = stats or ScoreStats()
        self._on_recorded = on_recorded

    async def __call__(self, jobs: Sequence[Job]) -> None:
        self.stats.batches += 1
        deadline = time.monotonic() + self._hold_s
        chats: set[int] = set()
        pause = 0.1
        for job in sorted(jobs, key=lambda j: j.seq):
            while True:
                try:
                    chat = await self._record(job)
                    break
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    now = time.monotonic()
                    if now + pause > deadline:
                        self.stats.retries += 1
                        delay = backoff_ms(job.attempts)
                        log.warning(
                            "database unavailable (%s); batch of %d for lane %s back in %d ms",
                            type(exc).__name__,
                            len(jobs),
                            job.lane,
                            delay,
                        )
                        raise Retry(delay, f"database unavailable: {type(exc).__name__}") from exc
                    await self._extend(jobs)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 2.0)
            if chat is not None:
                chats.add(chat)
        if self._on_recorded is not None:
            for chat in chats:
                await self._on_recorded(chat)

    async def _extend(self, jobs: Sequence[Job]) -> None:
        if self._lanes is None:
            return
        for job in jobs:
            try:
                await self._lanes.extend(job, self._lease_ms)
            except Exception:  # a heartbeat that fails only shortens our grace
                log.debug("lease extension failed for a job of lane %s", job.lane)

    async def _record(self, job: Job) -> int | None:
        """Record one guess; the chat it will be answered in, or None if it was dropped."""
        guess = self._decode(job)
        if guess is None:
            return None
        async with self._sessionmaker() as session:
            info = await self.cache.load(session, guess.round_id)
            if info is None or info.room_id != job.room or not self._fits(guess, info):
                self.stats.rejected += 1
                log.warning(
                    "guess %s does not fit round %d of room %s; dropped",
                    job.id,
                    guess.round_id,
                    job.room,
                )
                return None
            try:
                result = await store.record_guess(
                    session,
                    guess_id=job.id,
                    round_id=guess.round_id,
                    player_id=job.lane,
                    emojis=guess.emojis,
                    chat_id=guess.chat_id,
                    reply_to=guess.message_id,
                )
            except (store.UnknownRound, store.UnknownPlayer, store.GuessMismatch) as exc:
                # Nothing was written; delivering it again would change nothing.
                self.stats.rejected += 1
                log.warning(
                    "guess %s refused by the store (%s); dropped", job.id, type(exc).__name__
                )
                return None
        if result.duplicate:
            self.stats.duplicates += 1
            return None
        if result.banned:
            self.stats.banned += 1
            return None
        self.stats.scored += 1
        if result.won:
            self.stats.won += 1
        elif result.late:
            self.stats.late += 1
        self.stats.wait_ms.append(max(0, int(time.time() * 1000) - guess.sent_ms))
        return guess.chat_id

    def _decode(self, job: Job) -> GuessJob | None:
        if not ids.is_valid(job.lane, ids.PLAYER) or not ids.is_valid(job.id, ids.JOB):
            self.stats.rejected += 1
            log.warning("job %r of lane %r is not a guess (bad ids); dropped", job.id, job.lane)
            return None
        try:
            return GuessJob.decode(job.payload)
        except (ValueError, KeyError, TypeError) as exc:
            self.stats.rejected += 1
            log.warning(
                "job %s has an unreadable payload (%s); dropped", job.id, type(exc).__name__
            )
            return None

    @staticmethod
    def _fits(guess: GuessJob, info: RoundInfo) -> bool:
        return len(guess.emojis) == info.length and all(e in info.palette for e in guess.emojis)
