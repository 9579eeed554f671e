"""The world the bot lives in: users, groups, who administers them, and the messages in them.

Tests build it (add_user, add_group, set_admins...) and change it the way people do on
Telegram (promotions, a group upgraded to a supergroup, the bot removed or blocked); each
change emits the chat_member / my_chat_member update Telegram would. The Bot API methods
that read it (getChat, getChatMember...) and the checks every method naming a chat goes
through (`_target_chat`, `_writable_chat`) live here too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from codemojex.standin.markup import Entity
from codemojex.standin.model import (
    CHANNEL_BOT_ID,
    GROUP_ANONYMOUS_BOT_ID,
    JSON,
    ApiError,
    Chat,
    Params,
    User,
    bad,
    safe_int,
)
from codemojex.standin.updates import Updates


class Chats(Updates):
    """StandIn's users, chats and messages (a mixin: StandIn inherits every area)."""

    bot: User
    """The bot itself; StandIn sets it (from the token) before the areas initialise."""
    privacy_mode: bool

    def __init__(self) -> None:
        super().__init__()
        self.users: dict[int, User] = {self.bot.id: self.bot}
        self.users[GROUP_ANONYMOUS_BOT_ID] = User(
            GROUP_ANONYMOUS_BOT_ID, "Group", "GroupAnonymousBot", is_bot=True
        )
        self.users[CHANNEL_BOT_ID] = User(CHANNEL_BOT_ID, "Channel", "Channel_Bot", is_bot=True)
        self.chats: dict[int, Chat] = {}
        self._message_ts: dict[tuple[int, int], float] = {}

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
        self.users[user_id] = User(user_id, first_name, username, is_bot, last_name, language_code)

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
        forum: bool = False,
    ) -> None:
        """A group the bot is in. The owner (default: the first admin) is listed as "creator".

        `announce` emits the my_chat_member update Telegram sends when the bot is added;
        `forum` makes a supergroup with topics (`add_topic`, createForumTopic).
        """
        if chat_id >= 0:
            raise ValueError("group chat ids are negative")
        if kind not in ("group", "supergroup"):
            raise ValueError("kind is 'group' or 'supergroup'")
        if forum and kind != "supergroup":
            raise ValueError("only supergroups have topics")
        admin_ids = list(admins)
        for user_id in [*admin_ids, *members, *([owner] if owner else [])]:
            self._user(user_id)
        chat = Chat(chat_id, kind, title, is_forum=forum)
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

    def join(self, chat_id: int, user_id: int) -> None:
        """A user joins the group: the chat_member update (left -> member), which Telegram
        sends only to a bot that administers the group (and asked for chat_member)."""
        chat = self._group(chat_id)
        self._user(user_id)
        old = chat.status_of(user_id)
        chat.members.add(user_id)
        if old == "left" and chat.bot_status == "administrator":
            self._emit_member_change(chat, user_id, old, "member", user_id)

    def leave(self, chat_id: int, user_id: int) -> None:
        """A user leaves the group (an admin's rights go with them): the chat_member update,
        to a bot that administers the group."""
        chat = self._group(chat_id)
        old = chat.status_of(user_id)
        if old == "creator":
            raise ValueError("the stand-in's owner stays in the group")
        chat.members.discard(user_id)
        chat.admins.discard(user_id)
        if old != "left" and chat.bot_status == "administrator":
            self._emit_member_change(chat, user_id, old, "left", user_id)

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
        new = Chat(new_id, "supergroup", old.title)
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

    def add_topic(self, chat_id: int, name: str, creator: int) -> int:
        """A user creates a topic in a forum: its root is a "forum_topic_created" service
        message from them (delivered to the bot), whose id is the topic's message_thread_id.
        Returns that id."""
        chat = self._group(chat_id)
        return self._new_topic(chat, name, self._user(creator), deliver=True)

    def _new_topic(self, chat: Chat, name: str, creator: User, *, deliver: bool) -> int:
        if not chat.is_forum:
            raise bad("the chat is not a forum")
        if not 1 <= len(name) <= 128:
            raise bad("TOPIC_TITLE_EMPTY" if not name else "topic name is too long")
        root = self._new_message(chat, "", sender=creator)
        del root["text"]
        thread_id = int(root["message_id"])
        root["message_thread_id"] = thread_id
        root["is_topic_message"] = True
        root["forum_topic_created"] = {"name": name, "icon_color": 7322096}
        chat.topics[thread_id] = name
        if deliver and chat.bot_status in ("member", "administrator"):
            self._enqueue({"message": dict(root)})
        return thread_id

    def remove_bot(self, chat_id: int, *, kicked: bool = True) -> None:
        """The bot is removed from a group: my_chat_member update, then sends get 403."""
        chat = self._group(chat_id)
        old = chat.bot_status
        chat.bot_status = "kicked" if kicked else "left"
        self._emit_member_change(chat, self.bot.id, old, chat.bot_status, chat.owner or 0)

    def block_bot(self, user_id: int) -> None:
        """The user blocks the bot: private sends to them get 403."""
        self._private(user_id).blocked = True

    # ------------------------------------------------------------------ lookups

    def _user(self, user_id: int) -> User:
        user = self.users.get(user_id)
        if user is None:
            raise KeyError(f"unknown user {user_id}: add_user() first")
        return user

    def _chat(self, chat_id: int) -> Chat:
        chat = self.chats.get(chat_id)
        if chat is None:
            if chat_id > 0:
                return self._private(chat_id)
            raise KeyError(f"unknown chat {chat_id}: add_group() first")
        return chat

    def _group(self, chat_id: int) -> Chat:
        chat = self._chat(chat_id)
        if chat.type == "private":
            raise ValueError(f"chat {chat_id} is private")
        return chat

    def _private(self, user_id: int) -> Chat:
        chat = self.chats.get(user_id)
        if chat is None:
            chat = Chat(user_id, "private", user=self._user(user_id))
            self.chats[user_id] = chat
        return chat

    def _target_chat(self, params: Params) -> Chat:
        """The chat a bot method names, with Telegram's answers for bad or forbidden ones."""
        raw = params.raw.get("chat_id")
        if raw is None or raw == "":
            raise bad("chat_id is empty")
        chat_id = safe_int(raw)
        chat = self.chats.get(chat_id) if chat_id is not None else None
        if chat is None:
            raise bad("chat not found")
        if chat.migrated_to is not None:
            raise ApiError(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                migrate_to_chat_id=chat.migrated_to,
            )
        return chat

    def _writable_chat(self, params: Params) -> Chat:
        chat = self._target_chat(params)
        if chat.type == "private":
            if chat.blocked:
                raise ApiError(403, "Forbidden: bot was blocked by the user")
        elif chat.type == "channel" and chat.bot_status != "administrator":
            raise bad("need administrator rights in the channel chat")
        elif chat.bot_status == "kicked":
            raise ApiError(403, f"Forbidden: bot was kicked from the {chat.type} chat")
        elif chat.bot_status == "left":
            raise ApiError(403, f"Forbidden: bot is not a member of the {chat.type} chat")
        return chat

    # ------------------------------------------------------------------ messages and members

    def _new_message(
        self,
        chat: Chat,
        text: str,
        *,
        sender: User,
        sender_chat: Chat | None = None,
        entities: list[Entity] | None = None,
        reply_to: int | None = None,
        thread_id: int | None = None,
    ) -> JSON:
        """A new message in the chat; in a forum topic (`thread_id`) it carries the topic and,
        replying to nothing, comes with the topic's root as its reply_to_message (Telegram's
        way: the root is the start of the topic's thread)."""
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
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            reply_to = thread_id if reply_to is None else reply_to
        if reply_to is not None:
            message["reply_to_message_id"] = reply_to  # internal; expanded on delivery
        chat.messages[message_id] = message
        self._message_ts[(chat.id, message_id)] = time.monotonic()
        return message

    def _member_dict(self, chat: Chat, user_id: int, status: str) -> JSON:
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
        self, chat: Chat, user_id: int, old: str, new: str, actor_id: int
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

    # ------------------------------------------------------------------ Bot API methods

    async def _get_chat(self, params: Params) -> Any:
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

    async def _get_chat_administrators(self, params: Params) -> Any:
        chat = self._target_chat(params)
        if chat.type == "private":
            raise bad("there are no administrators in the private chat")
        result = []
        if chat.owner is not None:
            result.append(self._member_dict(chat, chat.owner, "creator"))
        result += [self._member_dict(chat, uid, "administrator") for uid in sorted(chat.admins)]
        if chat.bot_status == "administrator":
            result.append(self._member_dict(chat, self.bot.id, "administrator"))
        return result

    async def _get_chat_member(self, params: Params) -> Any:
        chat = self._target_chat(params)
        user_id = params.get_int("user_id")
        if user_id is None or user_id not in self.users:
            raise bad("user not found")
        if user_id == self.bot.id:
            return self._member_dict(chat, user_id, chat.bot_status)
        if chat.type == "private":
            status = "member" if user_id == chat.id else "left"
        else:
            status = chat.status_of(user_id)
        return self._member_dict(chat, user_id, status)

    async def _get_chat_member_count(self, params: Params) -> Any:
        chat = self._target_chat(params)
        if chat.type == "private":
            return 2
        return len(chat.members) + (1 if chat.bot_status in ("member", "administrator") else 0)

    def _topic(self, chat: Chat, thread_id: int | None, reply_to: int | None) -> int | None:
        """The forum topic a new message goes to: the one named, else the replied message's;
        None outside topics (a forum's General topic included)."""
        if thread_id is None and reply_to is not None:
            replied = chat.messages.get(reply_to)
            if replied is not None and replied.get("is_topic_message"):
                thread_id = int(replied["message_thread_id"])
        if thread_id is None:
            return None
        if chat.is_forum and thread_id in chat.topics:
            return thread_id
        if chat.is_forum:
            raise bad("message thread not found")
        return None  # a thread of replies in a chat without topics: no topic

    async def _create_forum_topic(self, params: Params) -> Any:
        chat = self._writable_chat(params)
        if chat.type == "private" or not chat.is_forum:
            raise bad("the chat is not a forum")
        if chat.bot_status != "administrator":
            raise bad("not enough rights to create a topic")
        name = params.get_str("name") or ""
        thread_id = self._new_topic(chat, name, self.bot, deliver=False)
        return {"message_thread_id": thread_id, "name": name, "icon_color": 7322096}

    async def _leave_chat(self, params: Params) -> Any:
        chat = self._target_chat(params)
        if chat.type == "private":
            raise bad("chat member status can't be changed in private chats")
        old, chat.bot_status = chat.bot_status, "left"
        self._emit_member_change(chat, self.bot.id, old, "left", self.bot.id)
        return True
