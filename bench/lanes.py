"""Benchmark 1 (+2): claim/ack throughput and Redis server cost per job.

Rows, at equal concurrency on the same Redis and the same redis-py asyncio client:

- ``fifo``    the plain reliable FIFO of bench/fifo.py (one claim + one ack script per job);
- ``claim``   lanes ``claim`` + ``ack`` (one job per round trip each way);
- ``wclaim``  lanes ``wclaim`` with every lane at weight 8 + ``ack_many`` (8 jobs per round trip);
- ``fused``   the same batches, each acked by the call that claims the next one (``ack_wclaim``,
  the consumer pool's loop): one round trip per batch instead of two;
- ``groupmq`` the npm package GroupMQ driven from Node (bench/groupmq/run.mjs), same jobs and
  groups (group = room), same concurrency; its row is a peer, not our code.

Consumers run in child processes (1 process x C consumers, or 2 processes x 8) and start
together after the preload; the clock runs from the start signal to the last ack. Redis
server time per job comes from ``INFO commandstats`` deltas (usec of script calls, which
include the commands they run) and ``INFO cpu`` deltas, minus the background rate sampled
just before (other people's tests share this Redis).

The room sweep repeats the lanes rows with 100 ... 100,000 rooms. The ring must really hold
that many rooms during the timed window, so when rooms x 8 exceeds the job count the first
``jobs / 8`` rooms (first on the ring) hold 8 jobs and every other room holds one "filler" job
that the window never reaches; the run stops at the job quota and the leftovers are deleted.

Run: ``.venv/bin/python -m bench.lanes --quick`` (under a minute) or without ``--quick``.
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing as mp
import os
import queue
import resource
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bench.common import (
    BENCH_DIR,
    ServerCounters,
    background_rate,
    console,
    delete_matching,
    exit_cleanly_on_sigterm,
    guess_payload,
    make_client,
    maybe_private_redis,
    print_table,
    redis_url,
    results_name,
    save_results,
    server_cost,
    server_counters,
    unique_queue,
)
from bench.fifo import Fifo
from codemojex.values import ids

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from codemojex.lanes import Lanes

LANE_MODES = ("claim", "wclaim", "fused")
SWEEP_MODES = ("claim", "wclaim")  # the room sweep: one batched row is enough
WEIGHTED = ("wclaim", "fused")
ALL_MODES = ("fifo", "claim", "wclaim", "fused", "groupmq")
LEASE_MS = 60_000
GROUPMQ_DIR = BENCH_DIR / "groupmq"


@dataclass(frozen=True)
class Topology:
    procs: int
    consumers: int  # per process

    @property
    def label(self) -> str:
        return f"{self.procs}x{self.consumers}" if self.procs > 1 else str(self.consumers)

    @property
    def total(self) -> int:
        return self.procs * self.consumers

    @classmethod
    def parse(cls, text: str) -> Topology:
        if "x" in text:
            procs, consumers = text.split("x", 1)
            return cls(int(procs), int(consumers))
        return cls(1, int(text))


@dataclass
class RunResult:
    mode: str
    topology: str
    consumers: int
    rooms: int
    jobs: int
    seconds: float
    jobs_per_s: float
    jobs_per_claim: float
    client_cpu_us_per_job: float
    server: dict[str, float] = field(default_factory=dict)
    note: str = ""
    load1: float = 0.0  # the machine's 1-minute load average when the run ended


# ---------------------------------------------------------------------------------------------
# Job layout for the lanes rows


@dataclass(frozen=True)
class Layout:
    """Which room/lane gets how many jobs, in enqueue (hence ring) order."""

    lanes: list[tuple[str, str, int]]  # (room, lane, jobs)
    hot_lanes: list[str]  # lanes the timed window serves (they get the weight)
    total: int

    @classmethod
    def plan(cls, rooms: int, jobs: int, batch: int, lanes_per_room: int) -> Layout:
        out: list[tuple[str, str, int]] = []
        hot: list[str] = []
        if jobs <= rooms * batch:
            hot_rooms = math.ceil(jobs / batch)
            for i in range(rooms):
                room, lane = ids.mint("ROM"), ids.mint("PLR")
                out.append((room, lane, batch if i < hot_rooms else 1))
                if i < hot_rooms:
                    hot.append(lane)
        else:
            depth = math.ceil(jobs / (rooms * lanes_per_room) / batch) * batch
            for _ in range(rooms):
                room = ids.mint("ROM")
                for _ in range(lanes_per_room):
                    lane = ids.mint("PLR")
                    out.append((room, lane, depth))
                    hot.append(lane)
        return cls(out, hot, sum(n for _, _, n in out))

    def jobs(self) -> Iterator[tuple[str, str]]:
        for room, lane, n in self.lanes:
            for _ in range(n):
                yield room, lane


async def _bounded(items: Iterator[Any], worker: Any, concurrency: int) -> None:
    async def run() -> None:
        for item in items:
            await worker(item)

    await asyncio.gather(*(run() for _ in range(concurrency)))


async def preload_lanes(lanes: Lanes, layout: Layout, weight: int) -> None:
    payloads = [guess_payload(i) for i in range(512)]
    counter = iter(range(layout.total))

    async def put(item: tuple[str, str]) -> None:
        await lanes.enqueue(item[0], item[1], payloads[next(counter) % len(payloads)])

    await _bounded(layout.jobs(), put, 48)
    if weight > 1:

        async def weigh(lane: str) -> None:
            await lanes.weight(lane, weight)

        await _bounded(iter(layout.hot_lanes), weigh, 48)


async def preload_fifo(fifo: Fifo, jobs: int) -> None:
    payloads = [guess_payload(i) for i in range(512)]
    for start in range(0, jobs, 1000):
        batch = [
            (ids.mint("JOB"), payloads[i % len(payloads)])
            for i in range(start, min(jobs, start + 1000))
        ]
        await fifo.enqueue_many(batch)


# ---------------------------------------------------------------------------------------------
# Consumer processes


@dataclass(frozen=True)
class ChildSpec:
    mode: str
    queue: str
    consumers: int
    quota: int


class _Quota:
    """A job budget shared by all consumer processes, so a window can stop short of the
    filler jobs; otherwise the consumers stop when the queue answers empty.

    Lock-free: each process counts in its own slot of a shared array and reads the sum. A
    multiprocessing lock here would be a blocking call in the event loop on every claim, and
    when the two processes contend for it, it stalls every consumer of one of them: the
    harness would slow the fastest queue most."""

    def __init__(self, slots: Any, slot: int, quota: int) -> None:
        self._slots = slots
        self._slot = slot
        self._quota = quota

    def reached(self) -> bool:
        return int(sum(self._slots)) >= self._quota

    def add(self, n: int) -> None:
        self._slots[self._slot] += n  # only this process writes its slot


def _child(
    spec: ChildSpec,
    slots: Any,
    slot: int,
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    results.put(asyncio.run(_child_main(spec, _Quota(slots, slot, spec.quota), ready, go)))


async def _child_main(spec: ChildSpec, quota: _Quota, ready: Any, go: Any) -> dict[str, Any]:
    client = make_client(max_connections=spec.consumers + 4)
    try:
        await client.ping()
        worker = await _make_consumer(spec, client)
        ready.wait()
        await asyncio.to_thread(go.wait)
        cpu0 = _cpu_seconds()
        t0 = time.time()
        outcomes = await asyncio.gather(*(worker(quota) for _ in range(spec.consumers)))
        jobs = sum(j for j, _, _ in outcomes)
        claims = sum(c for _, c, _ in outcomes)
        last = max((t for _, _, t in outcomes if t), default=t0)
        return {
            "jobs": jobs,
            "claims": claims,
            "t0": t0,
            "last": last,
            "cpu_s": _cpu_seconds() - cpu0,
        }
    finally:
        await client.aclose()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _make_consumer(spec: ChildSpec, client: aioredis.Redis) -> Any:
    if spec.mode == "fifo":
        fifo = Fifo(client, spec.queue)
        await fifo.load_scripts()

        async def fifo_loop(quota: _Quota) -> tuple[int, int, float]:
            jobs = 0
            last = 0.0
            while not quota.reached():
                job = await fifo.claim(LEASE_MS)
                if job is None:
                    break
                await fifo.ack(job)
                jobs += 1
                last = time.time()
                quota.add(1)
            return jobs, jobs, last

        return fifo_loop

    from codemojex.lanes import Lanes

    lanes = Lanes(client, queue=spec.queue)
    if spec.mode == "claim":

        async def claim_loop(quota: _Quota) -> tuple[int, int, float]:
            jobs = 0
            last = 0.0
            while not quota.reached():
                job = await lanes.claim(LEASE_MS)
                if job is None:
                    break
                await lanes.ack(job)
                jobs += 1
                last = time.time()
                quota.add(1)
            return jobs, jobs, last

        return claim_loop

    if spec.mode == "fused":

        async def fused_loop(quota: _Quota) -> tuple[int, int, float]:
            jobs = 0
            claims = 0
            last = 0.0
            done: list[Any] = []
            while not quota.reached():
                _, batch, _ = await lanes.ack_wclaim(done, LEASE_MS)
                if done:
                    jobs += len(done)
                    last = time.time()
                    quota.add(len(done))
                done = batch
                if not batch:
                    break
                claims += 1
            if done:  # the quota was reached with a batch in hand
                await lanes.ack_many(done)
                jobs += len(done)
                last = time.time()
                quota.add(len(done))
            return jobs, claims, last

        return fused_loop

    async def wclaim_loop(quota: _Quota) -> tuple[int, int, float]:
        jobs = 0
        claims = 0
        last = 0.0
        while not quota.reached():
            batch = await lanes.wclaim(LEASE_MS)
            if not batch:
                break
            await lanes.ack_many(batch)
            jobs += len(batch)
            claims += 1
            last = time.time()
            quota.add(len(batch))
        return jobs, claims, last

    return wclaim_loop


async def collect(results: Any, procs: list[Any], timeout_s: float) -> list[dict[str, Any]]:
    """One result per child process; fails fast when a child dies without one (killed by
    someone else's cleanup, say) instead of waiting out the timeout."""
    outs: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(outs) < len(procs):
        try:
            outs.append(await asyncio.to_thread(results.get, True, 1.0))
            continue
        except queue.Empty:
            pass
        dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
        if dead:
            raise RuntimeError(f"a consumer process died (exit code {dead[0]})")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no result from {len(procs) - len(outs)} consumer process(es)")
    return outs


async def _timed_children(
    client: aioredis.Redis, spec: ChildSpec, topology: Topology, bg_seconds: float
) -> tuple[list[dict[str, Any]], float, ServerCounters, ServerCounters, ServerCounters]:
    ctx = mp.get_context("spawn")
    slots = ctx.Array("q", topology.procs, lock=False)
    ready = ctx.Barrier(topology.procs + 1)
    go = ctx.Event()
    results = ctx.Queue()
    child_spec = ChildSpec(spec.mode, spec.queue, topology.consumers, spec.quota)
    procs = [
        ctx.Process(target=_child, args=(child_spec, slots, slot, ready, go, results), daemon=True)
        for slot in range(topology.procs)
    ]
    for proc in procs:
        proc.start()
    try:
        await asyncio.to_thread(ready.wait, 60)
        background = await background_rate(client, bg_seconds)
        before = await server_counters(client)
        t_go = time.time()
        go.set()
        outs = await collect(results, procs, 600)
        after = await server_counters(client)
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    return outs, t_go, before, after, background


async def run_python_mode(
    mode: str, topology: Topology, rooms: int, jobs: int, weight: int, bg_seconds: float
) -> RunResult:
    client = make_client()
    queue = unique_queue(mode)
    pattern = f"bfifo:{{{queue}}}:*" if mode == "fifo" else f"emq:{{{queue}}}:*"
    note = ""
    try:
        if mode == "fifo":
            await preload_fifo(Fifo(client, queue), jobs)
        else:
            from codemojex.lanes import Lanes

            batch = weight if mode in WEIGHTED else 8
            layout = Layout.plan(rooms, jobs, batch, lanes_per_room=2)
            fillers = sum(1 for *_, n in layout.lanes if n == 1 and batch > 1)
            if fillers:
                note = f"+{fillers:,} filler rooms"
            await preload_lanes(
                Lanes(client, queue=queue), layout, weight if mode in WEIGHTED else 1
            )
        spec = ChildSpec(mode, queue, topology.consumers, jobs)
        outs, t_go, before, after, background = await _timed_children(
            client, spec, topology, bg_seconds
        )
    finally:
        await delete_matching(client, pattern)
        await client.aclose()
    done = sum(o["jobs"] for o in outs)
    claims = sum(o["claims"] for o in outs)
    seconds = max(o["last"] for o in outs) - t_go
    return RunResult(
        mode=mode,
        topology=topology.label,
        consumers=topology.total,
        rooms=0 if mode == "fifo" else rooms,
        jobs=done,
        seconds=round(seconds, 3),
        jobs_per_s=round(done / seconds, 1) if seconds > 0 else math.nan,
        jobs_per_claim=round(done / max(claims, 1), 2),
        client_cpu_us_per_job=round(sum(o["cpu_s"] for o in outs) * 1e6 / max(done, 1), 1),
        server=server_cost(before, after, background, done).as_dict(),
        note=note,
        load1=round(os.getloadavg()[0], 2),
    )


# ---------------------------------------------------------------------------------------------
# GroupMQ (Node) peer


def _payload_file() -> str:
    """The same guess payload for Node to enqueue (as JSON data, as GroupMQ stores it)."""
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as tmp:
        tmp.write(guess_payload(0))
    return tmp.name


def _discard(path: str) -> None:
    Path(path).unlink(missing_ok=True)


def groupmq_available() -> bool:
    return (GROUPMQ_DIR / "node_modules" / "groupmq").is_dir()


async def run_groupmq(topology: Topology, rooms: int, jobs: int, bg_seconds: float) -> RunResult:
    client = make_client()
    ns = unique_queue("gmq")
    script = str(GROUPMQ_DIR / "run.mjs")
    procs: list[asyncio.subprocess.Process] = []
    payload_file = _payload_file()
    try:
        load = await asyncio.create_subprocess_exec(
            "node",
            script,
            "load",
            "--ns",
            ns,
            "--jobs",
            str(jobs),
            "--groups",
            str(rooms),
            "--payload",
            payload_file,
            "--redis",
            redis_url(),
            cwd=GROUPMQ_DIR,
            stdout=asyncio.subprocess.PIPE,
        )
        await load.communicate()
        for _ in range(topology.procs):
            procs.append(
                await asyncio.create_subprocess_exec(
                    "node",
                    script,
                    "work",
                    "--ns",
                    ns,
                    "--concurrency",
                    str(topology.consumers),
                    "--redis",
                    redis_url(),
                    cwd=GROUPMQ_DIR,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                )
            )
        for proc in procs:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            if line.strip() != b"ready":
                raise RuntimeError(f"groupmq worker did not start: {line!r}")
        background = await background_rate(client, bg_seconds)
        before = await server_counters(client)
        t_go = time.time()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
        outs = []
        for proc in procs:
            out, _ = await asyncio.wait_for(proc.communicate(), 600)
            outs.append(json.loads(out.decode().strip().splitlines()[-1]))
        after = await server_counters(client)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        _discard(payload_file)
        await delete_matching(client, f"groupmq:{ns}:*")
        await client.aclose()
    done = sum(int(o["completed"]) for o in outs)
    seconds = max(int(o["last_ms"]) for o in outs) / 1000 - t_go
    return RunResult(
        mode="groupmq",
        topology=topology.label,
        consumers=topology.total,
        rooms=rooms,
        jobs=done,
        seconds=round(seconds, 3),
        jobs_per_s=round(done / seconds, 1) if seconds > 0 else math.nan,
        jobs_per_claim=1.0,
        client_cpu_us_per_job=round(sum(int(o["cpu_us"]) for o in outs) / max(done, 1), 1),
        server=server_cost(before, after, background, done).as_dict(),
        note="Node 20 + ioredis",
        load1=round(os.getloadavg()[0], 2),
    )


# ---------------------------------------------------------------------------------------------
# Memory per pending guess


async def _key_bytes(client: aioredis.Redis, pattern: str) -> tuple[int, int, int]:
    """(bytes of all matching keys, bytes of the per-job hashes, key count) by MEMORY USAGE."""
    total = jobs = count = 0
    batch: list[bytes] = []

    async def flush() -> None:
        nonlocal total, jobs, count
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
        for key, size in zip(batch, await pipe.execute(), strict=True):
            total += int(size or 0)
            count += 1
            if b":job:" in key:
                jobs += int(size or 0)
        batch.clear()

    async for key in client.scan_iter(match=pattern, count=5000):
        batch.append(key)
        if len(batch) >= 2000:
            await flush()
    if batch:
        await flush()
    return total, jobs, count


async def _used_memory(client: aioredis.Redis) -> int:
    info = await client.info("memory")
    return int(info["used_memory"])


async def measure_memory(kind: str, guesses: int, rooms: int) -> dict[str, Any]:
    client = make_client()
    queue = unique_queue("mem" + kind)
    if kind == "lanes":
        pattern = f"emq:{{{queue}}}:*"
    elif kind == "fifo":
        pattern = f"bfifo:{{{queue}}}:*"
    else:
        pattern = f"groupmq:{queue}:*"
    try:
        used0 = await _used_memory(client)
        if kind == "lanes":
            from codemojex.lanes import Lanes

            per_lane = max(1, guesses // (rooms * 2))
            plan = []
            for _ in range(rooms):
                room = ids.mint("ROM")
                plan += [(room, ids.mint("PLR"), per_lane) for _ in range(2)]
            layout = Layout(plan, [], sum(n for *_, n in plan))
            await preload_lanes(Lanes(client, queue=queue), layout, 1)
            guesses = layout.total
        elif kind == "fifo":
            await preload_fifo(Fifo(client, queue), guesses)
        else:
            payload_file = _payload_file()
            proc = await asyncio.create_subprocess_exec(
                "node",
                str(GROUPMQ_DIR / "run.mjs"),
                "load",
                "--ns",
                queue,
                "--jobs",
                str(guesses),
                "--groups",
                str(rooms),
                "--payload",
                payload_file,
                "--redis",
                redis_url(),
                cwd=GROUPMQ_DIR,
                stdout=asyncio.subprocess.PIPE,
            )
            await proc.communicate()
            _discard(payload_file)
        used1 = await _used_memory(client)
        total, job_bytes, keys = await _key_bytes(client, pattern)
    finally:
        await delete_matching(client, pattern)
        await client.aclose()
    return {
        "queue": kind,
        "guesses": guesses,
        "rooms": rooms,
        "keys": keys,
        "payload_bytes": len(guess_payload(0)),
        "bytes_per_guess": round(total / guesses, 1),
        "job_record_bytes_per_guess": round(job_bytes / guesses, 1),
        "used_memory_delta_per_guess": round((used1 - used0) / guesses, 1),
    }


# ---------------------------------------------------------------------------------------------
# CLI

app = typer.Typer(add_completion=False, help=__doc__)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def lanes_available() -> bool:
    try:
        from codemojex.lanes import Lanes
    except ImportError:
        return False
    return all(hasattr(Lanes, verb) for verb in ("claim", "wclaim", "ack", "ack_many", "weight"))


async def _run_mode(
    mode: str, topology: Topology, rooms: int, jobs: int, weight: int, bg: float
) -> RunResult:
    try:
        if mode == "groupmq":
            return await run_groupmq(topology, rooms, jobs, bg)
        return await run_python_mode(mode, topology, rooms, jobs, weight, bg)
    except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
        # One broken run (a killed child, a missing node) must not lose the others' figures.
        console.print(f"[red]{mode} x {topology.label}, {rooms:,} rooms failed: {exc}[/]")
        return RunResult(
            mode=mode,
            topology=topology.label,
            consumers=topology.total,
            rooms=0 if mode == "fifo" else rooms,
            jobs=0,
            seconds=math.nan,
            jobs_per_s=math.nan,
            jobs_per_claim=math.nan,
            client_cpu_us_per_job=math.nan,
            server={},
            note=f"failed: {exc}",
            load1=round(os.getloadavg()[0], 2),
        )


def _row(r: RunResult, base: float | None) -> list[object]:
    ratio = r.jobs_per_s / base if base else math.nan
    return [
        r.mode,
        r.topology,
        r.rooms or "-",
        r.jobs,
        r.jobs_per_s,
        ratio,
        r.jobs_per_claim,
        r.server.get("script_us_per_job", math.nan),
        r.server.get("script_us_per_job_raw", math.nan),
        r.server.get("cpu_us_per_job", math.nan),
        r.client_cpu_us_per_job,
        r.note,
    ]


COLUMNS = (
    "queue",
    "consumers",
    "rooms",
    "jobs",
    "jobs/s",
    "x FIFO",
    "jobs/claim",
    "Redis script µs/job",
    "(raw)",
    "Redis CPU µs/job",
    "client CPU µs/job",
    "note",
)


def _summarise(
    results: list[RunResult], sweep: list[RunResult], memory: list[dict[str, Any]], rooms: int
) -> list[dict[str, Any]]:
    """The lanes' targets, each with the figures it was judged on."""
    by = {(r.mode, r.topology, r.rooms): r for r in [*results, *sweep] if r.jobs}
    checks: list[dict[str, Any]] = []
    topologies = sorted({r.topology for r in results}, key=lambda t: Topology.parse(t).total)
    for topo in topologies:
        fifo = by.get(("fifo", topo, 0))
        claim = by.get(("claim", topo, rooms))
        wclaim = by.get(("wclaim", topo, rooms))
        fused = by.get(("fused", topo, rooms))
        gmq = by.get(("groupmq", topo, rooms))
        if fifo and claim:
            ratio = claim.jobs_per_s / fifo.jobs_per_s
            checks.append(_check(f"claim+ack >= 0.9x FIFO ({topo})", ratio, ratio >= 0.9))
        if fifo and wclaim:
            ratio = wclaim.jobs_per_s / fifo.jobs_per_s
            checks.append(_check(f"wclaim(8)+ack_many >= 4x FIFO ({topo})", ratio, ratio >= 4))
        if fifo and fused:
            ratio = fused.jobs_per_s / fifo.jobs_per_s
            checks.append(
                _check(f"wclaim(8)+ack_many fused (ack_wclaim) >= 4x FIFO ({topo})", ratio,
                       ratio >= 4)
            )  # fmt: skip
        for row in (wclaim, fused):
            if row is None:
                continue
            # The raw figure includes other clients' scripts in the window: an upper bound.
            us = row.server["script_us_per_job_raw"]
            checks.append(
                _check(f"Redis script time <= 25 µs/job, {row.mode}, raw ({topo})", us, us <= 25)
            )
        for row in (wclaim, fused):
            if gmq and row:
                ratio = row.jobs_per_s / gmq.jobs_per_s
                checks.append(_check(f"{row.mode} faster than GroupMQ ({topo})", ratio, ratio > 1))
        if gmq and claim:
            ratio = claim.jobs_per_s / gmq.jobs_per_s
            checks.append(_check(f"claim vs GroupMQ ({topo}) [info]", ratio, ratio > 1))
    sweep_rooms = sorted({r.rooms for r in sweep})
    if len(sweep_rooms) > 1:
        lo, hi = sweep_rooms[0], sweep_rooms[-1]
        for mode in SWEEP_MODES:
            for topo in sorted({r.topology for r in sweep}):
                a, b = by.get((mode, topo, lo)), by.get((mode, topo, hi))
                if a and b:
                    ratio = b.jobs_per_s / a.jobs_per_s
                    checks.append(
                        _check(
                            f"{mode} {hi:,} rooms within 10% of {lo:,} ({topo})",
                            ratio,
                            ratio >= 0.9,
                        )
                    )
    for mem in memory:
        if mem["queue"] == "lanes":
            value = mem["bytes_per_guess"]
            checks.append(_check("Redis memory <= 300 B per pending guess", value, value <= 300))
    return checks


def _median(runs: list[RunResult]) -> RunResult:
    """The median round by throughput (failed rounds last); with two, the slower one."""
    ranked = sorted(runs, key=lambda r: r.jobs_per_s if r.jobs else -1.0)
    return ranked[(len(ranked) - 1) // 2]


def _check(name: str, value: float, ok: bool) -> dict[str, Any]:
    return {"target": name, "value": round(value, 2), "met": ok}


async def _main(
    quick: bool,
    jobs: int | None,
    configs: str | None,
    rooms: int,
    sweep_rooms: str | None,
    sweep_configs: str | None,
    modes: str,
    weight: int,
    memory: bool,
    bg_seconds: float | None,
    out: str,
    repeat: int = 1,
    save: bool = False,
) -> None:
    jobs = jobs or (2_000 if quick else 32_000)
    if configs is None:
        configs = "2x8" if quick else "1,4,16,2x8"
    if sweep_rooms is None:
        sweep_rooms = "10000" if quick else "100,10000,100000"
    if sweep_configs is None:
        sweep_configs = "2x8" if quick else "1,2x8"
    topologies = [Topology.parse(t) for t in _split(configs)]
    sweep_list = [int(r) for r in _split(sweep_rooms)]
    sweep_topos = [Topology.parse(t) for t in _split(sweep_configs)]
    bg = bg_seconds if bg_seconds is not None else (0.2 if quick else 1.0)
    wanted = _split(modes)
    have_lanes = lanes_available()
    if not have_lanes:
        console.print("[yellow]codemojex.lanes is not importable yet: lanes rows skipped[/]")
        wanted = [m for m in wanted if m not in LANE_MODES]
    if "groupmq" in wanted and not groupmq_available():
        console.print("[yellow]bench/groupmq/node_modules missing (npm install there): skipped[/]")
        wanted.remove("groupmq")

    every: list[RunResult] = []
    results: list[RunResult] = []
    for topo in topologies:
        # The modes of one topology take turns, `repeat` rounds, and each row is the median
        # round: a burst of someone else's load then hits every mode alike, not one of them.
        rounds: dict[str, list[RunResult]] = {}
        for i in range(repeat):
            for mode in [m for m in ALL_MODES if m in wanted]:
                console.print(
                    f"[dim]{mode} x {topo.label} consumers, {rooms:,} rooms "
                    f"(round {i + 1}/{repeat}) ...[/]"
                )
                run = await _run_mode(mode, topo, rooms, jobs, weight, bg)
                rounds.setdefault(mode, []).append(run)
                every.append(run)
        results += [_median(runs) for runs in rounds.values()]
    fifo_by_topo = {r.topology: r.jobs_per_s for r in results if r.mode == "fifo"}
    print_table(
        f"claim+ack throughput, {jobs:,} jobs, {rooms:,} rooms (lanes/GroupMQ)",
        COLUMNS,
        (_row(r, fifo_by_topo.get(r.topology)) for r in results),
    )

    sweep: list[RunResult] = []
    for topo in sweep_topos:
        for n_rooms in sweep_list:
            rounds = {}
            for i in range(repeat):
                for mode in [m for m in SWEEP_MODES if m in wanted]:
                    console.print(
                        f"[dim]{mode} x {topo.label} consumers, {n_rooms:,} rooms "
                        f"(round {i + 1}/{repeat}) ...[/]"
                    )
                    run = await _run_mode(mode, topo, n_rooms, jobs, weight, bg)
                    rounds.setdefault(mode, []).append(run)
                    every.append(run)
            sweep += [_median(runs) for runs in rounds.values()]
    # The default-rooms rows belong in the sweep too, so the table reads across room counts.
    sweep_all = sorted(
        sweep
        + [
            r
            for r in results
            if r.mode in SWEEP_MODES and Topology.parse(r.topology) in sweep_topos
        ],
        key=lambda r: (r.mode, Topology.parse(r.topology).total, r.rooms),
    )
    if sweep:
        print_table(
            "lanes throughput vs number of rooms",
            COLUMNS,
            (_row(r, fifo_by_topo.get(r.topology)) for r in sweep_all),
        )

    mem_rows: list[dict[str, Any]] = []
    if memory:
        n = 1_000 if quick else 10_000
        kinds = (
            ["fifo"]
            + (["lanes"] if have_lanes else [])
            + (["groupmq"] if "groupmq" in wanted else [])
        )
        for kind in kinds:
            mem_rows.append(await measure_memory(kind, n, 1000))
        print_table(
            "Redis memory per pending guess (MEMORY USAGE of the queue's keys)",
            (
                "queue",
                "guesses",
                "keys",
                "payload B",
                "B/guess",
                "job record B/guess",
                "used_memory Δ B/guess",
            ),
            (
                [
                    m["queue"],
                    m["guesses"],
                    m["keys"],
                    m["payload_bytes"],
                    m["bytes_per_guess"],
                    m["job_record_bytes_per_guess"],
                    m["used_memory_delta_per_guess"],
                ]
                for m in mem_rows
            ),
        )

    checks = _summarise(results, sweep_all, mem_rows, rooms)
    if checks:
        print_table(
            "targets",
            ("target", "value", "met"),
            ([c["target"], c["value"], "yes" if c["met"] else "NO"] for c in checks),
        )
    save_results(
        out,
        "lanes",
        save=save,
        params={
            "jobs": jobs,
            "rooms": rooms,
            "weight": weight,
            "lease_ms": LEASE_MS,
            "background_sample_s": bg,
            "redis": redis_url(),
        },
        runs=[asdict(r) for r in results],
        all_rounds=[asdict(r) for r in every],
        sweep=[asdict(r) for r in sweep_all],
        memory=mem_rows,
        targets=checks,
    )


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="small runs, under a minute")] = False,
    jobs: Annotated[int | None, typer.Option(help="jobs per timed run")] = None,
    configs: Annotated[str | None, typer.Option(help="consumers: '1,4,16,2x8'")] = None,
    rooms: Annotated[int, typer.Option(help="rooms of the main table")] = 1000,
    sweep_rooms: Annotated[str | None, typer.Option(help="'100,10000,100000'; '' = none")] = None,
    sweep_configs: Annotated[str | None, typer.Option(help="consumers for the sweep")] = None,
    modes: Annotated[str, typer.Option(help="subset of fifo,claim,wclaim,groupmq")] = ",".join(
        ALL_MODES
    ),
    weight: Annotated[int, typer.Option(help="lane weight for wclaim")] = 8,
    memory: Annotated[bool, typer.Option(help="measure memory per pending guess")] = True,
    bg_seconds: Annotated[float | None, typer.Option(help="background sample length")] = None,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[
        bool, typer.Option(help="write bench/results/lanes.json, the run the repo keeps")
    ] = False,
    repeat: Annotated[int, typer.Option(help="rounds per row; the median is shown")] = 1,
    private: Annotated[
        bool, typer.Option(help="a throwaway redis-server instead of the shared one")
    ] = False,
) -> None:
    name = results_name("lanes", out, save=save, scratch="lanes-quick" if quick else None)
    with maybe_private_redis(private):
        _run_main(
            quick, jobs, configs, rooms, sweep_rooms, sweep_configs, modes, weight, memory,
            bg_seconds, name, repeat, save,
        )  # fmt: skip


def _run_main(*args: Any) -> None:
    asyncio.run(_main(*args))


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
