"""The stand-in driven by the real python-telegram-bot `Bot` over HTTP."""

from __future__ import annotations

import asyncio
import datetime as dtm
import time
import warnings

import pytest
from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeAllPrivateChats,
    ChatMemberAdministrator,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatMemberStatus, ChatType, MessageEntityType
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TimedOut,
)

from codemojex.standin import CHANNEL_BOT_ID, GROUP_ANONYMOUS_BOT_ID, StandIn
from tests.helpers.support import free_port
from tests.standin.conftest import ADMIN, ALICE, BOB, GROUP, OTHER_GROUP, OWNER


def seconds(error: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns that this becomes a timedelta
        warnings.simplefilter("ignore")
        value = error.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


async def test_get_me_identifies_the_bot(bot: Bot, standin: StandIn) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.is_bot) == (123, "codemojex_bot", True)
    assert me.can_read_all_group_messages is True
    assert standin.calls["getMe"] >= 1


async def test_wrong_or_malformed_token_is_refused(standin: StandIn) -> None:
    for token in ("123:WRONG", "notatoken"):
        with pytest.raises(InvalidToken):  # Bot.initialize() calls getMe
            async with Bot(token, base_url=standin.base_url):
                pass
    assert standin.calls["getMe"] == 0


async def test_send_message_with_reply_is_recorded(bot: Bot, standin: StandIn) -> None:
    guess = standin.send_text(GROUP, ALICE, "🍎🍌🍇🍒")
    posted = await bot.send_message(
        GROUP, "🍎🍌🍇🍒 → 🟢🟢🟡⚫", reply_parameters=ReplyParameters(guess)
    )
    assert posted.chat.type == ChatType.SUPERGROUP
    assert posted.reply_to_message is not None
    assert posted.reply_to_message.message_id == guess
    assert posted.reply_to_message.from_user is not None
    assert posted.reply_to_message.from_user.id == ALICE
    assert posted.from_user is not None and posted.from_user.id == 123
    [sent] = standin.sent_messages(GROUP)
    assert (sent.message_id, sent.reply_to_message_id) == (posted.message_id, guess)
    typed_at = standin.message_ts(GROUP, guess)
    assert typed_at is not None and typed_at <= sent.ts
    assert standin.message_ts(GROUP, sent.message_id) == sent.ts
    assert sent.text == "🍎🍌🍇🍒 → 🟢🟢🟡⚫"
    assert standin.sent_messages(OTHER_GROUP) == []

    legacy = await bot.send_message(GROUP, "again", reply_to_message_id=guess)
    assert legacy.reply_to_message is not None
    assert legacy.reply_to_message.message_id == guess


async def test_reply_to_missing_message(bot: Bot, standin: StandIn) -> None:
    with pytest.raises(BadRequest, match=r"(?i)message to be replied not found"):
        await bot.send_message(GROUP, "x", reply_parameters=ReplyParameters(9999))
    posted = await bot.send_message(
        GROUP, "x", reply_parameters=ReplyParameters(9999, allow_sending_without_reply=True)
    )
    assert posted.reply_to_message is None
    assert len(standin.sent_messages()) == 1


async def test_text_limits_count_utf16_units(bot: Bot, standin: StandIn) -> None:
    await bot.send_message(GROUP, "a" * 4096)
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(GROUP, "a" * 4097)
    # 2,100 emojis are 2,100 code points but 4,200 UTF-16 units: Telegram refuses them.
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(GROUP, "🍎" * 2100)
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(GROUP, "   ")
    assert len(standin.sent_messages()) == 1


async def test_markup_is_parsed_or_refused(bot: Bot, standin: StandIn) -> None:
    posted = await bot.send_message(GROUP, "<b>Winner:</b> a &lt;b&gt; c", parse_mode="HTML")
    assert posted.text == "Winner: a <b> c"
    assert posted.entities[0].type == MessageEntityType.BOLD
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(GROUP, "<b>Winner:</b> <script>", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r"(?i)reserved"):
        await bot.send_message(GROUP, "*Round 3* ended.", parse_mode="MarkdownV2")
    ok = await bot.send_message(GROUP, "*Round 3* ended\\.", parse_mode="MarkdownV2")
    assert ok.text == "Round 3 ended."
    assert [m.text for m in standin.sent_messages()] == ["Winner: a <b> c", "Round 3 ended."]


