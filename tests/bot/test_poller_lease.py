"""One poller per token, as deployed: two real `codemojex bot` processes polling the stand-in.
The second stands by (one log line, its /readyz 503 naming why) and polls nothing; when the
first stops, it takes over (its /readyz 200) and answers."""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from bench.backlog_world import BotProcess, bot_env, eventually_true
from codemojex.standin import StandIn
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, free_port

USER = 7_300_001


async def readyz(port: int) -> tuple[int, dict[str, Any]]:
    timeout = aiohttp.ClientTimeout(total=5)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, await response.json()


@pytest.mark.timeout(120)
async def test_a_second_bot_process_stands_by_then_takes_over(
    bot_database_url: str, queue_name: str
) -> None:
    redis = aioredis.Redis.from_url(REDIS_URL)
    logs = Path(tempfile.mkdtemp(prefix="cmx-poller-"))
    bots: list[BotProcess] = []
    try:
        async with StandIn() as standin:
            standin.add_user(USER, "U")
            ports = [free_port(), free_port()]
            for port in ports:
                env = bot_env(
                    standin,
                    redis_url=REDIS_URL,
                    database_url=bot_database_url,
                    queue=queue_name,
                    CODEMOJEX_METRICS_PORT=str(port),
                )
                bots.append(BotProcess(env, logs / f"bot-{port}.log"))
            first, second = bots
            await first.start()
            standin.send_private(USER, "/help")
            await standin.wait_for_sent_count(1, chat_id=USER, timeout=60)
            await second.start()

            async def standing_by() -> bool:
                try:
                    status, body = await readyz(ports[1])
                except aiohttp.ClientError:
                    return False
                return status == 503 and "standby" in body["problems"].get("bot", "")

            await eventually_true(standing_by, 60, "the second bot standing by")
            assert "another process polls this bot" in second.output()
            assert (await readyz(ports[0]))[0] == 200
            standin.send_private(USER, "/help")  # the first answers
            await standin.wait_for_sent_count(2, chat_id=USER, timeout=30)

            first.signal(signal.SIGTERM)
            assert await first.wait(30) == 0

            async def ready() -> bool:
                return (await readyz(ports[1]))[0] == 200

            await eventually_true(ready, 30, "the second bot taking over")
            standin.send_private(USER, "/help")
            await standin.wait_for_sent_count(3, chat_id=USER, timeout=30)
    finally:
        for bot in bots:
            await bot.ensure_gone()
        await drop_keys(redis, queue_name)
        await redis.aclose()
