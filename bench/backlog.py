"""Benchmark: a backlog of N guesses waiting at Telegram, drained by a real `codemojex bot`
that is SIGKILLed half-way and restarted.

Setup (not timed): a fresh Postgres database, migrated; a queue of its own on the machine's
Redis; the Bot API stand-in (codemojex.standin, which confirms updates as Telegram does) in
this process, with N wrong guesses typed into it before the bot starts (bench/backlog_world.py:
rooms of `players` players with an open round, `per_player` guesses each, round-robin).

Then the real `codemojex bot` of this checkout drains them, polling or through its webhook
(`--mode`): SIGKILL once `--kill-at` of them are in the lanes, restart, drain to the end,
SIGTERM. Printed per mode:

- the bot's peak RSS (the kernel's VmHWM of each process, the larger of the two), the memory
  a backlog costs the bot (the updates wait at Telegram, not in the bot);
- the drain rate: guesses into the lanes per second while a bot ran (from its first guess
  taken to the kill, and from the restarted bot's first to the end);
- what the kill cost: guesses lost (a lane short of `per_player`) and taken twice (a lane
  over it), both 0 when the bot confirms only what it stored; and how many updates the dead
  bot held unconfirmed (Telegram sent them again).

Run: ``.venv/bin/python -m bench.backlog`` (N = 200,000: minutes), ``--n 5000`` for a smoke
run. The results go to bench/out/ (untracked) unless ``--save`` puts them into
bench/results/. Needs the machine's Postgres (CODEMOJEX_BENCH_PG_ADMIN_URL) and Redis
(CODEMOJEX_BENCH_REDIS_URL); the database and the queue's keys are dropped after.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.backlog_world import MODES, Backlog, BacklogPlan, BotProcess, bot_env
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
from codemojex.db import make_engine, make_sessionmaker, upgrade
from codemojex.lanes import Lanes
from codemojex.standin import StandIn

SAMPLE_S = 0.05  # how often the lanes and the bot's RSS are looked at


@dataclass(frozen=True)
class Settings:
    """One run's settings (the command's options)."""

    n: int
    players: int
    per_player: int
    kill_at: float
    in_hand: int | None


class Segment:
    """One bot process's part of the drain: when it took its first guess, how many it took."""

    def __init__(self) -> None:
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.taken = 0

    @property
    def per_s(self) -> float | None:
        if self.first_at is None or self.last_at is None or self.last_at <= self.first_at:
            return None
        return self.taken / (self.last_at - self.first_at)


async def drain_while(
    bot: BotProcess,
    lanes: Lanes,
    start: int,
    until: Callable[[int], Awaitable[bool]],
    segment: Segment,
) -> int:
    """Watch the lanes (and the bot's RSS) until `until(taken)` is true; the count then."""
    while True:
        taken = (await lanes.stats()).pending
        now = time.monotonic()
        if taken > start and segment.first_at is None:
            segment.first_at = now
        if taken > start + segment.taken:
            segment.taken, segment.last_at = taken - start, now
        bot.note_rss()
        if await until(taken):
            return taken
        if bot.proc is not None and bot.proc.returncode is not None:
            raise RuntimeError(f"the bot exited ({bot.proc.returncode}): {bot.output()[-2000:]}")
        await asyncio.sleep(SAMPLE_S)


