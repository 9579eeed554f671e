"""A local stand-in for the Telegram Bot API, spoken to by the real python-telegram-bot.

It runs an aiohttp server on 127.0.0.1 that answers `/bot<token>/<method>` the way Telegram
does (same envelope, same status codes, same error wording for the cases the bot meets), and a
Python API through which tests and the demo play users and groups, inject 429 storms and read
back what the bot posted. Everything lives on the one event loop that runs the server: the
simulation methods are plain functions and are called from that loop.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import json
import logging
import math
import re
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import aiohttp
from aiohttp import web

from codemojex.standin import control
from codemojex.standin.markup import (
    MAX_TEXT_LENGTH,
    Entity,
    MarkupError,
    auto_entities,
    parse,
    utf16_len,
    utf16_slice,
)

JSON = dict[str, Any]

log = logging.getLogger("codemojex.standin")

GROUP_ANONYMOUS_BOT_ID = 1087968824
"""The user Telegram puts in `from` when an anonymous group admin speaks."""

CHANNEL_BOT_ID = 136817688
"""The user Telegram puts in `from` when someone writes in a group on behalf of a channel."""

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

# Telegram's default when allowed_updates was never given: everything but these.
_NOT_BY_DEFAULT = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

_TOKEN_RE = re.compile(r"\d+:[A-Za-z0-9_-]+")
_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
_COMMAND_NAME_RE = re.compile(r"[a-z0-9_]{1,32}")


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


def _bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


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


@dataclass(frozen=True)
class EditedMessage:
    """An editMessageText the stand-in accepted."""

    chat_id: int
    message_id: int
    text: str
    ts: float
    parse_mode: str | None = None


@dataclass(frozen=True)
class RateViolation:
    """A call refused with 429 because the bot broke the flood limits being enforced."""

    ts: float
    method: str
    chat_id: int | None
    rule: str
    """"per_chat_per_s", "per_group_per_min" or "global_per_s"."""
    retry_after: int


@dataclass(frozen=True)
class ApiCall:
    ts: float
    method: str
    params: JSON
    status: int


@dataclass
class _Fault:
    status: int
    description: str
    remaining: int | None
    until: float | None
    methods: frozenset[str] | None
    chat_id: int | None
    retry_after: int | None
    kind: str = "error"  # error | delay | lost_response
    delay_s: float = 0.0

    def matches(self, method: str, chat_id: int | None, now: float) -> bool:
        if self.until is not None and now >= self.until:
            return False
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.methods is not None and method.lower() not in self.methods:
            return False
        return self.chat_id is None or self.chat_id == chat_id


@dataclass
class _RateLimits:
    per_chat_per_s: int | None
    per_group_per_min: int | None
    global_per_s: int | None
    methods: frozenset[str]
    slack_s: float


@dataclass
class _User:
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
class _Chat:
    id: int
    type: str
    title: str | None = None
    user: _User | None = None  # the other side of a private chat
    owner: int | None = None
    admins: set[int] = field(default_factory=set)
    anonymous_admins: set[int] = field(default_factory=set)
    members: set[int] = field(default_factory=set)
    bot_status: str = "member"  # member | administrator | left | kicked
    blocked: bool = False  # private chat: the user blocked the bot
    migrated_to: int | None = None  # a group upgraded to this supergroup
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
        return {"id": self.id, "type": self.type, "title": self.title}

    def status_of(self, user_id: int) -> str:
        if user_id == self.owner:
            return "creator"
        if user_id in self.admins:
            return "administrator"
        if user_id in self.members:
            return "member"
        return "left"


class _Params:
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
            raise _bad(f"invalid {name} specified")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise _bad(f"invalid {name} specified") from None

    def get_float(self, name: str) -> float | None:
        value = self.raw.get(name)
        if value is None or value == "":
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            raise _bad(f"invalid {name} specified") from None

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
            raise _bad(f"can't parse {name} JSON array of strings")
        return value

    def get_json(self, name: str) -> Any:
        value = self.raw.get(name)
        if isinstance(value, str):
            if value == "":
                return None
            try:
                return json.loads(value)
            except ValueError:
                raise _bad(f"can't parse {name} JSON object") from None
        return value


class StandIn:
    """The Bot API stand-in. See the module docstring; one instance = one bot token.

    ```python
    standin = StandIn()
    await standin.start()
    app = ApplicationBuilder().token(standin.token).base_url(standin.base_url)
                              .base_file_url(standin.base_file_url).build()
    ```
    """

    def __init__(
        self,
        token: str = "123:TEST",
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        bot_username: str = "codemojex_bot",
        bot_name: str = "Codemojex",
        privacy_mode: bool = False,
    ) -> None:
        if not _TOKEN_RE.fullmatch(token):
            raise ValueError("token must look like '<digits>:<letters>'")
        self.token = token
        self.host = host
        self.port = port
        self.privacy_mode = privacy_mode
        self.bot = _User(int(token.split(":", 1)[0]), bot_name, bot_username, is_bot=True)
        self.users: dict[int, _User] = {self.bot.id: self.bot}
        self.users[GROUP_ANONYMOUS_BOT_ID] = _User(
            GROUP_ANONYMOUS_BOT_ID, "Group", "GroupAnonymousBot", is_bot=True
        )
        self.users[CHANNEL_BOT_ID] = _User(CHANNEL_BOT_ID, "Channel", "Channel_Bot", is_bot=True)
        self.chats: dict[int, _Chat] = {}

        self.calls: Counter[str] = Counter()
        self.call_log: deque[ApiCall] = deque(maxlen=20_000)
        self.violations: list[RateViolation] = []
        self.injected_errors = 0
        self._sent: list[SentMessage] = []
        self._edits: list[EditedMessage] = []
        self.deleted: list[tuple[int, int]] = []
        self.commands: dict[tuple[str, str], list[JSON]] = {}
        self.callback_answers: list[JSON] = []
        self._message_ts: dict[tuple[int, int], float] = {}
        self._open_callbacks: set[str] = set()
        self._callback_ids = itertools.count(1)

        self._updates: list[JSON] = []
        self._next_update_id = 100_000_001
        # One allowed_updates setting per bot, shared by getUpdates and setWebhook. Until the
        # bot first states it, updates of every kind are kept (it may ask for them).
        self._allowed: frozenset[str] | None = None
        self._allowed_stated = False
        self._raw_ids: set[int] = set()  # push_raw_update: delivered whatever their kind
        self._poll_generation = 0
        self._updates_changed = asyncio.Event()
        self._sent_changed = asyncio.Event()
        self._closing = False

        self._faults: list[_Fault] = []
        self._limits: _RateLimits | None = None
        self._chat_sends: dict[int, deque[float]] = {}
        self._global_sends: deque[float] = deque()

        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self._webhook_max_connections = 40
        self._webhook_last_error: tuple[int, str] | None = None
        self._webhook_task: asyncio.Task[None] | None = None

        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._handlers: dict[str, Callable[[_Params], Awaitable[Any]]] = {
            "getMe": self._get_me,
            "getUpdates": self._get_updates,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "answerCallbackQuery": self._answer_callback_query,
            "deleteMessage": self._delete_message,
            "getChat": self._get_chat,
            "getChatAdministrators": self._get_chat_administrators,
            "getChatMember": self._get_chat_member,
            "getChatMemberCount": self._get_chat_member_count,
            "setMyCommands": self._set_my_commands,
            "getMyCommands": self._get_my_commands,
            "deleteMyCommands": self._delete_my_commands,
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "leaveChat": self._leave_chat,
        }
        for harmless in (
            "sendChatAction",
            "close",
            "logOut",
            "setMyName",
            "setMyDescription",
            "setMyShortDescription",
            "setChatMenuButton",
            "setMyDefaultAdministratorRights",
        ):
            self._handlers[harmless] = self._harmless
        self._canonical = {name.lower(): name for name in self._handlers}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> str:
        """Listen on host:port (port 0 = a free one) and return `base_url`."""
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        control.add_routes(app, self)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # Cancel a long poll whose client went away, so it does not linger until its timeout.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        return self.base_url

    async def stop(self) -> None:
        self._closing = True
        self._wake_pollers()
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._webhook_task
            self._webhook_task = None
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """For `ApplicationBuilder().base_url(...)`: PTB appends the token and the method."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    # ------------------------------------------------------------------ world building

    def add_user(
        self,
        user_id: int,
        first_name: str,
        username: str | None = None,
        is_bot: bool = False,
        *,
        last_name: str | None = None,
        language_code: str | None = None,
    ) -> None:
        if user_id <= 0:
            raise ValueError("user ids are positive")
        self.users[user_id] = _User(user_id, first_name, username, is_bot, last_name, language_code)

    def add_group(
        self,
        chat_id: int,
        title: str,
        admins: Iterable[int] = (),
        kind: str = "supergroup",
        *,
        owner: int | None = None,
        members: Iterable[int] = (),
        bot_is_admin: bool = False,
        announce: bool = False,
    ) -> None:
        """A group the bot is in. The owner (default: the first admin) is listed as "creator".

        `announce` emits the my_chat_member update Telegram sends when the bot is added.
        """
        if chat_id >= 0:
            raise ValueError("group chat ids are negative")
        if kind not in ("group", "supergroup"):
            raise ValueError("kind is 'group' or 'supergroup'")
        admin_ids = list(admins)
        for user_id in [*admin_ids, *members, *([owner] if owner else [])]:
            self._user(user_id)
        chat = _Chat(chat_id, kind, title)
        chat.owner = owner if owner is not None else (admin_ids[0] if admin_ids else None)
        chat.admins = {uid for uid in admin_ids if uid != chat.owner}
        chat.members = {*admin_ids, *members, *([chat.owner] if chat.owner else [])}
        chat.bot_status = "administrator" if bot_is_admin else "member"
        self.chats[chat_id] = chat
        if announce:
            actor = chat.owner or self.bot.id
            self._emit_member_change(chat, self.bot.id, "left", chat.bot_status, actor)

    def set_admins(
        self, chat_id: int, user_ids: Iterable[int], *, anonymous: Iterable[int] = ()
    ) -> None:
        """Replace the group's administrators (the owner stays) and emit what Telegram emits:
        chat_member updates for users who gained or lost the rights (delivered only if the bot
        asked for "chat_member" in allowed_updates, as on Telegram), my_chat_member for the bot.
        """
        chat = self._group(chat_id)
        wanted = set(user_ids)
        for user_id in wanted:
            self._user(user_id)
        actor = chat.owner or next(iter(wanted), self.bot.id)
        bot_wanted = self.bot.id in wanted
        wanted.discard(self.bot.id)
        wanted.discard(chat.owner or 0)
        before = {uid: chat.status_of(uid) for uid in chat.admins | wanted}
        chat.admins = wanted
        chat.anonymous_admins = set(anonymous)
        chat.members |= wanted
        for user_id, old in sorted(before.items()):
            new = chat.status_of(user_id)
            if new != old:
                self._emit_member_change(chat, user_id, old, new, actor)
        bot_new = "administrator" if bot_wanted else "member"
        if chat.bot_status in ("member", "administrator") and bot_new != chat.bot_status:
            old_bot = chat.bot_status
            chat.bot_status = bot_new
            self._emit_member_change(chat, self.bot.id, old_bot, bot_new, actor)

    def migrate_to_supergroup(self, chat_id: int, new_chat_id: int | None = None) -> int:
        """A basic group becomes a supergroup with a new id (default -100<id>): a message with
        migrate_to_chat_id in the old chat, one with migrate_from_chat_id in the new one, and
        from then on calls naming the old id get a 400 carrying migrate_to_chat_id (PTB raises
        ChatMigrated). Returns the new chat id."""
        old = self._group(chat_id)
        if old.type != "group" or old.migrated_to is not None:
            raise ValueError(f"chat {chat_id} is not a basic group")
        new_id = new_chat_id if new_chat_id is not None else int(f"-100{abs(chat_id)}")
        if new_id in self.chats:
            raise ValueError(f"chat {new_id} exists")
        new = _Chat(new_id, "supergroup", old.title)
        new.owner, new.admins = old.owner, set(old.admins)
        new.anonymous_admins, new.members = set(old.anonymous_admins), set(old.members)
        new.bot_status = old.bot_status
        self.chats[new_id] = new
        actor = self.users.get(old.owner or 0) or self.bot
        notes = ((old, "migrate_to_chat_id", new_id), (new, "migrate_from_chat_id", chat_id))
        for chat, key, value in notes:
            message = self._new_message(chat, "", sender=actor)
            del message["text"]
            message[key] = value
            if chat.bot_status in ("member", "administrator"):
                self._enqueue({"message": dict(message)})
        old.migrated_to = new_id
        return new_id

    def remove_bot(self, chat_id: int, *, kicked: bool = True) -> None:
        """The bot is removed from a group: my_chat_member update, then sends get 403."""
        chat = self._group(chat_id)
        old = chat.bot_status
        chat.bot_status = "kicked" if kicked else "left"
        self._emit_member_change(chat, self.bot.id, old, chat.bot_status, chat.owner or 0)

    def block_bot(self, user_id: int) -> None:
        """The user blocks the bot: private sends to them get 403."""
        self._private(user_id).blocked = True

    def send_text(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        reply_to: int | None = None,
    ) -> int:
        """The user types `text` in the chat; returns the new message_id."""
        chat = self._chat(chat_id)
        user = self._user(user_id)
        if chat.type != "private":
            chat.members.add(user_id)
        message = self._user_message(chat, text, reply_to, sender=user)
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
        channel = _Chat(channel_id, "channel", channel_title)
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
        self._check_user_text(new_text)
        message["text"] = new_text
        message["edit_date"] = int(time.time())
        entities = auto_entities(new_text)
        if entities:
            message["entities"] = entities
        else:
            message.pop("entities", None)
        if self._delivers(chat, message):
            self._enqueue({"edited_message": self._with_reply(chat, message)})

    def press_button(self, chat_id: int, message_id: int, user_id: int, data: str) -> str:
        """The user presses the inline button carrying `data` under one of the bot's messages:
        a callback_query update. Returns the query id (answered via answerCallbackQuery)."""
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
        if not any(button.get("callback_data") == data for button in buttons):
            raise ValueError(f"message {message_id} has no button with callback_data {data!r}")
        query_id = str(next(self._callback_ids))
        self._open_callbacks.add(query_id)
        self._enqueue(
            {
                "callback_query": {
                    "id": query_id,
                    "from": user.to_dict(),
                    "message": self._with_reply(chat, message),
                    "chat_instance": str(chat.id),
                    "data": data,
                }
            }
        )
        return query_id

    def push_raw_update(self, update: Mapping[str, Any], *, keep_id: bool = False) -> int:
        """Queue any update JSON as is (fuzzing), whatever allowed_updates says; a fresh
        update_id unless keep_id."""
        data = dict(update)
        if not keep_id or "update_id" not in data:
            data.pop("update_id", None)
            update_id = self._enqueue(data, filtered=False)
            self._raw_ids.add(update_id)
            return update_id
        update_id = int(data["update_id"])
        self._raw_ids.add(update_id)
        # Later updates must still sort after this one, as ids only grow on Telegram.
        self._next_update_id = max(self._next_update_id, update_id + 1)
        self._updates.append(data)
        self._updates.sort(key=lambda u: int(u["update_id"]))
        self._wake_pollers()
        return update_id

    # ------------------------------------------------------------------ faults and limits

    def inject_429(
        self,
        count: int | None = None,
        *,
        seconds: float | None = None,
        retry_after: int = 1,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
    ) -> None:
        """Answer 429 (retry_after) to the next `count` matching calls, or to all of them for
        `seconds`; with neither, to the next one. methods=None matches every method."""
        self.inject_error(
            429,
            f"Too Many Requests: retry after {retry_after}",
            count=count,
            seconds=seconds,
            methods=methods,
            chat_id=chat_id,
            retry_after=retry_after,
        )

    def inject_error(
        self,
        status: int,
        description: str,
        *,
        count: int | None = None,
        seconds: float | None = None,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Answer `status` with `description` (e.g. 502 "Bad Gateway", 403 "Forbidden: ...")."""
        self._add_fault("error", count, seconds, methods, chat_id, status, description, retry_after)

    def inject_lost_response(
        self,
        count: int | None = None,
        *,
        seconds: float | None = None,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
    ) -> None:
        """Carry out the matching calls (the message IS posted) but drop the connection
        instead of answering: the client sees a network error and cannot know it succeeded.
        This is how a retrying sender ends up posting twice on the real Telegram."""
        self._add_fault("lost_response", count, seconds, methods, chat_id)

    def inject_latency(
        self,
        delay_s: float,
        count: int | None = None,
        *,
        seconds: float | None = None,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
    ) -> None:
        """Hold the matching calls for `delay_s` before carrying them out (a slow Telegram;
        past PTB's read timeout the client raises TimedOut although the call then succeeds)."""
        self._add_fault("delay", count, seconds, methods, chat_id, delay_s=delay_s)

    def _add_fault(
        self,
        kind: str,
        count: int | None,
        seconds: float | None,
        methods: Iterable[str] | None,
        chat_id: int | None,
        status: int = 0,
        description: str = "",
        retry_after: int | None = None,
        *,
        delay_s: float = 0.0,
    ) -> None:
        if count is None and seconds is None:
            count = 1
        self._faults.append(
            _Fault(
                status=status,
                description=description,
                remaining=count,
                until=None if seconds is None else time.monotonic() + seconds,
                methods=None if methods is None else frozenset(m.lower() for m in methods),
                chat_id=chat_id,
                retry_after=retry_after,
                kind=kind,
                delay_s=delay_s,
            )
        )

    def clear_faults(self) -> None:
        self._faults.clear()

    def enforce_rate_limits(
        self,
        per_chat_per_s: int | None = 1,
        per_group_per_min: int | None = 20,
        global_per_s: int | None = 30,
        *,
        methods: Iterable[str] = ("sendMessage", "editMessageText"),
        slack_s: float = 0.05,
    ) -> None:
        """Answer 429 when the bot posts faster than Telegram allows, and count it.

        Windows are sliding and measured on arrival; `slack_s` shortens them a little so that
        a sender pacing at exactly the limit is not punished for network jitter.
        """
        self._limits = _RateLimits(
            per_chat_per_s,
            per_group_per_min,
            global_per_s,
            frozenset(m.lower() for m in methods),
            slack_s,
        )
        self._chat_sends.clear()
        self._global_sends.clear()

    def disable_rate_limits(self) -> None:
        self._limits = None

    @property
    def rate_violations(self) -> int:
        return len(self.violations)

    # ------------------------------------------------------------------ observation

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
        return self._with_reply(chat, message)

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

    @property
    def pending_updates(self) -> int:
        """Updates queued and not yet confirmed by the bot (getUpdates offset or webhook 2xx)."""
        return len(self._updates)

    async def wait_until_delivered(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Wait until the bot has confirmed every queued update: PTB confirms a batch on its
        next getUpdates, once the batch is in its update queue, not once handlers finished."""
        deadline = time.monotonic() + timeout
        while self._updates:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(self._updates)} updates still pending")
            event = self._updates_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, 0.05))

    def stats(self) -> dict[str, Any]:
        """Counters for summaries (the demo, the reliability harness)."""
        return {
            "calls": dict(self.calls),
            "sent_messages": len(self._sent),
            "edits": len(self._edits),
            "injected_errors": self.injected_errors,
            "rate_violations": len(self.violations),
            "pending_updates": len(self._updates),
        }

    def registered_commands(
        self, scope: Mapping[str, Any] | None = None, language_code: str = ""
    ) -> list[JSON]:
        return list(self.commands.get((self._scope_key(scope), language_code), []))

    # ------------------------------------------------------------------ webhook driver

    async def post_update_to_webhook(
        self, url: str, update: Mapping[str, Any], secret_token: str | None = None
    ) -> int:
        """POST one update to a webhook like Telegram does; returns the HTTP status."""
        headers = {"Content-Type": "application/json"}
        if secret_token is not None:
            headers[SECRET_HEADER] = secret_token
        data = dict(update)
        if "update_id" not in data:
            data["update_id"] = self._new_update_id()
        client = self._client or aiohttp.ClientSession()
        try:
            async with client.post(url, data=json.dumps(data), headers=headers) as response:
                await response.read()
                return response.status
        finally:
            if client is not self._client:
                await client.close()

    # ------------------------------------------------------------------ internals: world

    def _user(self, user_id: int) -> _User:
        user = self.users.get(user_id)
        if user is None:
            raise KeyError(f"unknown user {user_id}: add_user() first")
        return user

    def _chat(self, chat_id: int) -> _Chat:
        chat = self.chats.get(chat_id)
        if chat is None:
            if chat_id > 0:
                return self._private(chat_id)
            raise KeyError(f"unknown chat {chat_id}: add_group() first")
        return chat

    def _group(self, chat_id: int) -> _Chat:
        chat = self._chat(chat_id)
        if chat.type == "private":
            raise ValueError(f"chat {chat_id} is private")
        return chat

    def _private(self, user_id: int) -> _Chat:
        chat = self.chats.get(user_id)
        if chat is None:
            chat = _Chat(user_id, "private", user=self._user(user_id))
            self.chats[user_id] = chat
        return chat

    @staticmethod
    def _check_user_text(text: str) -> None:
        # Clients refuse to send these, so the stand-in does too (raw updates can still carry them).
        if not text.strip():
            raise ValueError("Telegram clients do not send empty messages")
        if utf16_len(text) > MAX_TEXT_LENGTH:
            raise ValueError(
                f"Telegram clients split messages longer than {MAX_TEXT_LENGTH} UTF-16 units "
                f"(this one has {utf16_len(text)}); push_raw_update() delivers one anyway"
            )

    def _new_message(
        self,
        chat: _Chat,
        text: str,
        *,
        sender: _User,
        sender_chat: _Chat | None = None,
        entities: list[Entity] | None = None,
        reply_to: int | None = None,
    ) -> JSON:
        message_id = chat.next_message_id
        chat.next_message_id += 1
        message: JSON = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat.to_dict(),
            "from": sender.to_dict(),
            "text": text,
        }
        if sender_chat is not None:
            message["sender_chat"] = sender_chat.to_dict()
        if entities:
            message["entities"] = entities
        if reply_to is not None:
            message["reply_to_message_id"] = reply_to  # internal; expanded on delivery
        chat.messages[message_id] = message
        self._message_ts[(chat.id, message_id)] = time.monotonic()
        return message

    def _with_reply(self, chat: _Chat, message: JSON) -> JSON:
        """The message as delivered: reply_to_message expanded one level, like Telegram."""
        data = {k: v for k, v in message.items() if k != "reply_to_message_id"}
        reply_id = message.get("reply_to_message_id")
        if reply_id is not None:
            target = chat.messages.get(reply_id)
            if target is not None:
                data["reply_to_message"] = {
                    k: v for k, v in target.items() if k != "reply_to_message_id"
                }
        return data

    def _user_message(
        self,
        chat: _Chat,
        text: str,
        reply_to: int | None,
        *,
        sender: _User,
        sender_chat: _Chat | None = None,
    ) -> JSON:
        self._check_user_text(text)
        if chat.migrated_to is not None:
            raise ValueError(f"chat {chat.id} was upgraded to {chat.migrated_to}")
        if reply_to is not None and reply_to not in chat.messages:
            raise KeyError(f"no message {reply_to} in chat {chat.id} to reply to")
        message = self._new_message(
            chat,
            text,
            sender=sender,
            sender_chat=sender_chat,
            entities=auto_entities(text),
            reply_to=reply_to,
        )
        if self._delivers(chat, message):
            self._enqueue({"message": self._with_reply(chat, message)})
        return message

    def _delivers(self, chat: _Chat, message: JSON) -> bool:
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

    def _member_dict(self, chat: _Chat, user_id: int, status: str) -> JSON:
        user = self.users[user_id].to_dict()
        anonymous = user_id in chat.anonymous_admins
        if status == "creator":
            return {"status": "creator", "user": user, "is_anonymous": anonymous}
        if status == "administrator":
            return {
                "status": "administrator",
                "user": user,
                "can_be_edited": user_id == self.bot.id,
                "is_anonymous": anonymous,
                "can_manage_chat": True,
                "can_delete_messages": True,
                "can_manage_video_chats": True,
                "can_restrict_members": True,
                "can_promote_members": False,
                "can_change_info": True,
                "can_invite_users": True,
                "can_post_stories": False,
                "can_edit_stories": False,
                "can_delete_stories": False,
                "can_pin_messages": True,
            }
        if status == "kicked":
            return {"status": "kicked", "user": user, "until_date": 0}
        return {"status": status, "user": user}

    def _emit_member_change(
        self, chat: _Chat, user_id: int, old: str, new: str, actor_id: int
    ) -> None:
        actor = self.users.get(actor_id) or self.bot
        kind = "my_chat_member" if user_id == self.bot.id else "chat_member"
        self._enqueue(
            {
                kind: {
                    "chat": chat.to_dict(),
                    "from": actor.to_dict(),
                    "date": int(time.time()),
                    "old_chat_member": self._member_dict(chat, user_id, old),
                    "new_chat_member": self._member_dict(chat, user_id, new),
                }
            }
        )

    # ------------------------------------------------------------------ internals: updates

    def _enqueue(self, body: JSON, *, filtered: bool = True) -> int:
        update_id = self._new_update_id()
        update = {"update_id": update_id, **body}
        # Telegram does not even store an update of a kind the bot did not ask for.
        if not filtered or not self._allowed_stated or self._wanted(update):
            self._updates.append(update)
            self._wake_pollers()
        return update_id

    def _state_allowed(self, allowed: Any) -> None:
        """The bot states allowed_updates (None = keep the previous setting, [] = default)."""
        if allowed is not None:
            self._allowed = frozenset(allowed) if allowed else None
        if allowed is not None or not self._allowed_stated:
            self._allowed_stated = True
            self._updates = [
                u for u in self._updates if self._wanted(u) or u["update_id"] in self._raw_ids
            ]

    def _new_update_id(self) -> int:
        update_id = self._next_update_id
        self._next_update_id += 1
        return update_id

    def _wake_pollers(self) -> None:
        event, self._updates_changed = self._updates_changed, asyncio.Event()
        event.set()

    @staticmethod
    def _kind(update: JSON) -> str:
        return next((key for key in update if key != "update_id"), "")

    def _wanted(self, update: JSON) -> bool:
        kind = self._kind(update)
        if self._allowed:
            return kind in self._allowed
        return kind not in _NOT_BY_DEFAULT

    def _confirm(self, offset: int) -> None:
        if offset < 0:
            keep = self._updates[offset:]
            if len(keep) != len(self._updates):
                self._updates = keep
                self._wake_pollers()
        elif offset > 0:
            # Updates are kept in id order, so the confirmed ones are a prefix.
            done = bisect.bisect_left(self._updates, offset, key=lambda u: int(u["update_id"]))
            if done:
                del self._updates[:done]
                self._wake_pollers()

    # ------------------------------------------------------------------ internals: HTTP

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
        )

    async def _read_params(self, request: web.Request) -> _Params:
        raw: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                try:
                    body = await request.json()
                except ValueError:
                    raise _bad("can't parse JSON object") from None
                if not isinstance(body, dict):
                    raise _bad("JSON object expected")
                raw.update(body)
            else:
                form = await request.post()
                for key, value in form.items():
                    raw[key] = value if isinstance(value, str) else "<file>"
        return _Params(raw)

    async def _handle(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        method = request.match_info["method"]
        if not _TOKEN_RE.fullmatch(token):
            return await self._not_found(request)
        if token != self.token:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        canonical = self._canonical.get(method.lower())
        if canonical is None:
            return await self._not_found(request)
        self.calls[canonical] += 1
        params = _Params({})
        try:
            params = await self._read_params(request)
            fault = self._take_fault(canonical, params)
            if fault is not None and fault.kind == "error":
                raise ApiError(fault.status, fault.description, retry_after=fault.retry_after)
            if fault is not None and fault.kind == "delay":
                # Shielded: like Telegram, the call is carried out even if the client gives up.
                work = asyncio.ensure_future(self._delayed(fault.delay_s, canonical, params))
                work.add_done_callback(_retrieve)
                result = await asyncio.shield(work)
            else:
                result = await self._handlers[canonical](params)
            if fault is not None and fault.kind == "lost_response":
                self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, 0))
                if request.transport is not None:
                    request.transport.close()
                return web.Response(status=500)  # never reaches the client
        except ApiError as error:
            # INFO, not WARNING: refusals are often the point of a test (429 storms, bad input).
            log.info("%s -> %s %s", canonical, error.code, error.description)
            self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, error.code))
            return web.json_response(error.envelope(), status=error.code)
        except (TypeError, ValueError, KeyError, AttributeError):
            # Parameters of a shape nobody checked: a stand-in bug, but answered like Telegram's
            # own internal errors rather than as a dropped connection.
            log.exception("%s failed on %r", canonical, params.raw)
            self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, 500))
            return web.json_response(
                {"ok": False, "error_code": 500, "description": "Internal Server Error"},
                status=500,
            )
        self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, 200))
        return web.json_response({"ok": True, "result": result})

    async def _delayed(self, delay_s: float, method: str, params: _Params) -> Any:
        await asyncio.sleep(delay_s)
        return await self._handlers[method](params)

    def _take_fault(self, method: str, params: _Params) -> _Fault | None:
        """The first injected fault matching this call, spending one of its uses."""
        if not self._faults:
            return None
        now = time.monotonic()
        chat_id = _safe_int(params.raw.get("chat_id"))
        for fault in self._faults:
            if fault.matches(method, chat_id, now):
                if fault.remaining is not None:
                    fault.remaining -= 1
                self.injected_errors += 1
                self._faults = [f for f in self._faults if _alive(f, now)]
                return fault
        return None

    def _check_rate(self, method: str, chat_id: int) -> None:
        """Refuse (429, counted) a post that would break the enforced limits; else book it."""
        limits = self._limits
        if limits is None or method.lower() not in limits.methods:
            return
        now = time.monotonic()
        sends = self._chat_sends.setdefault(chat_id, deque())
        while sends and sends[0] <= now - 60:
            sends.popleft()
        while self._global_sends and self._global_sends[0] <= now - 1:
            self._global_sends.popleft()
        checks: list[tuple[str, int | None, float, list[float]]] = [
            ("per_chat_per_s", limits.per_chat_per_s, 1.0, list(sends)),
            ("global_per_s", limits.global_per_s, 1.0, list(self._global_sends)),
        ]
        if chat_id < 0:
            checks.append(("per_group_per_min", limits.per_group_per_min, 60.0, list(sends)))
        for rule, limit, window, times in checks:
            if limit is None:
                continue
            recent = [t for t in times if t > now - (window - limits.slack_s)]
            if len(recent) >= limit:
                wait = recent[-limit] + window - limits.slack_s - now
                retry_after = max(1, math.ceil(wait))
                self.violations.append(RateViolation(now, method, chat_id, rule, retry_after))
                raise ApiError(
                    429, f"Too Many Requests: retry after {retry_after}", retry_after=retry_after
                )
        sends.append(now)
        self._global_sends.append(now)

    def _target_chat(self, params: _Params) -> _Chat:
        """The chat a bot method names, with Telegram's answers for bad or forbidden ones."""
        raw = params.raw.get("chat_id")
        if raw is None or raw == "":
            raise _bad("chat_id is empty")
        chat_id = _safe_int(raw)
        chat = self.chats.get(chat_id) if chat_id is not None else None
        if chat is None:
            raise _bad("chat not found")
        if chat.migrated_to is not None:
            raise ApiError(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                migrate_to_chat_id=chat.migrated_to,
            )
        return chat

    def _writable_chat(self, params: _Params) -> _Chat:
        chat = self._target_chat(params)
        if chat.type == "private":
            if chat.blocked:
                raise ApiError(403, "Forbidden: bot was blocked by the user")
        elif chat.bot_status == "kicked":
            raise ApiError(403, f"Forbidden: bot was kicked from the {chat.type} chat")
        elif chat.bot_status == "left":
            raise ApiError(403, f"Forbidden: bot is not a member of the {chat.type} chat")
        return chat

    def _formatted(self, params: _Params) -> tuple[str, str, list[Entity], str | None]:
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
            raise _bad("can't parse entities JSON object")
        try:
            if explicit:
                text, entities = raw_text.strip(), list(explicit)
            else:
                text, entities = parse(raw_text, parse_mode)
        except MarkupError as error:
            raise ApiError(400, str(error)) from None
        if not text:
            raise _bad("message text is empty")
        if utf16_len(text) > MAX_TEXT_LENGTH:
            raise _bad("message is too long")
        return raw_text, text, entities, parse_mode

    # ------------------------------------------------------------------ Bot API methods

    async def _harmless(self, params: _Params) -> Any:
        return True

    async def _get_me(self, params: _Params) -> Any:
        return {
            **self.bot.to_dict(),
            "can_join_groups": True,
            "can_read_all_group_messages": not self.privacy_mode,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    async def _get_updates(self, params: _Params) -> Any:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use "
                "deleteWebhook to delete the webhook first",
            )
        offset = params.get_int("offset") or 0
        limit = min(max(params.get_int("limit") or 100, 1), 100)
        timeout = max(0.0, params.get_float("timeout") or 0.0)
        self._state_allowed(params.get_str_list("allowed_updates"))
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake_pollers()  # a newer poll ends an older one with 409, as on Telegram
        self._confirm(offset)
        deadline = time.monotonic() + timeout
        while True:
            event = self._updates_changed
            if generation != self._poll_generation:
                raise ApiError(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one "
                    "bot instance is running",
                )
            ready = self._updates[:limit]
            remaining = deadline - time.monotonic()
            if ready or remaining <= 0 or self._closing:
                return ready
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    async def _send_message(self, params: _Params) -> Any:
        chat = self._writable_chat(params)
        raw_text, text, entities, parse_mode = self._formatted(params)
        reply_to, allow_without = None, params.get_bool("allow_sending_without_reply")
        reply_parameters = params.get_json("reply_parameters")
        if isinstance(reply_parameters, dict):
            reply_to = _safe_int(reply_parameters.get("message_id"))
            allow_without = bool(reply_parameters.get("allow_sending_without_reply", False))
            other = reply_parameters.get("chat_id")
            if other is not None and _safe_int(other) != chat.id:
                raise _bad("replies to messages in other chats are not supported by the stand-in")
        elif params.has("reply_to_message_id"):
            reply_to = params.get_int("reply_to_message_id")
        if reply_to is not None and reply_to not in chat.messages:
            if not allow_without:
                raise _bad("message to be replied not found")
            reply_to = None
        markup = self._inline_markup(params)
        self._check_rate("sendMessage", chat.id)
        message = self._new_message(
            chat, text, sender=self.bot, entities=entities, reply_to=reply_to
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
        )
        self._sent.append(sent)
        event, self._sent_changed = self._sent_changed, asyncio.Event()
        event.set()
        return self._with_reply(chat, message)

    async def _edit_message_text(self, params: _Params) -> Any:
        if params.has("inline_message_id"):
            raise _bad("inline messages are not supported by the stand-in")
        chat = self._writable_chat(params)
        message_id = params.get_int("message_id")
        if message_id is None:
            raise _bad("message identifier is not specified")
        message = chat.messages.get(message_id)
        if message is None:
            raise _bad("message to edit not found")
        if message.get("from", {}).get("id") != self.bot.id:
            raise _bad("message can't be edited")
        _, text, entities, parse_mode = self._formatted(params)
        markup = self._inline_markup(params)
        if (
            text == message.get("text")
            and entities == message.get("entities", [])
            and markup == message.get("reply_markup")
        ):
            raise _not_modified()
        self._check_rate("editMessageText", chat.id)
        message["text"] = text
        message["edit_date"] = int(time.time())
        _set_or_drop(message, "entities", entities or None)
        _set_or_drop(message, "reply_markup", markup)
        self._edits.append(EditedMessage(chat.id, message_id, text, time.monotonic(), parse_mode))
        return self._with_reply(chat, message)

    async def _edit_message_reply_markup(self, params: _Params) -> Any:
        chat = self._writable_chat(params)
        message_id = params.get_int("message_id")
        message = chat.messages.get(message_id) if message_id is not None else None
        if message is None:
            raise _bad("message to edit not found")
        if message.get("from", {}).get("id") != self.bot.id:
            raise _bad("message can't be edited")
        markup = self._inline_markup(params)
        if markup == message.get("reply_markup"):
            raise _not_modified()
        self._check_rate("editMessageReplyMarkup", chat.id)
        _set_or_drop(message, "reply_markup", markup)
        message["edit_date"] = int(time.time())
        return self._with_reply(chat, message)

    @staticmethod
    def _inline_markup(params: _Params) -> JSON | None:
        """An inline keyboard, checked like Telegram checks it; other keyboards are not kept
        on the message (Telegram does not return them either)."""
        markup = params.get_json("reply_markup")
        if not isinstance(markup, dict) or "inline_keyboard" not in markup:
            return None
        rows = markup["inline_keyboard"]
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise _bad('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array')
        for row in rows:
            for button in row:
                if not isinstance(button, dict) or not button.get("text"):
                    raise _bad("can't parse inline keyboard button: Text must be non-empty")
                data = button.get("callback_data")
                if data is not None and not 1 <= len(str(data).encode()) <= 64:
                    raise _bad("BUTTON_DATA_INVALID")
        return {"inline_keyboard": rows} if any(rows) else None

    async def _answer_callback_query(self, params: _Params) -> Any:
        query_id = params.get_str("callback_query_id") or ""
        if query_id not in self._open_callbacks:
            raise _bad("query is too old and response timeout expired or query ID is invalid")
        self._open_callbacks.discard(query_id)
        self.callback_answers.append(
            {
                "callback_query_id": query_id,
                "text": params.get_str("text"),
                "show_alert": params.get_bool("show_alert"),
            }
        )
        return True

    async def _delete_message(self, params: _Params) -> Any:
        chat = self._target_chat(params)
        message_id = params.get_int("message_id")
        message = chat.messages.get(message_id) if message_id is not None else None
        if message is None or message_id is None:
            raise _bad("message to delete not found")
        own = message.get("from", {}).get("id") == self.bot.id
        if not own and chat.type != "private" and chat.bot_status != "administrator":
            raise _bad("message can't be deleted")
        del chat.messages[message_id]
        self.deleted.append((chat.id, message_id))
        return True

    async def _get_chat(self, params: _Params) -> Any:
        chat = self._target_chat(params)
        return {
            **chat.to_dict(),
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }

    async def _get_chat_administrators(self, params: _Params) -> Any:
        chat = self._target_chat(params)
        if chat.type == "private":
            raise _bad("there are no administrators in the private chat")
        result = []
        if chat.owner is not None:
            result.append(self._member_dict(chat, chat.owner, "creator"))
        result += [self._member_dict(chat, uid, "administrator") for uid in sorted(chat.admins)]
        if chat.bot_status == "administrator":
            result.append(self._member_dict(chat, self.bot.id, "administrator"))
        return result

    async def _get_chat_member(self, params: _Params) -> Any:
        chat = self._target_chat(params)
        user_id = params.get_int("user_id")
        if user_id is None or user_id not in self.users:
            raise _bad("user not found")
        if user_id == self.bot.id:
            return self._member_dict(chat, user_id, chat.bot_status)
        if chat.type == "private":
            status = "member" if user_id == chat.id else "left"
        else:
            status = chat.status_of(user_id)
        return self._member_dict(chat, user_id, status)

    async def _get_chat_member_count(self, params: _Params) -> Any:
        chat = self._target_chat(params)
        if chat.type == "private":
            return 2
        return len(chat.members) + (1 if chat.bot_status in ("member", "administrator") else 0)

    async def _leave_chat(self, params: _Params) -> Any:
        chat = self._target_chat(params)
        if chat.type == "private":
            raise _bad("chat member status can't be changed in private chats")
        old, chat.bot_status = chat.bot_status, "left"
        self._emit_member_change(chat, self.bot.id, old, "left", self.bot.id)
        return True

    @staticmethod
    def _scope_key(scope: Any) -> str:
        if not scope:
            return "default"
        return json.dumps(scope, sort_keys=True)

    async def _set_my_commands(self, params: _Params) -> Any:
        commands = params.get_json("commands")
        if not isinstance(commands, list):
            raise _bad("commands must be an array")
        if len(commands) > 100:
            raise _bad("too many commands")
        clean: list[JSON] = []
        for entry in commands:
            if not isinstance(entry, dict):
                raise _bad("can't parse BotCommand")
            name = str(entry.get("command", "")).removeprefix("/")
            description = str(entry.get("description", ""))
            if not _COMMAND_NAME_RE.fullmatch(name):
                raise _bad("BOT_COMMAND_INVALID")
            if not 1 <= len(description) <= 256:
                raise _bad("BOT_COMMAND_DESCRIPTION_INVALID")
            clean.append({"command": name, "description": description})
        key = (self._scope_key(params.get_json("scope")), params.get_str("language_code") or "")
        self.commands[key] = clean
        return True

    async def _get_my_commands(self, params: _Params) -> Any:
        key = (self._scope_key(params.get_json("scope")), params.get_str("language_code") or "")
        return self.commands.get(key, [])

    async def _delete_my_commands(self, params: _Params) -> Any:
        key = (self._scope_key(params.get_json("scope")), params.get_str("language_code") or "")
        self.commands.pop(key, None)
        return True

    async def _set_webhook(self, params: _Params) -> Any:
        url = params.get_str("url") or ""
        secret = params.get_str("secret_token") or None
        if secret is not None and not _SECRET_RE.fullmatch(secret):
            raise _bad("secret token contains unallowed characters")
        if url and not url.startswith(("http://", "https://")):
            raise _bad("bad webhook: An HTTPS URL must be provided for webhook")
        if params.get_bool("drop_pending_updates"):
            self._updates.clear()
        self._state_allowed(params.get_str_list("allowed_updates"))
        self._webhook_max_connections = params.get_int("max_connections") or 40
        self.webhook_url, self.webhook_secret = url, secret
        self._webhook_last_error = None
        self._restart_webhook_delivery()
        return True

    async def _delete_webhook(self, params: _Params) -> Any:
        if params.get_bool("drop_pending_updates"):
            self._updates.clear()
            self._wake_pollers()
        self.webhook_url, self.webhook_secret = "", None
        self._restart_webhook_delivery()
        return True

    async def _get_webhook_info(self, params: _Params) -> Any:
        info: JSON = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
            "max_connections": self._webhook_max_connections,
        }
        if self._allowed:
            info["allowed_updates"] = sorted(self._allowed)
        if self._webhook_last_error is not None:
            info["last_error_date"], info["last_error_message"] = self._webhook_last_error
        return info

    # ------------------------------------------------------------------ webhook delivery

    def _restart_webhook_delivery(self) -> None:
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            self._webhook_task = None
        if self.webhook_url:
            self._webhook_task = asyncio.get_running_loop().create_task(
                self._deliver_webhook(self.webhook_url, self.webhook_secret)
            )

    async def _deliver_webhook(self, url: str, secret: str | None) -> None:
        """Push queued updates to the webhook one at a time, in order, retrying on failure."""
        failures = 0
        while not self._closing:
            event = self._updates_changed
            if not self._updates:
                await event.wait()
                continue
            update = self._updates[0]
            try:
                status = await self.post_update_to_webhook(url, update, secret)
                error = None if 200 <= status < 300 else f"Wrong response from webhook: {status}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = f"Connection failed: {exc.__class__.__name__}"
            if error is None:
                failures = 0
                if self._updates and self._updates[0] is update:
                    self._updates.pop(0)
                self._wake_pollers()
                continue
            self._webhook_last_error = (int(time.time()), error)
            failures += 1
            await asyncio.sleep(min(0.05 * 2**failures, 2.0))


def _alive(fault: _Fault, now: float) -> bool:
    unspent = fault.remaining is None or fault.remaining > 0
    return unspent and (fault.until is None or now < fault.until)


def _retrieve(task: asyncio.Future[Any]) -> None:
    # The client may be gone; its refusal is then nobody's to read.
    if not task.cancelled():
        task.exception()


def _not_modified() -> ApiError:
    return _bad(
        "message is not modified: specified new message content and reply markup are "
        "exactly the same as a current content and reply markup of the message"
    )


def _set_or_drop(message: JSON, key: str, value: Any) -> None:
    if value is None:
        message.pop(key, None)
    else:
        message[key] = value


def _safe_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None
