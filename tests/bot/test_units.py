"""The bot's pure parts: argument parsing, the admin cache, /queue formatting, webhook options."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr, ValidationError
from telegram import Bot, Chat, ForumTopicCreated, Message, User

from codemojex.bot import guesses
from codemojex.bot.admin import AdminCache, is_admin
from codemojex.bot.app import make_services
from codemojex.bot.guesses import MAX_PLAIN_EMOJIS, looks_like_guess
from codemojex.bot.incoming import parse_bounded_int, replied_to
from codemojex.bot.names import topic_of
from codemojex.bot.webhook import WeakWebhook
from codemojex.game.texts import queue_view as format_queue
from codemojex.lanes import Lanes
from codemojex.locale import EN
from codemojex.scoring.emoji import clusters
from codemojex.settings import Settings
from codemojex.standin import CHANNEL_BOT_ID, GROUP_ANONYMOUS_BOT_ID, StandIn
from codemojex.state.keys import Keys
from codemojex.values import ids


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", 1), ("1000", 1000), (" 42 ", 42), ("007", 7)],
)
def test_bounded_int_accepts(text: str, expected: int) -> None:
    assert parse_bounded_int(text, 1, 1000, "/limit", EN) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0",
        "-1",
        "1001",
        "abc",
        "99999999999999999999",
        "１２",
        "3.5",
        "0x10",
        "1 2",
        "+5",
        "1e3",
    ],
)
def test_bounded_int_refuses(text: str) -> None:
    answer = parse_bounded_int(text, 1, 1000, "/limit", EN)
    assert answer == "/limit takes one whole number from 1 to 1000."


STRONG = "A" * 31 + "_"


@pytest.mark.parametrize(
    "secret",
    [None, "", "abc", "s3cret-Token_for-tests", "A" * 31, "A" * 257, "A" * 31 + "!", "Ä" * 32],
)
def test_webhook_mode_refuses_a_missing_or_weak_secret(secret: str | None) -> None:
    settings = Settings(token="1:x", webhook_url="https://example.org/hook", webhook_secret=secret)
    with pytest.raises(WeakWebhook, match="32 to 256 characters of A-Z a-z 0-9 _ -") as refused:
        settings.bot().webhook()
    assert secret is None or len(secret) < 3 or secret not in str(refused.value)


def test_webhook_config_of_a_strong_secret() -> None:
    with pytest.raises(WeakWebhook, match="CODEMOJEX_WEBHOOK_URL"):
        Settings(token="1:x", webhook_secret=STRONG).bot().webhook()
    config = (
        Settings(token="1:x", webhook_url="https://example.org/tg/hook/", webhook_secret=STRONG)
        .bot()
        .webhook()
    )
    assert (config.path, config.secret, config.body_max) == ("/tg/hook", STRONG, 2 * 1024 * 1024)
    assert STRONG not in repr(config)
    assert (
        Settings(token="1:x", webhook_url="https://e.org/h", webhook_secret="-" * 256)
        .bot()
        .webhook()
    )


@pytest.mark.parametrize(
    ("text", "guess"),
    [
        ("🍎🍌🍇", True),
        ("🍎 🍌 🍇 🍒", True),
        ("\u200e🍎🍌\u200b🍇", True),
        ("👍🏽🇫🇷👨‍👩‍👧", True),
        ("🍎" * 6, True),
        ("🍎 " * 6, True),
        ("🍎" * 7, False),  # more than the longest code: an emoji wall, not a guess
        ("🍎" * 40, False),
        ("👍", False),
        ("😂😂", False),
        ("🍎🍌🍇 lol", False),
        ("hello", False),
        ("", False),
        ("   ", False),
        ("1234", False),
        ("🍎🍌🍇\x00", False),
    ],
)
def test_the_plain_message_rule(text: str, guess: bool) -> None:
    assert looks_like_guess(text) is guess


def test_the_plain_message_rule_reads_a_bounded_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """4,096 regional indicators (2,048 flags, the longest such message Telegram carries) are
    decided from the first MAX_PLAIN_EMOJIS + 1 grapheme clusters, not split whole."""
    pulled = 0

    def counted(text: str) -> Iterator[str]:
        nonlocal pulled
        for cluster in clusters(text):
            pulled += 1
            yield cluster

    monkeypatch.setattr(guesses, "clusters", counted)
    for wall in ("\U0001f1eb" * 4096, "🍎 " * 2048, "🇫🇷" * 7 + "x" * 4000):
        pulled = 0
        assert looks_like_guess(wall) is False
        assert pulled <= MAX_PLAIN_EMOJIS + 1
    pulled = 0
    assert looks_like_guess("🇫🇷🇫🇷🇫🇷") is True
    assert pulled == 3


def test_queue_text_names_players_and_hides_ids() -> None:
    alice, bob, carol = (ids.mint(ids.PLAYER) for _ in range(3))
    view = {
        "paused": True,
        "ceiling": 2,
        "in_flight": 1,
        "pending": 5,
        "lanes": {
            alice: {"depth": 1, "weight": 1, "paused": False},
            bob: {"depth": 4, "weight": 3, "paused": False},
            carol: {"depth": 0, "weight": 1, "paused": False},
        },
    }
    text = format_queue(EN, view, {alice: "Alice", bob: "Bob"})
    assert text.splitlines() == [
        "Scoring paused · in flight 1/2 · waiting 5",
        "Bob: 4 waiting (weight 3)",
        "Alice: 1 waiting",
    ]
    assert "PLR" not in text
    assert format_queue(EN, None, {}) == "Nothing queued here yet."


async def test_admin_cache_asks_once_per_ttl_and_forgets_on_request() -> None:
    now = [0.0]
    cache = AdminCache(ttl_s=60, clock=lambda: now[0])
    async with StandIn() as standin:
        standin.add_user(1, "Ann")
        standin.add_user(2, "Ben")
        standin.add_group(-5, "g", admins=[1, 2])
        async with Bot(standin.token, base_url=standin.base_url) as bot:
            assert await cache.admins(bot, -5) == {1, 2}
            assert await cache.admins(bot, -5) == {1, 2}
            assert standin.calls["getChatAdministrators"] == 1
            now[0] = 61.0
            standin.set_admins(-5, [1])
            assert await cache.admins(bot, -5) == {1}  # the owner stays
            assert standin.calls["getChatAdministrators"] == 2
            standin.set_admins(-5, [1, 2])
            cache.forget(-5)
            assert await cache.admins(bot, -5) == {1, 2}
            assert standin.calls["getChatAdministrators"] == 3


def test_the_admin_cache_ttl_is_capped() -> None:
    assert Settings(admin_cache_ttl_s=600).admin_cache_ttl_s == 600
    with pytest.raises(ValidationError):
        Settings(admin_cache_ttl_s=601)
    with pytest.raises(ValueError):
        AdminCache(ttl_s=3600)


GROUP, OTHER_GROUP, CHANNEL = -100123, -100456, -100789
OWNER, ADMIN, MEMBER, OPERATOR = 11, 12, 13, 14


def _message(user: int | None, sender_chat: Chat | None = None) -> Message:
    people = {OWNER: "Owner", ADMIN: "Admin", MEMBER: "Member", OPERATOR: "Olga"}
    if user is not None:
        from_user = User(user, people[user], is_bot=False)
    elif sender_chat is not None and sender_chat.type == Chat.CHANNEL:
        from_user = User(CHANNEL_BOT_ID, "Channel", is_bot=True)
    else:
        from_user = User(GROUP_ANONYMOUS_BOT_ID, "Group", is_bot=True)
    return Message(
        1,
        datetime.now(UTC),
        Chat(GROUP, Chat.SUPERGROUP, title="g"),
        from_user=from_user,
        sender_chat=sender_chat,
    )


@pytest.mark.parametrize(
    ("who", "allowed"),
    [
        ("creator", True),
        ("administrator", True),
        ("this chat's anonymous admin", True),
        ("operator", True),
        ("another chat's anonymous admin", False),
        ("a channel posting in the chat", False),
        ("member", False),
        ("operator posting as a channel", False),
    ],
)
async def test_is_admin(who: str, allowed: bool) -> None:
    message = {
        "creator": _message(OWNER),
        "administrator": _message(ADMIN),
        "this chat's anonymous admin": _message(None, Chat(GROUP, Chat.SUPERGROUP, title="g")),
        "operator": _message(OPERATOR),
        "another chat's anonymous admin": _message(
            None, Chat(OTHER_GROUP, Chat.SUPERGROUP, title="other")
        ),
        "a channel posting in the chat": _message(None, Chat(CHANNEL, Chat.CHANNEL, title="c")),
        "member": _message(MEMBER),
        "operator posting as a channel": _message(OPERATOR, Chat(CHANNEL, Chat.CHANNEL, title="c")),
    }[who]
    async with StandIn() as standin:
        for user, name in ((OWNER, "Owner"), (ADMIN, "Admin"), (MEMBER, "Member")):
            standin.add_user(user, name)
        standin.add_group(GROUP, "g", admins=[ADMIN], owner=OWNER, members=[MEMBER])
        standin.add_group(OTHER_GROUP, "other", admins=[MEMBER], owner=MEMBER)
        async with Bot(standin.token, base_url=standin.base_url) as bot:
            assert await is_admin(bot, message, AdminCache(), [OPERATOR]) is allowed


def test_answers_keep_the_senders_pace() -> None:
    """The bot builds its pace from the settings the worker's sender builds it from, on the
    same Redis keys, so the bot's answers and the results share one pace."""
    settings = Settings(token=SecretStr("1:x"), pace_group_per_min=10)
    lanes = Lanes(aioredis.Redis(), "cm")
    services = make_services(
        settings.bot(),
        lanes=lanes,
        sessionmaker=None,  # type: ignore[arg-type]
        redis=aioredis.Redis(),
    )
    pacer = services.answers.pacer
    assert pacer.policy == settings.pace(answers=True)
    # The answers are held to their share of a group's minute, unspaced; the results spread a
    # minute less the answers' reserve evenly, on the same keys.
    assert pacer.policy.answers
    assert pacer.policy.group_limit == 2
    assert pacer.policy.group_spacing_ms == 0
    assert settings.pace().group_limit == 9


