"""Refusals with a player-facing reason (str(exc)) and a machine-readable kind."""

from __future__ import annotations

from typing import Literal

GuessRefusal = Literal["empty", "not_emoji", "too_long", "too_short", "not_in_palette"]
SettingsRefusal = Literal[
    "empty",
    "unknown_setting",
    "repeated_setting",
    "length_not_number",
    "length_range",
    "palette_not_emoji",
    "palette_duplicate",
    "palette_count",
    "repeats_value",
    "repeats_palette",
]


class InvalidGuess(ValueError):
    """A message that is not exactly `length` emojis of the round's palette.

    `kind` lets the bot decide whether to answer at all (a plain chat message of
    kind ``not_emoji`` or ``empty`` is chatter, not a guess); `offenders` lists the
    emojis not in the palette (kind ``not_in_palette``); `count` is how many emojis
    were seen (``too_short``/``too_long``; None when the input was cut short).
    """

    def __init__(
        self,
        kind: GuessRefusal,
        reason: str,
        *,
        offenders: tuple[str, ...] = (),
        count: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.kind: GuessRefusal = kind
        self.reason = reason
        self.offenders = offenders
        self.count = count

    def __str__(self) -> str:
        return self.reason


class InvalidSettings(ValueError):
    """Room settings an admin typed that cannot be used; str(exc) says why."""

    def __init__(self, kind: SettingsRefusal, reason: str) -> None:
        super().__init__(reason)
        self.kind: SettingsRefusal = kind
        self.reason = reason

    def __str__(self) -> str:
        return self.reason
