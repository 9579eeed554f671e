"""Redis server time per call of the lanes' scripts: what a script costs before it does any
work, and a wclaim(8) + ack_many cycle, this checkout's scripts side by side with another
checkout's (``--baseline PATH``), rounds interleaved, on one throwaway redis-server.

Redis runs a script's whole text on every call (EVALSHA runs it from the top), so whatever a
script defines and never uses is paid per call. The rows:

- ``ack_many, nothing to ack``: the script's definitions alone (ack_pairs returns at once);
- ``wclaim, empty ring``: the definitions and one LMOVE;
- ``ack, stale token``: the definitions and one HMGET;
- ``wclaim(8) + ack_many, per job``: a backlog of lanes of 8 at weight 8, claimed batch by
  batch and acked batch by batch, the server's script time divided by the jobs.

Times are ``INFO commandstats`` usec of EVALSHA (a script's usec include the commands it
runs), read after ``CONFIG RESETSTAT`` on the private server, so nothing else is counted. A
loaded machine adds its noise to every row; the minimum over rounds is the least disturbed.

Run: ``.venv/bin/python -m bench.lua --baseline /path/to/checkout`` (about a minute).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import redis
import typer

from bench.common import (
    BENCH_DIR,
    guess_payload,
    print_table,
    private_redis,
    results_name,
    save_results,
)

VERBS = ("ack_many", "wclaim", "ack", "enqueue", "weight")
QUEUE_KEYS = ("emq:{lua}:", "emq:{lua}:seq")
STALE_JOB = "JOB" + "0" * 26

app = typer.Typer(add_completion=False, help=__doc__)


def sources(checkout: Path) -> dict[str, str]:
    """The text of each verb's script as `checkout`'s code builds it (imported there)."""
    code = (
        "import json\nfrom codemojex.lanes.scripts import source\n"
        f"print(json.dumps({{verb: source(verb) for verb in {VERBS!r}}}))"
    )
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"{checkout}: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout))


def _usec(client: redis.Redis) -> float:
    stats = client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})
    return float(stats["usec"])


def idle_call(client: redis.Redis, text: str, args: tuple[str, ...], calls: int) -> float:
    """usec per call of a script that finds nothing to do."""
    sha = client.script_load(text)
    client.config_resetstat()
    pipe = client.pipeline(transaction=False)
    for _ in range(calls):
        pipe.evalsha(sha, len(QUEUE_KEYS), *QUEUE_KEYS, *args)
    pipe.execute()
    return _usec(client) / calls


def cycle(client: redis.Redis, texts: dict[str, str], lanes: int) -> float:
    """usec per job of wclaim(8) then ack_many over a backlog of `lanes` lanes of 8 jobs."""
    sha = {verb: client.script_load(texts[verb]) for verb in VERBS}
    client.delete(*client.keys("emq:{lua}:*") or ["emq:{lua}:none"])
    pipe = client.pipeline(transaction=False)
    for n in range(lanes):
        room, lane = f"ROM{n:026d}", f"PLR{n:026d}"
        pipe.evalsha(sha["weight"], 2, *QUEUE_KEYS, lane, "8")
        for k in range(8):
            job = f"JOB{n * 8 + k:026d}"
            args = (room, lane, job, guess_payload(n * 8 + k), "5", "0", "", "60000")
            pipe.evalsha(sha["enqueue"], 2, *QUEUE_KEYS, *args)
    pipe.execute()
    client.config_resetstat()
    jobs = 0
    while True:
        batch: Any = client.evalsha(sha["wclaim"], 2, *QUEUE_KEYS, "60000")
        if not batch:
            break
        # after room, lane and the ring's length, 6 fields per job: id, payload, attempts, ...
        ids, tokens = batch[3::6], batch[5::6]
        acks = [x for pair in zip(ids, tokens, strict=True) for x in pair]
        client.evalsha(sha["ack_many"], 2, *QUEUE_KEYS, *acks)
        jobs += len(ids)
    return _usec(client) / max(1, jobs)


def measure(
    sides: dict[str, dict[str, str]], rounds: int, calls: int, lanes: int
) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str], list[float]] = {}
    with private_redis() as url:
        client = redis.Redis.from_url(url)
        for _ in range(rounds):
            for side, texts in sides.items():
                found = {
                    "ack_many, nothing to ack": idle_call(client, texts["ack_many"], (), calls),
                    "wclaim, empty ring": idle_call(client, texts["wclaim"], ("60000",), calls),
                    "ack, stale token": idle_call(client, texts["ack"], (STALE_JOB, "1"), calls),
                    "wclaim(8) + ack_many, per job": cycle(client, texts, lanes),
                }
                for what, usec in found.items():
                    rows.setdefault((what, side), []).append(usec)
        client.close()
    return [
        {
            "what": what,
            "code": side,
            "median_usec": round(statistics.median(values), 2),
            "min_usec": round(min(values), 2),
            "rounds": [round(v, 2) for v in values],
        }
        for (what, side), values in rows.items()
    ]


@app.command()
def main(
    baseline: Annotated[
        Path | None, typer.Option(help="another checkout: its scripts side by side")
    ] = None,
    rounds: Annotated[int, typer.Option(help="rounds, the sides taking turns")] = 7,
    calls: Annotated[int, typer.Option(help="calls per idle row and round")] = 20_000,
    lanes: Annotated[int, typer.Option(help="lanes of 8 jobs in the cycle's backlog")] = 1_000,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[
        bool, typer.Option(help="write bench/results/lua.json, the run the repo keeps")
    ] = False,
) -> None:
    name = results_name("lua", out, save=save)
    sides = {"today": sources(BENCH_DIR.parent)}
    if baseline is not None:
        sides = {"baseline": sources(baseline.resolve()), **sides}
    rows = measure(sides, rounds, calls, lanes)
    print_table(
        f"Redis server time per call (µs), {rounds} rounds, private redis-server",
        ("what", "code", "median", "min", "rounds"),
        ([r["what"], r["code"], r["median_usec"], r["min_usec"], r["rounds"]] for r in rows),
    )
    save_results(name, "lua", save=save, rows=rows, baseline=str(baseline))


if __name__ == "__main__":
    app()
