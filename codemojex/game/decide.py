"""What a batch of guesses does to the game: pure, no I/O.

The store loads a `BatchState` under the locks of the batch's rounds (so nobody else decides
about those rounds meanwhile), `decide` turns the guesses and that state into a `Decision`, and
the store writes the decision in the same transaction (`codemojex.usecases.guesses` holds it).
Everything a guess can do is decided here: its verdict, the guess row, its pegs and attempt
number, whether it wins the round, the points, the leaderboard changes, and the messages to post
with their texts.

The rules, in the order `decide` applies them to each guess:

* A round that is not loaded, or belongs to another room than the guess's lane: refused
  (`unknown_round`), nothing written. So is a player unknown or of another room
  (`unknown_player`), and emojis that are not `length` emojis of the round's palette
  (`mismatch`): the bot validates every guess before it enqueues it, so these are stale or
  forged jobs.
* A guess id already recorded (earlier, or earlier in this batch): `duplicate`, reporting what
  was decided then; nothing written, nothing answered again. A re-delivered job is harmless.
* A player banned in the room: `banned`, nothing written, nothing answered.
* A guess for a round already over, or taken by the bot at or after the round's deadline (a
  round the timer holds open for the guesses taken before it, `rounds.holds_open`): `late`,
  recorded without pegs, earns nothing, answered "too late" once. A guess taken before the
  deadline is scored, however late (a paused room, an outage, a flood's wait).
* Otherwise `scored`: attempt number = the player's scored guesses in the round + 1; the first
  all-exact guess wins the round (it closes, later guesses of it are late), earns
  `points_for(attempt_no)`, and is announced.
* A round with an attempts cap (`max_attempts`: the daily code's 8) takes no more of a
  player's guesses than that: one beyond it is late. A daily round (`daily`) books no points
  and no leaderboard; it closes when cracked or when its last attempt is used, posting the
  player's card (codemojex.game.daily), and its guesses after that are answered "come back
  tomorrow" (or, once its day ran out unfinished, "send /daily"). A daily round its day's end
  closed (midnight UTC: the round timer, or the player's next /daily, which opens the next
  day's round in the same chat) is not over for the guesses taken before that midnight: they
  are scored against their day, however late (`_taken_on_its_day`), and finish it as if
  scored then (`daily.finish`). So a daily is never held open past its midnight.
* A "too late" line is an answer like the bot's own: `within_budget` keeps, as its member's
  answer budget in the chat says, the line, or once "slow down" instead, or nothing (the guess
  stays recorded late), so a member guessing after the end cannot crowd the results out.

Guesses are decided in the order given (a player's in the order they were sent), as if one at a
time: a round won by one guess of the batch is over for the guesses after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Final

from codemojex.game import daily, texts
from codemojex.game.rounds import in_time, keys_off
from codemojex.scoring import feedback, points_for
from codemojex.values.batch import (
    Attempt,
    BatchState,
    Closing,
    Decision,
    PlayerState,
    RoundState,
    StoredGuess,
    Tally,
    Verdict,
)
from codemojex.values.daily import DailyRound, Progress
from codemojex.values.types import (
    KIND_LATE,
    KIND_RESULT,
    KIND_WIN,
    OUT_OF_ATTEMPTS,
    SOLVED,
    TIMEOUT,
    Message,
    Say,
)

_BANNED: Final = Verdict("banned")


def decide(
    attempts: Sequence[Attempt], state: BatchState, now: datetime, *, share: bool = False
) -> Decision:
    """Decide a batch of guesses against the state loaded for it (see the module docstring).
    `share`: inline mode is on, so a daily card carries a Share button."""
    verdicts: list[Verdict] = []
    new_guesses: list[tuple[Attempt, Verdict]] = []
    messages: list[Message] = []
    tallies: dict[tuple[str, str], Tally] = {}
    closings: list[Closing] = []
    decided: dict[str, Verdict] = {}  # new guesses of this batch, by id
    won: dict[int, str] = {}  # rounds won in this batch -> the winning guess id
    closed: set[int] = set()  # rounds closed in this batch, won or out of attempts
    progress: dict[int, Progress] = {}  # daily rounds' changes, by round id
    scored_before = dict(state.scored_before)

    for item in attempts:
        rnd = state.rounds.get(item.round_id)
        if rnd is None or item.room_id != rnd.room_id:
            verdicts.append(Verdict("unknown_round"))
            continue
        if item.guess_id in decided:
            # No chat: a duplicate is not answered again.
            verdicts.append(replace(decided[item.guess_id], kind="duplicate", chat_id=None))
            continue
        stored = state.recorded.get(item.guess_id)
        if stored is not None:
            verdicts.append(
                _stored(item.guess_id, stored, state.rounds.get(stored.round_id, rnd), won)
            )
            continue
        player = state.players.get(item.player_id)
        if player is None or player.room_id != rnd.room_id:
            verdicts.append(Verdict("unknown_player"))
            continue
        if (rnd.room_id, item.player_id) in state.banned:
            verdicts.append(_BANNED)
            continue
        # The bot parsed the guess against this round; a set lookup per emoji is all a stale
        # or forged job costs to catch, so it is not parsed again.
        if len(item.emojis) != rnd.length or not rnd.palette.issuperset(item.emojis):
            verdicts.append(Verdict("mismatch"))
            continue

        key = (rnd.id, item.player_id)
        capped = rnd.max_attempts is not None and scored_before.get(key, 0) >= rnd.max_attempts
        late = not in_time(item.taken_ms, rnd.deadline_ms)
        ended = rnd.ended and not _taken_on_its_day(rnd, item)
        if ended or rnd.id in closed or capped or late:
            if (
                rnd.daily is not None
                and (rnd.daily.finished_at or rnd.id in closed or capped)
                and not daily.day_over(rnd.daily.day, now)
            ):
                late_text = texts.daily_come_back(rnd.language, daily.seconds_to_next(now))
            elif rnd.daily is not None:  # its day is over: a new code is out
                late_text = texts.daily_send_first(rnd.language)
            else:
                solved = rnd.id in won or rnd.end_reason == SOLVED
                late_text = (texts.already_solved if solved else texts.already_over)(
                    rnd.language, item.emojis
                )
            messages.append(_answer(item, rnd, player, late_text, KIND_LATE))
            verdict = Verdict("late", round_closed=True, late=True, chat_id=rnd.chat_id)
        elif rnd.daily is not None:
            verdict, said = _daily_guess(
                item, rnd, rnd.daily, player, scored_before, progress, now, share=share
            )
            messages.extend(said)
            if verdict.round_closed:
                closed.add(rnd.id)
                if verdict.won:
                    won[rnd.id] = item.guess_id
                closings.append(
                    Closing(
                        rnd.id,
                        item.player_id if verdict.won else None,
                        item.guess_id if verdict.won else None,
                        SOLVED if verdict.won else OUT_OF_ATTEMPTS,
                    )
                )
        else:
            fb = feedback(item.emojis, rnd.secret)
            attempt_no = scored_before[key] = scored_before.get(key, 0) + 1
            wins = fb.exact == rnd.length
            points = points_for(attempt_no) if wins else 0
            tally = tallies.setdefault((rnd.room_id, item.player_id), Tally())
            tally.guesses += 1
            tally.points += points
            result_text = texts.result_line(rnd.language, item.emojis, fb, attempt_no)
            messages.append(_answer(item, rnd, player, result_text, KIND_RESULT))
            if wins:
                won[rnd.id] = item.guess_id
                closed.add(rnd.id)
                closings.append(Closing(rnd.id, item.player_id, item.guess_id))
                tally.wins += 1
                tally.best_solve = min(attempt_no, tally.best_solve or attempt_no)
                # Not a reply: the whole room is told.
                win_text = texts.win(rnd.language, player.name, rnd.secret, attempt_no, points)
                messages.append(_answer(item, rnd, player, win_text, KIND_WIN, reply=False))
                # The store writes in the announcement's id (the message to edit).
                messages.append(
                    keys_off(round_id=rnd.id, chat_id=rnd.chat_id, announce_message_id=None)
                )
            verdict = Verdict(
                "scored",
                exact=fb.exact,
                misplaced=fb.misplaced,
                attempt_no=attempt_no,
                won=wins,
                round_closed=wins,
                points=points,
                chat_id=rnd.chat_id,
            )
        decided[item.guess_id] = verdict
        verdicts.append(verdict)
        new_guesses.append((item, verdict))
    return Decision(
        now, verdicts, new_guesses, tallies, closings, messages, list(progress.values())
    )


def late_lines(decision: Decision) -> list[Message]:
    """The decision's "too late" lines, in order (each names its guess)."""
    return [m for m in decision.messages if m.kind == KIND_LATE and m.guess_id is not None]


