"""The daily code's decisions, pure: days and midnights, the puzzle, the card, streaks, the
histogram, the world board's order, and `decide` on a daily round (the attempts cap, the
finish, the card and its Share button, "come back tomorrow")."""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.game import daily, texts
from codemojex.game.decide import decide
from codemojex.locale import EN, LANGUAGES, Lang
from codemojex.scoring import EXACT, MISPLACED, MISS, feedback
from codemojex.values.batch import (
    Attempt,
    BatchState,
    Closing,
    PlayerState,
    RoundState,
    StoredGuess,
)
from codemojex.values.daily import (
    DailyRound,
    Finish,
    Record,
    Row,
    decode_histogram,
    decode_rows,
    empty_histogram,
    encode_histogram,
    encode_rows,
)
from codemojex.values.types import (
    KIND_CARD,
    KIND_KEYS_OFF,
    KIND_LATE,
    KIND_RESULT,
    OUT_OF_ATTEMPTS,
    SOLVED,
)

DAY = date(2026, 3, 14)
NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
PALETTE = ("🍎", "🍌", "🍇", "🍒", "🍋", "🥝")
SECRET = ("🍎", "🍌", "🍇", "🍒")
WRONG = [("🍋", "🍌", "🍇", "🍒"), ("🥝", "🥝", "🥝", "🥝"), ("🍒", "🍇", "🍌", "🍎")]
ROOM, PLAYER, USER, CHAT = "ROMdaily", "PLRann", 4242, 4242


# --- days -----------------------------------------------------------------------------------


def test_the_day_turns_at_midnight_utc() -> None:
    last_second = datetime(2026, 3, 14, 23, 59, 59, tzinfo=UTC)
    assert daily.day_of(last_second) == DAY
    assert daily.day_of(last_second + timedelta(seconds=1)) == DAY + timedelta(days=1)
    # another zone's clock says another date; the daily's day is UTC's
    tokyo = datetime(2026, 3, 15, 8, 0, tzinfo=UTC).astimezone(datetime.now().astimezone().tzinfo)
    assert daily.day_of(tokyo) == DAY + timedelta(days=1)
    assert daily.next_code_at(NOON) == datetime(2026, 3, 15, tzinfo=UTC)
    assert daily.seconds_to_next(NOON) == 12 * 3600
    assert daily.seconds_to_next(last_second + timedelta(milliseconds=500)) == 1
    assert daily.puzzle_number(DAY, DAY) == 1
    assert daily.puzzle_number(DAY + timedelta(days=41), DAY) == 42


def test_a_puzzle_is_drawn_from_the_random_source_it_is_given() -> None:
    one = daily.draw_puzzle(random.Random(7), DAY, 3)
    again = daily.draw_puzzle(random.Random(7), DAY, 3)
    assert one == again  # the source decides, not the date
    assert (one.length, one.max_attempts, len(one.palette)) == (4, 8, 6)
    assert len(set(one.palette)) == 6 and set(one.secret) <= set(one.palette)
    others = {daily.draw_puzzle(random.SystemRandom(), DAY, 3).secret for _ in range(20)}
    assert len(others) > 1  # the same day does not make the same code
    assert "secret" not in repr(one) and "".join(one.secret) not in repr(one)


# --- rows, records, histogram ---------------------------------------------------------------


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=8))
def test_rows_survive_their_storage(rows: list[tuple[int, int]]) -> None:
    assert decode_rows(encode_rows(rows)) == tuple(rows)


def test_a_row_is_pegs_only() -> None:
    assert daily.pegs((2, 1), 4) == EXACT * 2 + MISPLACED + MISS
    assert daily.pegs((0, 0), 4) == MISS * 4


def record(*days: tuple[int, int, bool]) -> Record:
    """The record after these finishes: (day offset, attempts, cracked)."""
    out = Record()
    for offset, attempts, cracked in days:
        out = daily.record_after(out, DAY + timedelta(days=offset), attempts, cracked)
    return out


def test_a_streak_counts_consecutive_cracked_days() -> None:
    assert record((0, 3, True)).streak == 1
    three = record((0, 3, True), (1, 5, True), (2, 2, True))
    assert (three.streak, three.best, three.last_cracked) == (3, 3, DAY + timedelta(days=2))
    # a day without a crack ends the run; the best stays
    gap = record((0, 3, True), (1, 5, True), (3, 4, True))
    assert (gap.streak, gap.best) == (1, 2)
    missed = record((0, 3, True), (1, 5, True), (2, 8, False))
    assert (missed.streak, missed.best, missed.last_cracked) == (0, 2, DAY + timedelta(days=1))
    # the same day twice adds nothing (a finish recorded again)
    assert record((0, 3, True), (0, 3, True)).streak == 1


