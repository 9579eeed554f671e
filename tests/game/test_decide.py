"""decide(): the rules of a batch of guesses, without a database."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from codemojex.game import texts
from codemojex.game.decide import decide, late_lines, within_budget
from codemojex.game.rounds import holds_open, in_time
from codemojex.locale import EN, Lang
from codemojex.scoring import feedback, points_for
from codemojex.values.batch import (
    Attempt,
    BatchState,
    Closing,
    PlayerState,
    RoundState,
    StoredGuess,
    Tally,
    Verdict,
    deadline_ms,
)
from codemojex.values.types import (
    KIND_KEYS_OFF,
    KIND_LATE,
    KIND_RESULT,
    KIND_WIN,
    SOLVED,
    TIMEOUT,
    Say,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PALETTE = ("🍎", "🍌", "🍇", "🍒", "🍋", "🥝")
SECRET = ("🍎", "🍌", "🍇", "🍒")
MISS = ("🍋", "🍌", "🍇", "🍒")  # three exact, not a win
ROOM_A, ROOM_B = "ROMa", "ROMb"
ANN, BOB, CAT, EVE = "PLRann", "PLRbob", "PLRcat", "PLReve"  # Eve is banned in room A
RU = Lang("ru")  # room B's language: a batch's texts are each in their own room's


def rnd(
    round_id: int = 1,
    room_id: str = ROOM_A,
    *,
    ended: bool = False,
    end_reason: str | None = None,
    winning_guess_id: str | None = None,
) -> RoundState:
    return RoundState(
        id=round_id,
        room_id=room_id,
        chat_id=-100 if room_id == ROOM_A else -200,
        length=len(SECRET),
        palette=frozenset(PALETTE),
        secret=SECRET,
        ended=ended,
        end_reason=end_reason,
        winning_guess_id=winning_guess_id,
        language=EN if room_id == ROOM_A else RU,
    )


def state(
    *rounds: RoundState,
    scored_before: dict[tuple[int, str], int] | None = None,
    recorded: dict[str, StoredGuess] | None = None,
) -> BatchState:
    return BatchState(
        rounds={r.id: r for r in rounds or (rnd(),)},
        players={
            ANN: PlayerState(ROOM_A, "Ann"),
            BOB: PlayerState(ROOM_A, "Bob"),
            CAT: PlayerState(ROOM_B, "Cat"),
            EVE: PlayerState(ROOM_A, "Eve"),
        },
        banned=frozenset({(ROOM_A, EVE)}),
        scored_before=scored_before or {},
        recorded=recorded or {},
    )


def guess(
    gid: str,
    player: str = ANN,
    emojis: tuple[str, ...] = MISS,
    round_id: int = 1,
    room_id: str = ROOM_A,
    reply_to: int | None = 7,
) -> Attempt:
    return Attempt(gid, round_id, player, room_id, emojis, reply_to)


# --- examples ---------------------------------------------------------------------------------


def test_a_scored_guess_gets_its_pegs_a_row_a_tally_and_a_reply() -> None:
    decision = decide([guess("g1")], state(), NOW)
    fb = feedback(MISS, SECRET)
    [verdict] = decision.verdicts
    assert verdict == Verdict("scored", exact=3, misplaced=0, attempt_no=1)
    assert verdict.chat_id == -100
    [(recorded, as_recorded)] = decision.new_guesses
    assert recorded == guess("g1") and as_recorded is verdict
    assert (verdict.exact, verdict.misplaced, verdict.late) == (fb.exact, fb.misplaced, False)
    assert decision.tallies == {(ROOM_A, ANN): Tally(points=0, wins=0, guesses=1)}
    assert decision.closings == []
    [message] = decision.messages
    assert (message.kind, message.chat_id, message.reply_to, message.guess_id) == (
        KIND_RESULT,
        -100,
        7,
        "g1",
    )
    assert message.text == texts.result_line(EN, MISS, fb, 1)
    assert message.player_name == "Ann" and message.round_id == 1


def test_a_win_earns_the_points_of_its_attempt_and_closes_the_round() -> None:
    before = {(1, ANN): 2}
    decision = decide([guess("g1", emojis=SECRET)], state(scored_before=before), NOW)
    [verdict] = decision.verdicts
    assert verdict.won and verdict.round_closed and verdict.attempt_no == 3
    assert verdict.points == points_for(3) == 80
    assert decision.closings == [Closing(1, ANN, "g1")]
    assert decision.tallies[(ROOM_A, ANN)] == Tally(points=80, wins=1, guesses=1, best_solve=3)
    result, win, keys_off = decision.messages
    assert result.kind == KIND_RESULT and result.reply_to == 7
    # The round's tap keyboard goes (the store fills in the announcement to edit).
    assert keys_off.kind == KIND_KEYS_OFF and keys_off.round_id == 1 and keys_off.text == ""
    # The win is announced to the room, not as a reply.
    assert win.kind == KIND_WIN and win.reply_to is None and win.guess_id == "g1"
    assert win.text == texts.win(EN, "Ann", SECRET, 3, 80)
    assert before == {(1, ANN): 2}  # the loaded state is not changed


def test_a_late_guess_earns_nothing_and_is_told_why() -> None:
    solved = rnd(ended=True, end_reason=SOLVED, winning_guess_id="old")
    timed_out = rnd(2, ROOM_B, ended=True, end_reason=TIMEOUT)
    decision = decide(
        [guess("g1", emojis=SECRET), guess("g2", CAT, SECRET, 2, ROOM_B)],
        state(solved, timed_out),
        NOW,
    )
    assert decision.verdicts == [Verdict("late", round_closed=True, late=True)] * 2
    assert decision.tallies == {} and decision.closings == []
    assert [(v.late, v.exact, v.attempt_no) for _, v in decision.new_guesses] == [
        (True, None, None)
    ] * 2
    assert [(m.kind, m.text) for m in decision.messages] == [
        (KIND_LATE, texts.already_solved(EN, SECRET)),
        (KIND_LATE, texts.already_over(RU, SECRET)),
    ]


def test_too_late_lines_are_what_their_budgets_say_and_only_they_change() -> None:
    """`within_budget`: a "too late" line stays, becomes "slow down" in its room's language,
    or goes; a line not asked about stays; results and wins are never touched."""
    ended = rnd(2, ROOM_B, ended=True, end_reason=TIMEOUT)
    batch = [guess("g1", BOB, SECRET), guess("g2", ANN, MISS), guess("g3", ANN, SECRET)]
    batch += [guess("g4", CAT, MISS, 2, ROOM_B), guess("g5", CAT, SECRET, 2, ROOM_B)]
    both = state(rnd(), ended)
    decision = decide(batch, both, NOW)
    assert [m.guess_id for m in late_lines(decision)] == ["g2", "g3", "g4", "g5"]
    said = {"g2": Say.ANSWER, "g3": Say.NOTHING, "g4": Say.NOTICE}
    kept = within_budget(decision, both, said)
    assert [(m.kind, m.guess_id, m.text) for m in kept.messages] == [
        (KIND_RESULT, "g1", texts.result_line(EN, SECRET, feedback(SECRET, SECRET), 1)),
        (KIND_WIN, "g1", texts.win(EN, "Bob", SECRET, 1, points_for(1))),
        (KIND_KEYS_OFF, None, decision.messages[2].text),
        (KIND_LATE, "g2", texts.already_solved(EN, MISS)),
        (KIND_LATE, "g4", texts.answers_spent(RU)),
        (KIND_LATE, "g5", texts.already_over(RU, SECRET)),
    ]
    assert kept.verdicts == decision.verdicts and kept.new_guesses == decision.new_guesses


def test_after_a_win_the_rest_of_the_batch_is_late() -> None:
    decision = decide(
        [guess("g1", BOB, SECRET), guess("g2", ANN, SECRET), guess("g3", BOB, MISS)],
        state(),
        NOW,
    )
    assert [v.kind for v in decision.verdicts] == ["scored", "late", "late"]
    assert decision.verdicts[0].won and not decision.verdicts[1].won
    assert decision.closings == [Closing(1, BOB, "g1")]
    kinds = [KIND_RESULT, KIND_WIN, KIND_KEYS_OFF, KIND_LATE, KIND_LATE]
    assert [m.kind for m in decision.messages] == kinds
    assert decision.messages[3].text == texts.already_solved(EN, SECRET)
    assert (ROOM_A, ANN) not in decision.tallies


def test_the_same_guess_twice_in_a_batch_is_recorded_once() -> None:
    decision = decide([guess("g1"), guess("g1"), guess("g2")], state(), NOW)
    first, again, second = decision.verdicts
    assert again.duplicate and again.chat_id is None  # not answered again
    assert (again.exact, again.attempt_no) == (first.exact, first.attempt_no) == (3, 1)
    assert second.attempt_no == 2
    assert [a.guess_id for a, _ in decision.new_guesses] == ["g1", "g2"]
    assert [m.guess_id for m in decision.messages] == ["g1", "g2"]


def test_a_guess_recorded_before_is_reported_as_it_was_and_writes_nothing() -> None:
    won_round = rnd(ended=True, end_reason=SOLVED, winning_guess_id="g1")
    recorded = {
        "g1": StoredGuess(1, 4, 0, 2, False),
        "g2": StoredGuess(1, None, None, None, True),
    }
    decision = decide(
        [guess("g1", emojis=SECRET), guess("g2", BOB)], state(won_round, recorded=recorded), NOW
    )
    assert decision.verdicts == [
        Verdict(
            "duplicate", exact=4, misplaced=0, attempt_no=2, won=True, round_closed=True, points=90
        ),
        Verdict("duplicate", round_closed=True, late=True),
    ]
    assert decision.new_guesses == [] and decision.messages == [] and decision.tallies == {}


def test_banned_players_write_nothing() -> None:
    decision = decide([guess("g1", EVE, SECRET)], state(), NOW)
    assert decision.verdicts == [Verdict("banned")]
    assert decision.new_guesses == [] and decision.messages == []
    assert decision.tallies == {} and decision.closings == []


def test_stale_or_forged_jobs_are_refused() -> None:
    decision = decide(
        [
            guess("g1", round_id=99),  # no such round
            guess("g2", CAT, room_id=ROOM_B),  # round 1 is room A's, the lane is room B's
            guess("g3", CAT),  # Cat is not a player of room A
            guess("g4", "PLRnobody"),
            guess("g5", emojis=SECRET[:3]),  # too short
            guess("g6", emojis=("🦄", *SECRET[1:])),  # not the palette
        ],
        state(),
        NOW,
    )
    assert [v.kind for v in decision.verdicts] == [
        "unknown_round",
        "unknown_round",
        "unknown_player",
        "unknown_player",
        "mismatch",
        "mismatch",
    ]
    assert all(v.refused and v.chat_id is None for v in decision.verdicts)
    assert decision.new_guesses == [] and decision.messages == [] and decision.tallies == {}


def test_points_rule() -> None:
    assert [points_for(n) for n in (1, 2, 3, 9, 10, 11, 50)] == [100, 90, 80, 20, 10, 10, 10]
    for n in range(1, 15):
        decision = decide([guess("g", emojis=SECRET)], state(scored_before={(1, ANN): n - 1}), NOW)
        assert decision.verdicts[0].points == points_for(n)
        assert decision.tallies[(ROOM_A, ANN)].best_solve == n


# --- properties -------------------------------------------------------------------------------

WORLD = (rnd(1, ROOM_A), rnd(2, ROOM_B), rnd(3, ROOM_A, ended=True, end_reason=TIMEOUT))
LANES = ((ANN, ROOM_A), (BOB, ROOM_A), (CAT, ROOM_B), (EVE, ROOM_A), ("PLRnone", ROOM_B))

attempts_st = st.lists(
    st.builds(
        guess,
        gid=st.sampled_from([f"g{i}" for i in range(12)]),  # few ids: duplicates happen
        player=st.sampled_from([p for p, _ in LANES]),
        emojis=st.one_of(
            st.just(SECRET), st.tuples(*[st.sampled_from(PALETTE)] * 4), st.just(("🦄",) * 4)
        ),
        round_id=st.sampled_from([1, 2, 3, 99]),
        room_id=st.sampled_from([ROOM_A, ROOM_B]),
    ),
    max_size=30,
)
before_st = st.dictionaries(
    st.tuples(st.sampled_from([1, 2]), st.sampled_from([ANN, BOB, CAT])),
    st.integers(0, 12),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(attempts_st, before_st)
def test_every_batch_obeys_the_rules(
    attempts: list[Attempt], before: dict[tuple[int, str], int]
) -> None:
    loaded = state(*WORLD, scored_before=before)
    decision = decide(attempts, loaded, NOW)
    verdicts = decision.verdicts
    assert len(verdicts) == len(attempts)

    # A guess id is written at most once, and only for a new scored or late guess.
    written = [a.guess_id for a, _ in decision.new_guesses]
    assert len(written) == len(set(written))
    new = [a for a, v in zip(attempts, verdicts, strict=True) if v.kind in ("scored", "late")]
    assert written == [a.guess_id for a in new]
    assert all(v.chat_id is None for v in verdicts if v.kind not in ("scored", "late"))

    # At most one winner per round, never in a round that was over; its win announced once.
    winners = Counter(c.round_id for c in decision.closings)
    assert all(n == 1 for n in winners.values())
    assert 3 not in winners
    assert sum(v.won for v in verdicts if v.kind == "scored") == len(decision.closings)
    assert [m.kind for m in decision.messages].count(KIND_WIN) == len(decision.closings)

    # A late guess earns nothing; only a win earns, points_for its attempt.
    for v in verdicts:
        if v.kind == "late":
            assert (v.points, v.won, v.attempt_no, v.exact) == (0, False, None, None)
        if v.kind == "scored":
            assert v.attempt_no is not None
            assert v.points == (points_for(v.attempt_no) if v.won else 0)

    # After its winner, every new guess of a round in the batch is late.
    closed: set[int] = set()
    for a, v in zip(attempts, verdicts, strict=True):
        if v.kind == "scored":
            assert a.round_id not in closed
            if v.won:
                closed.add(a.round_id)
        elif v.kind == "late" and a.round_id != 3:
            assert a.round_id in closed

    # Attempts count per player per round, on from what was scored before.
    seen: dict[tuple[int, str], list[int]] = {}
    for a, v in zip(attempts, verdicts, strict=True):
        if v.kind == "scored":
            assert v.attempt_no is not None
            seen.setdefault((a.round_id, a.player_id), []).append(v.attempt_no)
    for key, numbers in seen.items():
        start = before.get(key, 0)
        assert numbers == list(range(start + 1, start + 1 + len(numbers)))

    # The leaderboard changes add up to the verdicts; banned and refused guesses book nothing.
    scored = [(a, v) for a, v in zip(attempts, verdicts, strict=True) if v.kind == "scored"]
    assert sum(t.guesses for t in decision.tallies.values()) == len(scored)
    assert sum(t.points for t in decision.tallies.values()) == sum(v.points for _, v in scored)
    assert sum(t.wins for t in decision.tallies.values()) == len(decision.closings)
    assert all(player != EVE for _, player in decision.tallies)
    assert all(a.player_id != EVE for a in new)

    # One answer per new guess, plus the win announcements and their keyboards' removal.
    assert len(decision.messages) == len(new) + 2 * len(decision.closings)


# --- lateness: by when the bot took the guess --------------------------------------------------


def test_a_guess_counts_by_when_it_was_taken_not_when_it_is_decided() -> None:
    """A round past its deadline, held open for the guesses taken before it: those are
    scored (the winning one wins), the ones taken at or after it are too late."""
    deadline = 1_000_000
    held = replace(rnd(), deadline_ms=deadline)
    batch = [
        replace(guess("before"), taken_ms=deadline - 1),
        replace(guess("at", BOB), taken_ms=deadline),
        replace(guess("after", BOB), taken_ms=deadline + 60_000),
        replace(guess("win", emojis=SECRET), taken_ms=deadline - 500),
        replace(guess("unknown", BOB, emojis=SECRET), taken_ms=None),  # an older bot's job
    ]
    decision = decide(batch, state(held), NOW)
    kinds = [v.kind for v in decision.verdicts]
    assert kinds == ["scored", "late", "late", "scored", "late"]
    assert decision.verdicts[3].won and decision.verdicts[3].attempt_no == 2
    assert decision.verdicts[4].late  # after the win: "already solved"
    late_texts = [m.text for m in decision.messages if m.kind == KIND_LATE]
    assert late_texts[:2] == [texts.already_over(EN, MISS)] * 2
    assert late_texts[2] == texts.already_solved(EN, SECRET)
    # before its deadline, or with no deadline known, a guess is judged by the round alone
    no_deadline = decide([replace(guess("g"), taken_ms=deadline + 5)], state(rnd()), NOW)
    assert no_deadline.verdicts[0].kind == "scored"


def test_the_timer_holds_a_round_while_guesses_taken_in_time_wait() -> None:
    deadline, hold = 1_000_000, 600.0
    assert holds_open(deadline, deadline - 1, waiting=False, hold_max_s=hold)  # not yet due
    assert not holds_open(deadline, deadline, waiting=False, hold_max_s=hold)
    assert holds_open(deadline, deadline + 5_000, waiting=True, hold_max_s=hold)
    assert holds_open(deadline, deadline + 599_999, waiting=True, hold_max_s=hold)
    assert not holds_open(deadline, deadline + 600_000, waiting=True, hold_max_s=hold)
    assert in_time(deadline - 1, deadline) and not in_time(deadline, deadline)
    assert in_time(None, deadline) and in_time(deadline + 1, None)
    naive = datetime(2026, 1, 1, 12, 0)
    assert deadline_ms(naive) == deadline_ms(NOW) == int(NOW.timestamp() * 1000)
