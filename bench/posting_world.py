"""The world runs of bench.posting (`--world`): guess -> shown through the real processes, against
a stand-in whose bot-wide limit is hidden.

G supergroups of 3 players, each room with a round open (through the store, its announcement
booked as posted: the run starts with an idle outbox), and in each room a guess every 4 s (the
players in turn, each room at its own phase), typed into the Bot API stand-in for `seconds`.
The stand-in enforces Telegram's limits (1 message a second per chat with a burst of 3, 20 a
minute per group) and a bot-wide limit L the bot is not told (429 past it, with an honest
retry_after). The checkout's real `codemojex bot` and `codemojex worker` (and, when the checkout
has one, `codemojex sender`) run at their defaults.

Each result is matched to the post that carried it (its outbox row's message id), so:
- guess -> shown: typed to the stand-in accepting that post (p50, p95, p99, max);
- guess -> scored: typed to the result's row written (the worker's commit);
- never shown: results with no post `settle_s` after the guesses stopped;
- posts/s and results/s while guessing, posts a minute per group, Jain's index over the posts
  per group, the 429s (by the stand-in's rule, and as a share of every send), the bot's
  learned rate at the end (the checkout's, when it learns one);
- each chat's results in order and once (a row posted before an older one of its chat, or
  two posts of one row, are counted: `out_of_order`, `twice`).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from bench.backlog_world import Backlog, BacklogPlan
from bench.common import delete_matching, jain_index, make_client, percentile, redis_url
from bench.ingest import Processes, _spy
from bench.pipeline import PG_ADMIN_URL, Code, _admin, _cpu_s, _profile_top

# The runs: (groups, hidden bot-wide limit).
RUNS: tuple[tuple[int, int], ...] = (
    (200, 30),
    (1000, 300),
    (1000, 10),
    (2000, 300),
    (2000, 10),
    (1000, 1000),
)
FIRST_CHAT = -1_004_300_000_000
FIRST_USER = 7_000_000


@dataclass(frozen=True)
class World:
    groups: int
    limit: int
    seconds: float = 60.0
    every_s: float = 4.0
    players: int = 3
    settle_s: float = 150.0
    chat_burst: int = 3


def _pct(values: list[float], q: float) -> float:
    return percentile(sorted(values), q) if values else math.nan


async def _sender_command(code: Code) -> bool:
    """Whether the checkout has a `codemojex sender` process."""
    proc = await asyncio.create_subprocess_exec(
        code.python, "-m", "codemojex.cli", "sender", "--help", cwd=str(code.root),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return await proc.wait() == 0


async def run_world(
    code: Code, world: World, seed: int = 11, profile: Path | None = None
) -> dict[str, Any]:
    """One run of `world` with the processes of `code` (py-spy on each into `profile`)."""
    from codemojex.db import make_engine, make_sessionmaker
    from codemojex.standin import StandIn

    standin = StandIn()
    await standin.start()
    db = "cmworld_" + uuid.uuid4().hex[:10]
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{db}"
    queue = f"pw{uuid.uuid4().hex[:8]}"
    await _admin(f'CREATE DATABASE "{db}"')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEMOJEX_", "PYTHONPATH"))}
    env.update(
        CODEMOJEX_TOKEN=standin.token,
        CODEMOJEX_BOT_API_BASE_URL=standin.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=standin.base_file_url,
        CODEMOJEX_REDIS_URL=redis_url(),
        CODEMOJEX_DATABASE_URL=url,
        CODEMOJEX_QUEUE=queue,
        PYTHONPATH=str(code.root),
    )
    procs = Processes(code, env)
    client = make_client()
    engine = make_engine(url)
    conn: asyncpg.Connection | None = None
    try:
        await procs.run("migrate")
        plan = BacklogPlan(
            groups=world.groups, players=world.players, per_player=1,
            first_chat=FIRST_CHAT, first_user=FIRST_USER, seed=seed,
        )  # fmt: skip
        backlog = Backlog(plan, standin)
        backlog.add_people()
        await backlog.open_rounds(make_sessionmaker(engine))
        conn = await asyncpg.connect(f"{base}/{db}")
        # The announcements count as posted: the run starts with an idle outbox.
        await conn.execute("UPDATE outbox SET sent_at = now() WHERE sent_at IS NULL")
        standin.enforce_rate_limits(
            per_chat_per_s=1, per_group_per_min=20, global_per_s=world.limit,
            chat_burst=world.chat_burst,
        )  # fmt: skip
        started_procs = ["bot", "worker"]
        if await _sender_command(code):
            started_procs.append("sender")
        pids = {what: (await procs.start(what)).pid for what in started_procs}
        probe = FIRST_USER - 1
        standin.add_user(probe, "Probe")
        standin.send_private(probe, "/help")
        await standin.wait_for_sent_count(1, chat_id=probe, timeout=120)
        spies = {}
        if profile is not None:
            await asyncio.to_thread(profile.mkdir, parents=True, exist_ok=True)
            for what, pid in pids.items():
                spies[what] = (await _spy(pid, profile / f"{code.label}-{what}.txt"), what)
        result = await _play(world, backlog, standin, conn, client, queue, pids, seed)
        for spy, what in spies.values():
            spy.send_signal(signal.SIGINT)
            await asyncio.wait_for(spy.wait(), 30)
            assert profile is not None
            result[f"profile_{what}"] = _profile_top(profile / f"{code.label}-{what}.txt", 25)
        return result
    finally:
        await procs.stop()
        await standin.stop()
        if conn is not None:
            await conn.close()
        await engine.dispose()
        await delete_matching(client, f"*:{{{queue}}}:*")
        await client.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


async def _play(
    world: World,
    backlog: Backlog,
    standin: Any,
    conn: asyncpg.Connection,
    client: Any,
    queue: str,
    pids: dict[str, int],
    seed: int,
) -> dict[str, Any]:
    plan = backlog.plan
    rng = random.Random(seed)
    rounds = backlog._rounds
    typed: dict[tuple[int, int], tuple[float, float]] = {}  # (chat, message) -> mono, wall
    cpu0 = {what: _cpu_s(pid) for what, pid in pids.items()}
    violations0 = len(standin.violations)
    sent0 = len(standin.sent_messages())
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    until = t0 + world.seconds

    async def room(g: int) -> None:
        chat = plan.chat(g)
        palette, secret = rounds[chat]
        await asyncio.sleep(rng.uniform(0, world.every_s))
        turn = 0
        while time.monotonic() < until:
            code = secret
            while code == secret:
                code = tuple(rng.choice(palette) for _ in secret)
            user = plan.user(g, turn % world.players)
            mid = standin.send_text(chat, user, "".join(code))
            typed[(chat, mid)] = (time.monotonic(), time.time())
            turn += 1
            await asyncio.sleep(world.every_s)

    await asyncio.gather(*(room(g) for g in range(plan.groups)))
    stopped = time.monotonic()
    guessing_s = stopped - t0
    rows: list[asyncpg.Record] = []
    deadline = stopped + world.settle_s
    while True:
        rows = await conn.fetch(
            "SELECT id, chat_id, reply_to_message_id AS guess, created_at, sent_at, "
            "sent_message_id FROM outbox WHERE kind = 'result' AND reply_to_message_id IS NOT "
            "NULL ORDER BY id"
        )
        mine = [r for r in rows if (int(r["chat_id"]), int(r["guess"])) in typed]
        shown = sum(1 for r in mine if r["sent_at"] is not None)
        if len(mine) >= len(typed) and shown >= len(mine):
            break
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    all_shown_at = time.monotonic()
    cpu = {what: round(_cpu_s(pid) - cpu0[what], 1) for what, pid in pids.items()}
    result = _report(
        world, standin, typed, mine, t0, stopped, all_shown_at, guessing_s, cpu,
        violations0, sent0, load0, await _learned(client, queue, standin.token),
    )  # fmt: skip
    if "sender" in cpu:
        result["sender_cpu_ms_per_post"] = round(1000 * cpu["sender"] / max(1, result["posts"]), 2)
    return result


async def _learned(client: Any, queue: str, token: str) -> dict[str, Any]:
    """The bot's learned pace as Redis holds it (nothing on a checkout that learns none)."""
    bot = token.partition(":")[0]
    raw = await client.hgetall(f"cmx:{{{queue}}}:pace:b:{bot}:rate")
    fields = {k.decode(): v.decode() for k, v in raw.items()}
    out: dict[str, Any] = {}
    if "rate" in fields:
        out["learned_rate"] = round(float(fields["rate"]), 1)
    for cause in ("chat", "group", "bot"):
        if cause in fields:
            out[f"refused_{cause}"] = int(fields[cause])
    return out


