"""Benchmark: the learned pace's control law against the stand-in at several hidden limits.

Each run posts as fast as the pace allows to many groups (enough that no chat's or group's
limit binds: the bot-wide one does) from `--posters` tasks taking slots of the real `Pacer` on
the real Redis, over plain HTTP to the Bot API stand-in, which refuses past a bot-wide limit L
the pacer is not told (429 with an honest retry_after); every 429 goes to `Pacer.refused` as
the sender's does. The pace starts at 30 a second (the configured rate). Printed per law and
L: posts delivered a second over the run and over its second half (the steady state), the
429s (as a share of the sends), the time until delivered/s first reached 80 % of L, the
learned rate at the end, and how many bot-wide cuts.

Laws (`--laws`, names below): `fixed` (today's 30 a second), `aimd` (additive increase of
30 % of the configured rate a second, cut to half), and cubic variants (`cubicKK-BB`: slow
start at 30 %/s, a cut keeps BB %, back to the cut's rate in KK s; CUBIC's shape).

Run: ``.venv/bin/python -m bench.pace_law`` (``--limits 10,30,100,300``, ``--seconds 40``).
Needs the machine's Redis (CODEMOJEX_BENCH_REDIS_URL); the run's keys are dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from bench.common import delete_matching, make_client
from codemojex.posting.pace_policy import Grant, PacePolicy
from codemojex.posting.pacer import Pacer
from codemojex.standin import StandIn

START = 30
LAWS: dict[str, dict[str, Any]] = {
    "fixed": {"bot_floor": START, "bot_ceiling": START},
    "aimd": {"start_pm": 300, "cut_keep_pm": 500, "regain_ms": 0},
    "cubic3-50": {"cut_keep_pm": 500, "regain_ms": 3000},
    "cubic10-50": {"cut_keep_pm": 500, "regain_ms": 10_000},
    "cubic10-80": {"cut_keep_pm": 800, "regain_ms": 10_000},
    "cubic20-80": {"cut_keep_pm": 800, "regain_ms": 20_000},
    "cubic20-50": {"cut_keep_pm": 500, "regain_ms": 20_000},
}


def policy(law: str) -> PacePolicy:
    base = PacePolicy.from_rates(bot_per_s=START, bot_floor=1, bot_ceiling=1000)
    return replace(base, **LAWS[law])


async def one(law: str, limit: int, seconds: float, posters: int) -> dict[str, Any]:
    standin = StandIn()
    await standin.start()
    groups = max(300, 4 * limit)
    chats = [-1_005_000_000_000 - i for i in range(groups)]
    for chat in chats:
        standin.add_group(chat, f"law {chat}")
    standin.enforce_rate_limits(per_chat_per_s=1, per_group_per_min=20, global_per_s=limit)
    redis = make_client(256)
    queue = f"law{uuid.uuid4().hex[:8]}"
    pacer = Pacer(redis, queue, policy(law), bot=int(standin.token.partition(":")[0]))
    url = f"{standin.base_url}{standin.token}/sendMessage"
    cursor = itertools.cycle(chats)
    delivered: list[float] = []
    refused: list[float] = []
    started = time.monotonic()
    until = started + seconds
    limits = httpx.Limits(max_connections=posters, max_keepalive_connections=posters)

    async def poster(http: httpx.AsyncClient) -> None:
        while time.monotonic() < until:
            chat = next(cursor)
            grant = await pacer.acquire(chat, deadline=until)
            if grant is None:
                continue
            try:
                answer = await http.post(url, json={"chat_id": chat, "text": "x"})
                if answer.status_code == 429:  # told before the settle, as the sender does
                    refused.append(time.monotonic())
                    after = answer.json().get("parameters", {}).get("retry_after", 1)
                    await pacer.refused(Grant(chat, grant.token), int(after) * 1000)
                else:
                    delivered.append(time.monotonic())
            finally:
                await pacer.settle(grant)

    try:
        async with httpx.AsyncClient(limits=limits, timeout=10) as http:
            await asyncio.gather(*(poster(http) for _ in range(posters)))
        learned = await pacer.bot_pace()
    finally:
        await standin.stop()
        await delete_matching(redis, f"*:{{{queue}}}:*")
        await redis.aclose()
    half = started + seconds / 2
    per_s = [sum(1 for t in delivered if s <= t - started < s + 1) for s in range(int(seconds))]
    reached = next((i for i, n in enumerate(per_s) if n >= 0.8 * limit), None)
    sends = len(delivered) + len(refused)
    return {
        "law": law,
        "limit": limit,
        "delivered_per_s": round(len(delivered) / seconds, 1),
        "steady_per_s": round(sum(1 for t in delivered if t >= half) / (seconds / 2), 1),
        "refused": len(refused),
        "refused_pct": round(100 * len(refused) / max(1, sends), 2),
        "reach_80pct_s": reached,
        "learned_rate": None if learned.rate is None else round(learned.rate, 1),
        "cuts": learned.cuts,
    }


COLUMNS = (
    "law", "limit", "delivered_per_s", "steady_per_s", "refused", "refused_pct",
    "reach_80pct_s", "learned_rate", "cuts",
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--laws", default=",".join(LAWS))
    parser.add_argument("--limits", default="10,30,100,300")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--posters", type=int, default=128)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(" | ".join(COLUMNS), flush=True)
    out = []
    for limit in (int(x) for x in args.limits.split(",")):
        for law in args.laws.split(","):
            row = asyncio.run(one(law, limit, args.seconds, args.posters))
            out.append(row)
            print(" | ".join(_fmt(row[c]) for c in COLUMNS), flush=True)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.1f}"
    return "-" if v is None else str(v)


if __name__ == "__main__":
    main()
