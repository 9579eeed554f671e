"""A `codemojex <command>` child process of this checkout, for the benchmarks and the tests
that start, signal and restart real bot and worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]


class CodemojexProcess:
    """`codemojex <command>` run by this interpreter from the checkout's root (never an entry
    point that may belong to another install), with `env`; its output goes to `log_path`."""

    def __init__(self, command: str, env: dict[str, str], log_path: Path) -> None:
        self.command = command
        self.env = env
        self.log_path = log_path
        # The checkout run and its interpreter: this one, or a baseline's (bench.frontdoor).
        self.root = ROOT
        self.python = sys.executable
        self.proc: asyncio.subprocess.Process | None = None
        self._log: IO[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        return [self.python, "-m", "codemojex.cli", self.command]

    async def start(self) -> None:
        self._log = self.log_path.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            env=self.env,
            cwd=str(self.root),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log,
            stderr=asyncio.subprocess.STDOUT,
        )

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def wait(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        rc = await asyncio.wait_for(self.proc.wait(), timeout_s)
        self._close_log()
        return rc

    async def ensure_gone(self) -> None:
        """Whatever happened, no process of ours outlives its caller."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.wait()
        self._close_log()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
