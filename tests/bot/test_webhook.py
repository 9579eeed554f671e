"""Webhook mode: python-telegram-bot's own webhook server, guarded by the secret token."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest_asyncio

from codemojex.game import texts
from codemojex.locale import EN
from tests.bot.conftest import BOB, E2E, World, bot_world
from tests.support import free_port

pytestmark = E2E

SECRET = "s3cret-Token_for-tests"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str) -> AsyncIterator[World]:
    port = free_port()
    async with bot_world(
        bot_database_url,
        bot_queue,
        webhook=True,
        webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
        webhook_secret=SECRET,
        webhook_listen="127.0.0.1",
        webhook_port=port,
    ) as world:
        yield world


def _private_help(message_id: int) -> dict[str, object]:
    user = {"id": BOB, "is_bot": False, "first_name": "Bob"}
    return {
        "message": {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": BOB, "type": "private", "first_name": "Bob"},
            "from": user,
            "text": "/help",
            "entities": [{"type": "bot_command", "offset": 0, "length": 5}],
        }
    }


async def test_requests_without_the_secret_token_are_refused(world: World) -> None:
    url = world.settings.webhook_url
    assert url is not None
    standin = world.standin
    assert standin.webhook_url == url and standin.webhook_secret == SECRET  # setWebhook was called

    # The stand-in delivers like Telegram, with the secret header: answered.
    standin.send_private(BOB, "/help")
    said = await standin.wait_for_sent_count(1, chat_id=BOB)
    assert said[-1].text == texts.help_text(EN)

    assert await standin.post_update_to_webhook(url, _private_help(901)) == 403
    assert (
        await standin.post_update_to_webhook(url, _private_help(902), secret_token="wrong") == 403
    )
    assert await standin.post_update_to_webhook(url, _private_help(903), secret_token=SECRET) == 200
    await standin.wait_for_sent_count(2, chat_id=BOB)
    await world.settle()  # the barrier goes through the stand-in's webhook delivery
    assert len(world.said(BOB)) == 2  # the two refused requests were never handled
