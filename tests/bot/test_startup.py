"""`codemojex bot` refuses to start on settings that cannot work, saying why in one line and
never printing a secret: a token Telegram rejects, a weak webhook secret, a Bot API URL
that would send the token in the clear."""

from __future__ import annotations

import asyncio
import os

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from codemojex import cli
from codemojex.db import upgrade
from codemojex.settings import Settings
from codemojex.standin import StandIn
from tests.conftest import REDIS_URL
from tests.helpers.support import checkout_env, codemojex_command, free_port


async def _bot_exits(standin: StandIn, database_url: str, **env: str) -> tuple[int, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    base.update(
        CODEMOJEX_TOKEN=standin.token,
        CODEMOJEX_BOT_API_BASE_URL=standin.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=standin.base_file_url,
        CODEMOJEX_REDIS_URL=REDIS_URL,
        CODEMOJEX_DATABASE_URL=database_url,
    )
    base.update(env)
    process = await asyncio.create_subprocess_exec(
        *codemojex_command("bot"),
        env=checkout_env(base),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:  # it started instead of refusing
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


@pytest.mark.timeout(120)
async def test_a_rejected_token_is_one_line_without_the_token(tmp_path: os.PathLike[str]) -> None:
    wrong = "123:Wrong-token_that-must-not-be-printed"
    url = f"sqlite+aiosqlite:///{tmp_path}/t.db"
    await asyncio.to_thread(upgrade, url)  # the schema check comes before Telegram's answer
    async with StandIn() as standin:  # answers 401 Unauthorized to any other token
        code, output = await _bot_exits(standin, url, CODEMOJEX_TOKEN=wrong)
    assert code == 2, output[-2000:]
    assert "the token was rejected by Telegram" in output
    assert "Wrong-token" not in output and "Traceback" not in output, output[-2000:]


def test_a_weak_webhook_secret_refuses_to_start(tmp_path: os.PathLike[str]) -> None:
    """In-process (CliRunner): the refusal comes before any connection, to Telegram or the
    storage; the Bot API URL names a port where nothing listens."""
    weak = "short-secret_7"
    env = {
        "CODEMOJEX_TOKEN": "123:TEST",
        "CODEMOJEX_BOT_API_BASE_URL": f"http://127.0.0.1:{free_port()}/bot",
        "CODEMOJEX_REDIS_URL": REDIS_URL,
        "CODEMOJEX_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/t.db",
        "CODEMOJEX_WEBHOOK_URL": f"http://127.0.0.1:{free_port()}/hook",
        "CODEMOJEX_WEBHOOK_SECRET": weak,
    }
    result = CliRunner().invoke(cli.app, ["bot"], env=env)
    output = result.output
    assert result.exit_code == 2, output
    assert "32 to 256 characters of A-Z a-z 0-9 _ -" in output
    assert weak not in output
    assert isinstance(result.exception, SystemExit)  # typer's Exit, not a traceback


@pytest.mark.parametrize(
    "url",
    [
        "https://api.telegram.org/bot",
        "https://bot-api.example.org:8443/bot",
        "http://127.0.0.1:8081/bot",
        "http://127.8.9.10/bot",
        "http://[::1]:8081/bot",
        "http://localhost:8081/bot",
    ],
)
def test_bot_api_urls_that_keep_the_token_safe(url: str) -> None:
    assert Settings(bot_api_base_url=url, bot_api_base_file_url=url).bot_api_base_url == url


@pytest.mark.parametrize(
    "url",
    [
        "http://api.telegram.org/bot",
        "http://10.0.0.5:8081/bot",
        "http://127.0.0.1.example.org/bot",
        "http://localhost.example.org/bot",
        "ftp://127.0.0.1/bot",
        "https:///bot",
        "api.telegram.org/bot",
    ],
)
@pytest.mark.parametrize("field", ["bot_api_base_url", "bot_api_base_file_url"])
def test_bot_api_urls_that_would_send_the_token_in_the_clear(url: str, field: str) -> None:
    with pytest.raises(ValidationError, match="must be https://"):
        Settings.model_validate({field: url})
