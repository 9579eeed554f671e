"""What every benchmark shares: the Redis client, server-side cost counters, key cleanup,
a realistic guess payload, percentiles, and the JSON/table output.

A run's JSON goes to bench/out/ (untracked: a run leaves the checkout as it was) unless the
run is asked to `--save` it: then it is bench/results/<benchmark>.json, the one run of each
benchmark the repo keeps and the docs cite (bench/results/README.md says what each shows; an
older run is in git history: `git log -p -- bench/results/<benchmark>.json`).

The benchmarks run on the machine's real Redis next to other people's tests, so they never
FLUSHALL: each run uses a queue name of its own and deletes exactly its own keys after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from rich.console import Console
from rich.table import Table

from codemojex.values.jobs import GuessJob

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"  # the latest saved run of each benchmark, what docs cite
OUT_DIR = BENCH_DIR / "out"  # every other run's results (gitignored)
PLOTS_DIR = BENCH_DIR / "plots"

# Script commands: their usec already include the commands they run inside.
SCRIPT_COMMANDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")

# Wide enough for the tables when the output is a file or a pipe.
console = Console(width=None if sys.stdout.isatty() else 200)


def exit_cleanly_on_sigterm() -> None:
    """SIGTERM raises SystemExit, so a stopped benchmark still runs its `finally` blocks
    (deleting its keys, stopping its child processes) instead of dying on the spot."""
    import signal

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def redis_url() -> str:
    return os.environ.get("CODEMOJEX_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def make_client(max_connections: int = 64) -> aioredis.Redis:
    return aioredis.Redis.from_url(
        redis_url(), decode_responses=False, max_connections=max_connections
    )


def unique_queue(tag: str) -> str:
    """A queue name no test or other benchmark uses (keys `emq:{<name>}:*`)."""
    return f"b{tag}{uuid.uuid4().hex[:8]}"


async def delete_matching(client: aioredis.Redis, pattern: str) -> int:
    """UNLINK every key matching `pattern`, in batches (SCAN, never KEYS)."""
    deleted = 0
    batch: list[bytes] = []
    async for key in client.scan_iter(match=pattern, count=5000):
        batch.append(key)
        if len(batch) >= 5000:
            deleted += await client.unlink(*batch)
            batch.clear()
    if batch:
        deleted += await client.unlink(*batch)
    return deleted


@dataclass(frozen=True)
class ServerCounters:
    """Cumulative server-side cost at one instant."""

    at: float
    script_usec: int  # usec spent in scripts (EVALSHA/FCALL...), as INFO commandstats counts them
    all_usec: int  # usec of every command (script-inner commands are counted twice)
    script_calls: int
    cpu_s: float  # used_cpu_user + used_cpu_sys of the server process

    def minus(self, other: ServerCounters) -> ServerCounters:
        return ServerCounters(
            at=self.at - other.at,
            script_usec=self.script_usec - other.script_usec,
            all_usec=self.all_usec - other.all_usec,
            script_calls=self.script_calls - other.script_calls,
            cpu_s=self.cpu_s - other.cpu_s,
        )

    def scaled(self, factor: float) -> ServerCounters:
        return ServerCounters(
            at=self.at * factor,
            script_usec=round(self.script_usec * factor),
            all_usec=round(self.all_usec * factor),
            script_calls=round(self.script_calls * factor),
            cpu_s=self.cpu_s * factor,
        )


async def server_counters(client: aioredis.Redis) -> ServerCounters:
    stats: Mapping[str, Any] = await client.info("commandstats")
    cpu: Mapping[str, Any] = await client.info("cpu")
    script_usec = 0
    script_calls = 0
    all_usec = 0
    for name, row in stats.items():
        usec = int(row["usec"])
        all_usec += usec
        if name.removeprefix("cmdstat_") in SCRIPT_COMMANDS:
            script_usec += usec
            script_calls += int(row["calls"])
    return ServerCounters(
        at=time.monotonic(),
        script_usec=script_usec,
        all_usec=all_usec,
        script_calls=script_calls,
        cpu_s=float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
    )


async def background_rate(client: aioredis.Redis, seconds: float) -> ServerCounters:
    """What the rest of the machine (other people's tests) costs Redis per second right now.

    Sampled while this benchmark is idle and subtracted from the measured window, so the
    per-job figures are not inflated by traffic that is not ours.
    """
    if seconds <= 0:
        return ServerCounters(1.0, 0, 0, 0, 0.0)
    first = await server_counters(client)
    await asyncio.sleep(seconds)
    second = await server_counters(client)
    delta = second.minus(first)
    return delta.scaled(1.0 / delta.at)


@dataclass(frozen=True)
class ServerCost:
    script_us_per_job: float
    cpu_us_per_job: float
    script_us_per_job_raw: float
    cpu_us_per_job_raw: float
    background_script_usec_per_s: float

    def as_dict(self) -> dict[str, float]:
        return {
            "script_us_per_job": round(self.script_us_per_job, 2),
            "cpu_us_per_job": round(self.cpu_us_per_job, 2),
            "script_us_per_job_raw": round(self.script_us_per_job_raw, 2),
            "cpu_us_per_job_raw": round(self.cpu_us_per_job_raw, 2),
            "background_script_usec_per_s": round(self.background_script_usec_per_s, 1),
        }


def server_cost(
    before: ServerCounters, after: ServerCounters, background: ServerCounters, jobs: int
) -> ServerCost:
    delta = after.minus(before)
    noise = background.scaled(delta.at)
    jobs = max(jobs, 1)
    return ServerCost(
        script_us_per_job=max(delta.script_usec - noise.script_usec, 0) / jobs,
        cpu_us_per_job=max(delta.cpu_s - noise.cpu_s, 0.0) * 1e6 / jobs,
        script_us_per_job_raw=delta.script_usec / jobs,
        cpu_us_per_job_raw=delta.cpu_s * 1e6 / jobs,
        background_script_usec_per_s=background.script_usec,
    )


_NAMES = ("Ana", "Bob", "Chen", "Dana", "Eitan", "Fatima", "Gus", "Hiroko")
_EMOJIS = ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑")


def guess_payload(i: int) -> bytes:
    """A realistic guess as the bot enqueues it (same encoder, typical sizes)."""
    return GuessJob(
        round_id=100_000 + (i % 97),
        message_id=1_000_000 + i,
        emojis=tuple(_EMOJIS[(i + k) % len(_EMOJIS)] for k in range(4)),
    ).encode()


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (q in 0..100)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything."""
    xs = list(values)
    if not xs:
        return math.nan
    total = sum(xs)
    squares = sum(x * x for x in xs)
    return (total * total) / (len(xs) * squares) if squares else math.nan


def machine() -> dict[str, str]:
    """The facts a reader needs to compare figures: cores, Redis, Python, Node."""

    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "n/a"

    return {
        "nproc": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "redis": run("redis-server", "--version"),
        "python": platform.python_version(),
        "node": run("node", "--version"),
        "platform": platform.platform(),
        # Other people's tests share the two cores: the load says how noisy a run was.
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "n/a"


def write_results(name: str, data: Mapping[str, Any], *, save: bool = False) -> Path:
    """Write `name`.json into bench/out/, or into bench/results/ when `save`."""
    folder = RESULTS_DIR if save else OUT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def results_name(benchmark: str, out: str | None, *, save: bool, scratch: str | None = None) -> str:
    """The name a run's results go under, settled before the run: `--save` is the benchmark's
    own name (bench/results/<benchmark>.json, replacing the run kept there), any other run
    goes to bench/out/ under `--out`, else `scratch` (a quick run's name), else the
    benchmark's. `--out` with `--save` is refused: the kept file has one name."""
    if save and out is not None and out != benchmark:
        raise SystemExit(
            f"--out names a run in bench/out/; --save writes bench/results/{benchmark}.json"
        )
    return benchmark if save else (out or scratch or benchmark)


def save_results(name: str, benchmark: str, *, save: bool = False, **fields: Any) -> Path:
    """Write a run's results with what every results file carries (the benchmark, the command
    that ran it, when, the machine) and say where: bench/out/`name`.json, or with `save` (the
    run's `--save`) bench/results/`benchmark`.json, the one kept (`name` is then the
    benchmark's, as `results_name` gives it)."""
    if save and name != benchmark:
        raise ValueError(f"a saved run of {benchmark} is {benchmark}.json, not {name}.json")
    data = {
        "benchmark": benchmark,
        "command": " ".join([Path(sys.executable).name, "-m", f"bench.{benchmark}", *sys.argv[1:]]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        **fields,
    }
    path = write_results(name, data, save=save)
    console.print(f"results: {path.relative_to(BENCH_DIR.parent)}")
    return path


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(fmt(cell) for cell in row))
    console.print(table)


def fmt(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def free_port() -> int:
    """A loopback TCP port the OS just handed out (the probe socket is closed again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def private_redis(appendfsync: str | None = None) -> Iterator[str]:
    """A throwaway redis-server on a free port; its URL. Stopped (by its pid) on exit. With
    `appendfsync` (always, everysec, no) it keeps an append-only file, fsynced that way, in
    a temporary folder of its own: the deployments' Redis (compose.yaml)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cmx-bench-redis-") as workdir:
        persistence = (
            ["--appendonly", "no"]
            if appendfsync is None
            else ["--appendonly", "yes", "--appendfsync", appendfsync]
        )
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--dir", workdir, *persistence],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(100):
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", port), 0.1),
                ):
                    break
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)


@contextlib.contextmanager
def maybe_private_redis(private: bool, appendfsync: str | None = None) -> Iterator[None]:
    """With `private`, point every client of this benchmark (child processes and Node
    included, through CODEMOJEX_BENCH_REDIS_URL) at a throwaway redis-server (keeping an
    append-only file with `appendfsync`)."""
    if not private:
        yield
        return
    with private_redis(appendfsync) as url:
        os.environ["CODEMOJEX_BENCH_REDIS_URL"] = url
        try:
            yield
        finally:
            os.environ.pop("CODEMOJEX_BENCH_REDIS_URL", None)
