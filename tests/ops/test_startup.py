"""Real `codemojex` processes starting: probed from their first second, stopped by SIGTERM
while they wait, one line for a setting that cannot work, and an older version serving on a
database one expand-only step ahead of it (a newer version migrated first), where a step
that is not expand-only, or two steps, still refuse it.

The newer versions' migrations are written here, as a later release would ship them, after
the head of migrations/: Alembic applies them through migrations/env.py, which records each
step's `expand_only`."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from alembic import command
from alembic.script import ScriptDirectory

from codemojex.db import upgrade
from codemojex.db.engine import alembic_config
from tests.conftest import PG_ADMIN_URL, REDIS_URL, _admin
from tests.e2e.harness import WorkerProcess, eventually
from tests.helpers.support import free_port
from tests.ops.conftest import OPS_TOKEN
from tests.ops.test_health import worker_env

BASE_URL = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")


class Process(WorkerProcess):
    """`codemojex <command>` of the checkout under test."""

    def __init__(self, command: str, env: dict[str, str], log_path: Path) -> None:
        super().__init__(env, log_path)
        self.command = command


async def probe(port: int, path: str) -> tuple[int, dict[str, object]] | None:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http,
            http.get(f"http://127.0.0.1:{port}{path}") as answer,
        ):
            return answer.status, await answer.json()
    except (aiohttp.ClientError, TimeoutError):
        return None


def _said(output: str) -> list[str]:
    """What a process said but its log lines (those start with their time)."""
    return [ln for ln in output.splitlines() if ln.strip() and not re.match(r"\d{4}-\d\d-", ln)]


@pytest_asyncio.fixture
async def database() -> AsyncIterator[str]:
    """A new Postgres database of this test's own, at the head of migrations/."""
    name = "cmstart_" + uuid.uuid4().hex[:10]
    await _admin(f'CREATE DATABASE "{name}"')
    url = f"{BASE_URL}/{name}"
    try:
        await asyncio.to_thread(upgrade, url)
        yield url
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _env(command: str, database_url: str, queue: str, port: int) -> dict[str, str]:
    env = worker_env(database_url, REDIS_URL, queue, CODEMOJEX_METRICS_PORT=str(port))
    if command == "ops":
        env.update(CODEMOJEX_OPS_TOKEN=OPS_TOKEN, CODEMOJEX_OPS_PORT=str(free_port()))
    return env


@pytest.mark.parametrize("command", ["bot", "worker", "sender", "ops"])
async def test_a_process_waiting_for_postgres_is_probed_and_stops_on_sigterm(
    command: str, queue_name: str, tmp_path: Path
) -> None:
    """Postgres unreachable (a closed port): from the first second /healthz answers and
    /readyz says it waits for Postgres; SIGTERM ends the wait, exit 0, no traceback."""
    port = free_port()
    closed = f"{BASE_URL.rsplit('@', 1)[0]}@127.0.0.1:{free_port()}/nowhere"
    proc = Process(command, _env(command, closed, queue_name, port), tmp_path / "p.log")
    await proc.start()
    try:

        async def alive() -> bool:
            return await probe(port, "/healthz") == (200, {"status": "ok"})

        await eventually(alive, timeout=15, what="/healthz while Postgres is away")
        ready = await probe(port, "/readyz")
        assert ready is not None and ready[0] == 503, ready
        problems = ready[1]["problems"]
        assert isinstance(problems, dict)
        assert problems["postgres"].startswith("waiting for Postgres"), problems
        await asyncio.sleep(1)  # well inside the wait: a retry or two behind it
        proc.signal(signal.SIGTERM)
        assert await proc.wait(10) == 0, proc.output()
        assert "Traceback" not in proc.output()
    finally:
        await proc.ensure_gone()


async def test_a_bot_waiting_for_the_bot_api_is_probed_and_stops_on_sigterm(
    database: str, queue_name: str, tmp_path: Path
) -> None:
    """The Bot API unreachable at start-up (a closed port): waited for, /readyz naming it,
    no traceback; SIGTERM ends the wait, exit 0."""
    port = free_port()
    proc = Process("bot", _env("bot", database, queue_name, port), tmp_path / "b.log")
    await proc.start()
    try:

        async def waiting() -> bool:
            answer = await probe(port, "/readyz")
            return answer is not None and "telegram" in str(answer[1].get("problems"))

        await eventually(waiting, timeout=30, what="/readyz naming the Bot API")
        proc.signal(signal.SIGTERM)
        assert await proc.wait(10) == 0, proc.output()
        assert "Traceback" not in proc.output()
    finally:
        await proc.ensure_gone()


async def _one_line(command: str, env: dict[str, str], log: Path, secret: str) -> str:
    """`codemojex COMMAND` with a setting that cannot work: exit 2, one line, no secret."""
    proc = Process(command, env, log)
    await proc.start()
    try:
        assert await proc.wait(60) == 2
        lines = _said(proc.output())
        assert len(lines) == 1, lines
        assert secret not in proc.output()
        return lines[0]
    finally:
        await proc.ensure_gone()


@pytest.mark.parametrize("command", ["migrate", "worker"])
async def test_a_role_that_does_not_exist_is_one_line_naming_the_setting(
    command: str, queue_name: str, tmp_path: Path
) -> None:
    password = "s3cret-" + uuid.uuid4().hex
    url = f"postgresql+asyncpg://nosuchrole:{password}@127.0.0.1:5432/postgres"
    env = _env(command, url, queue_name, free_port())
    line = await _one_line(command, env, tmp_path / "p.log", password)
    assert "CODEMOJEX_DATABASE_URL" in line and 'role "nosuchrole" does not exist' in line


