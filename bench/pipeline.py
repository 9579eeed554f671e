"""Benchmark 4: the real worker pool end to end, in guesses/s, and Redis memory per pending guess.

Setup (not timed): a fresh Postgres database migrated with Alembic, N rooms each with an
open round and a few players (created through codemojex.db.store, as the bot does), every
room's ceiling set on its lanes (as the bot does), then a backlog of wrong guesses (valid
GuessJob payloads from each round's palette) enqueued into the players' lanes. With the
backlog in Redis, the memory of the queue's keys is measured (MEMORY USAGE) per pending guess.

Timed: worker processes (bench/pipeline_worker.py, run by the interpreter of the checkout
measured) each build what `codemojex worker` builds from default Settings and run the real
`ConsumerPool` with the real `ScoreWorker` (claims, group commit with the outbox rows, acks),
from a common start signal until Postgres holds every guess. guesses/s = guesses / that
time. CPU per guess: the worker processes' and the Postgres backends' utime + stime
(/proc) and Redis's used_cpu, over the same window, divided by the guesses.

``--baseline PATH`` runs every configuration with that checkout's worker code too (its own
.venv), alternating, in one run: today's code and the baseline's side by side. Today's code
runs on the interpreter running this benchmark, so a checkout needs no .venv of its own.
The results go to bench/out/ (untracked) unless ``--save`` puts them into bench/results/.
``--profile DIR`` samples every worker process with py-spy (raw stacks in DIR) and prints
the top entries of one process per side. ``--sql-times`` times every statement and every
`record_guesses` transaction the workers make (client side: p50, p99, p99.9 and max by kind):
what the statement and lock timeouts of `codemojex/db/engine.py` are chosen from.

Run: ``.venv/bin/python -m bench.pipeline --quick`` (under a minute) or without ``--quick``.
Needs the machine's Postgres (CODEMOJEX_BENCH_PG_ADMIN_URL, default
postgresql://postgres@127.0.0.1:5432/postgres); the database it creates is dropped after.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.common import (
    BENCH_DIR,
    background_rate,
    console,
    delete_matching,
    exit_cleanly_on_sigterm,
    make_client,
    percentile,
    print_table,
    redis_url,
    results_name,
    save_results,
    server_cost,
    server_counters,
    unique_queue,
)
from bench.lanes import Topology, _key_bytes, _used_memory
from codemojex import usecases
from codemojex.values import ids
from codemojex.values.jobs import GuessJob

PG_ADMIN_URL = os.environ.get(
    "CODEMOJEX_BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
LEASE_MS = 30_000


@dataclass(frozen=True)
class RoomSetup:
    room_id: str
    chat_id: int
    round_id: int
    palette: tuple[str, ...]
    secret: tuple[str, ...]
    players: tuple[tuple[int, str, str], ...]  # (Telegram user id, PLR id, name)


async def _admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def make_rooms(url: str, rooms: int, players: int, ceiling: int) -> list[RoomSetup]:
    from codemojex.db import make_engine, make_sessionmaker

    engine = make_engine(url, pool_size=8)
    sm = make_sessionmaker(engine)
    out: list[RoomSetup] = []
    todo = iter(range(rooms))

    async def build() -> None:
        for i in todo:
            chat_id = -100_000_000_000 - i
            room = await usecases.ensure_room(
                sm, chat_id, f"Bench {i}", default_ceiling=ceiling, round_timeout_s=3600
            )
            seats = []
            for k in range(players):
                uid = 7_000_000 + i * 100 + k
                name = f"P{i}-{k}"
                seats.append((uid, (await usecases.ensure_player(sm, room.id, uid, name)).id, name))
            rnd = await usecases.start_round(sm, room.id, random.Random(i))
            out.append(
                RoomSetup(
                    room.id, chat_id, rnd.id, rnd.palette_emojis, rnd.secret_emojis, tuple(seats)
                )
            )

    try:
        await asyncio.gather(*(build() for _ in range(8)))
    finally:
        await engine.dispose()
    return out


def _wrong_guess(rng: random.Random, room: RoomSetup) -> tuple[str, ...]:
    while True:
        guess = tuple(rng.choice(room.palette) for _ in room.secret)
        if guess != room.secret:
            return guess


async def enqueue_backlog(queue: str, rooms: list[RoomSetup], guesses: int, ceiling: int) -> float:
    """What the bot does per valid guess; returns the enqueue rate (guesses/s)."""
    from codemojex.lanes import Lanes

    client = make_client()
    lanes = Lanes(client, queue=queue)
    rng = random.Random(5)
    try:
        for room in rooms:
            await lanes.limit(room.room_id, ceiling)
        plan = []
        for n in range(guesses):
            room = rooms[n % len(rooms)]
            _uid, plr, _name = room.players[(n // len(rooms)) % len(room.players)]
            plan.append((room, plr, _wrong_guess(rng, room), n))
        todo = iter(plan)

        async def put() -> None:
            for room, plr, emojis, n in todo:
                payload = GuessJob(
                    round_id=room.round_id, message_id=10_000 + n, emojis=emojis
                ).encode()
                await lanes.enqueue(
                    room.room_id, plr, payload, job_id=ids.mint(ids.JOB), max_attempts=20
                )

        t0 = time.perf_counter()
        await asyncio.gather(*(put() for _ in range(32)))
        return guesses / (time.perf_counter() - t0)
    finally:
        await client.aclose()


# ---------------------------------------------------------------------------------------------
# Worker processes: bench/pipeline_worker.py run by the interpreter of the checkout measured


@dataclass(frozen=True)
class Code:
    """Which code the worker processes run: a checkout and its interpreter. Today's code runs
    on the interpreter running the benchmark (a checkout need not have a .venv of its own); a
    `--baseline` checkout on its own .venv's."""

    label: str
    root: Path
    interpreter: str | None = None

    @property
    def python(self) -> str:
        if self.interpreter is not None:
            return self.interpreter
        python = self.root / ".venv" / "bin" / "python"
        if not python.exists():
            raise FileNotFoundError(
                f"{self.label} checkout {self.root} has no .venv (make setup there first)"
            )
        return str(python)


