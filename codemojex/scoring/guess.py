"""Turning what a player typed into a guess, or a reason why it is not one."""

from __future__ import annotations

from collections.abc import Sequence

from codemojex.limits import TELEGRAM
from codemojex.scoring.emoji import canonical, clusters, is_emoji, key, split_emojis
from codemojex.scoring.errors import InvalidGuess

MAX_GUESS_CHARS = TELEGRAM.message_chars_max


def _palette_tuple(palette: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(palette, str):
        return split_emojis(palette)
    return tuple(palette)


def exact_guess(text: str, palette: frozenset[str], length: int) -> tuple[str, ...] | None:
    """The guess in `text` when it is `length` emojis spelled exactly as in the palette (with
    whitespace and invisible marks between them), the way a player copies them; None for
    anything else, which `parse_guess` then reads (another spelling of a palette emoji, or
    a reason to refuse). The common case without the full parse's normalisation; work stops
    at the first emoji too many."""
    found: list[str] = []
    for cluster in clusters(text[: MAX_GUESS_CHARS + 1]):
        if cluster not in palette or len(found) == length:
            return None
        found.append(cluster)
    return tuple(found) if len(found) == length else None


def parse_guess(text: str, palette: str | Sequence[str], length: int) -> tuple[str, ...]:
    """The guess in `text` as `length` emojis in the palette's own spelling.

    Whitespace and invisible marks between emojis are ignored. Anything else that
    is not exactly `length` palette emojis raises `InvalidGuess`, with its kind and
    numbers (`codemojex.game.texts.guess_refused` says why in the player's language).
    The palette is a tuple of emojis or the stored string of them. Work is bounded:
    the input is read lazily and given up on after `8 * length` emojis.
    """
    if length < 1:
        raise ValueError(f"length must be positive, not {length}")
    pal = _palette_tuple(palette)
    by_key = {key(e): e for e in pal}
    if len(text) > MAX_GUESS_CHARS:
        raise InvalidGuess("too_long", length=length, palette=pal)

    cap = 8 * max(length, 1)
    found: list[str] = []
    offenders: dict[str, str] = {}  # key -> how to show it
    for cluster in clusters(text):
        if not is_emoji(cluster):
            raise InvalidGuess("not_emoji", length=length, palette=pal)
        if len(found) == cap:
            raise InvalidGuess("too_long", length=length, palette=pal, more_than=cap)
        k = key(cluster)
        mine = by_key.get(k)
        if mine is None:
            offenders.setdefault(k, canonical(cluster))
            found.append(cluster)
        else:
            found.append(mine)

    if not found:
        raise InvalidGuess("empty", length=length, palette=pal)
    if len(found) > length:
        raise InvalidGuess("too_long", length=length, palette=pal, count=len(found))
    if len(found) < length:
        raise InvalidGuess("too_short", length=length, palette=pal, count=len(found))
    if offenders:
        raise InvalidGuess(
            "not_in_palette",
            length=length,
            palette=pal,
            offenders=tuple(offenders.values()),
            count=len(found),
        )
    return tuple(found)
