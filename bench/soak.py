"""Soak: thousands of guesses through the real bot and worker pool while the harness breaks things.

What runs (all private to the run, all on loopback, all started and stopped by PID):

* its own Redis (`redis-server --appendonly yes --appendfsync always`, a temp dir);
* its own Postgres (initdb into a temp dir, pg_ctl on a free port, trust auth), migrated
  with `codemojex.db.upgrade`; the machine's shared Postgres is never touched;
* the Bot API stand-in and the real bot (`build_application` + `running`) in this process:
  simulated players type `/g …` and plain emoji guesses with `send_text`, so every guess goes
  through python-telegram-bot, the bot's validation and `lanes.enqueue`;
* N `codemojex worker` subprocesses on a short lease.

Faults: worker processes are SIGKILLed at random moments and restarted; Redis is stopped with
a clean SHUTDOWN and later with SIGKILL and restarted (AOF with fsync always keeps the queue);
Postgres is stopped (pg_ctl -m fast) for `pg_outage_s` seconds. A sampler reads, atomically,
`gactive`, `glimit` and the room of every leased job all along, and records per room the most
jobs seen in flight against the ceiling, and any sample where `gactive` differed from the real
number of leases.

Afterwards it counts: accepted guesses (job ids `lanes.enqueue` returned to the bot), which of
them are in Postgres (lost = accepted - stored), rows beyond one per guess (leaderboard counts
and result/late outbox rows per guess are compared too), rounds with more than one winner,
outbox rows posted twice or never, `lanes.check()`, drift and over-ceiling observations.

Every outbox row posted twice must be explained by a worker killed in the middle of posting
it: a SIGKILL within `KILL_WINDOW_S` of the first copy (the stand-in notes when it accepted
each post, the harness when it sent each SIGKILL), and the row found by the next sender with
an intent marker and no posted marker (its log line names the rows). A sender killed between
Telegram accepting a post and its "posted" marker leaves rows the next sender posts again
(`ambiguous="repost"`, the default) or marks sent without posting (`--ambiguous
assume_sent`). A double post without both is a fault, counted in
`outbox_posted_twice_unexplained`, and is in the headline. `posts_near_a_kill_share` is the
share of all posts that have a kill that near: how often the time test alone would pass.

    .venv/bin/python -m bench.soak --guesses 20000 --rooms 200 --json bench/results/soak.json

The CI-sized run is tests/reliability/test_soak.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import pwd
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from glob import glob
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
import regex
from redis.exceptions import RedisError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Update
from telegram.ext import TypeHandler

from bench.common import free_port
from codemojex.bot import CodemojexContext, build_application, running
from codemojex.db import (
    Guess,
    LeaderboardEntry,
    Outbox,
    Room,
    Round,
    make_engine,
    make_sessionmaker,
    store,
    upgrade,
)
from codemojex.game import texts
from codemojex.jobs import GuessJob
from codemojex.lanes import Admission, Admitted, LaneFull, Lanes
from codemojex.limits import GUESS_MAX_ATTEMPTS
from codemojex.locale import EN
from codemojex.posting.fold import STANDALONE_KINDS
from codemojex.redistypes import AnyRedis
from codemojex.runtime import redis_client
from codemojex.settings import Settings
from codemojex.standin import StandIn

log = logging.getLogger("bench.soak")

TOKEN = "424242:SOAKTOKEN"
ADMIN_ID = 7
BARRIER_ID = 8
FIRST_PLAYER_ID = 100_000
FIRST_CHAT_ID = -1_009_000_000_000
QUEUE = "soak"
# How near a SIGKILL must be to the first copy of a double post to explain it. Either side: a
# request the killed worker had already written is accepted by the stand-in (which shares
# the harness's event loop) only when the loop gets to it, possibly just after the kill.
KILL_WINDOW_S = 1.0

# Read-only observation: the leases, the room of each, gactive and glimit, in one atomic read.
_SAMPLE = """
local p = KEYS[1]
local active = redis.call('ZRANGE', p .. 'active', 0, -1)
local rooms = {}
for i, id in ipairs(active) do
  rooms[i] = redis.call('HGET', p .. 'job:' .. id, 'room') or ''
