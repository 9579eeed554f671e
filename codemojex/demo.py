"""`codemojex demo`: real rounds through the real bot and worker, on embedded defaults.

Everything runs in this one process: the Bot API stand-in (codemojex.standin) plays Telegram,
fakeredis plays Redis unless CODEMOJEX_REDIS_URL is set, and a throwaway SQLite file plays
Postgres unless CODEMOJEX_DATABASE_URL is set. The worker runs in a thread of its own, with
its own event loop, Redis client (on the same in-process server) and database engine, as it
would run in a process of its own: the flood the bot takes in does not hold up the scoring
loop, whose lanes are what keep the quiet rooms quick. Simulated players only see what a
Telegram user would see: the messages the bot posts into their group. Quiet rooms play a round
the way people do (read the result, narrow the candidates, guess again); one room floods the
bot.

Why one module of about 680 lines: it reads top to bottom as the run it performs (the
players, then starting the stack, playing, settling, the summary table), and no other code
imports any of it; the parts worth sharing live in the stand-in and the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re
import tempfile
import threading
import time
from collections import Counter
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
    # Each flooding player pastes this many guesses at once (more than their lane may hold,
    # so some get "slow down"), then pauses about flood_interval_s before the next paste.
    flood_burst: int = 30
    flood_interval_s: float = 3.0
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
    room_id: str | None = None  # the ROM… id, once the bot has created the room
    peak_queue: int = 0  # most of its guesses queued or in flight at once (lanes snapshots)
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
                if post.text.startswith("🎯"):
                    room.round_msg = post.message_id  # its keyboard is tapped, it replied to
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
    styles = itertools.cycle(("plain", "tap", "command", "reply"))
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
        elif style == "tap" and room.round_msg is not None:
            tapped = await _tap(standin, room, player, guess, rng)
            if tapped is None:
                continue
            message_id = tapped
        elif style == "reply" and room.round_msg is not None:
            message_id = standin.send_text(
                room.chat_id, player.user_id, " ".join(guess), reply_to=room.round_msg
            )
        else:
            message_id = standin.send_text(room.chat_id, player.user_id, text)
        room.waiting[message_id] = (time.monotonic(), player.name, guess)
        room.sent_wall[message_id] = time.time()
        room.sent += 1


_TAPPED = itertools.count(-1, -1)  # a tapped guess has no message: keyed by these instead


async def _tap(
    standin: StandIn,
    room: SimRoom,
    player: SimPlayer,
    guess: tuple[str, ...],
    rng: random.Random,
) -> int | None:
    """Tap the guess on the round message's keyboard, a thumb's pace apart; the key to wait
    for its (named) result under, or None when the keyboard is gone (the round ended)."""
    assert room.round_msg is not None
    message = standin.message(room.chat_id, room.round_msg) or {}
    rows = message.get("reply_markup", {}).get("inline_keyboard", [])
    data = {button["text"]: button["callback_data"] for row in rows for button in row}
    if not all(emoji in data for emoji in guess):
        return None
    for emoji in guess:
        try:
            standin.press_button(room.chat_id, room.round_msg, player.user_id, data[emoji])
        except ValueError:  # the keyboard went meanwhile: the round is over
            return None
        await asyncio.sleep(rng.uniform(0.15, 0.35))
    return next(_TAPPED)


async def _flood_player(
    standin: StandIn,
    room: SimRoom,
    player: SimPlayer,
    plan: DemoPlan,
    rng: random.Random,
    stop: asyncio.Event,
) -> None:
    """Paste a burst of random valid guesses now and then, answers or not."""
    while not stop.is_set():
        await asyncio.sleep(plan.flood_interval_s * rng.uniform(0.5, 1.5))
        if not room.round_open or not room.palette:
            continue
        length = len(room.candidates[0]) if room.candidates else 4
        for _ in range(plan.flood_burst):
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


async def _sample_queues(runtime: Runtime, rooms: Sequence[SimRoom]) -> None:
    """Note each room's queue (pending + in flight) from a lanes snapshot, keeping the peak."""
    if any(room.room_id is None for room in rooms):
        async with runtime.sessionmaker() as session:
            rows = (await session.execute(select(Room.chat_id, Room.id))).all()
        found = {int(chat_id): room_id for chat_id, room_id in rows}
        for room in rooms:
            room.room_id = found.get(room.chat_id, room.room_id)
    lanes_rooms = (await runtime.lanes.snapshot())["rooms"]
    for room in rooms:
        state = lanes_rooms.get(room.room_id)
        if state is not None:
            queued = int(state["pending"]) + int(state["in_flight"])
            room.peak_queue = max(room.peak_queue, queued)


