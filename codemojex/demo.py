"""`codemojex demo`: real rounds through the real bot and worker, on embedded defaults.

Everything runs in this one process: the Bot API stand-in (codemojex.standin) plays Telegram,
fakeredis plays Redis unless CODEMOJEX_REDIS_URL is set, and a throwaway SQLite file plays
Postgres unless CODEMOJEX_DATABASE_URL is set. Simulated players only see what a Telegram user
would see: the messages the bot posts into their group. Quiet rooms play a round the way
people do (read the result, narrow the candidates, guess again); one room floods the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from sqlalchemy import func, select

from codemojex.bot.app import build_application, running
from codemojex.db import Guess, Outbox, Player, Room, Round, upgrade
from codemojex.runtime import Runtime, open_runtime
from codemojex.scoring import EXACT, MISPLACED, feedback, split_emojis
from codemojex.settings import Settings
from codemojex.standin import StandIn
from codemojex.worker.service import WorkerStats, make_bot, run_worker

DEMO_TOKEN = "424242:DEMO"
FIRST_USER_ID = 5000
FLOOD_TITLE = "🌊 Flood room"

_RESULT = re.compile(r"^(?:(?P<name>[^:\n]+): )?(?P<guess>\S+?) → (?P<pegs>\S+)  \(attempt \d+\)$")
_ROUND = re.compile(r"code of (?P<length>\d+) emojis.*\nPalette: (?P<palette>[^\n]+)", re.S)


@dataclass(frozen=True)
class DemoPlan:
    quiet_rooms: int = 6
    players_per_room: int = 3
    flood_players: int = 8
    seconds: float = 40.0
    seed: int = 7
    flood_interval_s: float = 0.25  # each flooding player sends this often
    think_s: tuple[float, float] = (0.3, 1.5)  # a quiet player's pause before guessing


@dataclass
class SimPlayer:
    user_id: int
    name: str


@dataclass
class SimRoom:
    chat_id: int
    title: str
    players: list[SimPlayer]
    flood: bool
    round_open: bool = False
    round_msg: int | None = None
    palette: tuple[str, ...] = ()
    candidates: list[tuple[str, ...]] = field(default_factory=list)
    tried: set[tuple[str, ...]] = field(default_factory=set)
    # guesses sent and not yet answered: message id -> (sent at, player name, guess)
    waiting: dict[int, tuple[float, str, tuple[str, ...]]] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    rounds_won: int = 0
    sent: int = 0
    sent_wall: dict[int, float] = field(default_factory=dict)  # message id -> time.time()
    scoring: list[float] = field(default_factory=list)  # guess sent -> scored, seconds
    slow_downs: int = 0
    seen: int = 0  # how many of the bot's messages in this chat were read
    round_wanted: asyncio.Event = field(default_factory=asyncio.Event)


def _pegs(text: str) -> tuple[int, int]:
    return text.count(EXACT), text.count(MISPLACED)


class Table_:
    """What the simulated people of every room read off the stand-in."""

    def __init__(self, standin: StandIn, rooms: Sequence[SimRoom]) -> None:
        self.standin = standin
        self.rooms = {room.chat_id: room for room in rooms}

    def read(self) -> None:
        for room in self.rooms.values():
            posts = self.standin.sent_messages(room.chat_id)
            for post in posts[room.seen :]:
                self._read_post(room, post.text, post.reply_to_message_id, post.ts)
            room.seen = len(posts)

    def _read_post(self, room: SimRoom, text: str, reply_to: int | None, ts: float) -> None:
        if text.startswith("🎯"):  # a round announcement always stands alone
            match = _ROUND.search(text)
            if match:
                self._new_round(room, match, posted_id=None)
            return
        # Anything else may arrive folded into one message with other results, a line each.
        for line in text.splitlines():
            result = _RESULT.match(line)
            if result:
                self._answered(room, result, reply_to, ts)
            elif "Slow down" in line:
                room.slow_downs += 1
            elif "too late" in line:
                self._late(room, line, ts)
            elif any(mark in line for mark in ("🏆", "⏰", "🛑")) and "/newgame" in line:
                room.rounds_won += "🏆" in line
                room.round_open = False
                room.round_wanted.set()

    def _new_round(self, room: SimRoom, match: re.Match[str], posted_id: int | None) -> None:
        room.palette = tuple(match["palette"].split())
        length = int(match["length"])
        room.candidates = list(itertools.product(room.palette, repeat=length))
        room.tried.clear()
        room.round_open = True
        room.round_msg = posted_id

    def _answered(
        self, room: SimRoom, result: re.Match[str], reply_to: int | None, ts: float
    ) -> None:
        guess = split_emojis(result["guess"])
        exact, misplaced = _pegs(result["pegs"])
        room.candidates = [
            code
            for code in room.candidates
            if (fb := feedback(guess, code)).exact == exact and fb.misplaced == misplaced
        ]
        key = reply_to if reply_to in room.waiting else self._oldest(room, result["name"], guess)
        if key is not None:
            sent_at, _, _ = room.waiting.pop(key)
            room.waits.append(ts - sent_at)

    def _late(self, room: SimRoom, line: str, ts: float) -> None:
        guess = split_emojis(line.split(":", 1)[0].split(": ")[-1])
        key = self._oldest(room, None, guess)
        if key is not None:
            sent_at, _, _ = room.waiting.pop(key)
            room.waits.append(ts - sent_at)

    @staticmethod
    def _oldest(room: SimRoom, name: str | None, guess: tuple[str, ...]) -> int | None:
        for message_id, (_, who, sent_guess) in room.waiting.items():
            if sent_guess == guess and (name is None or who == name):
                return message_id
        return None


async def _admin(standin: StandIn, room: SimRoom, stop: asyncio.Event) -> None:
    """The room's first player starts a round whenever none is running."""
    admin = room.players[0]
    room.round_wanted.set()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(room.round_wanted.wait(), timeout=1.0)
        if stop.is_set():
            return
        if room.round_wanted.is_set() and not room.round_open:
            room.round_wanted.clear()
            await asyncio.sleep(0.5)
            standin.send_text(room.chat_id, admin.user_id, "/newgame")
            # Ask again if no announcement shows up (a lost race with another /newgame).
            await asyncio.sleep(5.0)
            if not room.round_open:
                room.round_wanted.set()