async def test_administrators_and_members(bot: Bot, standin: StandIn) -> None:
    admins = await bot.get_chat_administrators(GROUP)
    assert [(a.user.id, a.status) for a in admins] == [
        (OWNER, ChatMemberStatus.OWNER),
        (ADMIN, ChatMemberStatus.ADMINISTRATOR),
    ]
    assert (await bot.get_chat_member(GROUP, ALICE)).status == ChatMemberStatus.MEMBER
    assert (await bot.get_chat_member(OTHER_GROUP, ALICE)).status == ChatMemberStatus.LEFT
    with pytest.raises(BadRequest, match=r"(?i)user not found"):
        await bot.get_chat_member(GROUP, 999)
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.get_chat_administrators(-42)

    standin.set_admins(GROUP, [ALICE], anonymous=[ALICE])
    admins = await bot.get_chat_administrators(GROUP)
    assert [a.user.id for a in admins] == [OWNER, ALICE]
    assert isinstance(admins[1], ChatMemberAdministrator)
    assert admins[1].is_anonymous is True
    assert (await bot.get_chat_member(GROUP, ADMIN)).status == ChatMemberStatus.MEMBER

    chat = await bot.get_chat(GROUP)
    assert (chat.id, chat.title, chat.type) == (GROUP, "Emoji Club", ChatType.SUPERGROUP)
    assert (await bot.get_chat(OTHER_GROUP)).type == ChatType.GROUP


def member_changes(updates: tuple[Update, ...]) -> list[tuple[int, str, str]]:
    found = [u.chat_member or u.my_chat_member for u in updates]
    return [
        (c.new_chat_member.user.id, c.old_chat_member.status, c.new_chat_member.status)
        for c in found
        if c is not None
    ]


async def test_set_admins_emits_chat_member_updates(bot: Bot, standin: StandIn) -> None:
    standin.set_admins(GROUP, [ADMIN, BOB])  # kept until the bot states what it wants
    updates = await bot.get_updates(timeout=0, allowed_updates=Update.ALL_TYPES)
    assert member_changes(updates) == [
        (BOB, ChatMemberStatus.MEMBER, ChatMemberStatus.ADMINISTRATOR)
    ]
    standin.set_admins(GROUP, [BOB, 123])
    # allowed_updates is remembered between calls.
    updates = await bot.get_updates(offset=updates[-1].update_id + 1, timeout=0)
    assert member_changes(updates) == [
        (ADMIN, ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.MEMBER),
        (123, ChatMemberStatus.MEMBER, ChatMemberStatus.ADMINISTRATOR),
    ]
    assert updates[-1].my_chat_member is not None


async def test_chat_member_updates_are_not_kept_unless_asked_for(
    bot: Bot, standin: StandIn
) -> None:
    standin.set_admins(GROUP, [ADMIN, BOB])
    # Telegram's default set leaves chat_member out, and does not store what it leaves out.
    assert await bot.get_updates(timeout=0, allowed_updates=[]) == ()
    standin.set_admins(GROUP, [ADMIN])
    assert standin.pending_updates == 0
    assert await bot.get_updates(timeout=0, allowed_updates=Update.ALL_TYPES) == ()
    standin.edit_text(GROUP, standin.send_text(GROUP, ALICE, "typo"), "fixed")
    standin.set_admins(GROUP, [ADMIN, BOB])
    updates = await bot.get_updates(timeout=0, allowed_updates=[Update.MESSAGE])
    # The message as it was sent; its edit and the admin change are not kept.
    assert [u.message.text for u in updates if u.message] == ["typo"]
    assert len(updates) == 1 and standin.pending_updates == 1
    standin.edit_text(GROUP, updates[0].message.message_id, "again")  # type: ignore[union-attr]
    assert standin.pending_updates == 1


async def test_commands_round_trip(bot: Bot, standin: StandIn) -> None:
    commands = [BotCommand("newgame", "Start a round"), BotCommand("g", "Guess")]
    assert await bot.set_my_commands(commands)
    assert [c.command for c in await bot.get_my_commands()] == ["newgame", "g"]
    assert [c["command"] for c in standin.registered_commands()] == ["newgame", "g"]
    with pytest.raises(BadRequest):
        await bot.set_my_commands([BotCommand("New-Game", "bad name")])
    assert await bot.delete_my_commands()
    assert await bot.get_my_commands() == ()


