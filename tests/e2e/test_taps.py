"""Tap to guess, through the stand-in, the real bot and the real worker: the round message's
keyboard, toasts only the tapper sees, one guess per completed code, refusals that change
nothing, and the keyboard gone when the round ends."""

from __future__ import annotations

from sqlalchemy import func, select

from codemojex.bot.drafts import TapRate
from codemojex.db import Guess, Player
from codemojex.game import taps, texts
from codemojex.locale import EN
from codemojex.state.keys import Keys
from codemojex.values import ids
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, Stack, eventually, in_process_worker
from tests.helpers.support import wrong_guess


def data_of(buttons: list[tuple[str, str]], text: str) -> str:
    return next(data for label, data in buttons if label == text)


async def test_taps_build_a_draft_and_send_one_guess_then_the_keyboard_goes(stack: Stack) -> None:
    chat = stack.new_group()
    async with in_process_worker(stack):
        ann, rnd = await stack.new_round(chat, by=ALICE)
        secret = rnd.secret_emojis
        buttons = stack.buttons(chat, ann.message_id)
        # One button per palette emoji, then ⌫ and ✖; the data names this round.
        assert [label for label, _ in buttons] == [*ann.palette, "⌫", "✖"]
        assert all(taps.parse_tap(d).round_id == rnd.id for _, d in buttons)  # type: ignore[union-attr]
        posts_before = len(stack.said(chat))

        guess = wrong_guess(secret, ann.palette, 0)
        first, second = guess[0], guess[1]
        assert await stack.tap(chat, ann.message_id, ALICE, data_of(buttons, first)) == (
            first + "···"
        )
        assert await stack.tap(chat, ann.message_id, ALICE, data_of(buttons, second)) == (
            first + second + "··"
        )
        assert await stack.tap(chat, ann.message_id, ALICE, data_of(buttons, "⌫")) == first + "···"
        # Bob's draft is his own.
        assert await stack.tap(chat, ann.message_id, BOB, data_of(buttons, second)) == (
            second + "···"
        )
        assert await stack.tap(chat, ann.message_id, ALICE, data_of(buttons, second)) == (
            first + second + "··"
        )
        # The draft is in Redis and expires with the round.
        key = Keys(stack.settings.queue).tap_draft(rnd.id, ALICE)
        assert 0 < await stack.redis.pttl(key) <= 600_000  # the round's 10 minutes
        assert await stack.tap(chat, ann.message_id, ALICE, data_of(buttons, guess[2])) == (
            "".join(guess[:3]) + "·"
        )
        # Nothing was posted per tap.
        assert len(stack.said(chat)) == posts_before
        # The tap that completes the code sends it, exactly once.
        last_data = data_of(buttons, guess[3])
        qid_before = len(stack.standin.callback_answers)
        toast = await stack.tap(chat, ann.message_id, ALICE, last_data)
        assert toast == texts.tap_sent(EN, guess)
        last_qid = stack.standin.callback_answers[qid_before]["callback_query_id"]
        result = await stack.result(chat, -1, "Alice", "".join(guess))
        assert result.reply_to_message_id is None  # no message of Alice's: her name says it
        # Its job id is derived from its callback query's id (a redelivered query makes the
        # same job, no second guess): that job became the guess.
        assert await stack.all(select(Guess.id)) == [ids.derived(ids.JOB, f"cb:{last_qid}")]
        assert await stack.redis.exists(key) == 0
        # The same callback query delivered again changes nothing.
        assert await stack.tap(chat, ann.message_id, ALICE, last_data, query_id=last_qid) is None
        # A double tap on the last emoji: the second tap begins the next draft, no second guess.
        assert await stack.tap(chat, ann.message_id, ALICE, last_data) == guess[3] + "···"
        await stack.settle()
        assert await stack.guess_count() == 1

        # Bob wins by taps alone (his draft already holds a wrong first emoji: ✖ first).
        assert await stack.tap(chat, ann.message_id, BOB, data_of(buttons, "✖")) == "····"
        for emoji in secret[:-1]:
            await stack.tap(chat, ann.message_id, BOB, data_of(buttons, emoji))
        won = await stack.tap(chat, ann.message_id, BOB, data_of(buttons, secret[-1]))
        assert won == texts.tap_sent(EN, secret)
        await stack.standin.wait_for_sent(lambda m: "🏆 Bob" in m.text, 15, chat_id=chat)

        # The round's keyboard is removed; a stale client's tap is refused, nothing changes.
        async def keyboard_gone() -> bool:
            return not stack.buttons(chat, ann.message_id)

        await eventually(keyboard_gone, timeout=15, what="the keyboard removed")
        late = await stack.tap(chat, ann.message_id, DAVE, data_of(buttons, secret[0]), stale=True)
        assert late == texts.tap_round_over(EN)
        await stack.all_posted()
        assert await stack.guess_count() == 2
        players = await stack.all(select(Player.tg_user_id))
        assert DAVE not in players
        assert await stack.redis.exists(Keys(stack.settings.queue).tap_draft(rnd.id, DAVE)) == 0


