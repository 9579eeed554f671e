"""Everything the bot and the worker say to players, in one place, as docs/game.md describes it.

Plain text (send without parse_mode): names and emojis typed by players are embedded as is,
so no Markdown/HTML escaping is needed or wanted. Pure: constants and functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from codemojex.scoring import (
    EXACT,
    MISPLACED,
    MISS,
    Feedback,
    points_for,
    render_result,
    split_emojis,
)

# --- commands (also for setMyCommands) ----------------------------------------------------------

PLAYER_COMMANDS: Final[tuple[tuple[str, str], ...]] = (
    ("newgame", "Start a round"),
    ("g", "Guess: /g 🍎🍌🍇🍒"),
    ("rules", "How a round works"),
    ("stats", "Your record in this chat"),
    ("top", "This chat's leaderboard"),
    ("me", "Your record in all chats"),
    ("help", "Commands"),
)
ADMIN_COMMANDS: Final[tuple[tuple[str, str], ...]] = (
    ("pause", "Pause scoring here (guesses kept)"),
    ("resume", "Resume scoring"),
    ("limit", "Guesses scored at once here: /limit 2"),
    ("weight", "Reply to a player: their share per turn"),
    ("ban", "Reply to a player: ban from the game"),
    ("unban", "Reply to a player: lift the ban"),
    ("endround", "End the round and reveal the code"),
    ("settings", "Next rounds: /settings length=5 palette=🍎🍌🍇🍒🍋🥝 repeats=off"),
    ("queue", "Guesses waiting here, per player"),
)

SETTINGS_EXAMPLE: Final = "/settings length=5 palette=🍎🍌🍇🍒🍋🥝 repeats=off"

HELP: Final = (
    "Codemojex: crack the secret emoji code.\n"
    "/newgame start a round\n"
    "/g 🍎🍌🍇🍒 guess (or just send the emojis, or reply to the round)\n"
    "/rules how a round works · /stats your record · /top leaderboard · /me all chats\n"
    "Admins: /pause /resume /limit N /weight N /ban /unban /endround "
    "/settings length=5 palette=🍎🍌🍇🍒🍋🥝 /queue"
)

PEGS_LEGEND: Final = (
    f"{EXACT} right emoji, right place · {MISPLACED} right emoji, wrong place · {MISS} the rest"
)
POINTS_RULE: Final = (
    f"First to get all {EXACT} wins {points_for(1)} points, "
    f"{points_for(1) - points_for(2)} fewer per extra attempt (at least {points_for(10**6)})."
)

# --- short answers ---

GROUP_ONLY: Final = "That works in a group: add me to a group chat and use it there."
PRIVATE_HINT: Final = "Codemojex is played in group chats. Add me to one and send /newgame. /help"
UNKNOWN_COMMAND: Final = "I don't know that command. /help lists mine."
NO_ROUND: Final = "No round running. /newgame starts one."
ROUND_RUNNING: Final = "A round is already running: guess with /g or send the emojis."
BANNED: Final = "You are banned from this chat's games."
SLOW_DOWN: Final = "Slow down: your earlier guesses are still being scored."
TRY_AGAIN: Final = "The game is busy; try again in a moment."
WENT_WRONG: Final = "Something went wrong, try again."
NOT_ADMIN: Final = "Only this chat's admins can do that."
REPLY_TO_PLAYER: Final = "Reply to a message of the player you mean."
ANONYMOUS_PLAYER: Final = "Post as yourself to play."
PAUSED: Final = "Scoring paused here; guesses are kept. /resume"
RESUMED: Final = "Scoring resumed."
SCORING_PAUSED_NOTE: Final = "Scoring is paused here: your guess waits until /resume."


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def duration(seconds: int) -> str:
    """600 -> "10 minutes", 90 -> "90 seconds", 7200 -> "2 hours"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return _plural(seconds // 3600, "hour")
    if seconds >= 60 and seconds % 60 == 0:
        return _plural(seconds // 60, "minute")
    return _plural(seconds, "second")


def _spaced(emojis: str | Sequence[str]) -> str:
    return " ".join(split_emojis(emojis) if isinstance(emojis, str) else emojis)


def _joined(emojis: str | Sequence[str]) -> str:
    return emojis if isinstance(emojis, str) else "".join(emojis)


# --- rules and rounds ---


def rules_text(
    length: int, palette: str | Sequence[str] | None, timeout_s: int, *, repeats: bool = True
) -> str:
    """/rules for a room: its length, palette (None = drawn fresh each round) and timeout."""
    pal = (
        f"Palette: {_spaced(palette)}"
        if palette
        else "Palette: a fresh set of emojis each round, shown when it starts."
    )
    rep = "Emojis may repeat in the code." if repeats else "No emoji repeats in the code."
    return (
        f"Crack a secret code of {length} emojis. {pal}\n"
        f"Guess by sending {length} palette emojis: as a message, as a reply to the round, "
        f"or /g 🍎🍌🍇🍒. {rep}\n"
        f"{PEGS_LEGEND}\n"
        f"{POINTS_RULE}\n"
        f"No winner within {duration(timeout_s)}? The code is revealed."
    )


def round_started(
    palette: str | Sequence[str], length: int, timeout_s: int, *, repeats: bool = True
) -> str:
    """The announcement of a new round; players may reply to it with their guesses."""
    rep = "emojis may repeat" if repeats else "no emoji repeats"
    return (
        f"🎯 New round! Crack the secret code of {length} emojis ({rep}).\n"
        f"Palette: {_spaced(palette)}\n"
        f"Send {length} palette emojis, reply to this message, or use /g.\n"
        f"{PEGS_LEGEND}\n"
        f"{duration(timeout_s)} on the clock. {POINTS_RULE}"
    )


def result_line(guess: str | Sequence[str], fb: Feedback, attempt_no: int) -> str:
    """A scored guess, posted as a reply: "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)"."""
    return f"{render_result(guess, fb)}  (attempt {attempt_no})"


def result_for(name: str, guess: str | Sequence[str], fb: Feedback, attempt_no: int) -> str:
    """A scored guess inside a combined message, where it is not a reply: named."""
    return f"{name}: {result_line(guess, fb, attempt_no)}"


def results_digest(lines: Sequence[str]) -> str:
    """Several `result_for` lines posted together when a busy chat's results queue up."""
    return "\n".join(lines)


def win(name: str, secret: str | Sequence[str], attempt_no: int, points: int) -> str:
    return (
        f"🏆 {name} cracked the code {_joined(secret)} in {_plural(attempt_no, 'attempt')}! "
        f"+{points} points. /newgame for another round."
    )


def already_solved(guess: str | Sequence[str]) -> str:
    """A guess scored after the round was won: it earns nothing."""
    return f"{_joined(guess)}: too late, this round is already solved. /newgame"


def already_over(guess: str | Sequence[str]) -> str:
    """A guess scored after the round timed out or was ended."""
    return f"{_joined(guess)}: too late, this round is over. /newgame"


def timed_out(secret: str | Sequence[str], timeout_s: int) -> str:
    return (
        f"⏰ Time's up: nobody cracked it in {duration(timeout_s)}. "
        f"The code was {_joined(secret)}. /newgame"
    )


def ended_by_admin(secret: str | Sequence[str]) -> str:
    return f"🛑 Round ended by an admin. The code was {_joined(secret)}. /newgame"


# --- admin answers ---


def _settings(length: int, palette: str | Sequence[str] | None, repeats: bool) -> str:
    pal = _spaced(palette) if palette else "drawn fresh each round"
    return f"length {length}, palette {pal}, repeats {'on' if repeats else 'off'}"


def settings_changed(
    length: int, palette: str | Sequence[str] | None, *, repeats: bool = True
) -> str:
    return f"Settings saved for the next round: {_settings(length, palette, repeats)}."


def settings_shown(length: int, palette: str | Sequence[str] | None, *, repeats: bool) -> str:
    """/settings with nothing to change: what the next round will use, and how to change it."""
    return (
        f"Settings for the next round: {_settings(length, palette, repeats)}.\n"
        f"Change them with e.g. {SETTINGS_EXAMPLE}"
    )


def limit_set(n: int) -> str:
    return f"At most {_plural(n, 'guess')} from this chat scored at once."


def weight_set(name: str, n: int) -> str:
    return f"{name} now gets {_plural(n, 'guess')} per turn."


def player_banned(name: str, dropped: int) -> str:
    waiting = f" {_plural(dropped, 'pending guess')} dropped." if dropped else ""
    return f"{name} is banned from this chat's games.{waiting}"


def player_unbanned(name: str) -> str:
    return f"{name} may play here again."


def whole_number_usage(command: str, low: int, high: int) -> str:
    return f"{command} takes one whole number from {low} to {high}."


# --- records ---


class Record(Protocol):
    """A player's record, in one room or summed over all (the store's stats rows fit)."""

    @property
    def points(self) -> int: ...
    @property
    def wins(self) -> int: ...
    @property
    def guesses(self) -> int: ...
    @property
    def best_solve(self) -> int | None: ...


class RecordEverywhere(Record, Protocol):
    @property
    def rooms(self) -> int: ...


def record_here(name: str, record: Record | None) -> str:
    """/stats: a player's record in this chat (None: never played here)."""
    if record is None:
        return player_stats(name, 0, 0, 0, None)
    return player_stats(name, record.points, record.wins, record.guesses, record.best_solve)


def record_everywhere(name: str, record: RecordEverywhere) -> str:
    """/me: a player's record summed over every chat they played in."""
    where = f"in {_plural(record.rooms, 'chat')}"
    return player_stats(
        name, record.points, record.wins, record.guesses, record.best_solve, where=where
    )


def player_stats(
    name: str, points: int, wins: int, guesses: int, best_solve: int | None, *, where: str = "here"
) -> str:
    best = f", best solve in {_plural(best_solve, 'attempt')}" if best_solve else ""
    return (
        f"{name} {where}: {_plural(points, 'point')}, {_plural(wins, 'win')}, "
        f"{_plural(guesses, 'guess')}{best}."
    )


def leaderboard(rows: Sequence[tuple[str, int, int]]) -> str:
    """Rows of (name, points, wins), best first."""
    if not rows:
        return "No points yet. /newgame and be the first!"
    medals = ("🥇", "🥈", "🥉")
    lines = [
        f"{medals[i] if i < len(medals) else f'{i + 1}.'} {name}: {points} pts, "
        f"{_plural(wins, 'win')}"
        for i, (name, points, wins) in enumerate(rows)
    ]
    return "🏆 Leaderboard\n" + "\n".join(lines)


# --- the queue ---

QUEUE_LINES_MAX: Final = 15


def queue_view(room_view: dict[str, Any] | None, names: dict[str, str]) -> str:
    """/queue: the room's lanes from lanes.snapshot, players by name (ids stay internal)."""
    if room_view is None:
        return "Nothing queued here yet."
    ceiling = room_view.get("ceiling")
    head = (
        f"Scoring {'paused' if room_view.get('paused') else 'running'} · "
        f"in flight {room_view.get('in_flight', 0)}/{ceiling if ceiling is not None else '∞'} · "
        f"waiting {room_view.get('pending', 0)}"
    )
    waiting = sorted(
        ((lane, info) for lane, info in room_view.get("lanes", {}).items() if info["depth"]),
        key=lambda item: (-int(item[1]["depth"]), item[0]),
    )
    lines = [head]
    for lane, info in waiting[:QUEUE_LINES_MAX]:
        extras = []
        if info.get("weight", 1) != 1:
            extras.append(f"weight {info['weight']}")
        if info.get("paused"):
            extras.append("paused")
        extra = f" ({', '.join(extras)})" if extras else ""
        lines.append(f"{names.get(lane, 'someone')}: {info['depth']} waiting{extra}")
    if len(waiting) > QUEUE_LINES_MAX:
        lines.append(f"… and {len(waiting) - QUEUE_LINES_MAX} more players")
    return "\n".join(lines)