async def test_commands_per_language_take_two_letter_codes(bot: Bot, standin: StandIn) -> None:
    scope = BotCommandScopeAllPrivateChats()
    assert await bot.set_my_commands([BotCommand("help", "Команды")], scope, "ru")
    assert await bot.set_my_commands([BotCommand("help", "Commands")], scope)
    ru = await bot.get_my_commands(scope, "ru")
    assert [c.description for c in ru] == ["Команды"]
    assert standin.registered_commands({"type": "all_private_chats"}, "ru") == [
        {"command": "help", "description": "Команды"}
    ]
    assert [c.description for c in await bot.get_my_commands(scope)] == ["Commands"]
    for code in ("pt-br", "pt_BR", "RU", "rus"):  # Telegram takes ISO 639-1 codes only
        with pytest.raises(BadRequest, match=r"(?i)invalid language code"):
            await bot.set_my_commands([BotCommand("help", "Ajuda")], scope, code)


async def test_edit_and_delete(bot: Bot, standin: StandIn) -> None:
    posted = await bot.send_message(GROUP, "Round 1: 0 guesses")
    edited = await bot.edit_message_text("Round 1: 3 guesses", GROUP, posted.message_id)
    assert not isinstance(edited, bool)
    assert edited.text == "Round 1: 3 guesses"
    assert edited.edit_date is not None
    current = standin.message(GROUP, posted.message_id)
    assert current is not None and current["text"] == "Round 1: 3 guesses"
    assert [e.text for e in standin.edited_messages(GROUP)] == ["Round 1: 3 guesses"]
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("Round 1: 3 guesses", GROUP, posted.message_id)
    user_message = standin.send_text(GROUP, ALICE, "hello")
    with pytest.raises(BadRequest, match=r"(?i)can't be edited"):
        await bot.edit_message_text("hijack", GROUP, user_message)
    with pytest.raises(BadRequest, match=r"(?i)can't be deleted"):
        await bot.delete_message(GROUP, user_message)
    assert await bot.delete_message(GROUP, posted.message_id)
    assert standin.message(GROUP, posted.message_id) is None
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("late", GROUP, posted.message_id)


async def test_inline_buttons_and_callback_queries(bot: Bot, standin: StandIn) -> None:
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Join", callback_data="join:1")]])
    posted = await bot.send_message(GROUP, "Round 1", reply_markup=keyboard)
    assert posted.reply_markup == keyboard
    with pytest.raises(ValueError, match="no button"):
        standin.press_button(GROUP, posted.message_id, ALICE, "join:2")
    query_id = standin.press_button(GROUP, posted.message_id, ALICE, "join:1")
    [update] = await bot.get_updates()
    query = update.callback_query
    assert query is not None and query.message is not None
    assert (query.id, query.data, query.from_user.id) == (query_id, "join:1", ALICE)
    assert query.message.message_id == posted.message_id
    assert await query.answer("You are in")
    assert standin.callback_answers[0]["text"] == "You are in"
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await query.answer("twice")
    with pytest.raises(BadRequest, match=r"(?i)BUTTON_DATA_INVALID"):
        too_long = InlineKeyboardButton("x", callback_data="x" * 65)
        await bot.send_message(GROUP, "bad", reply_markup=InlineKeyboardMarkup([[too_long]]))
    edited = await bot.edit_message_reply_markup(GROUP, posted.message_id, reply_markup=None)
    assert not isinstance(edited, bool) and edited.reply_markup is None
    with pytest.raises(BadRequest, match=r"(?i)not modified"):
        await bot.edit_message_reply_markup(GROUP, posted.message_id, reply_markup=None)


async def test_a_stale_client_and_a_redelivered_press(bot: Bot, standin: StandIn) -> None:
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Join", callback_data="join:1")]])
    posted = await bot.send_message(GROUP, "Round 1", reply_markup=keyboard)
    await bot.edit_message_reply_markup(GROUP, posted.message_id, reply_markup=None)
    # An app still showing the removed keyboard can press it; the same query can come twice.
    first = standin.press_button(GROUP, posted.message_id, ALICE, "join:1", stale=True)
    again = standin.press_button(
        GROUP, posted.message_id, ALICE, "join:1", stale=True, query_id=first
    )
    updates = await bot.get_updates()
    assert (
        [u.callback_query.id for u in updates if u.callback_query]
        == [first, again]
        == [
            first,
            first,
        ]
    )


