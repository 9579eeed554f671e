"""A room's settings, changed for its next rounds (the open round keeps its own): the rules
(`codemojex.scoring`, `codemojex.limits`) validate, the store locks the room and writes, in one
transaction opened here.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import scoring
from codemojex.db.models import Room
from codemojex.db.store.errors import SettingOutOfRange, UnknownRoom
from codemojex.db.store.rooms import SettingsChange, change_settings, lock_room
from codemojex.db.unit import uow
from codemojex.limits import GAME, LANES


async def update_room_settings(
    session: AsyncSession,
    room_id: str,
    *,
    length: int | str | None = None,
    palette: str | Sequence[str] | None = None,
    repeats: bool | str | None = None,
    language: str | None = None,
    ceiling: int | None = None,
    round_timeout_s: int | None = None,
) -> Room:
    """Change a room's settings for its next rounds.

    Everything is validated before anything is written: length, palette (distinct emojis),
    repeats (a bool, or on/off as typed) and language (a shipped one, as typed: "ru", "pt-br")
    by codemojex.scoring (raising `scoring.InvalidSettings`), the ceiling and round timeout
    against codemojex.limits (raising `SettingOutOfRange`). The settings as they would be
    afterwards must be drawable: with repeats off, the palette (or the size of the palette
    drawn per round) must be at least the length, whichever of them is being changed; otherwise
    `scoring.InvalidSettings` (kind "repeats_palette") and nothing changes. `UnknownRoom` when
    there is no such room.
    """
    change = _parsed(length, palette, repeats, language, ceiling, round_timeout_s)
    async with uow(session):
        room = await lock_room(session, room_id)
        if room is None:
            raise UnknownRoom(room_id)
        if any(v is not None for v in (change.length, change.palette, change.repeats)):
            _check_drawable(room, change)
        change_settings(room, change)
    return room


def _parsed(
    length: int | str | None,
    palette: str | Sequence[str] | None,
    repeats: bool | str | None,
    language: str | None,
    ceiling: int | None,
    round_timeout_s: int | None,
) -> SettingsChange:
    new_length = scoring.parse_length(length) if length is not None else None
    new_repeats = scoring.parse_repeats(repeats) if repeats is not None else None
    new_language = scoring.parse_language(language) if language is not None else None
    new_palette: tuple[str, ...] | None = None
    if palette is not None:
        text = palette if isinstance(palette, str) else " ".join(palette)
        new_palette = scoring.parse_palette(text)
    if ceiling is not None and not LANES.ceiling_min <= ceiling <= LANES.ceiling_max:
        raise SettingOutOfRange(
            f"The limit must be from {LANES.ceiling_min} to {LANES.ceiling_max}."
        )
    if round_timeout_s is not None and not (
        GAME.round_timeout_s_min <= round_timeout_s <= GAME.round_timeout_s_max
    ):
        raise SettingOutOfRange(
            f"The round timeout must be from {GAME.round_timeout_s_min} to "
            f"{GAME.round_timeout_s_max} seconds."
        )
    return SettingsChange(
        length=new_length,
        palette=new_palette,
        repeats=new_repeats,
        language=new_language,
        ceiling=ceiling,
        round_timeout_s=round_timeout_s,
    )


def _check_drawable(room: Room, change: SettingsChange) -> None:
    """With repeats off, a round must be drawable from the palette as it would be after the
    change (`scoring.InvalidSettings` otherwise)."""
    if change.palette is not None:
        palette_size = len(change.palette)
    elif room.palette is None:
        palette_size = room.palette_size
    else:
        palette_size = len(room.palette_emojis or ())
    scoring.check_repeats(
        change.length if change.length is not None else room.length,
        palette_size,
        change.repeats if change.repeats is not None else room.repeats,
    )
