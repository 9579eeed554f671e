"""Tap to guess: a round's inline keyboard, what its buttons carry, and a player's draft.
Pure, no I/O: the bot keeps drafts in Redis (codemojex.bot.taps), the store posts the keyboard
with the round's announcement.

Callback data names the round and one button, and nothing else: `t<round>:<i>` (the i-th
palette emoji), `t<round>:b` (⌫ remove the last), `t<round>:c` (✖ clear). At most 25 bytes,
well within Telegram's 64. The bot trusts it no further than that: the round must be the open
round of the chat (and topic) the tapped message is in, and the index within its palette.

A draft is the palette indices tapped so far, as text ("0,3,2"): it never holds more than the
code's length minus one, because the tap that completes the code submits it instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

BACKSPACE: Final = "b"
CLEAR: Final = "c"
BACKSPACE_LABEL: Final = "⌫"
CLEAR_LABEL: Final = "✖"
EMPTY_SLOT: Final = "·"
# Emoji buttons per row of a round's keyboard (Telegram allows 8; 5 fit a phone's width).
TAP_ROW_MAX: Final = 5

_DATA = re.compile(r"t([1-9][0-9]{0,18}):([0-9]{1,2}|b|c)")
# What the bot's callback handler takes: any data of ours (parse_tap checks the rest).
TAP_PATTERN: Final = re.compile(r"t[0-9]")

Action = int | Literal["b", "c"]


@dataclass(frozen=True, slots=True)
class Tap:
    round_id: int
    action: Action  # a palette index, BACKSPACE or CLEAR


def tap_data(round_id: int, action: Action) -> str:
    return f"t{round_id:d}:{action}"


def parse_tap(data: str | None) -> Tap | None:
    """The tap a button's callback data names; None for data we did not write."""
    match = _DATA.fullmatch(data or "")
    if match is None:
        return None
    raw = match.group(2)
    action: Action = int(raw) if raw.isdigit() else "b" if raw == BACKSPACE else "c"
    return Tap(int(match.group(1)), action)


def keyboard(round_id: int, palette: Sequence[str]) -> str:
    """The round's keyboard as Telegram's InlineKeyboardMarkup JSON: the palette in rows of at
    most TAP_ROW_MAX (as even as they can be), then ⌫ and ✖."""
    rows_needed = -(-len(palette) // TAP_ROW_MAX)
    per_row = -(-len(palette) // rows_needed) if palette else 1
    buttons = [
        {"text": emoji, "callback_data": tap_data(round_id, i)} for i, emoji in enumerate(palette)
    ]
    rows = [buttons[i : i + per_row] for i in range(0, len(buttons), per_row)]
    rows.append(
        [
            {"text": BACKSPACE_LABEL, "callback_data": tap_data(round_id, BACKSPACE)},
            {"text": CLEAR_LABEL, "callback_data": tap_data(round_id, CLEAR)},
        ]
    )
    return json.dumps({"inline_keyboard": rows}, ensure_ascii=False, separators=(",", ":"))


def parse_draft(stored: str | bytes | None, palette_size: int, length: int) -> tuple[int, ...]:
    """A stored draft; an unreadable one (or one that no longer fits the round) is empty."""
    text = stored.decode() if isinstance(stored, bytes) else stored or ""
    if not text:
        return ()
    try:
        indices = tuple(int(part) for part in text.split(","))
    except ValueError:
        return ()
    if len(indices) >= length or not all(0 <= i < palette_size for i in indices):
        return ()
    return indices


def draft_text(indices: Sequence[int]) -> str:
    return ",".join(str(i) for i in indices)


@dataclass(frozen=True, slots=True)
class Step:
    """What a tap does to a draft: the draft after it, and the code when the tap completed it
    (then the draft is empty again if the guess is taken, unchanged if it is refused)."""

    draft: tuple[int, ...]
    complete: tuple[int, ...] | None = None


def step(draft: Sequence[int], action: Action, length: int) -> Step:
    if action == BACKSPACE:
        return Step(tuple(draft[:-1]))
    if action == CLEAR:
        return Step(())
    assert isinstance(action, int)
    grown = (*draft, action)
    if len(grown) >= length:
        return Step(tuple(draft), complete=grown[:length])
    return Step(grown)


def show(draft: Sequence[int], palette: Sequence[str], length: int) -> str:
    """The draft as its toast shows it: `🍎🍌··` (tapped emojis, a dot per empty place)."""
    tapped = "".join(palette[i] for i in draft)
    return tapped + EMPTY_SLOT * max(0, length - len(draft))


def emojis_of(indices: Sequence[int], palette: Sequence[str]) -> str:
    return "".join(palette[i] for i in indices)