async def test_forum_topics(bot: Bot, standin: StandIn) -> None:
    forum = -1005550001
    standin.add_group(forum, "Forum", admins=[OWNER], members=[ALICE], forum=True)
    chat = await bot.get_chat(forum)
    assert chat.is_forum is True
    with pytest.raises(BadRequest, match=r"(?i)not enough rights"):
        await bot.create_forum_topic(forum, "Bot's")
    standin.set_admins(forum, [standin.bot.id])
    ours = (await bot.create_forum_topic(forum, "Bot's")).message_thread_id
    theirs = standin.add_topic(forum, "Alice's", ALICE)
    await bot.get_updates()  # the admin change and Alice's "topic created"
    # A message in a topic carries it, and the topic's root as what it replies to.
    standin.send_text(forum, ALICE, "hello", thread_id=theirs)
    [update] = await bot.get_updates(offset=-1)
    message = update.message
    assert message is not None and message.is_topic_message
    assert message.message_thread_id == theirs
    root = message.reply_to_message
    assert root is not None and root.forum_topic_created is not None
    assert root.forum_topic_created.name == "Alice's"
    assert root.from_user is not None and root.from_user.id == ALICE
    # The bot posts in a topic by naming it, or by replying to a message in it.
    posted = await bot.send_message(forum, "in ours", message_thread_id=ours)
    assert posted.is_topic_message and posted.message_thread_id == ours
    reply = await bot.send_message(forum, "in theirs", reply_to_message_id=message.message_id)
    assert reply.message_thread_id == theirs
    general = await bot.send_message(forum, "in General")
    assert general.message_thread_id is None
    assert [m.thread_id for m in standin.sent_messages(forum)] == [ours, theirs, None]
    with pytest.raises(BadRequest, match=r"(?i)thread not found"):
        await bot.send_message(forum, "nowhere", message_thread_id=999)
    with pytest.raises(BadRequest, match=r"(?i)not a forum"):
        await bot.create_forum_topic(GROUP, "x")


async def test_injected_429_surfaces_as_retry_after(bot: Bot, standin: StandIn) -> None:
    standin.inject_429(2, retry_after=3)
    for _ in range(2):
        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(GROUP, "posted later")
        assert seconds(caught.value) == 3
    await bot.get_me()  # other methods are not affected
    await bot.send_message(GROUP, "posted later")
    assert [m.text for m in standin.sent_messages()] == ["posted later"]
    assert standin.injected_errors == 2
    assert standin.calls["sendMessage"] == 3


async def test_injected_429_for_a_duration(bot: Bot, standin: StandIn) -> None:
    # Generous window: the two refused calls must land in it even on a loaded machine.
    ends = time.monotonic() + 1.5
    standin.inject_429(seconds=1.5, retry_after=1, methods=None)
    with pytest.raises(RetryAfter):
        await bot.get_me()
    with pytest.raises(RetryAfter):
        await bot.send_message(GROUP, "x")
    await asyncio.sleep(ends - time.monotonic() + 0.05)
    await bot.send_message(GROUP, "x")
    assert len(standin.sent_messages()) == 1


async def test_injected_429_for_one_chat(bot: Bot, standin: StandIn) -> None:
    standin.inject_429(seconds=5, chat_id=GROUP)
    await bot.send_message(OTHER_GROUP, "quiet room is not throttled")
    with pytest.raises(RetryAfter):
        await bot.send_message(GROUP, "busy room is")


async def test_other_injected_errors(bot: Bot, standin: StandIn) -> None:
    standin.inject_error(502, "Bad Gateway")
    with pytest.raises(NetworkError):
        await bot.send_message(GROUP, "x")
    standin.inject_error(403, "Forbidden: bot was kicked from the supergroup chat")
    with pytest.raises(Forbidden):
        await bot.send_message(GROUP, "x")
    assert standin.sent_messages() == []


