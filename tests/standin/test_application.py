"""A real PTB Application (polling and webhook) playing against the stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis
from telegram import Update
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from codemojex.bot.door import Door
from codemojex.bot.order import order_key
from codemojex.bot.ticket import DoorHooks
from codemojex.bot.webhook import WebhookConfig, WebhookServer
from codemojex.outages import Component
from codemojex.standin import SentMessage, StandIn
from codemojex.state.inbox import Inbox
from tests.helpers.support import free_port
from tests.standin.conftest import ADMIN, ALICE, BOB, GROUP

Context = ContextTypes.DEFAULT_TYPE


async def ping(update: Update, context: Context) -> None:
    assert update.effective_message is not None
    await update.effective_message.reply_text("pong")


async def echo(update: Update, context: Context) -> None:
    message = update.effective_message
    assert message is not None and message.text is not None
    who = update.effective_user.first_name if update.effective_user else "?"
    anonymous = message.sender_chat is not None and message.sender_chat.id == message.chat.id
    await message.reply_text(f"{who}{' (anonymous admin)' if anonymous else ''}: {message.text}")


def replying_to(message_id: int) -> Callable[[SentMessage], bool]:
    return lambda sent: sent.reply_to_message_id == message_id


def build(standin: StandIn) -> Application:  # type: ignore[type-arg]
    app = (
        ApplicationBuilder()
        .token(standin.token)
        .base_url(standin.base_url)
        .base_file_url(standin.base_file_url)
        .build()
    )
    app.add_handler(CommandHandler("ping", ping))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    return app


@pytest.fixture
async def polling_app(standin: StandIn) -> AsyncIterator[Application]:  # type: ignore[type-arg]
    app = build(standin)
    async with app:
        await app.start()
        assert app.updater is not None
        # A short long-poll timeout keeps shutdown quick; stop() cancels the poll in flight.
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            yield app
        finally:
            await app.updater.stop()
            await app.stop()


async def test_polling_application_answers_messages_and_commands(
    standin: StandIn,
    polling_app: Application,  # type: ignore[type-arg]
) -> None:
    said = standin.send_text(GROUP, ALICE, "🍎🍌🍇🍒")
    reply = await standin.wait_for_sent(lambda m: m.reply_to_message_id == said)
    assert reply.text == "Alice: 🍎🍌🍇🍒"

    for text in ("/ping", "/ping@codemojex_bot"):
        command = standin.send_text(GROUP, BOB, text)
        pong = await standin.wait_for_sent(replying_to(command))
        assert pong.text == "pong"

    standin.send_text(GROUP, BOB, "/ping@someone_else_bot")
    anonymous = standin.send_as_anonymous_admin(GROUP, "hello from the admins")
    reply = await standin.wait_for_sent(lambda m: m.reply_to_message_id == anonymous)
    assert reply.text == "Group (anonymous admin): hello from the admins"
    await standin.wait_until_delivered()
    # The command addressed to another bot was fetched but not answered.
    assert len(standin.sent_messages(GROUP)) == 4


async def test_polling_application_survives_a_429_storm(
    standin: StandIn,
    polling_app: Application,  # type: ignore[type-arg]
) -> None:
    errors: list[BaseException] = []

    async def on_error(update: object, context: Context) -> None:
        assert context.error is not None
        errors.append(context.error)

    polling_app.add_error_handler(on_error)
    standin.inject_429(1, retry_after=2)
    first = standin.send_text(GROUP, ADMIN, "lost to the storm")
    second = standin.send_text(GROUP, ADMIN, "after the storm")
    await standin.wait_for_sent(lambda m: m.reply_to_message_id == second)
    assert [type(e).__name__ for e in errors] == ["RetryAfter"]
    assert all(m.reply_to_message_id != first for m in standin.sent_messages())


async def test_polling_stops_cleanly_and_confirms_what_it_fetched(standin: StandIn) -> None:
    app = build(standin)
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=5)
        said = standin.send_text(GROUP, ALICE, "one")
        await standin.wait_for_sent(lambda m: m.reply_to_message_id == said)
        await app.updater.stop()
        await app.stop()
    assert standin.pending_updates == 0
    assert standin.calls["deleteWebhook"] == 1  # PTB's polling bootstrap


async def test_webhook_mode_delivers_updates_and_checks_the_secret(
    standin: StandIn, real_redis: aioredis.Redis, queue_name: str
) -> None:
    """Through the webhook server Codemojex runs (codemojex.bot.webhook; PTB's own needs the
    tornado extra, which Codemojex does not install)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    secret = "s3cr3t-token_for-the-stand-in-test"
    app = build(standin)
    door = Door(
        app,
        Inbox(real_redis, queue_name),
        DoorHooks(_nothing, _nothing, _nothing, _never_down),
        key_of=lambda u: order_key(u, frozenset()),
    )
    server = WebhookServer(
        WebhookConfig(url=url, path="/hook", secret=secret, listen="127.0.0.1", port=port),
        door,
    )
    async with app:
        await app.start()
        await server.start()
        await app.bot.set_webhook(url, secret_token=secret)
        try:
            assert standin.webhook_url == url
            assert standin.webhook_secret == secret
            said = standin.send_text(GROUP, ALICE, "via webhook")
            reply = await standin.wait_for_sent(lambda m: m.reply_to_message_id == said)
            assert reply.text == "Alice: via webhook"

            original = standin.message(GROUP, said)
            assert original is not None
            forged = {"message": {**original, "text": "forged"}}
            assert await standin.post_update_to_webhook(url, forged) == 403
            assert await standin.post_update_to_webhook(url, forged, "wrong") == 403
            assert await standin.post_update_to_webhook(url, forged, secret) == 200
            await standin.wait_for_sent(lambda m: m.text == "Alice: forged")
        finally:
            await server.stop()
            await app.stop()


async def _nothing(update: Update) -> None:
    pass


async def _never_down(component: Component) -> bool:
    return False
