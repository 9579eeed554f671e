"""Benchmark 3: what a flood does to the quiet rooms, lanes against the plain FIFO.

200 quiet rooms each send a guess every second (staggered), while one room floods 10,000
guesses from 50 players at once (from a process of its own, like the bot). Every room has a
ceiling (2 by default). A fixed pool of consumers scores each guess with a fixed service
time (asyncio.sleep), so the pool is the bottleneck once the flood lands. Measured, per queue:

- the quiet rooms' enqueue-to-done latency (p50, p99, max) without the flood (baseline run)
  and during the flood (guesses enqueued between the flood's start and its last completion);
- the flood room's share of all completions during the flood;
- Jain's fairness index over rooms of x_i = (guesses of room i completed within the flood
  window) / (guesses room i offered within it): 1.0 when every room is served as fast as it
  asks, ~1/n when one room takes the pool.

Queues: ``lanes`` (wclaim + ack_many, the worker's loop, ceiling on every room),
``lanes-nocap`` (the same without ceilings: the rotation alone), and ``fifo`` (bench/fifo.py:
no rooms, no ceilings). The quiet producer and the consumers share one process and one event
loop, the flood comes from a second process; every queue runs the same way.

Run: ``.venv/bin/python -m bench.fairness --quick`` (under a minute) or without ``--quick``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import multiprocessing as mp
import os
import queue as queue_mod
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bench.common import (
    console,
    delete_matching,
    exit_cleanly_on_sigterm,
    guess_payload,
    jain_index,
    make_client,
    maybe_private_redis,
    percentile,
    print_table,
    redis_url,
    results_name,
    save_results,
    unique_queue,
)
from bench.fifo import Fifo, FifoJob
from codemojex.values import ids

if TYPE_CHECKING:
    import redis.asyncio as aioredis

LEASE_MS = 60_000
QUEUES = ("lanes", "lanes-nocap", "fifo")


@dataclass(frozen=True)
class Params:
    quiet_rooms: int
    quiet_players: int
    quiet_interval_s: float
    flood_guesses: int
    flood_players: int
    ceiling: int
    service_ms: float
    consumers: int
    baseline_s: float
    flood_at_s: float
    max_s: float


class _Queue:
    """The two queues behind one small interface: take a batch, finish it, park, put."""

    pattern: str  # the keys to delete after the run

    async def put(self, room: str, lane: str, job_id: str, payload: bytes) -> None:
        raise NotImplementedError

    async def take(self) -> list[tuple[str, Any]]:
        raise NotImplementedError

    async def done(self, batch: list[tuple[str, Any]]) -> None:
        raise NotImplementedError

    async def park(self, timeout_s: float) -> None:
        raise NotImplementedError

    async def limit(self, room: str, n: int) -> None:
        return None


class _LanesQueue(_Queue):
    def __init__(self, client: aioredis.Redis, queue: str) -> None:
        from codemojex.lanes import Lanes

        self.lanes = Lanes(client, queue=queue)
        self.pattern = f"emq:{{{queue}}}:*"

    async def put(self, room: str, lane: str, job_id: str, payload: bytes) -> None:
        await self.lanes.enqueue(room, lane, payload, job_id=job_id)

    async def take(self) -> list[tuple[str, Any]]:
        return [(job.id, job) for job in await self.lanes.wclaim(LEASE_MS)]

    async def done(self, batch: list[tuple[str, Any]]) -> None:
        await self.lanes.ack_many([job for _, job in batch])

    async def park(self, timeout_s: float) -> None:
        await self.lanes.park(timeout_s)

    async def limit(self, room: str, n: int) -> None:
        await self.lanes.limit(room, n)


class _FifoQueue(_Queue):
    def __init__(self, client: aioredis.Redis, queue: str) -> None:
        self.client = client
        self.fifo = Fifo(client, queue)
        self.pattern = self.fifo.pattern

    async def put(self, room: str, lane: str, job_id: str, payload: bytes) -> None:
        await self.fifo.enqueue(job_id, payload)

    async def take(self) -> list[tuple[str, Any]]:
        job = await self.fifo.claim(LEASE_MS)
        return [] if job is None else [(job.id, job)]

    async def done(self, batch: list[tuple[str, Any]]) -> None:
        for _, job in batch:
            assert isinstance(job, FifoJob)
            await self.fifo.ack(job)

    async def park(self, timeout_s: float) -> None:
        await self.client.blpop([self.fifo.wake_key], timeout=timeout_s)


@dataclass
class _Log:
    """Who enqueued what when, and when it was done (time.monotonic seconds)."""

    room_of: dict[str, int] = field(default_factory=dict)
    enq: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)


FLOOD = -1  # room index of the flooding room in the log


async def _consumer(
    q: _Queue, log: _Log, service_s: float, stop: asyncio.Event, errors: list[str]
) -> None:
    while not stop.is_set():
        try:
            batch = await q.take()
            if not batch:
                await q.park(0.05)
                continue
            # The scoring handler: a fixed service time per guess.
            await asyncio.sleep(service_s * len(batch))
            await q.done(batch)
        except Exception as exc:  # a benchmark reports and goes on; it must stop by itself
            errors.append(repr(exc))
            await asyncio.sleep(0.01)
            continue
        now = time.monotonic()
        for job_id, _ in batch:
            log.done[job_id] = now


async def _put(q: _Queue, log: _Log, room_idx: int, room: str, lane: str, i: int) -> None:
    job_id = ids.mint("JOB")
    log.room_of[job_id] = room_idx
    log.enq[job_id] = time.monotonic()
    await q.put(room, lane, job_id, guess_payload(i))


async def _quiet_producer(
    q: _Queue, log: _Log, rooms: list[tuple[str, list[str]]], p: Params, until: float
) -> None:
    """Each quiet room sends one guess per interval, the rooms staggered evenly."""
    step = p.quiet_interval_s / len(rooms)
    start = time.monotonic()
    k = 0
    while True:
        due = start + k * step
        if due >= until:
            return
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        idx = k % len(rooms)
        room, lanes = rooms[idx]
        await _put(q, log, idx, room, lanes[(k // len(rooms)) % len(lanes)], k)
        k += 1


async def _flood(q: _Queue, log: _Log, room: str, lanes: list[str], n: int) -> None:
    counter = iter(range(n))

    async def pusher() -> None:
        for i in counter:
            await _put(q, log, FLOOD, room, lanes[i % len(lanes)], i)

    await asyncio.gather(*(pusher() for _ in range(16)))


def _flood_proc(
    kind: str, queue: str, room: str, lanes: list[str], n: int, ready: Any, go: Any, out: Any
) -> None:
    out.put(asyncio.run(_flood_main(kind, queue, room, lanes, n, ready, go)))


async def _flood_main(
    kind: str, queue: str, room: str, lanes: list[str], n: int, ready: Any, go: Any
) -> dict[str, float]:
    """The flooding room's players, in a process of their own (in production they reach
    another process, the bot): the burst does not eat the consumers' event loop."""
    client = make_client(max_connections=24)
    try:
        q: _Queue = _FifoQueue(client, queue) if kind == "fifo" else _LanesQueue(client, queue)
        await client.ping()
        ready.set()
        await asyncio.to_thread(go.wait)
        log = _Log()
        await _flood(q, log, room, lanes, n)
        return log.enq  # job id -> enqueue time (CLOCK_MONOTONIC: the same in every process)
    finally:
        await client.aclose()


