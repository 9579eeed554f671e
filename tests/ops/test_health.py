"""A real `codemojex worker`: the schema check at start, /readyz while its Postgres is
unreachable, and an outage told in two lines.

The machine's Postgres and Redis are shared with other runs and are never stopped: the
worker reaches them through a TCP proxy of the test's own (tests/ops/proxy.py), which the
test stops and starts again."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import redis.asyncio as aioredis
from sqlalchemy.engine import make_url

from codemojex.lanes import Lanes
from codemojex.runtime import NO_AOF
from codemojex.values import ids
from codemojex.values.jobs import GuessJob
from tests.conftest import PG_ADMIN_URL, REDIS_URL, _admin
from tests.e2e.harness import WorkerProcess, eventually
from tests.helpers.support import free_port
from tests.ops.conftest import status
from tests.ops.proxy import TcpProxy


def worker_env(database_url: str, redis_url: str, queue: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    env.update(
        CODEMOJEX_TOKEN="1:ops-test",
        # nothing is posted (no outbox rows); a closed port keeps the Bot API off the network
        CODEMOJEX_BOT_API_BASE_URL=f"http://127.0.0.1:{free_port()}/bot",
        CODEMOJEX_REDIS_URL=redis_url,
        CODEMOJEX_DATABASE_URL=database_url,
        CODEMOJEX_QUEUE=queue,
        CODEMOJEX_CONCURRENCY="8",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


async def stopped_after(proc: WorkerProcess, line: str) -> list[str]:
    """Wait for `line` in the worker's log, stop it (SIGTERM), and its WARNING lines (but the
    start-up's about the machine's Redis keeping no append-only file)."""

    async def told() -> bool:
        return line in proc.output()

    await eventually(told, timeout=30, what=f"{line!r} in the log")
    proc.signal(signal.SIGTERM)
    assert await proc.wait(30) == 0
    return [ln for ln in proc.output().splitlines() if " WARNING " in ln and NO_AOF not in ln]


def via(url: str, port: int) -> str:
    return make_url(url).set(host="127.0.0.1", port=port).render_as_string(hide_password=False)


async def test_a_worker_on_an_unmigrated_database_exits_with_one_line(
    queue_name: str, tmp_path: Path
) -> None:
    name = "cmtest_" + uuid.uuid4().hex[:10]
    await _admin(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    try:
        proc = WorkerProcess(
            worker_env(f"{base}/{name}", REDIS_URL, queue_name), tmp_path / "w.log"
        )
        await proc.start()
        assert await proc.wait(60) == 2
        lines = [ln for ln in proc.output().splitlines() if ln.strip()]
        assert lines == ["the database is not at the latest schema: run `codemojex migrate`"]
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_readyz_follows_postgres_and_an_outage_is_two_lines(
    ops_database_url: str, queue_name: str, tmp_path: Path
) -> None:
    pg = make_url(ops_database_url)
    proxy = TcpProxy(free_port(), pg.host or "127.0.0.1", pg.port or 5432)
    await proxy.start()
    port = free_port()
    env = worker_env(
        via(ops_database_url, proxy.port), REDIS_URL, queue_name, CODEMOJEX_METRICS_PORT=str(port)
    )
    proc = WorkerProcess(env, tmp_path / "worker.log")
    await proc.start()
    try:

        async def ready_is(code: int) -> bool:
            try:
                return (await status(port, "/readyz"))[0] == code
            except OSError:
                return False

        await eventually(lambda: ready_is(200), timeout=60, what="ready")
        await proxy.stop()
        await eventually(lambda: ready_is(503), timeout=15, what="unready without Postgres")
        code, body = await status(port, "/readyz")
        assert code == 503
        assert body["ready"] is False and "postgres" in body["problems"]  # type: ignore[operator]
        assert "redis" not in body["problems"]  # type: ignore[operator]
        assert (await status(port, "/healthz"))[0] == 200  # the process itself is fine
        # A guess arrives meanwhile: the worker needs Postgres now and fails (an idle worker
        # may touch no table for up to 30 s, so an outage it never needed would be no line).
        client = aioredis.Redis.from_url(REDIS_URL)
        job = GuessJob(round_id=1, message_id=1, emojis=("🍎", "🍌", "🍇", "🍒"))
        await Lanes(client, queue_name).enqueue(
            ids.mint(ids.ROOM), ids.mint(ids.PLAYER), job.encode()
        )
        await client.aclose()
        await asyncio.sleep(3)  # the score worker fails several times meanwhile
        await proxy.start()
        await eventually(lambda: ready_is(200), timeout=30, what="ready again")
        warnings = await stopped_after(proc, "postgres back after")
        # the guess names no round: refused once Postgres answers (expected, not the outage's)
        warnings = [ln for ln in warnings if "refused (unknown_round)" not in ln]
    finally:
        await proc.ensure_gone()
        await proxy.stop()
    assert len([ln for ln in warnings if "postgres unavailable" in ln]) == 1, warnings
    assert len([ln for ln in warnings if "postgres back after" in ln]) == 1, warnings
    assert len(warnings) == 2, warnings


async def test_a_redis_outage_is_two_lines_however_many_consumers_retry(
    ops_database_url: str, queue_name: str, tmp_path: Path
) -> None:
    """An outage was 608 WARNING lines in 20 s from one worker; now one at the start, one at
    the end (8 consumers, the sender and the maintenance all retry meanwhile)."""
    proxy = TcpProxy(free_port(), "127.0.0.1", make_url(REDIS_URL).port or 6379)
    await proxy.start()
    port = free_port()
    env = worker_env(
        ops_database_url,
        f"redis://127.0.0.1:{proxy.port}/0",
        queue_name,
        CODEMOJEX_METRICS_PORT=str(port),
    )
    proc = WorkerProcess(env, tmp_path / "worker.log")
    await proc.start()
    try:

        async def ready() -> bool:
            try:
                return (await status(port, "/readyz"))[0] == 200
            except OSError:
                return False

        await eventually(ready, timeout=60, what="ready")
        await proxy.stop()
        await asyncio.sleep(4)
        _, body = await status(port, "/readyz")
        assert "redis" in body["problems"]  # type: ignore[operator]
        await proxy.start()
        warnings = await stopped_after(proc, "redis back after")
    finally:
        await proc.ensure_gone()
        await proxy.stop()
    assert [("unavailable" in ln, "back after" in ln) for ln in warnings] == [
        (True, False),
        (False, True),
    ], warnings
