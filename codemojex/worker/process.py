"""What the worker's two processes share (`codemojex worker`, `codemojex sender`): the stop
event, the Bot API client, the runtime and the ops endpoints, opened in that order and
closed in the reverse."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from prometheus_client.registry import Collector
from telegram import Bot

from codemojex.ops.server import MetricsConfig, ProcessOps
from codemojex.ops.startup import Start
from codemojex.runtime import (
    Runtime,
    RuntimeConfig,
    open_runtime,
    settle_process,
    warn_without_persistence,
)
from codemojex.values.botapi import BotApi
from codemojex.worker.botapi import make_bot


@dataclass(frozen=True, slots=True)
class Running:
    """A running process's parts: its runtime, its Bot API client, its stop event."""

    rt: Runtime
    bot: Bot
    stop: asyncio.Event


@contextlib.asynccontextmanager
async def running(
    kind: str,
    runtime: RuntimeConfig,
    metrics: MetricsConfig,
    api: BotApi,
    start: Start | None,
    collectors: Iterable[Collector],
    *,
    db_pool_size: int | None = None,
    connections: int | None = None,
) -> AsyncIterator[Running]:
    """The process's parts, serving /metrics (with `collectors`) as `metrics` says. The stop
    event is `start`'s when the process's start-up heeds SIGTERM and SIGINT already
    (ops/startup.py); else (a process run by a test or a benchmark) its own, set by them.
    The bot is not initialised (no getMe): it only posts, and a Bot API that is down at
    start-up must not keep the process from its other work; posts wait until it is back."""
    stop = start.stop if start is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    if start is None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    bot = make_bot(api) if connections is None else make_bot(api, connections=connections)
    try:
        async with open_runtime(runtime, db_pool_size=db_pool_size) as rt:
            await warn_without_persistence(rt.redis)
            ops = ProcessOps(
                kind,
                metrics,
                redis=rt.redis,
                engine=rt.engine,
                sessionmaker=rt.sessionmaker,
                lanes=rt.lanes,
                collectors=collectors,
                probes=start.probes if start is not None else None,
            )
            await ops.start()
            settle_process()
            try:
                yield Running(rt, bot, stop)
            finally:
                await ops.stop()
    finally:
        await bot.shutdown()
        if start is None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