async def run_once(kind: str, with_flood: bool, p: Params) -> dict[str, Any]:
    client = make_client(max_connections=p.consumers + 32)
    queue = unique_queue("fair")
    q: _Queue = _FifoQueue(client, queue) if kind == "fifo" else _LanesQueue(client, queue)
    pattern = q.pattern
    quiet = [
        (ids.mint("ROM"), [ids.mint("PLR") for _ in range(p.quiet_players)])
        for _ in range(p.quiet_rooms)
    ]
    flood_room, flood_lanes = ids.mint("ROM"), [ids.mint("PLR") for _ in range(p.flood_players)]
    log = _Log()
    errors: list[str] = []
    stop = asyncio.Event()
    ctx = mp.get_context("spawn")
    ready, go, flood_out = ctx.Event(), ctx.Event(), ctx.Queue()
    flooder = None
    producer: asyncio.Task[None] | None = None
    try:
        if kind == "lanes":
            for room, _ in [*quiet, (flood_room, flood_lanes)]:
                await q.limit(room, p.ceiling)
        if with_flood:
            flooder = ctx.Process(
                target=_flood_proc,
                args=(kind, queue, flood_room, flood_lanes, p.flood_guesses, ready, go, flood_out),
                daemon=True,
            )
            flooder.start()
            await asyncio.to_thread(ready.wait, 60)
        consumers = [
            asyncio.create_task(_consumer(q, log, p.service_ms / 1000, stop, errors))
            for _ in range(p.consumers)
        ]
        t0 = time.monotonic()
        hard_stop = t0 + p.max_s
        if with_flood:
            # The quiet rooms keep sending until the flood is done (checked below).
            producer = asyncio.create_task(_quiet_producer(q, log, quiet, p, hard_stop))
            await asyncio.sleep(p.flood_at_s)
            t_flood = time.monotonic()
            go.set()
            flood_ids: list[str] = []
            while time.monotonic() < hard_stop - 2:
                await asyncio.sleep(0.1)
                if not flood_ids:
                    try:
                        enq: dict[str, float] = flood_out.get_nowait()
                    except queue_mod.Empty:
                        continue
                    for job_id, at in enq.items():
                        log.room_of[job_id] = FLOOD
                        log.enq[job_id] = at
                    flood_ids = list(enq)
                if all(j in log.done for j in flood_ids):
                    break
            await asyncio.sleep(min(1.0, max(hard_stop - time.monotonic(), 0)))
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        else:
            t_flood = t0
            await _quiet_producer(q, log, quiet, p, t0 + p.baseline_s)
        # Drain what is in the queue (bounded), then stop the pool.
        drain_until = min(time.monotonic() + 10, hard_stop + 10)
        # A poll of counters the consumers update: cheaper than an Event per job.
        while time.monotonic() < drain_until and len(log.done) < len(log.enq):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*consumers, return_exceptions=True)
    finally:
        stop.set()
        if producer is not None and not producer.done():
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        if flooder is not None:
            flooder.join(5)
            if flooder.is_alive():
                flooder.kill()
        await delete_matching(client, pattern)
        # A killed flooder's last commands may still sit in Redis's input buffer: sweep again.
        await asyncio.sleep(0.5)
        await delete_matching(client, pattern)
        await client.aclose()
    return _analyse(kind, with_flood, p, log, t0, t_flood, errors)


