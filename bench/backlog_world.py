"""A backlog of guesses waiting at the Bot API stand-in, and real `codemojex bot` processes
draining it: what bench/backlog.py measures, what the kill tests check
(tests/bot/test_backlog_kill.py) and what the soak's backlog phase plays.

The world: `groups` supergroups of `players` players each, every room with a round open
(through the store, so the palettes are known before the bot runs), and `per_player` wrong
guesses per player typed into the stand-in before the bot starts, round-robin over the rooms.
Each player's guesses fit in their lane (`per_player` <= the bot's max depth), so every
guess is one job in the player's lane: after a drain each lane holds exactly `per_player`
jobs, and any other count is a guess lost or taken twice (`Backlog.tally`).

The bot process polls the stand-in, or takes its webhook (`mode`); its peak RSS is the
kernel's high-water mark (VmHWM), read before it is killed or stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.processes import ROOT, CodemojexProcess
from codemojex import usecases
from codemojex.lanes import Lanes
from codemojex.limits import ROOM
from codemojex.scoring import split_emojis
from codemojex.standin import StandIn

MODES = ("polling", "webhook")
WEBHOOK_SECRET = "backlog-bench-webhook-secret-0123456789"


@dataclass(frozen=True)
class BacklogPlan:
    groups: int = 40
    players: int = 5
    per_player: int = 12
    first_chat: int = -1_004_400_000_000
    first_user: int = 6_000_000
    seed: int = 5

    @property
    def guesses(self) -> int:
        return self.groups * self.players * self.per_player

    def chat(self, g: int) -> int:
        return self.first_chat - g

    def user(self, g: int, p: int) -> int:
        return self.first_user + g * self.players + p


@dataclass(frozen=True)
class Tally:
    """The lanes after a drain: guesses in them, and per lane the ones missing or extra."""

    taken: int
    lost: int
    twice: int


class Backlog:
    """A plan's people in the stand-in, its rounds in the database, its guesses typed."""

    def __init__(self, plan: BacklogPlan, standin: StandIn) -> None:
        self.plan = plan
        self.standin = standin
        self.rooms: dict[int, str] = {}  # chat id -> room id
        self.round_ids: dict[int, int] = {}  # chat id -> its open round's id
        self._rounds: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    def add_people(self) -> None:
        plan = self.plan
        for g in range(plan.groups):
            users = [plan.user(g, p) for p in range(plan.players)]
            for user in users:
                self.standin.add_user(user, f"B{user}")
            self.standin.add_group(plan.chat(g), f"backlog {g}", admins=[], members=users)

    async def open_rounds(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        """A room and an open round per group, written through the store (a week long: no
        round ends during a drain)."""
        rng = random.Random(self.plan.seed)
        for g in range(self.plan.groups):
            chat = self.plan.chat(g)
            room = await usecases.ensure_room(
                sessionmaker,
                chat,
                f"backlog {g}",
                default_ceiling=ROOM.ceiling_default,
                round_timeout_s=ROOM.round_timeout_s_max,
            )
            rnd = await usecases.start_round(sessionmaker, room.id, rng)
            self.rooms[chat] = room.id
            self.round_ids[chat] = rnd.id
            self._rounds[chat] = (split_emojis(rnd.palette), split_emojis(rnd.secret))

    async def open_rounds_through_bot(
        self, conn: asyncpg.Connection, timeout_s: float = 120.0
    ) -> None:
        """A round in every group through the running bot's own /newgame (sent by each
        group's first player), read back with plain SQL: what any version of the bot and
        its schema do alike (a baseline's, side by side)."""
        plan = self.plan
        for g in range(plan.groups):
            self.standin.send_text(plan.chat(g), plan.user(g, 0), "/newgame")
        chats = [plan.chat(g) for g in range(plan.groups)]
        query = (
            "SELECT rm.chat_id, rm.id AS room, r.id AS round, r.palette, r.secret "
            "FROM rounds r JOIN rooms rm ON rm.id = r.room_id "
            "WHERE r.ended_at IS NULL AND rm.chat_id = ANY($1::bigint[])"
        )

        async def all_open() -> bool:
            return len(await conn.fetch(query, chats)) == plan.groups

        await eventually_true(all_open, timeout_s, "a round in every group", every_s=0.2)
        for row in await conn.fetch(query, chats):
            chat = int(row["chat_id"])
            self.rooms[chat] = str(row["room"])
            self.round_ids[chat] = int(row["round"])
            self._rounds[chat] = (split_emojis(row["palette"]), split_emojis(row["secret"]))

    def guesses(self) -> Iterator[tuple[int, int, str]]:
        """Every player's guesses, round-robin over the rooms, as (chat, user, text): a wrong
        guess each, never the secret (no round is won)."""
        plan = self.plan
        rng = random.Random(plan.seed)
        for _ in range(plan.per_player):
            for p in range(plan.players):
                for g in range(plan.groups):
                    palette, secret = self._rounds[plan.chat(g)]
                    code = secret
                    while code == secret:
                        code = tuple(rng.choice(palette) for _ in secret)
                    yield plan.chat(g), plan.user(g, p), "".join(code)

    def type_guesses(self) -> int:
        """Every player's guesses (`guesses`) typed into the stand-in; how many."""
        typed = 0
        for chat, user, text in self.guesses():
            self.standin.send_text(chat, user, text)
            typed += 1
        return typed

    def expected(self) -> dict[tuple[int, int], int]:
        """(round id, Telegram user id) -> the guesses that player typed in that round."""
        plan = self.plan
        return {
            (self.round_ids[plan.chat(g)], plan.user(g, p)): plan.per_player
            for g in range(plan.groups)
            for p in range(plan.players)
        }

    async def tally(self, lanes: Lanes) -> Tally:
        """What the lanes hold of the backlog: each player's lane should hold `per_player`."""
        snap = await lanes.snapshot()
        want = self.plan.per_player
        taken = lost = twice = 0
        for room in self.rooms.values():
            depths = [
                int(lane["depth"])
                for lane in snap["rooms"].get(room, {"lanes": {}})["lanes"].values()
            ]
            depths += [0] * (self.plan.players - len(depths))
            taken += sum(depths)
            lost += sum(max(0, want - d) for d in depths)
            twice += sum(max(0, d - want) for d in depths)
        return Tally(taken, lost, twice)


def bot_env(
    standin: StandIn,
    *,
    redis_url: str,
    database_url: str,
    queue: str,
    mode: str = "polling",
    webhook_port: int = 0,
    **extra: str,
) -> dict[str, str]:
    """The environment of a `codemojex bot` on the stand-in (and its webhook in that mode)."""
    if mode not in MODES:
        raise ValueError(f"mode: one of {MODES}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    env.update(
        CODEMOJEX_TOKEN=standin.token,
        CODEMOJEX_BOT_API_BASE_URL=standin.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=standin.base_file_url,
        CODEMOJEX_REDIS_URL=redis_url,
        CODEMOJEX_DATABASE_URL=database_url,
        CODEMOJEX_QUEUE=queue,
        PYTHONUNBUFFERED="1",
    )
    if mode == "webhook":
        env.update(
            CODEMOJEX_WEBHOOK_URL=f"http://127.0.0.1:{webhook_port}/hook",
            CODEMOJEX_WEBHOOK_SECRET=WEBHOOK_SECRET,
            CODEMOJEX_WEBHOOK_LISTEN="127.0.0.1",
            CODEMOJEX_WEBHOOK_PORT=str(webhook_port),
        )
    env.update(extra)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + rest if rest else "")
    return env


class BotProcess(CodemojexProcess):
    """A `codemojex bot` of this checkout that keeps its peak RSS (read before a signal that
    ends it)."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        super().__init__("bot", env, log_path)
        self.peak_rss_kb = 0

    def note_rss(self) -> int:
        """The process's peak RSS so far (KiB, the kernel's VmHWM), kept in `peak_rss_kb`."""
        assert self.proc is not None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.peak_rss_kb = max(self.peak_rss_kb, int(line.split()[1]))
        return self.peak_rss_kb

    def signal(self, sig: signal.Signals) -> None:
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.note_rss()
        super().signal(sig)


async def eventually_true(
    probe: Callable[[], Awaitable[bool]], timeout_s: float, what: str, every_s: float = 0.02
) -> None:
    """Until `await probe()` is true; TimeoutError naming `what` after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        if await probe():
            return
        if loop.time() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(every_s)
