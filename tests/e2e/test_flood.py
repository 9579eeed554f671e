"""A flooding room does not hold up a quiet room's results.

The bound asserted is deliberately generous (QUIET_BOUND_S, against a baseline of well under
a second on an idle machine): this is a pass/fail test, not a benchmark. The measured figures
are printed (pytest -s) for the record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import func, select

from codemojex.db import Guess, Round
from tests.e2e.harness import DAVE, Announcement, Stack, eventually, in_process_worker

FLOOD_PLAYERS = 10
FLOOD_EACH = 20  # the bot's lane depth: all of them are accepted
QUIET_ROOMS = 3
QUIET_BOUND_S = 10.0


@dataclass
class Sample:
    scored_s: float  # the player's message -> the guess recorded in Postgres
    posted_s: float  # the player's message -> the result posted in the chat
    flood_left: int  # flood guesses still unscored when this one was scored


def a_guess(ann: Announcement, secret: tuple[str, ...], n: int) -> str:
    p = ann.palette
    guess = tuple(p[(n // len(p) ** i) % len(p)] for i in range(ann.length))
    if guess == secret:
        guess = tuple(p[(n + 1 + i) % len(p)] for i in range(ann.length))
    return "".join(guess)


async def test_a_flood_does_not_hold_up_a_quiet_room(stack: Stack) -> None:
    flooders = stack.add_players(4001, FLOOD_PLAYERS, "F")
    flood_chat = stack.new_group(members=flooders)
    quiet_chats = [stack.new_group() for _ in range(QUIET_ROOMS)]

    async def flood_unscored() -> int:
        stmt = select(func.count()).select_from(Guess).where(Guess.round_id == flood_round.id)
        return FLOOD_PLAYERS * FLOOD_EACH - int(await stack.scalar(stmt))

    async def measure(chat: int, ann: Announcement, rnd: Round, n: int) -> Sample:
        guess = a_guess(ann, rnd.secret_emojis, n)
        wall, mono = time.time(), time.monotonic()
        mid = stack.standin.send_text(chat, DAVE, guess)
        posted = await stack.result(chat, mid, "Dave", guess, timeout=60)
        scored_at = await stack.scalar(
            select(Guess.scored_at).where(Guess.round_id == rnd.id, Guess.text == guess)
        )
        flood_before = await stack.scalar(
            select(func.count())
            .select_from(Guess)
            .where(Guess.round_id == flood_round.id, Guess.scored_at <= scored_at)
        )
        flood_left = FLOOD_PLAYERS * FLOOD_EACH - int(flood_before)
        return Sample(scored_at.timestamp() - wall, posted.ts - mono, flood_left)

    async with in_process_worker(stack):
        flood_ann, flood_round = await stack.new_round(flood_chat)
        quiet = [(chat, *(await stack.new_round(chat))) for chat in quiet_chats]
        # Without a flood: one guess in each quiet room.
        calm = [await measure(chat, ann, rnd, 1) for chat, ann, rnd in quiet]

    # The flood arrives while no worker runs (a deploy, a slow database...): every flooder
    # sends a lane's worth of guesses through the bot, and they wait in the flood room.
    started = time.monotonic()
    for k in range(FLOOD_EACH):
        for p, user in enumerate(flooders):
            guess = a_guess(flood_ann, flood_round.secret_emojis, 7 * (p * FLOOD_EACH + k))
            stack.standin.send_text(flood_chat, user, guess)
    await stack.settle(timeout=180)
    enqueued_s = time.monotonic() - started
    flood_room = await stack.room_id(flood_chat)
    assert len(await stack.pending_job_ids(flood_room)) == FLOOD_PLAYERS * FLOOD_EACH

    # The worker comes back to the whole backlog; the quiet rooms play on meanwhile.
    async with in_process_worker(stack):
        started = time.monotonic()
        stormy = [await measure(chat, ann, rnd, 2) for chat, ann, rnd in quiet]

        async def flood_done() -> bool:
            return await flood_unscored() == 0

        await eventually(flood_done, timeout=180, interval=0.2, what="the flood scored")
        drained_s = time.monotonic() - started

    print(
        f"\nflood: {FLOOD_PLAYERS} players x {FLOOD_EACH} guesses; the bot enqueued them in "
        f"{enqueued_s:.1f} s; the worker scored the backlog in {drained_s:.1f} s"
        f"\nquiet without flood: scored {[round(s.scored_s, 2) for s in calm]} s, "
        f"posted {[round(s.posted_s, 2) for s in calm]} s"
        f"\nquiet during flood:  scored {[round(s.scored_s, 2) for s in stormy]} s, "
        f"posted {[round(s.posted_s, 2) for s in stormy]} s, "
        f"flood guesses still waiting {[s.flood_left for s in stormy]}"
    )
    # Measured under a real flood: its guesses were still waiting when the quiet ones scored.
    assert all(s.flood_left > 0 for s in stormy)
    assert max(s.posted_s for s in stormy) < QUIET_BOUND_S
    assert max(s.scored_s for s in stormy) < QUIET_BOUND_S
    assert max(s.posted_s for s in calm) < QUIET_BOUND_S
