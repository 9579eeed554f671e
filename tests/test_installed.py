"""The package as an operator installs it: the wheel built from the sdist (`python -m build`),
installed with the pinned versions into a fresh virtual environment (not the checkout, not
editable), run from a directory outside the checkout. `codemojex migrate` brings a new
Postgres database to the head of the migrations it carries, and a short `codemojex demo`
(Lua scripts, catalogs, migrations on SQLite, all from the install) exits 0 with the lanes'
invariants holding."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from alembic.script import ScriptDirectory

from codemojex.db.engine import alembic_config
from tests.conftest import PG_ADMIN_URL
from tests.support import ROOT

pytestmark = pytest.mark.slow


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _revisions(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        return [row[0] for row in await conn.fetch("SELECT version_num FROM alembic_version")]
    finally:
        await conn.close()


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """A new, empty Postgres database of this test's own (asyncpg's URL), dropped after."""
    name = "cminstall_" + uuid.uuid4().hex[:10]
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _run(argv: list[str | Path], *, cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _plain_env(**extra: str) -> dict[str, str]:
    """This environment less what points at the checkout or configures Codemojex."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CODEMOJEX_", "PYTHON", "VIRTUAL_ENV"))
    }
    return {**env, **extra}


def test_the_wheel_installed_elsewhere_migrates_and_plays(
    tmp_path: Path, fresh_database: str
) -> None:
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _plain_env()
    build: list[str | Path] = [sys.executable, "-m", "build", "--outdir", dist, ROOT]
    _run(build, cwd=tmp_path, env=env, timeout=300)
    (wheel,) = dist.glob("codemojex-*.whl")
    assert len(list(dist.glob("codemojex-*.tar.gz"))) == 1  # the wheel was built from it

    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path, env=env, timeout=120)
    pip: list[str | Path] = [venv / "bin" / "python", "-m", "pip", "install", "-q"]
    pip += ["-c", ROOT / "constraints.txt"]
    _run([*pip, f"{wheel}[demo]"], cwd=elsewhere, env=env, timeout=600)
    where = _run(
        [venv / "bin" / "python", "-c", "import codemojex; print(codemojex.__file__)"],
        cwd=elsewhere,
        env=env,
        timeout=60,
    )
    assert Path(where.strip()).is_relative_to(venv), where
    assert not Path(where.strip()).is_relative_to(ROOT)
    codemojex = venv / "bin" / "codemojex"

    url = fresh_database.replace("postgresql://", "postgresql+asyncpg://", 1)
    out = _run(
        [codemojex, "migrate"],
        cwd=elsewhere,
        env=_plain_env(CODEMOJEX_DATABASE_URL=url),
        timeout=120,
    )
    assert "database is at the latest revision" in out
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert asyncio.run(_revisions(fresh_database)) == heads

    out = _run([codemojex, "demo", "--seconds", "8"], cwd=elsewhere, env=env, timeout=180)
    summary = " ".join(out.split())
    assert "Lanes invariants after the run: all hold." in summary
    assert "Every guess taken was scored" in summary
