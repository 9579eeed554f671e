"""`codemojex sender`: the outbox sender as a process of its own, on the configured Redis,
database and Bot API, scaled like the worker.

The worker runs a sender beside its score pool (worker/service.py); a deployment that posts
more than one process's event loop can carry without slowing the scoring runs senders of their
own: while one is in the ops fleet, the workers' senders stand back (worker/service.py
`senders_up`) and their event loops only score. Every example in deploy/ runs one
(docs/operations.md, "When to run a sender"). Every sender takes its
chats from the one posting ring and its slots from the one pace (Redis, keyed per bot): two
senders never post a chat's rows out of order or twice (chat leases, row claims) and never
post faster together than the bot's learned rate.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Final

from codemojex.ops.collect import SenderCollector
from codemojex.ops.server import MetricsConfig, ProcessOps
from codemojex.ops.startup import Start
from codemojex.posting.keys import bot_id
from codemojex.posting.pacer import Pacer
from codemojex.posting.sender import OutboxSender, SenderStats
from codemojex.runtime import RuntimeConfig, open_runtime, settle_process, warn_without_persistence
from codemojex.values.botapi import BotApi
from codemojex.worker.botapi import make_bot
from codemojex.worker.service import WorkerConfig

log = logging.getLogger(__name__)

# Chats a sender process holds at once (a chat in hand waits for its slot or posts), and posts
# on the wire at once (its Bot API pool's connections): hundreds of posts a second at a
# post's round trip of a tenth of a second or so.
MAX_CHATS: Final = 256
IN_FLIGHT: Final = 32


async def main(
    config: WorkerConfig,
    runtime: RuntimeConfig,
    metrics: MetricsConfig,
    api: BotApi,
    start: Start | None = None,
) -> SenderStats:
    """Post `config.queue`'s outbox at `config.pace` through `api` until SIGTERM or SIGINT
    (`start`'s stop, when the process's start-up heeds them already: ops/startup.py), then let
    every chat in hand finish its post (on the Redis and database of `runtime`, serving
    /metrics as `metrics` says)."""
    stop = start.stop if start is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    if start is None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    bot = make_bot(api, connections=IN_FLIGHT)
    stats = SenderStats()
    try:
        async with open_runtime(runtime) as rt:
            await warn_without_persistence(rt.redis)
            sender = OutboxSender(
                rt.sessionmaker,
                bot,
                rt.redis,
                namespace=config.queue,
                pacer=Pacer(rt.redis, config.queue, config.pace, bot=bot_id(api.token)),
                stats=stats,
                ambiguous=config.sender_ambiguous,
                max_chats=MAX_CHATS,
                in_flight=IN_FLIGHT,
            )
            ops = ProcessOps(
                "sender",
                metrics,
                redis=rt.redis,
                engine=rt.engine,
                sessionmaker=rt.sessionmaker,
                lanes=rt.lanes,
                collectors=[SenderCollector(stats)],
                probes=start.probes if start is not None else None,
            )
            await ops.start()
            settle_process()
            log.info("sender up: queue %s, %d chats in hand", config.queue, MAX_CHATS)
            try:
                await sender.run(stop)
            finally:
                await ops.stop()
            log.info("sender stopped: %s", stats.as_dict())
            return stats
    finally:
        await bot.shutdown()
        if start is None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