def within_budget(decision: Decision, state: BatchState, said: Mapping[str, Say]) -> Decision:
    """The decision with each "too late" line as its member's answer budget said (`said`, by
    guess id; a line not in it stays): the line, "slow down" in the room's language instead,
    or nothing. Only lines change: the guesses are recorded late all the same."""
    messages: list[Message] = []
    for message in decision.messages:
        say = said.get(message.guess_id or "") if message.kind == KIND_LATE else None
        if say is None or say is Say.ANSWER:
            messages.append(message)
        elif say is Say.NOTICE and (rnd := state.rounds.get(message.round_id or 0)):
            messages.append(replace(message, text=texts.answers_spent(rnd.language)))
    return replace(decision, messages=messages)


def _daily_guess(
    item: Attempt,
    rnd: RoundState,
    state: DailyRound,
    player: PlayerState,
    scored_before: dict[tuple[int, str], int],
    progress: dict[int, Progress],
    now: datetime,
    *,
    share: bool,
) -> tuple[Verdict, list[Message]]:
    """A scored guess of a daily round: its row joins the round's; cracking the code or using
    the last attempt finishes the daily (the card, the record, the round closed). No points:
    the daily keeps its own records."""
    fb = feedback(item.emojis, rnd.secret)
    key = (rnd.id, item.player_id)
    attempt_no = scored_before[key] = scored_before.get(key, 0) + 1
    before = progress[rnd.id].rows if rnd.id in progress else state.rows
    rows = (*before, (fb.exact, fb.misplaced))
    result_text = texts.result_line(rnd.language, item.emojis, fb, attempt_no)
    said = [_answer(item, rnd, player, result_text, KIND_RESULT)]
    cracked = fb.exact == rnd.length
    last = rnd.max_attempts is not None and attempt_no >= rnd.max_attempts
    finish = None
    if cracked or last:
        done, card = daily.finish(
            lang=rnd.language,
            daily=state,
            rows=rows,
            cracked=cracked,
            round_id=rnd.id,
            chat_id=rnd.chat_id,
            length=rnd.length,
            max_attempts=rnd.max_attempts or len(rows),
            secret=rnd.secret,
            now=now,
            share=share,
            taken_ms=item.taken_ms,
        )
        progress[rnd.id], finish = done, done.finish
        said.append(card)
        said.append(keys_off(round_id=rnd.id, chat_id=rnd.chat_id, announce_message_id=None))
    else:
        progress[rnd.id] = Progress(rnd.id, state.day, state.tg_user_id, rows)
    verdict = Verdict(
        "scored",
        exact=fb.exact,
        misplaced=fb.misplaced,
        attempt_no=attempt_no,
        won=cracked,
        round_closed=finish is not None,
        chat_id=rnd.chat_id,
        finish=finish,
    )
    return verdict, said