TODAY = Code("today", BENCH_DIR.parent, sys.executable)
WORKER_SCRIPT = BENCH_DIR / "pipeline_worker.py"


def _cpu_s(pid: int) -> float:
    """utime + stime of a process (its threads included), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _backend_pids(conn: Any, db: str) -> list[int]:
    """The Postgres backends serving the benchmark's database (the workers' connections)."""
    rows = await conn.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", db
    )
    return [int(r["pid"]) for r in rows]


def _profile_top(path: Path, top: int = 15) -> list[tuple[str, float, float]]:
    """(function, self %, total %) of py-spy's collapsed stacks, the largest self first."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue  # a line py-spy was still writing when it was read
        n = int(count)
        samples += n
        frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].split(":")[0].rstrip(")")
                  for f in stack.split(";")[1:]]  # fmt: skip
        if not frames:
            continue
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            total[frame] = total.get(frame, 0) + n
    rows = sorted(own.items(), key=lambda kv: -kv[1])[:top]
    return [(f, 100 * n / samples, 100 * total[f] / samples) for f, n in rows]


async def _count_guesses(conn: Any) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM guesses"))


async def run_pipeline(
    topology: Topology,
    rooms: int,
    players: int,
    guesses: int,
    ceiling: int,
    bg: float,
    max_s: float = 300.0,
    metrics: bool = False,
    code: Code = TODAY,
    profile: Path | None = None,
    sql_times: bool = False,
) -> dict[str, Any]:
    """One timed run; it stops at `max_s` even if the backlog is not drained (guesses/s is
    then recorded / max_s, and `recorded` < `guesses` says so)."""
    import asyncpg

    from codemojex.db import upgrade

    db = "cmbench_" + uuid.uuid4().hex[:10]
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{db}"
    queue = unique_queue("pipe")
    client = make_client()
    await _admin(f'CREATE DATABASE "{db}"')
    try:
        await asyncio.to_thread(upgrade, url)
        console.print(f"[dim]{rooms:,} rooms x {players} players, open rounds ...[/]")
        setups = await make_rooms(url, rooms, players, ceiling)
        used0 = await _used_memory(client)
        console.print(f"[dim]enqueue {guesses:,} guesses ...[/]")
        enqueue_rate = await enqueue_backlog(queue, setups, guesses, ceiling)
        used1 = await _used_memory(client)
        key_bytes, job_bytes, keys = await _key_bytes(client, f"emq:{{{queue}}}:*")

        env = dict(os.environ, CODEMOJEX_CONCURRENCY=str(topology.consumers))
        env["PYTHONPATH"] = str(code.root)  # the worker runs the code of the checkout measured
        if sql_times:
            env["CODEMOJEX_BENCH_SQL_TIMES"] = "1"
        procs = [
            await asyncio.create_subprocess_exec(
                code.python,
                str(WORKER_SCRIPT),
                queue,
                url,
                redis_url(),
                "1" if metrics else "0",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                cwd=str(code.root),
                env=env,
                limit=1 << 26,  # the result line carries every wait
            )
            for _ in range(topology.procs)
        ]
        conn = await asyncpg.connect(f"{base}/{db}")
        spies: list[tuple[asyncio.subprocess.Process, Path]] = []
        outs: list[dict[str, Any]] = []
        try:
            for proc in procs:
                assert proc.stdout is not None
                line = await asyncio.wait_for(proc.stdout.readline(), 120)
                if line.strip() != b"ready":
                    raise RuntimeError(f"a worker did not start ({line!r})")
            if profile is not None:
                await asyncio.to_thread(profile.mkdir, parents=True, exist_ok=True)
                for n, proc in enumerate(procs):
                    out = profile / f"{code.label}-{topology.label}-{n}.txt"
                    spy = await asyncio.create_subprocess_exec(
                        str(Path(sys.executable).parent / "py-spy"), "record", "--pid",
                        str(proc.pid), "--rate", "200", "--format", "raw", "--nonblocking",
                        "-o", str(out), stdout=asyncio.subprocess.DEVNULL,
                        stderr=asyncio.subprocess.DEVNULL,
                    )  # fmt: skip
                    spies.append((spy, out))
                await asyncio.sleep(1.0)  # py-spy attaches
            backends = await _backend_pids(conn, db)
            background = await background_rate(client, bg)
            before = await server_counters(client)
            cpu0 = {
                "worker": sum(_cpu_s(p.pid) for p in procs),
                "postgres": sum(_cpu_s(pid) for pid in backends),
            }
            t_go = time.perf_counter()
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
                await proc.stdin.drain()
            done = 0
            deadline = t_go + max_s
            while time.perf_counter() < deadline:
                done = await _count_guesses(conn)
                if done >= guesses:
                    break
                await asyncio.sleep(0.05)
            seconds = time.perf_counter() - t_go
            after = await server_counters(client)
            backends = sorted(set(backends) | set(await _backend_pids(conn, db)))
            cpu = {
                "worker": sum(_cpu_s(p.pid) for p in procs) - cpu0["worker"],
                "postgres": sum(_cpu_s(pid) for pid in backends) - cpu0["postgres"],
            }
            outbox = int(await conn.fetchval("SELECT count(*) FROM outbox"))
        finally:
            for spy, _ in spies:
                spy.send_signal(signal.SIGINT)
            for spy, _ in spies:
                await asyncio.wait_for(spy.wait(), 30)
            for proc in procs:
                if proc.stdin is not None and proc.returncode is None:
                    proc.stdin.write(b"stop\n")
                    await proc.stdin.drain()
            for proc in procs:
                assert proc.stdout is not None
                line = await asyncio.wait_for(proc.stdout.readline(), 120)
                if line:
                    outs.append(json.loads(line))
                await asyncio.wait_for(proc.wait(), 30)
            await conn.close()
    finally:
        await delete_matching(client, f"emq:{{{queue}}}:*")
        await client.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    profiles = [_profile_top(out) for _, out in spies if out.exists()]
    waits = sorted(w for o in outs for w in o["wait_ms"])
    batches = sum(o["pool"].get("batches", 0) for o in outs)
    server = server_cost(before, after, background, done)
    return {
        "code": code.label,
        "topology": topology.label,
        "metrics": metrics,
        "consumers": topology.total,
        "rooms": rooms,
        "players_per_room": players,
        "ceiling": ceiling,
        "guesses": guesses,
        "recorded": done,
        "seconds": round(seconds, 3),
        "guesses_per_s": round(done / seconds, 1),
        "enqueue_per_s": round(enqueue_rate, 1),
        "guesses_per_batch": round(done / max(batches, 1), 2),
        "outbox_rows": outbox,
        "wait_p50_ms": percentile(waits, 50),
        "wait_p99_ms": percentile(waits, 99),
        "server": server.as_dict(),
        # CPU per guess: the worker processes, the Postgres backends serving them, Redis
        "cpu_us_per_guess": {
            "worker": round(cpu["worker"] * 1e6 / max(done, 1), 1),
            "postgres": round(cpu["postgres"] * 1e6 / max(done, 1), 1),
            "redis": round(server.cpu_us_per_job, 1),
        },
        "profile": profiles[0] if profiles else [],
        **({"sql_ms": _sql_summary(outs)} if sql_times else {}),
        "memory": {
            "keys": keys,
            "bytes_per_guess": round(key_bytes / guesses, 1),
            "job_record_bytes_per_guess": round(job_bytes / guesses, 1),
            "used_memory_delta_per_guess": round((used1 - used0) / guesses, 1),
        },
        "load1": round(os.getloadavg()[0], 2),
        "score": [o["score"] for o in outs],
        "pool": [o["pool"] for o in outs],
    }


