"""Benchmark: the daily code at scale. `players` simulated daily players (100,000 by default)
through one real `codemojex bot` and one real `codemojex worker`.

Setup (not timed): a fresh Postgres database migrated by this checkout, its own queue on the
machine's Redis, the fake Bot API of bench.ingest (bench/ingest_feed.py: pre-built updates
handed out as fast as the bot asks) in this process, and the real `codemojex bot` and
`codemojex worker` processes polling it, as bench.ingest runs them.

Timed, one phase after the other:

1. open: every player sends /daily in their private chat with the bot (the day's puzzle drawn
   once, a room, a player, a round and a result row each, the chat's card written into
   Redis): /daily handled per second (to the last player's result row), the bot's CPU and the
   SQL transactions per /daily.
2. play: every player types their guesses in their private chat (a few misses drawn at random,
   then the code: 1 to `attempts` attempts each), round-robin over the players, as fast as the
   bot asks: the front door's path of a guess (the card, one `admit` per event-loop turn, the
   player's lane, the rooms' rotation and ceilings) and the worker's scoring (the daily's rows,
   the finish, the record, the card's post, the world board). Guesses per second end to end (to
   the last result recorded), the bot's and the worker's CPU per guess, SQL transactions per
   guess (bot and worker together), p50/p99 from a guess handed to the bot to its result
   recorded.
3. /top daily, with `board` finishers on the world board (100,000 by default: the players
   who played, and as many more finishes as it takes added straight to the board in Redis, as
   the workers add them, with attempts and times drawn like the players'): the reads that
   /top daily makes (`codemojex.bot.daily.world_top`: the asker's daily, the board's top 10
   and the asker's rank in Redis, the top's names), timed in this process for `tops` random
   players one after the other: p50/p99 ms. (Through the bot, its answer would wait for the
   answers' pace, which is what it would measure.)

Before phase 3, what a daily player costs at rest: Redis bytes (MEMORY USAGE of every key of
the queue, summed: cards, seats, lanes, the board, dedupe keys still alive) and Postgres bytes
(the database's growth since the migration; per table too) per player.

The posts (puzzles, results, cards) go out at Telegram's pace (30 a second for the bot), so
most are still in the outbox when a run ends. ``--bot-pace N`` lets the bot post N a second
(the setting CODEMOJEX_PACE_BOT_PER_S, for both processes): not a deployment (Telegram
allows 30), a way to see what posting at that pace costs the worker.

``--baseline PATH`` runs the same plan with that checkout's bot and worker (its own .venv)
first, then this one's: the two side by side, same harness, same machine (phase 3's reads are
this checkout's code in either case). ``--open-only`` stops after phase 1 (what /daily
costs; minutes instead of hours).

Run: ``flock /tmp/cmx-bench.lock .venv/bin/python -m bench.daily`` (100,000 players: at the
rates of docs/benchmarks.md, hours on the shared 2-core machine; ``--players N`` for fewer),
``--quick`` (300 players, about a minute); ``--save`` writes bench/results/daily.json. Needs
the machine's Postgres (CODEMOJEX_BENCH_PG_ADMIN_URL) and Redis (CODEMOJEX_BENCH_REDIS_URL);
the database and the queue's keys are dropped after.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import asyncpg
import typer

from bench.common import (
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
from bench.ingest import Ids, Processes, _eventually, _recorded_ms, _settled_xacts, _spy
from bench.ingest_feed import TOKEN, Feed, private_update
from bench.pipeline import PG_ADMIN_URL, TODAY, Code, _admin, _cpu_s, _profile_top

FIRST_USER = 7_000_000_000  # private chats: the chat id is the user's
TABLES = ("rooms", "players", "rounds", "guesses", "outbox", "daily_results", "daily_records")


class Plan:
    def __init__(self, players: int, attempts: int, tops: int, board: int, seed: int = 5) -> None:
        self.players, self.attempts, self.tops = players, attempts, tops
        self.board = max(board, players)
        self.rng = random.Random(seed)
        # how many attempts each player takes (the last one cracks the code)
        self.takes = [self.rng.randint(1, attempts) for _ in range(players)]

    @property
    def guesses(self) -> int:
        return sum(self.takes)

    def user(self, p: int) -> int:
        return FIRST_USER + p


def dailies(plan: Plan, ids: Ids) -> list[dict[str, Any]]:
    out = []
    for p in range(plan.players):
        update_id, message_id = ids.next()
        out.append(private_update(update_id, plan.user(p), message_id, "/daily"))
    return out


def plays(
    plan: Plan, ids: Ids, palette: tuple[str, ...], secret: str, length: int
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Every player's guesses, the k-th of each before anybody's (k+1)-th; and message id ->
    update id."""
    updates: list[dict[str, Any]] = []
    by_message: dict[int, int] = {}
    for k in range(plan.attempts):
        for p, takes in enumerate(plan.takes):
            if k >= takes:
                continue
            if k == takes - 1:
                code = secret
            else:
                while (code := "".join(plan.rng.choice(palette) for _ in range(length))) == secret:
                    pass
            update_id, message_id = ids.next()
            updates.append(private_update(update_id, plan.user(p), message_id, code))
            by_message[message_id] = update_id
    return updates, by_message