async def _quiet_player(
    standin: StandIn,
    room: SimRoom,
    player: SimPlayer,
    plan: DemoPlan,
    rng: random.Random,
    stop: asyncio.Event,
) -> None:
    """Guess a code that still fits every result seen so far; wait for the answer."""
    styles = itertools.cycle(("plain", "command", "reply"))
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(*plan.think_s))
        if not room.round_open or not room.candidates:
            continue
        mine = [mid for mid, (_, who, _) in room.waiting.items() if who == player.name]
        if mine:
            continue
        fresh = [code for code in room.candidates if code not in room.tried] or room.candidates
        guess = rng.choice(fresh)
        room.tried.add(guess)
        text = "".join(guess)
        style = next(styles)
        if style == "command":
            message_id = standin.send_text(room.chat_id, player.user_id, f"/g {text}")
        elif style == "reply" and room.round_msg is not None:
            message_id = standin.send_text(
                room.chat_id, player.user_id, " ".join(guess), reply_to=room.round_msg
            )
        else:
            message_id = standin.send_text(room.chat_id, player.user_id, text)
        room.waiting[message_id] = (time.monotonic(), player.name, guess)
        room.sent_wall[message_id] = time.time()
        room.sent += 1


async def _flood_player(
    standin: StandIn,
    room: SimRoom,
    player: SimPlayer,
    plan: DemoPlan,
    rng: random.Random,
    stop: asyncio.Event,
) -> None:
    """Send a valid guess every few tens of milliseconds, answers or not."""
    while not stop.is_set():
        await asyncio.sleep(plan.flood_interval_s * rng.uniform(0.5, 1.5))
        if not room.round_open or not room.palette:
            continue
        length = len(room.candidates[0]) if room.candidates else 4
        guess = tuple(rng.choice(room.palette) for _ in range(length))
        message_id = standin.send_text(room.chat_id, player.user_id, "".join(guess))
        room.waiting[message_id] = (time.monotonic(), player.name, guess)
        room.sent_wall[message_id] = time.time()
        room.sent += 1


def _demo_settings(settings: Settings, standin: StandIn, workdir: Path) -> Settings:
    explicit = settings.model_fields_set
    update: dict[str, object] = {
        "token": SecretStr(DEMO_TOKEN),
        "bot_api_base_url": standin.base_url,
        "bot_api_base_file_url": standin.base_file_url,
    }
    if "database_url" not in explicit:
        update["database_url"] = f"sqlite+aiosqlite:///{workdir / 'demo.db'}"
    return settings.model_copy(update=update)


