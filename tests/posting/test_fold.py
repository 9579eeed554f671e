"""Coalescing one chat's pending rows into messages (pure)."""

from __future__ import annotations

import operator
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from codemojex.posting.fold import MAX_MESSAGE, fold, split_text, tg_len


@dataclass
class Row:
    id: int
    text: str
    reply_to_message_id: int | None = None
    kind: str = "result"
    player_name: str | None = None
    thread_id: int | None = None
    markup: str | None = None


def test_quiet_room_replies_to_the_guess() -> None:
    [msg] = fold([Row(1, "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)", 77, player_name="Ann")])
    assert msg.reply_to == 77
    assert msg.row_ids == (1,)
    assert msg.text == "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)"


def test_busy_room_gets_one_message_naming_players() -> None:
    rows = [Row(i, f"r{i}", 100 + i, player_name=f"P{i}") for i in range(1, 31)]
    [msg] = fold(rows)
    assert msg.reply_to is None
    assert msg.row_ids == tuple(range(1, 31))
    assert msg.text.splitlines()[0] == "P1: r1"
    assert len(msg.text.splitlines()) == 30


def test_announcement_is_never_merged() -> None:
    rows = [Row(1, "a", player_name="A"), Row(2, "new round!", 9, kind="round"), Row(3, "b")]
    msgs = fold(rows)
    assert [m.row_ids for m in msgs] == [(1,), (2,), (3,)]
    assert msgs[1].text == "new round!"
    assert msgs[1].reply_to == 9


def test_long_backlog_splits_under_the_limit() -> None:
    line = "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 12)"
    rows = [Row(i, line, player_name="Somebody") for i in range(1, 400)]
    msgs = fold(rows)
    assert len(msgs) > 1
    assert all(tg_len(m.text) <= MAX_MESSAGE for m in msgs)
    assert [i for m in msgs for i in m.row_ids] == list(range(1, 400))
    # Packed: every message but the last is nearly full.
    assert all(tg_len(m.text) > MAX_MESSAGE - 100 for m in msgs[:-1])


def test_row_longer_than_a_message_is_split_without_breaking_emojis() -> None:
    family = "👨‍👩‍👧"
    rows = [Row(1, family * 2000)]
    msgs = fold(rows)
    assert len(msgs) > 1
    assert [m.row_ids for m in msgs][-1] == (1,)
    assert all(m.row_ids == () for m in msgs[:-1])
    assert "".join(m.text for m in msgs) == family * 2000
    assert all(m.text.count(family) * len(family) == len(m.text) for m in msgs)


# Rows of every length around the limit of 1,000 the property uses (a line that fits alone
# but not after the batch so far, one that fits exactly, one longer than a message), in
# characters Telegram counts as 1, 2 or 8: plain st.text is mostly short and rarely overflows.
_ROWS = st.one_of(
    st.text(min_size=1, max_size=40),
    st.builds(
        operator.mul,
        st.sampled_from(["a", "é", "🍎", "👨‍👩‍👧", "a\n"]),
        st.integers(min_value=60, max_value=1600),
    ),
)


@given(st.lists(_ROWS, min_size=1, max_size=12))
def test_every_row_once_in_order_and_under_limit(texts: list[str]) -> None:
    rows = [Row(i, t, player_name="n") for i, t in enumerate(texts)]
    msgs = fold(rows, limit=1000)
    assert [i for m in msgs for i in m.row_ids] == list(range(len(texts)))
    assert all(tg_len(m.text) <= 1000 for m in msgs)


@given(st.text(max_size=3000))
def test_split_text_keeps_everything(text: str) -> None:
    parts = split_text(text, 500)
    assert all(tg_len(p) <= 500 for p in parts)
    # Line breaks at cut points are dropped; the text otherwise survives intact.
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")


def test_monster_grapheme_is_cut() -> None:
    text = "e" + "\u0301" * 3000
    parts = split_text(text, 1000)
    assert all(tg_len(p) <= 1000 for p in parts)
    assert "".join(parts) == text


def test_a_message_goes_to_one_forum_topic() -> None:
    rows = [
        Row(1, "a", 10, player_name="A", thread_id=7),
        Row(2, "b", 11, player_name="B", thread_id=7),
        Row(3, "c", 12, player_name="C", thread_id=None),
        Row(4, "d", 13, player_name="D", thread_id=7),
    ]
    assert [(m.text, m.thread_id, m.row_ids) for m in fold(rows)] == [
        ("A: a\nB: b", 7, (1, 2)),
        ("C: c", None, (3,)),
        ("D: d", 7, (4,)),
    ]


def test_a_round_keeps_its_keyboard_and_its_removal_is_an_edit() -> None:
    keyboard = '{"inline_keyboard":[[{"text":"🍎","callback_data":"t1:0"}]]}'
    rows = [
        Row(1, "new round!", kind="round", thread_id=5, markup=keyboard),
        Row(2, "", 900, kind="keys_off"),
        Row(3, "x", 20, player_name="A", thread_id=5),
    ]
    announce, keys_off, result = fold(rows)
    assert (announce.markup, announce.thread_id, announce.keys_off) == (keyboard, 5, False)
    assert (keys_off.keys_off, keys_off.reply_to, keys_off.row_ids) == (True, 900, (2,))
    assert (result.text, result.markup, result.thread_id) == ("A: x", None, 5)


def test_a_tapped_guess_alone_names_its_player() -> None:
    # No message of the player's to reply to: the line says whose it is.
    [msg] = fold([Row(1, "🍎🍌🍇🍒 → 🟢⚫⚫⚫  (attempt 1)", None, player_name="Ann")])
    assert msg.text == "Ann: 🍎🍌🍇🍒 → 🟢⚫⚫⚫  (attempt 1)" and msg.reply_to is None
    # A win is never prefixed: it names the winner itself.
    [win] = fold([Row(2, "🏆 Ann cracked it", None, kind="win", player_name="Ann")])
    assert win.text == "🏆 Ann cracked it"
