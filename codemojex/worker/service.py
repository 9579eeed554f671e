"""Wiring of the worker process: the consumer pool with the ScoreWorker, the outbox sender and
the round timer, with a graceful stop.

Stopping (SIGTERM in `main`, or the caller setting `stop_event`): the pool stops claiming and
finishes and acks the batches in hand; then the sender finishes the post in hand and the
timer stops. Nothing in flight is lost if the process is killed instead: leases expire and the
jobs are served again (recording guesses is idempotent), and unsent outbox rows stay unsent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex import usecases
from codemojex.db import store
from codemojex.db.engine import own_pool
from codemojex.db.reading import reading
from codemojex.game import rounds
from codemojex.lanes import Lanes, consumer, facade
from codemojex.lanes.consumer import ConsumerPool, PoolStats
from codemojex.limits import RETRIES, ROOM
from codemojex.ops.fleet import read_fleet
from codemojex.outages import OUTAGES, OutageLasted, is_outage, pause_s, retrying
from codemojex.posting.keys import bot_id
from codemojex.posting.pace_policy import PacePolicy
from codemojex.posting.pacer import Pacer
from codemojex.posting.sender import OutboxSender, SenderStats
from codemojex.posting.sender.delivery import Ambiguous
from codemojex.posting.sender.loop import RECONCILE_S
from codemojex.runtime import settle_process
from codemojex.scoring.rules import ROUND_HOLD_S_MAX
from codemojex.state.board import DailyBoard
from codemojex.state.budget import BUDGET, AnswerBudget
from codemojex.state.cards import RoomCards
from codemojex.values.batch import deadline_ms
from codemojex.values.clock import utcnow
from codemojex.values.redistypes import AnyRedis
from codemojex.values.types import ROUND_DAILY, Say
from codemojex.worker.botapi import make_bot
from codemojex.worker.retention import AUDIT_KEEP_DAYS, DAILY_KEEP_DAYS, AuditTrim, DailyTrim, Trim
from codemojex.worker.score import HOLD_S, ScoreStats, ScoreWorker

__all__ = [
    "Expiry",
    "WorkerConfig",
    "WorkerStats",
    "expire_rounds_once",
    "make_bot",
    "run_worker",
    "settle_process",
]

log = logging.getLogger(__name__)

# The score worker's flushes take their connection from a pool of their own (they run one at
# a time): never a wait behind the sender's books and the round timer, which share the
# process's pool. A flush that queued behind 32 chats in hand held every consumer's batch: 343
# guesses/s end to end in bench.ingest, 746 on a connection of its own. The worker process
# keeps that many fewer in its main pool (worker/main.py): as many in all as any process.
FLUSH_CONNECTIONS: Final = 1
# A round held open for guesses taken before its deadline is looked at this often.
ROUND_HOLD_RECHECK_S: Final = 1.0
# The worker's "too late" lines spend the answer budget inside the transaction recording them
# (rounds locked): Redis gets this long, then the lines go as while it is out.
LATE_BUDGET_WAIT_S: Final = 0.5


@dataclass
class WorkerStats:
    """Everything the worker counts; `as_dict()` for the demo summary."""

    score: ScoreStats = field(default_factory=ScoreStats)
    sender: SenderStats = field(default_factory=SenderStats)
    pool: PoolStats = field(default_factory=PoolStats)
    rounds_expired: int = 0
    audit_trimmed: int = 0
    daily_trimmed: int = 0

    def as_dict(self) -> dict[str, int]:
        out = {f"pool_{k}": v for k, v in self.pool.as_dict().items()}
        out |= {f"score_{k}": v for k, v in self.score.as_dict().items()}
        out |= {f"sent_{k}": v for k, v in self.sender.as_dict().items()}
        out["rounds_expired"] = self.rounds_expired
        out["audit_trimmed"] = self.audit_trimmed
        out["daily_trimmed"] = self.daily_trimmed
        return out


@dataclass(frozen=True, slots=True)
class Expiry:
    """What one pass of the round timer did: rounds closed, rounds past their deadline held
    open for guesses taken before it."""

    closed: int
    held: int


async def close_card(cards: RoomCards, room_id: str, round_id: int) -> None:
    """After a round's close was committed: its room's card stops taking guesses for it. Best
    effort: with Redis out nothing is taken anyway, and a guess the card still takes is
    scored "too late" and closes it again."""
    try:
        await cards.close(room_id, round_id)
    except Exception as exc:
        if not is_outage(exc):
            raise
        OUTAGES.swallow(exc, "the room cards", f"room {room_id}: its card not closed")


async def expire_rounds_once(
    sessionmaker: async_sessionmaker[AsyncSession],
    lanes: Lanes,
    sender: OutboxSender | None = None,
    cards: RoomCards | None = None,
    *,
    hold_s: float = ROUND_HOLD_S_MAX,
    clock: Callable[[], datetime] = utcnow,
) -> Expiry:
    """Close the rounds whose time ran out at `clock()` (their reveal goes to the outbox),
    except those whose room still holds guesses the bot took before the deadline
    (`rounds.holds_open`; never a daily's): they stay open until those are scored, or
    `hold_s` past the deadline.

    Safe with any number of workers: the lanes are asked after the deadline on their own
    clock (a guess taken before it is in the lanes, or scored and acked, by then), and each
    round is closed under its row lock, once."""
    async with reading(sessionmaker) as session:
        due = await store.due_rounds(session, clock())
    if not due:
        return Expiry(0, 0)
    deadlines = {r.id: deadline_ms(r.expires_at) for r in due}
    # a room has one open round: its deadline (a daily's is not asked about: never held)
    moments = {r.room_id: deadlines[r.id] for r in due if r.kind != ROUND_DAILY}
    now_ms, waiting = await lanes.waiting_before(moments) if moments else (0, set[str]())
    close = [
        r.id
        for r in due
        if not rounds.holds_open(
            deadlines[r.id], now_ms, r.room_id in waiting, hold_s, daily=r.kind == ROUND_DAILY
        )
    ]
    closed = await usecases.expire_rounds(sessionmaker, clock(), close)
    if cards is not None:
        for rnd in closed:
            await close_card(cards, rnd.room_id, rnd.id)
    if closed and sender is not None:
        async with reading(sessionmaker) as session:
            chats = await store.room_chats(session, {r.room_id for r in closed})
        for chat_id in chats:
            sender.poke(chat_id)
    return Expiry(len(closed), len(due) - len(close))


async def _round_timer(
    sessionmaker: async_sessionmaker[AsyncSession],
    lanes: Lanes,
    sender: OutboxSender,
    cards: RoomCards,
    stats: WorkerStats,
    stop: asyncio.Event,
    every_s: float,
    audit: Trim,
    dailies: Trim,
    hold_s: float,
    clock: Callable[[], datetime],
) -> None:
    """Close rounds when their time runs out. It sleeps until the first open round's expiry,
    or `every_s` at most: a round the bot starts meanwhile runs at least ROOM.round_timeout_s_min,
    so with `every_s` no longer than that (the default) no round is closed late, and an idle
    deployment costs one index probe per `every_s`, not a scan every few seconds. A round
    held open for guesses taken before its deadline is looked at again every
    ROUND_HOLD_RECHECK_S. Postgres out: again soon (RETRIES.loop, never later than
    `every_s`), so that rounds that expired meanwhile close once it is back. Time is
    `clock()` (the tests move it over a midnight)."""

    async def tick() -> float:
        """One pass; how long until the next."""
        wait_s = every_s
        async with reading(sessionmaker) as session:
            first = await store.next_expiry(session)
        now = clock()
        if first is not None and first <= now:
            expiry = await expire_rounds_once(
                sessionmaker, lanes, sender, cards, hold_s=hold_s, clock=clock
            )
            stats.rounds_expired += expiry.closed
            wait_s = min(every_s, ROUND_HOLD_RECHECK_S) if expiry.held else 0.0
        elif first is not None:
            wait_s = min(every_s, (first - now).total_seconds())
        for trim in (audit, dailies):
            trimmed = await trim.tick(sessionmaker, clock())
            if trim is audit:
                stats.audit_trimmed += trimmed
            else:
                stats.daily_trimmed += trimmed
            if trimmed >= trim.batch:  # a backlog: its next batch is due at once
                wait_s = min(wait_s, 1.0)
        return wait_s

    policy = replace(
        RETRIES.loop,
        cap_s=min(RETRIES.loop.cap_s, every_s),
        floor_s=min(RETRIES.loop.floor_s, every_s),
    )
    patient = retrying("postgres", policy, where="the round timer", stop=stop)(tick)
    bugs = 0
    while not stop.is_set():
        try:
            wait_s = await patient()
            bugs = 0
        except OutageLasted:
            return  # stopping
        except Exception:
            log.exception("round timer failed")
            bugs += 1
            wait_s = pause_s(policy, bugs)
        if wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait_s)


async def _wait_outbox_empty(
    sessionmaker: async_sessionmaker[AsyncSession], limit_s: float
) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while asyncio.get_running_loop().time() < deadline:
        try:
            async with reading(sessionmaker) as session:
                pending = await store.pending_outbox(session, 1)
            if not pending:
                return
        except Exception as exc:
            if OUTAGES.failed(exc, "the worker's last posts") is None:
                raise
        await asyncio.sleep(0.1)


async def senders_up(redis: AnyRedis, queue: str) -> bool:
    """Whether `codemojex sender` processes post for this queue (the ops fleet: a process
    gone quiet for fleet.STALE_S is gone): the worker's own sender then stands back, and its
    event loop scores."""
    return any(proc.kind == "sender" for proc in await read_fleet(redis, queue))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    """What the worker is built from (the composition root unpacks the settings into it): the
    queue it serves, the results' pace (`PacePolicy.from_rates`), what a post the sender cannot
    tell went out becomes (`sender_ambiguous`), the members' answer budget, whether daily cards
    carry a Share button (`inline_mode`), its consumers and their lease, and how long the
    audit log and the players' daily rows are kept."""

    queue: str
    pace: PacePolicy
    sender_ambiguous: Ambiguous
    inline_mode: bool
    answer_budget: int = BUDGET
    concurrency: int = consumer.CONCURRENCY
    lease_ms: int = facade.LEASE_MS
    audit_keep_days: int = AUDIT_KEEP_DAYS
    daily_keep_days: int = DAILY_KEEP_DAYS


@dataclass(frozen=True, slots=True)
class WorkerTimings:
    """How often the worker's parts look and how long they wait. A deployment runs the
    defaults (limits.py); the demo and the tests shorten the looks, so that a round's timeout
    or a posted result shows within their run."""

    # The round timer's longest sleep (it wakes earlier for the next expiry).
    timer_s: float = ROOM.round_timeout_s_min
    # The sender's reconcile pass over the outbox (the ring wakes it at once otherwise).
    sender_poll_s: float = RECONCILE_S
    # A database outage waited out by the score worker before its batch goes back.
    score_hold_s: float = HOLD_S
    # How long past its deadline a round is held open for the guesses taken before it.
    round_hold_s: float = ROUND_HOLD_S_MAX
    # After a stop: the sender's time to post what is left in the outbox (0: none).
    drain_s: float = 0.0
    # The consumer pool's maintenance pass, and its idle waiter's BLPOP.
    maintenance_interval_s: float = consumer.MAINTENANCE_INTERVAL_S
    park_timeout_s: float = consumer.PARK_TIMEOUT_S


async def run_worker(
    config: WorkerConfig,
    *,
    lanes: Lanes,
    sessionmaker: async_sessionmaker[AsyncSession],
    bot: Bot,
    redis: AnyRedis,
    stop_event: asyncio.Event,
    stats: WorkerStats | None = None,
    timings: WorkerTimings = WorkerTimings(),
    clock: Callable[[], datetime] = utcnow,
) -> WorkerStats:
    """Run the consumer pool (handler = ScoreWorker), the outbox sender and the round timer
    until `stop_event` is set; then stop them in that order and return the counters.
    With `timings.drain_s` > 0 the sender is given up to that long after the pool stopped to
    post what is still in the outbox (a demo's last results); otherwise unsent rows simply
    wait for the next start.

    `bot` may be initialised or not (the sender only posts); `redis` is the client the
    lanes use (decode_responses=False), shared with the sender's pacer and leases.
    `clock`: the game's now, where the worker judges time (a guess's day and its card, a
    round's expiry, what retention keeps): the tests give theirs, as to the bot.
    """
    stats = stats or WorkerStats()
    sender = OutboxSender(
        sessionmaker,
        bot,
        redis,
        namespace=config.queue,
        pacer=Pacer(redis, config.queue, config.pace, bot=bot_id(bot.token)),
        poll_s=timings.sender_poll_s,
        stats=stats.sender,
        ambiguous=config.sender_ambiguous,
        stand_back=functools.partial(senders_up, redis, config.queue),
    )

    # The worker's one hook after its group commit: each chat given outbox rows joins the
    # posting ring (the sender adds them in one call) and its sender looks at once.
    async def poke(chat_id: int) -> None:
        sender.poke(chat_id)

    # Finished dailies go onto the world board once committed (state/board.py).
    board = DailyBoard(redis, config.queue)
    cards = RoomCards(redis, config.queue)

    async def closed(room_id: str, round_id: int) -> None:
        await close_card(cards, room_id, round_id)

    # "Too late" lines spend their members' answer budgets, the bot's answers' own.
    budget = AnswerBudget(redis, config.queue, budget=config.answer_budget)

    async def late_budget(members: Sequence[tuple[int, int]]) -> list[Say]:
        return await budget.spend_many(members, wait_s=LATE_BUDGET_WAIT_S)

    flushes = own_pool(sessionmaker, FLUSH_CONNECTIONS)
    scorer = ScoreWorker(
        flushes,
        hold_s=timings.score_hold_s,
        stats=stats.score,
        on_recorded=poke,
        on_finished=board.finished,
        share=config.inline_mode,
        on_closed=closed,
        clock=clock,
        late_budget=late_budget,
    )
    pool = ConsumerPool(
        lanes,
        scorer,
        concurrency=config.concurrency,
        lease_ms=config.lease_ms,
        maintenance_interval_s=timings.maintenance_interval_s,
        park_timeout_s=timings.park_timeout_s,
    )
    pool.stats = stats.pool
    sender_stop = asyncio.Event()
    pool_task = asyncio.create_task(pool.run(), name="worker:pool")
    sender_task = asyncio.create_task(sender.run(sender_stop), name="worker:sender")
    timer_task = asyncio.create_task(
        _round_timer(
            sessionmaker,
            lanes,
            sender,
            cards,
            stats,
            sender_stop,
            timings.timer_s,
            AuditTrim(config.audit_keep_days),
            DailyTrim(config.daily_keep_days),
            timings.round_hold_s,
            clock,
        ),
        name="worker:timer",
    )
    tasks = [pool_task, sender_task, timer_task]
    stopper = asyncio.create_task(stop_event.wait())
    try:
        # Whichever comes first: a stop request, or a part dying (which stops the rest).
        await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        pool.stop()
        await asyncio.gather(pool_task, return_exceptions=True)
        await flushes.kw["bind"].dispose()
        if timings.drain_s > 0 and not sender_task.done():
            await _wait_outbox_empty(sessionmaker, timings.drain_s)
        sender_stop.set()
        await asyncio.gather(sender_task, timer_task, return_exceptions=True)
    failures = [t.exception() for t in tasks if not t.cancelled() and t.exception() is not None]
    for failure in failures:
        log.error("worker part failed: %r", failure)
    if failures and failures[0] is not None:
        raise failures[0]
    return stats