def _sql_summary(outs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per kind of statement (and the record_guesses transaction): count, p50, p99, p99.9
    and max in ms, over every worker process of a run."""
    merged: dict[str, list[float]] = {}
    for out in outs:
        for kind, values in out.get("sql_ms", {}).items():
            merged.setdefault(kind, []).extend(values)
    summary = {}
    for kind, values in sorted(merged.items()):
        values.sort()
        summary[kind] = {
            "n": len(values),
            "p50": percentile(values, 50),
            "p99": percentile(values, 99),
            "p99.9": percentile(values, 99.9),
            "max": values[-1],
        }
    return summary


app = typer.Typer(add_completion=False, help=__doc__)


async def _main(
    quick: bool, rooms: int | None, players: int, guesses: int | None, configs: str | None,
    ceiling: int, out: str, metrics: bool = False, compare_metrics: int = 0,
    baseline: Path | None = None, repeat: int = 1, profile: Path | None = None,
    save: bool = False, sql_times: bool = False,
) -> None:  # fmt: skip
    rooms = rooms or (200 if quick else 1000)
    guesses = guesses or (2_000 if quick else 10_000)
    configs = configs if configs is not None else "2x8,2x32"
    bg = 0.2 if quick else 1.0
    runs = []
    # --compare-metrics N: each topology N times off, on, off, on, ... (the machine is noisy:
    # alternating spreads its moods over both sides)
    sides = [False, True] * compare_metrics if compare_metrics else [metrics]
    # --baseline PATH: each run once with that checkout's worker code, once with today's,
    # alternating (same harness, same setup, a fresh database each)
    codes = [Code("baseline", baseline), TODAY] if baseline else [TODAY]
    for label in [c.strip() for c in configs.split(",") if c.strip()]:
        topo = Topology.parse(label)
        for _ in range(repeat):
            for side in sides:
                for code in codes:
                    runs.append(
                        await run_pipeline(
                            topo, rooms, players, guesses, ceiling, bg,
                            40.0 if quick else 300.0, side, code, profile, sql_times,
                        )
                    )  # fmt: skip
    print_table(
        f"end to end: enqueue → wclaim → score → Postgres (+ outbox row) → ack, "
        f"{rooms:,} rooms, ceiling {ceiling}",
        (
            "code",
            "consumers",
            "metrics",
            "guesses",
            "guesses/s",
            "guesses/batch",
            "wait p50 ms",
            "wait p99 ms",
            "CPU µs/guess worker",
            "Postgres",
            "Redis",
            "Redis script µs/guess",
            "B/pending guess",
        ),
        (
            [
                r["code"],
                r["topology"],
                "on" if r["metrics"] else "off",
                r["recorded"],
                r["guesses_per_s"],
                r["guesses_per_batch"],
                r["wait_p50_ms"],
                r["wait_p99_ms"],
                r["cpu_us_per_guess"]["worker"],
                r["cpu_us_per_guess"]["postgres"],
                r["cpu_us_per_guess"]["redis"],
                r["server"]["script_us_per_job"],
                r["memory"]["bytes_per_guess"],
            ]
            for r in runs
        ),
    )
    if baseline:
        for label in dict.fromkeys(r["topology"] for r in runs):
            by_code = {
                code.label: sorted(r["guesses_per_s"] for r in runs
                                   if r["topology"] == label and r["code"] == code.label)
                for code in codes
            }  # fmt: skip
            old, new = (percentile(by_code[code.label], 50) for code in codes)
            console.print(
                f"{label}: baseline {by_code['baseline']} / today {by_code['today']} guesses/s; "
                f"median today/baseline = {new / old:.2f}"
            )
    if profile is not None:
        for code in codes:
            shown = next((r for r in runs if r["code"] == code.label and r["profile"]), None)
            if shown is None:
                continue
            print_table(
                f"py-spy, one worker process of {code.label} ({shown['topology']}): "
                "where its CPU goes (self %, total %)",
                ("function", "self %", "total %"),
                shown["profile"],
            )
    for r in runs:
        if "sql_ms" in r:
            print_table(
                f"statement times, ms, client side ({r['code']}, {r['topology']})",
                ("statement", "n", "p50", "p99", "p99.9", "max"),
                ([kind, *t.values()] for kind, t in r["sql_ms"].items()),
            )
    if compare_metrics:
        for label in {r["topology"] for r in runs}:
            rates = {
                side: sorted(r["guesses_per_s"] for r in runs
                             if r["topology"] == label and r["metrics"] is side)
                for side in (False, True)
            }  # fmt: skip
            off, on = (percentile(rates[side], 50) for side in (False, True))
            console.print(
                f"{label}: metrics off {rates[False]} / on {rates[True]} guesses/s; "
                f"median on/off = {on / off:.3f}"
            )
    save_results(
        out,
        "pipeline",
        save=save,
        runs=runs,
    )


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="small run, under a minute")] = False,
    rooms: Annotated[int | None, typer.Option(help="rooms (default 1,000; quick 200)")] = None,
    players: Annotated[int, typer.Option(help="players per room")] = 3,
    guesses: Annotated[int | None, typer.Option(help="backlog (default 10,000)")] = None,
    configs: Annotated[str | None, typer.Option(help="worker processes x consumers")] = None,
    ceiling: Annotated[int, typer.Option(help="every room's ceiling")] = 2,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[
        bool, typer.Option(help="write bench/results/pipeline.json, the run the repo keeps")
    ] = False,
    metrics: Annotated[
        bool, typer.Option(help="each worker serves /metrics, scraped every second")
    ] = False,
    compare_metrics: Annotated[
        int, typer.Option(help="N alternating runs with metrics off and on, side by side")
    ] = 0,
    baseline: Annotated[
        Path | None,
        typer.Option(help="another checkout (with its .venv): its worker code side by side"),
    ] = None,
    repeat: Annotated[int, typer.Option(help="runs of each topology (and side)")] = 1,
    profile: Annotated[
        Path | None, typer.Option(help="py-spy every worker process; stacks in this folder")
    ] = None,
    sql_times: Annotated[
        bool, typer.Option(help="time every statement and record_guesses transaction")
    ] = False,
) -> None:
    name = results_name("pipeline", out, save=save, scratch="pipeline-quick" if quick else None)
    asyncio.run(
        _main(quick, rooms, players, guesses, configs, ceiling, name, metrics, compare_metrics,
              baseline.resolve() if baseline else None, repeat, profile, save, sql_times)
    )  # fmt: skip


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
