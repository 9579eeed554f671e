"""Inline mode and channels: a user typing "@bot …" in any chat (an `inline_query` update the
bot answers with answerInlineQuery), the user picking one of the results (the message it
posts in that chat, "via @bot"), and channel posts (`channel_post` updates).

Telegram sends inline queries only to a bot whose inline mode is on (BotFather: /setinline):
`StandIn(inline_mode=False)` refuses to play one, and getMe says which it is. The results are
checked as Telegram checks them (ids unique, 1-64 bytes; an article has a title and a message
to post), and kept for tests to read back.
"""

from __future__ import annotations

import itertools
from typing import Any

from codemojex.standin.markup import auto_entities
from codemojex.standin.messages import Messages
from codemojex.standin.model import JSON, Chat, Params, bad

# Telegram's cap on the results of one answer.
MAX_RESULTS = 50
_CHAT_TYPES = ("sender", "private", "group", "supergroup", "channel")


class Inline(Messages):
    """StandIn's inline queries and channels (a mixin: StandIn inherits every area)."""

    inline_mode: bool

    def __init__(self) -> None:
        super().__init__()
        self.inline_answers: list[JSON] = []
        self._open_inline: dict[str, int] = {}  # query id -> the user who asked
        self._answered_inline: dict[str, list[JSON]] = {}  # query id -> its results
        self._inline_ids = itertools.count(1)

    # ------------------------------------------------------------------ users

    def inline_query(self, user_id: int, query: str = "", *, chat_type: str = "sender") -> str:
        """The user types "@bot <query>" in a chat of `chat_type` (what the Share button of a
        switch_inline_query does after they pick the chat): an inline_query update. Returns
        the query id (answered via answerInlineQuery)."""
        if not self.inline_mode:
            raise ValueError("inline mode is off for the bot (BotFather: /setinline)")
        if chat_type not in _CHAT_TYPES:
            raise ValueError(f"chat_type is one of {_CHAT_TYPES}")
        if len(query) > 256:
            raise ValueError("an inline query is at most 256 characters")
        user = self._user(user_id)
        query_id = str(next(self._inline_ids))
        self._open_inline[query_id] = user_id
        self._enqueue(
            {
                "inline_query": {
                    "id": query_id,
                    "from": user.to_dict(),
                    "query": query,
                    "offset": "",
                    "chat_type": chat_type,
                }
            }
        )
        return query_id

    def inline_results(self, query_id: str) -> list[JSON]:
        """What the bot answered to the query (empty until it answers)."""
        return list(self._answered_inline.get(query_id, []))

    def choose_inline_result(self, query_id: str, result_id: str, chat_id: int) -> int:
        """The user who asked picks one of the answered results in chat `chat_id`: the
        message it carries is posted there, from the user, "via" the bot. Returns its id."""
        results = {r["id"]: r for r in self._answered_inline.get(query_id, [])}
        if result_id not in results:
            raise KeyError(f"query {query_id} has no answered result {result_id!r}")
        user = self._user(self.inline_asker(query_id))
        chat = self._chat(chat_id)
        text = str(results[result_id]["input_message_content"]["message_text"])
        message = self._new_message(chat, text, sender=user, entities=auto_entities(text))
        message["via_bot"] = self.bot.to_dict()
        if self._delivers(chat, message):
            self._enqueue({"message": chat.with_reply(message)})
        return int(message["message_id"])

    def inline_asker(self, query_id: str) -> int:
        for answer in self.inline_answers:
            if answer["inline_query_id"] == query_id:
                return int(answer["user_id"])
        raise KeyError(f"query {query_id} was not answered")

    # ------------------------------------------------------------------ channels

    def add_channel(self, chat_id: int, title: str, *, bot_is_admin: bool = True) -> None:
        """A channel the bot is in (a bot posts in a channel only as one of its admins)."""
        if chat_id >= 0:
            raise ValueError("channel ids are negative")
        chat = Chat(chat_id, "channel", title)
        chat.bot_status = "administrator" if bot_is_admin else "member"
        self.chats[chat_id] = chat

    def post_in_channel(self, chat_id: int, text: str) -> int:
        """The channel posts `text` (no sender but the channel): a channel_post update."""
        chat = self._chat(chat_id)
        if chat.type != "channel":
            raise ValueError(f"chat {chat_id} is not a channel")
        message = self._new_message(
            chat, text, sender=self.bot, sender_chat=chat, entities=auto_entities(text)
        )
        del message["from"]  # a channel's posts have no user behind them
        if chat.bot_status in ("member", "administrator"):
            self._enqueue({"channel_post": chat.with_reply(message)})
        return int(message["message_id"])

    # ------------------------------------------------------------------ Bot API methods

    async def _answer_inline_query(self, params: Params) -> Any:
        query_id = params.get_str("inline_query_id") or ""
        if query_id not in self._open_inline:
            raise bad("query is too old and response timeout expired or query ID is invalid")
        results = params.get_json("results")
        if not isinstance(results, list):
            raise bad("can't parse inline query results JSON object")
        if len(results) > MAX_RESULTS:
            raise bad("RESULTS_TOO_MUCH")
        seen: set[str] = set()
        for result in results:
            _check_result(result, seen)
        user_id = self._open_inline.pop(query_id)
        self._answered_inline[query_id] = results
        self.inline_answers.append(
            {
                "inline_query_id": query_id,
                "user_id": user_id,
                "results": results,
                "cache_time": params.get_int("cache_time"),
                "is_personal": params.get_bool("is_personal"),
            }
        )
        return True


def _check_result(result: Any, seen: set[str]) -> None:
    if not isinstance(result, dict) or not isinstance(result.get("type"), str):
        raise bad("can't parse inline query result")
    result_id = str(result.get("id", ""))
    if not 1 <= len(result_id.encode()) <= 64:
        raise bad("RESULT_ID_INVALID")
    if result_id in seen:
        raise bad("RESULT_ID_DUPLICATE")
    seen.add(result_id)
    if result["type"] != "article":
        raise bad(f"inline results of type {result['type']} are not supported by the stand-in")
    content = result.get("input_message_content")
    if not result.get("title") or not isinstance(content, dict):
        raise bad("can't parse inline query result: title and input_message_content required")
    text = content.get("message_text")
    if not isinstance(text, str) or not text.strip():
        raise bad("MESSAGE_EMPTY")
    if len(text.encode("utf-16-le")) // 2 > 4096:
        raise bad("MESSAGE_TOO_LONG")