def test_an_earlier_days_finish_recorded_after_a_later_crack_leaves_the_streak() -> None:
    # a guess taken before a midnight, held up in the lanes past the next day's crack
    later = record((0, 3, True), (2, 2, True))
    for cracked in (True, False):
        out = daily.record_after(later, DAY + timedelta(days=1), 4, cracked)
        assert (out.streak, out.best, out.last_cracked) == (1, 1, DAY + timedelta(days=2))
        assert out.played == 3


def test_a_streak_shown_today_lapses_after_a_day_without_a_crack() -> None:
    two = record((0, 3, True), (1, 4, True))
    tomorrow = DAY + timedelta(days=1)
    assert daily.streak_on(two, tomorrow) == 2
    assert daily.streak_on(two, tomorrow + timedelta(days=1)) == 2  # today's may come yet
    assert daily.streak_on(two, tomorrow + timedelta(days=2)) == 0
    assert daily.streak_on(Record(), DAY) == 0


def test_the_histogram_counts_attempts_and_misses() -> None:
    mixed = record((0, 3, True), (1, 3, True), (2, 1, True), (3, 8, False), (4, 8, True))
    assert mixed.histogram == (1, 0, 2, 0, 0, 0, 0, 1, 1)
    assert (mixed.played, mixed.cracked) == (5, 4)
    stored = encode_histogram(mixed.histogram)
    assert decode_histogram(stored) == mixed.histogram
    assert decode_histogram(None) == empty_histogram()
    # a histogram of fewer attempts keeps its counts and its misses
    assert decode_histogram("1,2,3", 4) == (1, 2, 0, 0, 3)
    shown = texts.daily_histogram(mixed.histogram)
    assert shown.splitlines()[0] == "1 █████ 1"
    assert shown.splitlines()[2] == "3 ██████████ 2"
    assert shown.splitlines()[-1] == "X █████ 1"
    assert shown.splitlines()[1] == "2 ▏ 0"


# --- the world board's order ----------------------------------------------------------------


def finish(attempts: int, cracked: bool, at: datetime, user: int = 1) -> Finish:
    return Finish(DAY, user, attempts, cracked, at)


def test_the_board_ranks_fewer_attempts_then_earlier_finishes() -> None:
    early, late = NOON - timedelta(hours=11), NOON + timedelta(hours=11)
    order = [
        finish(2, True, late),
        finish(3, True, early),
        finish(3, True, late),
        finish(8, True, early),
        finish(8, False, early),
        finish(8, False, late),
    ]
    scores = [daily.board_score(f) for f in order]
    assert scores == sorted(scores) and len(set(scores)) == len(scores)
    assert [daily.attempts_of(s) for s in scores] == [2, 3, 3, 8, 9, 9]
    cracked = [s < daily.cracked_below() for s in scores]
    assert cracked == [True, True, True, True, False, False]
    assert all(s < 2**53 for s in scores)  # exact in a sorted set's double


# --- texts ------------------------------------------------------------------------------------


def test_the_card_shows_pegs_never_the_code() -> None:
    rows = [(0, 2), (2, 1), (4, 0)]
    card = daily.card(EN, 12, rows, length=4, max_attempts=8, cracked=True, streak=3)
    lines = card.splitlines()
    assert lines[0] == "Codemojex daily #12 3/8"
    assert lines[1:4] == [daily.pegs(row, 4) for row in rows]
    assert lines[4] == texts.daily_card(EN, 12, [], 8, cracked=False, streak=3).splitlines()[1]
    assert not set("".join(PALETTE)) & set(card)
    missed = daily.card(EN, 12, rows, length=4, max_attempts=8, cracked=False, streak=0)
    assert missed.splitlines()[0] == "Codemojex daily #12 X/8"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_card_header_is_the_same_in_every_language(lang: Lang) -> None:
    card = daily.card(lang, 5, [(4, 0)], length=4, max_attempts=8, cracked=True, streak=1)
    assert card.splitlines()[0] == "Codemojex daily #5 1/8"
    assert texts.daily_puzzle(lang, 5, PALETTE, 4, 8).count("🍎 🍌 🍇 🍒 🍋 🥝") == 1


