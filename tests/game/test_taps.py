"""Tap to guess, the pure part: callback data, the keyboard, drafts."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from codemojex.game import taps
from codemojex.game.taps import TAP_ROW_MAX
from codemojex.scoring.room_settings import MAX_PALETTE

PALETTE = ("🍎", "🍌", "🍇", "🍒", "🍋", "🥝")


@given(st.integers(1, 2**63 - 1), st.sampled_from([*range(MAX_PALETTE), "b", "c"]))
def test_callback_data_names_a_round_and_a_button_in_at_most_64_bytes(
    round_id: int, action: taps.Action
) -> None:
    data = taps.tap_data(round_id, action)
    assert len(data.encode()) <= 64
    assert taps.parse_tap(data) == taps.Tap(round_id, action)


def test_data_we_did_not_write_is_refused() -> None:
    for data in ("", None, "t0:1", "t1:100", "t1:x", "t1:1 ", "x1:1", "t-1:1", "t1:1:1", "t01:1"):
        assert taps.parse_tap(data) is None, data


def test_the_keyboard_has_every_palette_emoji_then_backspace_and_clear() -> None:
    for size in range(4, MAX_PALETTE + 1):
        palette = tuple(chr(0x1F600 + i) for i in range(size))
        rows = json.loads(taps.keyboard(77, palette))["inline_keyboard"]
        assert all(len(row) <= TAP_ROW_MAX for row in rows)
        *emoji_rows, last = rows
        assert [b["text"] for row in emoji_rows for b in row] == list(palette)
        assert [b["text"] for b in last] == ["⌫", "✖"]
        assert max(map(len, emoji_rows)) - min(map(len, emoji_rows)) <= 1  # even rows
        datas = [taps.parse_tap(b["callback_data"]) for row in rows for b in row]
        assert [d.action for d in datas if d is not None] == [*range(size), "b", "c"]


def test_a_draft_grows_shrinks_clears_and_completes() -> None:
    step = taps.step((), 0, 4)
    assert step == taps.Step((0,)) and taps.show(step.draft, PALETTE, 4) == "🍎···"
    assert taps.step((0, 1), "b", 4) == taps.Step((0,))
    assert taps.step((), "b", 4) == taps.Step(())
    assert taps.step((0, 1), "c", 4) == taps.Step(())
    # The tap that completes the code returns it and leaves the draft as it was.
    done = taps.step((0, 1, 1), 5, 4)
    assert done == taps.Step((0, 1, 1), complete=(0, 1, 1, 5))
    assert taps.emojis_of(done.complete or (), PALETTE) == "🍎🍌🍌🥝"


def test_a_stored_draft_is_read_back_or_forgotten() -> None:
    assert taps.parse_draft(taps.draft_text((0, 5)), 6, 4) == (0, 5)
    assert taps.parse_draft(b"0,5", 6, 4) == (0, 5)
    for bad in (None, "", "x", "0,6", "0,-1", "0,1,2,3"):
        assert taps.parse_draft(bad, 6, 4) == (), bad