async def _redis_bytes(client: Any, queue: str) -> tuple[int, int]:
    """(keys, bytes) of every key of the queue (MEMORY USAGE, summed)."""
    keys = [k async for k in client.scan_iter(match=f"*:{{{queue}}}:*", count=5000)]
    total = 0
    for start in range(0, len(keys), 2000):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 2000]:
            pipe.memory_usage(key, samples=0)
        total += sum(int(n or 0) for n in await pipe.execute())
    return len(keys), total


async def _pg_bytes(conn: asyncpg.Connection) -> dict[str, int]:
    sizes = {"database": int(await conn.fetchval("SELECT pg_database_size(current_database())"))}
    for table in TABLES:
        sizes[table] = int(await conn.fetchval(f"SELECT pg_total_relation_size('{table}')"))
    return sizes


async def _tops(queue: str, database_url: str, plan: Plan) -> list[float]:
    """The reads of /top daily for `plan.tops` random players, one after the other (ms)."""
    from telegram import User

    from codemojex.bot.daily import world_top
    from codemojex.db import make_engine, make_sessionmaker
    from codemojex.locale import EN
    from codemojex.state.board import DailyBoard
    from codemojex.values.clock import utcnow

    redis = make_client()
    engine = make_engine(database_url)
    try:
        sessionmaker = make_sessionmaker(engine)
        board = DailyBoard(redis, queue)
        puzzles = random.SystemRandom()  # the bot's: today's puzzle, should nobody have drawn it
        rng = random.Random(9)
        waits: list[float] = []
        for _ in range(plan.tops):
            user = User(plan.user(rng.randrange(plan.players)), "P", is_bot=False)
            t0 = time.perf_counter()
            text = await world_top(sessionmaker, board, puzzles, utcnow(), user, EN)
            waits.append((time.perf_counter() - t0) * 1000)
            assert "You: place " in text, text
        return sorted(waits)
    finally:
        await engine.dispose()
        await redis.aclose()


class Spies:
    """py-spy on the bot and the worker for one phase (with --profile)."""

    def __init__(self, folder: Path | None, pids: dict[str, int], label: str) -> None:
        self.folder, self.pids, self.label = folder, pids, label
        self.procs: list[asyncio.subprocess.Process] = []
        self.files: dict[str, Path] = {}

    async def start(self, phase: str) -> None:
        if self.folder is None:
            return
        await asyncio.to_thread(self.folder.mkdir, parents=True, exist_ok=True)
        for what, pid in self.pids.items():
            self.files[what] = self.folder / f"daily-{self.label}-{phase}-{what}.txt"
            self.procs.append(await _spy(pid, self.files[what]))
        await asyncio.sleep(1.0)  # py-spy attaches

    async def stop(self) -> dict[str, Any]:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 30)
        self.procs = []
        found = {w: _profile_top(f) for w, f in self.files.items() if f.exists()}
        self.files = {}
        return found