async def run_mode(args: Settings, mode: str) -> dict[str, Any]:
    groups = math.ceil(args.n / (args.players * args.per_player))
    plan = BacklogPlan(groups=groups, players=args.players, per_player=args.per_player)
    db = "cmbacklog_" + uuid.uuid4().hex[:10]
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{db}"
    queue = unique_queue("bkl")
    client = make_client()
    logs = Path(tempfile.mkdtemp(prefix="cmx-backlog-"))
    await _admin(f'CREATE DATABASE "{db}"')
    engine = make_engine(url)
    standin = StandIn()
    bots: list[BotProcess] = []
    try:
        await asyncio.to_thread(upgrade, url)
        await standin.start()
        backlog = Backlog(plan, standin)
        backlog.add_people()
        await backlog.open_rounds(make_sessionmaker(engine))
        typed = backlog.type_guesses()
        console.print(f"[dim]{mode}: {typed} guesses waiting in {groups} rooms[/]")
        extra = {"CODEMOJEX_MAX_DEPTH": str(max(args.per_player, 20))}
        if args.in_hand is not None:
            extra["CODEMOJEX_BOT_IN_HAND"] = str(args.in_hand)
        env = bot_env(
            standin, redis_url=redis_url(), database_url=url, queue=queue, mode=mode,
            webhook_port=free_port(), **extra,
        )  # fmt: skip
        lanes = Lanes(client, queue=queue)
        first, second = Segment(), Segment()

        bots.append(BotProcess(env, logs / "bot.log"))
        await bots[0].start()
        kill_at = int(typed * args.kill_at)

        async def half(taken: int) -> bool:
            return taken >= kill_at

        await drain_while(bots[0], lanes, 0, half, first)
        bots[0].signal(signal.SIGKILL)
        await bots[0].wait()
        at_kill = (await lanes.stats()).pending
        unconfirmed = standin.pending_updates

        bots.append(BotProcess(env, logs / "bot.log"))
        await bots[1].start()

        async def drained(taken: int) -> bool:
            return standin.pending_updates == 0

        await drain_while(bots[1], lanes, at_kill, drained, second)
        tally = await backlog.tally(lanes)
        bots[1].signal(signal.SIGTERM)
        rc = await bots[1].wait(60)
        seconds = sum((s.last_at or 0) - (s.first_at or 0) for s in (first, second) if s.first_at)
        return {
            "mode": mode,
            "guesses": typed,
            "rooms": groups,
            "players_per_room": plan.players,
            "per_player": plan.per_player,
            "in_hand": args.in_hand,
            "peak_rss_mb": round(max(b.peak_rss_kb for b in bots) / 1024, 1),
            "peak_rss_mb_each": [round(b.peak_rss_kb / 1024, 1) for b in bots],
            "drain_per_s": round(typed / seconds, 1) if seconds else None,
            "drain_per_s_before_kill": round(first.per_s or 0, 1),
            "drain_per_s_after_restart": round(second.per_s or 0, 1),
            "taken_at_kill": at_kill,
            # Confirmed beyond what was stored would be lost for good: 0 when the bot
            # confirms only what it stored.
            "confirmed_at_kill": typed - unconfirmed,
            "unconfirmed_at_kill": unconfirmed,
            "taken": tally.taken,
            "lost": tally.lost,
            "twice": tally.twice,
            "stop_exit_code": rc,
            "webhook_posts": standin.webhook_posts if mode == "webhook" else None,
            "load1": round(os.getloadavg()[0], 2),
        }
    finally:
        for bot in bots:
            await bot.ensure_gone()
        await standin.stop()
        await engine.dispose()
        await delete_matching(client, f"*:{{{queue}}}:*")
        await client.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


async def main_async(args: Settings, modes: tuple[str, ...], name: str, save: bool) -> None:
    runs = [await run_mode(args, mode) for mode in modes]
    print_table(
        f"a backlog of {args.n:,} guesses, the bot SIGKILLed at {args.kill_at:.0%} and restarted",
        ("mode", "peak RSS MB", "drain/s", "before kill/s", "after restart/s", "lost",
         "twice", "unconfirmed at kill"),
        (
            [r["mode"], r["peak_rss_mb"], r["drain_per_s"], r["drain_per_s_before_kill"],
             r["drain_per_s_after_restart"], r["lost"], r["twice"], r["unconfirmed_at_kill"]]
            for r in runs
        ),
    )  # fmt: skip
    save_results(name, "backlog", save=save, runs=runs)


app = typer.Typer(add_completion=False, help=(__doc__ or "").split("\n\n", 1)[0])


@app.command()
def main(
    n: Annotated[int, typer.Option(help="guesses in the backlog")] = 200_000,
    mode: Annotated[str, typer.Option(help="polling, webhook or both")] = "both",
    players: Annotated[int, typer.Option(help="players per room")] = 10,
    per_player: Annotated[int, typer.Option(help="guesses per player (all fit in the lane)")] = 20,
    kill_at: Annotated[float, typer.Option(help="share taken at the kill")] = 0.5,
    in_hand: Annotated[
        int | None, typer.Option(help="CODEMOJEX_BOT_IN_HAND (default: the bot's)")
    ] = None,
    out: Annotated[str | None, typer.Option(help="a run's NAME.json in bench/out/")] = None,
    save: Annotated[bool, typer.Option(help="write bench/results/backlog.json, kept")] = False,
) -> None:
    if mode not in (*MODES, "both"):
        raise typer.BadParameter(f"mode: one of {', '.join((*MODES, 'both'))}")
    if not 0 < kill_at < 1:
        raise typer.BadParameter("kill-at: a share between 0 and 1")
    small = None if n >= 100_000 else "backlog-small"
    name = results_name("backlog", out, save=save, scratch=small)
    modes = MODES if mode == "both" else (mode,)
    settings = Settings(n, players, per_player, kill_at, in_hand)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main_async(settings, modes, name, save))


if __name__ == "__main__":
    exit_cleanly_on_sigterm()
    app()
