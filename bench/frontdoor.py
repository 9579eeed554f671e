"""Benchmark: the front door's availability. One stuck chat, and a Redis outage, against a real
`codemojex bot` process on the Bot API stand-in (which confirms updates as Telegram does).

- **stuck**: a round's row held locked by this process's own Postgres session for `--hold`
  seconds (what a worker that died mid-transaction leaves until Postgres notices); an admin's
  `/endround` in that chat first, then `--guesses` wrong guesses of `--chats` other chats
  (bench/backlog_world.py's rooms). Printed: when the other chats' guesses were all in their
  lanes, and when the round ended (after the lock, or never in the run).
- **outage**: the bot on a redis-server of its own (AOF on), guesses typed at `--rate` a
  second for `--seconds`; Redis stopped (SIGTERM, its AOF written) for `--down` seconds in
  the middle and started again with its data. Printed: guesses typed, in the lanes, lost and
  taken twice (a lane short of or over what its player typed), and the answers that went out
  ("catching up" notices, and any other).
- **options** (``--options``): what storing every update first would add on the path every
  guess takes (the option the bot does not use: docs/architecture.md, "The front door"): the
  inbox's park and settle calls for batches of real updates' JSON, against this machine's
  Redis, in client CPU and wall time per update; and what one order per key across webhook
  processes adds to every webhook update with nothing parked (`Inbox.enter`, one call per
  event-loop turn of requests, the code before made none).

``--baseline PATH`` runs the scenarios with that checkout's bot too (its own .venv), the
sides taking turns: the code before a change and after it, same harness, same machine.

Run: ``.venv/bin/python -m bench.frontdoor`` (a few minutes). The results go to bench/out/
(untracked) unless ``--save`` puts them into bench/results/frontdoor.json. Needs the
machine's Postgres (CODEMOJEX_BENCH_PG_ADMIN_URL) and Redis (CODEMOJEX_BENCH_REDIS_URL); the
databases and the queues' keys are dropped after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import asyncpg
import typer

from bench.backlog_world import Backlog, BacklogPlan, BotProcess, bot_env
from bench.common import (
    console,
    delete_matching,
    exit_cleanly_on_sigterm,
    free_port,
    make_client,
    print_table,
    redis_url,
    results_name,
    save_results,
    unique_queue,
)
from bench.pipeline import PG_ADMIN_URL, _admin
from bench.processes import ROOT
from codemojex.db import upgrade
from codemojex.lanes import Lanes
from codemojex.standin import StandIn
from codemojex.state.inbox import Inbox, record

ADMIN = 5_999_999
SAMPLE_S = 0.02


@dataclass(frozen=True)
class Code:
    """A checkout whose bot is measured: its root and its interpreter."""

    name: str
    root: Path

    @property
    def python(self) -> str:
        return str(self.root / ".venv" / "bin" / "python")


TODAY = Code("today", ROOT)


@contextlib.asynccontextmanager
async def database(code: Code) -> AsyncIterator[str]:
    """A fresh Postgres database migrated by `code`'s own migrations: its asyncpg URL."""
    name = "cmfront_" + uuid.uuid4().hex[:10]
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{name}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        if code is TODAY:
            await asyncio.to_thread(upgrade, url)
        else:
            env = {"CODEMOJEX_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
            await asyncio.to_thread(
                subprocess.run,
                [code.python, "-m", "codemojex.cli", "migrate"],
                cwd=code.root, env=env, check=True, capture_output=True,
            )  # fmt: skip
        yield url
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_bot(code: Code, env: dict[str, str], logs: Path) -> BotProcess:
    bot = BotProcess(env, logs / f"bot-{code.name}.log")
    bot.python, bot.root = code.python, code.root
    env["PYTHONPATH"] = str(code.root)
    return bot


async def until(probe: Any, timeout_s: float) -> float | None:
    """Seconds until `await probe()` is true (None: not within `timeout_s`)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if await probe():
            return time.monotonic() - began
        await asyncio.sleep(SAMPLE_S)
    return None


# -- stuck ----------------------------------------------------------------------------------


async def stuck(code: Code, chats: int, guesses: int, hold_s: float) -> dict[str, Any]:
    players = 4
    per_player = max(1, math.ceil(guesses / (chats * players)))
    plan = BacklogPlan(groups=chats, players=players, per_player=per_player)
    queue = unique_queue("stk")
    client = make_client()
    logs = Path(tempfile.mkdtemp(prefix="cmx-frontdoor-"))
    standin = StandIn()
    bot: BotProcess | None = None
    async with database(code) as url:
        conn = await asyncpg.connect(_plain(url))
        try:
            await standin.start()
            backlog = Backlog(plan, standin)
            backlog.add_people()
            stuck_chat = plan.chat(chats)  # a room of its own, past the plan's
            standin.add_user(ADMIN, "Admin")
            standin.add_group(stuck_chat, "stuck", admins=[ADMIN], members=[ADMIN])
            env = bot_env(
                standin, redis_url=redis_url(), database_url=url, queue=queue,
                CODEMOJEX_MAX_DEPTH=str(max(per_player, 20)),
            )  # fmt: skip
            bot = start_bot(code, env, logs)
            await bot.start()
            lanes = Lanes(client, queue=queue)
            standin.send_text(stuck_chat, ADMIN, "/newgame")
            await backlog.open_rounds_through_bot(conn)
            round_id = await conn.fetchval(
                "SELECT r.id FROM rounds r JOIN rooms rm ON rm.id = r.room_id "
                "WHERE rm.chat_id = $1 AND r.ended_at IS NULL",
                stuck_chat,
            )
            holder = await asyncpg.connect(_plain(url))
            try:
                lock = holder.transaction()
                await lock.start()
                await holder.execute("SELECT id FROM rounds WHERE id = $1 FOR UPDATE", round_id)
                before = (await lanes.stats()).pending
                standin.send_text(stuck_chat, ADMIN, "/endround")
                typed = backlog.type_guesses()
                began = time.monotonic()

                async def all_in() -> bool:
                    return (await lanes.stats()).pending - before >= typed

                # Until all of them are in, the lock held for `hold_s` meanwhile, and at
                # most a minute after it is let go.
                watch = asyncio.ensure_future(until(all_in, hold_s + 60))
                await asyncio.sleep(max(0.0, hold_s - (time.monotonic() - began)))
                await lock.rollback()
            finally:
                await holder.close()
            released = time.monotonic() - began
            others_s = await watch

            async def ended() -> bool:
                sql = "SELECT ended_at IS NOT NULL FROM rounds WHERE id = $1"
                return bool(await conn.fetchval(sql, round_id))

            ended_s = await until(ended, 30)
            tally = await backlog.tally(lanes)
            return {
                "scenario": "stuck",
                "code": code.name,
                "chats": chats,
                "guesses": typed,
                "hold_s": hold_s,
                "others_in_lanes_s": None if others_s is None else round(others_s, 2),
                "others_in_before_the_lock_went": others_s is not None and others_s < hold_s,
                "round_ended_s": None if ended_s is None else round(released + ended_s, 2),
                "lost": tally.lost,
                "twice": tally.twice,
            }
        finally:
            if bot is not None:
                await bot.ensure_gone()
            await standin.stop()
            await conn.close()
            await delete_matching(client, f"*:{{{queue}}}:*")
            await client.aclose()


def _plain(url: str) -> str:
    return url.replace("postgresql+asyncpg", "postgresql")


# -- outage ---------------------------------------------------------------------------------


class OwnRedis:
    """A redis-server with an AOF in a folder of its own, stopped and started on one port."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--dir", str(self.folder), "--appendonly", "yes"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(20)
            self.proc = None


@contextlib.contextmanager
def own_redis() -> Iterator[OwnRedis]:
    with tempfile.TemporaryDirectory(prefix="cmx-frontdoor-redis-") as folder:
        server = OwnRedis(Path(folder))
        server.start()
        try:
            yield server
        finally:
            server.stop()


async def outage(code: Code, rate: float, seconds: float, down_s: float) -> dict[str, Any]:
    chats, players = 30, 5
    per_player = max(1, math.ceil(rate * seconds / (chats * players)))
    plan = BacklogPlan(groups=chats, players=players, per_player=per_player)
    queue = unique_queue("out")
    logs = Path(tempfile.mkdtemp(prefix="cmx-frontdoor-"))
    standin = StandIn()
    bot: BotProcess | None = None
    with own_redis() as server:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(server.url)
        async with database(code) as url:
            conn = await asyncpg.connect(_plain(url))
            try:
                await standin.start()
                backlog = Backlog(plan, standin)
                backlog.add_people()
                env = bot_env(
                    standin, redis_url=server.url, database_url=url, queue=queue,
                    CODEMOJEX_MAX_DEPTH=str(max(per_player, 20)),
                )  # fmt: skip
                bot = start_bot(code, env, logs)
                await bot.start()
                for _ in range(600):
                    with contextlib.suppress(Exception):
                        await client.ping()
                        break
                    await asyncio.sleep(0.1)
                await backlog.open_rounds_through_bot(conn)
                lanes = Lanes(client, queue=queue)
                before = (await lanes.stats()).pending
                chat_ids = [plan.chat(g) for g in range(chats)]
                said_before = {c: len(standin.sent_messages(c)) for c in chat_ids}
                typed = 0
                began = time.monotonic()
                down_at, up_at = (seconds - down_s) / 2, (seconds + down_s) / 2
                stopped = restarted = False
                for chat, user, code_text in backlog.guesses():
                    # At `rate`: the next guess is typed when its time comes.
                    await asyncio.sleep(max(0.0, typed / rate - (time.monotonic() - began)))
                    elapsed = time.monotonic() - began
                    if not stopped and elapsed >= down_at:
                        await asyncio.to_thread(server.stop)
                        stopped = True
                    if stopped and not restarted and elapsed >= up_at:
                        server.start()
                        restarted = True
                    standin.send_text(chat, user, code_text)
                    typed += 1
                if not restarted:
                    server.start()
                for _ in range(600):
                    with contextlib.suppress(Exception):
                        await client.ping()
                        break
                    await asyncio.sleep(0.1)

                async def drained() -> bool:
                    pending = (await lanes.stats()).pending
                    return standin.pending_updates == 0 and pending - before >= typed

                drain_s = await until(drained, 60)
                await asyncio.sleep(1.0)  # what is still in hand finishes
                tally = await backlog.tally(lanes)
                said = [m for c in chat_ids for m in standin.sent_messages(c)[said_before[c] :]]
                return {
                    "scenario": "outage",
                    "code": code.name,
                    "rate": rate,
                    "seconds": seconds,
                    "down_s": down_s,
                    "typed": typed,
                    "in_lanes": tally.taken,
                    "lost": tally.lost,
                    "twice": tally.twice,
                    "drained_after_s": None if drain_s is None else round(drain_s, 1),
                    "answers": len(said),
                    "chats_answered": len({m.chat_id for m in said}),
                }
            finally:
                if bot is not None:
                    await bot.ensure_gone()
                await standin.stop()
                await conn.close()
                with contextlib.suppress(Exception):
                    await delete_matching(client, f"*:{{{queue}}}:*")
                await client.aclose()


# -- options --------------------------------------------------------------------------------


async def options(batches: int) -> list[dict[str, Any]]:
    """The store-first option's cost: park then settle every update of a batch (one call
    each), as it would for every update taken; client CPU and wall per update."""
    client = make_client()
    queue = unique_queue("opt")
    inbox = Inbox(client, queue)
    update = json.loads(_update_json())
    rows = []
    try:
        for size in (1, 10, 100):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for b in range(batches):
                recs = [(b * size + i + 1, f"s:-1:{i}", record(update, 0)) for i in range(size)]
                await inbox.park(recs)
                await inbox.settle([u for u, _, _ in recs], 0)
            rows.append(_per_update(size, batches, cpu0, wall0))
            rows[-1]["update_bytes"] = len(record(update, 0))
    finally:
        await delete_matching(client, f"*:{{{queue}}}:*")
        await client.aclose()
    return rows


async def order_check(batches: int) -> list[dict[str, Any]]:
    """What one order per key across processes adds to a webhook update with nothing parked
    (the code before made no call at all): `Inbox.enter` for a turn's updates (ids and keys,
    no JSON), beside a parked update of another key; client CPU and wall per update."""
    client = make_client()
    queue = unique_queue("ord")
    inbox = Inbox(client, queue)
    update = json.loads(_update_json())
    rows = []
    try:
        await inbox.park([(1, "s:-2:1", record(update, 0))])  # something parked elsewhere
        for size in (1, 10, 100):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for b in range(batches):
                entries = [(10 + b * size + i, f"s:-1:{i}", "") for i in range(size)]
                assert not any(await inbox.enter(entries))
            rows.append(_per_update(size, batches, cpu0, wall0))
    finally:
        await delete_matching(client, f"*:{{{queue}}}:*")
        await client.aclose()
    return rows


def _per_update(size: int, batches: int, cpu0: float, wall0: float) -> dict[str, Any]:
    """Client CPU and wall per update since `cpu0`, `wall0`, of `batches` batches of `size`."""
    n = batches * size
    return {
        "batch": size,
        "client_cpu_us_per_update": round((time.process_time() - cpu0) / n * 1e6, 1),
        "wall_us_per_update": round((time.perf_counter() - wall0) / n * 1e6, 1),
    }


def _update_json() -> str:
    """A guess's update as Telegram sends it to a group bot (its size and shape)."""
    return json.dumps(
        {
            "update_id": 100000001,
            "message": {
                "message_id": 4242,
                "from": {"id": 6000001, "is_bot": False, "first_name": "B6000001",
                         "language_code": "en"},
                "chat": {"id": -1004400000000, "title": "backlog 0", "type": "supergroup"},
                "date": 1764800000,
                "text": "🍎🍌🍇🍒",
            },
        }
    )  # fmt: skip


# -- the command ----------------------------------------------------------------------------


async def main_async(
    codes: list[Code], which: tuple[str, ...], repeat: int, args: dict[str, Any], name: str,
    save: bool,
) -> None:  # fmt: skip
    runs: list[dict[str, Any]] = []
    for _ in range(repeat):
        for code in codes:
            if "stuck" in which:
                runs.append(await stuck(code, args["chats"], args["guesses"], args["hold"]))
                console.print(runs[-1])
            if "outage" in which:
                runs.append(await outage(code, args["rate"], args["seconds"], args["down"]))
                console.print(runs[-1])
    costs = await options(args["batches"]) if args["options"] else []
    checks = await order_check(args["batches"]) if args["options"] else []
    stuck_runs = [r for r in runs if r["scenario"] == "stuck"]
    if stuck_runs:
        print_table(
            f"one chat stuck {args['hold']:g} s, {args['guesses']:,} guesses of "
            f"{args['chats']} other chats behind its /endround",
            ("code", "others in lanes after s", "round ended after s", "lost", "twice"),
            ([r["code"], r["others_in_lanes_s"], r["round_ended_s"], r["lost"], r["twice"]]
             for r in stuck_runs),
        )  # fmt: skip
    outage_runs = [r for r in runs if r["scenario"] == "outage"]
    if outage_runs:
        print_table(
            f"Redis down {args['down']:g} s while guesses arrive at {args['rate']:g}/s",
            ("code", "typed", "in lanes", "lost", "twice", "drained after s", "answers",
             "chats answered"),
            ([r["code"], r["typed"], r["in_lanes"], r["lost"], r["twice"], r["drained_after_s"],
              r["answers"], r["chats_answered"]] for r in outage_runs),
        )  # fmt: skip
    if costs:
        print_table(
            "storing every update first: park + settle per update (the option not taken)",
            ("batch", "client CPU µs/update", "wall µs/update", "record bytes"),
            ([c["batch"], c["client_cpu_us_per_update"], c["wall_us_per_update"],
              c["update_bytes"]] for c in costs),
        )  # fmt: skip
    if checks:
        print_table(
            "one order per key across webhook processes: the check per update, nothing parked",
            ("batch", "client CPU µs/update", "wall µs/update"),
            ([c["batch"], c["client_cpu_us_per_update"], c["wall_us_per_update"]]
             for c in checks),
        )  # fmt: skip
    save_results(
        name, "frontdoor", save=save, runs=runs, store_first=costs, order_check=checks,
        settings=args,
    )  # fmt: skip


app = typer.Typer(add_completion=False, help=(__doc__ or "").split("\n\n", 1)[0])


@app.command()
def main(
    scenario: Annotated[str, typer.Option(help="stuck, outage or both")] = "both",
    chats: Annotated[int, typer.Option(help="stuck: the other chats")] = 49,
    guesses: Annotated[int, typer.Option(help="stuck: their guesses")] = 1960,
    hold: Annotated[float, typer.Option(help="stuck: seconds the lock is held")] = 40.0,
    rate: Annotated[float, typer.Option(help="outage: guesses typed a second")] = 150.0,
    seconds: Annotated[float, typer.Option(help="outage: seconds of typing")] = 24.0,
    down: Annotated[float, typer.Option(help="outage: seconds Redis is down")] = 8.0,
    with_options: Annotated[
        bool, typer.Option("--options", help="measure the store-first option's cost")
    ] = False,
    batches: Annotated[int, typer.Option(help="options: batches per size")] = 300,
    baseline: Annotated[
        Path | None, typer.Option(help="another checkout (with its .venv), side by side")
    ] = None,
    repeat: Annotated[int, typer.Option(help="runs of each scenario per side")] = 1,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[bool, typer.Option(help="write bench/results/frontdoor.json, kept")] = False,
) -> None:
    if scenario not in ("stuck", "outage", "both", "none"):
        raise typer.BadParameter("scenario: stuck, outage, both or none")
    which = ("stuck", "outage") if scenario == "both" else (scenario,)
    codes = [Code("baseline", baseline.resolve()), TODAY] if baseline else [TODAY]
    name = results_name("frontdoor", out, save=save)
    args = {
        "chats": chats, "guesses": guesses, "hold": hold, "rate": rate, "seconds": seconds,
        "down": down, "options": with_options, "batches": batches,
        "baseline": str(baseline) if baseline else None,
    }  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main_async(codes, which, repeat, args, name, save))


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
