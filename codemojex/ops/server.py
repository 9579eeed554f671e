"""The operator side of a bot or worker process: /metrics, /healthz and /readyz on
CODEMOJEX_METRICS_PORT (off without it), the fleet publisher, and the systemd watchdog.

All of it runs in the process's own event loop, so /healthz answering means the loop turns;
/readyz asks Redis and Postgres (a schema this version serves) each time, bounded by a
timeout. The server is the process's start-up probes' (ops/startup.py), up from its first
second; ProcessOps hands it the answers once the process runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex.lanes import Lanes
from codemojex.metrics import INSTRUMENTS
from codemojex.ops.collect import TOP_ROOMS, Shared, SharedCollector
from codemojex.ops.fleet import Publisher
from codemojex.ops.health import readiness
from codemojex.ops.startup import Probes
from codemojex.outages import OUTAGES
from codemojex.values.redistypes import AnyRedis

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsConfig:
    """Where this process serves /metrics, /healthz and /readyz (`port` None: nowhere), and
    how many of the deepest rooms get series of their own (`collect.TOP_ROOMS`)."""

    port: int | None
    host: str
    top_rooms: int = TOP_ROOMS
    # The bot whose learned pace the metrics show (posting/keys.py bot_id of its token).
    bot: int = 0


class ProcessOps:
    """Start with `await start()` once the process's clients exist, `await stop()` last."""

    def __init__(
        self,
        kind: str,
        config: MetricsConfig,
        *,
        redis: AnyRedis,
        engine: AsyncEngine,
        sessionmaker: async_sessionmaker[AsyncSession],
        lanes: Lanes,
        collectors: Iterable[Collector],
        problems: Callable[[], dict[str, str]] | None = None,
        probes: Probes | None = None,
    ) -> None:
        self.config = config
        self._problems = problems  # the process's own reasons not to be ready
        self.redis = redis
        self.engine = engine
        self.registry = CollectorRegistry(auto_describe=True)
        self.shared = Shared(lanes, sessionmaker, config.top_rooms, redis=redis, bot=config.bot)
        for collector in (*INSTRUMENTS, SharedCollector(self.shared), *collectors):
            self.registry.register(collector)
        # What /readyz would answer, taken at each scrape: an alert on readiness itself.
        self.ready = Gauge(
            "codemojex_ready",
            "1 when this process is ready (its /readyz answers 200), else 0.",
            registry=self.registry,
        )
        self.publisher = Publisher(redis, lanes.queue, kind, self.registry)
        self.port: int | None = None  # the port /metrics is served on, once started
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # The start-up's probes, or (a process started without them: tests, benches) its own.
        self._own = probes is None
        self._probes = probes or Probes(config.host, config.port)

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self.publisher.run(self._stop), name="ops:fleet"))
        if self._own:
            await self._probes.start()
        self._probes.serve(self._ready, self._metrics)
        self.port = self._probes.port
        watchdog = _watchdog_interval_s()
        if watchdog is not None:
            self._tasks.append(asyncio.create_task(self._watchdog(watchdog), name="ops:watchdog"))
        sd_notify("READY=1")

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await self.publisher.withdraw()
        except Exception as exc:  # its entry expires by itself; the fleet view drops it then
            OUTAGES.swallow(exc, "the ops publisher", "this process not withdrawn from the fleet")
        if self._own:
            await self._probes.close()

    async def _metrics(self) -> tuple[bytes, str]:
        problems, _ = await self._ready()
        self.ready.set(0 if problems else 1)
        await self.shared.refresh()
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    async def _ready(self) -> tuple[dict[str, str], dict[str, str]]:
        problems, warnings = await readiness(self.redis, self.engine)
        if self._problems is not None:
            problems.update(self._problems())
        return problems, warnings

    async def _watchdog(self, every_s: float) -> None:
        # Pinged from the event loop: a loop that hangs stops the pings and systemd restarts
        # the process.
        while True:
            sd_notify("WATCHDOG=1")
            await asyncio.sleep(every_s)


def _watchdog_interval_s() -> float | None:
    """Half of systemd's WatchdogSec (WATCHDOG_USEC), when systemd watches this process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000


def sd_notify(state: str) -> None:
    """Tell systemd (Type=notify) `state`; nothing when not run by systemd."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return
    address = "\0" + path[1:] if path.startswith("@") else path
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(state.encode(), address)
