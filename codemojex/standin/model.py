"""The stand-in's plain data: users, chats, request parameters, error answers, records.

Every area of the stand-in (chats, messages, updates, limits...) builds on these; nothing here
does I/O or knows about the server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codemojex.standin.markup import Entity

JSON = dict[str, Any]

GROUP_ANONYMOUS_BOT_ID = 1087968824
"""The user Telegram puts in `from` when an anonymous group admin speaks."""

CHANNEL_BOT_ID = 136817688
"""The user Telegram puts in `from` when someone writes in a group on behalf of a channel."""

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class ApiError(Exception):
    """An error answer: HTTP status = error_code, `description` in Telegram's wording."""

    def __init__(
        self,
        code: int,
        description: str,
        *,
        retry_after: int | None = None,
        migrate_to_chat_id: int | None = None,
    ) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.retry_after = retry_after
        self.migrate_to_chat_id = migrate_to_chat_id

    def envelope(self) -> JSON:
        body: JSON = {"ok": False, "error_code": self.code, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        if self.migrate_to_chat_id is not None:
            body["parameters"] = {"migrate_to_chat_id": self.migrate_to_chat_id}
        return body


def bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


def not_modified() -> ApiError:
    return bad(
        "message is not modified: specified new message content and reply markup are "
        "exactly the same as a current content and reply markup of the message"
    )


@dataclass(frozen=True)
class SentMessage:
    """A message the bot posted (sendMessage accepted by the stand-in)."""

    chat_id: int
    message_id: int
    text: str
    """As a user would see it: markup parsed, stripped."""
    reply_to_message_id: int | None
    date: int
    ts: float
    """time.monotonic() when the stand-in accepted it."""
    parse_mode: str | None = None
    raw_text: str = ""
    """Exactly as the bot sent it."""
    entities: tuple[Entity, ...] = field(default=(), compare=False)
    thread_id: int | None = None
    """The forum topic it was posted in (its message_thread_id); None outside topics."""


@dataclass(frozen=True)
class EditedMessage:
    """An editMessageText the stand-in accepted."""

    chat_id: int
    message_id: int
    text: str
    ts: float
    parse_mode: str | None = None


@dataclass(frozen=True)
class ApiCall:
    ts: float
    method: str
    params: JSON
    status: int


@dataclass
class User:
    id: int
    first_name: str
    username: str | None = None
    is_bot: bool = False
    last_name: str | None = None
    language_code: str | None = None

    def to_dict(self) -> JSON:
        data: JSON = {"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name}
        for key in ("last_name", "username", "language_code"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


@dataclass
class Chat:
    id: int
    type: str
    title: str | None = None
    user: User | None = None  # the other side of a private chat
    owner: int | None = None
    admins: set[int] = field(default_factory=set)
    anonymous_admins: set[int] = field(default_factory=set)
    members: set[int] = field(default_factory=set)
    bot_status: str = "member"  # member | administrator | left | kicked
    blocked: bool = False  # private chat: the user blocked the bot
    migrated_to: int | None = None  # a group upgraded to this supergroup
    is_forum: bool = False  # a supergroup with topics
    topics: dict[int, str] = field(default_factory=dict)  # thread id (its root) -> name
    messages: dict[int, JSON] = field(default_factory=dict)
    next_message_id: int = 1

    def to_dict(self) -> JSON:
        if self.type == "private":
            assert self.user is not None
            data: JSON = {"id": self.id, "type": "private", "first_name": self.user.first_name}
            if self.user.last_name:
                data["last_name"] = self.user.last_name
            if self.user.username:
                data["username"] = self.user.username
            return data
        data = {"id": self.id, "type": self.type, "title": self.title}
        if self.is_forum:
            data["is_forum"] = True
        return data

    def status_of(self, user_id: int) -> str:
        if user_id == self.owner:
            return "creator"
        if user_id in self.admins:
            return "administrator"
        if user_id in self.members:
            return "member"
        return "left"

    def with_reply(self, message: JSON) -> JSON:
        """The message as delivered: reply_to_message expanded one level, like Telegram."""
        data = {k: v for k, v in message.items() if k != "reply_to_message_id"}
        reply_id = message.get("reply_to_message_id")
        if reply_id is not None:
            target = self.messages.get(reply_id)
            if target is not None:
                data["reply_to_message"] = {
                    k: v for k, v in target.items() if k != "reply_to_message_id"
                }
        return data


class Params:
    """Request parameters from a JSON body (typed) or a form (strings, JSON-encoded if not str).

    PTB sends a form whose non-string values are JSON-encoded, so every value is coerced at the
    point of use according to what the parameter is, like the real server does.
    """

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = dict(raw)

    def has(self, name: str) -> bool:
        return self.raw.get(name) not in (None, "")

    def get_str(self, name: str) -> str | None:
        value = self.raw.get(name)
        if value is None:
            return None
        return value if isinstance(value, str) else json.dumps(value)

    def get_int(self, name: str) -> int | None:
        value = self.raw.get(name)
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            raise bad(f"invalid {name} specified")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise bad(f"invalid {name} specified") from None

    def get_float(self, name: str) -> float | None:
        value = self.raw.get(name)
        if value is None or value == "":
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            raise bad(f"invalid {name} specified") from None

    def get_bool(self, name: str) -> bool:
        value = self.raw.get(name)
        if isinstance(value, str):
            return value.strip().lower() in ("true", "1")
        return bool(value)

    def get_str_list(self, name: str) -> list[str] | None:
        value = self.get_json(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(f"can't parse {name} JSON array of strings")
        return value

    def get_json(self, name: str) -> Any:
        value = self.raw.get(name)
        if isinstance(value, str):
            if value == "":
                return None
            try:
                return json.loads(value)
            except ValueError:
                raise bad(f"can't parse {name} JSON object") from None
        return value


def set_or_drop(message: JSON, key: str, value: Any) -> None:
    if value is None:
        message.pop(key, None)
    else:
        message[key] = value


def safe_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None
