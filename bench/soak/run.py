"""Running a soak: start the private servers, the stand-in, the bot and the workers; feed and
break things; drain; verify."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Update
from telegram.ext import TypeHandler

from bench.soak.backlog import BacklogPhase
from bench.soak.chaos import Chaos
from bench.soak.feed import Feeding
from bench.soak.handover import HandoverPhases
from bench.soak.servers import WorkerFleet
from bench.soak.verify import verify
from bench.soak.world import ADMIN_ID, QUEUE, TOKEN, RecordingLanes, Sampler, SoakPlan
from codemojex.bot import BotParts, CodemojexContext, build_application, running
from codemojex.db import (
    Outbox,
    make_engine,
    make_sessionmaker,
    upgrade,
)
from codemojex.lanes import Lanes
from codemojex.outages import outage_of
from codemojex.runtime import redis_client
from codemojex.settings import Settings
from codemojex.standin import StandIn


class Soak(Feeding, Chaos, HandoverPhases, BacklogPhase):
    """One run: the servers up, the bot and the workers started, the feed and the chaos, the
    availability phases, the backlog phase, the handover phases, the drain, the
    verification."""

    # -- drain ----------------------------------------------------------------------------

    async def left(
        self, lanes: Lanes, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> int | None:
        """Guesses queued, in flight or delayed, plus outbox rows unsent (None: unknown)."""
        try:
            snap = await lanes.snapshot()
            queued = sum(int(r["pending"]) for r in snap["rooms"].values())
            async with sessionmaker() as session:
                unsent = (
                    await session.execute(
                        select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
                    )
                ).scalar_one()
            return queued + int(snap["active"]) + int(snap["delayed"]) + int(unsent)
        except Exception:
            return None

    async def drain(self, lanes: Lanes, sessionmaker: async_sessionmaker[AsyncSession]) -> bool:
        """Wait until nothing is left, for as long as what is left keeps shrinking: a flooded
        room's backlog of results goes out at a group's 20 messages a minute, minutes after
        the feed. False when `drain_timeout_s` passed with no progress."""
        fewest: int | None = None
        deadline = time.monotonic() + self.plan.drain_timeout_s
        while time.monotonic() < deadline:
            left = await self.left(lanes, sessionmaker)
            if left == 0:
                return True
            if left is not None and (fewest is None or left < fewest):
                fewest = left
                deadline = time.monotonic() + self.plan.drain_timeout_s
            await asyncio.sleep(0.5)
        return False

    # -- main -----------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        plan = self.plan
        started = time.monotonic()
        self.say(f"soak: {plan.guesses} guesses, {plan.rooms} rooms, {plan.workers} workers")
        try:
            await self.redis_server.start()
            await asyncio.to_thread(self.pg.init)
            await asyncio.to_thread(self.pg.start)
            await asyncio.to_thread(upgrade, self.pg.url)
            self.faults.note(f"redis :{self.redis_server.port}, postgres :{self.pg.port} up")
            report = await self.play(started)
        finally:
            self.redis_server.stop()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.pg.stop, "fast")
        report["plan"] = dict(asdict(plan).items())
        report["faults"] = self.faults.events
        report["redis_starts"] = self.redis_server.starts
        return report

    async def play(self, started: float) -> dict[str, Any]:
        plan = self.plan
        standin = StandIn(token=TOKEN)
        await standin.start()
        # Telegram's limits, enforced: every post over them is a RetryAfter, counted in the
        # headline (expected 0, Redis and Postgres outages and worker kills included).
        standin.enforce_rate_limits()
        self.build_world(standin)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")},
            "CODEMOJEX_TOKEN": TOKEN,
            "CODEMOJEX_BOT_API_BASE_URL": standin.base_url,
            "CODEMOJEX_BOT_API_BASE_FILE_URL": standin.base_file_url,
            "CODEMOJEX_REDIS_URL": self.redis_server.url,
            "CODEMOJEX_DATABASE_URL": self.pg.url,
            "CODEMOJEX_QUEUE": QUEUE,
            "CODEMOJEX_LEASE_MS": str(plan.lease_ms),
            "CODEMOJEX_CONCURRENCY": str(plan.concurrency),
            "CODEMOJEX_SENDER_AMBIGUOUS": plan.ambiguous,
        }
        self.fleet = WorkerFleet(env, plan.workers, self.workdir)

        settings = Settings(
            token=TOKEN,
            bot_api_base_url=standin.base_url,
            bot_api_base_file_url=standin.base_file_url,
            redis_url=self.redis_server.url,
            database_url=self.pg.url,
            queue=QUEUE,
            default_ceiling=2,
        )
        # The bot's clients as `codemojex bot` builds them (a blocking Redis pool sized by the
        # runtime: the bot's concurrent updates wait for a connection, never fail for one).
        redis = redis_client(settings.runtime())
        assert isinstance(redis, aioredis.Redis)
        engine = make_engine(self.pg.url)
        sessionmaker = make_sessionmaker(engine)
        lanes = RecordingLanes(redis, QUEUE)
        app = build_application(
            settings.bot(),
            lanes=lanes,
            sessionmaker=sessionmaker,
            redis=redis,
            parts=BotParts(rng=random.Random(plan.seed), max_depth=plan.max_depth),
        )

        async def count_seen(update: Update, context: CodemojexContext) -> None:
            self.seen += 1

        async def record_error(update: object, context: CodemojexContext) -> None:
            error = context.error
            if error is not None and outage_of(error) not in ("redis", "postgres"):
                self.bot_errors.append(repr(error)[:300])  # an outage the door waits out

        app.add_handler(TypeHandler(Update, count_seen), group=-1)
        app.add_error_handler(record_error)

        sampler = Sampler(redis, QUEUE)
        stop_sampler = asyncio.Event()
        report: dict[str, Any] = {}
        try:
            async with contextlib.AsyncExitStack() as stack:
                # The in-process bot, stopped early for the backlog phase's bot processes.
                bot_stack = contextlib.AsyncExitStack()
                stack.push_async_callback(bot_stack.aclose)
                # Every room exists with its ceiling before the first guess: ceilings never
                # change while guesses are in flight, so any count above one is a breach.
                if plan.via == "bot":
                    await bot_stack.enter_async_context(running(app, poll_timeout=1))
                    for sim in self.sims:
                        self.type_text(standin, sim.chat_id, ADMIN_ID, f"/limit {sim.ceiling}")
                        await self.backlog_below(plan.max_backlog)
                    await self.settle(standin)
                    feeder = self.feed(standin, lanes, sessionmaker)
                else:
                    await self.setup_direct(lanes, sessionmaker)
                    feeder = self.feed_direct(standin, lanes, sessionmaker)
                self.fleet.start_all()
                while not self.fleet.ready():  # noqa: ASYNC110 - polls other processes' logs
                    await asyncio.sleep(0.2)
                self.faults.note("first worker ready")
                sampler_task = asyncio.create_task(sampler.run(stop_sampler))
                feed_started = time.monotonic()
                tasks = [asyncio.create_task(feeder)]
                if plan.faults:
                    tasks.append(asyncio.create_task(self.worker_killer()))
                    tasks.append(asyncio.create_task(self.infrastructure_faults(lanes)))
                await asyncio.gather(*tasks)
                feed_s = time.monotonic() - feed_started
                self.faults.note(f"feeding done: {len(lanes.accepted)} accepted")
                if plan.via == "bot":
                    await self.settle(standin, timeout_s=300)
                    if plan.stuck_chats:
                        await self.stuck_phase(standin, lanes, sessionmaker)
                    if plan.outage:
                        await self.outage_phase(standin, sessionmaker)
                    await self.settle(standin, timeout_s=300)
                    if plan.backlog:
                        await self.backlog_phase(standin, sessionmaker, bot_stack.aclose)
                    if plan.handover_chats:
                        await bot_stack.aclose()  # one poller per token: the phases' own
                        await self.failover_phase(standin, sessionmaker)
                        await self.webhook_phase(standin, sessionmaker)
                for slot in range(plan.workers):
                    if slot not in self.fleet.alive():
                        self.fleet.spawn(slot)
                drained = await self.drain(lanes, sessionmaker)
                drain_s = time.monotonic() - feed_started - feed_s
                self.faults.note("drained" if drained else "NOT drained")
                stop_sampler.set()
                await sampler_task
                codes = await asyncio.to_thread(self.fleet.stop_all)
                report = await verify(self, standin, lanes, sessionmaker, sampler.obs)
                report["timing"] = {
                    "feed_s": round(feed_s, 1),
                    "drain_s": round(drain_s, 1),
                    "total_s": round(time.monotonic() - started, 1),
                    "accepted_per_s": round(len(lanes.accepted) / feed_s, 1) if feed_s else None,
                }
                report["workers"] = {
                    "spawns": self.fleet.spawns,
                    "sigkills": self.fleet.kills,
                    "exit_codes_at_stop": codes,
                    "error_log_lines": self.fleet.error_lines(),
                    "error_log_examples": self.fleet.error_examples(),
                    "sender_recovered_ambiguous_rows": len(self.fleet.recovered_ambiguous()),
                }
        finally:
            stop_sampler.set()
            await asyncio.to_thread(self.fleet.stop_all, 5)
            await standin.stop()
            await engine.dispose()
            with contextlib.suppress(Exception):
                await redis.aclose()
        return report


@contextlib.asynccontextmanager
async def workdir(keep: bool) -> AsyncIterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cmx-soak-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


async def run_soak(plan: SoakPlan, say: Callable[[str], None] = print) -> dict[str, Any]:
    async with workdir(plan.keep_dir) as path:
        report = await Soak(plan, path, say).run()
        report["workdir"] = str(path) if plan.keep_dir else None
        return report
