"""Benchmark 4: the real worker pool end to end, in guesses/s, and Redis memory per pending guess.

Setup (not timed): a fresh Postgres database migrated with Alembic, N rooms each with an
open round and a few players (created through codemojex.db.store, as the bot does), every
room's ceiling set on its lanes (as the bot does), then a backlog of wrong guesses (valid
GuessJob payloads from each round's palette) enqueued into the players' lanes. With the
backlog in Redis, the memory of the queue's keys is measured (MEMORY USAGE) per pending guess.

Timed: worker processes each run the real `ConsumerPool` with the real `ScoreWorker`
(wclaim batches; the batches in hand recorded together by record_guesses in one transaction
with their outbox rows, i.e. group commit; ack_many),
from a common start signal until Postgres holds every guess. guesses/s = guesses / that time.

Run: ``.venv/bin/python -m bench.pipeline --quick`` (under a minute) or without ``--quick``.
Needs the machine's Postgres (CODEMOJEX_BENCH_PG_ADMIN_URL, default
postgresql://postgres@127.0.0.1:5432/postgres); the database it creates is dropped after.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import random
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
    machine,
    make_client,
    percentile,
    print_table,
    server_cost,
    server_counters,
    unique_queue,
    write_results,
)
from bench.lanes import Topology, _key_bytes, _used_memory, collect
from codemojex import ids
from codemojex.jobs import GuessJob

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
    from codemojex.db import make_engine, make_sessionmaker, store

    engine = make_engine(url, pool_size=8)
    sm = make_sessionmaker(engine)
    out: list[RoomSetup] = []
    todo = iter(range(rooms))

    async def build() -> None:
        for i in todo:
            chat_id = -100_000_000_000 - i
            async with sm() as s:
                room = await store.ensure_room(
                    s, chat_id, f"Bench {i}", default_ceiling=ceiling, round_timeout_s=3600
                )
            seats = []
            for k in range(players):
                uid = 7_000_000 + i * 100 + k
                name = f"P{i}-{k}"
                async with sm() as s:
                    seats.append((uid, (await store.ensure_player(s, room.id, uid, name)).id, name))
            async with sm() as s:
                rnd = await store.start_round(s, room.id, random.Random(i))
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
# Worker processes: the real ConsumerPool + ScoreWorker


def _worker_proc(queue: str, url: str, concurrency: int, ready: Any, go: Any, stop: Any,
                 results: Any, metrics: bool = False) -> None:  # fmt: skip
    results.put(asyncio.run(_worker_main(queue, url, concurrency, ready, go, stop, metrics)))


async def _scrape_every_second(port: int) -> None:
    """A Prometheus 15 times as eager as its default: /metrics once a second."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
                await r.read()
            await asyncio.sleep(1.0)


