"""Inline mode and channels on the stand-in, driven by the real python-telegram-bot `Bot`."""

from __future__ import annotations

import pytest
from telegram import Bot, InlineQueryResultArticle, InputTextMessageContent
from telegram.error import BadRequest

from codemojex.standin import StandIn
from tests.standin.conftest import ALICE, GROUP

CHANNEL = -1005550001


def article(
    result_id: str, text: str, title: str = "Codemojex daily #1 3/8"
) -> InlineQueryResultArticle:
    return InlineQueryResultArticle(
        id=result_id, title=title, input_message_content=InputTextMessageContent(text)
    )


async def test_inline_queries_only_with_inline_mode_on(bot: Bot, standin: StandIn) -> None:
    assert (await bot.get_me()).supports_inline_queries is False
    with pytest.raises(ValueError, match="setinline"):
        standin.inline_query(ALICE, "daily")
    standin.inline_mode = True
    bot_again = Bot(standin.token, base_url=standin.base_url)
    async with bot_again:
        assert (await bot_again.get_me()).supports_inline_queries is True


async def test_an_inline_query_is_delivered_answered_and_its_result_posted(
    bot: Bot, standin: StandIn
) -> None:
    standin.inline_mode = True
    query_id = standin.inline_query(ALICE, "daily", chat_type="supergroup")
    [update] = await bot.get_updates(allowed_updates=["message", "inline_query"])
    assert update.inline_query is not None
    assert (update.inline_query.id, update.inline_query.query) == (query_id, "daily")
    assert update.inline_query.from_user.id == ALICE
    assert update.inline_query.chat_type == "supergroup"
    card = "Codemojex daily #1 3/8\n🟡🟡⚫⚫\n🟢🟢🟡⚫\n🟢🟢🟢🟢"
    assert await update.inline_query.answer(
        [article("card-1", card)], cache_time=5, is_personal=True
    )
    [answered] = standin.inline_answers
    assert (answered["user_id"], answered["cache_time"], answered["is_personal"]) == (
        ALICE,
        5,
        True,
    )
    assert standin.inline_results(query_id)[0]["input_message_content"]["message_text"] == card
    # answered once: a second answer is too late, as on Telegram
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_inline_query(query_id, [article("card-1", card)])
    # Alice picks it in the group: posted there from her, via the bot
    message_id = standin.choose_inline_result(query_id, "card-1", GROUP)
    posted = standin.message(GROUP, message_id)
    assert posted is not None and posted["text"] == card
    assert posted["from"]["id"] == ALICE and posted["via_bot"]["id"] == bot.id
    updates = await bot.get_updates(offset=update.update_id + 1)
    assert [u.message.text for u in updates if u.message] == [card]


async def test_bad_inline_results_are_refused(bot: Bot, standin: StandIn) -> None:
    standin.inline_mode = True
    cases = [
        ([article("a", "x"), article("a", "y")], "RESULT_ID_DUPLICATE"),
        ([article("x" * 65, "y")], "RESULT_ID_INVALID"),
        ([article("a", "x", title="")], "title"),
    ]
    for results, why in cases:
        query_id = standin.inline_query(ALICE)
        with pytest.raises(BadRequest, match=rf"(?i){why}"):
            await bot.answer_inline_query(query_id, results)
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_inline_query("no such query", [])


async def test_a_channel_post_reaches_the_bot_and_an_admin_bot_posts_there(
    bot: Bot, standin: StandIn
) -> None:
    standin.add_channel(CHANNEL, "News")
    standin.post_in_channel(CHANNEL, "/daily")
    [update] = await bot.get_updates(allowed_updates=["channel_post"])
    post = update.channel_post
    assert post is not None and post.text == "/daily" and post.from_user is None
    assert post.sender_chat is not None and post.sender_chat.id == CHANNEL
    assert post.entities[0].type == "bot_command"
    reply = await post.reply_text("played in a private chat")
    assert reply.chat.id == CHANNEL
    standin.add_channel(CHANNEL - 1, "Not ours to post in", bot_is_admin=False)
    with pytest.raises(BadRequest, match="administrator rights"):
        await bot.send_message(CHANNEL - 1, "hello")
