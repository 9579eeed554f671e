"""One running bot per test module: the real PTB Application polling the Bot API stand-in over
HTTP, on the real Redis (a queue of its own) and the real Postgres (the session's database,
migrated with Alembic, truncated before every test).

End-to-end modules set `pytestmark = E2E`: they share the module's event loop with the running
bot and start every test from empty tables and queue keys. Every test gets fresh group chat
ids, so what one test's bot posted never shows up in another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.bot import (
    BotParts,
    CodemojexApp,
    CodemojexContext,
    Front,
    build_application,
    running,
)
from codemojex.db import AuditLog, Room, Round, make_engine, make_sessionmaker, store, upgrade
from codemojex.game import texts
from codemojex.lanes import Lanes
from codemojex.locale import EN
from codemojex.outages import outage_of
from codemojex.posting.pace_policy import PacePolicy
from codemojex.posting.pacer import Pacer
from codemojex.settings import Settings
from codemojex.standin import SentMessage, StandIn
from codemojex.state.budget import BUDGET, BUDGET_MAX, AnswerBudget
from codemojex.values.clock import utcnow
from codemojex.values.redistypes import AnyRedis
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, free_port, wipe_tables
from tests.ops.proxy import TcpProxy

ALICE, BOB, CAROL, DAVE, OPERATOR = 1001, 1002, 1003, 1004, 1009
# Barrier users take turns, so that barriers never wait for a private chat's posting pace.
BARRIERS = range(1900, 2000)
ADMIN = CAROL  # the owner of every test group
MAX_DEPTH = 5

UNPACED = PacePolicy(
    chat_ms=0,
    group_spacing_ms=0,
    group_limit=100_000,
    bot_limit=100_000,
    margin_ms=0,
    group_alone=100_000,
)

E2E = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("clean_slate")]

_chat_ids = itertools.count(-1_001_000_000_001, -1)


@dataclass
class World:
    standin: StandIn
    app: CodemojexApp
    lanes: Lanes
    redis: AnyRedis
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    settings: Settings
    errors: list[BaseException] = field(default_factory=list)
    front: Front | None = None  # once running
    _barriers: int = 0

    def new_group(self, admins: tuple[int, ...] = (ADMIN,)) -> int:
        chat_id = next(_chat_ids)
        self.standin.add_group(
            chat_id, f"room {chat_id}", admins=list(admins), members=[ALICE, BOB]
        )
        return chat_id

    async def settle(self) -> None:
        """Wait until the bot has handled every update sent so far.

        Updates are fetched and dispatched in order: once the bot answered a /help sent after
        them, every earlier one has been dispatched, and once the processor is idle, handled."""
        self._barriers += 1
        barrier = BARRIERS[self._barriers % len(BARRIERS)]
        before = len(self.said(barrier))
        self.standin.send_private(barrier, "/help")
        await self.standin.wait_for_sent_count(before + 1, chat_id=barrier, timeout=30)
        assert self.front is not None
        await asyncio.wait_for(self.front.door.wait_idle(), 30)
        # Answers waiting for their chat's pace are posted (or dropped) off the update path.
        await asyncio.wait_for(self.app.bot_data.answers.wait_idle(), 30)

    def said(self, chat_id: int) -> list[SentMessage]:
        return self.standin.sent_messages(chat_id)

    def replies_to(self, chat_id: int, message_id: int) -> list[str]:
        return [m.text for m in self.said(chat_id) if m.reply_to_message_id == message_id]

    async def queued(self) -> int:
        """Jobs pending in every lane of the queue (what the bot enqueued and nobody claimed)."""
        snapshot = await self.lanes.snapshot()
        return sum(int(room["pending"]) for room in snapshot["rooms"].values())

    async def scalar(self, stmt: Any) -> Any:
        async with self.sessionmaker() as session:
            return (await session.execute(stmt)).scalar()

    async def audits(self, action: str, *, allowed: bool | None = None) -> int:
        stmt = select(func.count()).select_from(AuditLog).where(AuditLog.action == action)
        if allowed is not None:
            stmt = stmt.where(AuditLog.allowed == allowed)
        return int(await self.scalar(stmt))


@pytest.fixture(scope="module")
def bot_database_url(pg_database_url: str) -> str:
    upgrade(pg_database_url)  # idempotent; a sync fixture, so no event loop is running here
    return pg_database_url


@pytest.fixture(scope="module")
def bot_queue() -> Iterator[str]:
    yield "tb" + uuid.uuid4().hex[:12]


def bot_settings(standin: StandIn, queue: str, database_url: str, **extra: Any) -> Settings:
    return Settings(
        token=standin.token,
        bot_api_base_url=standin.base_url,
        bot_api_base_file_url=standin.base_file_url,
        operator_ids=[OPERATOR],
        queue=queue,
        redis_url=REDIS_URL,
        database_url=database_url,
        default_ceiling=2,
        **extra,
    )


def populate(standin: StandIn) -> None:
    for user_id, name in (
        (ALICE, "Alice"),
        (BOB, "Bob"),
        (CAROL, "Carol"),
        (DAVE, "Dave"),
        (OPERATOR, "Olga"),
    ):
        standin.add_user(user_id, name)
    for user_id in BARRIERS:
        standin.add_user(user_id, "Barrier")


@contextlib.contextmanager
def own_redis_server(*extra: str) -> Iterator[str]:
    """A redis-server of the test's own (no persistence) on a free loopback port, for what the
    shared one must never see (FLUSHALL, a maxmemory): its URL. Stopped by its PID."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", *extra],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(10)


