"""Guesses through the real bot: validated before enqueue, enqueued once, floods refused."""

from __future__ import annotations

from codemojex import texts
from codemojex.jobs import GuessJob
from codemojex.scoring import EMOJI_POOL
from tests.bot.conftest import ADMIN, ALICE, BOB, E2E, MAX_DEPTH, World, start_round, valid_guess

pytestmark = E2E


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
    assert (payload.round_id, payload.message_id) == (rnd.id, mid)
    assert "".join(payload.emojis) == guess


async def test_g_command_and_reply_to_the_bot_are_guesses(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, ALICE, f"/g {valid_guess(rnd)}")
    # A reply to one of the bot's messages is addressed to the bot: a guess, even a bad one.
    asked = world.standin.send_text(chat, BOB, "/rules")
    await world.settle()
    (rules,) = [m for m in world.said(chat) if m.reply_to_message_id == asked]
    bad = world.standin.send_text(chat, BOB, "what?", reply_to=rules.message_id)
    good = world.standin.send_text(chat, BOB, valid_guess(rnd, 1), reply_to=rules.message_id)
    await world.settle()
    assert await world.queued() == 2
    assert len(world.replies_to(chat, bad)) == 1
    assert world.replies_to(chat, good) == []


def _outside(palette: tuple[str, ...]) -> str:
    return next(e for e in EMOJI_POOL if e not in palette)


async def test_invalid_guesses_get_a_reason_and_enqueue_nothing(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    pal, n = rnd.palette_emojis, rnd.length
    hostile = [
        "",
        "hello",
        pal[0],
        pal[0] * (n - 1),
        pal[0] * (n + 1),
        _outside(pal) * n,
        pal[0] * 1900,
        "a" * 4000,
        "\u202e" + pal[0] * n,  # bidi override: invisible, ignored like spaces
        pal[0] + "\u200b" + "x" * 3,
        "1234",
        "<b>" + pal[0] * n + "</b>",
        "\x00" * 4,
    ]
    asked = [world.standin.send_text(chat, ALICE, f"/g {text}") for text in hostile]
    await world.settle()
    answers = {text: world.replies_to(chat, mid) for text, mid in zip(hostile, asked, strict=True)}
    # The bidi mark is invisible: that one is a valid guess, every other one is refused.
    valid = "\u202e" + pal[0] * n
    assert answers.pop(valid) == []
    for text, said in answers.items():
        assert len(said) == 1, (text[:20], said)
        assert said[0] and len(said[0]) < 300
    assert await world.queued() == 1


async def test_plain_chat_is_ignored_and_plain_emoji_guesses_are_answered(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    pal, n = rnd.palette_emojis, rnd.length
    chatter = ["hello everyone", "👍", "😂😂", f"{pal[0]}{pal[1]} lol", "/g@some_other_bot 🍎"]
    quiet = [world.standin.send_text(chat, BOB, text) for text in chatter]
    too_many = world.standin.send_text(chat, BOB, pal[0] * (n + 2))
    wrong = world.standin.send_text(chat, BOB, _outside(pal) * n)
    good = world.standin.send_text(chat, BOB, " ".join(valid_guess(rnd)))
    await world.settle()
    for mid in quiet:
        assert world.replies_to(chat, mid) == []
    assert "Too long" in world.replies_to(chat, too_many)[0]
    assert "palette" in world.replies_to(chat, wrong)[0]
    assert world.replies_to(chat, good) == []
    assert await world.queued() == 1


async def test_edited_messages_are_not_guesses(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    first = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    chat_line = world.standin.send_text(chat, BOB, "hmm")
    await world.settle()
    world.standin.edit_text(chat, first, valid_guess(rnd, 1))
    world.standin.edit_text(chat, chat_line, valid_guess(rnd, 2))
    world.standin.edit_text(chat, chat_line, f"/g {valid_guess(rnd, 2)}")
    await world.settle()
    assert await world.queued() == 1
    assert world.replies_to(chat, chat_line) == []


async def test_no_round_running(world: World) -> None:
    chat = world.new_group()
    asked = world.standin.send_text(chat, ALICE, "/g 🍎🍌🍇🍒")
    plain = world.standin.send_text(chat, ALICE, "🍎🍌🍇🍒")
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.NO_ROUND]
    assert world.replies_to(chat, plain) == []
    assert await world.queued() == 0


async def test_second_newgame_is_refused_while_a_round_runs(world: World) -> None:
    chat = world.new_group()
    await start_round(world, chat)
    again = world.standin.send_text(chat, BOB, "/newgame")
    await world.settle()
    assert world.replies_to(chat, again) == [texts.ROUND_RUNNING]


async def test_a_flood_gets_one_slow_down_and_does_not_block_others(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    flood = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(12)]
    other = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    assert await world.queued() == MAX_DEPTH + 1
    notices = [m for mid in flood for m in world.replies_to(chat, mid)]
    assert notices == [texts.SLOW_DOWN]
    assert world.replies_to(chat, other) == []


async def test_a_players_guesses_enter_the_lane_in_the_order_typed(world: World) -> None:
    """Updates are handled concurrently, but one sender's in order (PerSenderUpdateProcessor)."""
    chat, other = world.new_group(), world.new_group()
    rnd = await start_round(world, chat)
    rnd_other = await start_round(world, other)
    typed = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(MAX_DEPTH)]
    for i in range(MAX_DEPTH):
        world.standin.send_text(other, BOB, valid_guess(rnd_other, i))
    await world.settle()
    served: list[int] = []
    while (job := await world.lanes.claim(10_000)) is not None:
        payload = GuessJob.decode(job.payload)
        if payload.round_id == rnd.id:
            served.append(payload.message_id)
        await world.lanes.ack(job)
    assert served == typed


async def test_guesses_in_a_paused_room_are_kept_with_one_note_per_player(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    alice = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(3)]
    bob = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    assert await world.queued() == 4
    assert [t for mid in alice for t in world.replies_to(chat, mid)] == [texts.SCORING_PAUSED_NOTE]
    assert world.replies_to(chat, bob) == [texts.SCORING_PAUSED_NOTE]
    world.standin.send_text(chat, ADMIN, "/resume")
    await world.settle()
    after = world.standin.send_text(chat, BOB, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, after) == []
