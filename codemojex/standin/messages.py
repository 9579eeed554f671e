"""Messages both ways: what users type (and which of it the bot gets), what the bot posts.

Users' messages carry the entities a Telegram client attaches and reach the bot only if
Telegram would deliver them (privacy mode, blocked chats, the bot no longer in the group).
The bot's sendMessage / editMessageText / deleteMessage are checked like Telegram checks them
(formatting, length in UTF-16 units, replies, rights) and recorded for tests to read back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from codemojex.standin.chats import Chats
from codemojex.standin.keyboards import inline_markup
from codemojex.standin.limits import Limits
from codemojex.standin.markup import (
    MAX_TEXT_LENGTH,
    Entity,
    MarkupError,
    auto_entities,
    parse,
    utf16_len,
    utf16_slice,
)
from codemojex.standin.model import (
    CHANNEL_BOT_ID,
    GROUP_ANONYMOUS_BOT_ID,
    JSON,
    ApiError,
    Chat,
    EditedMessage,
    Params,
    SentMessage,
    User,
    bad,
    not_modified,
    safe_int,
    set_or_drop,
)


class Messages(Chats, Limits):
    """StandIn's messages, typed and posted (a mixin: StandIn inherits every area)."""

    def __init__(self) -> None:
        super().__init__()
        self._sent: list[SentMessage] = []
        self._edits: list[EditedMessage] = []
        self.deleted: list[tuple[int, int]] = []
        self._sent_changed = asyncio.Event()

    # ------------------------------------------------------------------ users typing

    def send_text(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        reply_to: int | None = None,
        thread_id: int | None = None,
    ) -> int:
        """The user types `text` in the chat (in a forum, in topic `thread_id`, or the
        replied message's); returns the new message_id."""
        chat = self._chat(chat_id)
        user = self._user(user_id)
        if chat.type != "private":
            chat.members.add(user_id)
        message = self._user_message(chat, text, reply_to, sender=user, thread_id=thread_id)
        return int(message["message_id"])

    def send_sticker(self, chat_id: int, user_id: int, emoji: str = "👍") -> int:
        """The user sends a sticker (a message with no text) in the chat; its message_id.
        Delivered as Telegram would: in a group, only with privacy mode off or the bot an
        admin (a sticker is no command and no reply to the bot)."""
        chat = self._chat(chat_id)
        user = self._user(user_id)
        if chat.type != "private":
            chat.members.add(user_id)
        message = self._new_message(chat, "", sender=user)
        del message["text"]
        message["sticker"] = {
            "file_id": f"sticker-{message['message_id']}",
            "file_unique_id": f"s{message['message_id']}",
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": emoji,
        }
        if self._delivers(chat, message):
            self._enqueue({"message": chat.with_reply(message)})
        return int(message["message_id"])

    def send_as_anonymous_admin(self, chat_id: int, text: str, reply_to: int | None = None) -> int:
        """An anonymous admin speaks: from = GroupAnonymousBot, sender_chat = the group."""
        chat = self._group(chat_id)
        sender = self.users[GROUP_ANONYMOUS_BOT_ID]
        message = self._user_message(chat, text, reply_to, sender=sender, sender_chat=chat)
        return int(message["message_id"])

    def send_as_channel(
        self,
        chat_id: int,
        channel_id: int,
        text: str,
        reply_to: int | None = None,
        *,
        channel_title: str = "Some Channel",
    ) -> int:
        """Someone writes in the group on behalf of a channel: from = Channel_Bot and
        sender_chat = that channel. Not an admin, though it looks like the anonymous-admin case
        except that sender_chat is not the group itself."""
        chat = self._group(chat_id)
        if channel_id >= 0:
            raise ValueError("channel ids are negative")
        channel = Chat(channel_id, "channel", channel_title)
        sender = self.users[CHANNEL_BOT_ID]
        message = self._user_message(chat, text, reply_to, sender=sender, sender_chat=channel)
        return int(message["message_id"])

    def send_private(self, user_id: int, text: str, reply_to: int | None = None) -> int:
        """The user writes to the bot in a private chat (the chat id is the user id)."""
        chat = self._private(user_id)
        message = self._user_message(chat, text, reply_to, sender=self._user(user_id))
        return int(message["message_id"])

    def edit_text(self, chat_id: int, message_id: int, new_text: str) -> None:
        """The author edits a message: an edited_message update."""
        chat = self._chat(chat_id)
        message = chat.messages.get(message_id)
        if message is None:
            raise KeyError(f"no message {message_id} in chat {chat_id}")
        if message.get("from", {}).get("id") == self.bot.id:
            raise ValueError("use the Bot API to edit the bot's own messages")
        _check_user_text(new_text)
        message["text"] = new_text
        message["edit_date"] = int(time.time())
        entities = auto_entities(new_text)
        if entities:
            message["entities"] = entities
        else:
            message.pop("entities", None)
        if self._delivers(chat, message):
            self._enqueue({"edited_message": chat.with_reply(message)})

    def _user_message(
        self,
        chat: Chat,
        text: str,
        reply_to: int | None,
        *,
        sender: User,
        sender_chat: Chat | None = None,
        thread_id: int | None = None,
    ) -> JSON:
        _check_user_text(text)
        if chat.migrated_to is not None:
            raise ValueError(f"chat {chat.id} was upgraded to {chat.migrated_to}")
        if reply_to is not None and reply_to not in chat.messages:
            raise KeyError(f"no message {reply_to} in chat {chat.id} to reply to")
        if thread_id is not None and thread_id not in chat.topics:
            raise KeyError(f"no topic {thread_id} in chat {chat.id}")
        message = self._new_message(
            chat,
            text,
            sender=sender,
            sender_chat=sender_chat,
            entities=auto_entities(text),
            reply_to=reply_to,
            thread_id=self._topic(chat, thread_id, reply_to),
        )
        if self._delivers(chat, message):
            self._enqueue({"message": chat.with_reply(message)})
        return message

    def _delivers(self, chat: Chat, message: JSON) -> bool:
        """Whether Telegram would hand this message to the bot."""
        if chat.type == "private":
            return not chat.blocked
        if chat.bot_status not in ("member", "administrator"):
            return False
        if not self.privacy_mode or chat.bot_status == "administrator":
            return True
        text = str(message.get("text", ""))
        for entity in message.get("entities", ()):
            if entity["type"] == "bot_command":
                command = utf16_slice(text, entity["offset"], entity["length"])
                _, _, target = command.partition("@")
                if not target or target.lower() == (self.bot.username or "").lower():
                    return True
            if entity["type"] == "mention" and self.bot.username:
                mentioned = utf16_slice(text, entity["offset"], entity["length"])
                if mentioned.lower() == "@" + self.bot.username.lower():
                    return True
        reply_id = message.get("reply_to_message_id")
        replied = chat.messages.get(reply_id) if reply_id is not None else None
        return replied is not None and replied.get("from", {}).get("id") == self.bot.id

    # ------------------------------------------------------------------ observing the bot

    def sent_messages(self, chat_id: int | None = None) -> list[SentMessage]:
        """What the bot posted, in order (texts as first sent; see `message()` for edits)."""
        return [m for m in self._sent if chat_id is None or m.chat_id == chat_id]

    def edited_messages(self, chat_id: int | None = None) -> list[EditedMessage]:
        return [m for m in self._edits if chat_id is None or m.chat_id == chat_id]

    def message(self, chat_id: int, message_id: int) -> JSON | None:
        """The message as it is now in the chat, as the bot would receive it (None if deleted)."""
        chat = self.chats.get(chat_id)
        message = None if chat is None else chat.messages.get(message_id)
        if chat is None or message is None:
            return None
        return chat.with_reply(message)

    def message_ts(self, chat_id: int, message_id: int) -> float | None:
        """time.monotonic() when the message was created (typed by a user or posted by the
        bot): `reply.ts - standin.message_ts(chat, guess_id)` is a player's wait."""
        return self._message_ts.get((chat_id, message_id))

    async def wait_for_sent(
        self,
        predicate: Callable[[SentMessage], bool] | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109 - the contract's signature
        *,
        chat_id: int | None = None,
    ) -> SentMessage:
        """The first posted message (already sent or to come) matching; TimeoutError if none."""
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            event = self._sent_changed
            for message in self._sent[seen:]:
                if (chat_id is None or message.chat_id == chat_id) and (
                    predicate is None or predicate(message)
                ):
                    return message
            seen = len(self._sent)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                recent = [(m.chat_id, m.text[:60]) for m in self._sent[-5:]]
                raise TimeoutError(f"no matching message posted in {timeout}s; last: {recent}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    async def wait_for_sent_count(
        self,
        count: int,
        *,
        chat_id: int | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109 - same shape as wait_for_sent
    ) -> list[SentMessage]:
        """Wait until at least `count` messages were posted (to `chat_id` if given)."""
        deadline = time.monotonic() + timeout
        while True:
            event = self._sent_changed
            found = self.sent_messages(chat_id)
            if len(found) >= count:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(found)} of {count} messages posted in {timeout}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    # ------------------------------------------------------------------ Bot API methods

    async def _send_message(self, params: Params) -> Any:
        chat = self._writable_chat(params)
        raw_text, text, entities, parse_mode = _formatted(params)
        reply_to, allow_without = None, params.get_bool("allow_sending_without_reply")
        reply_parameters = params.get_json("reply_parameters")
        if isinstance(reply_parameters, dict):
            reply_to = safe_int(reply_parameters.get("message_id"))
            allow_without = bool(reply_parameters.get("allow_sending_without_reply", False))
            other = reply_parameters.get("chat_id")
            if other is not None and safe_int(other) != chat.id:
                raise bad("replies to messages in other chats are not supported by the stand-in")
        elif params.has("reply_to_message_id"):
            reply_to = params.get_int("reply_to_message_id")
        if reply_to is not None and reply_to not in chat.messages:
            if not allow_without:
                raise bad("message to be replied not found")
            reply_to = None
        markup = inline_markup(params)
        thread_id = self._topic(chat, params.get_int("message_thread_id"), reply_to)
        self._check_rate("sendMessage", chat.id)
        message = self._new_message(
            chat, text, sender=self.bot, entities=entities, reply_to=reply_to, thread_id=thread_id
        )
        if markup is not None:
            message["reply_markup"] = markup
        sent = SentMessage(
            chat_id=chat.id,
            message_id=int(message["message_id"]),
            text=text,
            reply_to_message_id=reply_to,
            date=int(message["date"]),
            ts=self._message_ts[(chat.id, int(message["message_id"]))],
            parse_mode=parse_mode,
            raw_text=raw_text,
            entities=tuple(entities),
            thread_id=thread_id,
        )
        self._sent.append(sent)
        event, self._sent_changed = self._sent_changed, asyncio.Event()
        event.set()
        return chat.with_reply(message)

    async def _edit_message_text(self, params: Params) -> Any:
        if params.has("inline_message_id"):
            raise bad("inline messages are not supported by the stand-in")
        chat = self._writable_chat(params)
        message_id = params.get_int("message_id")
        if message_id is None:
            raise bad("message identifier is not specified")
        message = chat.messages.get(message_id)
        if message is None:
            raise bad("message to edit not found")
        if message.get("from", {}).get("id") != self.bot.id:
            raise bad("message can't be edited")
        _, text, entities, parse_mode = _formatted(params)
        markup = inline_markup(params)
        if (
            text == message.get("text")
            and entities == message.get("entities", [])
            and markup == message.get("reply_markup")
        ):
            raise not_modified()
        self._check_rate("editMessageText", chat.id)
        message["text"] = text
        message["edit_date"] = int(time.time())
        set_or_drop(message, "entities", entities or None)
        set_or_drop(message, "reply_markup", markup)
        self._edits.append(EditedMessage(chat.id, message_id, text, time.monotonic(), parse_mode))
        return chat.with_reply(message)

    async def _delete_message(self, params: Params) -> Any:
        chat = self._target_chat(params)
        message_id = params.get_int("message_id")
        message = chat.messages.get(message_id) if message_id is not None else None
        if message is None or message_id is None:
            raise bad("message to delete not found")
        own = message.get("from", {}).get("id") == self.bot.id
        if not own and chat.type != "private" and chat.bot_status != "administrator":
            raise bad("message can't be deleted")
        del chat.messages[message_id]
        self.deleted.append((chat.id, message_id))
        return True


