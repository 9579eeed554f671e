"""Spotting English where another language is expected: the words of the English message ids
(codemojex.pot), less what every language writes the same way (command names and setting
syntax, emojis, names, and a few words borrowed as they are)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from babel.messages.pofile import read_po

TEMPLATE = Path(__file__).resolve().parents[2] / "codemojex" / "locale" / "codemojex.pot"

# Syntax that stays as it is in every language: placeholders, /commands, name=value settings,
# and the values repeats= takes.
_SYNTAX = re.compile(r"%\(\w+\)s|/\w+(?:@\w+)?|\b\w+=\S*|\b(?:yes/no|true/false)\b|\bon\b|\boff\b")
_WORD = re.compile(r"[^\W\d_]{3,}")  # letters of any script: "allí" is not "all"

# Borrowed as they are: "emoji", "chat", "admin" (and their plurals), the name of the game, the
# "pts" of a board, the UTC of a week, the setting names an admin types, and the arguments of
# /top (week, daily: "Codemojex daily" is also the name on every daily card).
SHARED = frozenset(
    {"emoji", "emojis", "chat", "chats", "admin", "admins", "codemojex", "pts", "utc"}
    | {"length", "palette", "repeats", "lang", "week", "daily"}
)
# Words a language has of its own that English happens to spell alike.
SAME_SPELLING: dict[str, frozenset[str]] = {
    "pt_BR": frozenset({"use", "extra"}),  # "ou use /g" (usar), "tentativa extra"
    "id": frozenset({"set", "per"}),  # "set emoji baru", "per giliran": borrowed
}


@functools.cache
def english_words() -> frozenset[str]:
    """The words of every English message id."""
    with TEMPLATE.open("rb") as fp:
        catalog = read_po(fp)
    words: set[str] = set()
    for message in catalog:
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        for text in ids:
            words.update(_words(str(text)))
    return frozenset(words - SHARED)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(_SYNTAX.sub(" ", text)) if w.isascii()}


def english_in(text: str, lang: str) -> set[str]:
    """The English words in `text`, written for a reader of `lang`."""
    return (_words(text) & english_words()) - SAME_SPELLING.get(lang, frozenset())
