"""No message text in the logs of `-v`: the real `codemojex bot -v` and `codemojex worker -v`
as processes, around the Bot API stand-in, on the real Redis and Postgres. A player whose name
is a marker says a marker in the group (a plain message, a command, a guess that is no
guess), guesses, and cracks the code; the bot answers, the worker posts the results and the
win (the player's name and the round's code in it). Neither process's output holds any of
those texts, incoming or outgoing, in any spelling; their libraries log at INFO at most.

The same game under `--wire-debug` logs them all (so the markers are ones a log would show),
after a WARNING banner saying so."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterable
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from sqlalchemy import select

from codemojex.cli import WIRE_BANNER
from codemojex.db import Round, make_engine, make_sessionmaker, upgrade
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.secrecy import MASK
from codemojex.standin import StandIn
from tests.conftest import REDIS_URL
from tests.helpers.support import checkout_env, codemojex_command, wipe_tables, wrong_guess

TOKEN = "987654321:AAF-the_secret_part_Of_the_bot_token-0123456789"
ADMIN, ALICE = 2001, 2002
GROUP = -1_004_000_000_001
NAME = "Zorblaxia"  # Alice's first name: in every update she sends, in the win's text
SAID = "quixotic-marker-7"  # what Alice says in the group


def spellings(text: str) -> set[str]:
    """`text` as a log line may carry it: as is, in a repr (a ZWJ escaped), in JSON."""
    return {text, repr(text)[1:-1], ascii(text)[1:-1], json.dumps(text)[1:-1]}


def found(output: str, text_list: Iterable[str]) -> list[str]:
    return [t for t in text_list if any(s in output for s in spellings(t))]


class Process:
    """`codemojex ARGS` with its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args, self.env, self.log = args, env, log
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Process:
        with self.log.open("wb") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *codemojex_command(*self.args),
                env=checkout_env(self.env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


async def play(standin: StandIn, database_url: str) -> list[str]:
    """The game above, once; the texts it sent either way (the ones a log must not hold)."""
    engine = make_engine(database_url)
    try:
        before = len(standin.sent_messages(ADMIN))
        standin.send_private(ADMIN, "/help")  # the bot is up once it answered
        await standin.wait_for_sent_count(before + 1, chat_id=ADMIN, timeout=60)
        last = max((m.message_id for m in standin.sent_messages(GROUP)), default=0)
        standin.send_text(GROUP, ADMIN, "/newgame")
        sessions = make_sessionmaker(engine)
        rnd: Round | None = None
        for _ in range(300):
            async with sessions() as session:
                rnd = await session.scalar(select(Round).where(Round.ended_at.is_(None)))
            if rnd is not None:
                break
            await asyncio.sleep(0.1)
        assert rnd is not None, "no round started"
        secret, palette = rnd.secret_emojis, rnd.palette_emojis
        await standin.wait_for_sent(lambda m: m.message_id > last, 30, chat_id=GROUP)
        miss = "".join(wrong_guess(secret, palette))
        for text in (f"{SAID} hello", f"/g {SAID}", f"/help {SAID}", f"/g {miss}"):
            standin.send_text(GROUP, ALICE, text)
        standin.send_text(GROUP, ALICE, "/g " + "".join(secret))
        win = await standin.wait_for_sent(
            lambda m: m.message_id > last and "🏆" in m.text, 60, chat_id=GROUP
        )
    finally:
        await engine.dispose()
    assert NAME in win.text and "".join(secret) in win.text
    # her name, her code and her miss first: the worker posts them (the win, the result)
    return ["".join(secret), miss, NAME, SAID, texts.help_text(EN).splitlines()[0]]


@pytest.mark.timeout(420)
async def test_verbose_logs_no_message_text_and_wire_debug_says_it_does(
    tmp_path: Path, queue_name: str, real_redis: aioredis.Redis, pg_database_url: str
) -> None:
    """`real_redis`: the queue's keys are dropped afterwards."""
    await asyncio.to_thread(upgrade, pg_database_url)
    engine = make_engine(pg_database_url)
    await wipe_tables(engine)
    await engine.dispose()
    async with StandIn(token=TOKEN) as standin:
        standin.add_user(ADMIN, "Admin")
        standin.add_user(ALICE, NAME)
        standin.add_group(GROUP, "the group", admins=[ADMIN], members=[ALICE])
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
        env |= {
            "CODEMOJEX_TOKEN": TOKEN,
            "CODEMOJEX_BOT_API_BASE_URL": standin.base_url,
            "CODEMOJEX_BOT_API_BASE_FILE_URL": standin.base_file_url,
            "CODEMOJEX_REDIS_URL": REDIS_URL,
            "CODEMOJEX_DATABASE_URL": pg_database_url,
            "CODEMOJEX_QUEUE": queue_name,
            "PYTHONUNBUFFERED": "1",
        }
        outputs: dict[tuple[str, str], str] = {}
        sent: dict[str, list[str]] = {}
        for flag in ("-v", "--wire-debug"):
            async with (
                Process(["bot", flag], env, tmp_path / f"bot{flag}.log") as bot,
                Process(["worker", flag], env, tmp_path / f"worker{flag}.log") as worker,
            ):
                sent[flag] = await play(standin, pg_database_url)
            outputs[("bot", flag)], outputs[("worker", flag)] = bot.output(), worker.output()

    for process in ("bot", "worker"):
        verbose = outputs[(process, "-v")]
        assert found(verbose, sent["-v"]) == [], f"`{process} -v` logged a text:\n{verbose}"
        assert WIRE_BANNER not in verbose
        # -v is verbose (every Bot API call at INFO, the token masked in its URL) but no
        # library logs at DEBUG: their DEBUG lines are the wire.
        assert f"/bot{MASK}/" in verbose, verbose
        lines = verbose.splitlines()
        assert [ln for ln in lines if " DEBUG " in ln and " codemojex." not in ln] == []
        wire = outputs[(process, "--wire-debug")]
        assert WIRE_BANNER in wire
        assert TOKEN.split(":", 1)[1] not in wire  # secrets are masked even then
    # The markers are texts a log shows when it logs texts: incoming at the bot (her name,
    # what she said, her guesses) and its answer (/help), outgoing at the worker (the
    # result of her miss, the win: her name and the code).
    wire_bot, wire_worker = outputs[("bot", "--wire-debug")], outputs[("worker", "--wire-debug")]
    texts_sent = sent["--wire-debug"]
    assert found(wire_bot, texts_sent) == texts_sent, wire_bot
    assert found(wire_worker, texts_sent[:3]) == texts_sent[:3], wire_worker