def _analyse(
    kind: str,
    with_flood: bool,
    p: Params,
    log: _Log,
    t0: float,
    t_flood: float,
    errors: list[str],
) -> dict[str, Any]:
    flood_ids = [j for j, r in log.room_of.items() if r == FLOOD]
    if with_flood:
        done_flood = [log.done[j] for j in flood_ids if j in log.done]
        window = (t_flood, max(done_flood) if done_flood else time.monotonic())
    else:
        window = (t0 + 1.0, t0 + p.baseline_s)  # the first second warms the pool up
    lo, hi = window
    quiet_lat: list[float] = []
    unfinished = 0
    offered: dict[int, int] = {}
    served: dict[int, int] = {}
    completions = 0
    flood_completions = 0
    for job_id, room in log.room_of.items():
        enq = log.enq[job_id]
        done = log.done.get(job_id)
        if done is not None and lo <= done <= hi:
            completions += 1
            flood_completions += room == FLOOD
        if not lo <= enq <= hi:
            continue
        offered[room] = offered.get(room, 0) + 1
        if done is not None and done <= hi:
            served[room] = served.get(room, 0) + 1
        if room != FLOOD:
            if done is None:
                unfinished += 1
            else:
                quiet_lat.append((done - enq) * 1000)
    quiet_lat.sort()
    shares = [served.get(room, 0) / n for room, n in offered.items()]
    return {
        "queue": kind,
        "flood": with_flood,
        "window_s": round(hi - lo, 3),
        "quiet_guesses": len(quiet_lat),
        "quiet_unfinished": unfinished,
        "p50_ms": round(percentile(quiet_lat, 50), 2),
        "p99_ms": round(percentile(quiet_lat, 99), 2),
        "max_ms": round(quiet_lat[-1], 2) if quiet_lat else math.nan,
        "flood_share": round(flood_completions / completions, 4) if completions else math.nan,
        "jain": round(jain_index(shares), 4),
        "completions_per_s": round(completions / (hi - lo), 1) if hi > lo else math.nan,
        "flood_drain_s": round(hi - lo, 3) if with_flood else None,
        "errors": errors[:5],
        "error_count": len(errors),
        "load1": round(os.getloadavg()[0], 2),
        # The distribution for the plots, as 1,001 quantiles (0, 0.1, ..., 100 %): the whole
        # list would make the JSON megabytes long.
        "quiet_latency_quantiles_ms": quantiles(quiet_lat),
    }


