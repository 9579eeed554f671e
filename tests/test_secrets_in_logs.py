"""No secret in any log: every command that reads the settings runs as a real process (with
`-v` where it has one, and the bot with `--wire-debug` too: python-telegram-bot logs its Bot
API URL, which holds the token, at DEBUG, httpx every call's URL at INFO), against the Bot
API stand-in, and its whole output is searched for the bot token (whole and its secret part),
the ops token and the webhook secret. The masked URL lines must be there, `***` in them, so
the search cannot pass by finding no such line at all. A secret too short to be masked is
named at start-up."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from codemojex.db import upgrade
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.secrecy import MASK
from codemojex.standin import StandIn
from tests.conftest import REDIS_URL
from tests.helpers.support import checkout_env, codemojex_command, free_port

TOKEN = "987654321:AAF-the_secret_part_Of_the_bot_token-0123456789"
OPS_TOKEN = "Hx7-pQ2_vL9mZ4kR8wT1yN6cB3fJ5gD0aS-eU"
WEBHOOK_SECRET = "Wq5_Hook-Zr2kP8xN4mL7sY1cB6fJ3gD9aT0e"
SECRETS = (TOKEN, TOKEN.split(":", 1)[1], OPS_TOKEN, WEBHOOK_SECRET)
ALICE = 1001


async def run(
    args: list[str], env: dict[str, str], ready: Callable[[], Awaitable[bool]] | None
) -> str:
    """Run `codemojex ARGS`; a server is stopped with SIGTERM once `ready()`. Its output."""
    process = await asyncio.create_subprocess_exec(
        *codemojex_command(*args),
        env=checkout_env(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        if ready is not None:
            deadline = asyncio.get_running_loop().time() + 60
            while not await ready():
                assert process.returncode is None, "it stopped before it was ready"
                assert asyncio.get_running_loop().time() < deadline, "never ready"
                await asyncio.sleep(0.2)
            process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return output.decode(errors="replace")


@pytest.mark.timeout(300)
async def test_no_command_logs_a_secret(
    tmp_path: Path, queue_name: str, real_redis: aioredis.Redis
) -> None:
    """`real_redis`: the queue's keys are dropped afterwards."""
    url = f"sqlite+aiosqlite:///{tmp_path}/t.db"
    await asyncio.to_thread(upgrade, url)
    async with StandIn(token=TOKEN) as standin:
        standin.add_user(ALICE, "Alice")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
        env |= {
            "CODEMOJEX_TOKEN": TOKEN,
            "CODEMOJEX_BOT_API_BASE_URL": standin.base_url,
            "CODEMOJEX_BOT_API_BASE_FILE_URL": standin.base_file_url,
            "CODEMOJEX_REDIS_URL": REDIS_URL,
            "CODEMOJEX_DATABASE_URL": url,
            "CODEMOJEX_QUEUE": queue_name,
            "CODEMOJEX_OPS_TOKEN": OPS_TOKEN,
            "CODEMOJEX_WEBHOOK_SECRET": WEBHOOK_SECRET,
        }

        async def answered() -> bool:
            return len(standin.sent_messages(ALICE)) >= 1

        outputs: dict[str, str] = {}
        # the bot, polling, logging everything: answers a /help, then is stopped
        standin.send_private(ALICE, "/help")
        outputs["bot --wire-debug"] = await run(["bot", "--wire-debug"], env, answered)
        assert standin.sent_messages(ALICE)[0].text == texts.help_text(EN)
        # the bot, webhook mode: setWebhook carries the secret
        hook_port = free_port()
        webhook = env | {
            "CODEMOJEX_WEBHOOK_URL": f"http://127.0.0.1:{hook_port}/hook",
            "CODEMOJEX_WEBHOOK_PORT": str(hook_port),
        }

        told: list[str | None] = []

        async def webhook_set() -> bool:
            told.append(standin.webhook_secret)
            return bool(standin.webhook_url)

        outputs["bot -v (webhook)"] = await run(["bot", "-v"], webhook, webhook_set)
        assert told[-1] == WEBHOOK_SECRET
        # the worker (up once its metrics answer), the ops page (up once its login form
        # answers; a wrong and a right login meanwhile) and the one-shot commands, at once
        metrics, ops_port = free_port(), free_port()

        async def ops_used() -> bool:
            if not await _answers(ops_port, "/login")():
                return False
            async with aiohttp.ClientSession() as http:
                for token in (OPS_TOKEN[:-1], OPS_TOKEN):
                    form = {"name": "Ann", "token": token}
                    await http.post(f"http://127.0.0.1:{ops_port}/login", data=form)
            return True

        wire_metrics, json_metrics = free_port(), free_port()
        runs = {
            "worker -v": run(
                ["worker", "-v"],
                env | {"CODEMOJEX_METRICS_PORT": str(metrics)},
                _answers(metrics, "/readyz"),
            ),
            "worker --wire-debug": run(
                ["worker", "--wire-debug"],
                env | {"CODEMOJEX_METRICS_PORT": str(wire_metrics)},
                _answers(wire_metrics, "/readyz"),
            ),
            # the same, as JSON lines (CODEMOJEX_LOG_FORMAT=json)
            "worker --wire-debug (json)": run(
                ["worker", "--wire-debug"],
                env | {"CODEMOJEX_METRICS_PORT": str(json_metrics), "CODEMOJEX_LOG_FORMAT": "json"},
                _answers(json_metrics, "/readyz"),
            ),
            "ops -v": run(["ops", "-v"], env | {"CODEMOJEX_OPS_PORT": str(ops_port)}, ops_used),
            **{
                " ".join(args): run(args, env, None)
                for args in (["migrate"], ["lanes", "check"], ["lanes", "snapshot"])
            },
            # migrate reads no Redis: a password it could never mask, named at start-up
            "migrate (short password)": run(
                ["migrate"], env | {"CODEMOJEX_REDIS_URL": "redis://:Q7w@127.0.0.1:6379/0"}, None
            ),
        }
        outputs |= dict(zip(runs, await asyncio.gather(*runs.values()), strict=True))
    for command, output in outputs.items():
        for secret in SECRETS:
            assert secret not in output, f"`codemojex {command}` logged a secret:\n{output}"
    url_lines = {
        # python-telegram-bot's DEBUG line (the wire, only with --wire-debug)
        "bot --wire-debug": "Set Bot API URL",
        "worker --wire-debug": "Set Bot API URL",
        "worker --wire-debug (json)": "Set Bot API URL",
        # httpx's INFO line of every Bot API call (-v; the worker may make none before it
        # is stopped)
        "bot -v (webhook)": "HTTP Request:",
    }
    for command, marker in url_lines.items():
        lines = [ln for ln in outputs[command].splitlines() if marker in ln]
        assert lines, f"`codemojex {command}` logged no Bot API URL:\n{outputs[command]}"
        assert all(f"/bot{MASK}" in ln for ln in lines), lines
    # One JSON object per line, with the text lines' fields.
    for line in outputs["worker --wire-debug (json)"].splitlines():
        entry = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(entry), line
        assert set(entry) <= {"time", "level", "logger", "message", "exception", "stack"}, line
    short = outputs["migrate (short password)"]
    assert "the password of CODEMOJEX_REDIS_URL is too short to be kept out of the logs" in short
    assert "Q7w" not in short.replace("the password of CODEMOJEX_REDIS_URL", "")


def _answers(port: int, path: str) -> Callable[[], Awaitable[bool]]:
    async def ready() -> bool:
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}{path}") as r,
            ):
                return r.status == 200
        except aiohttp.ClientError:
            return False

    return ready
