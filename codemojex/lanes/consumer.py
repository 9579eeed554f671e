"""The consumer loop: N asyncio consumers draining the lanes with wclaim.

Each consumer: wclaim a batch (heads of one lane); run the handler; ack the batch in the
same script call that claims the next one (`ack_wclaim`: one round trip per batch).
`Retry(delay_ms)` from the handler retries the batch after that delay; any other
exception retries it with the one backoff (`outages.backoff_ms`: exponential, full
jitter); the retry script sends a
job whose attempts are spent to `dead`. With nothing to claim a consumer parks on the
wake list (BLPOP with a short timeout), so an idle pool makes no busy round trips. One
maintenance task runs reap + promote every few seconds, and also promotes as soon as a
retry this pool scheduled comes due (it sleeps until the earlier of its next tick and the
earliest such deadline), so a retry shorter than the interval is not held until the next
tick; promote's wake reaches the parked consumers. `stop()` (or SIGTERM once
`install_signal_handlers()` was called) stops claiming, lets the batches in hand finish,
acks them, and `run()` returns. A Redis call of the loop that fails is waited out: an
outage is booked in `outages.OUTAGES` (one line when it starts, one when a claim succeeds
again, however many consumers retry meanwhile), a bug is logged with its traceback.
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

from codemojex.lanes.errors import Retry
from codemojex.lanes.facade import Job, Lanes
from codemojex.limits import (
    BACKOFF_BASE_MS,
    BACKOFF_CAP_MS,
    CONCURRENCY_DEFAULT,
    LEASE_MS_DEFAULT,
)
from codemojex.outages import OUTAGES, backoff_ms, is_outage

log = logging.getLogger("codemojex.lanes.consumer")

Handler = Callable[[list[Job]], Awaitable[None]]


def _failed(what: str, exc: Exception, **extra: object) -> None:
    """A Redis call of the loop failed. An outage is booked (the loop waits and tries again).
    Anything else is a bug, logged with its traceback; the loop carries on too (the leases
    of what it held expire, nothing is lost)."""
    if OUTAGES.failed(exc, f"the consumer loop ({what})") is None:
        log.error("%s failed", what, exc_info=exc, extra=extra)


@contextlib.contextmanager
def _waived(what: str) -> Iterator[None]:
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
    parks: int = 0
    claims: int = 0
    reaped: int = 0
    promoted: int = 0
    trimmed: int = 0
    forgotten: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class ConsumerPool:
    """`concurrency` consumers over one `Lanes`.

    Parked consumers each hold a pooled connection while they block, so the Redis client's
    pool must allow at least `concurrency` + a few connections (redis-py's default of 100
    covers a pool of up to about 90).
    """

    def __init__(
        self,
        lanes: Lanes,
        handler: Handler,
        *,
        concurrency: int = CONCURRENCY_DEFAULT,
        lease_ms: int = LEASE_MS_DEFAULT,
        backoff_base_ms: int = BACKOFF_BASE_MS,
        backoff_cap_ms: int = BACKOFF_CAP_MS,
        maintenance_interval_s: float = 2.0,
        park_timeout_s: float = 1.0,
        extend_leases: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.lanes = lanes
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.backoff_base_ms = backoff_base_ms
        self.backoff_cap_ms = backoff_cap_ms
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
        maintenance = asyncio.create_task(self._maintain(), name="lanes-maintenance")
        unparker = asyncio.create_task(self._unpark_on_stop(), name="lanes-unparker")
        log.info(
            "consumer pool running",
            extra={"queue": self.lanes.queue, "concurrency": self.concurrency},
        )
        try:
            await asyncio.gather(*consumers)
        finally:
            for task in consumers:
                task.cancel()
            for helper in (maintenance, unparker):
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
        woken = False
        done: list[Job] = []  # handled, not yet acked: the next claim carries the ack
        while not self._stop.is_set():
            try:
                self.stats.claims += 1
                acked, jobs, more = await self.lanes.ack_wclaim(done, self.lease_ms)
            except Exception as exc:
                # an ack that may not have happened: the leases expire and the jobs are
                # served again, and the handler's writes are idempotent; nothing is lost
                _failed("claim", exc, consumer=n, unacked=len(done))
                done = []
                await self._sleep(1.0)
                continue
            OUTAGES.ok("redis")
            self._count_acks(done, acked)
            done = []
            if not jobs:
                woken = await self._park()
                continue
            if woken and more:
                # one wake token woke one consumer; pass it on while work remains
                with _waived("wake"):
                    await self.lanes.wake()
            woken = False
            done = await self._handle(jobs)
        if done:  # stopping: ack what is in hand, claim nothing more
            try:
                self._count_acks(done, await self.lanes.ack_many(done))
            except Exception as exc:
                _failed("ack", exc, jobs=[job.id for job in done])

    def _count_acks(self, done: list[Job], acked: int) -> None:
        self.stats.acked += acked
        self.stats.stale += len(done) - acked
        if acked < len(done):
            log.warning("stale leases at ack", extra={"stale": len(done) - acked})

    async def _park(self) -> bool:
        self.stats.parks += 1
        self._parked += 1
        try:
            if self._stop.is_set():
                return False
            return await self.lanes.park(self.park_timeout_s)
        except Exception as exc:
            _failed("park", exc)
            await self._sleep(1.0)
            return False
        finally:
            self._parked -= 1

    async def _unpark_on_stop(self) -> None:
        """Wake our parked consumers when stopping (redis-py may ignore the cancellation
        of a BLPOP that has just started, so they are woken the regular way instead)."""
        await self._stop.wait()
        if self._parked:
            with _waived("wake"):
                await self.lanes.wake(self._parked)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _handle(self, jobs: list[Job]) -> list[Job]:
        """Run the handler on a batch; the batch to ack (none when it was retried)."""
        self.stats.claimed += len(jobs)
        self.stats.batches += 1
        heartbeat = asyncio.ensure_future(self._heartbeat(jobs)) if self.extend_leases else None
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
            if heartbeat is not None:
                heartbeat.cancel()
        return jobs

    def _backoff_ms(self, job: Job) -> int:
        return backoff_ms(
            job.attempts, base_ms=self.backoff_base_ms, cap_ms=self.backoff_cap_ms, rng=self.rng
        )

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

    async def _heartbeat(self, jobs: list[Job]) -> None:
        """Extend the leases of a batch whose handler runs longer than a third of a lease."""
        period = self.lease_ms / 3000
        while True:
            await asyncio.sleep(period)
            for job in jobs:
                with _waived("extend"):
                    await self.lanes.extend(job, self.lease_ms)

    async def _maintain(self) -> None:
        """Reap + promote + one batch of retention every `maintenance_interval_s`, and
        promote alone whenever a retry this pool scheduled comes due in between. Sleeps
        otherwise: no polling."""
        loop = asyncio.get_running_loop()
        tick = loop.time()  # the first pass reaps and promotes at once
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
                tick = loop.time() + self.maintenance_interval_s
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
