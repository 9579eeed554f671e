"""The daily code, pure (no I/O): one code for the whole world each UTC day.

What is decided here: which day it is and when the next code comes (UTC midnights), the
puzzle's number, the day's palette and secret (drawn from a random source the caller gives:
`random.SystemRandom()` in production, so the code cannot be derived from the date), the
feedback rows a card shows, a player's record (streak and histogram) after a finish, the world
board's order, and the messages a finish posts. `decide` scores a daily round's guesses like any
other round's and calls `finish` when its last attempt is used or it is cracked.

A day ends at midnight UTC, and what was taken before still counts: a guess the bot took before
it is scored against its day even when it is scored after (its round closed by the round timer
or by the player's next /daily, `decide` says how), and the record comes out as if it had been
scored when taken. A day's code is shown to those who did not crack it only once the day is
over (the card of a miss says when; the next day's puzzle shows it): before, a second account
could lose on purpose and read it.

A player's daily record: `streak` is the run of consecutive UTC days with a cracked daily up to
`last_cracked`; it still counts the day after (today's code may be cracked yet) and is over after
that (`streak_on`). The histogram counts finished dailies by attempts (index 0: cracked in one,
…, index max-1: in max) and, last, the ones not cracked.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Final

from codemojex.game import texts
from codemojex.locale import Lang
from codemojex.scoring import Feedback, draw_palette, draw_secret
from codemojex.values.daily import (
    ATTEMPTS,
    LENGTH,
    DailyRound,
    Finish,
    Progress,
    Puzzle,
    Record,
    Row,
)
from codemojex.values.types import KIND_CARD, Message

# The daily code's palette (its length and attempts: values/daily.py).
PALETTE_SIZE: Final = 6
DAY: Final = timedelta(days=1)
# What a card's Share button asks Telegram to type after the bot's name in the chosen chat.
SHARE_QUERY: Final = "daily"

# --- days ---------------------------------------------------------------------------------------


def day_of(now: datetime) -> date:
    """The UTC day `now` is in: the day whose code is played."""
    return now.astimezone(UTC).date()


def day_start(day: date) -> datetime:
    """00:00 UTC of `day`."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def next_code_at(now: datetime) -> datetime:
    """When the next code comes: the next 00:00 UTC. A daily round is open until then."""
    return day_start(day_of(now) + DAY)


def seconds_to_next(now: datetime) -> int:
    """Whole seconds (rounded up) until the next code."""
    return max(0, math.ceil((next_code_at(now) - now).total_seconds()))


def puzzle_number(day: date, first_day: date) -> int:
    """#N of `day`'s puzzle: 1 for the deployment's first daily, then one more each day."""
    return (day - first_day).days + 1


# --- the puzzle ---------------------------------------------------------------------------------


def draw_puzzle(rng: random.Random, day: date, number: int) -> Puzzle:
    """A fresh palette of PALETTE_SIZE emojis and a secret of LENGTH of them (they may repeat,
    as in groups). Drawn once per day: the store keeps the first one drawn (race-free), so
    every process and every player sees that one."""
    palette = draw_palette(rng, PALETTE_SIZE)
    return Puzzle(day, number, palette, draw_secret(rng, palette, LENGTH, repeats=True))


# --- feedback rows ------------------------------------------------------------------------------


def pegs(row: Row, length: int) -> str:
    """One row of a card: 🟢 per exact, 🟡 per misplaced, ⚫ the rest (no palette emoji)."""
    return Feedback(row[0], row[1], length).pegs


# --- a player's record --------------------------------------------------------------------------


def streak_on(record: Record, today: date) -> int:
    """The current streak as of `today`: the stored run while it may still go on (its last
    crack was today or yesterday), else 0."""
    if record.last_cracked is None or (today - record.last_cracked).days > 1:
        return 0
    return record.streak


def record_after(record: Record, day: date, attempts: int, cracked: bool) -> Record:
    """The record once `day`'s daily finished (`attempts` used, `cracked` or not)."""
    histogram = list(record.histogram)
    histogram[attempts - 1 if cracked else -1] += 1
    if record.last_cracked is not None and day < record.last_cracked:
        # An earlier day's finish recorded after a later day's crack (its guess taken before
        # its midnight, held up in the lanes past the next day's): the run that later crack
        # made stands as it was counted.
        return replace(record, histogram=tuple(histogram))
    if not cracked:
        return replace(record, streak=0, histogram=tuple(histogram))
    if record.last_cracked == day:  # the same day again: nothing to add
        streak = record.streak
    elif record.last_cracked == day - DAY:
        streak = record.streak + 1
    else:
        streak = 1
    return Record(streak, max(record.best, streak), day, tuple(histogram))


# --- what a round of the daily carries through `decide` -----------------------------------------