def _report(
    world: World,
    standin: Any,
    typed: dict[tuple[int, int], tuple[float, float]],
    rows: list[asyncpg.Record],
    t0: float,
    stopped: float,
    all_shown_at: float,
    guessing_s: float,
    cpu: dict[str, float],
    violations0: int,
    sent0: int,
    load0: float,
    learned: dict[str, Any],
) -> dict[str, Any]:
    posts = standin.sent_messages()[sent0:]
    at = {(m.chat_id, m.message_id): m.ts for m in posts}
    shown: list[float] = []
    scored: list[float] = []
    # (guess -> shown, chat, typed, scored, shown), each time in s since the guessing began
    stories: list[tuple[float, int, float, float, float]] = []
    unshown = 0
    last_shown = t0
    out_of_order = 0
    last_post: dict[int, int] = {}
    for r in rows:
        chat, guess = int(r["chat_id"]), int(r["guess"])
        mono, wall = typed[(chat, guess)]
        scored.append(r["created_at"].timestamp() - wall)
        ts = at.get((chat, int(r["sent_message_id"] or 0)))
        if r["sent_at"] is None or ts is None:
            unshown += 1
            continue
        shown.append(ts - mono)
        stories.append((ts - mono, chat, mono - t0, scored[-1] + mono - t0, ts - t0))
        last_shown = max(last_shown, ts)
        if int(r["sent_message_id"]) < last_post.get(chat, 0):
            out_of_order += 1
        last_post[chat] = int(r["sent_message_id"])
    results_missing = len(typed) - len(rows)
    in_window = [m for m in posts if t0 <= m.ts <= stopped and m.chat_id < 0]
    per_group = {FIRST_CHAT - g: 0 for g in range(world.groups)}
    for m in in_window:
        if m.chat_id in per_group:
            per_group[m.chat_id] += 1
    # Over the whole run too (the guessing and the drain): when Telegram allows fewer posts
    # in the guessing window than there are groups, a window's Jain counts who was first in
    # the ring, not whether the ring turns.
    whole = {chat: 0 for chat in per_group}
    for m in posts:
        if m.chat_id in whole and m.ts >= t0:
            whole[m.chat_id] += 1
    violations = standin.violations[violations0:]
    by_rule = {rule: sum(1 for v in violations if v.rule == rule) for rule in
               ("per_chat_per_s", "per_group_per_min", "global_per_s")}  # fmt: skip
    sends = len(posts) + len(violations)
    return {
        "groups": world.groups,
        "limit": world.limit,
        "guesses": len(typed),
        "results": len(rows),
        "p50": _pct(shown, 50),
        "p95": _pct(shown, 95),
        "p99": _pct(shown, 99),
        "max": max(shown, default=math.nan),
        "unshown": unshown + results_missing,
        "unshown_pct": round(100 * (unshown + results_missing) / max(1, len(typed)), 2),
        "scored_p50": _pct(scored, 50),
        "scored_p99": _pct(scored, 99),
        "posts_per_s": round(len(in_window) / guessing_s, 1),
        "results_per_s": round(sum(1 for v in shown) / max(1.0, last_shown - t0), 1),
        "posts_per_min_per_group": round(statistics.mean(per_group.values()) * 60 / guessing_s, 2),
        "jain": round(jain_index(per_group.values()), 3),
        "jain_whole_run": round(jain_index(whole.values()), 3),
        # The same posts shared out as evenly as can be (each group floor or ceil of the mean):
        # what a perfect turn would score, with as few posts a group as this run gave.
        "jain_whole_run_fairest": round(jain_index(_fairest(sum(whole.values()), len(whole))), 3),
        # how many groups got n posts, n = 0, 1, 2, ... (a fair turn gives two neighbours)
        "posts_per_group_whole_run": [
            sum(1 for n in whole.values() if n == k)
            for k in range(max(whole.values(), default=0) + 1)
        ],
        "posts": len(posts),
        "retry_after": len(violations),
        "retry_after_pct": round(100 * len(violations) / max(1, sends), 2),
        **{f"429_{rule}": n for rule, n in by_rule.items()},
        "shown_after_stop_s": round(max(0.0, last_shown - stopped), 1),
        "all_shown_wait_s": round(all_shown_at - stopped, 1),
        "out_of_order": out_of_order,
        "cpu_s": cpu,
        "load1_start": round(load0, 2),
        "load1_end": round(os.getloadavg()[0], 2),
        **learned,
        "slowest": _slowest(stories, posts, violations, t0),
    }


