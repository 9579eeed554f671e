"""The ops page speaks plain http: on an address other than loopback `codemojex ops` refuses to
start (exit 2, one line saying what to do, no secret) unless a trusted TLS proxy is set, or
CODEMOJEX_OPS_PLAIN_HTTP_OK says the operator accepts the token and the cookie crossing that
network in clear; then it starts (loudly, for the flag)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis
from typer.testing import CliRunner

from codemojex import cli
from codemojex.db import upgrade
from codemojex.ops.page.main import plain_http_problem
from codemojex.settings import Settings
from tests.conftest import REDIS_URL
from tests.helpers.support import checkout_env, codemojex_command, drop_keys, free_port
from tests.ops.conftest import OPS_TOKEN

TRUSTED_PROXIES = "CODEMOJEX_OPS_TRUSTED_PROXIES"
PLAIN_HTTP_OK = "CODEMOJEX_OPS_PLAIN_HTTP_OK"


def _env(database_url: str, queue: str, port: int, **more: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    base.update(
        CODEMOJEX_REDIS_URL=REDIS_URL,
        CODEMOJEX_DATABASE_URL=database_url,
        CODEMOJEX_QUEUE=queue,
        CODEMOJEX_OPS_TOKEN=OPS_TOKEN,
        CODEMOJEX_OPS_PORT=str(port),
        **more,
    )
    return checkout_env(base)


def _refusal_says_what_to_do(output: str) -> None:
    assert "plain http" in output and "in clear" in output, output
    assert TRUSTED_PROXIES in output and PLAIN_HTTP_OK in output and "127.0.0.1" in output
    assert OPS_TOKEN not in output and "Traceback" not in output, output


@pytest.mark.timeout(60)  # the code before this refusal served on for ever
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.0.2.10", "ops.example.org"])
def test_a_non_loopback_address_over_plain_http_is_refused(host: str) -> None:
    """Before anything is connected to: nothing listens at the Redis or database given."""
    assert plain_http_problem(Settings(ops_host=host).ops_page()) is not None
    env = _env("sqlite+aiosqlite:////nonexistent/t.db", "tq", free_port())
    env.update(CODEMOJEX_OPS_HOST=host)
    result = CliRunner().invoke(cli.app, ["ops"], env=env)
    assert result.exit_code == 2, result.output
    _refusal_says_what_to_do(result.output)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "localhost"])
def test_loopback_needs_neither(host: str) -> None:
    assert plain_http_problem(Settings(ops_host=host).ops_page()) is None


@pytest.mark.parametrize(
    "setting", [{"ops_plain_http_ok": True}, {"ops_trusted_proxies": "10.0.0.0/8"}]
)
def test_a_trusted_proxy_or_the_flag_lets_it_listen_anywhere(setting: dict[str, object]) -> None:
    settings = Settings(ops_host="0.0.0.0", **setting)  # type: ignore[arg-type]
    assert plain_http_problem(settings.ops_page()) is None


async def _run_ops(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *codemojex_command("ops"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


@pytest.mark.timeout(120)
async def test_the_process_refuses_in_one_line(tmp_path: Path, queue_name: str) -> None:
    env = _env(f"sqlite+aiosqlite:///{tmp_path}/t.db", queue_name, free_port())
    env.update(CODEMOJEX_OPS_HOST="0.0.0.0")
    process = await _run_ops(env)
    try:
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:  # it started instead of refusing
            process.kill()
            await process.wait()
    text = output.decode(errors="replace")
    assert process.returncode == 2, text[-2000:]
    assert len(text.strip().splitlines()) == 1, text
    _refusal_says_what_to_do(text)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("setting", "warned"),
    [({PLAIN_HTTP_OK: "true"}, True), ({TRUSTED_PROXIES: "127.0.0.1,::1"}, False)],
    ids=["plain-http-ok", "trusted-proxy"],
)
async def test_the_process_serves_on_every_address_when_allowed(
    tmp_path: Path, queue_name: str, setting: dict[str, str], warned: bool
) -> None:
    """On 0.0.0.0 (reached here over loopback), with the flag or a trusted proxy: the login
    form answers; the flag's start says in the log that the token travels in clear."""
    url = f"sqlite+aiosqlite:///{tmp_path}/t.db"
    await asyncio.to_thread(upgrade, url)  # the schema check comes before the page
    port = free_port()
    env = _env(url, queue_name, port, CODEMOJEX_OPS_HOST="0.0.0.0", **setting)
    process = await _run_ops(env)
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            assert process.returncode is None, "codemojex ops exited"
            try:
                async with (
                    aiohttp.ClientSession() as http,
                    http.get(f"http://127.0.0.1:{port}/login") as r,
                ):
                    assert r.status == 200
                    break
            except aiohttp.ClientConnectionError:
                assert asyncio.get_running_loop().time() < deadline, "the page never answered"
                await asyncio.sleep(0.2)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 30)
        redis = aioredis.Redis.from_url(REDIS_URL)
        await drop_keys(redis, queue_name)
        await redis.aclose()
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-2000:]
    assert ("cross the network in clear" in text) is warned, text[-2000:]
    assert OPS_TOKEN not in text
