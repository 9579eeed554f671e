"""Is this failure an outage, and how long to wait before trying again: decided here, once.

An outage is a failure that goes away by itself: Redis, Postgres or Telegram down, restarting,
unreachable, too slow, failing over, or a transaction that lost a race. Every component asks
`outage_of`: the bot answers "try again", the worker hands a batch back, the sender and the
consumer loop wait. Anything else is a bug and is reported with its traceback. A bare
OSError or TimeoutError is judged by where it came from (`_origin`): out of asyncpg,
SQLAlchemy, redis-py or the Bot API client it is their component's outage; out of a file or
a socket of our own it is a bug, not something to retry for ever.

What an operator reads of an outage is `OUTAGES` (an `OutageLog`): one line when it starts,
one when it ends (how long, how many attempts failed), and `codemojex_outages_total` between.

One way to retry: `retrying(component, policy)` wraps a call that is retried through an
outage with one of the named policies of `limits.RETRIES`, and gives up at once on anything
else; `pause_s(policy, n)` is the one backoff formula, for a loop that waits by itself and a
job's delay in its lane alike. A failure a caller goes on without (best effort: a marker not
cleared, rows not handed back early) goes through `OUTAGES.swallow`: a log line and
`codemojex_swallowed_total`, never a bare `except: pass`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from types import TracebackType
from typing import Any, Final, Literal, ParamSpec, TypeVar

import httpx
import redis.exceptions as redis_errors
from sqlalchemy import exc as sa_exc
from telegram.error import BadRequest, NetworkError, RetryAfter

from codemojex.limits import RETRIES, RetryPolicy

Component = Literal["redis", "postgres", "telegram"]
P = ParamSpec("P")
T = TypeVar("T")


class OutageLasted(Exception):
    """`retrying` gave up on an outage (its policy's time ran out, or its caller stopped): the
    last failure is the cause. Still an outage to `outage_of`, of the same component."""

    def __init__(self, component: Component, policy: RetryPolicy, cause: BaseException) -> None:
        super().__init__(f"{component} unavailable ({policy.name}): {type(cause).__name__}")
        self.component = component
        self.policy = policy


_REDIS: Final = (
    redis_errors.ConnectionError,  # includes BusyLoadingError (Redis restarting)
    redis_errors.TimeoutError,
    redis_errors.OutOfMemoryError,  # maxmemory with noeviction: nothing was written
    redis_errors.ReadOnlyError,  # a failover in progress
    redis_errors.TryAgainError,
    # A Redis Cluster that cannot serve a slot now: a failover (ClusterDownError), the slot
    # migrating (TRYAGAIN until redis-py gives up), no master for it.
    redis_errors.ClusterError,
    redis_errors.SlotNotCoveredError,
    redis_errors.RedisClusterException,
)

# Postgres answered, cutting a statement that waited or ran too long, or lost a race: an
# outage only while the database is down by its health probe (`answered`, `OutageLog.down`).
_PG_ANSWERED: Final = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available (our lock_timeout: a row lock held too long)
        "57014",  # query_canceled (our statement_timeout, or an operator's cancel)
    }
)
_PG_SQLSTATES: Final = _PG_ANSWERED | frozenset(
    {
        "25P03",  # idle_in_transaction_session_timeout (the session was ended)
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (starting up)
        "53300",  # too_many_connections
    }
)
# asyncpg's own connection errors, which arrive wrapped in the adapter's exceptions.
_PG_CONNECTION_ERRORS: Final = frozenset(
    {
        "ConnectionDoesNotExistError",
        "CannotConnectNowError",
        "InterfaceError",
        "ConnectionFailureError",
        "TooManyConnectionsError",
    }
)
_NETWORK: Final = (OSError, TimeoutError, ConnectionError)
# Whose socket a bare OSError or TimeoutError came from: the top-level package of the code
# that was talking to it.
_CLIENTS: Final[dict[str, Component]] = {
    "asyncpg": "postgres",
    "sqlalchemy": "postgres",
    "aiosqlite": "postgres",  # the embedded demo's database
    "redis": "redis",
    "httpx": "telegram",
    "httpcore": "telegram",
    "telegram": "telegram",
}
# Libraries the clients above do their I/O through: looked past, like the standard library.
_PLUMBING: Final = frozenset({"anyio", "sniffio", "greenlet", "h11", "h2", "hiredis", "certifi"})
_CHAIN_MAX: Final = 8


def _database_outage(exc: sa_exc.DBAPIError) -> bool:
    if exc.connection_invalidated:
        return True
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
        return True
    orig = exc.orig
    if (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) in _PG_SQLSTATES:
        return True
    cause: BaseException | None = orig
    while cause is not None:
        if isinstance(cause, _NETWORK) or type(cause).__name__ in _PG_CONNECTION_ERRORS:
            return True
        cause = cause.__cause__
    return False


def outage_of(exc: BaseException) -> Component | None:
    """Which component is out, when `exc` is an outage; None when it is a bug (or a refusal
    that will not go away, such as Telegram's BadRequest)."""
    if isinstance(exc, OutageLasted):
        return exc.component
    if isinstance(exc, _REDIS):
        return "redis"
    if isinstance(exc, sa_exc.DBAPIError):
        return "postgres" if _database_outage(exc) else None
    if isinstance(exc, sa_exc.TimeoutError | sa_exc.DisconnectionError):
        return "postgres"  # the engine's pool timed out, or a connection was lost
    if isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):
        return "telegram"  # includes TimedOut
    if isinstance(exc, httpx.TransportError):
        return "telegram"
    if isinstance(exc, _NETWORK):
        # A bare socket error or timeout (asyncpg raises OSError itself when Postgres refuses
        # the connection): an outage of the component whose client it came out of; one of a
        # file or socket of our own is a bug, reported, not retried for ever.
        return _origin(exc)
    return None


def _origin(exc: BaseException) -> Component | None:
    """The component whose client raised `exc`, from where it was raised: the innermost
    frame of its traceback that is neither the standard library nor a client's plumbing.
    A frame of ours (or of anything else) there means it is ours. An exception raised
    `from` another is judged by its cause first: asyncio's TimeoutError is raised in our
    frame, from the CancelledError that stopped the await it timed out, inside the client."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and len(chain) < _CHAIN_MAX:
        chain.append(link)
        link = link.__cause__
    for link in reversed(chain):  # the first cause first
        verdict = _frames_origin(link.__traceback__)
        if verdict is not None:
            return verdict or None
    return None


def _frames_origin(tb: TracebackType | None) -> Component | Literal[""] | None:
    """A component, "" (code of ours or unknown: not an outage), or None (only the standard
    library and plumbing: the frames do not say)."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):  # innermost first
        package = str(frame.f_globals.get("__name__", "")).split(".", 1)[0]
        if package in _CLIENTS:
            return _CLIENTS[package]
        if package in sys.stdlib_module_names or package in _PLUMBING or not package:
            continue
        return ""
    return None


def is_outage(exc: BaseException) -> bool:
    return outage_of(exc) is not None


def answered(exc: BaseException) -> bool:
    """An outage by `outage_of` in which the component did answer: Postgres cut a statement
    at its statement or lock timeout, or ended a transaction that lost a race. Whether the
    component is down then is its health probe's to say (`OutageLog.down`): a statement that
    always times out on a database that answers is no outage, and is not retried for ever."""
    while isinstance(exc, OutageLasted) and exc.__cause__ is not None:
        exc = exc.__cause__
    if not isinstance(exc, sa_exc.DBAPIError) or exc.connection_invalidated:
        return False
    orig = exc.orig
    return (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) in _PG_ANSWERED


def pause_s(policy: RetryPolicy, attempts: int, rng: random.Random | None = None) -> float:
    """The pause after `attempts` failures in a row under `policy`: min(cap, base *
    2^(attempts-1)); with the policy's jitter, uniform in [0, that] (full jitter: many waiters
    that failed together do not come back together); at least the policy's floor."""
    ceiling: float = min(policy.cap_s, policy.base_s * 2.0 ** max(0, attempts - 1))
    if policy.jitter:
        ceiling = (rng or random).uniform(0, ceiling)
    return max(policy.floor_s, ceiling)


def retrying(
    component: Component,
    policy: RetryPolicy,
    *,
    where: str,
    stop: asyncio.Event | None = None,
    on_failure: Callable[[BaseException], object] | None = None,
) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Wrap an async call so that an outage is waited out: the call is made again after
    `pause_s(policy, n)` until it succeeds, `policy.give_up_s` has passed, or `stop` is set
    (then `OutageLasted`, from the last failure). Anything that is not an outage is raised at
    once, untouched. Every failure is booked in `OUTAGES` (one line when an outage starts,
    one when a success ends it) and counted in `OUTAGES.retried[policy.name]`
    (codemojex_retries_total); `on_failure(exc)` lets the caller count it too.

        verdicts = await retrying("postgres", RETRIES.record, where="the score worker")(
            self._record)(batch)
    """

    def wrap(call: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @wraps(call)
        async def retried(*args: P.args, **kwargs: P.kwargs) -> T:
            started = time.monotonic()
            attempts = 0
            while True:
                try:
                    result = await call(*args, **kwargs)
                except Exception as exc:
                    if OUTAGES.failed(exc, where) is None:
                        raise
                    attempts += 1
                    OUTAGES.retried[policy.name] += 1
                    if on_failure is not None:
                        on_failure(exc)
                    pause = pause_s(policy, attempts)
                    late = policy.give_up_s is not None and (
                        time.monotonic() + pause - started > policy.give_up_s
                    )
                    if late or (stop is not None and stop.is_set()):
                        log.debug("%s: giving up after %d attempts (%s)", where, attempts, policy)
                        raise OutageLasted(component, policy, exc) from exc
                    log.debug("%s: %s; again in %.2f s", where, _name(exc), pause)
                    if await _stopped_within(stop, pause):
                        raise OutageLasted(component, policy, exc) from exc
                    continue
                OUTAGES.ok(component)
                return result

        return retried

    return wrap


async def _stopped_within(stop: asyncio.Event | None, seconds: float) -> bool:
    """Sleep `seconds`, or less when `stop` is set meanwhile (then True)."""
    if stop is None:
        await asyncio.sleep(seconds)
        return False
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


def retry_after_ms(exc: RetryAfter) -> int:
    """Telegram's RetryAfter as milliseconds (at least 1)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PTB 22 announces a timedelta; both are handled
        value = exc.retry_after
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return max(1, int(seconds * 1000))


# --- what an operator reads of an outage --------------------------------------------------

log = logging.getLogger("codemojex.outages")

# `OutageLog.down`: a health probe not answering within PROBE_S says its component is down;
# its verdict stands for VERDICT_S for every caller.
PROBE_S: Final = 5.0
VERDICT_S: Final = 1.0


@dataclass
class _Episode:
    since: float  # time.monotonic() of the first failure
    attempts: int  # failures seen while it lasts (every consumer's, every retry's)


class OutageLog:
    """The outages of one process, by component. The first failure of an outage logs one
    warning; the failures after it are only counted; the first success after it (`ok`, or
    the probe given with the failure) logs one line saying how long it lasted and how many
    attempts failed. 608 consumers' retries in 20 s are two lines this way, not 608."""

    def __init__(self) -> None:
        self._open: dict[Component, _Episode] = {}
        self._ended: dict[Component, float] = {}  # time.monotonic() the last one ended
        self.started: Counter[Component] = Counter()  # codemojex_outages_total
        self.retried: Counter[str] = Counter()  # codemojex_retries_total, by policy
        self.swallowed: Counter[str] = Counter()  # codemojex_swallowed_total, by where
        self._probes: set[asyncio.Task[None]] = set()
        # The health probes' last verdicts (`down`): component -> (time.monotonic(), down)
        self._verdicts: dict[Component, tuple[float, bool]] = {}
        self._asking: dict[Component, asyncio.Future[bool]] = {}

    def reset(self) -> None:
        """Forget every outage (tests: each starts with none open)."""
        self._open.clear()
        self._ended.clear()
        self._probes.clear()
        self._verdicts.clear()
        self.retried.clear()
        self.swallowed.clear()

    def is_open(self, component: Component) -> bool:
        return component in self._open

    def since_back_s(self, component: Component) -> float | None:
        """Seconds since the last outage of `component` ended (None: none has, in this process)."""
        ended = self._ended.get(component)
        return None if ended is None else time.monotonic() - ended

    def failed(
        self,
        exc: BaseException,
        where: str,
        probe: Callable[[], Awaitable[object]] | None = None,
    ) -> Component | None:
        """Book a failure: its component when it is an outage (None for a bug, which the
        caller reports). A caller that cannot tell when the component is back (the bot: its
        next update may not touch it) gives a `probe`, retried with the backoff until it
        succeeds, which ends the outage."""
        component = outage_of(exc)
        if component is None:
            return None
        episode = self._open.get(component)
        if episode is not None:
            episode.attempts += 1
            return component
        self._open[component] = _Episode(time.monotonic(), 1)
        self.started[component] += 1
        log.warning("%s unavailable (%s, in %s); waiting for it", component, _name(exc), where)
        if probe is not None:
            task = asyncio.get_running_loop().create_task(self._probe(component, probe))
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)
        return component

    async def down(self, component: Component, probe: Callable[[], Awaitable[object]]) -> bool:
        """Whether `component` is down now, as its health probe says: the probe failing with
        an outage of it, or not answering within `PROBE_S`. One probe at a time per
        component, whose verdict every caller within `VERDICT_S` shares (a thousand updates
        waiting for Postgres ask it once a second, not a thousand times). An outage
        classified so by `outage_of` (a statement timeout, a lock timeout) with the
        component answering its probe is no outage: the caller's budget ends it."""
        verdict = self._verdicts.get(component)
        if verdict is not None and time.monotonic() - verdict[0] < VERDICT_S:
            return verdict[1]
        asking = self._asking.get(component)
        if asking is None:
            asking = asyncio.get_running_loop().create_future()
            self._asking[component] = asking
            try:
                is_down = await self._probe_once(component, probe)
            except BaseException:
                asking.cancel()  # the caller was cancelled: those waiting with it ask anew
                raise
            finally:
                del self._asking[component]
            self._verdicts[component] = (time.monotonic(), is_down)
            asking.set_result(is_down)
            return is_down
        try:
            return await asyncio.shield(asking)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if asking.cancelled() and task is not None and not task.cancelling():
                return await self.down(component, probe)  # its prober was cancelled, not us
            raise

    async def _probe_once(
        self, component: Component, probe: Callable[[], Awaitable[object]]
    ) -> bool:
        try:
            async with asyncio.timeout(PROBE_S):
                await probe()
        except TimeoutError:
            return True
        except Exception as exc:
            if outage_of(exc) == component:
                return True
            log.error("probing %s failed", component, exc_info=exc)
            return False
        self.ok(component)
        return False

    def swallow(self, exc: BaseException, where: str, what: str) -> None:
        """A failure its caller goes on without (best effort: `what` is left undone): counted
        in `swallowed[where]` and logged, a bug with its traceback; an outage is booked too
        (one line when it starts)."""
        self.swallowed[where] += 1
        if self.failed(exc, where) is None:
            log.error("%s: %s, going on without it", where, what, exc_info=exc)
        else:
            log.warning("%s: %s (%s), going on without it", where, what, _name(exc))

    def ok(self, *components: Component) -> None:
        """These components just answered: an outage of theirs is over. Costs a dict lookup
        when none is open (the consumer loop calls it after every claim)."""
        if self._verdicts:  # a probe's "down" no longer stands
            for component in components:
                self._verdicts.pop(component, None)
        if not self._open:
            return
        for component in components:
            episode = self._open.pop(component, None)
            if episode is not None:
                self._ended[component] = time.monotonic()
                log.warning(
                    "%s back after %.1f s (%d failed attempts)",
                    component,
                    time.monotonic() - episode.since,
                    episode.attempts,
                )

    async def _probe(self, component: Component, probe: Callable[[], Awaitable[object]]) -> None:
        """Probe until `component` answers (RETRIES.loop); the success ends the outage."""

        async def once() -> None:
            if self.is_open(component):  # nothing to probe once another caller saw it back
                await probe()

        await asyncio.sleep(pause_s(RETRIES.loop, 1))
        try:
            await retrying(component, RETRIES.loop, where=f"probing {component}")(once)()
        except Exception as exc:
            log.error("probing %s failed", component, exc_info=exc)


def _name(exc: BaseException) -> str:
    """The exception's type, and its cause's (asyncpg's OSError under SQLAlchemy's)."""
    cause = exc.__cause__
    return type(exc).__name__ + (f" <- {type(cause).__name__}" if cause is not None else "")


# The process's outages: every component books its failures here.
OUTAGES: Final = OutageLog()
