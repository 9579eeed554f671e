"""A member's command spam does not silence a chat: through the real bot and worker, with the
stand-in enforcing Telegram's limits, one member sends /help or /rules every half second while
another plays at a person's pace. The results keep their share of the chat: between a guess
and its result the bot posts at most one answer (answers never take two of a chat's seconds in
a row), the spammer gets their answer budget and one "slow down", and nothing breaks
Telegram's limits. Timing is asserted only as a generous bound (the figures are
bench/posting.py's `spam1` pattern). Nor does guessing on after a round ended: its "too late"
lines spend the same budget."""

from __future__ import annotations

import asyncio
import contextlib
import time

from codemojex import usecases
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.standin import SentMessage
from codemojex.state.budget import BUDGET
from tests.e2e.harness import ALICE, BOB, DAVE, Stack, in_process_worker
from tests.helpers.support import wrong_guess

GUESSES = 4
GENEROUS_S = 10.0  # the target is 3.5 s (bench.posting spam1); this catches a result held for good


async def test_a_members_command_spam_does_not_hold_a_players_results(stack: Stack) -> None:
    stack.standin.enforce_rate_limits()
    chat = stack.new_group()
    async with in_process_worker(stack):
        ann, rnd = await stack.new_round(chat, by=ALICE)
        stop = asyncio.Event()

        async def spam() -> int:
            sent = 0
            while not stop.is_set():
                stack.standin.send_text(chat, BOB, ("/help", "/rules")[sent % 2])
                sent += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
            return sent

        spammer = asyncio.create_task(spam())
        played: list[tuple[float, SentMessage]] = []
        try:
            await asyncio.sleep(1.0)  # the spam has begun
            for n in range(GUESSES):
                guess = "".join(wrong_guess(rnd.secret_emojis, ann.palette, n))
                sent_at = time.monotonic()
                mid = stack.standin.send_text(chat, ALICE, guess)
                played.append((sent_at, await stack.result(chat, mid, "Alice", guess, 30)))
                await asyncio.sleep(1.5)  # a person reads the result and thinks
        finally:
            stop.set()
            commands = await spammer
        await stack.settle()
        rows = {r.sent_message_id: r for r in await stack.all_posted() if r.kind == "result"}

    said = stack.said(chat)
    results = {m.message_id for _, m in played}
    answers = [m for m in said if m.message_id not in results and m.message_id != ann.message_id]
    wall_to_monotonic = time.monotonic() - time.time()
    for sent_at, result in played:
        # From the moment its row was written, the result waited for one answer at most: the
        # answers never take two of the chat's seconds in a row.
        ready = rows[result.message_id].created_at.timestamp() + wall_to_monotonic
        assert sum(ready < m.ts < result.ts for m in answers) <= 1, (ready, result, said)
        assert result.ts - sent_at < GENEROUS_S
    # The spammer got their answer budget's worth and one "slow down", then silence. (Answers
    # waiting for the chat fold into one post, a line each: count what was answered.)
    assert commands > 2 * (BUDGET + 1)
    answered = [m.text for m in answers if m.reply_to_message_id is not None] + [
        line.removeprefix("Bob: ")
        for m in answers
        if m.reply_to_message_id is None
        for line in m.text.split("\n")
        if line.startswith("Bob: ")
    ]
    assert len(answered) <= BUDGET + 1
    assert answered.count(texts.answers_spent(EN)) == 1
    assert stack.standin.rate_violations == 0


async def test_guessing_on_after_the_end_gets_no_more_lines_than_answers(stack: Stack) -> None:
    """Guesses the bot took for a round that had ended (its card left open by a closer that
    died before closing it; held back by a pause meanwhile) are all scored "too late". Those
    lines are answers: Alice's spend her answer budget in the chat (one already went to "scoring
    is paused"), so she gets a few, one "slow down", then nothing, and the bot then has nothing
    more to say to her either. Bob's own line comes all the same."""
    chat = stack.new_group()
    flood = 8
    async with in_process_worker(stack):
        ann, rnd = await stack.new_round(chat, by=DAVE)
        room = await stack.room_id(chat)
        await stack.lanes.pause(room)
        await usecases.close_round(stack.sessionmaker, rnd.id, "endround")  # the card not closed
        misses = ["".join(wrong_guess(rnd.secret_emojis, ann.palette, n)) for n in range(flood)]
        for miss in misses:
            stack.standin.send_text(chat, ALICE, miss)
        stack.standin.send_text(chat, BOB, misses[0])
        await stack.settle()
        await stack.lanes.resume(room)
        await stack.settle()
        rows = await stack.all_posted()
        assert await stack.guess_count() == flood + 1  # every guess recorded, late
        asked = stack.standin.send_text(chat, ALICE, "/rules")
        await stack.settle()
    lines = {name: [r.text for r in rows if r.kind == "late" and r.player_name == name]
             for name in ("Alice", "Bob")}  # fmt: skip
    alices = lines["Alice"]
    told = len(alices) - 1  # the lines before "slow down": what her budget had left
    assert 1 <= told <= BUDGET, alices  # 3, or more if it came back meanwhile
    assert alices == [texts.already_over(EN, tuple(m)) for m in misses[:told]] + [
        texts.answers_spent(EN)
    ]
    assert lines["Bob"] == [texts.already_over(EN, tuple(misses[0]))]
    assert [m for m in stack.said(chat) if m.reply_to_message_id == asked] == []
