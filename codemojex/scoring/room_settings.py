"""Validating the room settings an admin types: `/settings length=5 palette=🍎🍌🍇🍒🍋🥝`,
`/settings repeats=off`."""

from __future__ import annotations

from dataclasses import dataclass

import regex

from codemojex import limits
from codemojex.scoring.emoji import clusters, key, rgi
from codemojex.scoring.errors import InvalidSettings

# The scoring names of limits.py's numbers (many callers use them).
MIN_LENGTH = limits.LENGTH_MIN
MAX_LENGTH = limits.LENGTH_MAX
MIN_PALETTE = limits.PALETTE_MIN
MAX_PALETTE = limits.PALETTE_MAX
# Far more than any real palette or settings line; keeps the work per command small.
_MAX_SETTINGS_CHARS = 1024

_KEY_RE = regex.compile(r"(?<!\S)([A-Za-z_]+)[ \t]*=")
_NAME_RE = regex.compile(r"[a-z_]{1,20}")
_EXAMPLE = "/settings length=5 palette=🍎🍌🍇🍒🍋🥝"
SETTING_NAMES = ("length", "palette", "repeats")
_ON = frozenset({"on", "yes", "true"})
_OFF = frozenset({"off", "no", "false"})


def parse_palette(text: str) -> tuple[str, ...]:
    """4..10 distinct RGI emojis (Unicode's recommended set: no look-alike flags made of tag
    characters), spaces between them allowed, in their fully-qualified spelling (❤ becomes
    ❤️). Raises `InvalidSettings` with the reason."""
    if len(text) > _MAX_SETTINGS_CHARS:
        raise InvalidSettings("palette_count", _count_reason(None))
    out: list[str] = []
    seen: set[str] = set()
    for cluster in clusters(text):
        spelled = rgi(cluster)
        if spelled is None:
            raise InvalidSettings(
                "palette_not_emoji",
                "A palette is emojis only (spaces between them are fine), e.g. 🍎🍌🍇🍒🍋🥝.",
            )
        k = key(spelled)
        if k in seen:
            raise InvalidSettings(
                "palette_duplicate",
                f"Each emoji may be in the palette only once: {spelled} is repeated.",
            )
        seen.add(k)
        out.append(spelled)
        if len(out) > MAX_PALETTE:
            raise InvalidSettings("palette_count", _count_reason(None))
    if len(out) < MIN_PALETTE:
        raise InvalidSettings("palette_count", _count_reason(len(out)))
    return tuple(out)


def _count_reason(n: int | None) -> str:
    has = "more than that" if n is None else f"that has {n}"
    return f"A palette needs {MIN_PALETTE} to {MAX_PALETTE} different emojis; {has}."


def parse_length(value: str | int) -> int:
    """A code length of 3..6, from an int or what an admin typed."""
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 3):
            raise InvalidSettings(
                "length_not_number",
                f"Length is a whole number from {MIN_LENGTH} to {MAX_LENGTH}, e.g. length=5.",
            )
        value = int(text)
    if not MIN_LENGTH <= value <= MAX_LENGTH:
        raise InvalidSettings(
            "length_range", f"Length must be from {MIN_LENGTH} to {MAX_LENGTH}, not {value}."
        )
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
    raise InvalidSettings(
        "repeats_value", "Repeats is on or off (yes/no and true/false work too), e.g. repeats=off."
    )


def check_repeats(length: int, palette_size: int, repeats: bool) -> None:
    """A secret without repeats needs a palette at least as long as the code. Raises
    `InvalidSettings` with the reason when the combination cannot be drawn."""
    if not repeats and palette_size < length:
        raise InvalidSettings(
            "repeats_palette",
            f"With repeats off, the palette needs at least as many emojis as the code: "
            f"{palette_size} emojis are too few for a code of {length}.",
        )


@dataclass(frozen=True, slots=True)
class SettingsUpdate:
    """What `/settings` asked to change; None = leave as is. Applies to the next round."""

    length: int | None = None
    palette: tuple[str, ...] | None = None
    repeats: bool | None = None


def parse_settings(text: str) -> SettingsUpdate:
    """Parse the arguments of `/settings`: `length=N`, `palette=<emojis>` and/or
    `repeats=on|off`, any order; a palette may contain spaces. Raises `InvalidSettings` with
    the reason (also for repeats=off with a given palette shorter than a given length; the
    store checks the combination with the room's current settings)."""
    if len(text) > _MAX_SETTINGS_CHARS:
        raise InvalidSettings("palette_count", _count_reason(None))
    found = list(_KEY_RE.finditer(text))
    if not found or text[: found[0].start()].strip():
        if not text.strip():
            raise InvalidSettings("empty", f"Nothing to change. Try: {_EXAMPLE}")
        raise InvalidSettings("unknown_setting", f"Settings are name=value pairs, e.g. {_EXAMPLE}")
    values: dict[str, str] = {}
    for i, m in enumerate(found):
        name = m.group(1).lower()
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        if name not in SETTING_NAMES:
            shown = f" {name}" if _NAME_RE.fullmatch(name) else ""
            raise InvalidSettings(
                "unknown_setting",
                f"Unknown setting{shown}: only length, palette and repeats can be set, "
                f"e.g. {_EXAMPLE}",
            )
        if name in values:
            raise InvalidSettings("repeated_setting", f"{name} is given twice.")
        values[name] = text[m.end() : end]
    update = SettingsUpdate(
        length=parse_length(values["length"]) if "length" in values else None,
        palette=parse_palette(values["palette"]) if "palette" in values else None,
        repeats=parse_repeats(values["repeats"]) if "repeats" in values else None,
    )
    if update.repeats is False and update.length is not None and update.palette is not None:
        check_repeats(update.length, len(update.palette), update.repeats)
    return update