async def test_banned_and_too_fast_taps_are_refused_and_change_nothing(stack: Stack) -> None:
    chat = stack.new_group()
    keys = Keys(stack.settings.queue)
    other = stack.new_group()
    async with in_process_worker(stack):
        ann, rnd = await stack.new_round(chat, by=ALICE)
        old_ann, elsewhere = await stack.new_round(other, by=BOB)
    buttons = stack.buttons(chat, ann.message_id)
    # A tap rate that a slow test machine cannot slip under: 4 taps a minute.
    stack.app.bot_data.drafts.rate = TapRate(most=4, window_ms=60_000)
    await stack.redis.delete(keys.tap_rate(ALICE))  # her taps of other tests counted apart

    # Forged data (a client may send any): the round of another chat, a button past the
    # palette. Trusted no further than it names: refused, no draft anywhere.
    for forged in (taps.tap_data(elsewhere.id, 0), taps.tap_data(rnd.id, 9)):
        refused = await stack.tap(chat, ann.message_id, ALICE, forged, stale=True)
        assert refused == texts.tap_round_over(EN)
    for round_id in (rnd.id, elsewhere.id):
        assert await stack.redis.exists(keys.tap_draft(round_id, ALICE)) == 0

    # Dave is banned (an admin's /ban in reply to his message): his taps are refused.
    said = stack.standin.send_text(chat, DAVE, "hello")
    banned = await stack.reply_to(chat, stack.standin.send_text(chat, CAROL, "/ban", reply_to=said))
    assert banned == texts.player_banned(EN, "Dave", 0)
    refused = await stack.tap(chat, ann.message_id, DAVE, buttons[0][1])
    assert refused == texts.banned(EN)
    assert await stack.redis.exists(keys.tap_draft(rnd.id, DAVE)) == 0

    # Past the tap rate (Alice's 5th tap; two were above): refused, the draft as it was.
    assert await stack.tap(chat, ann.message_id, ALICE, buttons[0][1]) == ann.palette[0] + "···"
    assert await stack.tap(chat, ann.message_id, ALICE, buttons[1][1]) == (
        ann.palette[0] + ann.palette[1] + "··"
    )
    too_fast = await stack.tap(chat, ann.message_id, ALICE, buttons[2][1])
    assert too_fast == texts.tap_too_fast(EN)
    assert await stack.redis.get(keys.tap_draft(rnd.id, ALICE)) == b"0,1"
    assert await stack.scalar(select(func.count()).select_from(Guess)) == 0

    # The draft lives in Redis, not in a worker: a worker started anew finds the guess
    # completed by the next taps, and scores it.
    stack.app.bot_data.drafts.rate = TapRate()
    async with in_process_worker(stack):
        assert await stack.tap(chat, ann.message_id, ALICE, buttons[2][1]) == (
            "".join(ann.palette[:3]) + "·"
        )
        guess = (*ann.palette[:3], ann.palette[0])
        sent = await stack.tap(chat, ann.message_id, ALICE, buttons[0][1])
        assert sent == texts.tap_sent(EN, guess)
        await stack.result(chat, -1, "Alice", "".join(guess))

        # Another chat's round ends and a new one starts: the old keyboard names the old
        # round, and a tap on it (a client still showing it) is refused.
        stack.standin.send_text(other, CAROL, "/endround")
        await stack.standin.wait_for_sent(lambda m: "🛑" in m.text, 15, chat_id=other)

        async def keyboard_gone() -> bool:  # an ended round's keyboard goes too
            return not stack.buttons(other, old_ann.message_id)

        await eventually(keyboard_gone, timeout=15, what="the ended round's keyboard removed")
        stack.standin.send_text(other, BOB, "/newgame")
        new_ann = await stack.standin.wait_for_sent(
            lambda m: m.text.startswith("🎯") and m.message_id > old_ann.message_id,
            15,
            chat_id=other,
        )
        assert stack.buttons(other, new_ann.message_id)
        old_data = taps.tap_data(elsewhere.id, 0)
        refused = await stack.tap(other, old_ann.message_id, BOB, old_data, stale=True)
        assert refused == texts.tap_round_over(EN)
        assert await stack.redis.exists(keys.tap_draft(elsewhere.id, BOB)) == 0
        new_round = await stack.open_round(other)
        assert new_round is not None and new_round.id != elsewhere.id
        assert await stack.redis.exists(keys.tap_draft(new_round.id, BOB)) == 0
    assert await stack.guess_count() == 1


async def test_hammered_taps_leave_no_more_keys_than_taps_let_through(stack: Stack) -> None:
    """200 taps at once against a rate of 8: 8 change the draft, 192 are refused, and only
    the 8 leave a key behind (a callback query seen), living minutes, not an hour."""
    chat = stack.new_group()
    keys = Keys(stack.settings.queue)
    async with in_process_worker(stack):
        ann, _ = await stack.new_round(chat, by=ALICE)
    button = stack.buttons(chat, ann.message_id)[0][1]
    stack.app.bot_data.drafts.rate = TapRate(most=8, window_ms=60_000)  # no slipping under
    # Bob's window starts here: one an earlier test opened would end mid-burst, letting 8 more.
    await stack.redis.delete(keys.tap_rate(BOB))
    before = len(stack.standin.callback_answers)
    pressed = {stack.standin.press_button(chat, ann.message_id, BOB, button) for _ in range(200)}

    async def all_answered() -> bool:
        answered = {a["callback_query_id"] for a in stack.standin.callback_answers[before:]}
        return pressed <= answered

    await eventually(all_answered, timeout=60, what="200 taps answered")
    toasts = [a.get("text") for a in stack.standin.callback_answers[before:]]
    # The 8 within the rate change the draft; a guess they complete may be refused for its
    # lane (the game says "slow down" then, to the taps after it too): refused all the same.
    refused = (texts.tap_too_fast(EN), texts.slow_down(EN))
    assert len([t for t in toasts if t in refused]) == 192, toasts
    seen = [key async for key in stack.redis.scan_iter(match=keys.prefix + "tap:seen:*")]
    assert len(seen) <= 8, len(seen)
    assert seen, "the taps let through are marked seen"
    for key in seen:
        assert 0 < await stack.redis.ttl(key) <= stack.settings.dedupe_window_s <= 15 * 60