def test_times_are_said_in_their_two_largest_units() -> None:
    assert texts.span(EN, 5 * 3600 + 12 * 60 + 5) == "5 hours 12 minutes"
    assert texts.span(EN, 130) == "2 minutes 10 seconds"
    assert texts.span(EN, 3600) == "1 hour"
    assert texts.span(EN, 3601) == "1 hour"
    assert texts.span(EN, 40) == "40 seconds"
    assert texts.span(EN, 0) == "0 seconds"
    assert texts.time_left(EN, 61) == "2 minutes"  # up to whole minutes: never too early
    assert texts.daily_next_code(EN, 5 * 3600 + 1) == "Next code in 5 hours 1 minute."


def test_the_daily_boards_read_line_by_line() -> None:
    class Row:
        def __init__(self, name: str, attempts: int, cracked: bool, seconds: int | None):
            self.name, self.attempts, self.cracked, self.seconds = name, attempts, cracked, seconds

    board = texts.daily_group_board(
        EN,
        7,
        [Row("Alice", 3, True, 130), Row("Bob", 8, False, 600), Row("Dave", 2, False, None)],
        1234,
        8,
    )
    assert board.splitlines() == [
        "📅 Daily #7 in this chat",
        "🥇 Alice: 3/8 · 2 minutes 10 seconds",
        "· Bob: X/8 · 10 minutes",
        "Dave: still playing",
        "1234 players in the world played it today.",
    ]
    assert texts.daily_group_board(EN, 7, [], 1, 8).splitlines()[1] == (
        "1 player in the world played it today."
    )
    top = texts.daily_world_top(
        EN,
        7,
        [("Ann", 2), ("Bob", 3), ("Cat", 3), ("Dan", 4)],
        8,
        "You: place 4 of 9 who cracked it.",
    )
    assert top.splitlines()[1:] == [
        "🥇 Ann: 2/8",
        "🥈 Bob: 3/8",
        "🥉 Cat: 3/8",
        "4. Dan: 4/8",
        "You: place 4 of 9 who cracked it.",
    ]
    assert texts.daily_world_top(EN, 7, [], 8, None) == "Nobody has cracked Daily #7 yet."


# --- decide on a daily round ------------------------------------------------------------------


def daily_round(
    *,
    rows: tuple[Row, ...] = (),
    finished_at: datetime | None = None,
    ended: bool = False,
    end_reason: str | None = None,
    max_attempts: int = 8,
    deadline_ms: int | None = None,
) -> RoundState:
    progress = DailyRound(
        day=DAY,
        number=7,
        tg_user_id=USER,
        started_at=NOON - timedelta(minutes=5),
        rows=rows,
        finished_at=finished_at,
        cracked=False,
        record=Record(streak=2, best=4, last_cracked=DAY - timedelta(days=1)),
    )
    return RoundState(
        id=1,
        room_id=ROOM,
        chat_id=CHAT,
        length=4,
        palette=frozenset(PALETTE),
        secret=SECRET,
        ended=ended,
        end_reason=end_reason,
        winning_guess_id=None,
        language=EN,
        max_attempts=max_attempts,
        daily=progress,
        deadline_ms=deadline_ms,
    )


def batch_state(
    rnd: RoundState, *, scored: int = 0, recorded: dict[str, StoredGuess] | None = None
) -> BatchState:
    return BatchState(
        rounds={rnd.id: rnd},
        players={PLAYER: PlayerState(ROOM, "Ann")},
        banned=frozenset(),
        scored_before={(rnd.id, PLAYER): scored} if scored else {},
        recorded=recorded or {},
    )


def guess(emojis: tuple[str, ...], n: int, taken: datetime | None = None) -> Attempt:
    taken_ms = None if taken is None else int(taken.timestamp() * 1000)
    return Attempt(f"JOB{n:04d}", 1, PLAYER, ROOM, emojis, reply_to=100 + n, taken_ms=taken_ms)


def test_a_daily_guess_is_scored_like_any_and_books_no_points() -> None:
    decision = decide([guess(WRONG[0], 1), guess(WRONG[1], 2)], batch_state(daily_round()), NOON)
    assert [v.kind for v in decision.verdicts] == ["scored", "scored"]
    assert [m.kind for m in decision.messages] == [KIND_RESULT, KIND_RESULT]
    assert decision.messages[0].text == texts.result_line(
        EN, WRONG[0], feedback(WRONG[0], SECRET), 1
    )
    assert decision.tallies == {} and decision.closings == []
    [progress] = decision.daily
    assert progress.rows == ((3, 0), (0, 0)) and progress.finish is None


