"""game.rounds: drawing a round and revealing its secret, without a database."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from codemojex.game import texts
from codemojex.game.rounds import is_due, new_round, opened_before, reveal
from codemojex.locale import EN, Lang
from codemojex.scoring import draw_palette, draw_secret
from codemojex.values.types import ENDROUND, KIND_REVEAL, TIMEOUT, Origin

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_a_round_draws_palette_then_secret_from_the_rng() -> None:
    made = new_round(
        length=4, palette=None, palette_size=6, repeats=True, timeout_s=600,
        rng=random.Random(7), now=T0, language=EN,
    )  # fmt: skip
    expect = random.Random(7)
    palette = draw_palette(expect, 6)
    assert made.palette == palette
    assert made.secret == draw_secret(expect, palette, 4, repeats=True)
    assert (made.started_at, made.expires_at) == (T0, T0 + timedelta(seconds=600))
    assert made.announcement == texts.round_started(EN, palette, 4, 600, repeats=True)
    spanish = new_round(
        length=4, palette=None, palette_size=6, repeats=True, timeout_s=600,
        rng=random.Random(7), now=T0, language=Lang("es"),
    )  # fmt: skip
    assert spanish.announcement == texts.round_started(Lang("es"), palette, 4, 600)
    assert spanish.announcement.startswith("🎯 ¡Nueva ronda!")


def test_a_fixed_palette_is_kept_and_repeats_off_draws_distinct_emojis() -> None:
    fixed = ("🍎", "🍌", "🍇", "🍒", "🍋")
    for seed in range(50):
        made = new_round(
            length=5, palette=fixed, palette_size=6, repeats=False, timeout_s=60,
            rng=random.Random(seed), now=T0, language=EN,
        )  # fmt: skip
        assert made.palette == fixed and not made.repeats
        assert sorted(made.secret) == sorted(fixed)


def test_reveals_say_why_the_round_ended() -> None:
    timed_out = reveal(
        round_id=3, chat_id=-1, secret="🍎🍌🍇🍒", reason=TIMEOUT,
        started_at=T0, expires_at=T0 + timedelta(seconds=600), language=EN,
    )  # fmt: skip
    assert (timed_out.kind, timed_out.round_id, timed_out.chat_id) == (KIND_REVEAL, 3, -1)
    assert timed_out.text == texts.timed_out(EN, "🍎🍌🍇🍒", 600)
    ended = reveal(
        round_id=3, chat_id=-1, secret="🍎🍌🍇🍒", reason=ENDROUND,
        started_at=T0, expires_at=T0 + timedelta(seconds=600), language=Lang("uk"),
    )  # fmt: skip
    assert ended.text == texts.ended_by_admin(Lang("uk"), "🍎🍌🍇🍒")
    assert ended.text != texts.ended_by_admin(EN, "🍎🍌🍇🍒")  # the room's language
    assert ended.reply_to is None


def test_a_round_is_due_when_its_time_is_up() -> None:
    assert not is_due(T0, T0 - timedelta(seconds=1))
    assert is_due(T0, T0)
    assert is_due(T0, T0 + timedelta(seconds=1))


def test_a_command_ends_only_a_round_opened_before_it_was_sent() -> None:
    """By message ids in the chat when the round records its message (exact, whenever it
    started); else by when it started, against the whole second the command was sent in."""
    endround = Origin(chat_id=-5, message_id=100, sent_at=T0)
    later = T0 + timedelta(hours=1)
    for opener, before in ((99, True), (101, False)):
        assert (
            opened_before(endround, origin_chat_id=-5, origin_message_id=opener, started_at=later)
            is before
        )
    # No message of this chat (none recorded, or the group's chat before it was migrated).
    for chat in (None, -6):
        for started, before in (
            (T0 - timedelta(days=1), True),
            (T0 + timedelta(milliseconds=900), True),  # the command's second: before it
            (T0 + timedelta(seconds=1), False),
        ):
            assert (
                opened_before(
                    endround, origin_chat_id=chat, origin_message_id=None, started_at=started
                )
                is before
            )
