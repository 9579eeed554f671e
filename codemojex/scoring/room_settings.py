"""Validating the room settings an admin types: `/settings length=5 palette=🍎🍌🍇🍒🍋🥝`."""

from __future__ import annotations

from dataclasses import dataclass

import regex

from codemojex.scoring.emoji import canonical, clusters, is_emoji, key
from codemojex.scoring.errors import InvalidSettings

MIN_LENGTH = 3
MAX_LENGTH = 6
MIN_PALETTE = 4
MAX_PALETTE = 10
# Far more than any real palette or settings line; keeps the work per command small.
_MAX_SETTINGS_CHARS = 1024

_KEY_RE = regex.compile(r"(?<!\S)([A-Za-z_]+)[ \t]*=")
_NAME_RE = regex.compile(r"[a-z_]{1,20}")
_EXAMPLE = "/settings length=5 palette=🍎🍌🍇🍒🍋🥝"


def parse_palette(text: str) -> tuple[str, ...]:
    """4..10 distinct emojis, spaces between them allowed, in their fully-qualified
    spelling (❤ becomes ❤️). Raises `InvalidSettings` with the reason."""
    if len(text) > _MAX_SETTINGS_CHARS:
        raise InvalidSettings("palette_count", _count_reason(None))
    out: list[str] = []
    seen: set[str] = set()
    for cluster in clusters(text):
        if not is_emoji(cluster):
            raise InvalidSettings(
                "palette_not_emoji",
                "A palette is emojis only (spaces between them are fine), e.g. 🍎🍌🍇🍒🍋🥝.",
            )
        k = key(cluster)
        if k in seen:
            raise InvalidSettings(
                "palette_duplicate",
                f"Each emoji may be in the palette only once: {canonical(cluster)} is repeated.",
            )
        seen.add(k)
        out.append(canonical(cluster))
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


@dataclass(frozen=True, slots=True)
class SettingsUpdate:
    """What `/settings` asked to change; None = leave as is. Applies to the next round."""

    length: int | None = None
    palette: tuple[str, ...] | None = None


def parse_settings(text: str) -> SettingsUpdate:
    """Parse the arguments of `/settings`: `length=N` and/or `palette=<emojis>`, any
    order; a palette may contain spaces. Raises `InvalidSettings` with the reason."""
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
        if name not in ("length", "palette"):
            shown = f" {name}" if _NAME_RE.fullmatch(name) else ""
            raise InvalidSettings(
                "unknown_setting",
                f"Unknown setting{shown}: only length and palette can be set, e.g. {_EXAMPLE}",
            )
        if name in values:
            raise InvalidSettings("repeated_setting", f"{name} is given twice.")
        values[name] = text[m.end() : end]
    return SettingsUpdate(
        length=parse_length(values["length"]) if "length" in values else None,
        palette=parse_palette(values["palette"]) if "palette" in values else None,
    )