def test_topics_and_what_a_message_really_replies_to() -> None:
    forum = Chat(GROUP, Chat.SUPERGROUP, title="f", is_forum=True)
    owner = User(OWNER, "Owner", is_bot=False)
    member = User(MEMBER, "Member", is_bot=False)
    now = datetime.now(UTC)
    root = Message(
        40,
        now,
        forum,
        from_user=owner,
        forum_topic_created=ForumTopicCreated("Puzzles", 0),
        message_thread_id=40,
        is_topic_message=True,
    )

    def in_topic(mid: int, reply: Message | None, thread: int | None = 40) -> Message:
        return Message(
            mid,
            now,
            forum,
            from_user=member,
            reply_to_message=reply,
            message_thread_id=thread,
            is_topic_message=thread is not None,
        )

    hers = in_topic(41, root)
    assert topic_of(hers) == 40 and replied_to(hers) is None  # only the topic's root
    mine = in_topic(42, hers)
    assert replied_to(mine) is hers
    # A root without its service part still counts as the root: it is the thread's id.
    bare_root = Message(40, now, forum, from_user=owner)
    assert replied_to(in_topic(43, bare_root)) is None
    # The General topic, and threads of replies in a chat without topics, are no topic.
    assert topic_of(in_topic(44, None, thread=None)) == 0
    plain = Message(
        45, now, Chat(GROUP, Chat.SUPERGROUP, title="g"), from_user=member, message_thread_id=9
    )
    assert topic_of(plain) == 0