async def _quiet_results_due(runtime: Runtime, rooms: Sequence[SimRoom]) -> int:
    """Quiet rooms' guesses still queued, scored but not yet posted, or waiting for a retry."""
    quiet = [room for room in rooms if not room.flood]
    snapshot = await runtime.lanes.snapshot()
    queued = sum(
        int(state["pending"]) + int(state["in_flight"])
        for room_id, state in snapshot["rooms"].items()
        if room_id in {room.room_id for room in quiet}
    )
    async with runtime.sessionmaker() as session:
        unsent = await session.scalar(
            select(func.count(Outbox.id)).where(
                Outbox.chat_id.in_([room.chat_id for room in quiet]), Outbox.sent_at.is_(None)
            )
        )
    return queued + int(unsent or 0) + int(snapshot["delayed"])


def _ms(values: Sequence[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:,.0f}"


@dataclass
class Report:
    """The demo's closing summary: every guess sent is accounted for."""

    rooms: Sequence[SimRoom]
    books: dict[int, tuple[int, int]]  # chat id -> (guesses recorded, rounds won)
    stats: WorkerStats
    outcomes: Counter[str]  # the bot's guesses.Outcome values
    backlog: int  # guesses still queued when the worker stopped
    ceiling: int

    @property
    def total_scored(self) -> int:
        return sum(n for n, _ in self.books.values())

    @property
    def unaccounted(self) -> int:
        """Guesses the bot took that were neither scored nor left queued (must be 0)."""
        return self.outcomes["enqueued"] - self.total_scored - self.backlog

    def print(self, console: Console, faults: list[str], standin: StandIn, elapsed: float) -> None:
        self._table(console)
        rooms, counters = self.rooms, self.stats.as_dict()
        console.print(
            f"{sum(w for _, w in self.books.values())} rounds won and {self.total_scored} "
            f"guesses scored in {elapsed:.0f} s; {counters.get('sent_messages', 0)} messages "
            f"posted, {counters.get('sent_coalesced_rows', 0)} results folded into "
            f"{counters.get('sent_coalesced_messages', 0)} combined messages."
        )
        self._accounts(console)
        quiet = [w for room in rooms if not room.flood for w in room.scoring]
        flood_rooms = [room for room in rooms if room.flood]
        flood = [w for room in flood_rooms for w in room.scoring]
        peak = max((room.peak_queue for room in flood_rooms), default=0)
        if peak > self.ceiling:
            console.print(
                f"The flood room's queue peaked at {peak} guesses, held in its own lanes with "
                f"at most {self.ceiling} in flight: its guesses waited {_ms(flood, 0.5)} ms "
                f"(median) to be scored, quiet rooms' {_ms(quiet, 0.5)} ms "
                f"(p95 {_ms(quiet, 0.95)} ms)."
            )
        else:
            console.print(
                f"The flood never outran the workers (its queue peaked at {peak}), so no room "
                f"had to wait: quiet rooms' guesses were scored in {_ms(quiet, 0.5)} ms "
                f"(median), the flood's in {_ms(flood, 0.5)} ms."
            )
        console.print(
            "'Posted' adds Telegram's pace (about 20 messages a minute per group), which the "
            "sender keeps."
        )
        verdict = "all hold" if not faults else "; ".join(faults)
        console.print(
            f"Telegram flood limits broken: {standin.rate_violations}. "
            f"Lanes invariants after the run: {verdict}."
        )

    def _table(self, console: Console) -> None:
        table = Table(title="What each room saw (times in ms)", title_justify="left")
        table.add_column("room")
        for column in ("players", "rounds won", "guesses sent", "scored", "peak queue"):
            table.add_column(column, justify="right")
        for column in ("slow-downs", "scored p50", "scored p95", "posted p50", "posted p95"):
            table.add_column(column, justify="right")
        for room in self.rooms:
            recorded, won = self.books.get(room.chat_id, (0, 0))
            table.add_row(
                room.title,
                str(len(room.players)),
                str(won),
                str(room.sent),
                str(recorded),
                str(room.peak_queue),
                str(room.slow_downs),
                _ms(room.scoring, 0.5),
                _ms(room.scoring, 0.95),
                _ms(room.waits, 0.5),
                _ms(room.waits, 0.95),
            )
        console.print(table)

    def _accounts(self, console: Console) -> None:
        sent = sum(room.sent for room in self.rooms)
        taken, outcomes = self.outcomes["enqueued"], self.outcomes
        parts = [f"Of {sent} guesses sent, the bot took {taken}"]
        if outcomes["no_round"]:
            parts.append(
                f"{outcomes['no_round']} came while no round was running (sent after a win, "
                "before its announcement reached the room) and were not taken"
            )
        if outcomes["flood"]:
            notices = sum(room.slow_downs for room in self.rooms)
            parts.append(
                f"{outcomes['flood']} were refused because the sender's lane was full "
                f'({notices} "slow down" notices, one per player per flood)'
            )
        for other in ("invalid", "banned"):
            if outcomes[other]:
                parts.append(f"{outcomes[other]} were refused as {other}")
        unread = sent - sum(outcomes.values())
        if unread > 0:
            parts.append(f"{unread} had not reached the bot when the demo stopped")
        console.print("; ".join(parts) + ".")
        if self.unaccounted:
            console.print(
                f"[bold red]{self.unaccounted} guesses the bot took were neither scored nor "
                "left queued.[/]"
            )
        elif self.backlog:
            console.print(
                f"Every guess taken was scored, except {self.backlog} of the flood's still "
                "queued when the demo stopped its worker (kept in the lanes, not lost)."
            )
        else:
            console.print("Every guess taken was scored; nothing was left queued.")


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
            fake_server = None if settings.redis_url else _fake_server()
            async with open_runtime(settings, fake_server) as runtime:
                worker = WorkerThread(settings, fake_server)
                return await _play(console, runtime, worker, standin, rooms, plan, rng, started)
        finally:
            await standin.stop()


def _fake_server() -> Any:
    import fakeredis

    return fakeredis.FakeServer()


class WorkerThread:
    """The worker (`run_worker`: pool, sender, round timer) in a thread with its own event
    loop, runtime and bot; `stop()` stops it gracefully and returns its counters."""

    def __init__(self, settings: Settings, fake_server: Any | None) -> None:
        self.settings = settings
        self.fake_server = fake_server
        self.stats = WorkerStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="codemojex-demo-worker")

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    async def stop(self) -> WorkerStats:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        await asyncio.to_thread(self._thread.join)
        if self._error is not None:
            raise self._error
        return self.stats

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        async with (
            open_runtime(self.settings, self.fake_server) as runtime,
            make_bot(self.settings) as bot,
        ):
            await run_worker(
                self.settings,
                lanes=runtime.lanes,
                sessionmaker=runtime.sessionmaker,
                bot=bot,
                redis=runtime.redis,
                stop_event=self._stop,
                stats=self.stats,
                timer_s=1.0,
                sender_poll_s=0.2,
            )