async def ready_client(url: str) -> aioredis.Redis:
    """A client of a redis-server that has just been started, once it answers."""
    client = aioredis.Redis.from_url(url)
    for _ in range(100):
        with contextlib.suppress(RedisConnectionError, OSError):
            if await client.ping():
                break
        await asyncio.sleep(0.05)
    return client


@asynccontextmanager
async def postgres_proxy(database_url: str) -> AsyncIterator[TcpProxy]:
    """A TCP proxy in front of the machine's Postgres, which a test cuts as a network or a
    restart would (the server itself is never touched); `through` names the URL by it."""
    target = urlsplit(database_url)
    assert target.hostname is not None and target.port is not None
    proxy = TcpProxy(free_port(), target.hostname, target.port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def proxy(bot_database_url: str) -> AsyncIterator[TcpProxy]:
    """The bot's way to Postgres in a module whose tests cut it (`postgres_proxy`)."""
    async with postgres_proxy(bot_database_url) as proxy:
        yield proxy


def through(database_url: str, proxy: TcpProxy) -> str:
    """`database_url` by way of `proxy`."""
    target = urlsplit(database_url)
    return database_url.replace(target.netloc, f"{target.username}@127.0.0.1:{proxy.port}")


@asynccontextmanager
async def bot_world(
    database_url: str,
    queue: str,
    *,
    redis: AnyRedis | None = None,
    webhook: bool = False,
    clock: Callable[[], datetime] = utcnow,
    **settings_extra: Any,
) -> AsyncIterator[World]:
    """A stand-in and a running bot on it (polling, or a webhook when asked); `clock` is the
    daily code's now. With the setting inline_mode, the stand-in's inline mode is on too."""
    redis = redis if redis is not None else aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(database_url)
    sessionmaker = make_sessionmaker(engine)
    standin = StandIn(inline_mode=bool(settings_extra.get("inline_mode")))
    await standin.start()
    populate(standin)
    settings = bot_settings(standin, queue, database_url, **settings_extra)
    lanes = Lanes(redis, queue=queue)
    app = build_application(
        settings.bot(),
        lanes=lanes,
        sessionmaker=sessionmaker,
        redis=redis,
        clock=clock,
        parts=BotParts(
            rng=random.Random(7),
            max_depth=MAX_DEPTH,
            # The shared pacer, and an answer budget, with limits no test reaches
            # (test_pacing uses Telegram's limits and the default budget, `budgeted`).
            pacer=Pacer(redis, queue, UNPACED),
            budget=AnswerBudget(redis, queue, budget=BUDGET_MAX),
        ),
    )
    world = World(standin, app, lanes, redis, engine, sessionmaker, settings)

    async def record_error(update: object, context: CodemojexContext) -> None:
        assert context.error is not None
        if outage_of(context.error) not in ("redis", "postgres"):  # the door waits those out
            world.errors.append(context.error)

    app.add_error_handler(record_error)
    try:
        async with running(app, poll_timeout=1, webhook=webhook) as world.front:
            yield world
    finally:
        await standin.stop()
        with contextlib.suppress(RedisError):
            await drop_keys(redis, queue)
        await engine.dispose()
        await redis.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str) -> AsyncIterator[World]:
    async with bot_world(bot_database_url, bot_queue) as world:
        yield world


