"""Benchmark 6: the front door. How many guesses one real `codemojex bot` takes in.

Setup (not timed): a fresh Postgres database migrated by the checkout measured, its own
queue on the machine's Redis, a fake Bot API (bench/ingest_feed.py) in this process, and the
real `codemojex bot` process of that checkout polling it (and, for `bot+worker`, one real
`codemojex worker`). Each of `rooms` supergroups gets a round through the bot's own /newgame,
as players start them; the rounds' palettes are read back from the database.

Timed: `rooms x players x per_player` valid (wrong) guesses, typed as plain emoji messages,
round-robin over the rooms, handed to the bot as fast as it asks (getUpdates answers at once
with 100 pre-serialised updates). The clock runs from the first update handed out to the
last guess in the lanes (`bot`: the job's enqueued_ms) or recorded (`bot+worker`: its
outbox row's created_at). Printed per run:

- guesses/s;
- the bot process's CPU (utime + stime from /proc) per guess;
- SQL transactions per guess (pg_stat_database xact_commit + xact_rollback of the database,
  read once the backends flushed their counters; `bot+worker` includes the worker's, the
  harness's own polling subtracted);
- p50/p99 latency from the update handed out to the guess enqueued (`bot+worker`: to its
  result recorded);
- this process's own CPU per guess (the Bot API it serves, and its polls), and with the
  stand-in the updates getUpdates returned per guess (those returned again included);
- with ``--profile DIR``, the top of a py-spy profile of the bot process.

``--api standin`` serves the bot from the Bot API stand-in (codemojex.standin) instead of the
fake Bot API (bench/ingest_feed.py): it confirms and returns updates as Telegram does, builds
each update's JSON when it serves it, enforces Telegram's posting limits and keeps every
post, in this process, on the same cores as the bot and the worker. That is how the front
door's review measured it (docs/benchmarks.md says how the two differ).

The same run measures python-telegram-bot alone on the same feed (bench/ingest_ptb.py): a
handler that does nothing, and one that makes one Redis script call per update: the ceiling
the bot is measured against.

``--baseline PATH`` runs every configuration with that checkout (its own .venv) too,
alternating: today's code and the baseline's side by side, same harness, same machine.

``--appendfsync always,everysec`` runs every configuration on a private redis-server keeping
an append-only file fsynced each way (the deployments' Redis: compose.yaml), taking turns:
what `appendfsync always` costs the front door against `everysec` (docs/operations.md).

Run: ``.venv/bin/python -m bench.ingest`` (a few minutes) or ``--quick``. The results go to
bench/out/ (untracked) unless ``--save`` puts them into bench/results/.
Needs the machine's Postgres (CODEMOJEX_BENCH_PG_ADMIN_URL) and Redis
(CODEMOJEX_BENCH_REDIS_URL); the database and the queue's keys are dropped after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import asyncpg
import typer

from bench.common import (
    console,
    delete_matching,
    exit_cleanly_on_sigterm,
    make_client,
    maybe_private_redis,
    percentile,
    print_table,
    redis_url,
    results_name,
    save_results,
    server_cost,
    server_counters,
    unique_queue,
)
from bench.ingest_feed import TOKEN, Feed, StandInFeed, message_update
from bench.pipeline import PG_ADMIN_URL, TODAY, Code, _admin, _backend_pids, _cpu_s, _profile_top
from codemojex.lanes.keys import JOB_FIELDS

FIRST_CHAT = -1_004_200_000_000
FIRST_USER = 5_000_000
PTB_SCRIPT = Path(__file__).resolve().parent / "ingest_ptb.py"
MODES = ("bot", "bot+worker")
PG_STATS_FLUSH_S = 11.0
PALETTE: tuple[str, ...] = ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑")


class Plan:
    def __init__(self, rooms: int, players: int, per_player: int, seed: int = 3) -> None:
        self.rooms, self.players, self.per_player = rooms, players, per_player
        self.rng = random.Random(seed)

    @property
    def guesses(self) -> int:
        return self.rooms * self.players * self.per_player

    def chat(self, r: int) -> int:
        return FIRST_CHAT - r

    def user(self, r: int, p: int) -> int:
        return FIRST_USER + r * 1000 + p


class Ids:
    """Update and message ids, fresh for every update of a run."""

    def __init__(self) -> None:
        self.update = 1
        self.message = 1

    def next(self) -> tuple[int, int]:
        self.update += 1
        self.message += 1
        return self.update, self.message


def newgames(plan: Plan, ids: Ids) -> list[dict[str, Any]]:
    out = []
    for r in range(plan.rooms):
        update_id, message_id = ids.next()
        out.append(
            message_update(update_id, plan.chat(r), f"Bench {r}", plan.user(r, 0), message_id,
                           "/newgame")
        )  # fmt: skip
    return out


def guesses(
    plan: Plan, ids: Ids, rounds: dict[int, tuple[tuple[str, ...], int, str]]
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The timed feed: every player's guesses round-robin over the rooms (a sender's next
    guess only after every other room had one); and message id -> update id."""
    updates: list[dict[str, Any]] = []
    by_message: dict[int, int] = {}
    for _ in range(plan.per_player):
        for p in range(plan.players):
            for r in range(plan.rooms):
                palette, length, secret = rounds[plan.chat(r)]
                while True:
                    code = "".join(plan.rng.choice(palette) for _ in range(length))
                    if code != secret:
                        break
                update_id, message_id = ids.next()
                updates.append(
                    message_update(update_id, plan.chat(r), f"Bench {r}", plan.user(r, p),
                                   message_id, code)
                )  # fmt: skip
                by_message[message_id] = update_id
    return updates, by_message