def quantiles(sorted_ms: list[float]) -> list[float]:
    if not sorted_ms:
        return []
    return [round(percentile(sorted_ms, q / 10), 2) if q else round(sorted_ms[0], 2)
            for q in range(1001)]  # fmt: skip


app = typer.Typer(add_completion=False, help=__doc__)


async def _main(p: Params, queues: list[str], out: str, save: bool = False) -> None:
    runs: list[dict[str, Any]] = []
    # A short discarded run first: the first run of a process came out slower (imports,
    # script loading, connection set-up) and would skew its queue's no-flood baseline.
    console.print("[dim]warm-up ...[/]")
    await run_once(queues[0], False, dataclasses.replace(p, baseline_s=2.0))
    for kind in queues:
        for with_flood in (False, True):
            label = "with flood" if with_flood else "baseline"
            console.print(f"[dim]{kind}: {label} ...[/]")
            runs.append(await run_once(kind, with_flood, p))
    base = {r["queue"]: r for r in runs if not r["flood"]}
    rows = []
    for r in runs:
        ratio = r["p99_ms"] / base[r["queue"]]["p99_ms"] if r["flood"] else math.nan
        rows.append(
            [
                r["queue"],
                "flood" if r["flood"] else "baseline",
                r["quiet_guesses"],
                r["p50_ms"],
                r["p99_ms"],
                r["max_ms"],
                ratio,
                r["flood_share"] if r["flood"] else math.nan,
                r["jain"],
                r["completions_per_s"],
                r["window_s"],
                r["error_count"],
            ]
        )
    print_table(
        f"quiet rooms' enqueue-to-done latency, {p.quiet_rooms} quiet rooms at "
        f"1 guess/{p.quiet_interval_s:g}s, flood {p.flood_guesses:,} guesses / "
        f"{p.flood_players} players, ceiling {p.ceiling}, {p.consumers} consumers, "
        f"service {p.service_ms:g} ms",
        (
            "queue",
            "run",
            "quiet guesses",
            "p50 ms",
            "p99 ms",
            "max ms",
            "p99 / baseline",
            "flood share",
            "Jain",
            "done/s",
            "window s",
            "errors",
        ),
        rows,
    )
    save_results(
        out,
        "fairness",
        save=save,
        params=p.__dict__,
        redis=redis_url(),
        runs=runs,
    )


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="small runs, under a minute")] = False,
    quiet_rooms: Annotated[int, typer.Option()] = 200,
    flood: Annotated[int | None, typer.Option(help="flood guesses")] = None,
    flood_players: Annotated[int, typer.Option()] = 50,
    ceiling: Annotated[int, typer.Option(help="ceiling on every room (lanes)")] = 2,
    service_ms: Annotated[float, typer.Option(help="scoring time per guess")] = 4.0,
    consumers: Annotated[int, typer.Option(help="consumer pool size")] = 8,
    baseline_s: Annotated[float | None, typer.Option(help="length of the baseline run")] = None,
    max_s: Annotated[float | None, typer.Option(help="hard stop of a flood run")] = None,
    queues: Annotated[str, typer.Option(help="subset of lanes,lanes-nocap,fifo")] = ",".join(
        QUEUES
    ),
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[
        bool, typer.Option(help="write bench/results/fairness.json, the run the repo keeps")
    ] = False,
    private: Annotated[
        bool, typer.Option(help="a throwaway redis-server instead of the shared one")
    ] = False,
) -> None:
    p = Params(
        quiet_rooms=quiet_rooms,
        quiet_players=2,
        quiet_interval_s=1.0,
        flood_guesses=flood if flood is not None else (1_000 if quick else 10_000),
        flood_players=flood_players,
        ceiling=ceiling,
        service_ms=service_ms,
        consumers=consumers,
        baseline_s=baseline_s if baseline_s is not None else (3.0 if quick else 10.0),
        flood_at_s=1.0 if quick else 2.0,
        max_s=max_s if max_s is not None else (12.0 if quick else 90.0),
    )
    wanted = [k.strip() for k in queues.split(",") if k.strip()]
    name = results_name("fairness", out, save=save, scratch="fairness-quick" if quick else None)
    with maybe_private_redis(private):
        asyncio.run(_main(p, wanted, name, save))


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
