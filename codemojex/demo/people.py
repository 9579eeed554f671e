"""The demo's simulated people: the rooms and players, what they read off the stand-in (only
what a Telegram user would see: the bot's messages in their group), and how they play. Quiet
rooms play a round the way people do (read the result, narrow the candidates, guess again);
one room floods the bot."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from codemojex.scoring import EXACT, MISPLACED, feedback, split_emojis
from codemojex.standin import StandIn

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


class ChatReader:
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


async def admin(standin: StandIn, room: SimRoom, stop: asyncio.Event) -> None:
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


async def quiet_player(
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


async def flood_player(
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


def make_rooms(standin: StandIn, plan: DemoPlan) -> list[SimRoom]:
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
