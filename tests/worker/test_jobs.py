"""The guess payload: compact, round-trips every kind of emoji and name, reads an older bot's."""

from __future__ import annotations

import pytest

from codemojex.values.jobs import GuessJob

EMOJIS = (
    "👨‍👩‍👧‍👦",  # ZWJ family
    "👍🏽",  # skin tone
    "🇫🇷",  # flag
    "1️⃣",  # keycap
    "❤️",  # with U+FE0F
    "🍎",
)


@pytest.mark.parametrize("name", [None, "Ann", "Zoë: the 🍎 one", "a" * 64])
def test_round_trip_keeps_every_emoji_and_the_name_whole(name: str | None) -> None:
    job = GuessJob(round_id=123_456, message_id=987_654_321, emojis=EMOJIS, user_id=42, name=name)
    assert GuessJob.decode(job.encode()) == job


def test_a_typical_guess_is_small_enough_for_the_compact_hash_encoding() -> None:
    """Four emojis of a default palette, with large ids, stay under Redis's default
    hash-max-listpack-value (64): the job's hash is then a listpack, not a hashtable
    (`bench/lanes.py` measures the memory). The name travels once per player."""
    job = GuessJob(
        round_id=1_234_567,
        message_id=2_147_483_647,
        emojis=("🍎", "🍌", "🍇", "🍒"),
        user_id=7_999_999_999,
    )
    assert len(job.encode()) <= 64


def test_the_payload_of_an_older_bot_is_still_read() -> None:
    """`<round>:<message>:<emojis>`: no user (its player's row exists: that bot wrote it)."""
    old = "9:42:🍎🍌".encode()
    assert GuessJob.decode(old) == GuessJob(round_id=9, message_id=42, emojis=("🍎", "🍌"))


@pytest.mark.parametrize(
    "payload",
    [b"", b"12", b"x:1:\xf0\x9f\x8d\x8e", b"1:2:x:\xf0\x9f\x8d\x8e", b"\xff\xfe", b"{not json"],
)
def test_what_is_not_a_guess_raises_value_error(payload: bytes) -> None:
    with pytest.raises(ValueError):
        GuessJob.decode(payload)
