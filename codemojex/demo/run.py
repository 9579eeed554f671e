"""Running the demo: the stand-in, the runtime (fakeredis and a throwaway SQLite unless the
environment names real ones), the bot in this event loop and the worker in a thread of its own
(with its own event loop, Redis client and database engine, as it would run in a process of
its own: the flood the bot takes in does not hold up the scoring loop), the players for
`plan.seconds`, the settling, the summary."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from codemojex.bot.app import build_application, running
from codemojex.db import upgrade
from codemojex.demo.people import (
    DEMO_TOKEN,
    ChatReader,
    DemoPlan,
    SimRoom,
    admin,
    flood_player,
    make_rooms,
    quiet_player,
)
from codemojex.demo.report import (
    Report,
    queued_jobs,
    quiet_results_due,
    read_books,
    sample_queues,
)
from codemojex.runtime import Runtime, open_runtime
from codemojex.standin import StandIn
from codemojex.worker.botapi import make_bot
from codemojex.worker.service import WorkerStats, WorkerTimings, run_worker

if TYPE_CHECKING:  # the demo is a composition root: it unpacks the settings for each part
    from codemojex.settings import Settings


async def run_demo(settings: Settings, plan: DemoPlan) -> int:
    # Wide enough for the summary table even when the output is not a terminal.
    console = Console(width=max(Console().width, 120))
    rng = random.Random(plan.seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="codemojex-demo-") as tmp:
        standin = StandIn(token=DEMO_TOKEN)
        await standin.start()
        # Results are paced like Telegram would demand; let the stand-in count any breach.
        standin.enforce_rate_limits()
        try:
            settings = _demo_settings(settings, standin, Path(tmp))
            await asyncio.to_thread(upgrade, settings.database_url)
            rooms = make_rooms(standin, plan)
            fake_server = None if settings.redis_url else _fake_server()
            async with open_runtime(settings.runtime(), fake_server) as runtime:
                worker = WorkerThread(settings, fake_server)
                return await _play(
                    console, settings, runtime, worker, standin, rooms, plan, rng, started
                )
        finally:
            await standin.stop()


def _demo_settings(settings: Settings, standin: StandIn, workdir: Path) -> Settings:
    explicit = settings.model_fields_set
    update: dict[str, object] = {
        "token": SecretStr(DEMO_TOKEN),
        "bot_api_base_url": standin.base_url,
        "bot_api_base_file_url": standin.base_file_url,
    }
    if "database_url" not in explicit:
        update["database_url"] = f"sqlite+aiosqlite:///{workdir / 'demo.db'}"
    return settings.model_copy(update=update)


def _fake_server() -> Any:
    import fakeredis

    return fakeredis.FakeServer()


class WorkerThread:
    """The worker (`run_worker`: pool, sender, round timer) in a thread with its own event
    loop, runtime and bot; `stop()` stops it gracefully and returns its counters."""

    def __init__(self, settings: Settings, fake_server: Any | None) -> None:
        self.settings = settings
        self.fake_server = fake_server
        self.stats = WorkerStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="codemojex-demo-worker")

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    async def stop(self) -> WorkerStats:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        await asyncio.to_thread(self._thread.join)
        if self._error is not None:
            raise self._error
        return self.stats

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        async with (
            open_runtime(self.settings.runtime(), self.fake_server) as runtime,
            make_bot(self.settings.bot_api()) as bot,
        ):
            await run_worker(
                self.settings.worker(),
                lanes=runtime.lanes,
                sessionmaker=runtime.sessionmaker,
                bot=bot,
                redis=runtime.redis,
                stop_event=self._stop,
                stats=self.stats,
                timings=WorkerTimings(timer_s=1.0, sender_poll_s=0.2),
            )


async def _play(
    console: Console,
    settings: Settings,
    runtime: Runtime,
    worker: WorkerThread,
    standin: StandIn,
    rooms: list[SimRoom],
    plan: DemoPlan,
    rng: random.Random,
    started: float,
) -> int:
    application = build_application(
        settings.bot(), lanes=runtime.lanes, sessionmaker=runtime.sessionmaker, redis=runtime.redis
    )
    stop_players = asyncio.Event()
    stats = worker.stats
    table = ChatReader(standin, rooms)
    console.print(
        f"[bold]Codemojex demo[/]: {len(rooms) - 1} quiet rooms and one flooding room "
        f"({plan.flood_players} players) play for {plan.seconds:.0f} s through the real bot "
        f"and worker ({settings.concurrency} scoring consumers)."
    )
    async with contextlib.AsyncExitStack() as polling:
        await polling.enter_async_context(running(application, poll_timeout=1))
        worker.start()
        tasks = [asyncio.create_task(admin(standin, room, stop_players)) for room in rooms]
        for room in rooms:
            for player in room.players:
                body = flood_player if room.flood else quiet_player
                tasks.append(
                    asyncio.create_task(body(standin, room, player, plan, rng, stop_players))
                )
        progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[status]}"),
            TimeRemainingColumn(),
            console=console,
        )
        with progress:
            bar = progress.add_task("playing", total=plan.seconds, status="")
            for tick in itertools.count():
                if (elapsed := time.monotonic() - started) >= plan.seconds:
                    break
                await asyncio.sleep(0.25)
                table.read()
                if tick % 2:
                    await sample_queues(runtime, rooms)
                won = sum(room.rounds_won for room in rooms)
                answered = sum(len(room.waits) for room in rooms)
                progress.update(
                    bar,
                    completed=min(elapsed, plan.seconds),
                    status=f"{answered} results posted · {won} rounds won",
                )
            stop_players.set()
            await asyncio.gather(*tasks)
            # Let the quiet rooms' last guesses be scored and posted before the summary. The
            # flood room's backlog is not waited for: it is kept, and reported.
            settle = progress.add_task("settling", total=None, status="")
            deadline = time.monotonic() + 15.0
            while time.monotonic() < deadline:
                table.read()
                due = await quiet_results_due(runtime, rooms)
                progress.update(settle, status=f"{due} quiet-room results still due")
                if due == 0:
                    break
                await asyncio.sleep(0.25)
            await asyncio.sleep(0.5)  # the last posts reach the stand-in
            table.read()
        # The bot stops first and handles every update it has fetched, so each guess it took
        # is in the lanes before the worker stops and what is left is counted.
        await polling.aclose()
        await worker.stop()
    backlog = queued_jobs(await runtime.lanes.snapshot())
    faults = await runtime.lanes.check()
    books = await read_books(runtime, rooms)
    outcomes = application.bot_data.guesses.outcomes
    report = Report(rooms, books, stats, outcomes, backlog, settings.default_ceiling)
    report.print(console, faults, standin, time.monotonic() - started)
    return 0 if report.total_scored > 0 and not faults and report.unaccounted == 0 else 1
