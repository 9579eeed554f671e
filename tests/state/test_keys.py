"""Every `cmx:{q}:` key name of the state is built by state/keys.py from checked ids only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import pytest

from codemojex.lanes import LaneError
from codemojex.state.keys import Keys
from codemojex.values import ids


def test_flood_keys_are_built_from_player_ids_only() -> None:
    lane = ids.mint(ids.PLAYER)
    assert Keys("cm").notice(lane) == f"cmx:{{cm}}:flood:{lane}"
    with pytest.raises(ValueError):
        Keys("cm").notice("PLR}:*evil")


def test_every_key_carries_the_queue_hash_tag() -> None:
    keys = Keys("cm")
    lane = ids.mint(ids.PLAYER)
    names = [
        keys.answer_budget(-100123, 2001),
        keys.group_members(-100123),
        keys.notice(lane, "paused"),
        keys.tap_draft(12, 2001),
        keys.tap_rate(2001),
    ]
    assert names == [
        "cmx:{cm}:answers:-100123:2001",
        "cmx:{cm}:members:-100123",
        f"cmx:{{cm}}:paused:{lane}",
        "cmx:{cm}:tap:draft:12:2001",
        "cmx:{cm}:tap:rate:2001",
    ]


def test_callback_query_ids_are_hashed_into_key_names() -> None:
    key = Keys("cm").tap_seen("}:*evil\n")
    assert key.startswith("cmx:{cm}:tap:seen:") and key.removeprefix("cmx:{cm}:tap:seen:").isalnum()
    assert Keys("cm").tap_seen("42") == Keys("cm").tap_seen("42") != key


@pytest.mark.parametrize("bad", ["-1", "1}:x", 1.0, True, None])
def test_chat_and_user_ids_must_be_integers(bad: Any) -> None:
    keys = Keys("cm")
    builders: list[Callable[[Any], str]] = [
        keys.group_members,
        keys.tap_rate,
        keys.poller,
        lambda value: keys.command_seen(value, 7),
        lambda value: keys.answer_budget(value, 7),
        lambda value: keys.answer_budget(-7, value),
    ]
    for build in builders:
        with pytest.raises(ValueError):
            build(bad)


def test_the_queue_name_is_checked_like_the_lanes_one() -> None:
    with pytest.raises(LaneError):
        Keys("Bad}{Queue")
    with pytest.raises(ValueError):
        Keys("cm").notice(ids.mint(ids.PLAYER), "shout")  # type: ignore[arg-type]


def test_the_daily_boards_keys_are_per_day() -> None:
    keys = Keys("cm")
    day = date(2026, 3, 14)
    assert [
        keys.daily_board(day),
        keys.daily_played(day),
        keys.daily_built(day),
        keys.daily_rebuild(day),
    ] == [
        "cmx:{cm}:daily:board:20260314",
        "cmx:{cm}:daily:played:20260314",
        "cmx:{cm}:daily:built:20260314",
        "cmx:{cm}:daily:rebuild:20260314",
    ]
    for bad in ("20260314", "2026-03-14}:x", 20260314, None):
        with pytest.raises(ValueError):
            keys.daily_board(bad)  # type: ignore[arg-type]