def _make_rooms(standin: StandIn, plan: DemoPlan) -> list[SimRoom]:
    names = itertools.cycle(
        ("Ada", "Bo", "Cy", "Di", "Ezra", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea")
    )
    user_ids = itertools.count(FIRST_USER_ID)
    rooms: list[SimRoom] = []
    for index in range(plan.quiet_rooms + 1):
        flood = index == 0
        count = plan.flood_players if flood else plan.players_per_room
        players = []
        for _ in range(count):
            user_id = next(user_ids)
            name = f"{next(names)}{user_id - FIRST_USER_ID}"
            standin.add_user(user_id, name)
            players.append(SimPlayer(user_id, name))
        chat_id = -100_000_000_000 - index
        title = FLOOD_TITLE if flood else f"Quiet room {index}"
        standin.add_group(chat_id, title, admins=[players[0].user_id])
        rooms.append(SimRoom(chat_id=chat_id, title=title, players=players, flood=flood))
    return rooms


async def _read_books(runtime: Runtime, rooms: Sequence[SimRoom]) -> dict[int, tuple[int, int]]:
    """chat id -> (guesses recorded, rounds won), from the database; and each room's
    sent-to-scored delays (what the lanes decide, before Telegram's posting pace)."""
    async with runtime.sessionmaker() as session:
        guesses = await session.execute(
            select(Room.chat_id, func.count(Guess.id))
            .join(Player, Player.room_id == Room.id)
            .join(Guess, Guess.player_id == Player.id)
            .group_by(Room.chat_id)
        )
        wins = await session.execute(
            select(Room.chat_id, func.count(Round.id))
            .join(Round, Round.room_id == Room.id)
            .where(Round.winner_player_id.is_not(None))
            .group_by(Room.chat_id)
        )
        scored_at = await session.execute(
            select(Outbox.chat_id, Outbox.reply_to_message_id, Guess.scored_at).join(
                Guess, Guess.id == Outbox.guess_id
            )
        )
    by_chat = {room.chat_id: room for room in rooms}
    for chat_id, message_id, when in scored_at.all():
        room = by_chat.get(int(chat_id))
        if room is not None and message_id in room.sent_wall:
            room.scoring.append(when.timestamp() - room.sent_wall[message_id])
    won = {int(chat): int(n) for chat, n in wins.all()}
    return {int(chat): (int(n), won.get(int(chat), 0)) for chat, n in guesses.all()}


def _ms(values: Sequence[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:,.0f}"


def _summary(
    console: Console,
    rooms: Sequence[SimRoom],
    books: dict[int, tuple[int, int]],
    stats: WorkerStats,
    faults: list[str],
    standin: StandIn,
    elapsed: float,
) -> None:
    table = Table(title="What each room saw (times in ms)", title_justify="left")
    table.add_column("room")
    for column in ("players", "rounds won", "guesses sent", "scored", "slow-downs"):
        table.add_column(column, justify="right")
    for column in ("scored p50", "scored p95", "posted p50", "posted p95"):
        table.add_column(column, justify="right")
    for room in rooms:
        recorded, won = books.get(room.chat_id, (0, 0))
        table.add_row(
            room.title,
            str(len(room.players)),
            str(won),
            str(room.sent),
            str(recorded),
            str(room.slow_downs),
            _ms(room.scoring, 0.5),
            _ms(room.scoring, 0.95),
            _ms(room.waits, 0.5),
            _ms(room.waits, 0.95),
        )
    console.print(table)
    quiet_scoring = [w for room in rooms if not room.flood for w in room.scoring]
    flood_scoring = [w for room in rooms if room.flood for w in room.scoring]
    counters = stats.as_dict()
    total_scored = sum(n for n, _ in books.values())
    total_won = sum(w for _, w in books.values())
    console.print(
        f"{total_won} rounds won and {total_scored} guesses scored in {elapsed:.0f} s; "
        f"{counters.get('sent_messages', 0)} messages posted, "
        f"{counters.get('sent_coalesced_rows', 0)} results folded into "
        f"{counters.get('sent_coalesced_messages', 0)} combined messages."
    )
    console.print(
        f"Quiet rooms had their guesses scored in {_ms(quiet_scoring, 0.5)} ms (median, "
        f"p95 {_ms(quiet_scoring, 0.95)} ms) while the flood room's took "
        f"{_ms(flood_scoring, 0.5)} ms: the flood waits in its own lanes. 'Posted' adds "
        "Telegram's pace (about 20 messages a minute per group), which the sender keeps."
    )
    verdict = "all hold" if not faults else "; ".join(faults)
    console.print(
        f"Telegram flood limits broken: {standin.rate_violations}. "
        f"Lanes invariants after the run: {verdict}."
    )


async def run_demo(settings: Settings, plan: DemoPlan) -> int:
    # Wide enough for the summary table even when the output is not a terminal.
    console = Console(width=max(Console().width, 120))
    rng = random.Random(plan.seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="codemojex-demo-") as tmp:
        standin = StandIn(token=DEMO_TOKEN)
        await standin.start()
        # Results are paced like Telegram would demand; let the stand-in count any breach.
        standin.enforce_rate_limits()
        try:
            settings = _demo_settings(settings, standin, Path(tmp))
            await asyncio.to_thread(upgrade, settings.database_url)
            rooms = _make_rooms(standin, plan)
            async with open_runtime(settings) as runtime:
                return await _play(console, runtime, standin, rooms, plan, rng, started)
        finally:
            await standin.stop()


async def _play(
    console: Console,
    runtime: Runtime,
    standin: StandIn,
    rooms: list[SimRoom],
    plan: DemoPlan,
    rng: random.Random,
    started: float,
) -> int:
    settings = runtime.settings
    application = build_application(
        settings, lanes=runtime.lanes, sessionmaker=runtime.sessionmaker, redis=runtime.redis
    )
    stop_worker = asyncio.Event()
    stop_players = asyncio.Event()
    stats = WorkerStats()
    table = Table_(standin, rooms)
    console.print(
        f"[bold]Codemojex demo[/]: {len(rooms) - 1} quiet rooms and one flooding room "
        f"({plan.flood_players} players) play for {plan.seconds:.0f} s through the real bot "
        f"and worker ({settings.concurrency} scoring consumers)."
    )
    async with running(application, poll_timeout=1), make_bot(settings) as bot:
        worker = asyncio.create_task(
            run_worker(
                settings,
                lanes=runtime.lanes,
                sessionmaker=runtime.sessionmaker,
                bot=bot,
                redis=runtime.redis,
                stop_event=stop_worker,
                stats=stats,
                timer_s=1.0,
                sender_poll_s=0.2,
            )
        )
        tasks = [asyncio.create_task(_admin(standin, room, stop_players)) for room in rooms]
        for room in rooms:
            for player in room.players:
                body = _flood_player if room.flood else _quiet_player
                tasks.append(
                    asyncio.create_task(body(standin, room, player, plan, rng, stop_players))
                )
        progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[status]}"),
            TimeRemainingColumn(),
            console=console,
        )
        with progress:
            bar = progress.add_task("playing", total=plan.seconds, status="")
            while (elapsed := time.monotonic() - started) < plan.seconds:
                await asyncio.sleep(0.25)
                table.read()
                won = sum(room.rounds_won for room in rooms)
                answered = sum(len(room.waits) for room in rooms)
                progress.update(
                    bar,
                    completed=min(elapsed, plan.seconds),
                    status=f"{answered} results posted · {won} rounds won",
                )
            stop_players.set()
            await asyncio.gather(*tasks)
            # Let the quiet rooms' last guesses be scored and posted before the summary. The
            # flood room's backlog is not waited for: at its ceiling it would take minutes,
            # which is the point (it is kept, and reported).
            settle = progress.add_task("settling", total=None, status="")
            deadline = time.monotonic() + 15.0
            while time.monotonic() < deadline:
                table.read()
                waiting = sum(len(room.waiting) for room in rooms if not room.flood)
                progress.update(settle, status=f"{waiting} quiet-room results still due")
                if waiting == 0:
                    break
                await asyncio.sleep(0.25)
            table.read()
        backlog = _backlog(await runtime.lanes.snapshot())
        stop_worker.set()
        await worker
    faults = await runtime.lanes.check()
    books = await _read_books(runtime, rooms)
    _summary(console, rooms, books, stats, faults, standin, time.monotonic() - started)
    console.print(
        f"{backlog} flooded guesses were still queued at the end: kept, not lost, and "
        "served at the flood room's ceiling."
    )
    total = sum(n for n, _ in books.values())
    return 0 if total > 0 and not faults else 1


def _backlog(snapshot: dict[str, Any]) -> int:
    """Guesses still pending, in flight or waiting for a retry, from a lanes snapshot."""
    pending = sum(int(room["pending"]) for room in snapshot["rooms"].values())
    return pending + int(snapshot["active"]) + int(snapshot["delayed"])


__all__ = ["DemoPlan", "run_demo"]