def _fairest(total: int, groups: int) -> list[int]:
    """`total` posts over `groups` groups, as evenly as they go."""
    each, left = divmod(total, max(1, groups))
    return [each + 1] * left + [each] * (groups - left)


def _slowest(
    stories: list[tuple[float, int, float, float, float]],
    posts: list[Any],
    violations: list[Any],
    t0: float,
    most: int = 3,
) -> list[str]:
    """The slowest results' stories, to tell a chat that waited for Telegram (its 429s) from
    one the bot forgot (no post for its chat around then): its guess typed, scored, shown, and
    its chat's posts and 429s from 10 s before the guess on (s since the guessing began)."""
    out = []
    for wait, chat, typed, scored, shown in sorted(stories, reverse=True)[:most]:
        since = t0 + typed - 10
        chat_posts = [f"{m.ts - t0:.1f}" for m in posts if m.chat_id == chat and m.ts >= since]
        refused = [
            f"{v.ts - t0:.1f}:{v.rule}:{v.retry_after}"
            for v in violations
            if v.chat_id == chat and v.ts >= since
        ]
        out.append(
            f"chat {chat}: {wait:.1f} s (typed {typed:.1f}, scored {scored:.1f}, shown "
            f"{shown:.1f}); its posts {' '.join(chat_posts) or '-'}; its 429s "
            f"{' '.join(refused) or '-'}"
        )
    return out


async def run_worlds(
    codes: list[Code],
    runs: list[tuple[int, int]],
    seconds: float,
    settle_s: float,
    profile: Path | None = None,
) -> list[dict[str, Any]]:
    """Every run on every checkout, the checkouts taking turns run by run."""
    out: list[dict[str, Any]] = []
    for groups, limit in runs:
        for code in codes:
            world = World(groups, limit, seconds=seconds, settle_s=settle_s)
            result = await run_world(code, world, profile=profile)
            result["code"] = code.label
            print(_line(result), flush=True)
            out.append(result)
    return out


COLUMNS = (
    "code", "groups", "limit", "p50", "p95", "p99", "unshown", "posts_per_s",
    "posts_per_min_per_group", "jain", "jain_whole_run", "jain_whole_run_fairest", "retry_after",
    "retry_after_pct", "scored_p50", "shown_after_stop_s", "learned_rate", "sender_cpu_ms_per_post",
)  # fmt: skip


def _line(result: dict[str, Any]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.2f}"
        return "-" if v is None else str(v)

    return " | ".join(fmt(result.get(c)) for c in COLUMNS)
