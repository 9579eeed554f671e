"""record_guesses, one guess at a time: scoring, winning, late guesses, idempotency and
refusals, on the real Postgres."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import scoring, usecases
from codemojex.db import Guess, LeaderboardEntry, Outbox, Player, Round
from codemojex.db.engine import Sessions
from codemojex.values.batch import Verdict
from codemojex.values.types import TIMEOUT
from tests.db.helpers import attempt, job_id, new_room, record_one, wrong_guess
from tests.helpers import writes

CHAT = -1001


async def _setup(sessions: Sessions, rng: random.Random) -> tuple[Round, Player, Player]:
    room = await new_room(sessions, chat_id=CHAT)
    alice = await usecases.ensure_player(sessions, room.id, 1, "Alice")
    bob = await usecases.ensure_player(sessions, room.id, 2, "Bob")
    rnd = await usecases.start_round(sessions, room.id, rng)
    return rnd, alice, bob


async def _record(
    sessions: Sessions,
    rnd: Round,
    player: Player,
    emojis: tuple[str, ...],
    guess_id: str | None = None,
    reply_to: int = 77,
) -> Verdict:
    return await record_one(
        sessions, attempt(rnd, player.id, emojis, guess_id=guess_id, reply_to=reply_to)
    )


async def _round(session: AsyncSession, round_id: int) -> Round:
    rnd = await session.get(Round, round_id, populate_existing=True)
    await session.commit()
    assert rnd is not None
    return rnd


async def _count(session: AsyncSession, what: object, *where: object) -> int:
    stmt = select(func.count()).select_from(what)  # type: ignore[arg-type]
    if where:
        stmt = stmt.where(*where)  # type: ignore[arg-type]
    n = (await session.execute(stmt)).scalar_one()
    await session.commit()
    return int(n)


async def test_scored_guess_is_recorded_with_its_result_row(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    guess = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    expected = scoring.feedback(guess, rnd.secret_emojis)
    gid = job_id()

    result = await _record(sessions, rnd, alice, guess, guess_id=gid, reply_to=55)

    assert result == Verdict(
        "scored", exact=expected.exact, misplaced=expected.misplaced, attempt_no=1
    )
    assert result.chat_id == CHAT
    row = await session.get(Guess, gid)
    assert row is not None
    assert (row.exact, row.misplaced, row.attempt_no, row.late) == (
        expected.exact,
        expected.misplaced,
        1,
        False,
    )
    assert row.text == "".join(guess)
    [out] = (await session.execute(select(Outbox).where(Outbox.kind == "result"))).scalars()
    assert out.chat_id == CHAT
    assert out.reply_to_message_id == 55
    assert out.guess_id == gid
    assert out.player_name == "Alice"
    assert out.text == f"{scoring.render_result(guess, expected)}  (attempt 1)"
    entry = await session.get(LeaderboardEntry, (rnd.room_id, alice.id))
    assert entry is not None
    assert (entry.points, entry.wins, entry.guesses, entry.best_solve) == (0, 0, 1, None)


async def test_attempts_count_per_player(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, bob = await _setup(sessions, rng)
    guess = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    attempts = [
        (await _record(sessions, rnd, who, guess)).attempt_no for who in (alice, alice, bob, alice)
    ]
    assert attempts == [1, 2, 1, 3]


async def test_winning_guess_closes_round_and_books_points_once(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, bob = await _setup(sessions, rng)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    await _record(sessions, rnd, alice, miss)
    await _record(sessions, rnd, alice, miss)
    win_id = job_id()

    result = await _record(sessions, rnd, alice, rnd.secret_emojis, guess_id=win_id)

    assert result.won and result.round_closed and not result.duplicate
    assert result.attempt_no == 3
    assert result.exact == rnd.length and result.misplaced == 0
    assert result.points == scoring.points_for(3) == 80
    closed = await _round(session, rnd.id)
    assert closed.ended_at is not None
    assert (closed.winner_player_id, closed.winning_guess_id, closed.end_reason) == (
        alice.id,
        win_id,
        "solved",
    )
    entry = await session.get(LeaderboardEntry, (rnd.room_id, alice.id), populate_existing=True)
    assert entry is not None
    assert (entry.points, entry.wins, entry.guesses, entry.best_solve) == (80, 1, 3, 3)
    [announce] = (await session.execute(select(Outbox).where(Outbox.kind == "win"))).scalars()
    assert "Alice" in announce.text and rnd.secret in announce.text and "+80" in announce.text
    assert announce.reply_to_message_id is None
    await session.commit()

    # A guess of the same round scored afterwards: answered, recorded as late, earns nothing.
    late_id = job_id()
    late = await _record(sessions, rnd, bob, rnd.secret_emojis, guess_id=late_id)
    assert late == Verdict("late", round_closed=True, late=True)
    [answer] = (await session.execute(select(Outbox).where(Outbox.kind == "late"))).scalars()
    assert "already solved" in answer.text
    assert answer.guess_id == late_id
    assert await session.get(LeaderboardEntry, (rnd.room_id, bob.id)) is None
    await session.commit()
    # ... and idempotently so: no second answer.
    again = await _record(sessions, rnd, bob, rnd.secret_emojis, guess_id=late_id)
    assert again.duplicate and again.late and not again.won
    assert await _count(session, Outbox, Outbox.kind == "late") == 1
    assert await _count(session, Outbox, Outbox.kind == "win") == 1


async def test_guess_after_timeout_says_over(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    await usecases.close_round(sessions, rnd.id, TIMEOUT)
    result = await _record(sessions, rnd, alice, rnd.secret_emojis)
    assert result.late and not result.won and result.points == 0
    [answer] = (await session.execute(select(Outbox).where(Outbox.kind == "late"))).scalars()
    assert "over" in answer.text


async def test_redelivered_guess_changes_nothing(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    gid = job_id()
    first = await _record(sessions, rnd, alice, miss, guess_id=gid)
    second = await _record(sessions, rnd, alice, miss, guess_id=gid)
    assert second.duplicate and not first.duplicate
    assert (second.exact, second.misplaced, second.attempt_no, second.won) == (
        first.exact,
        first.misplaced,
        first.attempt_no,
        first.won,
    )
    assert await _count(session, Guess) == 1
    assert await _count(session, Outbox, Outbox.kind == "result") == 1
    entry = await session.get(LeaderboardEntry, (rnd.room_id, alice.id), populate_existing=True)
    assert entry is not None and entry.guesses == 1


async def test_redelivered_winning_guess_reports_the_win_once(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    gid = job_id()
    first = await _record(sessions, rnd, alice, rnd.secret_emojis, guess_id=gid)
    second = await _record(sessions, rnd, alice, rnd.secret_emojis, guess_id=gid)
    assert first.won and second.won and second.duplicate
    assert second.points == first.points == 100
    assert await _count(session, Outbox, Outbox.kind == "win") == 1
    entry = await session.get(LeaderboardEntry, (rnd.room_id, alice.id), populate_existing=True)
    assert entry is not None and (entry.points, entry.wins, entry.guesses) == (100, 1, 1)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda r: r.secret_emojis[:-1], id="too-short"),
        pytest.param(lambda r: (*r.secret_emojis, r.secret_emojis[0]), id="too-long"),
        pytest.param(lambda r: ("🦄", *r.secret_emojis[1:]), id="not-in-palette"),
        pytest.param(lambda r: ("hello",) * r.length, id="not-emoji"),
    ],
)
async def test_mismatched_guess_writes_nothing(
    session: AsyncSession, sessions: Sessions, rng: random.Random, bad: object
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    if "🦄" in rnd.palette_emojis:  # pragma: no cover - the seeded palette has no unicorn
        pytest.skip("palette happens to contain the probe")
    before = await _count(session, Outbox)
    result = await _record(sessions, rnd, alice, bad(rnd))  # type: ignore[operator]
    assert result.kind == "mismatch" and result.refused
    assert await _count(session, Guess) == 0
    assert await _count(session, Outbox) == before
    assert await _count(session, LeaderboardEntry) == 0
    # The caller's objects are still usable (a refusal does not expire them).
    assert rnd.id > 0 and alice.display_name == "Alice"


async def test_unknown_round_and_foreign_player_are_refused(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    other_room = await new_room(sessions, chat_id=-2002)
    stranger = await usecases.ensure_player(sessions, other_room.id, 1, "Alice elsewhere")
    no_round = attempt(rnd, alice.id, rnd.secret_emojis)
    no_round = replace(no_round, round_id=rnd.id + 1000)
    assert (await record_one(sessions, no_round)).kind == "unknown_round"
    stranger_guess = attempt(rnd, stranger.id, rnd.secret_emojis)
    assert (await record_one(sessions, stranger_guess)).kind == "unknown_player"
    assert await _count(session, Guess) == 0
    assert (await _round(session, rnd.id)).is_open


async def test_banned_players_guess_writes_nothing(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    assert await writes.ban(sessions, rnd.room_id, alice.id, actor=999)
    result = await _record(sessions, rnd, alice, rnd.secret_emojis)
    assert result.banned and not result.won and not result.round_closed
    assert await _count(session, Guess) == 0
    assert await _count(session, Outbox, Outbox.kind != "round") == 0
    assert (await _round(session, rnd.id)).is_open


async def test_leaderboard_accumulates_over_rounds(
    session: AsyncSession, sessions: Sessions, rng: random.Random
) -> None:
    rnd, alice, _ = await _setup(sessions, rng)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    await _record(sessions, rnd, alice, miss)
    await _record(sessions, rnd, alice, rnd.secret_emojis)  # 2nd attempt: 90
    rnd2 = await usecases.start_round(sessions, rnd.room_id, rng)
    await _record(sessions, rnd2, alice, rnd2.secret_emojis)  # 1st attempt: 100
    rnd3 = await usecases.start_round(sessions, rnd.room_id, rng)
    miss3 = wrong_guess(rnd3.secret_emojis, rnd3.palette_emojis)
    for _ in range(11):
        await _record(sessions, rnd3, alice, miss3)
    await _record(sessions, rnd3, alice, rnd3.secret_emojis)  # 12th attempt: floor of 10
    entry = await session.get(LeaderboardEntry, (rnd.room_id, alice.id), populate_existing=True)
    assert entry is not None
    assert (entry.points, entry.wins, entry.guesses, entry.best_solve) == (200, 3, 15, 1)


async def test_emoji_spelling_is_normalised_to_the_palette(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions, chat_id=CHAT)
    await usecases.update_room_settings(sessions, room.id, palette="❤️🍎🍌🍇", length=3)
    alice = await usecases.ensure_player(sessions, room.id, 1, "Alice")
    rnd = await usecases.start_round(sessions, room.id, random.Random(3))
    # The same emojis typed without U+FE0F still score as the palette's emojis: the bot's
    # parse (the one validation a guess gets) puts them in the palette's spelling.
    typed = "".join(e.replace("\ufe0f", "") for e in rnd.secret_emojis)
    result = await _record(sessions, rnd, alice, scoring.parse_guess(typed, rnd.palette, 3))
    assert result.won
