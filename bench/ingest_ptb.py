"""python-telegram-bot alone, the ceiling bench.ingest measures the bot against.

Run as a script by a checkout's interpreter: an Application polling the benchmark's feed with
`concurrent_updates(N)` (PTB's own processor), whose one handler does nothing (`noop`) or makes
one Redis script call per update (`redis`). When it has handled `expect` updates it prints one
JSON line, {"done_ms": wall clock of the last one, "cpu_s": its CPU time}, and exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any


async def _main(
    base_url: str, token: str, mode: str, redis_url: str, expect: int, concurrency: int
) -> dict[str, Any]:
    import redis.asyncio as aioredis
    from telegram import Update
    from telegram.ext import ApplicationBuilder, ContextTypes, TypeHandler

    redis = aioredis.Redis.from_url(redis_url)
    script = redis.register_script("return redis.call('INCR', KEYS[1])")
    key = f"bench:{{ptb{os.getpid()}}}:n"
    handled = 0
    done = asyncio.Event()
    done_ms = 0

    async def handle(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        nonlocal handled, done_ms
        if mode == "redis":
            await script(keys=[key])
        handled += 1
        if handled == expect:
            done_ms = int(time.time() * 1000)
            done.set()

    app = (
        ApplicationBuilder()
        .token(token)
        .base_url(base_url)
        .concurrent_updates(concurrency)
        .job_queue(None)
        .build()
    )
    app.add_handler(TypeHandler(Update, handle))
    async with app:
        assert app.updater is not None
        await app.updater.start_polling(timeout=10, poll_interval=0.0)
        await app.start()
        await done.wait()
        await app.updater.stop()
        await app.stop()
    await redis.delete(key)
    await redis.aclose()
    times = os.times()
    return {"done_ms": done_ms, "cpu_s": times.user + times.system}


if __name__ == "__main__":
    url_, token_, mode_, redis_, expect_, concurrency_ = sys.argv[1:7]
    out = asyncio.run(_main(url_, token_, mode_, redis_, int(expect_), int(concurrency_)))
    print(json.dumps(out), flush=True)
