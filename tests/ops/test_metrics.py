"""/metrics of a bot and a worker while a round is played; cardinality with 1,000 rooms."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from codemojex.db import Outbox, make_engine, make_sessionmaker
from codemojex.lanes import Lanes
from codemojex.ops.collect import BotCollector, WorkerCollector
from codemojex.ops.server import MetricsConfig, ProcessOps
from codemojex.settings import Settings
from codemojex.values import ids
from codemojex.values.redistypes import AnyRedis
from tests.conftest import REDIS_URL
from tests.e2e.conftest import open_stack
from tests.e2e.harness import ALICE, BOB, eventually, in_process_worker
from tests.helpers.support import drop_keys, free_port, wrong_guess
from tests.ops.conftest import exported, families, moved, scrape, value


@asynccontextmanager
async def serving(ops: ProcessOps) -> AsyncIterator[int]:
    await ops.start()
    try:
        assert ops.port is not None
        yield ops.port
    finally:
        await ops.stop()


DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def with_port(settings: Settings, **extra: Any) -> MetricsConfig:
    return settings.model_copy(update={"metrics_port": free_port(), **extra}).metrics()


async def test_metrics_move_as_a_round_is_played(ops_database_url: str, queue_name: str) -> None:
    async with open_stack(ops_database_url, queue_name) as stack:

        def ops(kind: str, collector: Collector) -> ProcessOps:
            return ProcessOps(
                kind,
                with_port(stack.settings),
                redis=stack.redis,
                engine=stack.engine,
                sessionmaker=stack.sessionmaker,
                lanes=stack.lanes,
                collectors=[collector],
            )

        assert stack.front is not None  # the bot's front door, polling the stand-in
        outcomes = stack.app.bot_data.guesses.outcomes
        bot = ops("bot", BotCollector(outcomes, stack.front.door.counts, stack.front.gauges))
        async with in_process_worker(stack) as stats, serving(bot) as bot_port:
            worker = ops("worker", WorkerCollector(stats))
            async with serving(worker) as worker_port:
                chat = stack.new_group()
                ann, rnd = await stack.new_round(chat)
                await stack.all_posted()
                before_bot, before = await scrape(bot_port), await scrape(worker_port)
                sent_before = await stack.scalar(
                    select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_not(None))
                )
                secret = rnd.secret_emojis
                for n, who in enumerate([ALICE, BOB, ALICE]):
                    stack.standin.send_text(chat, who, "".join(wrong_guess(secret, ann.palette, n)))
                stack.standin.send_text(chat, BOB, "".join(secret))
                stack.standin.send_text(chat, ALICE, "hello")  # chatter: no guess at all
                await stack.settle()

                async def scored() -> bool:
                    return await stack.guess_count() == 4

                await eventually(scored, timeout=20, what="4 guesses recorded")
                rows = await stack.all_posted()
                after_bot, after = await scrape(bot_port), await scrape(worker_port)
                names = await exported(bot_port) | await exported(worker_port)
    sent = sum(1 for row in rows if row.sent_at is not None) - sent_before
    assert moved(before_bot, after_bot, "codemojex_guesses_total", outcome="accepted") == 4
    assert moved(before_bot, after_bot, "codemojex_guesses_total", outcome="refused_invalid") == 0
    assert moved(before, after, "codemojex_guesses_scored_total") == 4
    # the histograms count every scored guess, once
    assert moved(before, after, "codemojex_guess_wait_seconds_count") == 4
    assert moved(before, after, "codemojex_guess_scoring_seconds_count") == 4
    assert moved(before, after, "codemojex_guess_wait_seconds_bucket", le="+Inf") == 4
    assert moved(before, after, "codemojex_rounds_total", end="won") == 1
    assert moved(before, after, "codemojex_result_post_delay_seconds_count") == sent > 0
    posts = sum(
        moved(before, after, "codemojex_posts_total", kind=k)
        for k in ("result", "folded", "reply", "round")
    )
    assert 0 < posts <= sent
    assert value(after, "codemojex_queue_jobs", state="pending") == 0
    assert value(after, "codemojex_outbox_pending") == 0
    assert ("codemojex_queue_oldest_pending_age_seconds", ()) in after
    assert value(after, "codemojex_outages_total", component="redis") >= 0
    # every name the Grafana dashboard and the alerts use is one the processes export
    for path in ("grafana/codemojex-dashboard.json", "prometheus/codemojex-alerts.yml"):
        used = set(re.findall(r"codemojex_[a-z_]+", (DEPLOY / path).read_text()))
        assert used, path
        for name in used:
            assert {name, name + "_bucket", name + "_total"} & names, (path, name)


async def _fill(lanes: Lanes, rooms: int) -> None:
    """`rooms` rooms, room i with 1 + i % 7 pending guesses."""
    for i in range(rooms):
        room = ids.mint(ids.ROOM)
        for _ in range(1 + i % 7):
            await lanes.enqueue(room, ids.mint(ids.PLAYER), b"x")


async def test_per_room_series_stay_at_top_n_with_1000_rooms(
    ops_database_url: str, queue_name: str
) -> None:
    redis: AnyRedis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(ops_database_url)
    lanes = Lanes(redis, queue_name)
    settings = Settings(redis_url=REDIS_URL, database_url=ops_database_url, queue=queue_name)
    try:
        t0 = time.monotonic()
        await _fill(lanes, 1000)
        print(f"1,000 rooms filled in {time.monotonic() - t0:.1f} s")
        counts = {}
        for top in (20, 5, 0):
            ops = ProcessOps(
                "worker",
                with_port(settings, metrics_top_rooms=top),
                redis=redis,
                engine=engine,
                sessionmaker=make_sessionmaker(engine),
                lanes=lanes,
                collectors=[],
            )
            async with serving(ops) as port:
                series = await scrape(port)
            assert families(series, "codemojex_room_pending_jobs") == top
            assert families(series, "codemojex_room_in_flight_jobs") == top
            counts[top] = len(series)
            pending = value(series, "codemojex_queue_jobs", state="pending")
            assert pending == sum(1 + i % 7 for i in range(1000))
        # everything else is a fixed set of series, whatever the number of rooms
        assert counts[20] - counts[0] == 40 and counts[5] - counts[0] == 10
        assert counts[0] < 200
    finally:
        await drop_keys(redis, queue_name)
        await engine.dispose()
        await redis.aclose()
