"""One worker process of bench.pipeline, run by whichever checkout's interpreter is measured.

Run as a script (``<checkout>/.venv/bin/python bench/pipeline_worker.py ARGS``) so that
`codemojex` is imported from that interpreter's checkout: bench.pipeline measures today's
code and a baseline's side by side with the same harness. It builds what `codemojex worker`
builds from default Settings (Redis client, engine, lanes, concurrency, lease) and runs the
real ConsumerPool with the real ScoreWorker; the outbox sender is left out (no Bot API).

Protocol on stdin/stdout, one line each: it prints ``ready`` once connected, waits for
``go``, scores until ``stop``, then prints its counters as one JSON line.

With ``CODEMOJEX_BENCH_SQL_TIMES=1`` it also times, on the client's clock, every statement the
worker sends (by kind: its first words and table) and every `record_guesses` transaction (from
its first statement to its commit answered: how long the rounds' row locks are held), for the
timeouts of `codemojex/db/engine.py` (`DB_*`) (docs/benchmarks.md, "Statement times").
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any


async def _main(queue: str, database_url: str, redis_url: str, metrics: bool) -> dict[str, Any]:
    from codemojex.lanes.consumer import ConsumerPool
    from codemojex.runtime import open_runtime
    from codemojex.settings import Settings
    from codemojex.worker.score import ScoreWorker

    settings = Settings(queue=queue, database_url=database_url, redis_url=redis_url)
    loop = asyncio.get_running_loop()
    async with open_runtime(settings.runtime()) as rt:
        sql_ms = _time_sql(rt.engine) if os.environ.get("CODEMOJEX_BENCH_SQL_TIMES") else None
        worker = ScoreWorker(rt.sessionmaker)
        claim_ms: list[int] = []  # enqueue (Redis TIME) to the handler's start, per job

        async def handler(jobs: Any) -> None:
            now_ms = int(time.time() * 1000)
            claim_ms.extend(now_ms - job.enqueued_ms for job in jobs)
            await worker(jobs)

        pool = ConsumerPool(
            rt.lanes, handler, concurrency=settings.concurrency, lease_ms=settings.lease_ms
        )
        ops = None
        if metrics:  # what `codemojex worker` runs with CODEMOJEX_METRICS_PORT set
            from codemojex.ops.collect import WorkerCollector
            from codemojex.ops.server import ProcessOps
            from codemojex.worker.service import WorkerStats

            settings = Settings(
                queue=queue, database_url=database_url, redis_url=redis_url, metrics_port=_port()
            )
            stats = WorkerStats(score=worker.stats, pool=pool.stats)
            ops = ProcessOps("worker", settings.metrics(), redis=rt.redis, engine=rt.engine,
                             sessionmaker=rt.sessionmaker, lanes=rt.lanes,
                             collectors=[WorkerCollector(stats)])  # fmt: skip
            await ops.start()
        async with rt.engine.connect():  # one connection open before the clock starts
            pass
        await rt.redis.ping()
        # a start-up step of the checkout under test (gc.freeze and the like), if it has one
        try:
            from codemojex.runtime import settle_process
        except ImportError:
            pass
        else:
            settle_process()
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)  # go
        runner = asyncio.create_task(pool.run())
        scraper = None
        if ops is not None and ops.port is not None:
            scraper = asyncio.create_task(_scrape_every_second(ops.port))
        await loop.run_in_executor(None, sys.stdin.readline)  # stop
        pool.stop()
        await asyncio.wait_for(runner, 60)
        if scraper is not None:
            scraper.cancel()
        if ops is not None:
            await ops.stop()
        return {
            "score": worker.stats.as_dict(),
            "pool": pool.stats.as_dict(),
            "wait_ms": sorted(worker.stats.wait_ms),
            "claim_ms": claim_ms,
            **({"sql_ms": sql_ms} if sql_ms is not None else {}),
        }


def _time_sql(engine: Any) -> dict[str, list[float]]:
    """Statement and transaction times (ms), by kind, from now on (see the module's doc)."""
    import re

    from sqlalchemy import event

    from codemojex import usecases

    times: dict[str, list[float]] = {}
    table = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", re.I)

    def kind(statement: str) -> str:
        """Its first word, its first table, and whether it locks rows."""
        words = statement.split(None, 1)
        first = table.search(statement)
        locks = " (locks rows)" if re.search(r"\bFOR (NO KEY )?UPDATE\b", statement, re.I) else ""
        return f"{words[0].upper() if words else '?'} {first[1] if first else ''}{locks}"

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _before(conn: Any, _c: Any, _s: str, _p: Any, _x: Any, _m: bool) -> None:
        conn.info.setdefault("bench_t0", []).append(time.perf_counter())

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _after(conn: Any, _c: Any, statement: str, _p: Any, _x: Any, _m: bool) -> None:
        took = (time.perf_counter() - conn.info["bench_t0"].pop()) * 1000
        times.setdefault(kind(statement), []).append(round(took, 3))

    record = usecases.record_guesses

    async def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await record(*args, **kwargs)
        finally:
            took = (time.perf_counter() - t0) * 1000
            times.setdefault("transaction record_guesses", []).append(round(took, 3))

    usecases.record_guesses = timed  # looked up per call
    return times


async def _scrape_every_second(port: int) -> None:
    """A Prometheus 15 times as eager as its default: /metrics once a second."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
                await r.read()
            await asyncio.sleep(1.0)


def _port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    queue_, url_, redis_, metrics_ = sys.argv[1:5]
    result = asyncio.run(_main(queue_, url_, redis_, metrics_ == "1"))
    print(json.dumps(result), flush=True)
