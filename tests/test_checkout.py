"""The `codemojex` a test starts as a process is this checkout's, whatever else is importable:
here a decoy `codemojex` package first on PYTHONPATH, as another install would be."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.harness import WorkerProcess
from tests.helpers.support import ROOT, checkout_env, codemojex_command


def test_codemojex_processes_run_this_checkout(tmp_path: Path) -> None:
    decoy = tmp_path / "elsewhere" / "codemojex"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("")
    (decoy / "cli.py").write_text("import sys\nprint('decoy')\nsys.exit(3)\n")
    env = checkout_env({**os.environ, "PYTHONPATH": str(decoy.parent)})

    done = subprocess.run(
        codemojex_command("--help"), env=env, cwd=tmp_path, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert b"decoy" not in done.stdout and b"worker" in done.stdout

    # The harness's worker is the same command, with this checkout first on its path.
    worker = WorkerProcess({}, tmp_path / "worker.log")
    assert worker.argv == codemojex_command("worker")
    assert worker.env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    probe = [sys.executable, "-c", "import codemojex.cli as c; print(c.__file__)"]
    found = subprocess.run(probe, env=env, cwd=tmp_path, capture_output=True, timeout=60)
    assert Path(found.stdout.decode().strip()).resolve() == ROOT / "codemojex" / "cli.py"
