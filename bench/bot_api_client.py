"""Benchmark: the CPU one sendMessage costs the process that posts it, by Bot API client.

The sender's posts go through python-telegram-bot's `Bot.send_message` and a `BaseRequest`:
PTB's own `HTTPXRequest` (httpx, httpcore) as `worker/botapi.py` built it before, or
`posting/request.py`'s `AiohttpRequest` (what it builds now). This posts `--posts` messages
through each to the Bot API stand-in, `--in-flight` at once (the sender's `IN_FLIGHT`) over
as many connections, to `--chats` groups, and measures this process's CPU time (user +
system) per post and the posts a second. The stand-in runs in a process of its own, so its
CPU is not counted. The clients take turns, `--rounds` times each, after a warm-up of each.

Run: ``.venv/bin/python -m bench.bot_api_client`` (about a minute), under the bench lock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import time
from typing import Any

import aiohttp
from telegram import Bot
from telegram.request import BaseRequest, HTTPXRequest

from codemojex.posting.request import AiohttpRequest

TOKEN = "123456:BENCH"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _control(port: int, action: str, **kwargs: Any) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"http://127.0.0.1:{port}/_standin/{action}", json=kwargs) as answer,
    ):
        answer.raise_for_status()


def _request(kind: str, connections: int) -> BaseRequest:
    """The client as `worker/botapi.py` builds it: before (httpx) and now (aiohttp)."""
    if kind == "httpx":
        return HTTPXRequest(
            connection_pool_size=connections, pool_timeout=10.0, connect_timeout=5.0,
            read_timeout=10.0, write_timeout=10.0,
        )  # fmt: skip
    return AiohttpRequest(
        connections=connections, pool_timeout=10.0, connect_timeout=5.0, read_timeout=10.0,
        write_timeout=10.0,
    )  # fmt: skip


async def _round(
    kind: str, port: int, posts: int, in_flight: int, chats: list[int]
) -> dict[str, Any]:
    bot = Bot(TOKEN, base_url=f"http://127.0.0.1:{port}/bot", request=_request(kind, in_flight))
    wire = asyncio.Semaphore(in_flight)

    async def post(i: int) -> None:
        async with wire:
            await bot.send_message(chat_id=chats[i % len(chats)], text=f"result {i}: 🟢🟡⚪⚪")

    try:
        await asyncio.gather(*(post(i) for i in range(in_flight)))  # connections open
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.gather(*(post(i) for i in range(posts)))
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    finally:
        await bot.shutdown()
        await bot.request.shutdown()
    return {"cpu_ms_per_post": 1000 * cpu / posts, "posts_per_s": posts / wall}


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    port = args.port or _free_port()
    standin = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "codemojex.standin", "--port", str(port), "--token", TOKEN,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert standin.stdout is not None
        await standin.stdout.readline()  # up
        chats = [-1_009_000_000 - i for i in range(args.chats)]
        for chat in chats:
            await _control(port, "add_group", chat_id=chat, title=f"g{chat}")
        kinds = ["httpx", "aiohttp"]
        for kind in kinds:  # warm-up: imports, first connections
            await _round(kind, port, args.in_flight * 4, args.in_flight, chats)
        out = []
        for n in range(args.rounds):
            for kind in kinds:
                result = await _round(kind, port, args.posts, args.in_flight, chats)
                result.update(client=kind, round=n)
                print(json.dumps(result), flush=True)
                out.append(result)
        return out
    finally:
        standin.terminate()
        await standin.wait()


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    by: dict[str, dict[str, float]] = {}
    for kind in {r["client"] for r in results}:
        mine = [r for r in results if r["client"] == kind]
        by[kind] = {
            "cpu_ms_per_post_median": round(
                statistics.median(r["cpu_ms_per_post"] for r in mine), 3
            ),
            "posts_per_s_median": round(statistics.median(r["posts_per_s"] for r in mine), 1),
        }
    return by


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bot_api_client")
    parser.add_argument("--posts", type=int, default=3000)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=0, help="the stand-in's (0: a free one)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    print(os.popen("uptime").read().strip(), flush=True)
    results = asyncio.run(main(args))
    print(json.dumps(summary(results), indent=1))
    print(os.popen("uptime").read().strip(), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": results, "summary": summary(results)}, f, indent=1)
