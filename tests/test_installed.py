"""The package as an operator installs it: the wheel built from the sdist (`python -m build`),
installed with the pinned versions into a fresh virtual environment (not the checkout, not
editable), run from a directory outside the checkout. `codemojex migrate` brings a new
Postgres database to the head of the migrations it carries, and a short `codemojex demo`
(Lua scripts, catalogs, migrations on SQLite, all from the install) exits 0 with the lanes'
invariants holding."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from alembic.script import ScriptDirectory

from codemojex.db.engine import alembic_config
from tests.conftest import PG_ADMIN_URL
from tests.helpers.support import ROOT

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


def _checkout_copy(dest: Path) -> Path:
    """This checkout's files as a fresh clone has them, with what is changed and not yet
    committed (git's tracked and untracked files, not its ignored ones): building or
    installing from the copy leaves no build/ or egg-info behind in the checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


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
    checkout = _checkout_copy(tmp_path / "checkout")
    build: list[str | Path] = [sys.executable, "-m", "build", "--outdir", dist, checkout]
    _run(build, cwd=tmp_path, env=env, timeout=300)
    (wheel,) = dist.glob("codemojex-*.whl")
    (sdist,) = dist.glob("codemojex-*.tar.gz")  # the wheel was built from it
    # The licence pyproject names, in both.
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(name).decode() == licence
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{sdist.name.removesuffix('.tar.gz')}/LICENSE")
        assert member is not None and member.read().decode() == licence

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


def _readme_steps() -> list[str]:
    """The README's deploy steps without Docker, up to and including `codemojex migrate`."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("Without: from a checkout") :]
    start = section.index("```sh\n") + len("```sh\n")
    lines = section[start : section.index("\n```", start)].splitlines()
    migrate = next(n for n, line in enumerate(lines) if line.startswith("codemojex migrate"))
    return lines[: migrate + 1]


def test_the_readme_deploy_steps_run_as_written(tmp_path: Path, fresh_database: str) -> None:
    """Verbatim, but for the two root paths (here under tmp_path) and the env file filled in
    with this test's database, as its reader does."""
    steps = _readme_steps()
    assert any(line.startswith("pip install -c constraints.txt .") for line in steps), steps
    url = fresh_database.replace("postgresql://", "postgresql+asyncpg://", 1)
    script: list[str] = []
    for line in steps:
        line = line.replace("/opt/codemojex", str(tmp_path / "opt"))
        script.append(line.replace("/etc/codemojex", str(tmp_path / "etc")))
        if line.startswith("install -D"):  # "then fill it in"
            script.append(
                f"printf 'CODEMOJEX_DATABASE_URL={url}\\n' >> {tmp_path / 'etc' / 'codemojex.env'}"
            )
    checkout = _checkout_copy(tmp_path / "checkout")
    out = _run(["bash", "-euc", "\n".join(script)], cwd=checkout, env=_plain_env(), timeout=600)
    assert "database is at the latest revision" in out
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert asyncio.run(_revisions(fresh_database)) == heads
