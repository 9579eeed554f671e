"""Emojis as grapheme clusters: splitting, recognising, and comparing them.

A player's keyboard, a copy-paste or a Telegram client may or may not add the
variation selector U+FE0F (❤ vs ❤️), may put invisible direction marks or
zero-width spaces around what they type, and multi-code-point emojis
(👨‍👩‍👧, 👍🏽, 🇫🇷, 3️⃣) must count as one. Comparison therefore goes through
`key()`, and what the game stores and shows is always the palette's own form.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Final

import emoji as unicode_emoji
import regex

# The emojis rooms' palettes come from. Distinct by `key()`, each a single grapheme
# cluster in its fully-qualified form. A few are deliberately tricky as graphemes
# (FE0F, skin tone, flag, keycap, ZWJ family) so the parsing is exercised by real data.
# fmt: off
EMOJI_POOL: tuple[str, ...] = (
    # fruit
    "🍎", "🍌", "🍇", "🍒", "🍋", "🥝", "🍉", "🍓", "🍑", "🍍", "🥥", "🍐",
    # animals
    "🐶", "🐱", "🐭", "🐰", "🦊", "🐻", "🐼", "🐸", "🐵", "🐙", "🐝", "🐢", "🦋", "🐧",
    # objects and nature
    "⚽", "🎲", "🎸", "🚀", "💎", "🔑", "🎈", "⏰", "🌵", "🌈", "🍄", "⭐", "🔥",
    # text-default symbols that need U+FE0F to render as emoji
    "❤️", "☀️", "✈️",
    # multi-code-point clusters
    "🇫🇷", "👍🏽", "3️⃣", "👨‍👩‍👧",
)
# fmt: on

# Hard to type on some keyboards, or easy to confuse with a neighbour (👍 vs 👍🏽,
# 3 vs 3️⃣): fine in an admin's palette, left out of drawn ones.
_HARD_TO_TYPE = frozenset({"👍🏽", "3️⃣", "👨‍👩‍👧"})
DRAW_POOL: tuple[str, ...] = tuple(e for e in EMOJI_POOL if e not in _HARD_TO_TYPE)

# Invisible characters that clients and copy-paste sprinkle around text. They carry
# no meaning between emojis, and refusing them would give a reason nobody can see.
# ZWJ is only dropped at the edges of a cluster: inside one it joins a sequence.
_ZWJ = "\u200d"
_INVISIBLE = "\ufe0e\ufe0f\u200b\u200c\u200e\u200f\u2060\ufeff\u061c\u202a-\u202e\u2066-\u2069"
_INVISIBLE_RE = regex.compile(f"[{_INVISIBLE}]+")
_INVISIBLE_BUT_FE0F_RE = regex.compile(f"[{_INVISIBLE.replace(chr(0xFE0F), '')}]+")
_SEPARATORS = rf"[\p{{White_Space}}{_INVISIBLE}{_ZWJ}]+"
# A run of separators is taken in one step (4,000 spaces are one token, not 4,000);
# a character that could extend a separator (a combining mark after a space) then
# starts a cluster of its own, which is refused all the same.
_TOKEN_RE = regex.compile(rf"(?P<sep>{_SEPARATORS})|\X")

# A well-formed emoji: keycap, flag, subdivision flag, or pictographs (a skin tone
# only on those that take one) joined by ZWJ. Checked on the FE0F-free key. Requiring
# Emoji=Yes keeps out the unassigned code points that Extended_Pictographic reserves.
_PICT = r"(?:\p{Emoji_Modifier_Base}\p{Emoji_Modifier}|[\p{Extended_Pictographic}&&\p{Emoji}])"
_EMOJI_RE = regex.compile(
    r"[0-9#*]\u20e3"
    r"|\p{Regional_Indicator}\p{Regional_Indicator}"
    r"|\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f"
    rf"|{_PICT}(?:{_ZWJ}{_PICT})*",
    flags=regex.V1,
)
_EMOJI_PRESENTATION_RE = regex.compile(r"\p{Emoji_Presentation}")

# No real emoji has more code points (RGI: about 10): a longer cluster is refused at once.
MAX_CLUSTER_CODEPOINTS: Final = 32
# Stored palettes and secrets whose split a process keeps: a busy worker's open rounds'.
SPLIT_CACHE: Final = 4096


def key(cluster: str) -> str:
    """The form two spellings of one emoji share: no variation selectors or
    invisible marks, no dangling ZWJ."""
    return _INVISIBLE_RE.sub("", cluster).strip(_ZWJ)


def is_emoji(cluster: str) -> bool:
    """Whether one grapheme cluster is a single well-formed emoji."""
    if len(cluster) > MAX_CLUSTER_CODEPOINTS:
        return False
    return _EMOJI_RE.fullmatch(key(cluster)) is not None


@functools.cache
def _rgi_by_key() -> dict[str, str]:
    """Every RGI emoji in its fully-qualified spelling, by `key()`.

    From the `emoji` package's copy of Unicode's emoji-test data (EMOJI_DATA, regenerated for
    each Unicode Emoji release, with each sequence's status): the fully-qualified sequences are
    the Recommended For General Interchange set. Components (a lone skin tone or hair style)
    are not emoji on their own, and minimally- or unqualified spellings map to the same key.
    (unicodedata2 has no emoji sequences, only code point properties.)"""
    qualified = unicode_emoji.STATUS["fully_qualified"]
    return {
        key(sequence): sequence
        for sequence, data in unicode_emoji.EMOJI_DATA.items()
        if data["status"] == qualified
    }


def rgi(cluster: str) -> str | None:
    """The fully-qualified spelling of `cluster` when it is an RGI emoji (❤ gives ❤️), else
    None: a well-formed sequence Unicode does not recommend (a 🏴 with arbitrary tag letters,
    an unpaired regional indicator, a ZWJ sequence nobody draws) is not one."""
    if len(cluster) > MAX_CLUSTER_CODEPOINTS:
        return None
    return _rgi_by_key().get(key(cluster))


def clusters(text: str) -> Iterator[str]:
    """The grapheme clusters of `text` that are not separators, lazily."""
    for match in _TOKEN_RE.finditer(text):
        if match.group("sep") is None:
            yield match.group()


@functools.lru_cache(maxsize=SPLIT_CACHE)
def split_emojis(text: str) -> tuple[str, ...]:
    """Split a trusted string of emojis (a stored palette or secret) into clusters.

    No validation: use `parse_palette` for what an admin typed and `parse_guess`
    for what a player typed. Cached: every batch the worker scores splits its rounds'
    palettes and secrets again, and a grapheme split costs more than the lookup.
    """
    return tuple(clusters(text))


def canonical(cluster: str) -> str:
    """The fully-qualified spelling of a single emoji, so it renders as an emoji
    everywhere: ❤ becomes ❤️ and 3⃣ becomes 3️⃣; anything else is kept as typed."""
    bare = key(cluster)
    if len(bare) == 1 and _EMOJI_PRESENTATION_RE.match(bare) is None:
        return bare + "\ufe0f"
    if len(bare) == 2 and bare[1] == "\u20e3":
        return bare[0] + "\ufe0f\u20e3"
    return _INVISIBLE_BUT_FE0F_RE.sub("", cluster).strip(_ZWJ)
