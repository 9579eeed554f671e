"""A guess delivered again after Redis lost its data is recorded once and answered once.

The bot derives a guess's job id from its origin (the chat, the message, its date; a tapped
one's callback query id), and the guess id in the database is the job id: the guesses'
primary key is the lasting guard, so an update delivered again (a kill before the bot
confirmed it) is a duplicate even when the lanes and their dedupe are gone. Here: a guess and
a tapped guess are taken and scored, the queue's Redis keys are wiped (Redis lost its data),
and the same updates are delivered again, twice each with one update id, through the real bot
and the stand-in: one guess row each, one result each.
"""

from __future__ import annotations

from sqlalchemy import select

from codemojex.db import Guess
from tests.e2e.harness import ALICE, BOB, Stack, eventually, in_process_worker
from tests.helpers.support import drop_keys, wrong_guess


def deliver_twice(stack: Stack, update: dict[str, object]) -> None:
    """The same update delivered twice, with one update id (as Telegram sends one again)."""
    update_id = stack.standin.push_raw_update(update)
    stack.standin.push_raw_update({"update_id": update_id, **update}, keep_id=True)


async def test_guesses_delivered_again_after_redis_lost_its_data_count_once(stack: Stack) -> None:
    chat = stack.new_group()
    async with in_process_worker(stack) as stats:
        ann, rnd = await stack.new_round(chat, by=ALICE)
        secret = rnd.secret_emojis
        typed = "".join(wrong_guess(secret, ann.palette, 0))
        mid = stack.standin.send_text(chat, ALICE, typed)
        await stack.result(chat, mid, "Alice", typed)
        tapped = wrong_guess(secret, ann.palette, 1)
        buttons = dict(stack.buttons(chat, ann.message_id))
        for emoji in tapped:
            await stack.tap(chat, ann.message_id, BOB, buttons[emoji])
        await stack.result(chat, -1, "Bob", "".join(tapped))
        (last_tap,) = [a for a in stack.standin.callback_answers if a.get("text", "") and
                       "".join(tapped) in str(a.get("text"))]  # fmt: skip
        await stack.all_posted()
        assert await stack.guess_count() == 2
        said = len(stack.said(chat))
        handled = stats.score.scored + stats.score.duplicates

        await drop_keys(stack.redis, stack.settings.queue)  # Redis lost its data
        message = stack.standin.message(chat, mid)
        assert message is not None
        deliver_twice(stack, {"message": message})
        announcement = stack.standin.message(chat, ann.message_id)
        assert announcement is not None
        deliver_twice(
            stack,
            {
                "callback_query": {
                    "id": last_tap["callback_query_id"],
                    "from": {"id": BOB, "is_bot": False, "first_name": "Bob"},
                    "message": announcement,
                    "chat_instance": str(chat),
                    "data": buttons[tapped[-1]],
                }
            },
        )
        await stack.settle()

        async def seen_again() -> bool:
            return stats.score.scored + stats.score.duplicates > handled

        # The typed one reached the worker again (the card read from the database, the seats
        # with it: the same lane) and was recognised by its id. The tap's draft went with Redis:
        # the completing tap, delivered again, begins a draft (one emoji), and sends nothing.
        await eventually(seen_again, timeout=15, what="the guess handled again")
        await stack.settle()
        await stack.all_posted()
        rows = await stack.all(select(Guess.player_id))
        assert len(rows) == 2, rows  # one row per guess, not one per delivery
        assert stats.score.duplicates >= 1
        assert len(stack.said(chat)) == said  # nobody was answered again
