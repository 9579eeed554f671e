"""The secret code of an open round stays secret: not in the logs (everything at DEBUG, the
bot's, the worker's, python-telegram-bot's, SQLAlchemy's), not in what the bot posts, not in
`/queue`, not in `lanes.snapshot()`, not in any value the queue keeps in Redis, and not in
the output of `codemojex demo`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from codemojex.db import Round, upgrade
from tests.e2e.conftest import open_stack
from tests.e2e.harness import ADMIN, ALICE, BOB, DAVE, in_process_worker
from tests.helpers.support import checkout_env, codemojex_command, dump

FORMAT = logging.Formatter("%(name)s %(levelname)s %(message)s")


def _not_the_secret(palette: tuple[str, ...], secret: tuple[str, ...], shift: int) -> str:
    for offset in range(shift, shift + len(palette)):
        guess = tuple(palette[(offset + i) % len(palette)] for i in range(len(secret)))
        if guess != secret:
            return "".join(guess)
    raise AssertionError("no guess differs from the secret")


async def test_open_round_secret_is_never_logged_posted_or_shown(
    pg_database_url: str, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    await asyncio.to_thread(upgrade, pg_database_url)
    caplog.set_level(logging.DEBUG)
    async with open_stack(pg_database_url, queue_name) as stack, in_process_worker(stack):
        chat = stack.new_group()
        _, rnd = await stack.new_round(chat)
        secret = "".join(rnd.secret_emojis)
        # Every text checked below could hold the secret only by leaking it, not by chance.
        assert secret not in "".join(rnd.palette_emojis)
        for shift, user in enumerate((ALICE, BOB, DAVE, ALICE)):
            guess = _not_the_secret(rnd.palette_emojis, rnd.secret_emojis, shift)
            stack.standin.send_text(chat, user, f"/g {guess}")
        stack.standin.send_text(chat, ALICE, "hello " + "".join(rnd.palette_emojis))
        await stack.settle()
        await stack.all_posted()
        asked = stack.standin.send_text(chat, ADMIN, "/queue")
        queue_answer = await stack.reply_to(chat, asked)
        snapshot = json.dumps(await stack.lanes.snapshot(), default=str, ensure_ascii=False)
        stored = repr(await dump(stack.redis, queue_name, cmx=True))
        async with stack.sessionmaker() as session:
            still_open = (await session.execute(select(Round).where(Round.id == rnd.id))).scalar()
        assert still_open is not None and still_open.ended_at is None
        posted = [m.text for m in stack.standin.sent_messages(chat)]

    records = [FORMAT.format(record) for record in caplog.records]
    assert len(records) > 50  # DEBUG really was captured (the Bot API calls, the SQL, ...)
    assert any("sendMessage" in line for line in records)
    leaks = [line[:200] for line in records if secret in line]
    assert leaks == []
    assert [text for text in posted if secret in text] == []
    assert secret not in queue_answer
    assert secret not in snapshot
    assert secret not in stored and secret.encode() not in stored.encode()


def test_demo_output_never_shows_the_secret_of_an_open_round(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    env["CODEMOJEX_DATABASE_URL"] = f"sqlite+aiosqlite:///{db}"
    env["COLUMNS"] = "120"
    args = ["--seconds", "15", "--rooms", "2", "--players", "2", "--flood-players", "2"]
    done = subprocess.run(
        codemojex_command("demo", *args, "--seed", "3"),
        env=checkout_env(env),
        cwd=tmp_path,
        capture_output=True,
        timeout=240,
    )
    output = (done.stdout + done.stderr).decode("utf-8", "replace")
    assert done.returncode == 0, output[-2000:]
    with sqlite3.connect(db) as conn:
        rounds = conn.execute("SELECT secret, ended_at FROM rounds").fetchall()
    assert rounds, "the demo played no round"
    open_secrets = [secret for secret, ended in rounds if ended is None]
    assert open_secrets, "every round ended: nothing to check"
    assert [s for s in open_secrets if s in output] == []
