"""The soak's private processes, each started and stopped by PID: its own Redis (AOF,
fsync always), its own Postgres (initdb into a temp dir) and the `codemojex worker` fleet."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from glob import glob
from pathlib import Path

import redis.asyncio as aioredis
import regex
from redis.exceptions import RedisError

from bench.common import free_port


class RedisServer:
    """A private redis-server on a free loopback port, in its own directory."""

    def __init__(self, workdir: Path, *, aof: bool = True, extra: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.aof = aof
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        cmd = [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.workdir),
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.workdir / "redis.log"),
        ]
        if self.aof:
            cmd += ["--appendonly", "yes", "--appendfsync", "always"]
        return cmd + list(self.extra)

    async def start(self, timeout_s: float = 15.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # Popen returns at once; the readiness wait below is async.
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL)  # noqa: ASYNC220
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        client = aioredis.Redis.from_url(self.url)
        try:
            while True:
                try:
                    # PING answers LOADING while the AOF is replayed; wait for real service.
                    await client.get("soak:ready")
                    return
                except (RedisError, OSError):
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not come up on {self.port}") from None
                    await asyncio.sleep(0.05)
        finally:
            await client.aclose()

    def kill(self) -> None:
        """SIGKILL: what a crash looks like. With fsync always, acknowledged writes are on disk."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    async def shutdown(self) -> None:
        """A clean SHUTDOWN (the AOF is flushed and closed)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        client = aioredis.Redis.from_url(self.url)
        with contextlib.suppress(RedisError, OSError):
            await client.shutdown(nosave=False)
        with contextlib.suppress(Exception):
            await client.aclose()
        await asyncio.to_thread(self.proc.wait, 15)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def _pg_bindir() -> Path:
    found = sorted(glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("initdb not found (install postgresql)")
    return Path(initdb).parent


class PostgresServer:
    """A private Postgres cluster in a temp dir on a free loopback port (trust auth).

    Every pg_ctl call names this cluster's data directory, so the machine's own Postgres is
    never touched. As root the cluster is run as the `postgres` user (Postgres refuses root).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "pgdata"
        self.port = free_port()
        self.bindir = _pg_bindir()
        self._as: list[str] = []
        self._owner: tuple[int, int] | None = None
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
            self._owner = (user.pw_uid, user.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self._as, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.decode()[-2000:]}")

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        # The postgres user must reach its data directory through our temp dirs.
        for parent in (self.root.parent, self.root):
            os.chmod(parent, 0o755)
        self.data.mkdir()
        if self._owner is not None:
            os.chown(self.data, *self._owner)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        )

    def start(self) -> None:
        # fsync off: this cluster's durability is not under test (it is only ever stopped
        # cleanly, with -m fast); the queue's is, and Redis runs with fsync always.
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.data}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c max_connections=300"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.data / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        if not (self.data / "postmaster.pid").exists():
            return
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    @property
    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None


_AMBIGUOUS_LINE = regex.compile(
    rb"(\d+) outbox rows were being posted when their sender died \(([\d,]+)\)"
)


class WorkerFleet:
    """N `codemojex worker` processes; each can be SIGKILLed and restarted."""

    def __init__(self, env: dict[str, str], n: int, logdir: Path) -> None:
        self.env = env
        self.n = n
        self.logdir = logdir
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.offsets: dict[int, int] = {}
        self.kills = 0
        self.kill_times: list[float] = []  # time.monotonic(), the stand-in's clock too
        self.spawns = 0
        exe = Path(sys.executable).parent / "codemojex"
        self.cmd = [str(exe), "worker"] if exe.exists() else [sys.executable, "-m", "codemojex"]

    def spawn(self, slot: int) -> None:
        log_path = self.logdir / f"worker-{slot}.log"
        self.offsets[slot] = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as out:
            self.procs[slot] = subprocess.Popen(
                self.cmd,
                env=self.env,
                cwd=self.logdir,  # no stray .env is picked up from the repository
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.spawns += 1

    def start_all(self) -> None:
        for slot in range(self.n):
            self.spawn(slot)

    def ready(self) -> list[int]:
        """Alive slots whose process has started its consumer pool (its log says so)."""
        out = []
        for slot in self.alive():
            with open(self.logdir / f"worker-{slot}.log", "rb") as fh:
                fh.seek(self.offsets.get(slot, 0))
                if b"consumer pool running" in fh.read():
                    out.append(slot)
        return out

    def alive(self) -> list[int]:
        return [slot for slot, proc in self.procs.items() if proc.poll() is None]

    def kill(self, slot: int) -> None:
        proc = self.procs.get(slot)
        if proc is not None and proc.poll() is None:
            self.kill_times.append(time.monotonic())
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            self.kills += 1

    def crashed(self) -> list[int]:
        """Slots whose process exited by itself (not killed by us)."""
        return [
            slot
            for slot, proc in self.procs.items()
            if proc.poll() is not None and proc.returncode != -signal.SIGKILL
        ]

    def stop_all(self, timeout_s: float = 30.0) -> dict[int, int | None]:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        codes: dict[int, int | None] = {}
        for slot, proc in self.procs.items():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
            codes[slot] = proc.returncode
        return codes

    def recovered_ambiguous(self) -> list[int]:
        """Rows the workers' senders found with an intent marker and no posted marker (a
        sender died mid-post), from their log lines."""
        ids: list[int] = []
        for path in self.logdir.glob("worker-*.log"):
            for _n, listed in _AMBIGUOUS_LINE.findall(path.read_bytes()):
                ids += [int(i) for i in listed.split(b",")]
        return ids

    def error_lines(self) -> int:
        return len(self.error_examples(limit=None))

    def error_examples(self, limit: int | None = 5, context: int = 12) -> list[str]:
        """Each worker ERROR line with the lines that follow it (its traceback), so a report
        says what went wrong after the logs are gone."""
        out: list[str] = []
        for path in sorted(self.logdir.glob("worker-*.log")):
            with open(path, errors="replace") as fh:
                lines = fh.readlines()
            for i, line in enumerate(lines):
                if " ERROR " in line:
                    out.append(f"{path.name}: " + "".join(lines[i : i + context]).rstrip())
        return out if limit is None else out[:limit]