def _check_user_text(text: str) -> None:
    # Clients refuse to send these, so the stand-in does too (raw updates can still carry them).
    if not text.strip():
        raise ValueError("Telegram clients do not send empty messages")
    if utf16_len(text) > MAX_TEXT_LENGTH:
        raise ValueError(
            f"Telegram clients split messages longer than {MAX_TEXT_LENGTH} UTF-16 units "
            f"(this one has {utf16_len(text)}); push_raw_update() delivers one anyway"
        )


def _formatted(params: Params) -> tuple[str, str, list[Entity], str | None]:
    """(text as sent, text as displayed, its entities, parse_mode), refused like Telegram does."""
    raw_text = params.get_str("text") or ""
    parse_mode = params.get_str("parse_mode") or None
    explicit = params.get_json("entities")
    if explicit and not (
        isinstance(explicit, list)
        and all(
            isinstance(e, dict)
            and isinstance(e.get("type"), str)
            and isinstance(e.get("offset"), int)
            and isinstance(e.get("length"), int)
            for e in explicit
        )
    ):
        raise bad("can't parse entities JSON object")
    try:
        if explicit:
            text, entities = raw_text.strip(), list(explicit)
        else:
            text, entities = parse(raw_text, parse_mode)
    except MarkupError as error:
        raise ApiError(400, str(error)) from None
    if not text:
        raise bad("message text is empty")
    if utf16_len(text) > MAX_TEXT_LENGTH:
        raise bad("message is too long")
    return raw_text, text, entities, parse_mode