@pytest.mark.parametrize("share", [True, False])
def test_cracking_it_posts_the_card(share: bool) -> None:
    earlier = ((3, 0), (0, 0))
    rnd = daily_round(rows=earlier)
    decision = decide([guess(SECRET, 3)], batch_state(rnd, scored=2), NOON, share=share)
    [verdict] = decision.verdicts
    assert verdict.won and verdict.round_closed and verdict.points == 0
    assert verdict.finish == Finish(DAY, USER, 3, True, NOON)
    assert decision.closings == [Closing(1, PLAYER, "JOB0003", SOLVED)]
    result, card, keys_off = decision.messages
    assert (result.kind, card.kind, keys_off.kind) == (KIND_RESULT, KIND_CARD, KIND_KEYS_OFF)
    assert card.chat_id == CHAT and card.reply_to is None
    assert "Codemojex daily #7 3/8" in card.text.splitlines()
    assert texts.daily_cracked(EN, 3) in card.text
    assert "🔥 Streak: 3 days" in card.text  # yesterday's run of 2, and today
    assert texts.daily_next_code(EN, 12 * 3600) in card.text
    if share:
        markup = json.loads(card.markup or "")
        [[button]] = markup["inline_keyboard"]
        assert button == {"text": "Share", "switch_inline_query": daily.SHARE_QUERY}
    else:
        assert card.markup is None
    [progress] = decision.daily
    assert progress.rows == (*earlier, (4, 0))
    assert progress.record == Record(3, 4, DAY, (0, 0, 1, 0, 0, 0, 0, 0, 0))


def test_the_last_attempt_ends_it_and_the_code_is_shown_only_when_the_day_ends() -> None:
    rows = tuple((0, 0) for _ in range(7))
    decision = decide([guess(WRONG[0], 8)], batch_state(daily_round(rows=rows), scored=7), NOON)
    [verdict] = decision.verdicts
    assert verdict.round_closed and not verdict.won
    assert verdict.finish == Finish(DAY, USER, 8, False, NOON)
    assert decision.closings == [Closing(1, None, None, OUT_OF_ATTEMPTS)]
    card = next(m for m in decision.messages if m.kind == KIND_CARD)
    # a second account could lose on purpose: no emoji of the code, but when it is shown
    assert not set(PALETTE) & set(card.text)
    assert card.text.startswith(texts.daily_missed(EN, 12 * 3600))
    assert "in 12 hours" in card.text and "00:00 UTC" in card.text
    assert "Codemojex daily #7 X/8" in card.text.splitlines()
    assert "🔥 Streak: 0 days" in card.text
    [progress] = decision.daily
    assert progress.record is not None and progress.record.streak == 0
    assert progress.record.best == 4


def test_guesses_after_the_finish_are_told_to_come_back_tomorrow() -> None:
    # in the same batch: the round closed with the crack
    decision = decide(
        [guess(SECRET, 1), guess(WRONG[0], 2), guess(WRONG[1], 3)],
        batch_state(daily_round()),
        NOON,
    )
    assert [v.kind for v in decision.verdicts] == ["scored", "late", "late"]
    late = [m for m in decision.messages if m.kind == KIND_LATE]
    assert [m.text for m in late] == [texts.daily_come_back(EN, 12 * 3600)] * 2
    # in a later batch: the round is over
    over = daily_round(rows=((4, 0),), finished_at=NOON, ended=True, end_reason=SOLVED)
    again = decide([guess(WRONG[2], 4)], batch_state(over, scored=1), NOON)
    assert again.verdicts[0].kind == "late"
    assert again.messages[0].text == texts.daily_come_back(EN, 12 * 3600)
    assert again.daily == []


def test_no_ninth_attempt() -> None:
    """A round open with its cap reached (a cap lowered, a race) takes no more guesses."""
    rows = tuple((0, 0) for _ in range(8))
    decision = decide([guess(WRONG[0], 9)], batch_state(daily_round(rows=rows), scored=8), NOON)
    assert decision.verdicts[0].kind == "late"
    assert decision.messages[0].text == texts.daily_come_back(EN, 12 * 3600)


def test_a_guess_after_its_day_ran_out_is_sent_to_todays() -> None:
    expired = daily_round(rows=((1, 0),), ended=True, end_reason="timeout")
    decision = decide([guess(WRONG[0], 2)], batch_state(expired, scored=1), NOON)
    assert decision.messages[0].text == texts.daily_send_first(EN)


