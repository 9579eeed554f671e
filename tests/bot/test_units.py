"""The bot's pure parts: argument parsing, the admin cache, /queue formatting, webhook options."""

from __future__ import annotations

import pytest
from telegram import Bot

from codemojex import ids
from codemojex.bot.admin import AdminCache
from codemojex.bot.app import webhook_options
from codemojex.bot.guesses import looks_like_guess
from codemojex.bot.incoming import parse_bounded_int
from codemojex.bot.replies import ANSWER_POLICY
from codemojex.game.texts import queue_view as format_queue
from codemojex.locale import EN
from codemojex.posting.pacer import PacePolicy
from codemojex.settings import Settings
from codemojex.standin import StandIn


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


def test_webhook_mode_requires_a_secret() -> None:
    with pytest.raises(ValueError, match="SECRET"):
        webhook_options(Settings(token="1:x", webhook_url="https://example.org/hook"))
    options = webhook_options(
        Settings(token="1:x", webhook_url="https://example.org/tg/hook", webhook_secret="abc")
    )
    assert options["url_path"] == "tg/hook"
    assert options["secret_token"] == "abc"
    assert "chat_member" in options["allowed_updates"]


@pytest.mark.parametrize(
    ("text", "guess"),
    [
        ("🍎🍌🍇", True),
        ("🍎 🍌 🍇 🍒", True),
        ("\u200e🍎🍌\u200b🍇", True),
        ("👍🏽🇫🇷👨‍👩‍👧", True),
        ("🍎" * 40, True),
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


def test_answers_share_the_senders_windows() -> None:
    """Same windows index for index: the same Redis keys, so the bot and the sender share a pace."""
    sender = PacePolicy()
    for mine, theirs in ((ANSWER_POLICY.group, sender.group), (ANSWER_POLICY.chat, sender.chat)):
        assert [w.window_ms for w in mine] == [w.window_ms for w in theirs]
    assert ANSWER_POLICY.bot == sender.bot