def finish_of(daily: DailyRound) -> Finish | None:
    """The finish already recorded (a re-delivered finishing guess reports it again)."""
    if daily.finished_at is None:
        return None
    return Finish(daily.day, daily.tg_user_id, len(daily.rows), daily.cracked, daily.finished_at)


def share_markup(lang: Lang) -> str:
    """The card's Share button: Telegram's chat picker, then the bot's inline answer (the
    player's card) in the chat picked."""
    button = {"text": texts.share_button(lang), "switch_inline_query": SHARE_QUERY}
    return json.dumps({"inline_keyboard": [[button]]}, ensure_ascii=False, separators=(",", ":"))


def card(
    lang: Lang,
    number: int,
    rows: Sequence[Row],
    *,
    length: int,
    max_attempts: int,
    cracked: bool,
    streak: int,
) -> str:
    """The card (shared as is): header, a row of pegs per attempt, the streak."""
    lines = [pegs(row, length) for row in rows]
    return texts.daily_card(lang, number, lines, max_attempts, cracked=cracked, streak=streak)


def finish(
    *,
    lang: Lang,
    daily: DailyRound,
    rows: tuple[Row, ...],
    cracked: bool,
    round_id: int,
    chat_id: int,
    length: int,
    max_attempts: int,
    secret: Sequence[str],
    now: datetime,
    share: bool,
    taken_ms: int | None = None,
) -> tuple[Progress, Message]:
    """A daily round's last scored attempt (cracked, or the last allowed): the result and the
    record to store, and the card to post (its Share button only when inline mode is on).

    Missed while its day runs, the card does not show the code (a second account could lose
    on purpose, read it, and crack it at once): it says when it will be shown, at the day's
    end. A finish scored after its day ended (its guess taken before midnight, `taken_ms`,
    waited in the lanes) counts for its day as if scored when taken: the record is the day's,
    the finish time the guess's; the code is shown then, the day being over."""
    over = day_over(daily.day, now)
    at = _taken_at(taken_ms, day_start(daily.day + DAY)) if over else now
    record = record_after(daily.record, daily.day, len(rows), cracked)
    done = Finish(daily.day, daily.tg_user_id, len(rows), cracked, at)
    shown = card(
        lang,
        daily.number,
        rows,
        length=length,
        max_attempts=max_attempts,
        cracked=cracked,
        streak=record.streak,
    )
    if cracked:
        head = texts.daily_cracked(lang, len(rows))
    elif over:
        head = texts.daily_missed_over(lang, daily.number, secret)
    else:
        head = texts.daily_missed(lang, seconds_to_next(now))
    parts = [head, shown]
    if over:
        parts.append(texts.daily_new_code_out(lang))
    elif cracked:  # a miss said it already: its code is shown with the next one
        parts.append(texts.daily_next_code(lang, seconds_to_next(now)))
    text = "\n\n".join(parts)
    message = Message(
        chat_id=chat_id,
        text=text,
        kind=KIND_CARD,
        round_id=round_id,
        markup=share_markup(lang) if share else None,
    )
    return Progress(round_id, daily.day, daily.tg_user_id, rows, done, record), message


def _taken_at(taken_ms: int | None, ends: datetime) -> datetime:
    """When a guess scored after its day's end was taken (before that end: `decide` scores no
    other); its last moment when not known."""
    last = ends - timedelta(milliseconds=1)
    if taken_ms is None:
        return last
    return min(datetime.fromtimestamp(taken_ms / 1000, UTC), last)


def day_over(day: date, now: datetime) -> bool:
    """Whether `day`'s code is over at `now` (its midnight UTC passed: a new code is out)."""
    return now >= day_start(day + DAY)


# --- the world board's order --------------------------------------------------------------------

# A finisher's place on the day's board is one number (a sorted set's score): attempts first
# (the not cracked after every cracked one), then the time of the finish, in ms since the day's
# 00:00 UTC. Scores stay exact integers in a double (< 2**53).
_MS_SPAN: Final = 10**10  # 115 days of ms: more than a finish can lag its day


def board_score(finish: Finish, max_attempts: int = ATTEMPTS) -> int:
    """The finisher's score on the day's board: the lower, the better."""
    attempts = finish.attempts if finish.cracked else max_attempts + 1
    ms = int((finish.finished_at - day_start(finish.day)).total_seconds() * 1000)
    return attempts * _MS_SPAN + min(max(0, ms), _MS_SPAN - 1)


def cracked_below(max_attempts: int = ATTEMPTS) -> int:
    """Every cracked finisher's score is below this; the not cracked are at or above it."""
    return (max_attempts + 1) * _MS_SPAN


def attempts_of(score: float) -> int:
    """The attempts a score stands for (max_attempts + 1: not cracked)."""
    return int(score) // _MS_SPAN
