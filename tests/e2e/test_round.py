"""A full round in a group chat, through the stand-in, the real bot and the real worker."""

from __future__ import annotations

from sqlalchemy import select

from codemojex import scoring
from codemojex.db import Guess, LeaderboardEntry, Player, Round
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.standin import SentMessage
from tests.e2e.harness import (
    ALICE,
    BOB,
    DAVE,
    Stack,
    in_process_worker,
    result_text,
    times_posted,
)
from tests.helpers.support import wrong_guess

# What /me says of the daily code to someone who never played it (after the rooms' records).
NO_DAILY = "\n\n" + texts.daily_record(EN, 0, 0, 0, 0, ())


async def ask(stack: Stack, chat: int, user: int, command: str) -> str:
    """The bot's answer to `command` sent by `user` in `chat`: a group (the answer replies to
    the command) or the user's private chat with the bot (chat == user; not a reply there)."""
    if chat != user:
        return await stack.reply_to(chat, stack.standin.send_text(chat, user, command))
    before = len(stack.said(user))
    stack.standin.send_private(user, command)
    await stack.standin.wait_for_sent_count(before + 1, chat_id=user, timeout=10)
    return stack.said(user)[before].text


async def posted(stack: Stack, chat: int, text: str, timeout: float = 15.0) -> None:  # noqa: ASYNC109
    """Until `text` was posted in `chat`, alone or as a line of a combined message."""

    def has(message: SentMessage) -> bool:
        return text in message.text

    await stack.standin.wait_for_sent(has, timeout, chat_id=chat)


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
        guesses = [wrong_guess(secret, ann.palette, k) for k in range(3)]
        await play(ALICE, "Alice", guesses[0], "plain", 1)
        await play(BOB, "Bob", guesses[1], "command", 1)
        await play(DAVE, "Dave", guesses[2], "reply", 1)
        # A quiet room: each result was a reply to its guess, with the pegs in it.
        replies = [m for m in stack.said(chat) if m.reply_to_message_id is not None]
        assert len(replies) == 3
        assert all(" → " in m.text and "(attempt 1)" in m.text for m in replies)

        # Bob cracks it on his second attempt (a reply to the round): 100 - 10 = 90 points.
        await play(BOB, "Bob", secret, "reply", 2)
        win = texts.win(EN, "Bob", secret, 2, scoring.points_for(2))
        await stack.standin.wait_for_sent(lambda m: win in m.text, 15, chat_id=chat)
        assert result_text(secret, secret, 2).endswith("(attempt 2)")
        assert "🟢" * len(secret) in result_text(secret, secret, 2)

        # The round is closed: a late /g is told so and changes nothing.
        late = stack.standin.send_text(chat, ALICE, f"/g {''.join(secret)}")
        assert await stack.reply_to(chat, late) == texts.no_round(EN)
        # A late plain message is chat now: ignored, not enqueued.
        stack.standin.send_text(chat, DAVE, "".join(secret))

        # The records (docs/game.md, Points): only the winner scores, max(10, 100 - 10 x (2 - 1))
        # = 90 for Bob; every scored guess counts, the late /g and the late message do not.
        # (Five answers in the group: the answers' share of its minute,
        # pace_policy.ANSWER_GROUP_SHARE_PCT.)
        bob = "90 points, 1 win, 2 guesses, best solve in 2 attempts."
        alice = "0 points, 0 wins, 1 guess."
        assert await ask(stack, chat, BOB, "/stats") == f"Bob here: {bob}"
        assert await ask(stack, chat, ALICE, "/stats") == f"Alice here: {alice}"
        top = (await ask(stack, chat, ALICE, "/top")).split("\n")
        assert top[:2] == ["🏆 Leaderboard", "🥇 Bob: 90 pts, 1 win"]
        # Alice and Dave tie on points, wins and guesses: either may come second.
        assert [line.split(" ", 1)[0] for line in top[2:]] == ["🥈", "🥉"]
        assert sorted(line.split(" ", 1)[1] for line in top[2:]) == [
            "Alice: 0 pts, 0 wins",
            "Dave: 0 pts, 0 wins",
        ]
        assert await ask(stack, chat, BOB, "/me") == f"Bob in 1 chat: {bob}{NO_DAILY}"
        assert await ask(stack, ALICE, ALICE, "/me") == f"Alice in 1 chat: {alice}{NO_DAILY}"

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
    posts = [r for r in rows if r.kind != "keys_off"]
    assert [times_posted(sent_messages, r) for r in posts] == [1] * len(posts)
    assert {r.kind for r in rows} == {"round", "result", "win", "keys_off"}
    assert all(r.sent_message_id is not None for r in rows)
    # The win took the round's tap keyboard off its announcement (an edit, not a post).
    (keys_off,) = [r for r in rows if r.kind == "keys_off"]
    assert keys_off.reply_to_message_id == keys_off.sent_message_id == ann.message_id
    announced = stack.standin.message(chat, ann.message_id)
    assert announced is not None and "reply_markup" not in announced


async def test_records_are_kept_per_chat_and_me_adds_them_up(stack: Stack) -> None:
    """Bob wins in two chats (first attempt: 100 points; second attempt: 90); Alice plays in
    one and loses. /stats and /top are each chat's own, /me sums them, in a group or private."""
    first, second = stack.new_group(), stack.new_group()
    async with in_process_worker(stack) as stats:
        # (chat, guesses as (user, name, right?), Bob's points per docs/game.md)
        plays = [
            (first, [(ALICE, "Alice", False), (BOB, "Bob", True)], 100),
            (second, [(BOB, "Bob", False), (BOB, "Bob", True)], 90),
        ]
        for chat, moves, points in plays:
            ann, rnd = await stack.new_round(chat, by=BOB)
            secret = rnd.secret_emojis
            for shift, (user, name, right) in enumerate(moves):
                guess = "".join(secret if right else wrong_guess(secret, ann.palette, shift))
                mid = stack.standin.send_text(chat, user, guess)
                await stack.result(chat, mid, name, guess)
            bobs = sum(1 for user, _, _ in moves if user == BOB)
            await posted(stack, chat, texts.win(EN, "Bob", secret, bobs, points))

        here_first = "Bob here: 100 points, 1 win, 1 guess, best solve in 1 attempt."
        here_second = "Bob here: 90 points, 1 win, 2 guesses, best solve in 2 attempts."
        assert await ask(stack, first, BOB, "/stats") == here_first
        assert await ask(stack, second, BOB, "/stats") == here_second
        assert (
            await ask(stack, second, ALICE, "/stats") == "Alice here: 0 points, 0 wins, 0 guesses."
        )
        assert await ask(stack, first, ALICE, "/stats") == "Alice here: 0 points, 0 wins, 1 guess."
        assert await ask(stack, first, DAVE, "/top") == (
            "🏆 Leaderboard\n🥇 Bob: 100 pts, 1 win\n🥈 Alice: 0 pts, 0 wins"
        )
        assert await ask(stack, second, DAVE, "/top") == "🏆 Leaderboard\n🥇 Bob: 90 pts, 1 win"

        everywhere = "Bob in 2 chats: 190 points, 2 wins, 3 guesses, best solve in 1 attempt."
        assert await ask(stack, second, BOB, "/me") == everywhere + NO_DAILY
        # a private chat with the bot
        assert await ask(stack, BOB, BOB, "/me") == everywhere + NO_DAILY
        alice = "Alice in 1 chat: 0 points, 0 wins, 1 guess."
        assert await ask(stack, first, ALICE, "/me") == alice + NO_DAILY
        assert stats.score.scored == 4 and stats.score.won == 2