async def _worker_main(
    queue: str, url: str, concurrency: int, ready: Any, go: Any, stop: Any, metrics: bool = False
) -> dict[str, Any]:
    from codemojex.db import make_engine, make_sessionmaker
    from codemojex.lanes import Lanes
    from codemojex.lanes.consumer import ConsumerPool
    from codemojex.worker.score import ScoreWorker

    client = make_client(max_connections=concurrency * 2 + 8)
    engine = make_engine(url, pool_size=concurrency + 2, max_overflow=4)
    try:
        lanes = Lanes(client, queue=queue)
        worker = ScoreWorker(make_sessionmaker(engine))
        pool = ConsumerPool(lanes, worker, concurrency=concurrency, lease_ms=LEASE_MS)
        ops, scraper = None, None
        if metrics:  # what `codemojex worker` runs with CODEMOJEX_METRICS_PORT set
            from codemojex.db import make_sessionmaker as sessions
            from codemojex.ops.collect import WorkerCollector
            from codemojex.ops.server import ProcessOps
            from codemojex.settings import Settings
            from codemojex.worker.service import WorkerStats

            settings = Settings(queue=queue, database_url=url, metrics_port=_free_port())
            stats = WorkerStats(score=worker.stats, pool=pool.stats)
            ops = ProcessOps("worker", settings, redis=client, engine=engine,
                             sessionmaker=sessions(engine), lanes=lanes,
                             collectors=[WorkerCollector(stats)])  # fmt: skip
            await ops.start()
        async with engine.connect():  # open one connection before the clock starts
            pass
        ready.wait()
        await asyncio.to_thread(go.wait)
        runner = asyncio.create_task(pool.run())
        if ops is not None and ops.port is not None:
            scraper = asyncio.create_task(_scrape_every_second(ops.port))
        await asyncio.to_thread(stop.wait)
        pool.stop()
        await asyncio.wait_for(runner, 60)
        if scraper is not None:
            scraper.cancel()
        if ops is not None:
            await ops.stop()
        waits = sorted(worker.stats.wait_ms)
        return {
            "score": worker.stats.as_dict(),
            "pool": pool.stats.as_dict(),
            "wait_ms": waits,
        }
    finally:
        await engine.dispose()
        await client.aclose()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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

        ctx = mp.get_context("spawn")
        ready = ctx.Barrier(topology.procs + 1)
        go, stop = ctx.Event(), ctx.Event()
        results = ctx.Queue()
        procs = [
            ctx.Process(
                target=_worker_proc,
                args=(queue, url, topology.consumers, ready, go, stop, results, metrics),
                daemon=True,
            )
            for _ in range(topology.procs)
        ]
        for proc in procs:
            proc.start()
        conn = await asyncpg.connect(f"{base}/{db}")
        try:
            await asyncio.to_thread(ready.wait, 120)
            background = await background_rate(client, bg)
            before = await server_counters(client)
            t_go = time.perf_counter()
            go.set()
            done = 0
            deadline = t_go + max_s
            while time.perf_counter() < deadline:
                done = await _count_guesses(conn)
                if done >= guesses:
                    break
                await asyncio.sleep(0.1)
            seconds = time.perf_counter() - t_go
            after = await server_counters(client)
            outbox = int(await conn.fetchval("SELECT count(*) FROM outbox"))
        finally:
            stop.set()
            outs = await collect(results, procs, 120)
            for proc in procs:
                proc.join(10)
                if proc.is_alive():
                    proc.kill()
            await conn.close()
    finally:
        await delete_matching(client, f"emq:{{{queue}}}:*")
        await client.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    waits = sorted(w for o in outs for w in o["wait_ms"])
    batches = sum(o["pool"].get("batches", 0) for o in outs)
    return {
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
        "server": server_cost(before, after, background, done).as_dict(),
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


app = typer.Typer(add_completion=False, help=__doc__)


async def _main(
    quick: bool, rooms: int | None, players: int, guesses: int | None, configs: str | None,
    ceiling: int, out: str | None, metrics: bool = False, compare_metrics: int = 0,
) -> None:  # fmt: skip
    rooms = rooms or (200 if quick else 1000)
    guesses = guesses or (2_000 if quick else 10_000)
    configs = configs if configs is not None else "2x8,2x32"
    bg = 0.2 if quick else 1.0
    runs = []
    # --compare-metrics N: each topology N times off, on, off, on, ... (the machine is noisy:
    # alternating spreads its moods over both sides)
    sides = [False, True] * compare_metrics if compare_metrics else [metrics]
    for label in [c.strip() for c in configs.split(",") if c.strip()]:
        topo = Topology.parse(label)
        for side in sides:
            runs.append(
                await run_pipeline(
                    topo, rooms, players, guesses, ceiling, bg, 40.0 if quick else 300.0, side
                )
            )
    print_table(
        f"end to end: enqueue → wclaim → score → Postgres (+ outbox row) → ack_many, "
        f"{rooms:,} rooms, ceiling {ceiling}",
        (
            "consumers",
            "metrics",
            "guesses",
            "guesses/s",
            "guesses/batch",
            "outbox rows",
            "wait p50 ms",
            "wait p99 ms",
            "Redis script µs/guess",
            "B/pending guess",
            "enqueue/s",
        ),
        (
            [
                r["topology"],
                "on" if r["metrics"] else "off",
                r["recorded"],
                r["guesses_per_s"],
                r["guesses_per_batch"],
                r["outbox_rows"],
                r["wait_p50_ms"],
                r["wait_p99_ms"],
                r["server"]["script_us_per_job"],
                r["memory"]["bytes_per_guess"],
                r["enqueue_per_s"],
            ]
            for r in runs
        ),
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
    path = write_results(
        out or ("pipeline-quick" if quick else "pipeline"),
        {
            "benchmark": "pipeline",
            "command": " ".join([Path(sys.executable).name, "-m", "bench.pipeline", *sys.argv[1:]]),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine(),
            "runs": runs,
        },
    )
    console.print(f"results: {path.relative_to(BENCH_DIR.parent)}")


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="small run, under a minute")] = False,
    rooms: Annotated[int | None, typer.Option(help="rooms (default 1,000; quick 200)")] = None,
    players: Annotated[int, typer.Option(help="players per room")] = 3,
    guesses: Annotated[int | None, typer.Option(help="backlog (default 10,000)")] = None,
    configs: Annotated[str | None, typer.Option(help="worker processes x consumers")] = None,
    ceiling: Annotated[int, typer.Option(help="every room's ceiling")] = 2,
    out: Annotated[str | None, typer.Option(help="bench/results/NAME.json")] = None,
    metrics: Annotated[
        bool, typer.Option(help="each worker serves /metrics, scraped every second")
    ] = False,
    compare_metrics: Annotated[
        int, typer.Option(help="N alternating runs with metrics off and on, side by side")
    ] = 0,
) -> None:
    asyncio.run(
        _main(quick, rooms, players, guesses, configs, ceiling, out, metrics, compare_metrics)
    )


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
