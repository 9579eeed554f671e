"""The consumer loop: N asyncio consumers draining the lanes with wclaim.

Each consumer: take a batch (heads of one lane); run the handler; hand the finished batch
back with its request for the next. The pool sends the requests of all its consumers that
are waiting at that moment as ONE script call (`ack_wclaims`: their finished batches acked,
a batch claimed for each, N rota steps), so a pool pays one round trip per round, not one
per consumer; requests made while a call is in flight go in the next one (like a group
commit). `Retry(delay_ms)` from the handler retries the batch after that delay; any other
exception retries it after `outages.pause_s` under the pool's backoff policy
(`RETRIES.job` by default: exponential, full jitter); the retry script sends a job whose
attempts are spent to `dead`.

With nothing to claim a consumer parks locally; ONE waiter per pool blocks on the wake list
(BLPOP with a timeout) while any consumer is parked, and a wake token (or the timeout, a
safety net for a token another process took) sends every parked consumer back to claim, in
one script call. An idle pool therefore costs one BLPOP and one claim per `park_timeout_s`
plus the maintenance, whatever its concurrency; a woken pool whose claim leaves work on the
ring passes the wake on (another process's pool may be parked). One maintenance task runs
reap + promote every few seconds, and also promotes as soon as a retry this pool scheduled
comes due (it sleeps until the earlier of its next tick and the earliest such deadline), so
a retry shorter than the interval is not held until the next tick; promote's wake reaches
the parked consumers. One heartbeat task extends the leases of batches in hand for longer
than a third of a lease. `stop()` (or SIGTERM once `install_signal_handlers()` was called)
stops claiming, lets the batches in hand finish, acks them, and `run()` returns. A Redis
call of the loop that fails is waited out: an outage is booked in `outages.OUTAGES` (one
line when it starts, one when a claim succeeds again), a bug is logged with its traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import random
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Annotated, Final

from pydantic import Field

from codemojex.lanes.calls import Job
from codemojex.lanes.errors import Retry
from codemojex.lanes.facade import LEASE_MS, Lanes, LeaseMs
from codemojex.limits import RETRIES, RetryPolicy
from codemojex.outages import OUTAGES, is_outage, pause_s
from codemojex.values.bounds import within

log = logging.getLogger("codemojex.lanes.consumer")
# Consumers per process (CODEMOJEX_CONCURRENCY): the batches in hand are recorded in one
# transaction, so more make bigger transactions (less Postgres CPU per guess), not more
# connections; idle, one parks.
CONCURRENCY: Final = 128
Concurrency = Annotated[int, Field(ge=1, le=1024)]
# An idle pool's one BLPOP: a wake token ends it at once; each timeout costs a safety claim.
PARK_TIMEOUT_S: Final = 5.0
# The reap/promote/retention pass's interval, IDLE_FACTOR times longer while the pool is idle
# (a dead worker's leases are reaped that much later).
MAINTENANCE_INTERVAL_S: Final = 2.0
IDLE_FACTOR: Final = 5
# Consumers' requests one claim round serves at most; the rest go in the next.
CLAIM_ROUND_MAX: Final = 256

Handler = Callable[[list[Job]], Awaitable[None]]


def _failed(what: str, exc: Exception, **extra: object) -> None:
    """A Redis call of the loop failed. An outage is booked (the loop waits and tries again).
    Anything else is a bug, logged with its traceback; the loop carries on too (the leases
    of what it held expire, nothing is lost)."""
    if OUTAGES.failed(exc, f"the consumer loop ({what})") is None:
        log.error("%s failed", what, exc_info=exc, extra=extra)


@contextlib.contextmanager
def _best_effort(what: str) -> Iterator[None]:
    """A best-effort call (a wake, a lease extension): an outage is passed over in silence,
    as the next pass tries again; a bug is still logged."""
    try:
        yield
    except Exception as exc:
        if not is_outage(exc):
            _failed(what, exc)


@dataclass
class PoolStats:
    claimed: int = 0
    acked: int = 0
    retried: int = 0
    dead: int = 0
    stale: int = 0
    batches: int = 0
    failures: int = 0
    parks: int = 0  # a consumer found nothing and parked
    claims: int = 0  # claim rounds: script calls, each for every consumer asking then
    waits: int = 0  # BLPOPs of the pool's waiter on the wake list
    reaped: int = 0
    promoted: int = 0
    trimmed: int = 0
    forgotten: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class ConsumerPool:
    """`concurrency` consumers over one `Lanes`.

    At most two Redis connections of the client's pool are busy for the pool at a time
    besides heartbeats and maintenance: its claim round and its waiter's BLPOP (parked
    consumers wait in the process, not on Redis).
    """

    def __init__(
        self,
        lanes: Lanes,
        handler: Handler,
        *,
        concurrency: int = CONCURRENCY,
        lease_ms: int = LEASE_MS,
        backoff: RetryPolicy = RETRIES.job,
        maintenance_interval_s: float = MAINTENANCE_INTERVAL_S,
        park_timeout_s: float = PARK_TIMEOUT_S,
        extend_leases: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        self.lanes = lanes
        self.handler = handler
        self.concurrency = within(concurrency, Concurrency, "concurrency")
        self.lease_ms = within(lease_ms, LeaseMs, "lease_ms")
        self.backoff = backoff
        self.maintenance_interval_s = maintenance_interval_s
        self.park_timeout_s = park_timeout_s
        self.extend_leases = extend_leases
        self.rng = rng or random.Random()
        self.stats = PoolStats()
        self._stop = asyncio.Event()
        self._signals: list[signal.Signals] = []
        self._parked = 0
        self._want_signals = False
        # loop-clock deadlines of the retries this pool scheduled (a heap); the maintenance
        # task sleeps until the earliest or its next tick, whichever comes first, and
        # `_earlier_deadline` wakes it when a new deadline comes before the one it sleeps to
        self._retry_deadlines: list[float] = []
        self._earlier_deadline = asyncio.Event()
        # consumers' requests for the next claim round: (finished batch, where the answer goes)
        self._asks: list[tuple[list[Job], asyncio.Future[list[Job] | None]]] = []
        self._asked = asyncio.Event()
        self._bell = asyncio.Event()  # parked consumers wait on it; replaced when rung
        self._someone_parked = asyncio.Event()
        self._waiting = False  # the waiter is in its BLPOP
        self._woken = False  # the next round follows a wake token
        self._in_hand: dict[int, tuple[list[Job], float]] = {}  # consumer -> batch, since

    # -- control --------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; batches in hand are finished and acked, then run() returns."""
        if not self._stop.is_set():
            log.info("consumer pool stopping", extra={"queue": self.lanes.queue})
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT call stop(). Outside a running loop, run() installs them."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._want_signals = True
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
            self._signals.append(sig)

    async def run(self) -> None:
        if self._want_signals and not self._signals:
            self.install_signal_handlers()
        consumers = [
            asyncio.create_task(self._consume(n), name=f"lanes-consumer-{n}")
            for n in range(self.concurrency)
        ]
        helpers = [
            asyncio.create_task(self._maintain(), name="lanes-maintenance"),
            asyncio.create_task(self._unpark_on_stop(), name="lanes-unparker"),
            asyncio.create_task(self._claimer(), name="lanes-claimer"),
            asyncio.create_task(self._watch(), name="lanes-waiter"),
        ]
        if self.extend_leases:
            helpers.append(asyncio.create_task(self._heartbeat(), name="lanes-heartbeat"))
        log.info(
            "consumer pool running",
            extra={"queue": self.lanes.queue, "concurrency": self.concurrency},
        )
        try:
            await asyncio.gather(*consumers)
        finally:
            for task in consumers:
                task.cancel()
            for helper in helpers:
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper
            loop = asyncio.get_running_loop()
            for sig in self._signals:
                loop.remove_signal_handler(sig)
            self._signals.clear()
            log.info(
                "consumer pool stopped", extra={"queue": self.lanes.queue, **self.stats.as_dict()}
            )

    # -- the loop -------------------------------------------------------------------------

    async def _consume(self, n: int) -> None:
        done: list[Job] = []  # handled, not yet acked: the next claim round carries the ack
        while not self._stop.is_set():
            jobs = await self._ask(done)
            done = []
            if jobs is None:  # the round failed (booked by the claimer); the leases expire
                await self._sleep(1.0)
            elif not jobs:
                await self._park()
            else:
                done = await self._handle(n, jobs)
        if done:  # stopping: ack what is in hand, claim nothing more
            try:
                self._count_acks(len(done), await self.lanes.ack_many(done))
            except Exception as exc:
                _failed("ack", exc, jobs=[job.id for job in done])

    async def _ask(self, done: list[Job]) -> list[Job] | None:
        """Hand in a finished batch and ask for the next: the answer of the next round."""
        answer: asyncio.Future[list[Job] | None] = asyncio.get_running_loop().create_future()
        self._asks.append((done, answer))
        self._asked.set()
        return await answer

    async def _claimer(self) -> None:
        """The claim rounds: every request waiting is sent in one `ack_wclaims` call."""
        while True:
            await self._asked.wait()
            self._asked.clear()
            asks, self._asks = self._asks[:CLAIM_ROUND_MAX], self._asks[CLAIM_ROUND_MAX:]
            if self._asks:
                self._asked.set()  # the rest go in the next round
            if not asks:
                continue
            done = [job for finished, _ in asks for job in finished]
            wanted = 0 if self._stop.is_set() else len(asks)
            self.stats.claims += 1
            try:
                acked, batches, more = await self.lanes.ack_wclaims(done, self.lease_ms, wanted)
            except Exception as exc:
                # an ack that may not have happened: the leases expire and the jobs are
                # served again, and the handler's writes are idempotent; nothing is lost
                _failed("claim", exc, unacked=len(done), consumers=len(asks))
                for _, answer in asks:
                    if not answer.done():  # (a consumer cancelled meanwhile)
                        answer.set_result(None)
                continue
            OUTAGES.ok("redis")
            self._count_acks(len(done), acked)
            for i, (_, answer) in enumerate(asks):
                if not answer.done():
                    answer.set_result(batches[i] if i < len(batches) else [])
            if self._woken and more:
                # a wake token woke this pool and work remains: another pool may be parked
                with _best_effort("wake"):
                    await self.lanes.wake()
            self._woken = False

    def _count_acks(self, done: int, acked: int) -> None:
        self.stats.acked += acked
        self.stats.stale += done - acked
        if acked < done:
            log.warning("stale leases at ack", extra={"stale": done - acked})

    async def _park(self) -> None:
        """Wait for the pool's waiter to ring: a wake token, its timeout, or stopping."""
        self.stats.parks += 1
        self._parked += 1
        self._someone_parked.set()
        bell = self._bell
        try:
            if not self._stop.is_set():
                await bell.wait()
        finally:
            self._parked -= 1

    def _ring_bell(self) -> None:
        bell, self._bell = self._bell, asyncio.Event()
        bell.set()

    async def _watch(self) -> None:
        """The pool's one waiter on the wake list: it blocks only while a consumer is parked,
        and sends all parked consumers back to claim (together, in one round) when a wake
        token comes or the park times out."""
        while not self._stop.is_set():
            if not self._parked:
                self._someone_parked.clear()
                await self._someone_parked.wait()
                continue
            self.stats.waits += 1
            self._waiting = True
            try:
                woken = await self.lanes.park(self.park_timeout_s)
            except Exception as exc:
                _failed("park", exc)
                await self._sleep(1.0)
                woken = False
            finally:
                self._waiting = False
            self._woken = self._woken or woken
            self._ring_bell()

    async def _unpark_on_stop(self) -> None:
        """Wake our parked consumers when stopping, and our waiter (redis-py may ignore the
        cancellation of a BLPOP that has just started, so it is woken the regular way)."""
        await self._stop.wait()
        self._ring_bell()
        if self._waiting:
            with _best_effort("wake"):
                await self.lanes.wake()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _handle(self, n: int, jobs: list[Job]) -> list[Job]:
        """Run the handler on a batch; the batch to ack (none when it was retried)."""
        self.stats.claimed += len(jobs)
        self.stats.batches += 1
        self._in_hand[n] = (jobs, asyncio.get_running_loop().time())
        try:
            await self.handler(jobs)
        except Retry as retry:
            self.stats.failures += 1
            delay_ms = retry.delay_ms
            await self._retry(jobs, lambda _job: delay_ms, retry.reason)
            return []
        except Exception as exc:
            self.stats.failures += 1
            log.exception(
                "handler failed",
                extra={"jobs": [job.id for job in jobs], "attempts": jobs[0].attempts},
            )
            error = f"{type(exc).__name__}: {exc}"
            await self._retry(jobs, self._backoff_ms, error)
            return []
        finally:
            del self._in_hand[n]
        return jobs

    def _backoff_ms(self, job: Job) -> int:
        return int(pause_s(self.backoff, job.attempts, self.rng) * 1000)

    async def _retry(self, jobs: list[Job], delay: Callable[[Job], int], error: str) -> None:
        for job in jobs:
            delay_ms = delay(job)
            try:
                outcome = await self.lanes.retry(job, delay_ms, error)
            except Exception as exc:
                _failed("retry", exc, job=job.id)
                continue
            if outcome == "dead":
                self.stats.dead += 1
                log.warning("job dead", extra={"job": job.id, "attempts": job.attempts})
            elif outcome == "delayed":
                self.stats.retried += 1
                self._promote_at(asyncio.get_running_loop().time() + delay_ms / 1000)
            else:
                self.stats.stale += 1

    def _promote_at(self, deadline: float) -> None:
        """Have the maintenance task promote at `deadline` (taken after the retry script
        ran, so the job is due in Redis by then)."""
        if not self._retry_deadlines or deadline < self._retry_deadlines[0]:
            self._earlier_deadline.set()  # earlier than what the maintenance task sleeps until
        heapq.heappush(self._retry_deadlines, deadline)

    async def _heartbeat(self) -> None:
        """Extend the leases of the batches in hand for longer than a third of a lease (one
        task for the pool, rather than one per batch: most batches take milliseconds)."""
        period = self.lease_ms / 3000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            for jobs, since in list(self._in_hand.values()):
                if now - since >= period:
                    for job in jobs:
                        with _best_effort("extend"):
                            await self.lanes.extend(job, self.lease_ms)

    async def _maintain(self) -> None:
        """Reap + promote + one batch of retention every `maintenance_interval_s` (that many
        times IDLE_FACTOR after a tick in which the pool handled nothing), and
        promote alone whenever a retry this pool scheduled comes due in between. Sleeps
        otherwise: no polling."""
        loop = asyncio.get_running_loop()
        tick = loop.time()  # the first pass reaps and promotes at once
        batches = -1  # the pool's batch count at the last periodic pass
        while not self._stop.is_set():
            now = loop.time()
            periodic = now >= tick
            due = False
            while self._retry_deadlines and self._retry_deadlines[0] <= now:
                heapq.heappop(self._retry_deadlines)
                due = True
            if periodic or due:
                await self._maintenance_pass(reap=periodic)
            if periodic:
                idle = batches == self.stats.batches and not self._in_hand
                batches = self.stats.batches
                factor = IDLE_FACTOR if idle else 1
                tick = loop.time() + self.maintenance_interval_s * factor
            # cleared after the pass: a deadline pushed during it is in the heap read here
            self._earlier_deadline.clear()
            wake_at = min(tick, self._retry_deadlines[0]) if self._retry_deadlines else tick
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(wake_at):
                    await self._earlier_deadline.wait()

    async def _maintenance_pass(self, *, reap: bool) -> None:
        try:
            reaped = await self._drain(self.lanes.reap) if reap else 0
            promoted = await self._drain(self.lanes.promote)
            # retention: one bounded batch per periodic pass, not drained
            trimmed, forgotten = await self.lanes.retain() if reap else (0, 0)
        except Exception as exc:
            _failed("maintenance", exc)
            return
        self.stats.reaped += reaped
        self.stats.promoted += promoted
        self.stats.trimmed += trimmed
        self.stats.forgotten += forgotten
        if reaped or promoted or trimmed or forgotten:
            log.info(
                "maintenance",
                extra={
                    "reaped": reaped,
                    "promoted": promoted,
                    "dead_deleted": trimmed,
                    "lanes_forgotten": forgotten,
                },
            )

    async def _drain(self, verb: Callable[[], Awaitable[int]]) -> int:
        """Run reap or promote until a call moves less than a batch (a crashed worker can
        leave more expired leases than one batch)."""
        total = 0
        while True:
            n = await verb()
            total += n
            if n < self.lanes.batch:
                return total
