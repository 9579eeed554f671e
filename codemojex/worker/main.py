"""`codemojex worker`: the worker process on the configured Redis, database and Bot API."""

from __future__ import annotations

import logging

from codemojex.ops.collect import WorkerCollector
from codemojex.ops.server import MetricsConfig
from codemojex.ops.startup import Start
from codemojex.runtime import RuntimeConfig
from codemojex.values.botapi import BotApi
from codemojex.worker.process import running
from codemojex.worker.service import FLUSH_CONNECTIONS, WorkerConfig, WorkerStats, run_worker

log = logging.getLogger(__name__)


async def main(
    config: WorkerConfig,
    runtime: RuntimeConfig,
    metrics: MetricsConfig,
    api: BotApi,
    start: Start | None = None,
) -> WorkerStats:
    """Run until SIGTERM or SIGINT (worker/process.py says whose stop), then stop gracefully
    (batches in hand are finished and acked, the post in hand completes): on the Redis and
    database of `runtime`, posting through `api`, serving /metrics as `metrics` says."""
    stats = WorkerStats()
    # The score worker's flushes keep connections of their own (service.FLUSH_CONNECTIONS):
    # the process keeps as many in all as any other (one at least for its consumers).
    pool = max(1, runtime.db_pool_size - FLUSH_CONNECTIONS)
    collectors = [WorkerCollector(stats)]
    async with running("worker", runtime, metrics, api, start, collectors, db_pool_size=pool) as p:
        log.info(
            "worker up: queue %s, concurrency %d, lease %d ms",
            config.queue,
            config.concurrency,
            config.lease_ms,
        )
        await run_worker(
            config,
            lanes=p.rt.lanes,
            sessionmaker=p.rt.sessionmaker,
            bot=p.bot,
            redis=p.rt.redis,
            stop_event=p.stop,
            stats=stats,
        )
    log.info("worker stopped: %s", stats.as_dict())
    return stats
