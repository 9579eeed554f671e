"""The runtime dependencies are what `codemojex bot|worker|migrate|lanes` need: those commands
import nothing from the demo extra (fakeredis, rich), nor tornado (PTB's webhook server, not
used) or limits (never used). A fresh clone's `make demo` and `make test` are checked by hand
(README); this keeps the split from creeping back."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.helpers.support import ROOT, checkout_env

NOT_AT_RUNTIME = ("fakeredis", "rich", "tornado", "limits")
PROCESSES = (
    "codemojex.cli",
    "codemojex.bot.main",
    "codemojex.worker.main",
    "codemojex.runtime",
    "codemojex.db.engine",
    "codemojex.lanes",
    "codemojex.posting.sender",
)


def test_the_processes_import_nothing_from_the_demo_extra() -> None:
    blocked = ", ".join(f"{name!r}: None" for name in NOT_AT_RUNTIME)
    imports = "; ".join(f"import {module}" for module in PROCESSES)
    code = f"import sys; sys.modules.update({{{blocked}}}); {imports}; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", code], env=checkout_env(), capture_output=True, timeout=60
    )
    assert done.stdout.strip() == b"ok", done.stderr.decode()[-2000:]


def test_the_runtime_dependencies_leave_the_demo_to_its_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {dep.split("[")[0].split(">")[0].split("<")[0] for dep in project["dependencies"]}
    assert runtime.isdisjoint(NOT_AT_RUNTIME)
    assert "aiohttp>=3.12.14" in project["dependencies"]
    demo = project["optional-dependencies"]["demo"]
    assert {dep.split("[")[0].split(">")[0] for dep in demo} == {"fakeredis", "rich"}
    assert "codemojex[demo]" in project["optional-dependencies"]["dev"]
    pinned = (ROOT / "constraints.txt").read_text()
    assert "\naiohttp==" in pinned and "\nemoji==" in pinned and "\ntornado==" not in pinned


def test_the_demo_without_its_extra_says_so_in_one_line() -> None:
    """A plain install (no demo extra) running `codemojex demo`: one line naming the extra,
    exit 2, no traceback. Here the extra's Redis stand-in is made unimportable in the
    process, as it is in a plain install."""
    code = "import sys; sys.modules['fakeredis'] = None; from codemojex.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "demo", "--seconds", "1"],
        env=checkout_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "pip install 'codemojex[demo]'" in line and "fakeredis" in line, line
