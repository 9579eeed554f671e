"""`codemojex worker`: the worker process on the configured Redis, database and Bot API."""

from __future__ import annotations

import asyncio
import logging
import signal

from codemojex.db.engine import DB_POOL_SIZE
from codemojex.ops.collect import WorkerCollector
from codemojex.ops.server import MetricsConfig, ProcessOps
from codemojex.runtime import RuntimeConfig, open_runtime, settle_process, warn_without_persistence
from codemojex.values.botapi import BotApi
from codemojex.worker.botapi import make_bot
from codemojex.worker.service import FLUSH_CONNECTIONS, WorkerConfig, WorkerStats, run_worker

log = logging.getLogger(__name__)


async def main(
    config: WorkerConfig, runtime: RuntimeConfig, metrics: MetricsConfig, api: BotApi
) -> WorkerStats:
    """Run until SIGTERM or SIGINT, then stop gracefully (batches in hand are finished and
    acked, the post in hand completes): on the Redis and database of `runtime`, posting
    through `api`, serving /metrics as `metrics` says."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # The bot is not initialised (no getMe): the sender only posts, and a Bot API that is
    # down at start-up must not keep the pool from scoring; posts wait until it is back.
    bot = make_bot(api)
    try:
        # The score worker's flushes keep connections of their own (service.FLUSH_CONNECTIONS):
        # the process keeps as many in all as any other.
        pool = DB_POOL_SIZE - FLUSH_CONNECTIONS
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
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
