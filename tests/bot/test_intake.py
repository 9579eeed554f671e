"""The front door through the real bot: no SQL on a guess's path, one script call for the
guesses of one event-loop turn, every refusal one answer, and what the bot remembers of a
room never deciding an answer (Redis's card does)."""

from __future__ import annotations

from sqlalchemy import func, select

from codemojex import usecases
from codemojex.db import Player
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.scoring import EMOJI_POOL
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    CAROL,
    DAVE,
    E2E,
    MAX_DEPTH,
    World,
    room_of,
    start_round,
    valid_guess,
)
from tests.helpers.sql import statements

pytestmark = E2E


async def test_guesses_cost_no_sql_and_one_script_call_per_turn(world: World) -> None:
    """Once the room's card is in Redis (its round opened by the bot), 20 guesses of four
    players, typed and replied, cost the bot no SQL at all, and reach the lanes in fewer
    script calls than guesses."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    intake = world.app.bot_data.intake
    flushes = intake.flushes
    with statements(world.engine) as sql:
        for i in range(5):
            for user in (ALICE, BOB, CAROL, DAVE):
                text = valid_guess(rnd, i)
                world.standin.send_text(chat, user, f"/g {text}" if i % 2 else text)
        await world.settle()
    assert sql == []
    assert await world.queued() == 20
    assert intake.flushes - flushes < 20
    # No player row was written by the bot: the worker writes them with the scores.
    assert await world.scalar(select(func.count()).select_from(Player)) == 0


async def test_every_refusal_is_one_answer(world: World) -> None:
    chat, idle, banned = world.new_group(), world.new_group(), world.new_group()
    rnd = await start_round(world, chat)
    rnd_banned = await start_round(world, banned)
    pal, n = rnd.palette_emojis, rnd.length
    outside = next(e for e in EMOJI_POOL if e not in pal)
    # Dave is banned in that room (his player: the id his first guess took).
    dave = world.standin.send_text(banned, DAVE, valid_guess(rnd_banned))
    await world.settle()
    world.standin.send_text(banned, ADMIN, "/ban", reply_to=dave)
    await world.settle()

    asked = {
        "palette": world.standin.send_text(chat, ALICE, f"/g {outside * n}"),
        "length": world.standin.send_text(chat, ALICE, f"/g {pal[0] * (n + 1)}"),
        "no round": world.standin.send_text(idle, ALICE, f"/g {pal[0] * n}"),
        "banned": world.standin.send_text(banned, DAVE, valid_guess(rnd_banned, 1)),
    }
    flood = [world.standin.send_text(chat, BOB, valid_guess(rnd, i)) for i in range(MAX_DEPTH + 3)]
    await world.settle()
    answers = {what: world.replies_to(c, mid) for what, (c, mid) in {
        "palette": (chat, asked["palette"]),
        "length": (chat, asked["length"]),
        "no round": (idle, asked["no round"]),
        "banned": (banned, asked["banned"]),
    }.items()}  # fmt: skip
    assert {what: len(said) for what, said in answers.items()} == dict.fromkeys(answers, 1)
    assert "palette" in answers["palette"][0]
    assert "Too long" in answers["length"][0]
    assert answers["no round"] == [texts.no_round(EN)]
    assert answers["banned"] == [texts.banned(EN)]
    assert [t for mid in flood for t in world.replies_to(chat, mid)] == [texts.slow_down(EN)]

    world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    paused = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(3)]
    await world.settle()
    assert [t for mid in paused for t in world.replies_to(chat, mid)] == [
        texts.scoring_paused_note(EN)
    ]


async def test_the_bots_memory_never_decides_an_answer(world: World) -> None:
    """What another process (or the worker) changed in Redis decides, not what this process
    last saw: a round closed there refuses the guess ("no round"), and a ban made there
    refuses the player, though this process still remembers the round open and the player
    free. Nothing is taken into a closed round's lane."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    assert await world.queued() == 1
    services = world.app.bot_data
    room = await room_of(world, chat)
    cached = services.cards.known(chat, 0)
    assert cached is not None and cached.round is not None and cached.round.id == rnd.id

    # The round ends elsewhere: the database, then the card (as the worker does on a win).
    await usecases.close_round(world.sessionmaker, rnd.id, "endround")
    await services.cards.shared.close(room.id, rnd.id)
    typed = world.standin.send_text(chat, ALICE, f"/g {valid_guess(rnd, 1)}")
    plain = world.standin.send_text(chat, BOB, valid_guess(rnd, 2))
    await world.settle()
    assert world.replies_to(chat, typed) == [texts.no_round(EN)]
    assert world.replies_to(chat, plain) == []
    assert await world.queued() == 1

    # A new round, and Bob banned in Redis by another process.
    rnd2 = await start_round(world, chat)
    await world.redis.sadd(services.cards.shared.keys.bans(room.id), str(BOB))
    refused = world.standin.send_text(chat, BOB, valid_guess(rnd2))
    taken = world.standin.send_text(chat, ALICE, valid_guess(rnd2))
    await world.settle()
    assert world.replies_to(chat, refused) == [texts.banned(EN)]
    assert world.replies_to(chat, taken) == []
    assert await world.queued() == 2
    rounds = set()
    while (job := await world.lanes.claim(10_000)) is not None:
        rounds.add(GuessJob.decode(job.payload).round_id)
        await world.lanes.ack(job)
    assert rounds == {rnd.id, rnd2.id}


async def test_a_player_keeps_one_lane_and_is_named_once(world: World) -> None:
    """A player's guesses go into the one lane their first guess took (fixed in the room's
    card), each job names the Telegram user, and the name travels with the first only."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    for i in range(3):
        world.standin.send_text(chat, ALICE, valid_guess(rnd, i))
    await world.settle()
    room = await room_of(world, chat)
    seat = (
        await world.app.bot_data.cards.shared.read(chat, 0, user_id=ALICE, room_id=room.id)
    ).seat
    jobs = []
    while (job := await world.lanes.claim(10_000)) is not None:
        jobs.append(job)
        await world.lanes.ack(job)
    assert {job.lane for job in jobs} == {seat}
    payloads = [GuessJob.decode(job.payload) for job in sorted(jobs, key=lambda j: j.seq)]
    assert [(p.user_id, p.name) for p in payloads] == [
        (ALICE, "Alice"),
        (ALICE, None),
        (ALICE, None),
    ]
