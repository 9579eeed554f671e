"""A 429 storm from the Bot API: posts are delayed, none is lost, none is duplicated."""

from __future__ import annotations

import time

from sqlalchemy import select

from codemojex.db import Guess
from tests.e2e.harness import ALICE, BOB, DAVE, Stack, eventually, in_process_worker, times_posted

STORM_S = 3.0


async def test_a_429_storm_delays_posts_but_loses_and_duplicates_none(stack: Stack) -> None:
    chats = [stack.new_group(), stack.new_group()]
    players = {ALICE: "Alice", BOB: "Bob", DAVE: "Dave"}
    async with in_process_worker(stack) as stats:
        anns = [(await stack.new_round(chat))[0] for chat in chats]

        # Every sendMessage is refused with 429 (retry_after 1) for a few seconds...
        storm_from = time.monotonic()
        stack.standin.inject_429(seconds=STORM_S, retry_after=1)
        storm_to = storm_from + STORM_S
        # ... while players of both rooms guess.
        sent = 0
        for chat, ann in zip(chats, anns, strict=True):
            for k, user in enumerate(players):
                for attempt in range(2):
                    guess = [ann.palette[(k + attempt + i) % len(ann.palette)] for i in range(3)]
                    guess.append(ann.palette[(k * 2 + attempt) % len(ann.palette)])
                    stack.standin.send_text(chat, user, "".join(guess))
                    sent += 1

        async def all_recorded() -> bool:
            return await stack.guess_count() == sent

        await eventually(all_recorded, timeout=20, what="every guess recorded")
        rows = await stack.all_posted(timeout=40)
        posted = stack.standin.sent_messages()

    # The storm was real: posts were refused and the sender waited them out...
    refused = [c for c in stack.standin.call_log if c.method == "sendMessage" and c.status == 429]
    assert refused, "the stand-in refused nothing"
    assert stats.sender.retry_after >= 1
    assert all(storm_from <= c.ts < storm_to + 0.5 for c in refused)
    # ... nothing got through during it, everything after it.
    results = [m for m in posted if m.chat_id in chats and "→" in m.text]
    assert results and all(m.ts >= storm_to for m in results)

    # Nothing lost, nothing twice: one result row per guess, every row posted exactly once.
    guesses = await stack.all(select(Guess))
    assert len(guesses) == sent
    result_rows = [r for r in rows if r.kind == "result"]
    assert sorted(r.guess_id or "" for r in result_rows) == sorted(g.id for g in guesses)
    assert all(r.sent_at is not None and r.sent_message_id is not None for r in rows)
    assert {r.id: times_posted(posted, r) for r in rows} == {r.id: 1 for r in rows}
    assert stats.sender.failed_rows == 0
