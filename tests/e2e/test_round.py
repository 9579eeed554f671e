"""A full round in a group chat, through the stand-in, the real bot and the real worker."""

from __future__ import annotations

from sqlalchemy import select

from codemojex import scoring, texts
from codemojex.db import Guess, LeaderboardEntry, Player, Round
from tests.e2e.harness import (
    ALICE,
    BOB,
    DAVE,
    Stack,
    in_process_worker,
    result_text,
    times_posted,
)


def wrong_guess(palette: tuple[str, ...], secret: tuple[str, ...], shift: int) -> tuple[str, ...]:
    """A guess that is not the secret (and differs for each shift)."""
    n = len(secret)
    guess = tuple(palette[(i * (shift + 1) + shift) % len(palette)] for i in range(n))
    if guess == secret:
        guess = (*guess[:-1], next(e for e in palette if e != secret[-1]))
    return guess


async def test_a_round_is_played_won_and_booked(stack: Stack) -> None:
    chat = stack.new_group()
    async with in_process_worker(stack) as stats:
        # The announcement comes from the worker's outbox sender; players read it.
        ann, rnd = await stack.new_round(chat, by=ALICE)
        assert ann.length == rnd.length == scoring.DEFAULT_LENGTH
        assert ann.palette == rnd.palette_emojis
        secret = rnd.secret_emojis
        assert len(set(ann.palette)) == scoring.DEFAULT_PALETTE_SIZE

        sent: list[tuple[int, str, int]] = []  # (user, guess, attempt_no)

        async def play(user: int, name: str, guess: tuple[str, ...], how: str, attempt: int) -> str:
            g = "".join(guess)
            if how == "plain":
                mid = stack.standin.send_text(chat, user, g)
            elif how == "command":
                mid = stack.standin.send_text(chat, user, f"/g {g}")
            else:  # a reply to the round announcement
                mid = stack.standin.send_text(chat, user, g, reply_to=ann.message_id)
            posted = await stack.result(chat, mid, name, g)
            expected = result_text(guess, secret, attempt)
            if posted.reply_to_message_id == mid:
                assert posted.text == expected
            else:
                assert f"{name}: {expected}" in posted.text.split("\n")
            sent.append((user, g, attempt))
            return posted.text

        # Five posts in all (announcement, three results, the win): within a group's pace of
        # five posts per 15 s, so no result waits for the pacer.
        guesses = [wrong_guess(ann.palette, secret, k) for k in range(3)]
        await play(ALICE, "Alice", guesses[0], "plain", 1)
        await play(BOB, "Bob", guesses[1], "command", 1)
        await play(DAVE, "Dave", guesses[2], "reply", 1)
        # A quiet room: each result was a reply to its guess, with the pegs in it.
        replies = [m for m in stack.said(chat) if m.reply_to_message_id is not None]
        assert len(replies) == 3
        assert all(" → " in m.text and "(attempt 1)" in m.text for m in replies)

        # Bob cracks it on his second attempt (a reply to the round): 100 - 10 = 90 points.
        await play(BOB, "Bob", secret, "reply", 2)
        win = texts.win("Bob", secret, 2, scoring.points_for(2))
        await stack.standin.wait_for_sent(lambda m: win in m.text, 15, chat_id=chat)
        assert result_text(secret, secret, 2).endswith("(attempt 2)")
        assert "🟢" * len(secret) in result_text(secret, secret, 2)

        # The round is closed: a late /g is told so and changes nothing.
        late = stack.standin.send_text(chat, ALICE, f"/g {''.join(secret)}")
        assert await stack.reply_to(chat, late) == texts.NO_ROUND
        # A late plain message is chat now: ignored, not enqueued.
        stack.standin.send_text(chat, DAVE, "".join(secret))

        asked = stack.standin.send_text(chat, DAVE, "/top")
        top = await stack.reply_to(chat, asked)
        assert top.startswith("🏆 Leaderboard")
        assert "🥇 Bob: 90 pts, 1 win" in top

        await stack.settle()
        rows = await stack.all_posted()
        assert stats.score.scored == 4 and stats.score.won == 1

    # The database holds exactly the guesses sent, each scored once, the round won by Bob.
    rounds = await stack.all(select(Round))
    assert len(rounds) == 1
    (won,) = rounds
    assert won.end_reason == "solved" and won.ended_at is not None
    players = {p.id: p for p in await stack.all(select(Player))}
    by_user = {p.tg_user_id: p.id for p in players.values()}
    assert won.winner_player_id == by_user[BOB]
    stored = await stack.all(select(Guess).order_by(Guess.scored_at))
    recorded = [(players[g.player_id].tg_user_id, g.text, g.attempt_no) for g in stored]
    assert sorted(recorded) == sorted(sent)
    assert all(not g.late for g in stored)
    for g in stored:
        fb = scoring.feedback(scoring.split_emojis(g.text), secret)
        assert (g.exact, g.misplaced) == (fb.exact, fb.misplaced)
    winning = next(g for g in stored if g.id == won.winning_guess_id)
    assert winning.text == "".join(secret) and winning.player_id == by_user[BOB]

    board = {
        players[e.player_id].tg_user_id: (e.points, e.wins, e.guesses, e.best_solve)
        for e in await stack.all(select(LeaderboardEntry))
    }
    assert board == {ALICE: (0, 0, 1, None), BOB: (90, 1, 2, 2), DAVE: (0, 0, 1, None)}

    # Every outbox row (the announcement, 4 results, the win) went out exactly once.
    assert [r.kind for r in rows].count("result") == 4
    sent_messages = stack.said(chat)
    assert [times_posted(sent_messages, r) for r in rows] == [1] * len(rows)
    assert {r.kind for r in rows} == {"round", "result", "win"}
    assert all(r.sent_message_id is not None for r in rows)
