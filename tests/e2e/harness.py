"""The end-to-end harness: the real bot and the real worker around the Bot API stand-in.

A `Stack` is one test's world: the stand-in (users, group chats), the python-telegram-bot
Application from `build_application` polling it over HTTP inside the test's event loop, the
real Redis (the test's own queue) and the real Postgres (the session's database, migrated
with Alembic and emptied before each test). The worker runs either in-process
(`in_process_worker`, the same `run_worker` the CLI runs) or as a real `codemojex worker`
subprocess (`WorkerProcess`), pointed at the same stand-in, Redis and database through
CODEMOJEX_* environment variables.

Nothing here sleeps for a fixed time: every wait polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import redis.asyncio as aioredis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bench.processes import CodemojexProcess
from codemojex import scoring
from codemojex.bot import CodemojexApp, Front
from codemojex.db import Guess, Outbox, Round, make_engine, make_sessionmaker, store
from codemojex.game import texts
from codemojex.lanes import Lanes
from codemojex.lanes.keys import Keys
from codemojex.locale import EN
from codemojex.runtime import pool_size
from codemojex.settings import Settings
from codemojex.standin import SentMessage, StandIn
from codemojex.values.clock import utcnow
from codemojex.worker.botapi import make_bot
from codemojex.worker.service import WorkerStats, WorkerTimings, run_worker
from tests.conftest import REDIS_URL
from tests.helpers.support import checkout_env

T = TypeVar("T")

ALICE, BOB, CAROL, DAVE, OPERATOR = 2001, 2002, 2003, 2004, 2009
ADMIN = CAROL  # the owner (an administrator) of every test group
# Barrier users take turns, so that none of them runs out of answers (`state/budget.py` `BUDGET`).
BARRIERS = range(2900, 3000)
NAMES = {
    ALICE: "Alice",
    BOB: "Bob",
    CAROL: "Carol",
    DAVE: "Dave",
    OPERATOR: "Olga",
    **dict.fromkeys(BARRIERS, "Barrier"),
}

ROOT = Path(__file__).resolve().parents[2]


async def eventually(
    probe: Callable[[], Awaitable[T]],
    *,
    timeout: float,  # noqa: ASYNC109 - a deadline for the polling, not for one await
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll `probe` until it returns something truthy; that value, or TimeoutError."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not reached in {timeout}s (last: {last!r})")
        await asyncio.sleep(interval)


@dataclass(frozen=True)
class Announcement:
    """A round announcement as players read it in the chat."""

    message_id: int
    length: int
    palette: tuple[str, ...]


_LENGTH_RE = re.compile(r"code of (\d+) emojis")


def parse_announcement(message: SentMessage) -> Announcement:
    """Length and palette from the announcement's text alone (what a player sees)."""
    match = _LENGTH_RE.search(message.text)
    assert match is not None, message.text
    (line,) = [ln for ln in message.text.splitlines() if ln.startswith("Palette: ")]
    palette = tuple(line.removeprefix("Palette: ").split(" "))
    return Announcement(message.message_id, int(match.group(1)), palette)


def result_text(guess: Sequence[str], secret: Sequence[str], attempt_no: int) -> str:
    """What the game must answer for `guess` against `secret`, computed independently of the
    worker: the pegs from the rules, the line from the shared texts."""
    fb = scoring.feedback(tuple(guess), tuple(secret))
    return texts.result_line(EN, tuple(guess), fb, attempt_no)


