"""The stand-in as its own process, driven through its control API."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import aiohttp
import pytest
from telegram import Bot

from codemojex.standin import StandIn
from tests.helpers.support import checkout_env, free_port


async def call(session: aiohttp.ClientSession, url: str, action: str, **kwargs: Any) -> Any:
    async with session.post(f"{url}/_standin/{action}", json=kwargs) as response:
        body = await response.json()
        if response.status != 200:
            raise AssertionError(body)
        return body["result"]


async def test_control_api_in_process(standin: StandIn) -> None:
    async with aiohttp.ClientSession() as session:
        await call(session, standin.url, "add_user", user_id=501, first_name="Zed")
        mid = await call(
            session, standin.url, "send_text", chat_id=-1001234567890, user_id=501, text="/g 🍎"
        )
        assert standin.message(-1001234567890, mid) is not None
        async with session.post(
            f"{standin.url}/_standin/send_text", json={"chat_id": -5, "user_id": 501, "text": "x"}
        ) as response:
            assert response.status == 400
            assert "unknown chat" in (await response.json())["description"]
        async with session.get(f"{standin.url}/_standin/send_text") as response:
            assert response.status == 404  # no side effects through GET
        async with session.get(f"{standin.url}/_standin/stats") as response:
            assert (await response.json())["result"]["pending_updates"] == 1


@pytest.mark.timeout(60)
async def test_standalone_process_serves_a_bot() -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codemojex.standin",
        "--port",
        str(port),
        env=checkout_env(),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        banner = await asyncio.wait_for(process.stdout.readline(), 30)
        assert f"127.0.0.1:{port}/bot" in banner.decode()
        url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            await call(session, url, "add_user", user_id=7, first_name="Ann")
            await call(session, url, "add_group", chat_id=-100777, title="Far", admins=[7])
            said = await call(session, url, "send_text", chat_id=-100777, user_id=7, text="hi")
            async with Bot("123:TEST", base_url=f"{url}/bot") as bot:
                [update] = await bot.get_updates()
                assert update.message is not None and update.message.message_id == said
                await bot.send_message(-100777, "hello", reply_to_message_id=said)
            [sent] = await call(session, url, "sent_messages", chat_id=-100777)
            assert (sent["text"], sent["reply_to_message_id"]) == ("hello", said)
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 10) == 0
