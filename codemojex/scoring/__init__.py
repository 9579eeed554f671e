"""The scoring core of the game: pure functions, no I/O.

Guesses and palettes are tuples of emojis (grapheme clusters, each in the
palette's own spelling); stored as strings they are split back with
`split_emojis`. Refusals carry a kind and the numbers behind it; the words a
player reads are rendered by `codemojex.game.texts` in the player's language.
"""

from codemojex.scoring.emoji import DRAW_POOL, EMOJI_POOL, split_emojis
from codemojex.scoring.errors import InvalidGuess, InvalidSettings
from codemojex.scoring.guess import MAX_GUESS_CHARS, exact_guess, parse_guess
from codemojex.scoring.room_settings import (
    MAX_LENGTH,
    MAX_PALETTE,
    MIN_LENGTH,
    MIN_PALETTE,
    SETTING_NAMES,
    SettingsUpdate,
    check_repeats,
    parse_language,
    parse_length,
    parse_palette,
    parse_repeats,
    parse_settings,
)
from codemojex.scoring.rules import (
    DEFAULT_LENGTH,
    DEFAULT_PALETTE,
    DEFAULT_PALETTE_SIZE,
    EXACT,
    MISPLACED,
    MISS,
    Feedback,
    draw_palette,
    draw_secret,
    feedback,
    points_for,
    render_result,
)

__all__ = [
    "DEFAULT_LENGTH",
    "DEFAULT_PALETTE",
    "DEFAULT_PALETTE_SIZE",
    "DRAW_POOL",
    "EMOJI_POOL",
    "EXACT",
    "MAX_GUESS_CHARS",
    "MAX_LENGTH",
    "MAX_PALETTE",
    "MIN_LENGTH",
    "MIN_PALETTE",
    "MISPLACED",
    "MISS",
    "SETTING_NAMES",
    "Feedback",
    "InvalidGuess",
    "InvalidSettings",
    "SettingsUpdate",
    "check_repeats",
    "draw_palette",
    "draw_secret",
    "exact_guess",
    "feedback",
    "parse_guess",
    "parse_language",
    "parse_length",
    "parse_palette",
    "parse_repeats",
    "parse_settings",
    "points_for",
    "render_result",
    "split_emojis",
]
