"""Who sent an update and what they typed, and the guard every handler runs under.

Only new messages reach the handlers (edited messages are not guesses and do not re-run
commands). Messages without a person behind them (no sender, or posted on behalf of a channel)
are ignored; an anonymous admin (posting as the group) may run admin commands but not play.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from telegram import Chat, Message, Update, User
from telegram.constants import ChatType

from codemojex.bot.admin import is_anonymous_admin
from codemojex.bot.context import CodemojexContext
from codemojex.bot.language import user_language
from codemojex.bot.members import seen
from codemojex.bot.replies import answer, spend_first
from codemojex.game import texts
from codemojex.locale import Lang
from codemojex.ops.health import probe_of
from codemojex.outages import OUTAGES, outage_of
from codemojex.posting.cards import CardBusy

log = logging.getLogger(__name__)

Handler = Callable[[Update, CodemojexContext], Coroutine[Any, Any, None]]


def guarded(handler: Handler, *, outage_text: Callable[[Lang], str] = texts.try_again) -> Handler:
    """Storage outages (Redis, Postgres) become "try again in a moment" (or `outage_text`)
    instead of an error report: nothing was half-written (each lanes verb is one script, each
    store use-case one transaction); so does a room's card that kept changing under a guess
    (CardBusy). Telegram failing is not one of them: that is reported, and apologised for. An
    inline query is answered with nothing (no result to offer)."""

    @functools.wraps(handler)
    async def wrapper(update: Update, context: CodemojexContext) -> None:
        try:
            await handler(update, context)
        except Exception as exc:
            component = outage_of(exc)
            if component in ("redis", "postgres"):
                # One line when the outage starts; a probe tells when it ends (the next
                # update may not touch the component at all).
                services = context.services
                OUTAGES.failed(
                    exc, "the bot", probe_of(component, services.redis, services.sessionmaker)
                )
            elif not isinstance(exc, CardBusy):
                raise  # a bug, or Telegram out (on_error's: an answer would fail too)
            # In the user's language: the room's cannot be read now.
            lang = user_language(update.effective_user)
            if update.message is not None:
                # Paced like any answer; unpaced when it is Redis that is down (replies.answer).
                await answer(context.services, update.message, outage_text(lang))
            elif update.callback_query is not None:
                await update.callback_query.answer(outage_text(lang))
            elif update.inline_query is not None:
                await update.inline_query.answer([], cache_time=0, is_personal=True)

    return wrapper


@dataclass(frozen=True, slots=True)
class Sender:
    message: Message
    chat: Chat
    user: User | None  # None for an anonymous admin
    in_group: bool
    thread_id: int = 0  # the forum topic the message is in (0: none): with the chat, the room


def topic_of(message: Message) -> int:
    """The forum topic a message is in, 0 for none (a chat without topics, a forum's General
    topic). Outside forums `message_thread_id` names a thread of replies, which is no room."""
    if message.is_topic_message and message.message_thread_id:
        return int(message.message_thread_id)
    return 0


def replied_to(message: Message) -> Message | None:
    """The message this one replies to, if it really is a reply. In a forum topic every message
    that replies to nothing comes with the topic's root (the "topic created" service message,
    from whoever created the topic) as its reply_to_message: that is no reply to anybody."""
    replied = message.reply_to_message
    if replied is None or replied.forum_topic_created is not None:
        return None
    if message.is_topic_message and replied.message_id == message.message_thread_id:
        return None
    return replied


def sender_of(update: Update) -> Sender | None:
    """Who sent this message, or None when nobody we can answer to did."""
    message = update.message
    if message is None:
        return None
    chat = message.chat
    in_group = chat.type in (ChatType.GROUP, ChatType.SUPERGROUP)
    if is_anonymous_admin(message):
        return Sender(message, chat, None, in_group, topic_of(message))
    user = message.from_user
    if user is None or message.sender_chat is not None or user.is_bot:
        return None
    return Sender(message, chat, user, in_group, topic_of(message))


async def paid_sender(update: Update, context: CodemojexContext) -> Sender | None:
    """The sender of a command that answers, its answer paid before any work (`spend_first`:
    past the budget, None after one Redis call and no SQL), and, in a group, seen there
    (bot/members.py)."""
    who = sender_of(update)
    if who is None or not await spend_first(context.services, who.message):
        return None
    await seen(context.services, who.chat, who.user)
    return who


def command_text(message: Message) -> str:
    """Everything after the command word, as typed (spaces inside kept)."""
    text = message.text or ""
    parts = text.split(maxsplit=1)
    return parts[1] if len(parts) > 1 else ""


def parse_bounded_int(text: str, low: int, high: int, what: str, lang: Lang) -> int | str:
    """The whole number in `text` within [low, high], or the reason it is not one (in `lang`)."""
    value = text.strip()
    usage = texts.whole_number_usage(lang, what, low, high)
    if not value or not value.isascii() or not value.isdigit() or len(value) > len(str(high)):
        return usage
    number = int(value)
    if not low <= number <= high:
        return usage
    return number