async def test_migrate_on_an_unreachable_postgres_is_one_line(
    queue_name: str, tmp_path: Path
) -> None:
    password = "s3cret-" + uuid.uuid4().hex
    url = f"postgresql+asyncpg://codemojex:{password}@127.0.0.1:{free_port()}/codemojex"
    env = _env("migrate", url, queue_name, free_port())
    line = await _one_line("migrate", env, tmp_path / "p.log", password)
    assert line.startswith("codemojex migrate: cannot reach Postgres at CODEMOJEX_DATABASE_URL")


async def test_a_redis_user_refused_is_one_line_naming_the_setting(
    database: str, queue_name: str, tmp_path: Path
) -> None:
    password = "s3cret-" + uuid.uuid4().hex
    env = _env("worker", database, queue_name, free_port())
    env["CODEMOJEX_REDIS_URL"] = REDIS_URL.replace("redis://", f"redis://nosuchuser:{password}@")
    line = await _one_line("worker", env, tmp_path / "p.log", password)
    assert line.startswith("CODEMOJEX_REDIS_URL (redis://nosuchuser:***@"), line


def _newer_step(versions: Path, down: str, *, expand_only: bool) -> str:
    """A migration of a later release after `down`: a nullable column, marked as its author
    would (expand-only, or not)."""
    revision = f"9{len(list(versions.glob('*.py'))):03d}_later_{uuid.uuid4().hex[:6]}"
    column = f"later_{revision[-6:]}"
    (versions / f"{revision}.py").write_text(
        f'''"""A later release's step."""
import sqlalchemy as sa
from alembic import op

revision = {revision!r}
down_revision = {down!r}
branch_labels = None
depends_on = None
expand_only = {expand_only!r}


def upgrade() -> None:
    op.add_column("rooms", sa.Column({column!r}, sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("rooms", {column!r})
'''
    )
    return revision


def _migrate_newer(url: str, versions: Path, revision: str) -> None:
    """`codemojex migrate` of the newer release: our migrations and its own."""
    config = alembic_config(url)
    mine = Path(config.get_main_option("script_location") or "") / "versions"
    config.set_main_option("version_locations", f"{mine}{os.pathsep}{versions}")
    command.upgrade(config, revision)


async def _serves(database: str, queue: str, tmp_path: Path) -> tuple[int, dict[str, object]]:
    """This version's worker on `database`: /readyz's answer once it serves, then stopped."""
    port = free_port()
    proc = Process("worker", _env("worker", database, queue, port), tmp_path / "w.log")
    await proc.start()
    try:

        async def served() -> bool:
            answer = await probe(port, "/readyz")
            return answer is not None and "start-up" not in str(answer[1].get("problems"))

        await eventually(served, timeout=30, what="/readyz after start-up")
        answer = await probe(port, "/readyz")
        assert answer is not None
        proc.signal(signal.SIGTERM)
        assert await proc.wait(30) == 0
        assert "one expand-only step ahead" in proc.output()
        return answer
    finally:
        await proc.ensure_gone()


async def _step_ahead(database: str, tmp_path: Path, *, expand_only: bool) -> str:
    """A later release's step, after the newest this database has (ours, or a later one's),
    migrated: its revision."""
    versions = tmp_path / "later"
    versions.mkdir(exist_ok=True)
    written = sorted(versions.glob("9*.py"))
    down = (
        written[-1].stem
        if written
        else ScriptDirectory.from_config(alembic_config()).get_current_head()
    )
    assert down is not None
    step = _newer_step(versions, down, expand_only=expand_only)
    await asyncio.to_thread(_migrate_newer, database, versions, step)
    return step


async def _refused(database: str, queue: str, tmp_path: Path) -> list[str]:
    """This version's worker on `database`: exits 2; what it said."""
    proc = Process("worker", _env("worker", database, queue, free_port()), tmp_path / "r.log")
    await proc.start()
    try:
        assert await proc.wait(60) == 2
        return _said(proc.output())
    finally:
        await proc.ensure_gone()


async def test_an_older_process_serves_one_expand_only_step_ahead_and_refuses_more(
    database: str, queue_name: str, tmp_path: Path
) -> None:
    first = await _step_ahead(database, tmp_path, expand_only=True)
    status, body = await _serves(database, queue_name, tmp_path)
    assert status == 200, body
    assert body["ready"] is True
    warnings = body["warnings"]
    assert isinstance(warnings, dict) and first in warnings["postgres"], body

    # Two steps ahead: this version no longer knows what it would run on.
    second = await _step_ahead(database, tmp_path, expand_only=True)
    assert await _refused(database, queue_name, tmp_path) == [
        f"the database's schema ({second}) is newer than this version of Codemojex knows: "
        "upgrade Codemojex"
    ]


async def test_an_older_process_refuses_a_step_ahead_that_is_not_expand_only(
    database: str, queue_name: str, tmp_path: Path
) -> None:
    step = await _step_ahead(database, tmp_path, expand_only=False)
    assert await _refused(database, queue_name, tmp_path) == [
        f"the database's schema ({step}) is newer than this version of Codemojex knows: "
        "upgrade Codemojex"
    ]


def test_every_migration_says_whether_it_is_expand_only() -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    for script in scripts.walk_revisions():
        assert isinstance(getattr(script.module, "expand_only", None), bool), script.revision
