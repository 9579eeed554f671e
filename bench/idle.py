"""Benchmark: what an idle worker costs, and how fast it claims a job that arrives then.

On a private redis-server (so INFO commandstats counts only the processes measured) and a
fresh Postgres database, with nothing queued:

- **whole worker**: `codemojex worker` as deployed (consumer pool, outbox sender, round
  timer), default settings; its Bot API is a closed local port (idle, it posts nothing).
- **consumer pool alone**: the pool with the ScoreWorker and nothing else
  (bench/pipeline_worker.py), so the difference between the two rows is the sender's and the
  round timer's.

Each is watched for `--seconds` after it settled: Redis commands/s (by command), SQL
transactions/s (pg_stat_database of its database: xact_commit + xact_rollback), and the
process's CPU %. Then **idle → claim**: single guesses are enqueued into the idle pool at
random gaps (some shorter, some longer than its park timeout), and the time from the enqueue
(Redis TIME) to the handler's start is read per guess: p50/p99/max.

With ``--baseline PATH`` every figure is measured for that checkout's code too, side by side
(each runs from its own .venv). Run: ``.venv/bin/python -m bench.idle --quick`` (about a
minute) or without ``--quick``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.common import (
    console,
    make_client,
    percentile,
    print_table,
    private_redis,
    redis_url,
    results_name,
    save_results,
    unique_queue,
)
from bench.pipeline import (
    PG_ADMIN_URL,
    TODAY,
    WORKER_SCRIPT,
    Code,
    _admin,
    _cpu_s,
    _wrong_guess,
    make_rooms,
)
from codemojex.values import ids
from codemojex.values.jobs import GuessJob


async def _xacts(conn: Any, db: str) -> int:
    return int(
        await conn.fetchval(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", db
        )
    )


async def _commands(client: Any) -> dict[str, int]:
    stats = await client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


async def _watch(
    client: Any, conn: Any, db: str, pid: int, settle_s: float, seconds: float
) -> dict[str, Any]:
    """Redis commands/s (by command), SQL transactions/s and CPU % of process `pid`."""
    await asyncio.sleep(settle_s)
    # our own INFO calls are counted too: two of them, subtracted below
    c0, x0, cpu0, t0 = await _commands(client), await _xacts(conn, db), _cpu_s(pid), time.time()
    await asyncio.sleep(seconds)
    c1, x1, cpu1, t1 = await _commands(client), await _xacts(conn, db), _cpu_s(pid), time.time()
    span = t1 - t0
    calls = {k: (v - c0.get(k, 0)) for k, v in c1.items()}
    calls["info"] = calls.get("info", 0) - 1
    # our pg_stat_database reads run in the admin database, not the worker's
    by_command = {k: round(v / span, 2) for k, v in sorted(calls.items()) if v > 0}
    return {
        "redis_commands_per_s": round(sum(by_command.values()), 2),
        "by_command": by_command,
        "sql_xacts_per_s": round((x1 - x0) / span, 2),
        "cpu_percent": round(100 * (cpu1 - cpu0) / span, 2),
    }


def _env(queue: str, url: str, code: Code) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    env.update(
        CODEMOJEX_REDIS_URL=redis_url(),
        CODEMOJEX_DATABASE_URL=url,
        CODEMOJEX_QUEUE=queue,
        CODEMOJEX_TOKEN="4242:IDLE-BENCH",
        # nothing is posted while idle; a closed port, should it try
        CODEMOJEX_BOT_API_BASE_URL="http://127.0.0.1:9/bot",
        CODEMOJEX_BOT_API_BASE_FILE_URL="http://127.0.0.1:9/file/bot",
    )
    env["PYTHONPATH"] = str(code.root)  # the worker runs the code of the checkout measured
    return env


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def measure(
    code: Code, seconds: float, probes: int, gap_s: tuple[float, float]
) -> dict[str, Any]:
    import asyncpg

    from codemojex.db import upgrade
    from codemojex.lanes import Lanes

    db = "cmidle_" + uuid.uuid4().hex[:10]
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{db}"
    client = make_client()
    await _admin(f'CREATE DATABASE "{db}"')
    out: dict[str, Any] = {"code": code.label}
    try:
        await asyncio.to_thread(upgrade, url)
        [room] = await make_rooms(url, 1, 3, 2)
        # The round's announcement counts as posted: idle means nothing to post (left unsent,
        # the sender would retry it against the closed port all along and be measured doing so).
        seeded = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            await seeded.execute("UPDATE outbox SET sent_at = now() WHERE sent_at IS NULL")
        finally:
            await seeded.close()
        conn = await asyncpg.connect(PG_ADMIN_URL)
        try:
            # the whole worker, as `codemojex worker` runs it
            queue = unique_queue("idle")
            proc = await asyncio.create_subprocess_exec(
                str(code.root / ".venv" / "bin" / "codemojex"), "worker",
                cwd=str(code.root), env=_env(queue, url, code),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                out["worker"] = await _watch(client, conn, db, proc.pid, 5.0, seconds)
            finally:
                await _stop(proc)
            # the consumer pool alone, then the probes into it
            queue = unique_queue("idle")
            env = _env(queue, url, code)
            pool = await asyncio.create_subprocess_exec(
                code.python, str(WORKER_SCRIPT), queue, url, redis_url(), "0",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                cwd=str(code.root), env=env, limit=1 << 26,
            )  # fmt: skip
            assert pool.stdin is not None and pool.stdout is not None
            try:
                line = await asyncio.wait_for(pool.stdout.readline(), 60)
                if line.strip() != b"ready":
                    raise RuntimeError(f"the pool did not start ({line!r})")
                pool.stdin.write(b"go\n")
                await pool.stdin.drain()
                out["pool"] = await _watch(client, conn, db, pool.pid, 3.0, seconds)
                lanes = Lanes(client, queue=queue)
                rng = random.Random(11)
                for n in range(probes):
                    await asyncio.sleep(rng.uniform(*gap_s))
                    _uid, plr, _name = room.players[n % len(room.players)]
                    payload = GuessJob(room.round_id, 50_000 + n, _wrong_guess(rng, room)).encode()
                    await lanes.enqueue(room.room_id, plr, payload, job_id=ids.mint(ids.JOB))
                await asyncio.sleep(1.0)
                pool.stdin.write(b"stop\n")
                await pool.stdin.drain()
                result = json.loads(await asyncio.wait_for(pool.stdout.readline(), 60))
            finally:
                await _stop(pool)
            claims = sorted(result["claim_ms"])
            out["claim"] = {
                "probes": len(claims),
                "p50_ms": percentile(claims, 50),
                "p99_ms": percentile(claims, 99),
                "max_ms": claims[-1] if claims else None,
            }
        finally:
            await conn.close()
    finally:
        await client.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return out


app = typer.Typer(add_completion=False, help=__doc__)


async def _main(quick: bool, seconds: float | None, probes: int | None, baseline: Path | None,
                out: str, save: bool = False) -> None:  # fmt: skip
    seconds = seconds or (10.0 if quick else 30.0)
    probes = probes or (40 if quick else 200)
    codes = [Code("baseline", baseline), TODAY] if baseline else [TODAY]
    runs = []
    with private_redis() as url:
        os.environ["CODEMOJEX_BENCH_REDIS_URL"] = url
        try:
            for code in codes:
                console.print(f"[dim]{code.label}: idle worker, idle pool, {probes} probes ...[/]")
                runs.append(await measure(code, seconds, probes, (0.05, 1.5)))
        finally:
            os.environ.pop("CODEMOJEX_BENCH_REDIS_URL", None)

    def top(by: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:g}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:4])

    print_table(
        f"idle, nothing queued, {seconds:g} s watched (private Redis, fresh database)",
        ("code", "process", "Redis commands/s", "of which", "SQL xacts/s", "CPU %"),
        (
            [
                r["code"],
                part,
                r[key]["redis_commands_per_s"],
                top(r[key]["by_command"]),
                r[key]["sql_xacts_per_s"],
                r[key]["cpu_percent"],
            ]
            for r in runs
            for key, part in (("worker", "whole worker"), ("pool", "consumer pool alone"))
        ),
    )
    print_table(
        "idle → claim: a guess enqueued into an idle pool, enqueue to handler start",
        ("code", "probes", "p50 ms", "p99 ms", "max ms"),
        (
            [
                r["code"],
                r["claim"]["probes"],
                r["claim"]["p50_ms"],
                r["claim"]["p99_ms"],
                r["claim"]["max_ms"],
            ]
            for r in runs
        ),
    )
    save_results(
        out,
        "idle",
        save=save,
        runs=runs,
    )


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="10 s watched, 40 probes")] = False,
    seconds: Annotated[float | None, typer.Option(help="seconds watched (default 30)")] = None,
    probes: Annotated[int | None, typer.Option(help="guesses enqueued (default 200)")] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="another checkout (with its .venv): its worker side by side"),
    ] = None,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[
        bool, typer.Option(help="write bench/results/idle.json, the run the repo keeps")
    ] = False,
) -> None:
    name = results_name("idle", out, save=save, scratch="idle-quick" if quick else None)
    asyncio.run(_main(quick, seconds, probes, baseline.resolve() if baseline else None, name, save))


if __name__ == "__main__":
    app()