@pytest_asyncio.fixture(loop_scope="module")
async def clean_slate(world: World, bot_queue: str) -> AsyncIterator[None]:
    """Empty tables and queue keys before each test; the bot process itself keeps running.
    Its pacer starts afresh too: its book in this process (a bot-wide 429's pause, posts in
    flight) is the pace's, and the pace's keys were just dropped."""
    await wipe_tables(world.engine, restart_ids=False)
    await drop_keys(world.redis, bot_queue)
    answers = world.app.bot_data.answers
    answers.pacer = Pacer(world.redis, bot_queue, answers.pacer.policy, bot=answers.pacer.bot)
    world.errors.clear()
    yield
    assert world.errors == [], f"handlers raised into the error handler: {world.errors!r}"


@pytest.fixture
def budgeted(world: World, bot_queue: str) -> Iterator[World]:
    """The world with the default answer budget (its members' budgets start whole)."""
    answers = world.app.bot_data.answers
    before = answers.budget
    answers.budget = AnswerBudget(world.redis, bot_queue, budget=BUDGET)
    yield world
    answers.budget = before


async def start_round(world: World, chat_id: int, by: int = ALICE) -> Round:
    """/newgame in the chat; the open round as stored (its palette tells valid guesses)."""
    world.standin.send_text(chat_id, by, "/newgame")
    await world.settle()
    rnd = await open_round(world, chat_id)
    assert rnd is not None, world.said(chat_id)
    return rnd


async def seed_round(world: World, chat_id: int) -> tuple[Room, Round]:
    """A room with an open round, written through the store directly (no round trip to the
    bot, whose first sight of the room then applies its ceiling as usual)."""
    room = await usecases.ensure_room(
        world.sessionmaker, chat_id, f"room {chat_id}", default_ceiling=2, round_timeout_s=600
    )
    rnd = await usecases.start_round(world.sessionmaker, room.id, random.Random(chat_id))
    return room, rnd


async def open_round(world: World, chat_id: int) -> Round | None:
    async with world.sessionmaker() as session:
        room = await store.room_by_chat(session, chat_id)
        return None if room is None else await store.open_round(session, room.id)


async def room_of(world: World, chat_id: int) -> Room:
    async with world.sessionmaker() as session:
        room = await store.room_by_chat(session, chat_id)
    assert room is not None
    return room


def valid_guess(rnd: Round, shift: int = 0) -> str:
    palette = rnd.palette_emojis
    return "".join(palette[(i + shift) % len(palette)] for i in range(rnd.length))


# Scenarios run on more than one world (the plain Redis and the cluster).


async def flood_gets_one_slow_down(world: World) -> None:
    """A player past MAX_DEPTH is told to slow down once; another player is not held up."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    before = await world.queued()  # the world may hold other tests' guesses
    flood = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(12)]
    other = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    assert await world.queued() - before == MAX_DEPTH + 1
    notices = [m for mid in flood for m in world.replies_to(chat, mid)]
    assert notices == [texts.slow_down(EN)]
    assert world.replies_to(chat, other) == []


async def paused_room_notes_once_per_player(world: World) -> None:
    """Guesses in a paused room are kept, each player told once; after /resume, no note."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    before = await world.queued()  # the world may hold other tests' guesses
    alice = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(3)]
    bob = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    assert await world.queued() - before == 4
    assert [t for mid in alice for t in world.replies_to(chat, mid)] == [
        texts.scoring_paused_note(EN)
    ]
    assert world.replies_to(chat, bob) == [texts.scoring_paused_note(EN)]
    world.standin.send_text(chat, ADMIN, "/resume")
    await world.settle()
    after = world.standin.send_text(chat, BOB, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, after) == []
