"""Guesses through the real bot: validated before enqueue, enqueued once, floods refused."""

from __future__ import annotations

import pytest

from codemojex import texts
from codemojex.jobs import GuessJob
from codemojex.scoring import EMOJI_POOL
from tests.bot.conftest import ALICE, BOB, MAX_DEPTH, World, start_round, valid_guess

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_valid_guess_enqueued_once_even_when_the_update_comes_twice(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    guess = valid_guess(rnd)
    mid = world.standin.send_text(chat, ALICE, guess)
    await world.settle()
    assert await world.queued() == 1
    assert world.replies_to(chat, mid) == []  # the result comes from the worker, not the bot

    # The same message delivered again (a redelivered or reprocessed update).
    message = world.standin.message(chat, mid)
    assert message is not None
    world.standin.push_raw_update({"message": message})
    world.standin.push_raw_update({"message": message})
    await world.settle()
    assert await world.queued() == 1

    job = await world.lanes.claim(10_000)
    assert job is not None
    payload = GuessJob.decode(job.payload)
    assert (payload.chat_id, payload.message_id, payload.user_id) == (chat, mid, ALICE)
    assert payload.round_id == rnd.id
    assert "".join(payload.emojis) == guess
    assert payload.user_name == "Alice"
