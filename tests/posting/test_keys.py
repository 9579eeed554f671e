"""Every key name of posting (the pace, the sender) is built by posting/keys.py from integers
only, under the queue's hash tag."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from codemojex.lanes import LaneError
from codemojex.posting.keys import Keys, bot_id


def test_every_key_carries_the_queue_hash_tag() -> None:
    keys = Keys("cm")
    names = [
        keys.chat_pace(-100123),
        keys.group_minute(-100123),
        keys.bot_second(77),
        keys.bot_rate(77),
        keys.bot_block(77),
        keys.ring,
        keys.dirty,
        keys.cool,
        keys.chat_block(-100123),
        keys.chat_answers(-100123),
        keys.chat_lease(-100123),
        keys.sending(7),
        keys.posted(7),
    ]
    assert names == [
        "cmx:{cm}:pace:c:-100123",
        "cmx:{cm}:pace:m:-100123",
        "cmx:{cm}:pace:b:77:s",
        "cmx:{cm}:pace:b:77:rate",
        "cmx:{cm}:pace:b:77:block",
        "cmx:{cm}:send:ring",
        "cmx:{cm}:send:dirty",
        "cmx:{cm}:send:cool",
        "cmx:{cm}:pace:block:c:-100123",
        "cmx:{cm}:pace:a:-100123",
        "cmx:{cm}:send:lease:-100123",
        "cmx:{cm}:send:sending:7",
        "cmx:{cm}:send:posted:7",
    ]


@pytest.mark.parametrize("bad", ["-1", "1}:x", 1.0, True, None])
def test_chat_and_row_ids_must_be_integers(bad: Any) -> None:
    keys = Keys("cm")
    builders: list[Callable[[Any], str]] = [
        keys.chat_pace,
        keys.group_minute,
        keys.chat_block,
        keys.chat_answers,
        keys.chat_lease,
        keys.sending,
        keys.posted,
        keys.bot_second,
        keys.bot_rate,
        keys.bot_block,
    ]
    for build in builders:
        with pytest.raises(ValueError):
            build(bad)


def test_the_queue_name_is_checked_like_the_lanes_one() -> None:
    with pytest.raises(LaneError):
        Keys("Bad}{Queue")


def test_a_bots_id_is_the_head_of_its_token() -> None:
    assert bot_id("123456:ABC-def") == 123456
    assert bot_id("not a token") == 0
