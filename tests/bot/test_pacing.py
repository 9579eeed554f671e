"""The bot's own answers take their slots from the pacer the worker's sender uses, so the bot
never breaks Telegram's flood limits (the stand-in enforces them here), and they wait for
those slots off the update path: a raid of answers holds no update slot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import regex

from codemojex.game import texts
from codemojex.locale import EN
from codemojex.posting.pace_policy import PacePolicy
from codemojex.posting.pacer import Pacer
from tests.bot.conftest import (
    ALICE,
    BOB,
    CAROL,
    DAVE,
    E2E,
    MAX_DEPTH,
    World,
    seed_round,
    valid_guess,
)

pytestmark = E2E


@pytest.fixture
def paced(world: World) -> Iterator[World]:
    answers = world.app.bot_data.answers
    before = (answers.pacer, answers.reply_wait_s)
    answers.pacer = Pacer(world.redis, world.lanes.queue, PacePolicy.from_rates(answers=True))
    answers.reply_wait_s = 1.0
    world.standin.enforce_rate_limits()
    yield world
    world.standin.disable_rate_limits()
    answers.pacer, answers.reply_wait_s = before


async def test_answers_keep_the_group_pace_and_late_ones_are_dropped(paced: World) -> None:
    world = paced
    dropped = world.app.bot_data.answers.dropped
    chat = world.new_group()
    violations = world.standin.rate_violations
    for user in (ALICE, BOB, CAROL, DAVE, ALICE, BOB):
        world.standin.send_text(chat, user, "/g nope")  # each one deserves an answer
    await world.settle()
    said = world.said(chat)
    assert world.standin.rate_violations == violations
    # 1 a second in a group: the first goes out at once, the next slot comes after the
    # answers' deadline (1 s), so they are dropped at once rather than held.
    assert 1 <= len(said) < 6
    assert world.app.bot_data.answers.dropped - dropped >= 6 - len(said) > 0


async def test_a_raid_of_answers_holds_no_update_slot(paced: World) -> None:
    """The review's reproduction: 16 accounts send what gets an answer. Every update is
    handled while their answers still wait for the raided chat's pace (folded, not held),
    so a quiet room's guess sent after them is enqueued meanwhile."""
    world = paced
    answers = world.app.bot_data.answers
    answers.reply_wait_s = 30.0  # no answer is dropped: each waits its turn
    dropped = answers.dropped
    raided, quiet = world.new_group(), world.new_group()
    _, rnd = await seed_round(world, quiet)
    raiders = range(3001, 3017)
    for user in raiders:
        world.standin.add_user(user, f"raider {user}")
    for _ in range(3):
        for user in raiders:
            world.standin.send_text(raided, user, "/g nope")
    world.standin.send_text(quiet, ALICE, valid_guess(rnd))
    assert world.front is not None
    door = world.front.door
    for _ in range(600):
        if await world.queued() == 1:
            break
        await asyncio.sleep(0.05)
    await asyncio.wait_for(door.wait_idle(), 30)
    # Every update was handled, the quiet room's guess is in its lane, and the raid's answers
    # are still waiting for the raided chat's next slot (the group allows one a second).
    assert await world.queued() == 1
    assert answers.waiting(raided) > 0
    await world.settle()
    assert world.standin.rate_violations == 0
    assert answers.dropped == dropped
    # 48 answers, one slot a second (three at once for a quiet group): folded, not queued.
    assert len(world.said(raided)) < 10


async def test_a_notice_that_could_not_be_sent_is_not_spent(paced: World) -> None:
    world = paced
    answers = world.app.bot_data.answers
    answers.reply_wait_s = 0.3
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    for i in range(MAX_DEPTH):
        world.standin.send_text(chat, ALICE, valid_guess(rnd, i))
    await world.settle()
    assert world.said(chat) == []

    await answers.pacer.block_chat(chat, 2000)  # as after a RetryAfter: nobody posts there
    dropped = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    assert world.replies_to(chat, dropped) == []

    await asyncio.sleep((await answers.pacer.wait(chat)).ms / 1000)  # the block is over
    told = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    again = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    assert world.replies_to(chat, told) == [texts.slow_down(EN)]
    assert world.replies_to(chat, again) == []
    assert await world.queued() == MAX_DEPTH


async def test_folded_answers_name_members_as_every_text_does(paced: World) -> None:
    """Answers folded into one message say whom each line answers with the display name
    everything else uses: a right-to-left override in a name cannot turn the line around."""
    world = paced
    world.app.bot_data.answers.reply_wait_s = 10.0  # nothing dropped: the folded message goes out
    eve = 1078
    world.standin.add_user(eve, "Eve\u202egnp.exe", last_name="\u2067\u200f")
    chat = world.new_group()
    world.standin.send_text(chat, ALICE, "/g nope")
    await world.settle()
    assert len(world.said(chat)) == 1  # at once; the chat's next answer waits
    for user in (eve, BOB):
        world.standin.send_text(chat, user, "/g nope")
    await world.settle()
    folded = [sorted(m.text.split("\n")) for m in world.said(chat)[1:]]
    assert folded == [[f"Bob: {texts.no_round(EN)}", f"Evegnp.exe: {texts.no_round(EN)}"]]
    assert not any(regex.search(r"\p{Bidi_Control}", m.text) for m in world.said(chat))


async def _refused(world: World, before: int) -> float:
    """When the stand-in answered an injected fault past the `before`-th (time.monotonic())."""
    deadline = time.monotonic() + 10
    while world.standin.injected_errors <= before:
        assert time.monotonic() < deadline, "no answer was refused"
        await asyncio.sleep(0.005)
    return time.monotonic()


async def test_a_429s_retry_after_holds_the_chats_next_answer_for_all_of_it(paced: World) -> None:
    """Telegram's retry_after (4 s: longer than the chat's pace and the answers' gap) is
    waited out in full, whether the refused answer went out at once or from the chat's queue;
    the refused answer is dropped."""
    world = paced
    world.app.bot_data.answers.reply_wait_s = 10.0
    chat = world.new_group()
    nope = texts.no_round(EN)
    for first, then in ((ALICE, BOB), (DAVE, CAROL)):
        before = world.standin.injected_errors
        world.standin.inject_429(count=1, retry_after=4, chat_id=chat)
        refused = world.standin.send_text(chat, first, "/g nope")  # the next answer to post
        at = await _refused(world, before)
        held = world.standin.send_text(chat, then, "/g nope")
        await world.settle()
        assert world.replies_to(chat, refused) == []
        (answer,) = [m for m in world.said(chat) if m.reply_to_message_id == held]
        assert answer.text == nope and answer.ts - at >= 3.95