def _taken_on_its_day(rnd: RoundState, item: Attempt) -> bool:
    """A daily round closed by its day's end (not finished) still scores a guess the bot took
    before that end: the player's daily goes on until it is scored. Only when the time it was
    taken is known (a job of an older bot is judged by the round alone)."""
    return (
        rnd.daily is not None
        and rnd.daily.finished_at is None
        and rnd.end_reason == TIMEOUT
        and item.taken_ms is not None
        and rnd.deadline_ms is not None
        and item.taken_ms < rnd.deadline_ms
    )


def _answer(
    item: Attempt, rnd: RoundState, player: PlayerState, text: str, kind: str, *, reply: bool = True
) -> Message:
    return Message(
        chat_id=rnd.chat_id,
        text=text,
        kind=kind,
        round_id=rnd.id,
        # 0: a tapped guess, no message of the player's to reply to.
        reply_to=(item.reply_to or None) if reply else None,
        guess_id=item.guess_id,
        player_name=player.name,
        thread_id=rnd.thread_id or None,
    )


def _stored(guess_id: str, guess: StoredGuess, rnd: RoundState, won: Mapping[int, str]) -> Verdict:
    """A guess recorded before this batch, as it was decided then."""
    winner = won.get(rnd.id, rnd.winning_guess_id)
    is_winner = winner == guess_id
    booked = is_winner and rnd.daily is None  # a daily's win books no points
    finish = None
    if rnd.daily is not None and not guess.late and guess.attempt_no == len(rnd.daily.rows):
        finish = daily.finish_of(rnd.daily)  # the finishing guess again: the board takes it
    return Verdict(
        "duplicate",
        exact=guess.exact,
        misplaced=guess.misplaced,
        attempt_no=guess.attempt_no,
        won=is_winner,
        round_closed=rnd.ended or rnd.id in won,
        late=guess.late,
        points=points_for(guess.attempt_no) if booked and guess.attempt_no else 0,
        finish=finish,
    )
