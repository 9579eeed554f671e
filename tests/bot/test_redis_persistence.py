"""Redis keeps what the bot confirmed to Telegram, on the deployments we hand out (appendonly
yes), and the bot and the worker say so when it cannot (appendonly no): one WARNING line
each at start-up, never a refusal.

Each test runs redis-server processes of its own, on free loopback ports, with their files
in the test's own directory (never the machine's Redis); they are stopped by PID."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from sqlalchemy import select

from codemojex.db import Guess
from codemojex.lanes import Lanes
from codemojex.lanes.keys import Keys
from codemojex.runtime import NO_AOF, warn_without_persistence
from codemojex.standin import StandIn
from tests.bot.conftest import (
    ALICE,
    BOB,
    World,
    bot_world,
    ready_client,
    start_round,
    valid_guess,
)
from tests.e2e.harness import WorkerProcess, eventually
from tests.helpers.support import checkout_env, codemojex_command, free_port, wipe_tables

pytestmark = [
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.timeout(240),
]

ROOMS = 4
PER_PLAYER = 3  # ALICE's and BOB's guesses in every room, all pending (no worker yet)


class OwnRedis:
    """A redis-server of the test's own on a port it keeps, its files in `workdir`: killed and
    started again on the same append-only file."""

    def __init__(self, workdir: Path, *config: str) -> None:
        self.port = free_port()
        self.argv = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(workdir), "--save", "", *config,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(10) == -signal.SIGKILL

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@contextlib.contextmanager
def own_redis(workdir: Path, *config: str) -> Iterator[OwnRedis]:
    server = OwnRedis(workdir, *config)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def process_env(
    world_or_standin: World | StandIn, redis_url: str, database_url: str, queue: str
) -> dict[str, str]:
    """The environment of a `codemojex bot` or `codemojex worker` process on this Redis."""
    standin = (
        world_or_standin if isinstance(world_or_standin, StandIn) else world_or_standin.standin
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    env.update(
        CODEMOJEX_TOKEN=standin.token,
        CODEMOJEX_BOT_API_BASE_URL=standin.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=standin.base_file_url,
        CODEMOJEX_REDIS_URL=redis_url,
        CODEMOJEX_DATABASE_URL=database_url,
        CODEMOJEX_QUEUE=queue,
        CODEMOJEX_CONCURRENCY="4",
        PYTHONUNBUFFERED="1",
    )
    return env


async def pending_job_ids(lanes: Lanes, redis: aioredis.Redis) -> set[str]:
    """Every job waiting in the queue's lanes, read from the lanes keyspace."""
    keys = Keys(lanes.queue)
    c: Any = redis  # redis-py types replies as bytes | str; this client returns bytes
    found: set[str] = set()
    for room in (await lanes.snapshot())["rooms"].values():
        for lane in room["lanes"]:
            found |= {j.decode() for j in await c.zrange(keys.pending(lane), 0, -1)}
    return found


@pytest.mark.parametrize("fsync", ["everysec", "always"])
async def test_pending_guesses_survive_a_redis_sigkill_and_are_scored_once(
    bot_database_url: str, bot_queue: str, tmp_path: Path, fsync: str
) -> None:
    with own_redis(tmp_path, "--appendonly", "yes", "--appendfsync", fsync) as server:
        client = await ready_client(server.url)
        async with bot_world(bot_database_url, bot_queue, redis=client) as world:
            await wipe_tables(world.engine, restart_ids=False)
            chats = [world.new_group() for _ in range(ROOMS)]
            for chat in chats:
                rnd = await start_round(world, chat)
                for n in range(PER_PLAYER):
                    world.standin.send_text(chat, ALICE, valid_guess(rnd, n))
                    world.standin.send_text(chat, BOB, valid_guess(rnd, PER_PLAYER + n))
            await world.settle()
            # Telegram was told every update is handled: it will never send one again.
            await world.standin.wait_until_delivered(timeout=30)
            assert world.standin.pending_updates == 0
            pending = await pending_job_ids(world.lanes, client)
            assert len(pending) == ROOMS * 2 * PER_PLAYER

            # At once, with no time for a background fsync: what `fsync` promises.
            server.kill()
            server.start()
            after = await ready_client(server.url)
            try:
                lanes = Lanes(after, queue=bot_queue)
                assert await pending_job_ids(lanes, after) == pending
                assert await lanes.check() == []

                worker = WorkerProcess(
                    process_env(world, server.url, bot_database_url, bot_queue),
                    tmp_path / "worker.log",
                )
                await worker.start()
                try:

                    async def recorded() -> bool:
                        async with world.sessionmaker() as session:
                            count = len((await session.execute(select(Guess.id))).all())
                        return count >= len(pending)

                    await eventually(recorded, timeout=90, interval=0.1, what="every guess")

                    async def drained() -> bool:
                        snap = await lanes.snapshot()
                        return snap["active"] == 0 and not await pending_job_ids(lanes, after)

                    await eventually(drained, timeout=30, what="the lanes drained")
                    worker.signal(signal.SIGTERM)
                    assert await worker.wait(30) == 0, worker.output()[-3000:]
                finally:
                    await worker.ensure_gone()
                assert NO_AOF not in worker.output()
                async with world.sessionmaker() as session:
                    guesses = list((await session.execute(select(Guess))).scalars())
                assert Counter(g.id for g in guesses) == Counter(pending)  # each exactly once
                assert all(g.attempt_no for g in guesses)
                assert await lanes.check() == []
            finally:
                await after.aclose()
            assert world.errors == []


@pytest.mark.parametrize("aof", ["no", "yes"])
async def test_bot_and_worker_warn_once_when_redis_keeps_no_append_only_file(
    bot_database_url: str, bot_queue: str, tmp_path: Path, aof: str
) -> None:
    with own_redis(tmp_path, "--appendonly", aof) as server:
        await (await ready_client(server.url)).aclose()
        async with StandIn() as standin:
            standin.add_user(ALICE, "Alice")
            env = process_env(standin, server.url, bot_database_url, bot_queue)
            bot = await asyncio.create_subprocess_exec(
                *codemojex_command("bot"),
                env=checkout_env(env),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            worker = WorkerProcess(env, tmp_path / "worker.log")
            await worker.start()
            try:
                standin.send_private(ALICE, "/help")
                await standin.wait_for_sent_count(1, chat_id=ALICE, timeout=60)

                async def up() -> bool:
                    return "worker up" in worker.output()

                await eventually(up, timeout=60, what="the worker up")
            finally:
                if bot.returncode is None:
                    bot.send_signal(signal.SIGTERM)
                bot_output, _ = await asyncio.wait_for(bot.communicate(), 30)
                if worker.proc is not None and worker.proc.returncode is None:
                    worker.signal(signal.SIGTERM)
                worker_rc = await worker.wait(30)
                await worker.ensure_gone()
    logs = {"bot": bot_output.decode(errors="replace"), "worker": worker.output()}
    assert (bot.returncode, worker_rc) == (0, 0), logs
    expected = 1 if aof == "no" else 0
    for name, log in logs.items():
        warnings = [ln for ln in log.splitlines() if NO_AOF in ln]
        assert len(warnings) == expected, (name, log[-3000:])
        assert all(" WARNING " in ln and "appendonly" in ln for ln in warnings)


async def test_a_cluster_whose_masters_keep_no_append_only_file_is_warned_about(
    cluster_redis: RedisCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Every master is asked (INFO persistence on each): the session's cluster keeps nothing."""
    with caplog.at_level(logging.INFO, logger="codemojex.runtime"):
        await warn_without_persistence(cluster_redis)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.WARNING, NO_AOF)]
