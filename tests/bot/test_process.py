"""`codemojex bot` as its own process: run_bot polls the stand-in, answers, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from codemojex.game import texts
from codemojex.locale import EN
from codemojex.standin import StandIn
from tests.conftest import REDIS_URL
from tests.helpers.support import checkout_env, codemojex_command

ALICE = 1001


@pytest.mark.timeout(120)
async def test_bot_process_answers_and_stops_cleanly_on_sigterm(
    bot_database_url: str, bot_queue: str
) -> None:
    async with StandIn() as standin:
        standin.add_user(ALICE, "Alice")
        env = {
            **os.environ,
            "CODEMOJEX_TOKEN": standin.token,
            "CODEMOJEX_BOT_API_BASE_URL": standin.base_url,
            "CODEMOJEX_BOT_API_BASE_FILE_URL": standin.base_file_url,
            "CODEMOJEX_REDIS_URL": REDIS_URL,
            "CODEMOJEX_DATABASE_URL": bot_database_url,
            "CODEMOJEX_QUEUE": bot_queue,
        }
        env.pop("CODEMOJEX_WEBHOOK_URL", None)
        process = await asyncio.create_subprocess_exec(
            *codemojex_command("bot"),
            env=checkout_env(env),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            standin.send_private(ALICE, "/help")
            said = await standin.wait_for_sent_count(1, chat_id=ALICE, timeout=60)
            assert said[0].text == texts.help_text(EN)
            assert standin.registered_commands({"type": "all_group_chats"})  # post_init ran
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            output, _ = await asyncio.wait_for(process.communicate(), 30)
        log = output.decode(errors="replace")
        assert process.returncode == 0, log[-2000:]
        assert standin.token not in log  # the token is a credential: never in the logs
