"""Redis server time per verb: where the lanes' server cost per job goes.

Each verb runs in a phase of its own on a backlog (enqueue N, then claim all, then ack all),
one client, no concurrency, and the phase's ``INFO commandstats`` delta is split into the
script time (EVALSHA usec) and the time of the Redis commands the script ran (the inner
commands' own usec, reported per command). script - inner = the Lua interpreter's own
overhead (argument conversion, the helpers' code, reply building).

Other clients' scripts on a shared Redis land in the same counters; ``--private`` starts a
throwaway ``redis-server`` (same binary, no persistence) on a free port for the run, so the
counters hold this benchmark's commands only.

Run: ``.venv/bin/python -m bench.verbs --quick`` or without ``--quick`` (about a minute).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

import typer

from bench.common import (
    SCRIPT_COMMANDS,
    delete_matching,
    exit_cleanly_on_sigterm,
    guess_payload,
    make_client,
    print_table,
    private_redis,
    results_name,
    save_results,
    unique_queue,
)
from bench.fifo import Fifo
from codemojex.values import ids

LEASE_MS = 60_000


async def _stats(client: Any) -> dict[str, tuple[int, int]]:
    raw: Mapping[str, Any] = await client.info("commandstats")
    return {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for k, v in raw.items()}


async def _phase(
    client: Any, name: str, jobs: int, body: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    before = await _stats(client)
    t0 = time.perf_counter()
    await body()
    wall = time.perf_counter() - t0
    after = await _stats(client)
    script_calls = script_usec = inner_usec = 0
    inner: dict[str, float] = {}
    for cmd, (calls, usec) in after.items():
        c0, u0 = before.get(cmd, (0, 0))
        dc, du = calls - c0, usec - u0
        if dc <= 0 or cmd in ("info",):
            continue
        if cmd in SCRIPT_COMMANDS:
            script_calls += dc
            script_usec += du
        else:
            inner_usec += du
            inner[cmd] = round(dc / jobs, 2)
    return {
        "verb": name,
        "jobs": jobs,
        "script_calls": script_calls,
        "script_us_per_job": round(script_usec / jobs, 2),
        "inner_us_per_job": round(inner_usec / jobs, 2),
        "lua_overhead_us_per_job": round((script_usec - inner_usec) / jobs, 2),
        "commands_per_job": round(sum(inner.values()), 2),
        "client_wall_us_per_job": round(wall * 1e6 / jobs, 1),
        "commands": inner,
    }


async def measure(n: int, rooms: int, weight: int) -> list[dict[str, Any]]:
    from codemojex.lanes import Job, Lanes

    client = make_client()
    rows: list[dict[str, Any]] = []
    payload = guess_payload(1)
    q_fifo, q_lanes, q_w = unique_queue("vf"), unique_queue("vl"), unique_queue("vw")
    try:
        fifo = Fifo(client, q_fifo)
        await fifo.load_scripts()
        fjobs: list[Any] = []

        async def f_enqueue() -> None:
            for _ in range(n):
                await fifo.enqueue(ids.mint("JOB"), payload)

        async def f_claim() -> None:
            while (job := await fifo.claim(LEASE_MS)) is not None:
                fjobs.append(job)

        async def f_ack() -> None:
            for job in fjobs:
                await fifo.ack(job)

        rows.append(await _phase(client, "fifo enqueue", n, f_enqueue))
        rows.append(await _phase(client, "fifo claim", n, f_claim))
        rows.append(await _phase(client, "fifo ack", n, f_ack))

        for queue, weighted in ((q_lanes, False), (q_w, True)):
            lanes = Lanes(client, queue=queue)
            layout = [(ids.mint("ROM"), ids.mint("PLR")) for _ in range(rooms)]
            if weighted:
                for _, lane in layout:
                    await lanes.weight(lane, weight)
            claimed: list[Job] = []
            batches: list[list[Job]] = []
            held = (claimed, batches)

            async def l_enqueue(lanes: Lanes = lanes, layout: Any = layout) -> None:
                for i in range(n):
                    room, lane = layout[i % len(layout)]
                    await lanes.enqueue(room, lane, payload)

            async def l_claim(
                lanes: Lanes = lanes, weighted: bool = weighted, held: Any = held
            ) -> None:
                claimed, batches = held
                while True:
                    if weighted:
                        batch = await lanes.wclaim(LEASE_MS)
                        if not batch:
                            return
                        batches.append(batch)
                    else:
                        job = await lanes.claim(LEASE_MS)
                        if job is None:
                            return
                        claimed.append(job)

            async def l_ack(
                lanes: Lanes = lanes, weighted: bool = weighted, held: Any = held
            ) -> None:
                claimed, batches = held
                if weighted:
                    for batch in batches:
                        await lanes.ack_many(batch)
                else:
                    for job in claimed:
                        await lanes.ack(job)

            tag = f"wclaim({weight})" if weighted else "claim"
            if not weighted:
                rows.append(await _phase(client, "lanes enqueue", n, l_enqueue))
            else:
                await l_enqueue()
            rows.append(await _phase(client, f"lanes {tag}", n, l_claim))
            rows.append(
                await _phase(client, "lanes ack_many" if weighted else "lanes ack", n, l_ack)
            )
    finally:
        await delete_matching(client, f"bfifo:{{{q_fifo}}}:*")
        for q in (q_lanes, q_w):
            await delete_matching(client, f"emq:{{{q}}}:*")
        await client.aclose()
    return rows


app = typer.Typer(add_completion=False, help=__doc__)


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="2,000 jobs instead of 16,000")] = False,
    rooms: Annotated[int | None, typer.Option(help="default: jobs / 16")] = None,
    weight: Annotated[int, typer.Option()] = 8,
    private: Annotated[bool, typer.Option(help="run on a throwaway redis-server")] = False,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[
        bool, typer.Option(help="write bench/results/verbs.json, the run the repo keeps")
    ] = False,
) -> None:
    name = results_name("verbs", out, save=save, scratch="verbs-quick" if quick else None)
    n = 2_000 if quick else 16_000
    # 16 jobs per lane: every wclaim serves a full batch of `weight` (8) jobs.
    rooms = rooms or n // 16
    if private:
        with private_redis() as url:
            os.environ["CODEMOJEX_BENCH_REDIS_URL"] = url
            rows = asyncio.run(measure(n, rooms, weight))
    else:
        rows = asyncio.run(measure(n, rooms, weight))
    print_table(
        f"Redis server time per job and verb ({n:,} jobs, {rooms:,} rooms, one client, "
        f"{'private' if private else 'shared'} Redis)",
        (
            "verb",
            "script µs/job",
            "inner commands µs/job",
            "Lua overhead µs/job",
            "commands/job",
            "client wall µs/job",
        ),
        (
            [
                r["verb"],
                r["script_us_per_job"],
                r["inner_us_per_job"],
                r["lua_overhead_us_per_job"],
                r["commands_per_job"],
                r["client_wall_us_per_job"],
            ]
            for r in rows
        ),
    )
    save_results(
        name,
        "verbs",
        save=save,
        private_redis=private,
        rows=rows,
    )


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
