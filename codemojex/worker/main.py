"""`codemojex worker`: the worker process on the configured Redis, database and Bot API."""

from __future__ import annotations

import asyncio
import logging
import signal

from codemojex.ops.collect import WorkerCollector
from codemojex.ops.server import MetricsConfig, ProcessOps
from codemojex.ops.startup import Start
from codemojex.runtime import RuntimeConfig, open_runtime, settle_process, warn_without_persistence
from codemojex.values.botapi import BotApi
from codemojex.worker.botapi import make_bot
from codemojex.worker.service import FLUSH_CONNECTIONS, WorkerConfig, WorkerStats, run_worker

log = logging.getLogger(__name__)


async def main(
    config: WorkerConfig,
    runtime: RuntimeConfig,
    metrics: MetricsConfig,
    api: BotApi,
    start: Start | None = None,
) -> WorkerStats:
    """Run until SIGTERM or SIGINT (`start`'s stop, when the process's start-up heeds them
    already: ops/startup.py), then stop gracefully (batches in hand are finished and acked,
    the post in hand completes): on the Redis and database of `runtime`, posting through
    `api`, serving /metrics as `metrics` says."""
    stop = start.stop if start is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    if start is None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    # The bot is not initialised (no getMe): the sender only posts, and a Bot API that is
    # down at start-up must not keep the pool from scoring; posts wait until it is back.
    bot = make_bot(api)
    try:
        # The score worker's flushes keep connections of their own (service.FLUSH_CONNECTIONS):
        # the process keeps as many in all as any other (one at least for its consumers).
        pool = max(1, runtime.db_pool_size - FLUSH_CONNECTIONS)
        async with open_runtime(runtime, db_pool_size=pool) as rt:
            await warn_without_persistence(rt.redis)
            log.info(
                "worker up: queue %s, concurrency %d, lease %d ms",
                config.queue,
                config.concurrency,
                config.lease_ms,
            )
            stats = WorkerStats()
            ops = ProcessOps(
                "worker",
                metrics,
                redis=rt.redis,
                engine=rt.engine,
                sessionmaker=rt.sessionmaker,
                lanes=rt.lanes,
                collectors=[WorkerCollector(stats)],
                probes=start.probes if start is not None else None,
            )
            await ops.start()
            settle_process()
            try:
                await run_worker(
                    config,
                    lanes=rt.lanes,
                    sessionmaker=rt.sessionmaker,
                    bot=bot,
                    redis=rt.redis,
                    stop_event=stop,
                    stats=stats,
                )
            finally:
                await ops.stop()
            log.info("worker stopped: %s", stats.as_dict())
            return stats
    finally:
        await bot.shutdown()
        if start is None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