async def _top_up(board: Any, day: Any, plan: Plan) -> None:
    """The world board up to `plan.board` finishers: finishes of users who are not players
    (ids past theirs), added as the workers add them (`DailyBoard.finished`)."""
    from datetime import UTC, datetime, timedelta

    from codemojex.values.daily import Finish

    rng = random.Random(13)
    start = datetime.now(UTC)
    extra = [
        Finish(
            day,
            plan.user(plan.players + i),
            rng.randint(1, plan.attempts),
            True,
            start + timedelta(milliseconds=rng.randrange(3_600_000)),
        )
        for i in range(plan.board - plan.players)
    ]
    for at in range(0, len(extra), 5000):
        await board.finished(extra[at : at + 5000])


async def run_daily(
    plan: Plan,
    max_s: float,
    profile: Path | None = None,
    bot_pace: int | None = None,
    code: Code = TODAY,
    open_only: bool = False,
) -> dict[str, Any]:
    """One run of `code`'s bot and worker (phases 1 to 3, or 1 alone with `open_only`)."""
    from codemojex.scoring import split_emojis
    from codemojex.state.board import DailyBoard

    db = "cmbench_" + uuid.uuid4().hex[:10]
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    database_url = f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{db}"
    queue = unique_queue("day")
    client = make_client()
    feed = Feed()
    await feed.start()
    await _admin(f'CREATE DATABASE "{db}"')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEMOJEX_", "PYTHONPATH"))}
    env.update(
        CODEMOJEX_TOKEN=TOKEN,
        CODEMOJEX_BOT_API_BASE_URL=feed.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=feed.base_file_url,
        CODEMOJEX_REDIS_URL=redis_url(),
        CODEMOJEX_DATABASE_URL=database_url,
        CODEMOJEX_QUEUE=queue,
    )
    if bot_pace is not None:
        env["CODEMOJEX_PACE_BOT_PER_S"] = str(bot_pace)
    procs = Processes(code, env)
    admin = await asyncpg.connect(PG_ADMIN_URL)
    conn = await asyncpg.connect(f"{base}/{db}")
    out: dict[str, Any] = {
        "code": code.label,
        "players": plan.players,
        "guesses": plan.guesses,
        "attempts_up_to": plan.attempts,
        "bot_pace_per_s": bot_pace or 30,
    }
    try:
        await procs.run("migrate")
        pg0 = await _pg_bytes(conn)
        _, redis_bytes0 = await _redis_bytes(client, queue)
        bot = await procs.start("bot")
        worker = await procs.start("worker")

        async def polling() -> bool:
            return feed.calls["getUpdates"] > 0

        await _eventually(polling, 120, "the bot polling")
        ids = Ids()
        spies = Spies(profile, {"bot": bot.pid, "worker": worker.pid}, code.label)

        # -- 1. /daily ------------------------------------------------------------------
        opens = dailies(plan, ids)
        open_ids = [int(u["update_id"]) for u in opens]
        xact0 = await _settled_xacts(admin, db)
        await spies.start("open")
        cpu0 = _cpu_s(bot.pid)
        polls = 0
        feed.add(opens)

        async def opened() -> bool:
            nonlocal polls
            polls += 1
            return int(await conn.fetchval("SELECT count(*) FROM daily_results")) >= plan.players

        await _eventually(opened, max_s, "every player's /daily", every_s=0.2)
        cpu = _cpu_s(bot.pid) - cpu0
        profiles = {"open": await spies.stop()}
        first_ms = min(feed.served_ms[u] for u in open_ids)
        last = await conn.fetchval("SELECT max(started_at) FROM daily_results")
        seconds = max(1e-3, last.timestamp() - first_ms / 1000)
        xacts = await _settled_xacts(admin, db) - xact0 - polls
        out["open"] = {
            "dailies_per_s": round(plan.players / seconds, 1),
            "seconds": round(seconds, 2),
            "bot_cpu_us_per_daily": round(cpu * 1e6 / plan.players, 1),
            "sql_xacts_per_daily": round(xacts / plan.players, 2),
        }
        console.print(f"[dim]{code.label}: open: {out['open']}[/]")
        if open_only:
            out["load1"] = round(os.getloadavg()[0], 2)
            if profile is not None:
                out["profiles"] = profiles
            return out

        # -- 2. the guesses ---------------------------------------------------------------
        row = await conn.fetchrow("SELECT palette, secret, length, day FROM daily_puzzles")
        palette = split_emojis(row["palette"])
        feed_updates, by_message = plays(plan, ids, palette, row["secret"], int(row["length"]))
        xact0 = await _settled_xacts(admin, db)
        redis0 = await server_counters(client)
        await spies.start("play")
        cpu0, worker_cpu0 = _cpu_s(bot.pid), _cpu_s(worker.pid)
        polls = 0
        feed.add(feed_updates)

        async def recorded() -> bool:
            nonlocal polls
            polls += 1
            return int(await conn.fetchval("SELECT count(*) FROM guesses")) >= plan.guesses

        await _eventually(recorded, max_s, "every guess recorded", every_s=0.2)
        cpu, worker_cpu = _cpu_s(bot.pid) - cpu0, _cpu_s(worker.pid) - worker_cpu0
        profiles["play"] = await spies.stop()
        redis1 = await server_counters(client)
        taken_ms = await _recorded_ms(conn)
        first_ms = min(feed.served_ms[u] for u in by_message.values())
        waits = sorted(ms - feed.served_ms[by_message[m]] for m, ms in taken_ms.items())
        seconds = max(1e-3, (max(taken_ms.values()) - first_ms) / 1000)
        xacts = await _settled_xacts(admin, db) - xact0 - polls
        n = plan.guesses
        out["play"] = {
            "guesses_per_s": round(n / seconds, 1),
            "seconds": round(seconds, 2),
            "bot_cpu_us_per_guess": round(cpu * 1e6 / n, 1),
            "worker_cpu_us_per_guess": round(worker_cpu * 1e6 / n, 1),
            "sql_xacts_per_guess": round(xacts / n, 4),
            "wait_p50_ms": percentile(waits, 50),
            "wait_p99_ms": percentile(waits, 99),
            "redis": server_cost(redis0, redis1, redis0.minus(redis0), n).as_dict(),
        }
        console.print(f"[dim]play: {out['play']}[/]")

        # -- 3. /top daily with every player on the board ----------------------------------
        board = DailyBoard(client, queue)

        async def on_board() -> bool:
            return (await board.counts(row["day"])).finished >= plan.players

        await _eventually(on_board, 120, "every finish on the world board")
        # -- what a daily player costs at rest (before the board is topped up) ------------
        keys, redis_bytes = await _redis_bytes(client, queue)
        pg1 = await _pg_bytes(conn)
        out["bytes_per_player"] = {
            "redis": round((redis_bytes - redis_bytes0) / plan.players, 1),
            "redis_keys_per_player": round(keys / plan.players, 2),
            "postgres": round((pg1["database"] - pg0["database"]) / plan.players, 1),
            "postgres_by_table": {t: round((pg1[t] - pg0[t]) / plan.players, 1) for t in TABLES},
        }
        await _top_up(board, row["day"], plan)
        tops_ms = await _tops(queue, database_url, plan)
        out["top_daily"] = {
            "finishers": (await board.counts(row["day"])).finished,
            "finishers_added_to_the_board": plan.board - plan.players,
            "reads": len(tops_ms),
            "p50_ms": round(percentile(tops_ms, 50), 2),
            "p99_ms": round(percentile(tops_ms, 99), 2),
        }
        console.print(f"[dim]/top daily: {out['top_daily']}[/]")

        out["outbox_unsent"] = int(
            await conn.fetchval("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
        )
        out["load1"] = round(os.getloadavg()[0], 2)
        if profile is not None:
            out["profiles"] = profiles
        return out
    finally:
        await procs.stop()
        await feed.stop()
        await conn.close()
        await admin.close()
        await delete_matching(client, f"*:{{{queue}}}:*")
        await client.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


app = typer.Typer(add_completion=False, help=__doc__)


def _rows(result: dict[str, Any]) -> list[tuple[str, object]]:
    """The figures of one run, in the table's order (phase 1's alone for --open-only)."""
    o = result["open"]
    rows: list[tuple[str, object]] = [
        ("/daily handled per s", o["dailies_per_s"]),
        ("bot CPU ms per /daily", round(o["bot_cpu_us_per_daily"] / 1000, 2)),
        ("SQL xacts per /daily", o["sql_xacts_per_daily"]),
    ]
    if "play" not in result:
        return rows
    p, t, b = result["play"], result["top_daily"], result["bytes_per_player"]
    return [
        *rows,
        ("guesses/s end to end", p["guesses_per_s"]),
        ("bot CPU µs per guess", p["bot_cpu_us_per_guess"]),
        ("worker CPU µs per guess", p["worker_cpu_us_per_guess"]),
        ("SQL xacts per guess", p["sql_xacts_per_guess"]),
        ("guess to result p50/p99 ms", f"{p['wait_p50_ms']} / {p['wait_p99_ms']}"),
        (f"/top daily p50/p99 ms, {t['finishers']:,} finishers",
         f"{t['p50_ms']} / {t['p99_ms']}"),
        ("Redis bytes per player", b["redis"]),
        ("Postgres bytes per player", b["postgres"]),
    ]  # fmt: skip


@app.command()
def main(
    quick: Annotated[bool, typer.Option(help="300 players, 200 /top daily")] = False,
    players: Annotated[int, typer.Option(help="daily players (private chats)")] = 100_000,
    attempts: Annotated[int, typer.Option(help="most attempts a player takes (1..8)")] = 4,
    tops: Annotated[int, typer.Option(help="/top daily reads timed")] = 1000,
    board: Annotated[int, typer.Option(help="finishers on the board for /top daily")] = 100_000,
    max_s: Annotated[float, typer.Option(help="give up on a phase after this long")] = 1800.0,
    save: Annotated[bool, typer.Option(help="write bench/results/daily.json, kept")] = False,
    profile: Annotated[
        Path | None, typer.Option(help="py-spy the bot and the worker; stacks in this folder")
    ] = None,
    bot_pace: Annotated[
        int | None, typer.Option(help="the bot's posts a second (default Telegram's 30)")
    ] = None,
    baseline: Annotated[
        Path | None, typer.Option(help="another checkout (with its .venv), run first, side by side")
    ] = None,
    open_only: Annotated[bool, typer.Option(help="phase 1 alone (/daily)")] = False,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
) -> None:  # fmt: skip
    scratch = "daily-quick" if quick or open_only else None
    name = results_name("daily", out, save=save, scratch=scratch)
    if quick:
        players, tops = min(players, 300), min(tops, 200)
    if not 1 <= attempts <= 8:
        raise typer.BadParameter("attempts: 1 to 8 (the daily allows 8)")
    codes = [Code("baseline", baseline.resolve()), TODAY] if baseline else [TODAY]
    results: list[dict[str, Any]] = []
    with contextlib.suppress(KeyboardInterrupt):
        for code in codes:
            plan = Plan(players, attempts, tops, board)
            results.append(asyncio.run(run_daily(plan, max_s, profile, bot_pace, code, open_only)))
    if not results:
        return
    columns = [_rows(r) for r in results]
    print_table(
        f"the daily code: {players:,} players, {results[0]['guesses']:,} guesses, "
        "real bot + worker",
        ("what", *(r["code"] for r in results)),
        [[what, *(c[i][1] for c in columns)] for i, (what, _) in enumerate(columns[0])],
    )
    for result in results:
        for phase, found in result.get("profiles", {}).items():
            for what, rows in found.items():
                print_table(
                    f"py-spy, {result['code']}'s {what} in phase {phase}: self %, total %",
                    ("function", "self %", "total %"),
                    rows,
                )
    save_results(name, "daily", save=save, runs=results)


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
