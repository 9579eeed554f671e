"""A round per forum topic, through the stand-in, the real bot and the real worker: two topics
of one forum play separate rounds at once, every post of a topic's game in that topic, and a
topic's root is nobody's message to reply to. (A win in a topic is posted there: its rows carry
the topic, tests/db/test_topics_and_keyboards.py.)"""

from __future__ import annotations

from sqlalchemy import func, select

from codemojex.db import Ban, Room, store
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.standin import SentMessage
from tests.e2e.harness import ALICE, BOB, CAROL, Stack, in_process_worker, result_text
from tests.helpers.support import wrong_guess


async def test_two_topics_of_a_forum_play_their_own_rounds_in_their_own_topics(
    stack: Stack,
) -> None:
    chat = stack.new_group(forum=True, bot_is_admin=True)
    puzzles = stack.standin.add_topic(chat, "Puzzles", ALICE)  # a user's topic
    lounge = (await stack.app.bot.create_forum_topic(chat, "Lounge")).message_thread_id
    send = stack.standin.send_text

    async def answer_in(topic: int, mid: int) -> SentMessage:
        found = await stack.standin.wait_for_sent(
            lambda m: m.reply_to_message_id == mid, 10, chat_id=chat
        )
        assert found.thread_id == topic, found
        return found

    async with in_process_worker(stack):
        send(chat, ALICE, "/newgame", thread_id=puzzles)
        send(chat, BOB, "/newgame", thread_id=lounge)
        ann_p = await stack.announcement(chat, thread_id=puzzles)
        ann_l = await stack.announcement(chat, thread_id=lounge)
        async with stack.sessionmaker() as session:
            room_p = await store.room_by_chat(session, chat, puzzles)
            room_l = await store.room_by_chat(session, chat, lounge)
            assert room_p is not None and room_l is not None and room_p.id != room_l.id
            round_p = await store.open_round(session, room_p.id)
            round_l = await store.open_round(session, room_l.id)
        assert round_p is not None and round_l is not None
        assert await stack.scalar(select(func.count()).select_from(Room)) == 2
        # Each round's keyboard is its own, and a tap finds its topic's round.
        buttons_p = stack.buttons(chat, ann_p.message_id)
        assert buttons_p != stack.buttons(chat, ann_l.message_id)
        label, data = buttons_p[0]
        assert await stack.tap(chat, ann_p.message_id, ALICE, data) == label + "···"

        # A guess in each topic is answered in that topic. (Four posts in the forum, which
        # Telegram paces as one chat: within its five posts per 15 s, so nothing waits.)
        for topic, rnd, ann in ((puzzles, round_p, ann_p), (lounge, round_l, ann_l)):
            miss = wrong_guess(rnd.secret_emojis, ann.palette, 0)
            mid = send(chat, BOB, "".join(miss), thread_id=topic)
            posted = await stack.result(chat, mid, "Bob", "".join(miss))
            assert posted.thread_id == topic
            assert result_text(miss, rnd.secret_emojis, 1) in posted.text
        assert await stack.open_round(chat) is None  # the General topic has no round

        # Records are the topic's own; /me adds the topics up.
        stats_l = await answer_in(lounge, send(chat, BOB, "/stats", thread_id=lounge))
        stats_p = await answer_in(puzzles, send(chat, ALICE, "/stats", thread_id=puzzles))
        assert "1 guess" in stats_l.text and "0 guesses" in stats_p.text
        me = await answer_in(puzzles, send(chat, BOB, "/me", thread_id=puzzles))
        assert me.text.startswith("Bob in 2 chats: 0 points, 0 wins, 2 guesses")

        # A tapped guess's result replies to nothing: it carries its topic itself.
        keys = dict(stack.buttons(chat, ann_l.message_id))
        tapped = wrong_guess(round_l.secret_emojis, ann_l.palette, 1)
        for emoji in tapped:
            await stack.tap(chat, ann_l.message_id, BOB, keys[emoji])
        posted = await stack.result(chat, -1, "Bob", "".join(tapped))
        assert posted.reply_to_message_id is None and posted.thread_id == lounge
        await stack.all_posted()
    # Every post of the forum's game went to one of its topics.
    assert all(m.thread_id in (puzzles, lounge) for m in stack.said(chat))


async def test_the_topic_root_is_no_reply_to_a_player_or_to_the_bot(stack: Stack) -> None:
    chat = stack.new_group(forum=True, bot_is_admin=True)
    alices = stack.standin.add_topic(chat, "Alice's topic", ALICE)
    bots = (await stack.app.bot.create_forum_topic(chat, "Bot's topic")).message_thread_id
    send = stack.standin.send_text

    # An admin's /ban and /weight in Alice's topic, replying to nothing: the root (Alice's
    # "topic created") is not taken for a reply to her.
    for command in ("/ban", "/weight 3"):
        mid = send(chat, CAROL, command, thread_id=alices)
        assert await stack.reply_to(chat, mid) == texts.reply_to_player(EN)
    # Replying to her own message does it.
    hers = send(chat, ALICE, "hi", thread_id=alices)
    mid = send(chat, CAROL, "/ban", reply_to=hers)
    assert await stack.reply_to(chat, mid) == texts.player_banned(EN, "Alice", 0)
    assert await stack.scalar(select(func.count()).select_from(Ban)) == 1

    # In the bot's own topic, chatter is not a reply to the bot (which would be taken for a
    # guess and refused): nothing is answered.
    before = len(stack.said(chat))
    send(chat, BOB, "hello everyone", thread_id=bots)
    await stack.settle()
    assert len(stack.said(chat)) == before