async def test_lost_response_posts_but_the_client_sees_a_network_error(
    bot: Bot, standin: StandIn
) -> None:
    standin.inject_lost_response(1)
    with pytest.raises(NetworkError):
        await bot.send_message(GROUP, "did it go out?")
    assert [m.text for m in standin.sent_messages()] == ["did it go out?"]
    await bot.send_message(GROUP, "next one answers normally")
    assert len(standin.sent_messages()) == 2


async def test_slow_call_times_out_at_the_client_but_is_carried_out(standin: StandIn) -> None:
    standin.inject_latency(0.5, 1)
    async with Bot(standin.token, base_url=standin.base_url) as bot:
        with pytest.raises(TimedOut):
            await bot.send_message(GROUP, "slow", read_timeout=0.1)
    posted = await standin.wait_for_sent(lambda m: m.text == "slow", timeout=5)
    assert posted.chat_id == GROUP


async def test_rate_limits_per_chat_are_enforced_and_counted(bot: Bot, standin: StandIn) -> None:
    standin.enforce_rate_limits(per_chat_per_s=1, per_group_per_min=20, global_per_s=30)
    await bot.send_message(GROUP, "first")
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(GROUP, "second, too soon")
    assert seconds(caught.value) == 1
    await bot.send_message(OTHER_GROUP, "another chat is fine")
    assert standin.rate_violations == 1
    [violation] = standin.violations
    assert (violation.chat_id, violation.rule) == (GROUP, "per_chat_per_s")
    assert [m.text for m in standin.sent_messages()] == ["first", "another chat is fine"]


async def test_rate_limits_per_group_minute_and_global(bot: Bot, standin: StandIn) -> None:
    standin.enforce_rate_limits(per_chat_per_s=None, per_group_per_min=3, global_per_s=None)
    for i in range(3):
        await bot.send_message(GROUP, f"m{i}")
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(GROUP, "m3")
    assert 55 <= seconds(caught.value) <= 60
    standin.enforce_rate_limits(per_chat_per_s=None, per_group_per_min=None, global_per_s=2)
    standin.add_user(31, "Pat")
    standin.send_private(31, "/start")
    # Concurrent, so all three arrive within the one-second window.
    outcomes = await asyncio.gather(
        bot.send_message(31, "a"),
        bot.send_message(OTHER_GROUP, "b"),
        bot.send_message(31, "c"),
        return_exceptions=True,
    )
    assert sum(isinstance(o, RetryAfter) for o in outcomes) == 1
    assert [v.rule for v in standin.violations] == ["per_group_per_min", "global_per_s"]
    standin.disable_rate_limits()
    await bot.send_message(31, "c")


async def test_a_hidden_bot_wide_limit_refuses_with_an_honest_retry_after(
    bot: Bot, standin: StandIn
) -> None:
    """Past the bot-wide limit every chat is refused alike (the 429 names no scope), for as
    long as the window needs to have room again; a chat may post its burst at once."""
    standin.enforce_rate_limits(per_chat_per_s=1, global_per_s=5, chat_burst=3)
    chats = [GROUP - 100 - i for i in range(6)]
    for chat in chats:
        standin.add_group(chat, f"busy {chat}")
    started = time.monotonic()
    outcomes = await asyncio.gather(
        *(bot.send_message(chat, "x") for chat in chats), return_exceptions=True
    )
    refused = [o for o in outcomes if isinstance(o, RetryAfter)]
    assert len(refused) == 1 and seconds(refused[0]) == 1
    assert [v.rule for v in standin.violations] == ["global_per_s"]
    # The wait it named is enough: the window has room again after it.
    await asyncio.sleep(max(0.0, started + seconds(refused[0]) - time.monotonic()))
    await bot.send_message(chats[0], "y")
    standin.enforce_rate_limits(per_chat_per_s=1, global_per_s=None, chat_burst=3)
    for text in ("a", "b", "c"):  # a chat's burst
        await bot.send_message(GROUP, text)
    with pytest.raises(RetryAfter):
        await bot.send_message(GROUP, "d")
    assert standin.violations[-1].rule == "per_chat_per_s"


