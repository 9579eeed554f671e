"""Fixtures of the worker tests.

Redis clients here drop this test's `cmx:{<queue>}:*` keys (pacing, sender leases) and
`emq:{<queue>}:*` keys (lanes) afterwards, never anything else on the shared server.
`redis_any` runs a test on the real Redis, fakeredis and the session's Redis Cluster;
`redis_rc` on the real Redis and the cluster.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from codemojex import usecases
from codemojex.db import make_engine, make_sessionmaker, upgrade
from codemojex.lanes import Lanes
from codemojex.runtime import GatedRedisCluster
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.values import ids
from codemojex.values.jobs import GuessJob
from codemojex.values.redistypes import AnyRedis
from codemojex.worker.botapi import make_bot
from tests.conftest import PG_ADMIN_URL, REDIS_URL, _admin
from tests.helpers.support import drop_keys, free_port, wipe_tables, wrong_guess


def _client(request: pytest.FixtureRequest, kind: str) -> AnyRedis:
    if kind == "real":
        return aioredis.Redis.from_url(REDIS_URL)
    if kind == "cluster":
        url = request.getfixturevalue("redis_cluster_url")
        return GatedRedisCluster.from_url(url, max_in_flight=200)
    import fakeredis

    fake: aioredis.Redis = fakeredis.FakeAsyncRedis()
    return fake


@pytest.fixture(params=["real", "fake", "cluster"])
async def redis_any(request: pytest.FixtureRequest, queue_name: str) -> AsyncIterator[AnyRedis]:
    """The real Redis, fakeredis (the embedded demo's) and a Redis Cluster, cleaned after
    the test."""
    client = _client(request, request.param)
    try:
        yield client
    finally:
        await drop_keys(client, queue_name)
        await client.aclose()


@pytest.fixture
async def redis_r(queue_name: str) -> AsyncIterator[aioredis.Redis]:
    """The real Redis, cleaned after the test."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        yield client
    finally:
        await drop_keys(client, queue_name)
        await client.aclose()


@pytest.fixture(params=["real", "cluster"])
async def redis_rc(request: pytest.FixtureRequest, queue_name: str) -> AsyncIterator[AnyRedis]:
    """The real Redis and a Redis Cluster (CODEMOJEX_REDIS_CLUSTER=true), cleaned after the
    test: for the paths whose keys must share a slot (the sender's fence and markers)."""
    client = _client(request, request.param)
    try:
        yield client
    finally:
        await drop_keys(client, queue_name)
        await client.aclose()


# --- Postgres -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def worker_pg_url() -> Iterator[str]:
    """A Postgres database of the worker tests, migrated with Alembic (upgrade head).

    Its own database (same recipe as the shared `pg_database_url`) because these tests
    TRUNCATE between tests, which must not pull the rug from under other suites' data.
    """
    name = "cmworker_" + uuid.uuid4().hex[:10]
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    url = f"{base}/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def sessionmaker(worker_pg_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on the worker test database, emptied before the test."""
    engine = make_engine(worker_pg_url)
    await wipe_tables(engine)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


@pytest.fixture
async def dead_sessionmaker() -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on a Postgres that is not there: a closed port on this machine."""
    # Nothing listens on a free port: connections are refused.
    engine = make_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nothing")
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


# --- Telegram stand-in ----------------------------------------------------------------------


@pytest.fixture
async def standin() -> AsyncIterator[StandIn]:
    server = StandIn()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def bot(standin: StandIn) -> AsyncIterator[Bot]:
    settings = Settings(
        token=SecretStr(standin.token),
        bot_api_base_url=standin.base_url,
        bot_api_base_file_url=standin.base_file_url,
    )
    async with make_bot(settings.bot_api()) as client:
        yield client


# --- a room with players and an open round ---------------------------------------------------


@dataclass
class Table:
    """One group chat with its room, players and open round, on the stand-in and in the DB."""

    chat_id: int
    room_id: str
    round_id: int
    secret: tuple[str, ...]
    palette: tuple[str, ...]
    players: dict[int, str]  # Telegram user id -> PLR id
    names: dict[int, str]

    def wrong_guess(self, n: int = 0) -> tuple[str, ...]:
        """A guess that is not the secret (varies with n)."""
        return wrong_guess(self.secret, self.palette, n)


async def make_table(
    sm: async_sessionmaker[AsyncSession],
    standin: StandIn,
    chat_id: int,
    users: int = 3,
    *,
    seed: int = 1,
) -> Table:
    user_ids = [abs(chat_id) * 100 + i for i in range(1, users + 1)]
    names = {uid: f"Player{uid}" for uid in user_ids}
    for uid in user_ids:
        standin.add_user(uid, names[uid])
    standin.add_group(chat_id, f"Room {chat_id}", admins=user_ids[:1], members=user_ids)
    room = await usecases.ensure_room(
        sm, chat_id, f"Room {chat_id}", default_ceiling=2, round_timeout_s=600
    )
    players: dict[int, str] = {}
    for uid in user_ids:
        players[uid] = (await usecases.ensure_player(sm, room.id, uid, names[uid])).id
    rnd = await usecases.start_round(sm, room.id, random.Random(seed))
    return Table(
        chat_id=chat_id,
        room_id=room.id,
        round_id=rnd.id,
        secret=rnd.secret_emojis,
        palette=rnd.palette_emojis,
        players=players,
        names=names,
    )


async def enqueue_guess(
    lanes: Lanes,
    standin: StandIn,
    table: Table,
    user_id: int,
    emojis: tuple[str, ...],
    *,
    job_id: str | None = None,
) -> str:
    """What the bot does for a valid guess: the user's message on the stand-in, a job in the
    player's lane with the guess id as job id."""
    message_id = standin.send_text(table.chat_id, user_id, "".join(emojis))
    payload = GuessJob(round_id=table.round_id, message_id=message_id, emojis=emojis).encode()
    return await lanes.enqueue(
        table.room_id,
        table.players[user_id],
        payload,
        job_id=job_id or ids.mint(ids.JOB),
        max_attempts=20,
    )