async def _xacts(admin: asyncpg.Connection, db: str) -> int:
    await admin.execute("SELECT pg_stat_clear_snapshot()")
    value = await admin.fetchval(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", db
    )
    return int(value or 0)


async def _settled_xacts(admin: asyncpg.Connection, db: str) -> int:
    """The count once every backend flushed its counters: a backend reports at most once a
    second, and an idle one within PGSTAT_IDLE_INTERVAL (10 s) of its last transaction."""
    await asyncio.sleep(PG_STATS_FLUSH_S)
    return await _xacts(admin, db)


async def _eventually(
    probe: Callable[[], Awaitable[bool]], timeout_s: float, what: str, every_s: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached in {timeout_s} s")
        await asyncio.sleep(every_s)


class Processes:
    """The checkout's `codemojex` processes of one run, their logs in a temp dir."""

    def __init__(self, code: Code, env: dict[str, str]) -> None:
        self.code, self.env = code, env
        self.dir = Path(tempfile.mkdtemp(prefix="cmx-ingest-"))
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(self, what: str) -> asyncio.subprocess.Process:
        with (self.dir / f"{what}.log").open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                self.code.python, "-m", "codemojex.cli", what, cwd=str(self.code.root),
                env=self.env, stdin=asyncio.subprocess.DEVNULL, stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
        self.procs[what] = proc
        return proc

    async def run(self, *args: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            self.code.python, "-m", "codemojex.cli", *args, cwd=str(self.code.root),
            env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"codemojex {' '.join(args)} failed: {out.decode()[-2000:]}")

    async def stop(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for what, proc in self.procs.items():
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
            log = (self.dir / f"{what}.log").read_text(errors="replace")
            errors = [ln for ln in log.splitlines() if " ERROR " in ln or "Traceback" in ln]
            if errors:
                console.print(f"[yellow]{what} logged {len(errors)} errors, e.g. {errors[0]}[/]")


async def _spy(pid: int, out: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--rate",
        "250", "--format", "raw", "--nonblocking", "-o", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def run_ingest(
    code: Code,
    mode: str,
    plan: Plan,
    profile: Path | None = None,
    max_s: float = 180.0,
    bot_concurrency: int | None = None,
    worker_concurrency: int | None = None,
    bot_in_hand: int | None = None,
    api: str = "feed",
) -> dict[str, Any]:
    """One timed run of the real bot (and worker) of `code`, fed by the fake Bot API
    (`api` "feed") or the stand-in ("standin")."""
    from codemojex.scoring import split_emojis

    db = "cmbench_" + uuid.uuid4().hex[:10]
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    queue = unique_queue("ing")
    client = make_client()
    feed: Feed | StandInFeed = Feed() if api == "feed" else StandInFeed()
    await feed.start()
    await _admin(f'CREATE DATABASE "{db}"')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEMOJEX_", "PYTHONPATH"))}
    env.update(
        CODEMOJEX_TOKEN=TOKEN,
        CODEMOJEX_BOT_API_BASE_URL=feed.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=feed.base_file_url,
        CODEMOJEX_REDIS_URL=redis_url(),
        CODEMOJEX_DATABASE_URL=f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{db}",
        CODEMOJEX_QUEUE=queue,
    )
    if bot_concurrency is not None:
        env["CODEMOJEX_BOT_CONCURRENCY"] = str(bot_concurrency)
    if worker_concurrency is not None:
        env["CODEMOJEX_CONCURRENCY"] = str(worker_concurrency)
    if bot_in_hand is not None:
        env["CODEMOJEX_BOT_IN_HAND"] = str(bot_in_hand)
    procs = Processes(code, env)
    admin = await asyncpg.connect(PG_ADMIN_URL)
    conn = await asyncpg.connect(f"{base}/{db}")
    spies: list[asyncio.subprocess.Process] = []
    spy_out = None if profile is None else profile / f"{code.label}-{mode}-{queue}.txt"
    worker_out = None if profile is None else profile / f"{code.label}-{mode}-{queue}-worker.txt"
    try:
        await procs.run("migrate")
        bot = await procs.start("bot")
        worker = await procs.start("worker") if mode == "bot+worker" else None

        async def polling() -> bool:
            return feed.calls["getUpdates"] > 0

        await _eventually(polling, 120, "the bot polling")
        ids = Ids()
        feed.add(newgames(plan, ids))

        async def rounds_open() -> bool:
            n = await conn.fetchval("SELECT count(*) FROM rounds WHERE ended_at IS NULL")
            return int(n) >= plan.rooms

        async def announced() -> bool:
            n = await conn.fetchval("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
            return int(n) == 0

        await _eventually(rounds_open, 120, "every room's round")
        if mode == "bot+worker":
            await _eventually(announced, 120, "the announcements posted")
        await asyncio.sleep(1.0)  # the bot finishes its /newgame handlers
        rows = await conn.fetch(
            "SELECT rm.chat_id, r.palette, r.length, r.secret FROM rounds r "
            "JOIN rooms rm ON rm.id = r.room_id WHERE r.ended_at IS NULL"
        )
        rounds = {
            int(r["chat_id"]): (split_emojis(r["palette"]), int(r["length"]), r["secret"])
            for r in rows
        }
        feed_updates, by_message = guesses(plan, ids, rounds)
        if spy_out is not None and worker_out is not None:
            await asyncio.to_thread(spy_out.parent.mkdir, parents=True, exist_ok=True)
            spies.append(await _spy(bot.pid, spy_out))
            if worker is not None:
                spies.append(await _spy(worker.pid, worker_out))
            await asyncio.sleep(1.0)  # py-spy attaches
        xact0 = await _settled_xacts(admin, db)
        redis0 = await server_counters(client)
        cpu0 = _cpu_s(bot.pid)
        pg_cpu0 = {pid: _cpu_s(pid) for pid in await _backend_pids(admin, db)}
        worker_cpu0 = _cpu_s(worker.pid) if worker is not None else 0.0
        calls0 = dict(feed.calls)
        served0 = getattr(feed, "updates_served", 0)
        harness0 = time.process_time()
        polls = 0
        t0 = time.time()
        typed = feed.add(feed_updates)
        if typed:  # the stand-in's own message ids: served when typed
            by_message = {m: m for m in typed.values()}
        npending = f"emq:{{{queue}}}:npending"

        async def done() -> bool:
            nonlocal polls
            if mode == "bot":
                return int(await client.get(npending) or 0) >= plan.guesses
            polls += 1
            return int(await conn.fetchval("SELECT count(*) FROM guesses")) >= plan.guesses

        try:
            # The clock stops at the last guess's own timestamp, not at the poll that saw it:
            # polling the database less often costs no accuracy, only its own load.
            every_s = 0.01 if mode == "bot" else 0.1
            await _eventually(done, max_s, "every guess taken", every_s=every_s)
        finally:
            t_done = time.time()
            cpu = _cpu_s(bot.pid) - cpu0
            # per backend: one that ended meanwhile took its CPU time with it (not counted)
            pg_now = {pid: _cpu_s(pid) for pid in {*pg_cpu0, *await _backend_pids(admin, db)}}
            pg_cpu = sum(max(0.0, t - pg_cpu0.get(pid, 0.0)) for pid, t in pg_now.items() if t)
            worker_cpu = (_cpu_s(worker.pid) - worker_cpu0) if worker is not None else 0.0
            calls = {m: n - calls0.get(m, 0) for m, n in feed.calls.items() if n > calls0.get(m, 0)}
            served = getattr(feed, "updates_served", 0) - served0
            harness = time.process_time() - harness0
            redis1 = await server_counters(client)
            for spy in spies:
                spy.send_signal(signal.SIGINT)
                await asyncio.wait_for(spy.wait(), 30)
        xacts = await _settled_xacts(admin, db) - xact0 - polls
        first_ms = min(feed.served_ms[u] for u in by_message.values())
        if mode == "bot":
            taken_ms = await _enqueued_ms(client, queue)
        else:
            taken_ms = await _recorded_ms(conn)
        waits = sorted(ms - feed.served_ms[by_message[m]] for m, ms in taken_ms.items())
        last_ms = max(taken_ms.values()) if taken_ms else int(t_done * 1000)
        seconds = max(1e-3, (last_ms - first_ms) / 1000)
        n = plan.guesses
        return {
            "code": code.label,
            "mode": mode,
            "bot_concurrency": bot_concurrency,
            "worker_concurrency": worker_concurrency,
            "bot_in_hand": bot_in_hand,
            "api": api,
            "rooms": plan.rooms,
            "players_per_room": plan.players,
            "guesses": n,
            "taken": len(taken_ms),
            "seconds": round(seconds, 3),
            "guesses_per_s": round(n / seconds, 1),
            "bot_cpu_us_per_guess": round(cpu * 1e6 / n, 1),
            "worker_cpu_us_per_guess": round(worker_cpu * 1e6 / n, 1),
            # the backends serving the bot, the worker and this harness's polls
            "postgres_cpu_us_per_guess": round(pg_cpu * 1e6 / n, 1),
            "bot_api_calls": calls,
            # updates getUpdates returned per guess (the stand-in: those returned again too)
            "updates_served_per_guess": round(served / n, 2) if served else None,
            # this process: the Bot API it serves (the fake one, or the stand-in), and its polls
            "harness_cpu_us_per_guess": round(harness * 1e6 / n, 1),
            "sql_xacts_per_guess": round(xacts / n, 4),
            "sql_xacts": xacts,
            "wait_p50_ms": percentile(waits, 50),
            "wait_p99_ms": percentile(waits, 99),
            "redis": server_cost(redis0, redis1, redis0.minus(redis0), n).as_dict(),
            "wall_s": round(t_done - t0, 3),
            "profile": _profile_top(spy_out) if spy_out is not None and spy_out.exists() else [],
            "worker_profile": _profile_top(worker_out)
            if worker_out is not None and worker_out.exists()
            else [],
            "load1": round(os.getloadavg()[0], 2),
        }
    finally:
        await procs.stop()
        await feed.stop()
        await conn.close()
        await admin.close()
        await delete_matching(client, f"*:{{{queue}}}:*")
        await client.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


# The job hash's field names before they were shortened (a baseline checkout's).
_LONG_FIELDS = ("payload", "enqueued_ms")


async def _enqueued_ms(client: Any, queue: str) -> dict[int, int]:
    """message id -> enqueued_ms of every guess job (payloads start `<round>:<message>:`), in
    the job hash's layout of either side (a baseline may predate the short field names)."""
    out: dict[int, int] = {}
    keys = [k async for k in client.scan_iter(match=f"emq:{{{queue}}}:job:*", count=5000)]
    for start in range(0, len(keys), 1000):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 1000]:
            pipe.hmget(key, JOB_FIELDS["payload"], JOB_FIELDS["enqueued_ms"], *_LONG_FIELDS)
        for payload, enqueued, long_payload, long_enqueued in await pipe.execute():
            payload, enqueued = payload or long_payload, enqueued or long_enqueued
            out[int(payload.split(b":")[1])] = int(enqueued)
    return out


async def _recorded_ms(conn: asyncpg.Connection) -> dict[int, int]:
    rows = await conn.fetch(
        "SELECT reply_to_message_id AS m, created_at FROM outbox WHERE kind = 'result'"
    )
    return {int(r["m"]): int(r["created_at"].timestamp() * 1000) for r in rows}


async def run_ptb(mode: str, plan: Plan, concurrency: int) -> dict[str, Any]:
    """python-telegram-bot alone on the same feed: a no-op handler, or one script call."""
    feed = Feed()
    await feed.start()
    proc = await asyncio.create_subprocess_exec(
        TODAY.python, str(PTB_SCRIPT), feed.base_url, TOKEN, mode, redis_url(),
        str(plan.guesses), str(concurrency), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:

        async def polling() -> bool:
            return feed.calls["getUpdates"] > 0

        await _eventually(polling, 60, "PTB polling")
        rounds = {plan.chat(r): (PALETTE, 4, "") for r in range(plan.rooms)}
        updates, by_message = guesses(plan, Ids(), rounds)
        cpu0 = _cpu_s(proc.pid)
        feed.add(updates)
        assert proc.stdout is not None
        out = json.loads(await asyncio.wait_for(proc.stdout.readline(), 120))
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await feed.stop()
    first_ms = min(feed.served_ms[u] for u in by_message.values())
    seconds = max(1e-3, (out["done_ms"] - first_ms) / 1000)
    return {
        "code": "ptb",
        "mode": f"ptb alone, {mode}",
        "guesses": plan.guesses,
        "guesses_per_s": round(plan.guesses / seconds, 1),
        "bot_cpu_us_per_guess": round((out["cpu_s"] - cpu0) * 1e6 / plan.guesses, 1),
        "concurrency": concurrency,
        "load1": round(os.getloadavg()[0], 2),
    }


app = typer.Typer(add_completion=False, help=__doc__)


async def _main(
    quick: bool, rooms: int, players: int, per_player: int, modes: str, repeat: int,
    baseline: Path | None, profile: Path | None, out: str, ptb_concurrency: int,
    bot_concurrency: int | None, worker_concurrency: int | None, save: bool,
    bot_in_hand: int | None = None, appendfsync: str = "", api: str = "feed", ptb: bool = True,
) -> None:  # fmt: skip
    if quick:
        rooms, players, per_player = min(rooms, 40), min(players, 5), min(per_player, 5)
    codes = [Code("baseline", baseline), TODAY] if baseline else [TODAY]
    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    for mode in wanted:
        if mode not in MODES:
            raise typer.BadParameter(f"mode {mode!r}: one of {MODES}")
    # Each a private redis-server keeping an append-only file fsynced so, taking turns.
    fsyncs: list[str | None] = [f.strip() for f in appendfsync.split(",") if f.strip()] or [None]
    runs: list[dict[str, Any]] = []
    for _ in range(repeat):
        if fsyncs == [None] and ptb:
            for ptb_mode in ("noop", "redis"):
                plan = Plan(rooms, players, per_player)
                runs.append(await run_ptb(ptb_mode, plan, ptb_concurrency))
        for mode in wanted:
            for code in codes:
                for fsync in fsyncs:
                    label = code.label if fsync is None else f"{code.label}, aof {fsync}"
                    console.print(f"[dim]{label}: {mode} ...[/]")
                    plan = Plan(rooms, players, per_player)
                    with maybe_private_redis(fsync is not None, fsync):
                        run = await run_ingest(
                            code,
                            mode,
                            plan,
                            profile,
                            180.0,
                            bot_concurrency,
                            worker_concurrency,
                            bot_in_hand,
                            api,
                        )
                    runs.append({**run, "code": label, "appendfsync": fsync})
    print_table(
        f"the front door: {rooms} rooms x {players} players x {per_player} guesses, the real bot",
        ("code", "mode", "guesses/s", "bot CPU µs/guess", "worker CPU µs/guess",
         "Postgres CPU µs/guess", "SQL xact/guess", "p50 ms", "p99 ms"),
        (
            [r["code"], r["mode"], r["guesses_per_s"], r["bot_cpu_us_per_guess"],
             r.get("worker_cpu_us_per_guess") or "-", r.get("postgres_cpu_us_per_guess", "-"),
             r.get("sql_xacts_per_guess", "-"), r.get("wait_p50_ms", "-"),
             r.get("wait_p99_ms", "-")]
            for r in runs
        ),
    )  # fmt: skip
    if fsyncs != [None]:
        for mode in wanted:
            for fsync in fsyncs:
                rates = sorted(
                    r["guesses_per_s"]
                    for r in runs
                    if r["mode"] == mode and r.get("appendfsync") == fsync
                )
                console.print(f"{mode}, appendfsync {fsync}: {rates} guesses/s")
    if baseline:
        for mode in wanted:
            by = {
                c.label: sorted(r["guesses_per_s"] for r in runs
                                if r["mode"] == mode and r["code"].split(",")[0] == c.label)
                for c in codes
            }  # fmt: skip
            old, new = percentile(by["baseline"], 50), percentile(by["today"], 50)
            console.print(
                f"{mode}: baseline {by['baseline']} / today {by['today']} guesses/s; "
                f"median today/baseline = {new / old:.2f}"
            )
    if profile is not None:
        for r in runs:
            for key, what in (("profile", "the bot"), ("worker_profile", "the worker")):
                if r.get(key):
                    print_table(
                        f"py-spy, {what} process of {r['code']} ({r['mode']}): self %, total %",
                        ("function", "self %", "total %"),
                        r[key],
                    )
    save_results(out, "ingest", save=save, runs=runs)


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="a small run (40 rooms x 5 x 5)")] = False,
    rooms: Annotated[int, typer.Option(help="supergroups, each with an open round")] = 100,
    players: Annotated[int, typer.Option(help="players per room")] = 10,
    per_player: Annotated[int, typer.Option(help="valid guesses per player")] = 6,
    modes: Annotated[str, typer.Option(help="bot, bot+worker")] = "bot,bot+worker",
    repeat: Annotated[int, typer.Option(help="runs of each mode (and side)")] = 1,
    baseline: Annotated[
        Path | None, typer.Option(help="another checkout (with its .venv), side by side")
    ] = None,
    profile: Annotated[
        Path | None, typer.Option(help="py-spy the bot process; stacks in this folder")
    ] = None,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    ptb_concurrency: Annotated[
        int, typer.Option(help="concurrent updates of the PTB-alone ceiling runs")
    ] = 16,
    bot_concurrency: Annotated[
        int | None, typer.Option(help="CODEMOJEX_BOT_CONCURRENCY (default: the checkout's)")
    ] = None,
    worker_concurrency: Annotated[
        int | None, typer.Option(help="CODEMOJEX_CONCURRENCY (default: the checkout's)")
    ] = None,
    save: Annotated[
        bool, typer.Option(help="write bench/results/ingest.json, the run the repo keeps")
    ] = False,
    bot_in_hand: Annotated[
        int | None, typer.Option(help="CODEMOJEX_BOT_IN_HAND (default: the checkout's)")
    ] = None,
    appendfsync: Annotated[
        str,
        typer.Option(
            help="e.g. always,everysec: each run on a private redis-server with an "
            "append-only file fsynced so, taking turns (no PTB ceiling runs)"
        ),
    ] = "",
    api: Annotated[
        str,
        typer.Option(
            help="feed: the fake Bot API (pre-serialised updates); standin: the Bot API "
            "stand-in, confirming as Telegram does (the front door's review's measurement)"
        ),
    ] = "feed",
    ptb: Annotated[bool, typer.Option(help="the PTB-alone ceiling runs too")] = True,
) -> None:
    name = results_name("ingest", out, save=save, scratch="ingest-quick" if quick else None)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            _main(quick, rooms, players, per_player, modes, repeat,
                  baseline.resolve() if baseline else None, profile, name, ptb_concurrency,
                  bot_concurrency, worker_concurrency, save, bot_in_hand, appendfsync, api,
                  ptb)
        )  # fmt: skip


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
