"""The ScoreWorker: the consumer pool's handler for one batch of one player's guesses.

Per batch (jobs of one lane, i.e. one player in one room, in mint order): decode each
payload into a `game.decide.Attempt` and hand them to `usecases.record_guesses`, which locks the
rounds and loads their state, lets `game.decide` decide (still open? banned meanwhile? scored,
won, late, duplicate), and writes the decision with its outbox rows, idempotent by the guess
id (= the lane job id). Returning lets the pool ack the batch. The bot validated every guess
before enqueueing it; only what can change after that is checked again.

The round is not cached between flushes: each flush reads every round it needs in one
statement, under the row lock that decides whether the round is still open (two workers
scoring the last guesses of a round must agree on one winner). A cache would still need that
locked read, so it would save nothing and could only be stale about a round's end.

Group commit: the pool runs many batches at once (one per consumer), mostly of one guess each
(a player's weight is 1 unless an admin raises it). Recording each in its own transaction costs
a commit and a dozen statements per guess, which caps a worker at a few hundred guesses a
second. So the batches in hand are recorded together: the first batch to arrive takes the
flush lock and records everything waiting in ONE transaction (a fixed handful of statements);
batches arriving meanwhile wait for the next flush, which takes them all. A flush that fails
because the database is out fails every batch in it, and each is retried as below; since
recording is idempotent per guess and all-or-nothing per transaction, nothing is counted
twice. A flush that fails for any other reason is redone one batch per transaction, so that a
poison guess fails (and is in time dead-lettered) alone, not with the batches beside it.

The players' rows are written in the same transaction (`store.seats`): a job names its
Telegram user (and, the first time, the player's name); the bot writes no row per guess.
After the commit, `on_closed(room, round)` is told of every round the batch found or left
closed (won, or a guess "too late"), so that the room's card in Redis stops taking guesses
for it even if whoever closed it died before saying so (state/cards.py).

A database that is down (connection refused, timeouts, OperationalError…: `outages`) is
waited out a little (`outages.retrying` with RETRIES.record, up to `hold_s`; the pool's
heartbeat keeps the batch's lease), then `Retry(delay)` hands the batch back to its lane with
a back-off. Nothing is acked,
nothing is lost. The secret code and the guess text are never logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import metrics, usecases
from codemojex.db import store
from codemojex.lanes import Job, Retry
from codemojex.limits import RETRIES
from codemojex.outages import OUTAGES, OutageLasted, is_outage, pause_s, retrying
from codemojex.values import ids
from codemojex.values.batch import Attempt, Verdict
from codemojex.values.clock import utcnow
from codemojex.values.daily import Finish
from codemojex.values.jobs import GuessJob

log = logging.getLogger(__name__)

# Guesses recorded in one transaction at most (group commit).
FLUSH_MAX: Final = 512
# A database outage is waited out this long with the batch in hand (RETRIES.record's quick
# tries), then the batch goes back to its lane.
HOLD_S: Final = 5.0


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
    flushes: int = 0  # transactions that recorded batches (group commits)
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
            "flushes": self.flushes,
        }


class ScoreWorker:
    """`await worker(jobs)`: the ConsumerPool handler."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        hold_s: float = HOLD_S,
        max_flush: int = FLUSH_MAX,
        stats: ScoreStats | None = None,
        on_recorded: Callable[[int], Awaitable[None]] | None = None,
        on_finished: Callable[[list[Finish]], Awaitable[None]] | None = None,
        share: bool = False,
        on_closed: Callable[[str, int], Awaitable[None]] | None = None,
        clock: Callable[[], datetime] = utcnow,
        late_budget: usecases.LateBudget | None = None,
    ) -> None:
        """`sessionmaker`: where each flush's unit of work takes its session (the worker
        process gives the flushes a pool of their own, `engine.own_pool`). `hold_s` is how
        long a database outage is waited out before the batch is handed back with Retry.
        `max_flush` caps the guesses recorded in one transaction.
        `on_recorded(chat_id)` is told after a batch wrote outbox rows for a chat (the sender
        uses it to look at that chat sooner). `on_finished(finishes)` is told the dailies a
        batch finished, once committed (the world board takes them; a finish delivered again
        is told again). `share`: daily cards carry a Share button (inline mode is on).
        `clock`: the game's now, which decides with the guesses (a daily's day, its card).
        `late_budget`: the "too late" lines spend their members' answer budgets (the bot's
        answers' own, state/budget.py); None: every one is posted."""
        self._sessionmaker = sessionmaker
        # One line when an outage starts, one when a flush succeeds again.
        self._record_retrying = retrying(
            "postgres",
            replace(RETRIES.record, give_up_s=hold_s),
            where="the score worker",
        )(self._record)
        self._max_flush = max_flush
        self.stats = stats or ScoreStats()
        self._on_recorded = on_recorded
        self._on_finished = on_finished
        self._share = share
        self._on_closed = on_closed
        self._clock = clock
        self._late_budget = late_budget
        self._waiting: list[_Waiting] = []
        self._flush_lock = asyncio.Lock()

    async def __call__(self, jobs: Sequence[Job]) -> None:
        claimed_ms = int(time.time() * 1000)  # the pool calls us right after the claim
        self.stats.batches += 1
        decoded = [
            (job, guess)
            for job in sorted(jobs, key=lambda j: j.seq)
            if (guess := self._decode(job)) is not None
        ]
        if not decoded:
            return
        attempts = [
            Attempt(
                guess_id=job.id,
                round_id=guess.round_id,
                player_id=job.lane,
                room_id=job.room,
                emojis=guess.emojis,
                reply_to=guess.message_id,
                taken_ms=job.enqueued_ms,  # in time or late by when the bot took it
            )
            for job, guess in decoded
        ]
        seats = [
            store.Seat(job.lane, job.room, guess.user_id, guess.name)
            for job, guess in decoded
            if guess.user_id
        ]
        verdicts = await self._record_patiently(jobs, _Batch(attempts, seats))
        answered = {
            chat
            for (job, _), verdict in zip(decoded, verdicts, strict=True)
            if (chat := self._count(job, verdict, claimed_ms)) is not None
        }
        if self._on_recorded is not None:
            for chat in answered:
                await self._on_recorded(chat)
        finishes = [v.finish for v in verdicts if v.finish is not None]
        if finishes and self._on_finished is not None:
            await self._tell_finished(self._on_finished, jobs, finishes)
        if self._on_closed is not None:
            closed = {
                (attempt.room_id, attempt.round_id)
                for attempt, verdict in zip(attempts, verdicts, strict=True)
                if verdict.round_closed or verdict.won or verdict.late
            }
            for room_id, round_id in sorted(closed):
                await self._on_closed(room_id, round_id)

    async def _tell_finished(
        self,
        tell: Callable[[list[Finish]], Awaitable[None]],
        jobs: Sequence[Job],
        finishes: list[Finish],
    ) -> None:
        """The finishes onto the world board. Redis out: the batch is handed back (Retry), so
        its guesses come again, are found recorded, and their finishes are told again."""
        try:
            await tell(finishes)
        except Exception as exc:
            if OUTAGES.failed(exc, "the daily board") is None:
                raise
            self.stats.retries += 1
            reason = f"the daily board is unavailable: {type(exc).__name__}"
            raise Retry(_back_off_ms(jobs), reason) from exc

    async def _record_patiently(self, jobs: Sequence[Job], batch: _Batch) -> list[Verdict]:
        """Record, waiting out a short database outage (RETRIES.record, for up to `hold_s`);
        when it lasts, the batch goes back to its lane after RETRIES.job's backoff."""
        try:
            return await self._record_retrying(batch)
        except OutageLasted as lasted:
            cause = lasted.__cause__ or lasted
            self.stats.retries += 1
            delay = _back_off_ms(jobs)
            log.debug(
                "database unavailable (%s); batch of %d for lane %s back in %d ms",
                type(cause).__name__,
                len(jobs),
                jobs[0].lane,
                delay,
            )
            raise Retry(delay, f"database unavailable: {type(cause).__name__}") from cause

    async def _record(self, batch: _Batch) -> list[Verdict]:
        """Group commit: wait for a flush that takes these attempts (maybe run it ourselves)."""
        waiting = _Waiting(batch, asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        async with self._flush_lock:
            if not waiting.future.done():
                await self._flush()
        return waiting.future.result()

    async def _flush(self) -> None:
        """Record the waiting batches (up to max_flush guesses, at least one batch) in one
        transaction and hand each its results, or the failure."""
        taken: list[_Waiting] = []
        size = 0
        while self._waiting and (
            not taken or size + len(self._waiting[0].batch.attempts) <= self._max_flush
        ):
            waiting = self._waiting.pop(0)
            taken.append(waiting)
            size += len(waiting.batch.attempts)
        try:
            results = await self._record_together(taken)
        except asyncio.CancelledError:
            # Our own batch is being cancelled (shutdown); the others wait for the next flush.
            self._waiting[:0] = [w for w in taken if not w.future.done()]
            raise
        except Exception as exc:
            if len(taken) == 1 or is_outage(exc):
                for waiting in taken:
                    waiting.future.set_exception(exc)
                return
            # Not an outage: one of the batches may be poison. Record each on its own, so
            # that only that one fails (and is retried, then dead-lettered), not its company.
            log.warning(
                "recording %d batches together failed (%s); recording them one by one",
                len(taken),
                type(exc).__name__,
            )
            for waiting in taken:
                try:
                    waiting.future.set_result(await self._record_together([waiting]))
                except asyncio.CancelledError:
                    self._waiting[:0] = [w for w in taken if not w.future.done()]
                    raise
                except Exception as alone:
                    waiting.future.set_exception(alone)
            return
        start = 0
        for waiting in taken:
            waiting.future.set_result(results[start : start + len(waiting.batch.attempts)])
            start += len(waiting.batch.attempts)

    async def _record_together(self, taken: list[_Waiting]) -> list[Verdict]:
        """One transaction for the guesses of these batches, in order."""
        attempts = [attempt for waiting in taken for attempt in waiting.batch.attempts]
        seats = [seat for waiting in taken for seat in waiting.batch.seats]
        verdicts = await usecases.record_guesses(
            self._sessionmaker,
            attempts,
            seats=seats,
            now=self._clock(),
            share=self._share,
            late_budget=self._late_budget,
        )
        self.stats.flushes += 1
        return verdicts

    def _count(self, job: Job, verdict: Verdict, claimed_ms: int) -> int | None:
        """Book one guess's verdict; the chat it was answered in, if it was."""
        if verdict.refused:
            # Nothing was written; delivering it again would change nothing.
            self.stats.rejected += 1
            log.warning("guess %s refused (%s); dropped", job.id, verdict.kind)
            return None
        if verdict.duplicate:
            self.stats.duplicates += 1
            return None
        if verdict.banned:
            self.stats.banned += 1
            return None
        self.stats.scored += 1
        if verdict.won:
            self.stats.won += 1
        elif verdict.late:
            self.stats.late += 1
        self.stats.wait_ms.append(max(0, int(time.time() * 1000) - job.enqueued_ms))
        metrics.guess_scored(job.enqueued_ms, claimed_ms)
        return verdict.chat_id

    def _decode(self, job: Job) -> GuessJob | None:
        if not ids.is_valid(job.lane, ids.PLAYER) or not ids.is_valid(job.id, ids.JOB):
            self.stats.rejected += 1
            log.warning("job %r of lane %r is not a guess (bad ids); dropped", job.id, job.lane)
            return None
        try:
            return GuessJob.decode(job.payload)
        except ValueError as exc:
            self.stats.rejected += 1
            log.warning(
                "job %s has an unreadable payload (%s); dropped", job.id, type(exc).__name__
            )
            return None


@dataclass(frozen=True, slots=True)
class _Batch:
    """One handler call's guesses and the players they name."""

    attempts: list[Attempt]
    seats: list[store.Seat]


@dataclass(slots=True)
class _Waiting:
    """A batch waiting for a flush, and where its results go."""

    batch: _Batch
    future: asyncio.Future[list[Verdict]]


def _back_off_ms(jobs: Sequence[Job]) -> int:
    """A batch's delay in its lane (RETRIES.job, after its most tried job's attempts); at least
    1 ms: a zero delay would be no back-off at all."""
    return max(1, int(pause_s(RETRIES.job, max(job.attempts for job in jobs)) * 1000))
