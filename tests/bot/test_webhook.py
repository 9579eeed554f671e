"""Webhook mode: our webhook server (codemojex.bot.webhook), guarded by the secret token, with
bodies capped before they are read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest_asyncio

from codemojex.bot.webhook import BODY_MAX
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.standin import SECRET_HEADER
from codemojex.state.inbox import Inbox
from tests.bot.conftest import BOB, E2E, World, bot_world
from tests.helpers.support import free_port

pytestmark = E2E

SECRET = "s3cret-Token_for-tests_0123456789"
# Far more than the kernel's socket buffers hold on loopback (a few MB each way): a server that
# refuses without reading leaves most of it unsent.
HUGE = 64 * 1024 * 1024


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
    before = len(world.said(BOB))
    standin.send_private(BOB, "/help")
    said = await standin.wait_for_sent_count(before + 1, chat_id=BOB)
    assert said[-1].text == texts.help_text(EN)

    assert await standin.post_update_to_webhook(url, _private_help(901)) == 403
    assert (
        await standin.post_update_to_webhook(url, _private_help(902), secret_token="wrong") == 403
    )
    assert await standin.post_update_to_webhook(url, _private_help(903), secret_token=SECRET) == 200
    await standin.wait_for_sent_count(before + 2, chat_id=BOB)
    await world.settle()  # the barrier goes through the stand-in's webhook delivery
    assert len(world.said(BOB)) == before + 2  # the two refused requests were never handled


async def _post(
    url: str,
    *,
    secret: str | None = SECRET,
    body: bytes = b"",
    spaces: int = 0,
    declare_length: bool = True,
) -> tuple[int, int]:
    """POST `body` followed by `spaces` bytes of JSON whitespace over a raw connection, sent as
    fast as the server takes them while its answer is awaited. Returns the status and the
    number of bytes sent before it came."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    total = len(body) + spaces
    head = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}"]
    head.append("Content-Type: application/json")
    if secret is not None:
        head.append(f"{SECRET_HEADER}: {secret}")
    head.append(f"Content-Length: {total}" if declare_length else "Transfer-Encoding: chunked")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    sent = 0

    async def send() -> None:
        nonlocal sent
        while sent < total:
            block = body[sent : sent + 65536] or b" " * min(65536, total - sent)
            writer.write(block if declare_length else b"%x\r\n%s\r\n" % (len(block), block))
            await writer.drain()
            sent += len(block)
        if not declare_length:
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        status_line = await asyncio.wait_for(reader.readline(), 60)
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await sender
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return int(status_line.split()[1]), sent


async def test_a_wrong_secret_is_refused_before_the_body_is_read(world: World) -> None:
    url = world.settings.webhook_url
    assert url is not None
    before = len(world.said(BOB))
    for secret in (None, "wrong", SECRET[:-1], SECRET + "x", SECRET.upper()):
        status, sent = await _post(url, secret=secret, spaces=HUGE)
        assert status == 403
        assert sent < HUGE // 3, f"{sent} bytes were taken in before the secret was checked"
    await world.settle()
    assert len(world.said(BOB)) == before


async def test_bodies_over_the_cap_are_refused_unread(world: World) -> None:
    url = world.settings.webhook_url
    assert url is not None
    world.standin.send_private(BOB, "/start")  # Bob has a private chat with the bot
    await world.settle()
    before = len(world.said(BOB))
    # A declared length over the cap: refused before a byte of it is read.
    status, sent = await _post(url, spaces=HUGE)
    assert (status, sent < HUGE // 3) == (413, True), sent
    # No length (chunked): read up to the cap, refused past it.
    status, sent = await _post(url, spaces=HUGE, declare_length=False)
    assert (status, sent < HUGE // 3) == (413, True), sent
    # Just over the cap: refused; an update padded to the cap still goes through.
    update = json.dumps({"update_id": 10**9, **_private_help(911)}).encode()
    status, _ = await _post(url, body=update, spaces=BODY_MAX + 1 - len(update))
    assert status == 413
    status, _ = await _post(url, body=update, spaces=BODY_MAX - len(update))
    assert status == 200
    said = await world.standin.wait_for_sent_count(before + 1, chat_id=BOB)
    assert said[-1].text == texts.help_text(EN)


async def test_what_is_not_an_update_is_kept_as_a_dead_letter_and_answered(world: World) -> None:
    """A 4xx would have Telegram send it again for a day, holding its chat: 200, after it is
    kept for the operator."""
    url = world.settings.webhook_url
    assert url is not None
    inbox = Inbox(world.redis, world.settings.queue)
    before = len(world.said(BOB))
    dead = len(await inbox.dead_letters())
    bodies = (b"not json", b"[1, 2]", b"null", b"{}", "é".encode("latin-1"))
    for body in bodies:
        status, _ = await _post(url, body=body)
        assert status == 200, body
    await world.settle()
    assert len(world.said(BOB)) == before
    letters = await inbox.dead_letters()
    assert len(letters) == dead + len(bodies)
    assert {(letter.update_id, letter.kind) for letter in letters[: len(bodies)]} == {
        (0, "unreadable")
    }