end
return {redis.call('HGETALL', p .. 'gactive'), redis.call('HGETALL', p .. 'glimit'), active, rooms}
"""


# --- processes -------------------------------------------------------------------------------


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


# --- the run ---------------------------------------------------------------------------------


@dataclass
class SoakPlan:
    # "bot": players type into the stand-in and the real bot validates and enqueues;
    # "lanes": the harness creates rooms, players and rounds with the store and enqueues
    # GuessJob payloads with lanes.enqueue itself (the same call the bot makes), which is
    # what makes a 20,000-guess run affordable on a small machine.
    via: str = "bot"
    guesses: int = 20_000  # accepted guesses to reach
    rooms: int = 200  # including the flooding room
    players: int = 4  # per quiet room
    flood_players: int = 12
    flood_share: float = 0.3  # share of the guesses typed in the flooding room
    workers: int = 3
    concurrency: int = 8
    lease_ms: int = 2_000
    max_depth: int = 20
    ceilings: tuple[int, ...] = (1, 2, 2, 3)  # cycled over the quiet rooms
    flood_ceiling: int = 2
    win_rate: float = 1 / 40  # chance a typed guess is the secret (sent by two players at once)
    kill_every_s: tuple[float, float] = (4.0, 12.0)
    restart_after_s: tuple[float, float] = (0.3, 2.0)
    redis_down_s: float = 2.0
    pg_outage_s: float = 10.0
    faults: bool = True
    max_backlog: int = 200  # updates typed but not yet handled by the bot
    max_pending: int = 600  # via lanes: jobs waiting in the lanes before the harness waits
    feed_timeout_s: float = 1_500.0
    drain_timeout_s: float = 120.0  # the drain may go this long without progress
    seed: int = 7
    keep_dir: bool = False
    ambiguous: str = "repost"  # the workers' CODEMOJEX_SENDER_AMBIGUOUS


@dataclass
class Observed:
    samples: int = 0
    sample_errors: int = 0
    drift_samples: int = 0
    over_ceiling_samples: int = 0
    max_in_flight: dict[str, int] = field(default_factory=dict)
    ceiling_seen: dict[str, int] = field(default_factory=dict)
    drift_examples: list[str] = field(default_factory=list)
    over_examples: list[str] = field(default_factory=list)


class RecordingLanes(Lanes):
    """The bot's lanes, noting each job id `enqueue` returned or `admit` took (the bot's
    batched intake): the guesses it accepted."""

    def __init__(self, client: aioredis.Redis, queue: str) -> None:
        super().__init__(client, queue)
        self.accepted: dict[str, str] = {}

    async def enqueue(
        self,
        room: str,
        lane: str,
        payload: bytes,
        *,
        max_attempts: int = 5,
        max_depth: int | None = None,
        dedupe_key: str | None = None,
        job_id: str | None = None,
    ) -> str:
        jid = await super().enqueue(
            room,
            lane,
            payload,
            max_attempts=max_attempts,
            max_depth=max_depth,
            dedupe_key=dedupe_key,
            job_id=job_id,
        )
        self.accepted[jid] = room
        return jid

    async def admit(self, admissions: Sequence[Admission]) -> list[Admitted]:
        answers = await super().admit(admissions)
        for admission, answer in zip(admissions, answers, strict=True):
            if answer.status == "enqueued" and answer.job_id is not None:
                self.accepted[answer.job_id] = admission.room
        return answers


def _pairs(flat: list[bytes]) -> dict[str, int]:
    return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}


class Sampler:
    def __init__(self, redis: AnyRedis, queue: str, period_s: float = 0.05) -> None:
        self.redis = redis
        self.prefix = f"emq:{{{queue}}}:"
        self.period_s = period_s
        self.obs = Observed()
        self._script = redis.register_script(_SAMPLE)

    async def sample(self) -> None:
        gactive_raw, glimit_raw, _active, rooms = await self._script(keys=[self.prefix])
        gactive, glimit = _pairs(gactive_raw), _pairs(glimit_raw)
        counts = Counter(r.decode() for r in rooms)
        obs = self.obs
        obs.samples += 1
        drift = False
        for room in set(gactive) | set(counts):
            real, booked = counts.get(room, 0), gactive.get(room, 0)
            if real != booked:
                drift = True
                if len(obs.drift_examples) < 10:
                    obs.drift_examples.append(f"{room}: gactive {booked}, leases {real}")
            limit = glimit.get(room)
            if real > obs.max_in_flight.get(room, 0):
                obs.max_in_flight[room] = real
            if limit is not None:
                obs.ceiling_seen[room] = limit
                if real > limit or booked > limit:
                    obs.over_ceiling_samples += 1
                    if len(obs.over_examples) < 10:
                        obs.over_examples.append(f"{room}: {real} leases, ceiling {limit}")
        obs.drift_samples += drift

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sample()
            except (RedisError, OSError):
                self.obs.sample_errors += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.period_s)


@dataclass
class RoomSim:
    chat_id: int
    players: list[int]
    ceiling: int
    flood: bool = False
    round_id: int | None = None
    palette: tuple[str, ...] = ()
    length: int = 4
    secret: tuple[str, ...] = ()
    newgame_at: float = 0.0
    room_id: str = ""
    player_ids: dict[int, tuple[str, str]] = field(default_factory=dict)  # user -> (PLR, name)


@dataclass
class FaultLog:
    events: list[str] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)

    def note(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:7.1f}s {text}"
        self.events.append(line)
        log.info("%s", line)


_GRAPHEME = regex.compile(r"\X")


class Soak:
    def __init__(self, plan: SoakPlan, workdir: Path, say: Callable[[str], None]) -> None:
        self.plan = plan
        self.workdir = workdir
        self.say = say
        self.rng = random.Random(plan.seed)
        self.faults = FaultLog()
        self.redis_server = RedisServer(workdir / "redis")
        self.pg = PostgresServer(workdir / "pg")
        self.sims: list[RoomSim] = []
        self.typed = 0
        self.seen = 0
        self.bot_errors: list[str] = []
        self.feeding_done = asyncio.Event()
        self.faults_done = asyncio.Event()
        self.refused: Counter[str] = Counter()

    # -- world ----------------------------------------------------------------------------

    def build_world(self, standin: StandIn) -> None:
        plan = self.plan
        standin.add_user(ADMIN_ID, "Admin")
        standin.add_user(BARRIER_ID, "Barrier")
        user = FIRST_PLAYER_ID
        for i in range(plan.rooms):
            flood = i == 0
            n = plan.flood_players if flood else plan.players
            players = list(range(user, user + n))
            user += n
            for uid in players:
                standin.add_user(uid, f"P{uid}")
            chat_id = FIRST_CHAT_ID - i
            standin.add_group(chat_id, f"soak room {i}", admins=[ADMIN_ID], members=players)
            ceiling = plan.flood_ceiling if flood else plan.ceilings[i % len(plan.ceilings)]
            self.sims.append(RoomSim(chat_id, players, ceiling, flood))

    async def backlog_below(self, limit: int) -> None:
        while self.typed - self.seen > limit:  # noqa: ASYNC110 - polls a counter of the bot's
            await asyncio.sleep(0.005)

    def type_text(self, standin: StandIn, chat_id: int, user_id: int, text: str) -> None:
        standin.send_text(chat_id, user_id, text)
        self.typed += 1

    async def settle(self, standin: StandIn, timeout_s: float = 120.0) -> None:
        """Wait until the bot handled everything typed so far (it answers a later /help).

        An answer that cannot get a posting slot within a few seconds is dropped (the bot's
        answers queue for the bot's 30 posts a second): after the 200 rooms' /limit of the
        set-up, all answered at once, the barrier's can be one of them. So the /help is sent
        again until one is answered."""
        deadline = time.monotonic() + timeout_s
        while True:
            before = len(standin.sent_messages(BARRIER_ID))
            standin.send_private(BARRIER_ID, "/help")
            self.typed += 1
            wait_s = min(15.0, max(0.1, deadline - time.monotonic()))
            try:
                await standin.wait_for_sent_count(before + 1, chat_id=BARRIER_ID, timeout=wait_s)
                return
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise

    async def refresh_rounds(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        async with sessionmaker() as session:
            rows = (
                await session.execute(
                    select(Round, Room.chat_id)
                    .join(Room, Room.id == Round.room_id)
                    .where(Round.ended_at.is_(None))
                )
            ).all()
        open_by_chat = {int(chat_id): rnd for rnd, chat_id in rows}
        for sim in self.sims:
            rnd = open_by_chat.get(sim.chat_id)
            if rnd is None:
                sim.round_id = None
                continue
            if sim.round_id != rnd.id:
                sim.round_id = rnd.id
                sim.palette = tuple(_GRAPHEME.findall(rnd.palette))
                sim.length = rnd.length
                sim.secret = tuple(_GRAPHEME.findall(rnd.secret))

    async def feed(
        self,
        standin: StandIn,
        lanes: RecordingLanes,
        sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        plan, rng = self.plan, self.rng
        quiet = [s for s in self.sims if not s.flood]
        flood = [s for s in self.sims if s.flood]
        last_refresh = 0.0
        last_report = time.monotonic()
        deadline = time.monotonic() + plan.feed_timeout_s
        while self.feeding(len(lanes.accepted)) and time.monotonic() < deadline:
            now = time.monotonic()
            if now - last_refresh > 0.3:
                last_refresh = now
                try:
                    await self.refresh_rounds(sessionmaker)
                except Exception as exc:  # Postgres is down on purpose: keep the last view
                    log.debug("refresh failed: %s", type(exc).__name__)
                for sim in self.sims:
                    if sim.round_id is None and now - sim.newgame_at > 3.0:
                        sim.newgame_at = now
                        self.type_text(standin, sim.chat_id, rng.choice(sim.players), "/newgame")
            if now - last_report > 5:
                last_report = now
                self.say(
                    f"  {len(lanes.accepted)}/{plan.guesses} accepted, {self.typed} typed, "
                    f"{self.seen} seen, workers alive {len(self.fleet.alive())}, "
                    f"open rounds {sum(1 for s in self.sims if s.round_id)}"
                )
            for _ in range(20):
                pool = flood if flood and rng.random() < plan.flood_share else quiet
                sim = rng.choice(pool)
                if sim.round_id is None or not sim.palette:
                    continue
                if rng.random() < plan.win_rate:
                    # Two players send the secret at once: at most one of them may win.
                    code = "".join(sim.secret)
                    for uid in rng.sample(sim.players, min(2, len(sim.players))):
                        self.type_text(standin, sim.chat_id, uid, f"/g {code}")
                    continue
                code = "".join(rng.choice(sim.palette) for _ in range(sim.length))
                text = f"/g {code}" if rng.random() < 0.8 else code
                self.type_text(standin, sim.chat_id, rng.choice(sim.players), text)
            await self.backlog_below(plan.max_backlog)
        self.feeding_done.set()

    def feeding(self, accepted: int) -> bool:
        """Until the plan's guesses are accepted and, with faults, every fault was injected
        while they were typed (a bot taking guesses faster than the faults come would
        otherwise leave some out)."""
        if accepted < self.plan.guesses:
            return True
        return self.plan.faults and not (self.faults_done.is_set() and self.fleet.kills > 0)

    async def setup_direct(
        self, lanes: Lanes, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> None:
        """Rooms with their ceilings, players and first rounds, written with the store."""
        for sim in self.sims:
            async with sessionmaker() as session:
                room = await store.ensure_room(
                    session,
                    sim.chat_id,
                    f"soak {sim.chat_id}",
                    default_ceiling=sim.ceiling,
                    round_timeout_s=3600,
                )
                sim.room_id = room.id
                for uid in sim.players:
                    player = await store.ensure_player(session, room.id, uid, f"P{uid}")
                    sim.player_ids[uid] = (player.id, player.display_name)
                await store.start_round(session, room.id, self.rng)
            await lanes.limit(room.id, sim.ceiling)

    async def enqueue_direct(
        self, standin: StandIn, lanes: Lanes, sim: RoomSim, uid: int, code: tuple[str, ...]
    ) -> None:
        assert sim.round_id is not None
        text = "/g " + "".join(code)
        message_id = standin.send_text(sim.chat_id, uid, text)  # the message a result replies to
        self.typed += 1
        lane, _name = sim.player_ids[uid]
        job = GuessJob(round_id=sim.round_id, message_id=message_id, emojis=code)
        try:
            await lanes.enqueue(
                sim.room_id,
                lane,
                job.encode(),
                max_attempts=GUESS_MAX_ATTEMPTS,  # as the bot enqueues
                max_depth=self.plan.max_depth,
                dedupe_key=f"{sim.chat_id}:{message_id}",
            )
        except LaneFull:
            self.refused["lane_full"] += 1
        except (RedisError, OSError):
            self.refused["redis_down"] += 1

    async def feed_direct(
        self,
        standin: StandIn,
        lanes: RecordingLanes,
        sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        plan, rng = self.plan, self.rng
        quiet = [s for s in self.sims if not s.flood]
        flood = [s for s in self.sims if s.flood]
        last_refresh = last_report = 0.0
        pending = 0
        deadline = time.monotonic() + plan.feed_timeout_s
        while self.feeding(len(lanes.accepted)) and time.monotonic() < deadline:
            now = time.monotonic()
            if now - last_refresh > 0.3:
                last_refresh = now
                try:
                    await self.refresh_rounds(sessionmaker)
                    for sim in self.sims:
                        if sim.round_id is None:
                            async with sessionmaker() as session:
                                with contextlib.suppress(store.RoundAlreadyOpen):
                                    await store.start_round(session, sim.room_id, rng)
                    await self.refresh_rounds(sessionmaker)
                except Exception as exc:  # Postgres is down on purpose: keep the last view
                    log.debug("refresh failed: %s", type(exc).__name__)
                try:
                    snap = await lanes.snapshot()
                    pending = sum(int(r["pending"]) for r in snap["rooms"].values())
                except (RedisError, OSError):
                    pending = plan.max_pending
            if now - last_report > 10:
                last_report = now
                extra = ""
                with contextlib.suppress(RedisError, OSError):
                    snap = await lanes.snapshot()
                    extra = (
                        f", active {snap['active']}, delayed {snap['delayed']}, "
                        f"ring {len(snap['ring'])}, check {(await lanes.check())[:3]}"
                    )
                self.say(
                    f"  {len(lanes.accepted)}/{plan.guesses} accepted, {pending} pending, "
                    f"workers ready {len(self.fleet.ready())}/{plan.workers}, "
                    f"refused {dict(self.refused)}{extra}"
                )
            if pending >= plan.max_pending:
                await asyncio.sleep(0.05)
                last_refresh = 0.0 if now - last_refresh > 0.1 else last_refresh
                continue
            for _ in range(20):
                pool = flood if flood and rng.random() < plan.flood_share else quiet
                sim = rng.choice(pool)
                if sim.round_id is None or not sim.palette:
                    continue
                if rng.random() < plan.win_rate:
                    for uid in rng.sample(sim.players, min(2, len(sim.players))):
                        await self.enqueue_direct(standin, lanes, sim, uid, sim.secret)
                    continue
                code = tuple(rng.choice(sim.palette) for _ in range(sim.length))
                await self.enqueue_direct(standin, lanes, sim, rng.choice(sim.players), code)
                pending += 1
            await asyncio.sleep(0)
        self.feeding_done.set()

    # -- faults ---------------------------------------------------------------------------

    async def worker_killer(self) -> None:
        plan, rng = self.plan, self.rng
        restarts: set[asyncio.Task[None]] = set()

        async def restart(slot: int, after: float) -> None:
            await asyncio.sleep(after)
            self.fleet.spawn(slot)

        while not self.feeding_done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.feeding_done.wait(), rng.uniform(*plan.kill_every_s))
            if self.feeding_done.is_set():
                break
            # Only a worker that is up and consuming: on a loaded machine a Python process can
            # take many seconds to start, and killing it before that proves nothing.
            ready = self.fleet.ready()
            if not ready:
                continue
            slot = rng.choice(ready)
            self.fleet.kill(slot)
            after = rng.uniform(*plan.restart_after_s)
            self.faults.note(f"worker {slot} SIGKILL, restart in {after:.1f}s")
            task = asyncio.create_task(restart(slot, after))
            restarts.add(task)
            task.add_done_callback(restarts.discard)
        await asyncio.gather(*restarts)

    async def at_progress(self, lanes: RecordingLanes, fraction: float) -> bool:
        """Wait until `fraction` of the guesses were accepted, or of the feeding time is
        spent (a run cut short by its time cap still gets every fault)."""
        until = time.monotonic() + fraction * self.plan.feed_timeout_s
        while len(lanes.accepted) < fraction * self.plan.guesses and time.monotonic() < until:
            if self.feeding_done.is_set():
                return False
            await asyncio.sleep(0.1)
        return True

    async def infrastructure_faults(self, lanes: RecordingLanes) -> None:
        plan = self.plan
        if await self.at_progress(lanes, 0.2):
            self.faults.note("redis SHUTDOWN (clean)")
            await self.redis_server.shutdown()
            await asyncio.sleep(plan.redis_down_s)
            await self.redis_server.start()
            self.faults.note("redis back")
        if await self.at_progress(lanes, 0.45):
            self.faults.note(f"postgres stop -m fast for {plan.pg_outage_s:.0f}s")
            await asyncio.to_thread(self.pg.stop, "fast")
            await asyncio.sleep(plan.pg_outage_s)
            await asyncio.to_thread(self.pg.start)
            self.faults.note("postgres back")
        if await self.at_progress(lanes, 0.7):
            self.faults.note("redis SIGKILL")
            self.redis_server.kill()
            await asyncio.sleep(plan.redis_down_s)
            await self.redis_server.start()
            self.faults.note("redis back")
        self.faults_done.set()

    # -- drain ----------------------------------------------------------------------------

    async def left(
        self, lanes: Lanes, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> int | None:
        """Guesses queued, in flight or delayed, plus outbox rows unsent (None: unknown)."""
        try:
            snap = await lanes.snapshot()
            queued = sum(int(r["pending"]) for r in snap["rooms"].values())
            async with sessionmaker() as session:
                unsent = (
                    await session.execute(
                        select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
                    )
                ).scalar_one()
            return queued + int(snap["active"]) + int(snap["delayed"]) + int(unsent)
        except Exception:
            return None

    async def drain(self, lanes: Lanes, sessionmaker: async_sessionmaker[AsyncSession]) -> bool:
        """Wait until nothing is left, for as long as what is left keeps shrinking: a flooded
        room's backlog of results goes out at a group's 20 messages a minute, minutes after
        the feed. False when `drain_timeout_s` passed with no progress."""
        fewest: int | None = None
        deadline = time.monotonic() + self.plan.drain_timeout_s
        while time.monotonic() < deadline:
            left = await self.left(lanes, sessionmaker)
            if left == 0:
                return True
            if left is not None and (fewest is None or left < fewest):
                fewest = left
                deadline = time.monotonic() + self.plan.drain_timeout_s
            await asyncio.sleep(0.5)
        return False

    # -- main -----------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        plan = self.plan
        started = time.monotonic()
        self.say(f"soak: {plan.guesses} guesses, {plan.rooms} rooms, {plan.workers} workers")
        try:
            await self.redis_server.start()
            await asyncio.to_thread(self.pg.init)
            await asyncio.to_thread(self.pg.start)
            await asyncio.to_thread(upgrade, self.pg.url)
            self.faults.note(f"redis :{self.redis_server.port}, postgres :{self.pg.port} up")
            report = await self.play(started)
        finally:
            self.redis_server.stop()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.pg.stop, "fast")
        report["plan"] = dict(asdict(plan).items())
        report["faults"] = self.faults.events
        report["redis_starts"] = self.redis_server.starts
        return report

    async def play(self, started: float) -> dict[str, Any]:
        plan = self.plan
        standin = StandIn(token=TOKEN)
        await standin.start()
        # Telegram's limits, enforced: every post over them is a RetryAfter, counted in the
        # headline (expected 0, Redis and Postgres outages and worker kills included).
        standin.enforce_rate_limits()
        self.build_world(standin)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")},
            "CODEMOJEX_TOKEN": TOKEN,
            "CODEMOJEX_BOT_API_BASE_URL": standin.base_url,
            "CODEMOJEX_BOT_API_BASE_FILE_URL": standin.base_file_url,
            "CODEMOJEX_REDIS_URL": self.redis_server.url,
            "CODEMOJEX_DATABASE_URL": self.pg.url,
            "CODEMOJEX_QUEUE": QUEUE,
            "CODEMOJEX_LEASE_MS": str(plan.lease_ms),
            "CODEMOJEX_CONCURRENCY": str(plan.concurrency),
            "CODEMOJEX_SENDER_AMBIGUOUS": plan.ambiguous,
        }
        self.fleet = WorkerFleet(env, plan.workers, self.workdir)

        settings = Settings(
            token=TOKEN,
            bot_api_base_url=standin.base_url,
            bot_api_base_file_url=standin.base_file_url,
            redis_url=self.redis_server.url,
            database_url=self.pg.url,
            queue=QUEUE,
            default_ceiling=2,
        )
        # The bot's clients as `codemojex bot` builds them (a blocking Redis pool sized by the
        # runtime: the bot's concurrent updates wait for a connection, never fail for one).
        redis = redis_client(settings)
        assert isinstance(redis, aioredis.Redis)
        engine = make_engine(self.pg.url)
        sessionmaker = make_sessionmaker(engine)
        lanes = RecordingLanes(redis, QUEUE)
        app = build_application(
            settings,
            lanes=lanes,
            sessionmaker=sessionmaker,
            redis=redis,
            rng=random.Random(plan.seed),
            max_depth=plan.max_depth,
        )

        async def count_seen(update: Update, context: CodemojexContext) -> None:
            self.seen += 1

        async def record_error(update: object, context: CodemojexContext) -> None:
            self.bot_errors.append(repr(context.error)[:300])

        app.add_handler(TypeHandler(Update, count_seen), group=-1)
        app.add_error_handler(record_error)

        sampler = Sampler(redis, QUEUE)
        stop_sampler = asyncio.Event()
        report: dict[str, Any] = {}
        try:
            async with contextlib.AsyncExitStack() as stack:
                # Every room exists with its ceiling before the first guess: ceilings never
                # change while guesses are in flight, so any count above one is a breach.
                if plan.via == "bot":
                    await stack.enter_async_context(running(app, poll_timeout=1))
                    for sim in self.sims:
                        self.type_text(standin, sim.chat_id, ADMIN_ID, f"/limit {sim.ceiling}")
                        await self.backlog_below(plan.max_backlog)
                    await self.settle(standin)
                    feeder = self.feed(standin, lanes, sessionmaker)
                else:
                    await self.setup_direct(lanes, sessionmaker)
                    feeder = self.feed_direct(standin, lanes, sessionmaker)
                self.fleet.start_all()
                while not self.fleet.ready():  # noqa: ASYNC110 - polls other processes' logs
                    await asyncio.sleep(0.2)
                self.faults.note("first worker ready")
                sampler_task = asyncio.create_task(sampler.run(stop_sampler))
                feed_started = time.monotonic()
                tasks = [asyncio.create_task(feeder)]
                if plan.faults:
                    tasks.append(asyncio.create_task(self.worker_killer()))
                    tasks.append(asyncio.create_task(self.infrastructure_faults(lanes)))
                await asyncio.gather(*tasks)
                feed_s = time.monotonic() - feed_started
                self.faults.note(f"feeding done: {len(lanes.accepted)} accepted")
                if plan.via == "bot":
                    await self.settle(standin, timeout_s=300)
                for slot in range(plan.workers):
                    if slot not in self.fleet.alive():
                        self.fleet.spawn(slot)
                drained = await self.drain(lanes, sessionmaker)
                drain_s = time.monotonic() - feed_started - feed_s
                self.faults.note("drained" if drained else "NOT drained")
                stop_sampler.set()
                await sampler_task
                codes = await asyncio.to_thread(self.fleet.stop_all)
                report = await self.verify(standin, lanes, sessionmaker, sampler.obs)
                report["timing"] = {
                    "feed_s": round(feed_s, 1),
                    "drain_s": round(drain_s, 1),
                    "total_s": round(time.monotonic() - started, 1),
                    "accepted_per_s": round(len(lanes.accepted) / feed_s, 1) if feed_s else None,
                }
                report["workers"] = {
                    "spawns": self.fleet.spawns,
                    "sigkills": self.fleet.kills,
                    "exit_codes_at_stop": codes,
                    "error_log_lines": self.fleet.error_lines(),
                    "error_log_examples": self.fleet.error_examples(),
                    "sender_recovered_ambiguous_rows": len(self.fleet.recovered_ambiguous()),
                }
        finally:
            stop_sampler.set()
            await asyncio.to_thread(self.fleet.stop_all, 5)
            await standin.stop()
            await engine.dispose()
            with contextlib.suppress(Exception):
                await redis.aclose()
        return report

    # -- verification ---------------------------------------------------------------------

    async def verify(
        self,
        standin: StandIn,
        lanes: RecordingLanes,
        sessionmaker: async_sessionmaker[AsyncSession],
        obs: Observed,
    ) -> dict[str, Any]:
        accepted = set(lanes.accepted)
        async with sessionmaker() as session:
            guesses = (await session.execute(select(Guess))).scalars().all()
            rounds = (await session.execute(select(Round))).scalars().all()
            board = (await session.execute(select(LeaderboardEntry))).scalars().all()
            outbox = (await session.execute(select(Outbox))).scalars().all()
            await session.commit()

        stored_ids = Counter(g.id for g in guesses)
        stored = set(stored_ids)
        lost = accepted - stored
        duplicated_rows = sum(n - 1 for n in stored_ids.values())

        # Leaderboard vs guesses: every scored (not late) guess counted once, every win once.
        length_of = {r.id: r.length for r in rounds}
        scored_per_player = Counter(g.player_id for g in guesses if not g.late)
        wins_per_player = Counter(r.winner_player_id for r in rounds if r.winner_player_id)
        board_mismatch = 0
        for entry in board:
            if entry.guesses != scored_per_player.get(entry.player_id, 0):
                board_mismatch += 1
            if entry.wins != wins_per_player.get(entry.player_id, 0):
                board_mismatch += 1
        board_players = {e.player_id for e in board}
        board_mismatch += sum(1 for p in scored_per_player if p not in board_players)

        # Rounds: at most one all-exact guess scored in time per round, and it is the winner.
        winners = Counter(
            g.round_id for g in guesses if not g.late and g.exact == length_of.get(g.round_id)
        )
        multi_winner = sum(1 for n in winners.values() if n > 1)
        winner_mismatch = sum(
            1 for r in rounds if (r.winner_player_id is not None) != (winners.get(r.id, 0) == 1)
        )

        # Outbox: one result (or late) row per stored guess, one win row per won round.
        per_guess = Counter(o.guess_id for o in outbox if o.kind in ("result", "late"))
        outbox_dup_rows = sum(n - 1 for n in per_guess.values() if n > 1)
        outbox_missing_rows = sum(1 for gid in stored if per_guess.get(gid, 0) == 0)
        win_rows = Counter(o.round_id for o in outbox if o.kind == "win")
        outbox_dup_rows += sum(n - 1 for n in win_rows.values() if n > 1)

        # Posts: a row is sent once when it was marked with the message that carried it and
        # no other post of the chat carried it too.
        # Message ids are per chat, as on Telegram.
        sent = {(m.chat_id, m.message_id): m for m in standin.sent_messages() if m.chat_id < 0}
        rows_by_message: dict[tuple[int, int], list[Outbox]] = defaultdict(list)
        for o in outbox:
            if o.sent_message_id is not None:
                rows_by_message[(o.chat_id, o.sent_message_id)].append(o)
        not_sent = sum(1 for o in outbox if o.sent_at is None)
        failed = sum(1 for o in outbox if o.sent_at is not None and o.sent_message_id is None)
        marked_not_posted = 0
        examples: list[Any] = []
        for (chat_id, mid), rows in rows_by_message.items():
            post = sent.get((chat_id, mid))
            if post is None:
                marked_not_posted += len(rows)
                examples.append((chat_id, mid, "no such post"))
                continue
            body = post.raw_text or post.text
            for o in rows:
                if o.text not in body and o.text not in post.text:
                    marked_not_posted += 1
                    examples.append((o.text[:80], post.text[:200]))
        lines_by_chat: dict[int, set[str]] = defaultdict(set)
        # Rows marked done with no message id (assumed sent, or refused for good): a post of
        # their line no row was marked with is their one copy, not a second one.
        unmarked_rows: dict[tuple[int, str], list[int]] = defaultdict(list)
        rows_by_line: dict[tuple[int, str], list[int]] = defaultdict(list)
        for o in outbox:
            variants = [o.text]
            if o.player_name and o.kind not in STANDALONE_KINDS:
                variants.append(f"{o.player_name}: {o.text}")
            lines_by_chat[o.chat_id].update(variants)
            for line in variants:
                rows_by_line[(o.chat_id, line)].append(o.id)
            if o.sent_at is not None and o.sent_message_id is None:
                for line in variants:
                    unmarked_rows[(o.chat_id, line)].append(o.id)
        unmarked_posted: set[int] = set()
        # A post no row was marked with, but carrying rows' text, is a second post of them.
        kills = sorted(self.fleet.kill_times)
        ambiguous_rows = set(self.fleet.recovered_ambiguous())

        def kill_gap(ts: float) -> float:
            return min((abs(k - ts) for k in kills), default=float("inf"))

        posted_twice = twice_messages = 0
        unexplained = unexplained_messages = 0
        kill_gaps: list[float] = []
        extra_posts_per_line: Counter[tuple[int, str]] = Counter()
        twice_examples: list[str] = []
        unexplained_examples: list[str] = []
        direct_replies = Counter[str]()
        for m in sorted(sent.values(), key=lambda m: m.ts):
            if (m.chat_id, m.message_id) in rows_by_message:
                continue
            known = lines_by_chat.get(m.chat_id, set())
            if m.text in known or m.raw_text in known:
                lines = [m.text if m.text in known else m.raw_text]
            else:
                lines = [ln for ln in m.text.split("\n") if ln in known]
            if not lines:
                direct_replies[m.text[:60]] += 1
                continue
            extra: list[str] = []
            for line in lines:
                owner = next(
                    (
                        i
                        for i in unmarked_rows.get((m.chat_id, line), ())
                        if i not in unmarked_posted
                    ),
                    None,
                )
                if owner is None:
                    extra.append(line)
                else:
                    unmarked_posted.add(owner)
            if not extra:
                continue
            posted_twice += len(extra)
            twice_messages += 1
            for line in extra:
                extra_posts_per_line[(m.chat_id, line)] += 1
            twice_examples.append(m.text[:120])
            gap = kill_gap(m.ts)
            # Rows of this copy its successor did not find mid-post (intent, no posted marker).
            not_mid_post = [
                line
                for line in extra
                if not ambiguous_rows.intersection(rows_by_line[(m.chat_id, line)])
            ]
            if gap <= KILL_WINDOW_S and not not_mid_post:
                kill_gaps.append(gap)
            else:
                unexplained += len(extra)
                unexplained_messages += 1
                unexplained_examples.append(
                    f"{m.text[:80]!r}: nearest kill {gap:.2f}s away, "
                    f"{len(not_mid_post)} of {len(extra)} rows not recovered mid-post"
                )
        assumed = [
            o
            for o in outbox
            if o.sent_at is not None and o.sent_message_id is None and o.id not in unmarked_posted
        ]
        assumed_not_posted = len(assumed)

        faults = await lanes.check()
        snap = await lanes.snapshot()
        final = Sampler(lanes.client, lanes.queue)
        await final.sample()
        end_drift = final.obs.drift_samples
        dead_raw: list[Any] = await lanes.client.zrange(lanes.keys.dead, 0, -1)
        dead_ids = [bytes(d).decode() for d in dead_raw]

        over_ceiling_rooms = sum(
            1
            for room, peak in obs.max_in_flight.items()
            if room in obs.ceiling_seen and peak > obs.ceiling_seen[room]
        )
        return {
            "accepted": len(accepted),
            "stored_exactly_once": len(accepted & stored),
            "lost": len(lost),
            "lost_examples": sorted(lost)[:10],
            "duplicated": duplicated_rows,
            "stored_without_ack": len(stored - accepted),
            "late_guesses": sum(1 for g in guesses if g.late),
            "leaderboard_mismatches": board_mismatch,
            "rounds": len(rounds),
            "rounds_won": sum(1 for r in rounds if r.winner_player_id),
            "rounds_multi_winner": multi_winner,
            "rounds_winner_mismatch": winner_mismatch,
            "outbox_rows": len(outbox),
            "outbox_duplicate_rows": outbox_dup_rows,
            "outbox_missing_rows": outbox_missing_rows,
            "outbox_not_sent": not_sent,
            "outbox_failed": failed,
            "outbox_posted_twice": posted_twice,
            "outbox_posted_twice_unexplained": unexplained,
            "outbox_posted_twice_messages": twice_messages,
            "outbox_posted_twice_messages_unexplained": unexplained_messages,
            "outbox_posted_twice_unexplained_examples": unexplained_examples[:5],
            "outbox_posted_twice_kill_gap_max_s": round(max(kill_gaps), 3) if kill_gaps else None,
            "outbox_assumed_sent_not_posted": assumed_not_posted,
            "outbox_assumed_sent_examples": [(o.kind, o.round_id, o.text[:40]) for o in assumed][
                :5
            ],
            "kill_window_s": KILL_WINDOW_S,
            "posts_near_a_kill_share": round(
                sum(1 for m in sent.values() if kill_gap(m.ts) <= KILL_WINDOW_S) / len(sent), 3
            )
            if sent
            else None,
            "outbox_posted_three_times_or_more": sum(
                1 for n in extra_posts_per_line.values() if n > 1
            ),
            "outbox_posted_twice_examples": twice_examples[:5],
            "outbox_marked_not_posted": marked_not_posted,
            "outbox_marked_not_posted_examples": examples[:5],
            "posts": len(sent),
            "retry_after": standin.rate_violations,
            "retry_after_rules": dict(Counter(v.rule for v in standin.violations)),
            "retry_after_examples": [
                (v.rule, v.chat_id, round(v.ts - self.faults.t0, 1)) for v in standin.violations
            ][:5],
            "bot_direct_replies": dict(direct_replies.most_common(8)),
            "try_again_replies": sum(1 for m in sent.values() if m.text == texts.try_again(EN)),
            "refused_enqueues": dict(self.refused),
            "bot_errors": len(self.bot_errors),
            "bot_error_examples": self.bot_errors[:5],
            "check": faults,
            "dead_jobs": len(dead_ids),
            "dead_accepted": len(set(dead_ids) & accepted),
            "left_in_queue": {
                "pending": sum(int(r["pending"]) for r in snap["rooms"].values()),
                "active": snap["active"],
                "delayed": snap["delayed"],
            },
            "drift_at_end": end_drift,
            "samples": obs.samples,
            "sample_errors": obs.sample_errors,
            "drift_samples": obs.drift_samples,
            "drift_examples": obs.drift_examples,
            "over_ceiling_samples": obs.over_ceiling_samples,
            "over_ceiling_rooms": over_ceiling_rooms,
            "over_examples": obs.over_examples,
            "max_in_flight_vs_ceiling": dict(
                sorted(
                    Counter(
                        f"{obs.max_in_flight.get(r, 0)}/{c}" for r, c in obs.ceiling_seen.items()
                    ).items()
                )
            ),
        }


def headline(report: dict[str, Any]) -> dict[str, int]:
    """The four numbers the README quotes, plus the other must-be-zero counts.

    `outbox_posted_twice` is not among them: a worker SIGKILLed after Telegram accepted a post
    and before it wrote down that it did leaves a row that the next sender posts again (the
    sender is at-least-once by default: Telegram has no idempotency key). A double post with
    no SIGKILL near its first copy (`outbox_posted_twice_unexplained`), or a row never posted,
    would be a fault, and is here; so is every RetryAfter the stand-in (enforcing Telegram's
    limits) had to answer."""
    return {
        "lost": report["lost"],
        "duplicated": report["duplicated"],
        "drift": report["drift_samples"] + max(0, report["drift_at_end"]),
        "over_ceiling": report["over_ceiling_samples"],
        "check_faults": len(report["check"]),
        "multi_winner_rounds": report["rounds_multi_winner"],
        "outbox_not_sent": report["outbox_not_sent"],
        "retry_after": report["retry_after"],
        "outbox_posted_twice_unexplained": report["outbox_posted_twice_unexplained"],
        "outbox_duplicate_rows": report["outbox_duplicate_rows"],
        "outbox_missing_rows": report["outbox_missing_rows"],
        "leaderboard_mismatches": report["leaderboard_mismatches"],
    }


@contextlib.asynccontextmanager
async def workdir(keep: bool) -> AsyncIterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cmx-soak-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


async def run_soak(plan: SoakPlan, say: Callable[[str], None] = print) -> dict[str, Any]:
    async with workdir(plan.keep_dir) as path:
        report = await Soak(plan, path, say).run()
        report["workdir"] = str(path) if plan.keep_dir else None
        return report


def print_report(report: dict[str, Any], say: Callable[[str], None] = print) -> None:
    say("")
    say("faults injected:")
    for line in report["faults"]:
        say(f"  {line}")
    say("")
    keys = [
        "accepted",
        "stored_exactly_once",
        "lost",
        "duplicated",
        "stored_without_ack",
        "late_guesses",
        "leaderboard_mismatches",
        "rounds",
        "rounds_won",
        "rounds_multi_winner",
        "rounds_winner_mismatch",
        "outbox_rows",
        "outbox_duplicate_rows",
        "outbox_missing_rows",
        "outbox_not_sent",
        "outbox_posted_twice",
        "outbox_posted_twice_unexplained",
        "retry_after",
        "retry_after_rules",
        "retry_after_examples",
        "outbox_posted_twice_messages",
        "outbox_posted_twice_messages_unexplained",
        "outbox_posted_twice_kill_gap_max_s",
        "posts_near_a_kill_share",
        "outbox_posted_three_times_or_more",
        "outbox_assumed_sent_not_posted",
        "outbox_marked_not_posted",
        "posts",
        "try_again_replies",
        "refused_enqueues",
        "bot_errors",
        "dead_jobs",
        "drift_at_end",
        "samples",
        "drift_samples",
        "over_ceiling_samples",
        "over_ceiling_rooms",
    ]
    for key in keys:
        say(f"  {key:28} {report[key]}")
    for key in (
        "outbox_posted_twice_examples",
        "outbox_posted_twice_unexplained_examples",
        "outbox_marked_not_posted_examples",
    ):
        if report.get(key):
            say(f"  {key}: {report[key]}")
    say(f"  {'lanes.check()':28} {report['check'] or 'clean'}")
    say(f"  {'left in queue':28} {report['left_in_queue']}")
    say(f"  {'max in flight / ceiling':28} {report['max_in_flight_vs_ceiling']}")
    say(f"  {'workers':28} {report['workers']}")
    say(f"  {'timing':28} {report['timing']}")
    say("")
    say("headline: " + ", ".join(f"{k} {v}" for k, v in headline(report).items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    d = SoakPlan()
    parser.add_argument("--via", choices=("bot", "lanes"), default=d.via)
    parser.add_argument("--guesses", type=int, default=d.guesses)
    parser.add_argument("--rooms", type=int, default=d.rooms)
    parser.add_argument("--players", type=int, default=d.players)
    parser.add_argument("--flood-players", type=int, default=d.flood_players)
    parser.add_argument("--workers", type=int, default=d.workers)
    parser.add_argument("--concurrency", type=int, default=d.concurrency)
    parser.add_argument("--lease-ms", type=int, default=d.lease_ms)
    parser.add_argument(
        "--kill-every-s", type=float, nargs=2, default=d.kill_every_s, metavar=("MIN", "MAX")
    )
    parser.add_argument("--feed-timeout-s", type=float, default=d.feed_timeout_s)
    parser.add_argument(
        "--drain-timeout-s",
        type=float,
        default=d.drain_timeout_s,
        help="how long the drain after the feed may go without progress (a flooded room's "
        "backlog of results goes out at a group's 20 messages a minute)",
    )
    parser.add_argument("--pg-outage-s", type=float, default=d.pg_outage_s)
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument(
        "--ambiguous",
        choices=("repost", "assume_sent"),
        default=d.ambiguous,
        help="the workers' sender policy for a post whose fate is unknown",
    )
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--keep-dir", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    plan = SoakPlan(
        via=args.via,
        guesses=args.guesses,
        rooms=args.rooms,
        players=args.players,
        flood_players=args.flood_players,
        workers=args.workers,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        pg_outage_s=args.pg_outage_s,
        feed_timeout_s=args.feed_timeout_s,
        drain_timeout_s=args.drain_timeout_s,
        kill_every_s=(args.kill_every_s[0], args.kill_every_s[1]),
        faults=not args.no_faults,
        ambiguous=args.ambiguous,
        seed=args.seed,
        keep_dir=args.keep_dir,
    )

    def interrupted(signum: int, frame: object) -> None:
        # SIGTERM unwinds like Ctrl-C, so the private servers and workers are stopped.
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    report = asyncio.run(run_soak(plan))
    print_report(report)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"report written to {args.json}")
    bad = {k: v for k, v in headline(report).items() if v}
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
