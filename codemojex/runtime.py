"""Builds the shared parts a process needs (Redis client, database, lanes) from its
`RuntimeConfig`, which the composition root (cli.py, the demo) unpacks from the settings.

Nothing here runs at import time; each `open_*` is called by the CLI or the demo.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.typing import EncodableT
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex.db import make_engine, make_sessionmaker
from codemojex.db.engine import DB_POOL_OVERFLOW, DB_POOL_SIZE
from codemojex.lanes import Lanes
from codemojex.lanes.consumer import CONCURRENCY
from codemojex.lanes.facade import DEAD_AGE_MS, DEAD_MAX, DEDUPE_WINDOW_S, IDLE_MS
from codemojex.outages import OUTAGES
from codemojex.values.redistypes import AnyRedis

log = logging.getLogger(__name__)
# A health probe's answer (Redis's persistence at start-up, /readyz's dependencies) is
# waited for this long, then the dependency counts as down.
PROBE_TIMEOUT_S: Final = 2.0

# Redis connections a process may use, at least the minimum: per consumer (its claim round,
# its waiter's BLPOP) plus a spare for the sender, which speaks for every chat, and the bot.
REDIS_POOL_MIN: Final = 64
REDIS_POOL_PER_CONSUMER: Final = 4
REDIS_POOL_SPARE: Final = 16
# A command waits this long for a free connection, then fails as an outage.
REDIS_POOL_WAIT_S: Final = 10.0
# A Redis that stops answering fails a call (an outage), never hangs it (an idle BLPOP stays
# under it: lanes/facade.py `park`; `codemojex lanes` the admin one); keepalive (idle,
# interval, count); a connection idle 15 s is PINGed before use.
REDIS_SOCKET_TIMEOUT_S: Final = 5.0
REDIS_ADMIN_TIMEOUT_S: Final = 300.0
REDIS_CONNECT_TIMEOUT_S: Final = 3.0
REDIS_KEEPALIVE: Final = (10, 5, 3)
REDIS_HEALTH_CHECK_S: Final = 15

# Said once at start-up by the bot and the worker when Redis keeps no append-only file.
NO_AOF = (
    "Redis keeps no append-only file (appendonly no): a Redis restart loses every guess the "
    "bot has confirmed to Telegram and no worker has scored yet, and Telegram will not send "
    "them again. Set appendonly yes (docs/operations.md: Redis persistence)"
)


def settle_process() -> None:
    """Once started: what start-up allocated (modules, the ORM's mappers, the statement
    cache, the translations) is moved out of the cyclic collector's reach, so that its
    collections walk only what the work allocates, not the whole program each time (the
    bot allocates a few hundred objects per update; the worker per guess)."""
    gc.collect()
    gc.freeze()


async def stop_tasks(
    tasks: Iterable[asyncio.Task[Any]], *, again_s: float = 1.0, tries: int = 10
) -> None:
    """Cancel the tasks and wait until every one has ended. A task still running `again_s`
    after its cancellation swallowed it (a library that catches the cancellation arriving as
    its own wait completes: Python 3.11's `wait_for` does), and would keep the process from
    ever stopping: it is cancelled again, and said so. After `tries` cancellations a task that
    still runs is left behind (an error line names it): stopping goes on without it."""
    pending = {task for task in tasks if not task.done()}
    for _ in range(tries):
        if not pending:
            break
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=again_s)
        for task in pending:
            log.warning("task %s went on after its cancellation; cancelled again", task.get_name())
    for task in pending:
        log.error("task %s would not stop; left behind", task.get_name())
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: what it raised on its way out is its own business


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """What a process's shared parts are built from: its database, its Redis (no URL: the
    in-process stand-in, demo only; `redis_cluster`: the URL names one node of a Redis
    Cluster), the queue it serves, its consumers per process (the Redis pool's size follows
    them, `pool_size`) and the lanes' retention and dedupe window (`Lanes`)."""

    database_url: str
    queue: str
    redis_url: str | None = None
    redis_cluster: bool = False
    concurrency: int = CONCURRENCY
    lanes_dead_max: int = DEAD_MAX
    lanes_dead_age_ms: int = DEAD_AGE_MS
    lanes_idle_ms: int = IDLE_MS
    dedupe_window_s: int = DEDUPE_WINDOW_S
    db_pool_size: int = DB_POOL_SIZE
    db_pool_overflow: int = DB_POOL_OVERFLOW


