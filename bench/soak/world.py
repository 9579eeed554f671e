"""The soak's world: the plan, the simulated rooms, the lanes that note what they accepted,
the sampler that watches the ceilings and the in-flight counts, the log of faults, and the
state the feeding, the chaos and the run share."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis.asyncio as aioredis
import regex
from redis.exceptions import RedisError

from bench.soak.servers import PostgresServer, RedisServer, WorkerFleet
from codemojex.lanes import Admission, Admitted, Lanes
from codemojex.values.redistypes import AnyRedis

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
SAMPLE = """
local p = KEYS[1]
local active = redis.call('ZRANGE', p .. 'active', 0, -1)
local rooms = {}
for i, id in ipairs(active) do
  rooms[i] = redis.call('HGET', p .. 'job:' .. id, 'r') or ''  -- its room (lanes.md: the job hash)
end
return {redis.call('HGETALL', p .. 'gactive'), redis.call('HGETALL', p .. 'glimit'), active, rooms}
"""


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
    # The backlog phase (via bot): guesses typed while no bot runs, drained by a `codemojex
    # bot` process SIGKILLed half-way and restarted (bench/soak/backlog.py); 0: none.
    backlog: int = 3_000
    backlog_players: int = 5
    backlog_per_player: int = 10
    # The availability phases (via bot, bench/soak/phases.py): one room's round locked for
    # `stuck_hold_s` beside the guesses of `stuck_chats` other rooms (0: none); `outage`
    # guesses typed while Redis is down `outage_down_s`, in `outage_chats` rooms (0: none).
    stuck_chats: int = 20
    stuck_hold_s: float = 10.0
    outage: int = 600
    outage_chats: int = 20
    outage_down_s: float = 6.0
    # The handover phases (via bot, bench/soak/handover.py): `handover_chats` rooms' /endround
    # parked and handed over (a SIGKILLed poller; two webhook processes), beside as many
    # rooms' guesses (0: none).
    handover_chats: int = 10
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
        self._script = redis.register_script(SAMPLE)

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


GRAPHEME = regex.compile(r"\X")


class SoakState:
    """What a run's parts share: the plan, the world, the counters, the faults noted."""

    fleet: WorkerFleet  # built in Soak.play, once the stand-in's address is known

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
