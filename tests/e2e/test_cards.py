"""A room's card through the real bot and worker: a round that ends (won, timed out) stops
taking guesses at the bot at once, and a card left stale by a closer that died between its
commit and the card's write takes guesses that are scored "too late", then heals."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from codemojex import usecases
from codemojex.db import Round
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.values.clock import utcnow
from codemojex.worker.service import WorkerTimings
from tests.e2e.harness import ALICE, BOB, DAVE, Stack, eventually, in_process_worker
from tests.helpers.support import wrong_guess


async def _card_round(stack: Stack, chat: int) -> int:
    read = await stack.app.bot_data.cards.shared.read(chat, 0)
    assert read.card is not None
    return read.card.round.id if read.card.round is not None else 0


async def test_a_won_round_takes_no_more_guesses(stack: Stack) -> None:
    chat = stack.new_group()
    async with in_process_worker(stack):
        ann, rnd = await stack.new_round(chat, by=ALICE)
        secret = "".join(rnd.secret_emojis)
        await stack.result(chat, stack.standin.send_text(chat, BOB, secret), "Bob", secret)

        async def closed() -> bool:
            return await _card_round(stack, chat) == 0

        await eventually(closed, timeout=10, what="the card closed by the win")
        late = wrong_guess(rnd.secret_emojis, ann.palette)
        asked = stack.standin.send_text(chat, DAVE, "/g " + "".join(late))
        assert await stack.reply_to(chat, asked) == texts.no_round(EN)
        await stack.all_posted()
    assert await stack.guess_count() == 1


async def test_a_stale_card_is_scored_too_late_then_heals(stack: Stack) -> None:
    """The round was closed in the database by a process that died before it closed the
    card: the bot still takes guesses for it; the worker answers them "too late" and closes
    the card, so the next guess is refused at the bot."""
    chat = stack.new_group()
    async with in_process_worker(stack):
        ann, rnd = await stack.new_round(chat, by=ALICE)
        await usecases.close_round(stack.sessionmaker, rnd.id, "endround")
        assert await _card_round(stack, chat) == rnd.id  # stale
        first = "".join(wrong_guess(rnd.secret_emojis, ann.palette))
        taken = stack.standin.send_text(chat, BOB, first)
        assert await stack.reply_to(chat, taken) == texts.already_over(EN, tuple(first))

        async def healed() -> bool:
            return await _card_round(stack, chat) == 0

        await eventually(healed, timeout=10, what="the card closed by the late guess")
        refused = stack.standin.send_text(chat, BOB, "/g " + first)
        assert await stack.reply_to(chat, refused) == texts.no_round(EN)
    assert await stack.guess_count() == 1


async def test_a_round_that_times_out_takes_no_more_guesses(stack: Stack) -> None:
    chat = stack.new_group()
    async with in_process_worker(stack, WorkerTimings(timer_s=0.2)):
        ann, rnd = await stack.new_round(chat, by=ALICE)
        async with stack.sessionmaker() as session:
            await session.execute(
                update(Round)
                .where(Round.id == rnd.id)
                .values(expires_at=utcnow() - timedelta(seconds=1))
            )
            await session.commit()

        async def closed() -> bool:
            return await _card_round(stack, chat) == 0

        await eventually(closed, timeout=10, what="the card closed by the round timer")
        asked = stack.standin.send_text(chat, BOB, "/g " + "".join(ann.palette[: ann.length]))
        assert await stack.reply_to(chat, asked) == texts.no_round(EN)
    assert await stack.guess_count() == 0
