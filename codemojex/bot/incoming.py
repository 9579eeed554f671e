"""Who sent an update and what they typed, the language to answer them in, and the guard every
handler runs under: the handlers' toolkit, with them the only code that reads `BotServices`.

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

from telegram import Bot, Chat, Message, Update, User
from telegram.constants import ChatType

from codemojex.bot.admin import is_anonymous_admin
from codemojex.bot.context import BotServices, CodemojexContext
from codemojex.bot.language import room_language, user_language
from codemojex.bot.names import topic_of
from codemojex.bot.once import CommandBusy
from codemojex.bot.replies import member_of
from codemojex.bot.ticket import DoorHooks
from codemojex.db import reading, store
from codemojex.game import texts
from codemojex.locale import Lang
from codemojex.ops.health import probe_of
from codemojex.outages import OUTAGES, Component, outage_of
from codemojex.state.cards import CardBusy
from codemojex.values.types import Say

log = logging.getLogger(__name__)

Handler = Callable[[Update, CodemojexContext], Coroutine[Any, Any, None]]


def guarded(handler: Handler) -> Handler:
    """A storage outage (Redis, Postgres) is booked once, with a probe that tells when it
    ends (the next update may not touch the component at all), and handed on to the door
    (bot/door.py), which waits it out and handles the update again: nothing was
    half-written (each lanes verb is one script, each use-case one transaction, each command
    idempotent on its message). An inline query is answered with nothing instead (it is not
    worth waiting for: Telegram forgets it in seconds). A room's card that kept changing under
    a guess (CardBusy), and a command another process kept running past this one's wait
    (CommandBusy), become "try again in a moment"."""

    @functools.wraps(handler)
    async def wrapper(update: Update, context: CodemojexContext) -> None:
        try:
            await handler(update, context)
        except Exception as exc:
            component = outage_of(exc)
            if component in ("redis", "postgres"):
                services = context.services
                OUTAGES.failed(
                    exc, "the bot", probe_of(component, services.redis, services.sessionmaker)
                )
                if update.inline_query is None:
                    raise
                await update.inline_query.answer([], cache_time=0, is_personal=True)
                return
            if not isinstance(exc, CardBusy | CommandBusy):
                raise  # a bug, or Telegram out (on_error's: an answer would fail too)
            lang = user_language(update.effective_user)
            if update.message is not None:
                await context.services.answers.answer(update.message, texts.try_again(lang))
            elif update.callback_query is not None:
                await update.callback_query.answer(texts.try_again(lang))

    return wrapper


def door_hooks(services: BotServices, bot: Bot) -> DoorHooks:
    """What the door (bot/door.py) has said to a sender (each best effort, run off the
    update's path), and how it asks whether a component is down (its health probe)."""

    async def say(
        update: Update, text: Callable[[Lang], str], what: str, *, paid: bool = False
    ) -> None:
        lang = user_language(update.effective_user)
        try:
            if update.message is not None and paid:
                await services.answers.answer_as(update.message, Say.ANSWER, text(lang))
            elif update.message is not None:
                await services.answers.answer(update.message, text(lang))
            elif update.callback_query is not None:
                await update.callback_query.answer(text(lang))
        except Exception as exc:
            OUTAGES.swallow(exc, "the bot", what)

    async def delayed(update: Update) -> None:
        # Once per member and chat while the outage lasts, in every process together (each
        # try held keeps it said); outside the answer budget (a member's budget is no measure
        # of an outage), paced as any answer. A tap hears it as its toast.
        waiting = _waiting_member(update)
        if waiting is None:
            return
        try:
            if await services.catching_up.first(*waiting):
                await say(update, texts.catching_up, "a catching-up notice not said", paid=True)
        except Exception as exc:
            OUTAGES.swallow(exc, "the bot", "a catching-up notice not said")

    async def shed(update: Update) -> None:
        await say(update, texts.slow_down, "a slow-down answer not said")

    async def dead(update: Update) -> None:
        await say(update, texts.went_wrong, "an apology not said")

    async def down(component: Component) -> bool:
        if component == "telegram":
            return await OUTAGES.down(component, bot.get_me)
        return await OUTAGES.down(
            component, probe_of(component, services.redis, services.sessionmaker)
        )

    return DoorHooks(delayed=delayed, shed=shed, dead=dead, down=down)


def _waiting_member(update: Update) -> tuple[int, int] | None:
    """The chat and member an update held by an outage is told about: a message's sender (an
    anonymous admin's or a channel's: the chat it posted as), a tap's tapper."""
    if update.message is not None:
        return update.message.chat_id, member_of(update.message)
    query = update.callback_query
    if query is not None and query.message is not None:
        return query.message.chat.id, query.from_user.id
    return None


@dataclass(frozen=True, slots=True)
class Sender:
    message: Message
    chat: Chat
    user: User | None  # None for an anonymous admin
    in_group: bool
    thread_id: int = 0  # the forum topic the message is in (0: none): with the chat, the room


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
    services = context.services
    if who is None or not await services.answers.spend_first(who.message):
        return None
    await services.members.seen(who.chat, who.user)
    return who


async def chat_language(services: BotServices, who: Sender) -> Lang:
    """The language to answer `who` in, where no room was loaded: in a group, its room's
    (read, never created); in a private chat, the user's. With the database out, the user's:
    an answer that needs nothing else (/help) still goes out."""
    if who.in_group:
        try:
            async with reading(services.sessionmaker) as session:
                room = await store.room_by_chat(session, who.chat.id, who.thread_id)
        except Exception as exc:
            if outage_of(exc) != "postgres":
                raise
            log.info("chat %s: its language is unknown while the database is out", who.chat.id)
            return user_language(who.user)
        if room is not None:
            return room_language(room, who.user)
    return user_language(who.user)


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
