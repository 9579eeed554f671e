"""Garbage parameters get Telegram-style refusals, never an internal error or a dropped call."""

from __future__ import annotations

import json
import os
import random
from typing import Any

import aiohttp

from codemojex.standin import StandIn
from tests.standin.conftest import ALICE, GROUP

NAMES = [
    "chat_id",
    "text",
    "parse_mode",
    "message_id",
    "reply_parameters",
    "reply_to_message_id",
    "reply_markup",
    "entities",
    "user_id",
    "commands",
    "scope",
    "offset",
    "limit",
    "timeout",
    "allowed_updates",
    "url",
    "secret_token",
    "callback_query_id",
    "drop_pending_updates",
]
VALUES: list[Any] = [
    None,
    "",
    "abc",
    -1,
    0,
    GROUP,
    str(GROUP),
    ALICE,
    1,
    "1",
    99999999999999999999,
    1.5,
    True,
    [],
    {},
    [1, 2],
    ["message"],
    {"message_id": "x"},
    {"message_id": 1},
    {"inline_keyboard": "no"},
    {"inline_keyboard": [[{"text": ""}]]},
    [{"command": "ok", "description": "d"}],
    [{"command": 5}],
    ["x"],
    "<b>",
    "*a",
    "HTML",
    "MarkdownV2",
    "Markdown",
    "🍎" * 3000,
    "\x00",
    "null",
    "[1",
]
METHODS = [
    "sendMessage",
    "editMessageText",
    "editMessageReplyMarkup",
    "deleteMessage",
    "getChat",
    "getChatAdministrators",
    "getChatMember",
    "getChatMemberCount",
    "setMyCommands",
    "getMyCommands",
    "deleteMyCommands",
    "getUpdates",
    "setWebhook",
    "deleteWebhook",
    "getWebhookInfo",
    "answerCallbackQuery",
    "leaveChat",
]


async def test_garbage_parameters_are_refused_cleanly(standin: StandIn) -> None:
    rng = random.Random(int(os.environ.get("STANDIN_FUZZ_SEED", "20261129")))
    standin.send_text(GROUP, ALICE, "a message to point at")
    statuses: set[int] = set()
    async with aiohttp.ClientSession() as session:
        for _ in range(400):
            method = rng.choice(METHODS)
            params = {name: rng.choice(VALUES) for name in rng.sample(NAMES, rng.randint(0, 5))}
            if method == "getUpdates":
                params["timeout"] = 0
            url = f"{standin.base_url}{standin.token}/{method}"
            if rng.random() < 0.5:
                request = session.post(url, json=params)
            else:
                form = {
                    k: v if isinstance(v, str) else json.dumps(v)
                    for k, v in params.items()
                    if v is not None
                }
                request = session.post(url, data=form)
            async with request as response:
                body = await response.json()
                assert response.status in (200, 400, 403, 409), (method, params, body)
                assert body["ok"] is (response.status == 200)
                statuses.add(response.status)
    assert {200, 400} <= statuses