async def test_forbidden_chats(bot: Bot, standin: StandIn) -> None:
    standin.add_user(31, "Pat")
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.send_message(31, "you never started me")
    standin.send_private(31, "/start")
    await bot.send_message(31, "hi")
    standin.block_bot(31)
    with pytest.raises(Forbidden, match=r"(?i)blocked"):
        await bot.send_message(31, "hi again")
    standin.remove_bot(OTHER_GROUP)
    with pytest.raises(Forbidden, match=r"(?i)kicked"):
        await bot.send_message(OTHER_GROUP, "anyone?")


async def test_long_poll_waits_for_an_update(bot: Bot, standin: StandIn) -> None:
    async def type_later() -> int:
        await asyncio.sleep(0.2)
        return standin.send_text(GROUP, ALICE, "late")

    typing = asyncio.create_task(type_later())
    updates = await bot.get_updates(timeout=10)
    message_id = await typing
    assert [u.message.message_id for u in updates if u.message] == [message_id]


async def test_get_updates_offset_limit_and_confirmation(bot: Bot, standin: StandIn) -> None:
    ids = [standin.send_text(GROUP, ALICE, f"m{i}") for i in range(5)]
    first = await bot.get_updates(limit=2)
    assert [u.message.message_id for u in first if u.message] == ids[:2]
    again = await bot.get_updates()  # nothing confirmed yet: redelivered
    assert len(again) == 5
    rest = await bot.get_updates(offset=first[-1].update_id + 1)
    assert [u.message.message_id for u in rest if u.message] == ids[2:]
    assert standin.pending_updates == 3
    assert await bot.get_updates(offset=rest[-1].update_id + 1, timeout=0) == ()
    assert standin.pending_updates == 0


async def test_a_second_poller_is_a_conflict(bot: Bot, standin: StandIn) -> None:
    first = asyncio.create_task(bot.get_updates(timeout=5))
    await asyncio.sleep(0.1)
    async with Bot(standin.token, base_url=standin.base_url) as second_instance:
        assert await second_instance.get_updates(timeout=0) == ()
    with pytest.raises(Conflict, match=r"(?i)terminated by other getUpdates"):
        await first


async def test_webhook_blocks_polling(bot: Bot, standin: StandIn) -> None:
    assert await bot.set_webhook("http://127.0.0.1:9/hook", secret_token="s3cr3t")
    info = await bot.get_webhook_info()
    assert info.url == "http://127.0.0.1:9/hook"
    assert standin.webhook_secret == "s3cr3t"
    with pytest.raises(Conflict, match=r"(?i)webhook is active"):
        await bot.get_updates()
    with pytest.raises(BadRequest, match=r"(?i)secret token"):
        await bot.set_webhook("http://127.0.0.1:9/hook", secret_token="no spaces allowed")
    assert await bot.delete_webhook()
    assert await bot.get_updates(timeout=0) == ()