MIDNIGHT = datetime(2026, 3, 15, tzinfo=UTC)
DEADLINE_MS = int(MIDNIGHT.timestamp() * 1000)


def closed_by_its_day(rows: tuple[Row, ...] = ()) -> RoundState:
    """A daily round the day's end closed unfinished (the timer, or the next day's /daily)."""
    return daily_round(rows=rows, ended=True, end_reason="timeout", deadline_ms=DEADLINE_MS)


def test_a_crack_taken_before_midnight_counts_for_its_day_though_scored_after() -> None:
    taken = MIDNIGHT - timedelta(milliseconds=500)
    after = MIDNIGHT + timedelta(seconds=3)
    decision = decide(
        [guess(SECRET, 2, taken)], batch_state(closed_by_its_day(((1, 0),)), scored=1), after
    )
    [verdict] = decision.verdicts
    assert verdict.kind == "scored" and verdict.won and verdict.round_closed
    # its day's finish, at the time it was taken: the world board and the record as before
    assert verdict.finish == Finish(DAY, USER, 2, True, taken)
    assert decision.closings == [Closing(1, PLAYER, "JOB0002", SOLVED)]
    [progress] = decision.daily
    assert progress.record == Record(3, 4, DAY, (0, 1, 0, 0, 0, 0, 0, 0, 0))
    card = next(m for m in decision.messages if m.kind == KIND_CARD)
    assert "🔥 Streak: 3 days" in card.text
    assert card.text.endswith(texts.daily_new_code_out(EN))  # not "next code in 24 hours"


def test_a_miss_scored_after_midnight_shows_the_code_its_day_being_over() -> None:
    rows = tuple((0, 0) for _ in range(7))
    taken = MIDNIGHT - timedelta(seconds=2)
    state = batch_state(closed_by_its_day(rows), scored=7)
    decision = decide([guess(WRONG[0], 8, taken)], state, MIDNIGHT + timedelta(seconds=1))
    [verdict] = decision.verdicts
    assert verdict.finish == Finish(DAY, USER, 8, False, taken)
    card = next(m for m in decision.messages if m.kind == KIND_CARD)
    assert card.text.startswith(texts.daily_missed_over(EN, 7, SECRET))


@pytest.mark.parametrize("taken", [MIDNIGHT, MIDNIGHT + timedelta(seconds=1), None])
def test_a_guess_not_known_to_be_taken_before_midnight_is_sent_to_todays(
    taken: datetime | None,
) -> None:
    decision = decide(
        [guess(SECRET, 2, taken)],
        batch_state(closed_by_its_day(((1, 0),)), scored=1),
        MIDNIGHT + timedelta(seconds=3),
    )
    assert decision.verdicts[0].kind == "late"
    assert decision.messages[0].text == texts.daily_send_first(EN)
    assert decision.daily == [] and decision.closings == []


def test_a_daily_over_before_midnight_takes_nothing_more_after_it() -> None:
    # finished (out of attempts at 23:00): a guess taken before midnight is no ninth attempt
    rows = tuple((0, 0) for _ in range(8))
    over = daily_round(
        rows=rows,
        finished_at=MIDNIGHT - timedelta(hours=1),
        ended=True,
        end_reason=OUT_OF_ATTEMPTS,
        deadline_ms=DEADLINE_MS,
    )
    late = decide(
        [guess(SECRET, 9, MIDNIGHT - timedelta(seconds=1))],
        batch_state(over, scored=8),
        MIDNIGHT + timedelta(seconds=1),
    )
    assert late.verdicts[0].kind == "late"
    assert late.messages[0].text == texts.daily_send_first(EN)


def test_the_finishing_guess_delivered_again_reports_its_finish_again() -> None:
    at = NOON - timedelta(minutes=1)
    over = daily_round(rows=((0, 0), (4, 0)), finished_at=at, ended=True, end_reason=SOLVED)
    recorded = {
        "JOB0001": StoredGuess(1, 0, 0, 1, False),
        "JOB0002": StoredGuess(1, 4, 0, 2, False),
    }
    decision = decide(
        [guess(WRONG[1], 1), guess(SECRET, 2)], batch_state(over, recorded=recorded), NOON
    )
    first, last = decision.verdicts
    assert first.duplicate and first.finish is None
    assert last.duplicate and last.finish is not None
    assert last.finish.finished_at == at and last.finish.attempts == 2
    assert decision.messages == [] and decision.daily == []
