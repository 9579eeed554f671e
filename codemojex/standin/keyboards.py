"""Inline keyboards under the bot's messages and the callback queries their buttons send.

A keyboard is checked the way Telegram checks it when the bot sends or edits a message;
`press_button` plays a user pressing one, and the bot must answer the query it gets.
"""

from __future__ import annotations

import itertools
import secrets
import time
from typing import Any

from codemojex.standin.chats import Chats
from codemojex.standin.limits import Limits
from codemojex.standin.model import JSON, Params, bad, not_modified, set_or_drop


def inline_markup(params: Params) -> JSON | None:
    """An inline keyboard, checked like Telegram checks it; other keyboards are not kept
    on the message (Telegram does not return them either)."""
    markup = params.get_json("reply_markup")
    if not isinstance(markup, dict) or "inline_keyboard" not in markup:
        return None
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array')
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not button.get("text"):
                raise bad("can't parse inline keyboard button: Text must be non-empty")
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                raise bad("BUTTON_DATA_INVALID")
    return {"inline_keyboard": rows} if any(rows) else None


class Keyboards(Chats, Limits):
    """StandIn's inline keyboards and callback queries (a mixin: StandIn inherits every area)."""

    def __init__(self) -> None:
        super().__init__()
        self.callback_answers: list[JSON] = []
        self._open_callbacks: set[str] = set()
        # Unique across runs, as Telegram's are: a tapped guess's job id is derived from its
        # query id, and a stand-in started again over the same database must not repeat one.
        self._callback_ids = itertools.count(secrets.randbits(48) << 12)

    def press_button(
        self,
        chat_id: int,
        message_id: int,
        user_id: int,
        data: str,
        *,
        stale: bool = False,
        query_id: str | None = None,
    ) -> str:
        """The user presses the inline button carrying `data` under one of the bot's messages:
        a callback_query update. Returns the query id (answered via answerCallbackQuery).

        `stale`: the user's app still shows a keyboard the bot has since edited away (the
        button need not be there any more). `query_id`: the update of an earlier press
        delivered again (the same query id)."""
        chat = self._chat(chat_id)
        user = self._user(user_id)
        message = chat.messages.get(message_id)
        if message is None:
            raise KeyError(f"no message {message_id} in chat {chat_id}")
        buttons = [
            button
            for row in message.get("reply_markup", {}).get("inline_keyboard", [])
            for button in row
        ]
        if not stale and not any(button.get("callback_data") == data for button in buttons):
            raise ValueError(f"message {message_id} has no button with callback_data {data!r}")
        query_id = query_id if query_id is not None else str(next(self._callback_ids))
        self._open_callbacks.add(query_id)
        self._enqueue(
            {
                "callback_query": {
                    "id": query_id,
                    "from": user.to_dict(),
                    "message": chat.with_reply(message),
                    "chat_instance": str(chat.id),
                    "data": data,
                }
            }
        )
        return query_id

    # ------------------------------------------------------------------ Bot API methods

    async def _edit_message_reply_markup(self, params: Params) -> Any:
        chat = self._writable_chat(params)
        message_id = params.get_int("message_id")
        message = chat.messages.get(message_id) if message_id is not None else None
        if message is None:
            raise bad("message to edit not found")
        if message.get("from", {}).get("id") != self.bot.id:
            raise bad("message can't be edited")
        markup = inline_markup(params)
        if markup == message.get("reply_markup"):
            raise not_modified()
        self._check_rate("editMessageReplyMarkup", chat.id)
        set_or_drop(message, "reply_markup", markup)
        message["edit_date"] = int(time.time())
        return chat.with_reply(message)

    async def _answer_callback_query(self, params: Params) -> Any:
        query_id = params.get_str("callback_query_id") or ""
        if query_id not in self._open_callbacks:
            raise bad("query is too old and response timeout expired or query ID is invalid")
        self._open_callbacks.discard(query_id)
        self.callback_answers.append(
            {
                "callback_query_id": query_id,
                "text": params.get_str("text"),
                "show_alert": params.get_bool("show_alert"),
            }
        )
        return True