async def test_unreachable_webhook_keeps_updates_and_reports_the_error(
    bot: Bot, standin: StandIn
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/hook"  # a port with nobody listening
    assert await bot.set_webhook(dead)
    said = standin.send_text(GROUP, ALICE, "anyone there?")
    for _ in range(100):
        info = await bot.get_webhook_info()
        if info.last_error_message:
            break
        await asyncio.sleep(0.02)
    assert info.last_error_message and info.pending_update_count == 1
    assert await bot.delete_webhook()
    [update] = await bot.get_updates()
    assert update.message is not None and update.message.message_id == said


async def test_group_upgraded_to_supergroup(bot: Bot, standin: StandIn) -> None:
    await bot.send_message(OTHER_GROUP, "before")
    new_id = standin.migrate_to_supergroup(OTHER_GROUP)
    assert new_id == int(f"-100{abs(OTHER_GROUP)}")
    with pytest.raises(ChatMigrated) as caught:
        await bot.send_message(OTHER_GROUP, "after")
    assert caught.value.new_chat_id == new_id
    await bot.send_message(new_id, "after")
    assert (await bot.get_chat(new_id)).type == ChatType.SUPERGROUP
    assert [a.user.id for a in await bot.get_chat_administrators(new_id)] == [OWNER]
    old_side, new_side = await bot.get_updates()
    assert old_side.message is not None and new_side.message is not None
    assert old_side.message.migrate_to_chat_id == new_id
    assert new_side.message.migrate_from_chat_id == OTHER_GROUP
    with pytest.raises(ValueError, match="upgraded"):
        standin.send_text(OTHER_GROUP, OWNER, "hello?")


async def test_anonymous_admin_message(bot: Bot, standin: StandIn) -> None:
    standin.send_as_anonymous_admin(GROUP, "/pause")
    [update] = await bot.get_updates()
    message = update.message
    assert message is not None and message.from_user is not None
    assert message.from_user.id == GROUP_ANONYMOUS_BOT_ID
    assert message.from_user.username == "GroupAnonymousBot"
    assert message.sender_chat is not None and message.sender_chat.id == GROUP
    assert message.entities[0].type == MessageEntityType.BOT_COMMAND


async def test_posting_as_a_channel_is_not_an_anonymous_admin(bot: Bot, standin: StandIn) -> None:
    standin.send_as_channel(GROUP, -1005555, "/pause", channel_title="Spam Channel")
    [update] = await bot.get_updates()
    message = update.message
    assert message is not None and message.from_user is not None
    assert message.from_user.id == CHANNEL_BOT_ID
    assert message.sender_chat is not None
    assert (message.sender_chat.id, message.sender_chat.type) == (-1005555, ChatType.CHANNEL)
    assert message.sender_chat.id != message.chat.id
    assert standin.stats()["pending_updates"] == 1


async def test_commands_edits_and_private_chats(bot: Bot, standin: StandIn) -> None:
    command = standin.send_text(GROUP, BOB, "/g@codemojex_bot 🍎🍌🍇🍒")
    standin.edit_text(GROUP, command, "/g 🍒🍒🍒🍒")
    standin.send_private(ALICE, "/stats")
    updates = await bot.get_updates()
    assert updates[0].message is not None
    entity = updates[0].message.entities[0]
    assert (entity.type, entity.offset, entity.length) == ("bot_command", 0, 16)
    edited = updates[1].edited_message
    assert edited is not None and edited.edit_date is not None
    assert (edited.message_id, edited.text) == (command, "/g 🍒🍒🍒🍒")
    private = updates[2].message
    assert private is not None
    assert (private.chat.type, private.chat.id) == (ChatType.PRIVATE, ALICE)
    await bot.send_message(ALICE, "Your record: nothing yet")
    with pytest.raises(BadRequest, match=r"(?i)no administrators in the private chat"):
        await bot.get_chat_administrators(ALICE)


async def test_raw_update_without_sender(bot: Bot, standin: StandIn) -> None:
    standin.push_raw_update(
        {
            "message": {
                "message_id": 77,
                "date": 0,
                "chat": {"id": GROUP, "type": "supergroup", "title": "Emoji Club"},
                "text": "no sender at all",
            }
        }
    )
    [update] = await bot.get_updates()
    assert update.effective_user is None
    assert update.effective_chat is not None and update.effective_chat.id == GROUP
    assert update.message is not None
    replayed = {"update_id": 999_999_999, "message": update.message.to_dict()}
    assert standin.push_raw_update(replayed, keep_id=True) == 999_999_999
    later = standin.send_text(GROUP, ALICE, "ids keep growing")
    first, second = await bot.get_updates(offset=update.update_id + 1)
    assert first.update_id == 999_999_999
    assert second.update_id > first.update_id
    assert second.message is not None and second.message.message_id == later


async def test_privacy_mode_filters_group_messages() -> None:
    async with StandIn(privacy_mode=True) as standin:
        standin.add_user(ALICE, "Alice")
        standin.add_group(GROUP, "G", admins=[ALICE])
        async with Bot(standin.token, base_url=standin.base_url) as bot:
            assert (await bot.get_me()).can_read_all_group_messages is False
            posted = await bot.send_message(GROUP, "Round started")
            standin.send_text(GROUP, ALICE, "chatting")
            standin.send_text(GROUP, ALICE, "/g@another_bot 🍎")
            wanted = [
                standin.send_text(GROUP, ALICE, "/g 🍎"),
                standin.send_text(GROUP, ALICE, "🍎", reply_to=posted.message_id),
                standin.send_text(GROUP, ALICE, "hey @codemojex_bot"),
            ]
            updates = await bot.get_updates()
            assert [u.message.message_id for u in updates if u.message] == wanted
