"""Refusals with a machine-readable kind and the numbers that explain them.

The words a player reads are not here: `codemojex.game.texts.guess_refused` and
`settings_refused` render a refusal in the reader's language. str(exc) is a short English
description for logs.
"""

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
    "lang_unknown",
]


class InvalidGuess(ValueError):
    """A message that is not exactly `length` emojis of the round's palette.

    `kind` lets the bot decide whether to answer at all (a plain chat message of kind
    ``not_emoji`` or ``empty`` is chatter, not a guess). `length` and `palette` are the round's;
    `offenders` lists the emojis not in the palette (kind ``not_in_palette``); `count` is how
    many emojis were seen (``too_short``/``too_long``; None when the input was cut short, and
    then `more_than` is how far it was read, if it was read at all).
    """

    def __init__(
        self,
        kind: GuessRefusal,
        *,
        length: int,
        palette: tuple[str, ...] = (),
        offenders: tuple[str, ...] = (),
        count: int | None = None,
        more_than: int | None = None,
    ) -> None:
        self.kind: GuessRefusal = kind
        self.length = length
        self.palette = palette
        self.offenders = offenders
        self.count = count
        self.more_than = more_than
        super().__init__(str(self))

    def __str__(self) -> str:
        seen = self.count if self.count is not None else f">{self.more_than or '?'}"
        return f"invalid guess ({self.kind}): {seen} emojis seen, {self.length} needed"


class InvalidSettings(ValueError):
    """Room settings an admin typed that cannot be used.

    `name`: the setting concerned (``unknown_setting``: the name typed, None when it is not a
    name that can be shown, or no name=value pair was given at all); `value`: the
    value refused (a length out of range, a language code); `emoji`: a repeated palette emoji;
    `count`: the palette's size (``palette_count``, None when it was too long to count;
    ``repeats_palette``); `length`: the code length (``repeats_palette``).
    """

    def __init__(
        self,
        kind: SettingsRefusal,
        *,
        name: str | None = None,
        value: str | int | None = None,
        emoji: str | None = None,
        count: int | None = None,
        length: int | None = None,
    ) -> None:
        self.kind: SettingsRefusal = kind
        self.name = name
        self.value = value
        self.emoji = emoji
        self.count = count
        self.length = length
        super().__init__(str(self))

    def __str__(self) -> str:
        shown = {
            k: v
            for k, v in (
                ("name", self.name),
                ("value", self.value),
                ("emoji", self.emoji),
                ("count", self.count),
                ("length", self.length),
            )
            if v is not None
        }
        details = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return f"invalid settings ({self.kind})" + (f": {details}" if details else "")
