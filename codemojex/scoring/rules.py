"""The game's rules: feedback, points, a new room's shape, a round's hold past its end, and
drawing palettes and secrets."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from codemojex.scoring.emoji import DRAW_POOL, key, split_emojis

# A new room's code length and palette (an admin changes them: scoring/room_settings.py).
DEFAULT_LENGTH: Final = 4
DEFAULT_PALETTE_SIZE: Final = 6
# A round stays open past its deadline while guesses taken in time wait to be scored
# (game/rounds.py `holds_open`); at most this long, so a paused room or a dead worker fleet
# cannot hold it for ever.
ROUND_HOLD_S_MAX: Final = 600
# The palette the docs use in their examples; rooms start with a drawn one unless
# the store decides otherwise.
DEFAULT_PALETTE: tuple[str, ...] = ("🍎", "🍌", "🍇", "🍒", "🍋", "🥝")

EXACT = "🟢"
MISPLACED = "🟡"
MISS = "⚫"


@dataclass(frozen=True, slots=True)
class Feedback:
    """How close a guess came: `exact` right emoji in the right place, `misplaced`
    right emoji in the wrong place, out of `length` positions."""

    exact: int
    misplaced: int
    length: int

    def __post_init__(self) -> None:
        if min(self.exact, self.misplaced) < 0 or self.exact + self.misplaced > self.length:
            raise ValueError(f"impossible feedback {self.exact}+{self.misplaced} of {self.length}")

    @property
    def won(self) -> bool:
        return self.exact == self.length

    @property
    def missed(self) -> int:
        return self.length - self.exact - self.misplaced

    @property
    def pegs(self) -> str:
        """🟢 per exact, 🟡 per misplaced, ⚫ for the rest."""
        return EXACT * self.exact + MISPLACED * self.misplaced + MISS * self.missed


def _as_tuple(emojis: str | Sequence[str]) -> tuple[str, ...]:
    # A str is a Sequence[str] of code points; that would split 👍🏽 in two.
    return split_emojis(emojis) if isinstance(emojis, str) else tuple(emojis)


def feedback(guess: str | Sequence[str], secret: str | Sequence[str]) -> Feedback:
    """Score `guess` against `secret` (tuples of emojis, or stored strings of them).

    exact = positions where they agree; misplaced = sum over emojis e of
    min(count in guess, count in secret) minus exact. Spellings with and without
    U+FE0F count as the same emoji.
    """
    g = [key(e) for e in _as_tuple(guess)]
    s = [key(e) for e in _as_tuple(secret)]
    if len(g) != len(s):
        raise ValueError(f"guess has {len(g)} emojis, secret has {len(s)}")
    exact = sum(a == b for a, b in zip(g, s, strict=True))
    common = sum((Counter(g) & Counter(s)).values())
    return Feedback(exact=exact, misplaced=common - exact, length=len(s))


def render_result(guess: str | Sequence[str], fb: Feedback) -> str:
    """The result line: "🍎🍌🍇🍒 → 🟢🟢🟡⚫"."""
    return f"{''.join(_as_tuple(guess))} → {fb.pegs}"


def points_for(attempts: int) -> int:
    """Points for a win on the player's `attempts`-th guess of the round."""
    if attempts < 1:
        raise ValueError(f"attempts start at 1, not {attempts}")
    return max(10, 100 - 10 * (attempts - 1))


def draw_palette(
    rng: random.Random, size: int = DEFAULT_PALETTE_SIZE, pool: Sequence[str] = DRAW_POOL
) -> tuple[str, ...]:
    """`size` distinct emojis from `pool`, in drawn order."""
    if not 1 <= size <= len(pool):
        raise ValueError(f"cannot draw {size} emojis from a pool of {len(pool)}")
    return tuple(rng.sample(list(pool), size))


def draw_secret(
    rng: random.Random,
    palette: str | Sequence[str],
    length: int = DEFAULT_LENGTH,
    repeats: bool = True,
) -> tuple[str, ...]:
    """A secret of `length` emojis from `palette` (repeats allowed unless told).

    Production passes `random.SystemRandom()`; tests pass a seeded `random.Random`.
    """
    pal = _as_tuple(palette)
    if length < 1 or not pal:
        raise ValueError("need a positive length and a non-empty palette")
    if repeats:
        return tuple(rng.choice(pal) for _ in range(length))
    if length > len(pal):
        raise ValueError(f"cannot draw {length} distinct emojis from {len(pal)}")
    return tuple(rng.sample(list(pal), length))