@pytest.mark.parametrize("bad", ["-1", "1}:x", 1.0, True, None])
def test_the_inline_rate_key_is_built_from_a_user_id_only(bad: Any) -> None:
    keys = Keys("cm")
    assert keys.inline_rate(2001) == "cmx:{cm}:inline:rate:2001"
    with pytest.raises(ValueError):
        keys.inline_rate(bad)


async def test_an_unsaid_answers_failing_cleanup_is_counted_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An answer the budget silences gives its once-per-episode flag back (`on_dropped`); when
    that fails, the member's update still ends cleanly, and the failure is counted and logged
    (codemojex_swallowed_total{where="the answers"}), not lost."""
    from codemojex.outages import OUTAGES
    from codemojex.values.types import Say

    settings = Settings(token=SecretStr("1:x"))
    services = make_services(
        settings.bot(),
        lanes=Lanes(aioredis.Redis(), "cm"),
        sessionmaker=None,  # type: ignore[arg-type]
        redis=aioredis.Redis(),
    )
    message = Message(1, datetime.now(UTC), Chat(GROUP, Chat.SUPERGROUP), from_user=None)

    async def flag_not_released() -> None:
        raise KeyError("a bug in the cleanup")

    before = OUTAGES.swallowed["the answers"]
    answers = services.answers
    await answers.answer_as(message, Say.NOTHING, "unsaid", on_dropped=flag_not_released)
    assert OUTAGES.swallowed["the answers"] == before + 1
    assert any("going on without it" in r.getMessage() for r in caplog.records)
