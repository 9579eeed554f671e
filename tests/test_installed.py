"""The package as an operator installs it: the wheel built from the sdist (`python -m build`),
installed with the pinned versions into a fresh virtual environment (not the checkout, not
editable), run from a directory outside the checkout. `codemojex migrate` brings a new
Postgres database to the head of the migrations it carries, and a short `codemojex demo`
(Lua scripts, catalogs, migrations on SQLite, all from the install) exits 0 with the lanes'
invariants holding."""

from __future__ import annotations

import asyncio
import os
import re
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
    """The README's deploy steps without Docker, continuation lines joined."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("Without: on a fresh Debian 12") :]
    start = section.index("```sh\n") + len("```sh\n")
    return section[start : section.index("\n```", start)].replace("\\\n", "").splitlines()


# The steps that change the machine itself: run by the operator on a fresh Debian 12, checked
# here for what they name (`test_the_readme_installs_the_user_and_units_it_names`).
MACHINE = (
    "apt-get ",
    "sed -i 's/^appendonly",
    "useradd ",
    "install -m 644 deploy/systemd",
    "systemctl ",
)


def test_the_readme_deploy_steps_run_as_written(tmp_path: Path, fresh_database: str) -> None:
    """Verbatim but for the machine's own steps (the packages, Redis's configuration, the
    user, the units), the two root paths (here under tmp_path), the role and database names
    (this test's own, dropped after) and `runuser -u postgres --`, which is this machine's
    admin URL: the role is created with its password, the env file filled in by the sed
    lines, and `codemojex migrate` reaches the database with what they wrote."""
    steps = _readme_steps()
    assert any(
        line.startswith("/opt/codemojex/.venv/bin/pip install -c constraints.txt .")
        for line in steps
    ), steps
    role = "cmreadme_" + uuid.uuid4().hex[:8]
    host = PG_ADMIN_URL.split("@", 1)[1].split("/", 1)[0].split(":")[0]
    script = ["TOKEN=123456:readme-test-token-of-the-bot"]
    for line in steps:
        if line.startswith(MACHINE):
            continue
        line = line.replace("/opt/codemojex", str(tmp_path / "opt"))
        line = line.replace("/etc/codemojex", str(tmp_path / "etc"))
        line = line.replace("runuser -u postgres -- psql", f"psql {PG_ADMIN_URL}")
        line = line.replace("runuser -u postgres -- createdb", f"createdb -h {host} -U postgres")
        line = line.replace("ROLE codemojex ", f"ROLE {role} ")
        line = line.replace("--owner codemojex codemojex", f"--owner {role} {role}")
        line = line.replace("://codemojex:", f"://{role}:").replace(
            ":5432/codemojex|", f":5432/{role}|"
        )
        script.append(line)
    checkout = _checkout_copy(tmp_path / "checkout")
    try:
        out = _run(["bash", "-euc", "\n".join(script)], cwd=checkout, env=_plain_env(), timeout=600)
        assert "database is at the latest revision" in out
        env = (tmp_path / "etc" / "codemojex.env").read_text()
        assert f"CODEMOJEX_DATABASE_URL=postgresql+asyncpg://{role}:" in env
        assert "CODEMOJEX_TOKEN=123456:readme-test-token-of-the-bot" in env
        assert re.search(r"^CODEMOJEX_OPS_TOKEN=[\w-]{32,}$", env, re.MULTILINE), env
        heads = ScriptDirectory.from_config(alembic_config()).get_heads()
        admin = PG_ADMIN_URL.rsplit("/", 1)[0]
        assert asyncio.run(_revisions(f"{admin}/{role}")) == heads
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{role}" WITH (FORCE)'))
        asyncio.run(_admin(f'DROP ROLE IF EXISTS "{role}"'))


def test_the_readme_installs_the_user_and_units_it_names() -> None:
    """The machine's steps: the packages, Redis with its append-only file, the user every
    unit runs as, every unit installed, and only units that exist enabled and started."""
    steps = _readme_steps()
    machine = [line for line in steps if line.startswith(MACHINE)]
    assert {"postgresql", "redis-server", "python3-venv"} <= set(machine[0].split())
    assert "appendonly yes" in machine[1] and "restart redis-server" in machine[1]
    user = machine[2].split()[-1]
    units = ROOT / "deploy" / "systemd"
    for unit in units.glob("*.service"):
        assert f"User={user}\n" in unit.read_text(), unit
    assert any(
        line.startswith("install -m 644 deploy/systemd/*.service /etc/systemd/system/")
        and "systemctl daemon-reload" in line
        for line in machine
    )
    (enable,) = [line for line in machine if line.startswith("systemctl enable --now ")]
    for name in enable.split()[3:]:
        template = re.sub(r"@[^.]*$", "@", name)
        assert (units / f"{template}.service").is_file(), name
    assert {"codemojex-bot", "codemojex-ops"} <= set(enable.split())
    assert any(name.startswith("codemojex-worker@") for name in enable.split())
    assert any(name.startswith("codemojex-sender@") for name in enable.split())
