"""Validating the room settings an admin types: `/settings length=5 palette=🍎🍌🍇🍒🍋🥝`,
`/settings repeats=off`, `/settings lang=ru`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import regex

from codemojex import locale
from codemojex.scoring.emoji import clusters, key, rgi
from codemojex.scoring.errors import InvalidSettings

# What an admin may choose: a code's length, a palette's size.
MIN_LENGTH: Final = 3
MAX_LENGTH: Final = 6
MIN_PALETTE: Final = 4
MAX_PALETTE: Final = 10
# A settings line: far more than any real palette, and the work per command stays small.
MAX_SETTINGS_CHARS: Final = 1024

_KEY_RE = regex.compile(r"(?<!\S)([A-Za-z_]+)[ \t]*=")
_NAME_RE = regex.compile(r"[a-z_]{1,20}")
_LANG_RE = regex.compile(r"[A-Za-z_-]{1,20}")
SETTING_NAMES = ("length", "palette", "repeats", "lang")
_ON = frozenset({"on", "yes", "true"})
_OFF = frozenset({"off", "no", "false"})


def parse_palette(text: str) -> tuple[str, ...]:
    """4..10 distinct RGI emojis (Unicode's recommended set: no look-alike flags made of tag
    characters), spaces between them allowed, in their fully-qualified spelling (❤ becomes
    ❤️). Raises `InvalidSettings` with the reason."""
    if len(text) > MAX_SETTINGS_CHARS:
        raise InvalidSettings("palette_count")
    out: list[str] = []
    seen: set[str] = set()
    for cluster in clusters(text):
        spelled = rgi(cluster)
        if spelled is None:
            raise InvalidSettings("palette_not_emoji")
        k = key(spelled)
        if k in seen:
            raise InvalidSettings("palette_duplicate", emoji=spelled)
        seen.add(k)
        out.append(spelled)
        if len(out) > MAX_PALETTE:
            raise InvalidSettings("palette_count")
    if len(out) < MIN_PALETTE:
        raise InvalidSettings("palette_count", count=len(out))
    return tuple(out)


def parse_length(value: str | int) -> int:
    """A code length of 3..6, from an int or what an admin typed."""
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 3):
            raise InvalidSettings("length_not_number")
        value = int(text)
    if not MIN_LENGTH <= value <= MAX_LENGTH:
        raise InvalidSettings("length_range", value=value)
    return value


def parse_repeats(value: str | bool) -> bool:
    """Whether a secret may repeat an emoji: on/off, yes/no or true/false (any case), or a
    bool. Raises `InvalidSettings` with the reason."""
    if isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise InvalidSettings("repeats_value")


def check_repeats(length: int, palette_size: int, repeats: bool) -> None:
    """A secret without repeats needs a palette at least as long as the code. Raises
    `InvalidSettings` with the reason when the combination cannot be drawn."""
    if not repeats and palette_size < length:
        raise InvalidSettings("repeats_palette", count=palette_size, length=length)


def parse_language(value: str) -> locale.Lang:
    """A shipped language from what an admin typed ("ru", "pt-br", "PT_BR", "es-419"). Raises
    `InvalidSettings` (kind "lang_unknown", the code if it can be shown) otherwise."""
    found = locale.match(value)
    if found is None:
        word = value.strip()
        raise InvalidSettings("lang_unknown", value=word if _LANG_RE.fullmatch(word) else None)
    return found


@dataclass(frozen=True, slots=True)
class SettingsUpdate:
    """What `/settings` asked to change; None = leave as is. Applies to the next round."""

    length: int | None = None
    palette: tuple[str, ...] | None = None
    repeats: bool | None = None
    language: locale.Lang | None = None


def parse_settings(text: str) -> SettingsUpdate:
    """Parse the arguments of `/settings`: `length=N`, `palette=<emojis>`, `repeats=on|off`
    and/or `lang=<code>`, any order; a palette may contain spaces. Raises `InvalidSettings` with
    the reason (also for repeats=off with a given palette shorter than a given length; the
    store checks the combination with the room's current settings)."""
    if len(text) > MAX_SETTINGS_CHARS:
        raise InvalidSettings("palette_count")
    found = list(_KEY_RE.finditer(text))
    if not found or text[: found[0].start()].strip():
        if not text.strip():
            raise InvalidSettings("empty")
        raise InvalidSettings("unknown_setting")
    values: dict[str, str] = {}
    for i, m in enumerate(found):
        name = m.group(1).lower()
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        if name not in SETTING_NAMES:
            shown = name if _NAME_RE.fullmatch(name) else None
            raise InvalidSettings("unknown_setting", name=shown)
        if name in values:
            raise InvalidSettings("repeated_setting", name=name)
        values[name] = text[m.end() : end]
    update = SettingsUpdate(
        length=parse_length(values["length"]) if "length" in values else None,
        palette=parse_palette(values["palette"]) if "palette" in values else None,
        repeats=parse_repeats(values["repeats"]) if "repeats" in values else None,
        language=parse_language(values["lang"]) if "lang" in values else None,
    )
    if update.repeats is False and update.length is not None and update.palette is not None:
        check_repeats(update.length, len(update.palette), update.repeats)
    return update