def times_posted(sent: Sequence[SentMessage], row: Outbox) -> int:
    """How many times the stand-in saw this outbox row: as a message of its own (a reply in a
    quiet room, or a standalone post) or as a named line inside a coalesced message."""
    alone = sum(1 for m in sent if m.chat_id == row.chat_id and m.text == row.text)
    if not row.player_name:
        return alone
    line = f"{row.player_name}: {row.text}"
    merged = sum(
        m.text.split("\n").count(line) for m in sent if m.chat_id == row.chat_id and "\n" in m.text
    )
    return alone + merged


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Stack:
    standin: StandIn
    settings: Settings
    app: CodemojexApp
    redis: aioredis.Redis
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    lanes: Lanes
    # the game's now, the bot's and the in-process worker's (a test moves it over midnight)
    clock: Callable[[], datetime] = utcnow
    errors: list[BaseException] = field(default_factory=list)
    front: Front | None = None  # once running
    _barriers: int = 0
    _next_chat: int = -1_002_000_000_001

    # -- the chat side -------------------------------------------------------------------

    def new_group(
        self,
        *,
        admins: Sequence[int] = (ADMIN,),
        members: Sequence[int] = (),
        forum: bool = False,
        bot_is_admin: bool = False,
    ) -> int:
        chat_id = self._next_chat
        self._next_chat -= 1
        self.standin.add_group(
            chat_id,
            f"room {chat_id}",
            admins=list(admins),
            members=[ALICE, BOB, DAVE, *members],
            forum=forum,
            bot_is_admin=bot_is_admin,
        )
        return chat_id

    def add_players(self, first_id: int, count: int, prefix: str) -> list[int]:
        ids = list(range(first_id, first_id + count))
        for n, user_id in enumerate(ids):
            self.standin.add_user(user_id, f"{prefix}{n}")
        return ids

    async def settle(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Wait until the bot has handled every update sent so far.

        Updates are fetched and dispatched in order, so once the bot answered a /help sent
        after them every earlier one has been dispatched; a bot that handles updates
        concurrently (per sender) is done with them once its update processor is idle."""
        self._barriers += 1
        barrier = BARRIERS[self._barriers % len(BARRIERS)]
        before = len(self.said(barrier))
        self.standin.send_private(barrier, "/help")
        await self.standin.wait_for_sent_count(before + 1, chat_id=barrier, timeout=timeout)
        if self.front is not None:
            await asyncio.wait_for(self.front.door.wait_idle(), timeout)
        # Answers waiting for their chat's pace are posted (or dropped) off the update path.
        await asyncio.wait_for(self.app.bot_data.answers.wait_idle(), timeout)

    def said(self, chat_id: int) -> list[SentMessage]:
        return self.standin.sent_messages(chat_id)

    async def reply_to(self, chat_id: int, message_id: int, timeout: float = 10.0) -> str:  # noqa: ASYNC109
        found = await self.standin.wait_for_sent(
            lambda m: m.reply_to_message_id == message_id, timeout, chat_id=chat_id
        )
        return found.text

    async def answered(
        self,
        chat_id: int,
        message_ids: list[int],
        text: str,
        timeout: float = 15.0,  # noqa: ASYNC109
    ) -> None:
        """Each of `message_ids` got `text`: as a reply to it, or as a line of a message that
        folded the answers waiting for the chat's pace ("Name: text", no reply)."""
        deadline = time.monotonic() + timeout
        while True:
            said = self.said(chat_id)
            replies = sum(m.reply_to_message_id in message_ids and m.text == text for m in said)
            folded = sum(
                line.endswith(": " + text)
                for m in said
                if m.reply_to_message_id is None
                for line in m.text.split("\n")
            )
            if replies + folded >= len(message_ids):
                return
            assert time.monotonic() < deadline, f"{replies + folded} of {len(message_ids)} answered"
            await asyncio.sleep(0.05)

    async def announcement(
        self,
        chat_id: int,
        timeout: float = 15.0,  # noqa: ASYNC109
        *,
        thread_id: int | None = None,
    ) -> Announcement:
        found = await self.standin.wait_for_sent(
            lambda m: m.text.startswith("🎯 New round!") and m.thread_id == thread_id,
            timeout,
            chat_id=chat_id,
        )
        return parse_announcement(found)

    # -- tap to guess --------------------------------------------------------------------

    async def tap(
        self,
        chat_id: int,
        message_id: int,
        user_id: int,
        data: str,
        *,
        stale: bool = False,
        query_id: str | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> str | None:
        """A user taps a button of the bot's message; the toast the bot answered with."""
        before = len(self.standin.callback_answers)
        qid = self.standin.press_button(
            chat_id, message_id, user_id, data, stale=stale, query_id=query_id
        )

        async def answered() -> dict[str, Any] | None:
            return next(
                (
                    a
                    for a in self.standin.callback_answers[before:]
                    if a["callback_query_id"] == qid
                ),
                None,
            )

        found = await eventually(answered, timeout=timeout, what=f"the answer to tap {data}")
        assert found is not None
        text = found["text"]
        return None if text is None else str(text)

    def buttons(self, chat_id: int, message_id: int) -> list[tuple[str, str]]:
        """(text, callback_data) of the inline buttons under a message, now."""
        message = self.standin.message(chat_id, message_id)
        assert message is not None
        rows = message.get("reply_markup", {}).get("inline_keyboard", [])
        return [(b["text"], b["callback_data"]) for row in rows for b in row]

    async def new_round(self, chat_id: int, by: int = ALICE) -> tuple[Announcement, Round]:
        """/newgame, the announcement the worker posts, and the round as stored."""
        self.standin.send_text(chat_id, by, "/newgame")
        ann = await self.announcement(chat_id)
        rnd = await self.open_round(chat_id)
        assert rnd is not None
        return ann, rnd

    async def result(
        self,
        chat_id: int,
        message_id: int,
        name: str,
        guess: str,
        timeout: float = 15.0,  # noqa: ASYNC109
    ) -> SentMessage:
        """The post that answers a guess: a reply to it (quiet room) or a named line of a
        coalesced message."""
        named = f"{name}: {guess} → "

        def answers(m: SentMessage) -> bool:
            if m.reply_to_message_id == message_id and m.text.startswith(guess):
                return True
            return any(line.startswith(named) for line in m.text.split("\n"))

        return await self.standin.wait_for_sent(answers, timeout, chat_id=chat_id)

    # -- the database side ---------------------------------------------------------------

    async def open_round(self, chat_id: int) -> Round | None:
        async with self.sessionmaker() as session:
            room = await store.room_by_chat(session, chat_id)
            return None if room is None else await store.open_round(session, room.id)

    async def room_id(self, chat_id: int) -> str:
        async with self.sessionmaker() as session:
            room = await store.room_by_chat(session, chat_id)
        assert room is not None
        return room.id

    async def scalar(self, stmt: Any) -> Any:
        async with self.sessionmaker() as session:
            return (await session.execute(stmt)).scalar()

    async def all(self, stmt: Any) -> list[Any]:
        async with self.sessionmaker() as session:
            return list((await session.execute(stmt)).scalars())

    async def guess_count(self) -> int:
        return int(await self.scalar(select(func.count()).select_from(Guess)))

    async def unsent_rows(self) -> int:
        stmt = select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
        return int(await self.scalar(stmt))

    async def outbox(self) -> list[Outbox]:
        return await self.all(select(Outbox).order_by(Outbox.id))

    async def all_posted(self, timeout: float = 30.0) -> list[Outbox]:  # noqa: ASYNC109
        """Wait until every outbox row is marked sent; the rows."""

        async def done() -> bool:
            return await self.unsent_rows() == 0

        await eventually(done, timeout=timeout, interval=0.1, what="every outbox row sent")
        return await self.outbox()

    # -- the queue side ------------------------------------------------------------------

    @property
    def keys(self) -> Keys:
        return Keys(self.settings.queue)

    async def pending_job_ids(self, room: str) -> set[str]:
        """Ids of the jobs waiting in the room's lanes (read from the lanes keyspace)."""
        snap = await self.lanes.snapshot(room)
        view = snap["rooms"].get(room, {"lanes": {}})
        found: set[str] = set()
        for lane in view["lanes"]:
            found |= {_text(j) for j in await self.redis.zrange(self.keys.pending(lane), 0, -1)}
        return found

    async def leased_job_ids(self) -> set[str]:
        return {_text(j) for j in await self.redis.zrange(self.keys.active, 0, -1)}

    async def in_flight(self) -> dict[str, int]:
        raw = await self.redis.hgetall(self.keys.gactive)
        return {_text(k): int(v) for k, v in raw.items()}

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a `codemojex worker` subprocess on this stack."""
        s = self.settings
        assert s.token is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
        env.update(
            CODEMOJEX_TOKEN=s.token.get_secret_value(),
            CODEMOJEX_BOT_API_BASE_URL=s.bot_api_base_url,
            CODEMOJEX_BOT_API_BASE_FILE_URL=s.bot_api_base_file_url,
            CODEMOJEX_REDIS_URL=s.redis_url or REDIS_URL,
            CODEMOJEX_DATABASE_URL=s.database_url,
            CODEMOJEX_QUEUE=s.queue,
            CODEMOJEX_CONCURRENCY=str(s.concurrency),
            CODEMOJEX_LEASE_MS=str(s.lease_ms),
            CODEMOJEX_OPERATOR_IDS=",".join(str(i) for i in s.operator_ids),
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env


def stack_settings(standin: StandIn, queue: str, database_url: str, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "token": standin.token,
        "bot_api_base_url": standin.base_url,
        "bot_api_base_file_url": standin.base_file_url,
        "operator_ids": [OPERATOR],
        "queue": queue,
        "redis_url": REDIS_URL,
        "database_url": database_url,
        "concurrency": 4,
        "default_ceiling": 2,
    }
    values.update(extra)
    return Settings(**values)


# -- the worker ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def in_process_worker(
    stack: Stack, timings: WorkerTimings | None = None
) -> AsyncIterator[WorkerStats]:
    """`run_worker` in this event loop with clients of its own (as a separate process would
    have), on the stack's clock (the bot's); stopped gracefully on exit. Yields its live
    counters."""
    settings = stack.settings
    redis = aioredis.Redis.from_url(REDIS_URL, max_connections=pool_size(settings.concurrency))
    engine = make_engine(settings.database_url)
    stats = WorkerStats()
    stop = asyncio.Event()
    try:
        async with make_bot(settings.bot_api()) as bot:
            task = asyncio.create_task(
                run_worker(
                    settings.worker(),
                    lanes=Lanes(redis, queue=settings.queue),
                    sessionmaker=make_sessionmaker(engine),
                    bot=bot,
                    redis=redis,
                    stop_event=stop,
                    stats=stats,
                    timings=timings or WorkerTimings(),
                    clock=stack.clock,
                ),
                name="e2e:worker",
            )
            try:
                yield stats
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)
    finally:
        await engine.dispose()
        await redis.aclose()


class WorkerProcess(CodemojexProcess):
    """A `codemojex worker` of the checkout under test; its output goes to `log_path`."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        super().__init__("worker", checkout_env(env), log_path)
