"""Turning what a player typed into a guess, or a reason why it is not one."""

from __future__ import annotations

from collections.abc import Sequence

from codemojex.scoring.emoji import canonical, clusters, is_emoji, key, split_emojis
from codemojex.scoring.errors import InvalidGuess

# Telegram caps a message at 4,096 characters; anything longer is not from a player.
MAX_GUESS_CHARS = 4096
# At most this many offending emojis are named in a refusal.
_MAX_NAMED = 5


def _plural(n: int) -> str:
    return f"{n} emoji" if n == 1 else f"{n} emojis"


def _palette_tuple(palette: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(palette, str):
        return split_emojis(palette)
    return tuple(palette)


def parse_guess(text: str, palette: str | Sequence[str], length: int) -> tuple[str, ...]:
    """The guess in `text` as `length` emojis in the palette's own spelling.

    Whitespace and invisible marks between emojis are ignored. Anything else that
    is not exactly `length` palette emojis raises `InvalidGuess`, whose str() is
    the reason to show the player. The palette is a tuple of emojis or the stored
    string of them. Work is bounded: the input is read lazily and given up on
    after `8 * length` emojis.
    """
    if length < 1:
        raise ValueError(f"length must be positive, not {length}")
    pal = _palette_tuple(palette)
    by_key = {key(e): e for e in pal}
    shown = "".join(pal)
    need = _plural(length)
    if len(text) > MAX_GUESS_CHARS:
        raise InvalidGuess("too_long", f"Too long: this round needs {need}.")

    cap = 8 * max(length, 1)
    found: list[str] = []
    offenders: dict[str, str] = {}  # key -> how to show it
    for cluster in clusters(text):
        if not is_emoji(cluster):
            raise InvalidGuess("not_emoji", f"That's not a guess: send {need} from {shown}.")
        if len(found) == cap:
            raise InvalidGuess(
                "too_long", f"Too long: more than {cap} emojis, this round needs {length}."
            )
        k = key(cluster)
        mine = by_key.get(k)
        if mine is None:
            offenders.setdefault(k, canonical(cluster))
            found.append(cluster)
        else:
            found.append(mine)

    if not found:
        raise InvalidGuess("empty", f"Empty guess: send {need} from {shown}.")
    if len(found) > length:
        raise InvalidGuess(
            "too_long",
            f"Too long: {_plural(len(found))}, this round needs {length}.",
            count=len(found),
        )
    if len(found) < length:
        raise InvalidGuess(
            "too_short",
            f"Too short: {_plural(len(found))}, this round needs {length}.",
            count=len(found),
        )
    if offenders:
        odd = tuple(offenders.values())
        named = "".join(odd[:_MAX_NAMED]) + ("…" if len(odd) > _MAX_NAMED else "")
        raise InvalidGuess(
            "not_in_palette",
            f"Not in this round's palette: {named}. Pick from {shown}.",
            offenders=odd,
            count=len(found),
        )
    return tuple(found)