async def _play(
    console: Console,
    runtime: Runtime,
    worker: WorkerThread,
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
    stop_players = asyncio.Event()
    stats = worker.stats
    table = Table_(standin, rooms)
    console.print(
        f"[bold]Codemojex demo[/]: {len(rooms) - 1} quiet rooms and one flooding room "
        f"({plan.flood_players} players) play for {plan.seconds:.0f} s through the real bot "
        f"and worker ({settings.concurrency} scoring consumers)."
    )
    async with contextlib.AsyncExitStack() as polling:
        await polling.enter_async_context(running(application, poll_timeout=1))
        worker.start()
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
            for tick in itertools.count():
                if (elapsed := time.monotonic() - started) >= plan.seconds:
                    break
                await asyncio.sleep(0.25)
                table.read()
                if tick % 2:
                    await _sample_queues(runtime, rooms)
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
            # flood room's backlog is not waited for: it is kept, and reported.
            settle = progress.add_task("settling", total=None, status="")
            deadline = time.monotonic() + 15.0
            while time.monotonic() < deadline:
                table.read()
                due = await _quiet_results_due(runtime, rooms)
                progress.update(settle, status=f"{due} quiet-room results still due")
                if due == 0:
                    break
                await asyncio.sleep(0.25)
            await asyncio.sleep(0.5)  # the last posts reach the stand-in
            table.read()
        # The bot stops first and handles every update it has fetched, so each guess it took
        # is in the lanes before the worker stops and what is left is counted.
        await polling.aclose()
        await worker.stop()
    backlog = _backlog(await runtime.lanes.snapshot())
    faults = await runtime.lanes.check()
    books = await _read_books(runtime, rooms)
    outcomes = application.bot_data.guess_outcomes
    report = Report(rooms, books, stats, outcomes, backlog, settings.default_ceiling)
    report.print(console, faults, standin, time.monotonic() - started)
    return 0 if report.total_scored > 0 and not faults and report.unaccounted == 0 else 1


def _backlog(snapshot: dict[str, Any]) -> int:
    """Guesses still pending, in flight or waiting for a retry, from a lanes snapshot."""
    pending = sum(int(room["pending"]) for room in snapshot["rooms"].values())
    return pending + int(snapshot["active"]) + int(snapshot["delayed"])


__all__ = ["DemoPlan", "run_demo"]
