"""A room's settings, changed for its next rounds (the open round keeps its own): the rules
(`codemojex.scoring`, `codemojex.limits`) validate, the store locks the room and writes, in one
transaction opened here; and whether its scoring is paused (`pause_room`: the row, then the
lanes as the row says, `derived.pause`).

Given the admin command's audit row (`command`), a change is written only with that row, once
per message (`audit.first_time`): the same message delivered again after a later change
changes nothing (`CommandRepeated`, or False from `pause_room`).
"""

from __future__ import annotations

from collections.abc import Sequence

from codemojex import scoring
from codemojex.db.engine import Sessions
from codemojex.db.models import Room
from codemojex.db.store.errors import CommandRepeated, SettingOutOfRange, UnknownRoom
from codemojex.db.store.rooms import SettingsChange, change_settings, lock_room, set_paused
from codemojex.db.unit import uow
from codemojex.lanes import Lanes
from codemojex.limits import ROOM
from codemojex.usecases import derived
from codemojex.usecases.audit import Audit, Committed, first_time, not_told


async def update_room_settings(
    sessions: Sessions,
    room_id: str,
    *,
    length: int | str | None = None,
    palette: str | Sequence[str] | None = None,
    repeats: bool | str | None = None,
    language: str | None = None,
    ceiling: int | None = None,
    round_timeout_s: int | None = None,
    command: Audit | None = None,
) -> Room:
    """Change a room's settings for its next rounds (with `command`, once per its message:
    `CommandRepeated` when it took effect before, and nothing is checked or written).

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
    async with uow(sessions) as tx:
        if command is not None and not await first_time(tx, command):
            raise CommandRepeated(command.origin.chat_id, command.origin.message_id)
        room = await lock_room(tx, room_id)
        if room is None:
            raise UnknownRoom(room_id)
        if any(v is not None for v in (change.length, change.palette, change.repeats)):
            _check_drawable(room, change)
        change_settings(room, change)
    return room


async def pause_room(
    sessions: Sessions,
    lanes: Lanes,
    room_id: str,
    paused: bool,
    *,
    command: Audit | None = None,
    committed: Committed = not_told,
) -> bool:
    """Pause (or resume) the scoring of a room: its row, then the lanes as the row says. With
    `command`, once per its message: False when it took effect before (the lanes are still
    made what the row says). `committed` is awaited once the row committed, before the lanes
    (as in `moderation`). A room the database does not know (the operators' page may name one
    the lanes know) is paused in the lanes alone."""
    first, known = True, True
    async with uow(sessions) as tx:
        if command is not None:
            first = await first_time(tx, command)
        if first:
            try:
                await set_paused(tx, room_id, paused)
            except UnknownRoom:
                known = False
    await committed()
    if not known:
        await (lanes.pause(room_id) if paused else lanes.resume(room_id))
        return first
    await derived.pause(sessions, lanes, room_id)
    return first


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
    if ceiling is not None and not ROOM.ceiling_min <= ceiling <= ROOM.ceiling_max:
        raise SettingOutOfRange(f"The limit must be from {ROOM.ceiling_min} to {ROOM.ceiling_max}.")
    if round_timeout_s is not None and not (
        ROOM.round_timeout_s_min <= round_timeout_s <= ROOM.round_timeout_s_max
    ):
        raise SettingOutOfRange(
            f"The round timeout must be from {ROOM.round_timeout_s_min} to "
            f"{ROOM.round_timeout_s_max} seconds."
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