def pool_size(concurrency: int) -> int:
    """Connections a process of `concurrency` consumers may use at once (per node on a
    cluster; REDIS_POOL_*)."""
    return max(REDIS_POOL_MIN, REDIS_POOL_PER_CONSUMER * concurrency + REDIS_POOL_SPARE)


class GatedRedisCluster(RedisCluster):
    """A `RedisCluster` whose commands wait for a free slot instead of failing.

    redis-py's cluster client keeps a pool per node that raises `MaxConnectionsError`
    when it is exhausted; it has no blocking pool. The single-node client waits instead
    (`BlockingConnectionPool`, see `redis_client`), because the sender speaks for every
    chat at once and the surplus must queue, not fail. This gate gives the cluster
    client the same behaviour: at most `max_in_flight` commands of this client run at
    once (a parked consumer's BLPOP holds one, as it holds a connection); the others
    wait up to `wait_s`, then raise `ConnectionError` as the blocking pool does. Each
    node's pool may open twice as many connections as the gate admits (opened lazily):
    pipelines take their connections outside the gate, and the margin is for them."""

    def __init__(
        self,
        *args: Any,
        max_in_flight: int,
        wait_s: float = REDIS_POOL_WAIT_S,
        **kw: Any,
    ) -> None:
        kw.setdefault("max_connections", 2 * max_in_flight)
        super().__init__(*args, **kw)
        self._gate = asyncio.Semaphore(max_in_flight)
        self._gate_wait_s = wait_s

    async def execute_command(self, *args: EncodableT, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(self._gate_wait_s):
                await self._gate.acquire()
        except TimeoutError:
            raise RedisConnectionError("No connection available.") from None
        try:
            if self._initialize:
                # Learn the slot map first. redis-py (8.1) picks a command's route before it
                # initializes, and with no map yet it routes a keyed command like a keyless
                # one: to an arbitrary node. Many first commands at once (a worker starting
                # up) then earn a MOVED each, and every fifth MOVED makes the client rebuild
                # its nodes, closing connections other commands are using.
                await self.initialize()
            return await super().execute_command(*args, **kwargs)
        except AttributeError as exc:
            # redis-py (8.1) rebuilding its nodes (a slot moved) closes connections other
            # commands are opening; the one caught mid-handshake fails on its closed writer.
            # That is a connection lost, an outage the caller waits out, not a bug of ours.
            if _raised_in_redis_connection(exc):
                raise RedisConnectionError("connection closed while it was opened") from exc
            raise
        finally:
            self._gate.release()


def _raised_in_redis_connection(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_globals.get("__name__") == "redis.asyncio.connection"


def redis_timeouts(*, admin: bool = False) -> dict[str, Any]:
    """What every Redis connection of ours is built with (the `REDIS_*` constants): a socket and a
    connect timeout, TCP keepalive and a health check, so that a Redis that stops answering,
    or a connection that died without a word, costs seconds: an outage the caller waits out
    (outages.py), never a call that hangs. `admin`: the whole-queue scripts' longer read
    timeout (`codemojex lanes ...`). An option in the URL's query wins (redis-py's from_url)."""
    keepalive: dict[int, int] = {}
    for name, value in zip(
        ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"), REDIS_KEEPALIVE, strict=True
    ):
        option = getattr(socket, name, None)  # Linux's names; elsewhere the system's defaults
        if option is not None:
            keepalive[option] = value
    return {
        "socket_timeout": (REDIS_ADMIN_TIMEOUT_S if admin else REDIS_SOCKET_TIMEOUT_S),
        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_S,
        "socket_keepalive": True,
        "socket_keepalive_options": keepalive,
        "health_check_interval": REDIS_HEALTH_CHECK_S,
    }


def redis_client(
    config: RuntimeConfig, fake_server: Any | None = None, *, admin: bool = False
) -> AnyRedis:
    """The real Redis (a Redis Cluster with CODEMOJEX_REDIS_CLUSTER=true) when a URL is
    configured, else an in-process stand-in (one process only; `fake_server`, a
    `fakeredis.FakeServer`, lets several clients of the process, in several threads, share
    one). Every connection has the timeouts of `redis_timeouts` (`admin`: the operators'
    whole-queue scripts)."""
    timeouts = redis_timeouts(admin=admin)
    if config.redis_url and config.redis_cluster:
        # The URL names any node; the client discovers the others and routes each command
        # (and each script, by its first key) to the node owning its slot.
        return GatedRedisCluster.from_url(
            config.redis_url, max_in_flight=pool_size(config.concurrency), **timeouts
        )
    if config.redis_url:
        # Blocking: the sender drains every chat with rows waiting at once, and a pool
        # that raises "Too many connections" when they all speak together fails claims, acks
        # and the sender's posted-markers (the soak with 200 rooms saw over a thousand);
        # the surplus now waits for a free connection instead.
        pool = aioredis.BlockingConnectionPool.from_url(
            config.redis_url,
            max_connections=pool_size(config.concurrency),
            timeout=REDIS_POOL_WAIT_S,
            **timeouts,
        )
        return aioredis.Redis.from_pool(pool)
    import fakeredis

    client: aioredis.Redis = (
        fakeredis.FakeAsyncRedis()
        if fake_server is None
        else fakeredis.FakeAsyncRedis(server=fake_server)
    )
    return client


async def warn_without_persistence(redis: AnyRedis) -> None:
    """One WARNING (`NO_AOF`) when the Redis, or a master of the cluster, has AOF off. Never
    refuses to start: the demo and the tests run on a Redis that keeps nothing."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            if isinstance(redis, RedisCluster):
                answers = await redis.info("persistence", target_nodes=RedisCluster.PRIMARIES)
                found = [dict(node).get("aof_enabled") for node in answers.values()]
            else:
                found = [(await redis.info("persistence")).get("aof_enabled")]
    except ResponseError as exc:  # INFO refused (an ACL, a managed Redis): say what to check
        log.info("cannot read Redis's persistence (%s): make sure appendonly is yes", exc)
        return
    except Exception as exc:
        OUTAGES.swallow(exc, "start-up", "the check that Redis keeps an append-only file")
        return
    if any(str(aof) != "1" for aof in found):
        log.warning(NO_AOF)


def make_lanes(redis: AnyRedis, config: RuntimeConfig) -> Lanes:
    """The queue of this deployment, with its retention settings."""
    return Lanes(
        redis,
        queue=config.queue,
        dead_max=config.lanes_dead_max,
        dead_age_ms=config.lanes_dead_age_ms,
        lane_idle_ms=config.lanes_idle_ms,
        dedupe_window_ms=config.dedupe_window_s * 1000,
    )


@dataclass
class Runtime:
    config: RuntimeConfig
    redis: AnyRedis
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    lanes: Lanes


@asynccontextmanager
async def open_runtime(
    config: RuntimeConfig, fake_server: Any | None = None, *, db_pool_size: int | None = None
) -> AsyncIterator[Runtime]:
    """The process's Redis, database engine (`db_pool_size` connections kept, by default
    CODEMOJEX_DB_POOL_SIZE, and CODEMOJEX_DB_POOL_OVERFLOW more for a burst: the config's)
    and lanes, closed when the block ends."""
    redis = redis_client(config, fake_server)
    engine = make_engine(
        config.database_url,
        pool_size=config.db_pool_size if db_pool_size is None else db_pool_size,
        pool_overflow=config.db_pool_overflow,
    )
    try:
        yield Runtime(
            config=config,
            redis=redis,
            engine=engine,
            sessionmaker=make_sessionmaker(engine),
            lanes=make_lanes(redis, config),
        )
    finally:
        await engine.dispose()
        await redis.aclose()
