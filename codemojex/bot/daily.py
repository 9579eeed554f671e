"""The daily code in the bot: `/daily` (in a private chat: today's puzzle; in a group: who of
its members played today; in a channel: where to play it), `/top daily` (the world's best
today), `/me` (the records of every chat, and the daily's streaks and histogram), and the
inline answer that a card's Share button asks for.

Thin handlers: the flows are `codemojex.usecases.daily` (opening a daily), the store's reads
and the world board in Redis (`codemojex.state.board`); the texts are the game's. Each
command pays its answer before its reads (`incoming.paid_sender`: past the sender's budget,
one Redis call and no SQL); the answer goes through the answers' pace, the puzzle, like a
round's announcement, through the outbox. The guesses of a daily are the guess intake's.

A group's board counts as its members its players (their rows) and whoever else the bot saw
there (a command, a tap, a join: bot/members.py), and always the asker.

"Now" is the services' clock (UTC): when the next code comes, whether a day is over; tests
pass their own to play over midnight. Which day a `/daily` asks about is the day its message
was sent on (Telegram's `date`), not the day it is handled on: delivered again after midnight
(the bot died before confirming it), it shows the day it was sent on, never opens the next
day's puzzle.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable
from datetime import date, datetime, timedelta
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import InlineQueryResultArticle, InputTextMessageContent, Message, Update, User
from telegram.constants import ChatType
from telegram.ext import BaseHandler, CommandHandler, InlineQueryHandler, filters

from codemojex import usecases
from codemojex.bot.context import BotServices, CodemojexContext
from codemojex.bot.incoming import (
    Handler,
    Sender,
    chat_language,
    command_text,
    guarded,
    paid_sender,
    sender_of,
)
from codemojex.bot.language import user_language
from codemojex.bot.names import display_name, room_title
from codemojex.bot.player_commands import cmd_top
from codemojex.bot.replies import outbox_written
from codemojex.db import reading, store
from codemojex.game import daily, texts
from codemojex.locale import EN, Lang
from codemojex.outages import outage_of
from codemojex.state.board import DailyBoard
from codemojex.values.clock import utcnow
from codemojex.values.daily import PrivateChat

log = logging.getLogger(__name__)

TOP_DAILY = "daily"  # /top daily
# /top daily shows so many; /daily in a group at most so many of its members.
TOP_ROWS: Final = 10
GROUP_ROWS: Final = 20
# How long Telegram may cache an inline answer: an invitation (it may become a card any
# moment), and a card (the same until the next code).
INLINE_CACHE_S: Final = 5
INLINE_CARD_CACHE_S: Final = 300


class DailyCommands:
    """The daily's handlers."""

    def commands(self) -> dict[str, Handler]:
        """Command name -> handler, for the messages of people (/top: the rooms' boards
        unless it says daily)."""
        return {
            "daily": guarded(self.cmd_daily),
            "top": guarded(self.cmd_top),
            "me": guarded(self.cmd_me),
        }

    def handlers(self) -> list[BaseHandler[Update, CodemojexContext, None]]:
        """What is not a person's message: /daily posted in a channel, inline queries."""
        return [
            CommandHandler("daily", self.in_channel, filters=filters.UpdateType.CHANNEL_POST),
            InlineQueryHandler(guarded(self.on_inline_query)),
        ]

    # -- /daily ----------------------------------------------------------------------------

    async def cmd_daily(self, update: Update, context: CodemojexContext) -> None:
        who = sender_of(update)
        if who is None:
            return
        services = context.services
        if who.in_group:
            if await paid_sender(update, context) is not None:
                await self._group_board(services, who)
            return
        # The puzzle is no answer of the budget's: checked first, spent when answered.
        private = who.chat.type == ChatType.PRIVATE and who.user is not None
        if private and await services.answers.spend_first(who.message, check=True):
            await self._open(context, who)

    async def _open(self, context: CodemojexContext, who: Sender) -> None:
        """The puzzle of the day the message was sent on in the player's private chat (through
        the outbox, with the tap keyboard), or, opened already, how they stand: never a second
        puzzle. A day that is over is not opened (`_day_over`)."""
        services, user = context.services, who.user
        assert user is not None
        lang = user_language(user)
        now = services.clock()
        day = daily.day_of(sent_at(who.message, now))
        if day < daily.day_of(now):
            await self._day_over(context, who, day)
            return
        defaults = services.cards.defaults
        chat = PrivateChat(
            chat_id=who.chat.id,
            tg_user_id=user.id,
            name=display_name(user),
            title=room_title(who.chat),
            default_ceiling=defaults.ceiling,
            round_timeout_s=defaults.round_timeout_s,
        )
        before = await services.cards.generation(who.chat)
        opened = await usecases.open_daily(
            services.sessionmaker, chat=chat, language=lang, rng=services.rng, now=now, day=day
        )
        view = opened.view
        day = view.puzzle.day
        if opened.card is not None:
            # The round into the chat's card, so its guesses are taken with no SQL (also when
            # it was open already: a bot that died between the commit and the card's write
            # left the card without it), as the transaction read it.
            await services.cards.write(opened.card, before)
        if view.status == "opened":
            await outbox_written(services.ring, who.chat.id)
            board = services.board
            await _best_effort(board.started(day, user.id), "note a player")
            await _best_effort(board.ensure(day, services.sessionmaker), "build the board")
            return
        markup = None
        if view.status == "playing":
            text = texts.daily_playing(lang, view.puzzle.number, view.left, view.puzzle.palette)
        else:
            share = context.bot.username if services.config.inline_mode else None
            text = texts.daily_again(
                lang, view.card(lang), daily.seconds_to_next(now), share_via=share
            )
            markup = daily.share_markup(lang) if share else None
        await services.answers.answer(who.message, text, markup=markup)

    async def _day_over(self, context: CodemojexContext, who: Sender, day: date) -> None:
        """A /daily sent on a day that is over by now (delivered late): that day's card if
        the player finished it, and that a new code is out; nothing is opened."""
        services, user = context.services, who.user
        assert user is not None
        lang = user_language(user)
        view = await usecases.daily_on(services.sessionmaker, user.id, day)
        text = texts.daily_new_code_out(lang)
        if view is not None and view.status == "finished":
            text = f"{view.card(lang)}\n\n{text}"
        await services.answers.answer(who.message, text)

    async def _group_board(self, services: BotServices, who: Sender) -> None:
        """Today's dailies of the group's members (its players, the others the bot saw there
        lately, and the asker), and how many played in the world. Nothing starts in the
        group."""
        lang = await chat_language(services, who)
        now = services.clock()
        # The day the /daily was sent on (delivered late, it shows that day's board).
        sent = sent_at(who.message, now)
        day = daily.day_of(sent)
        asker = who.user.id if who.user is not None else None
        seen = await services.members.of(who.chat.id, now)
        also = seen if asker is None else [*seen, asker]
        puzzle = await usecases.puzzle_today(services.sessionmaker, sent, services.rng)
        async with reading(services.sessionmaker) as session:
            members = await store.group_dailies(
                session, who.chat.id, day, GROUP_ROWS, also=also, keep=asker
            )
        board = services.board
        await board.ensure(day, services.sessionmaker)
        counts = await board.counts(day)
        text = texts.daily_group_board(
            lang, puzzle.number, members, counts.played, puzzle.max_attempts
        )
        await services.answers.answer_paid(who.message, text)

    async def in_channel(self, update: Update, context: CodemojexContext) -> None:
        """/daily posted in a channel: played in a private chat, said once (nothing read)."""
        post = update.channel_post
        if post is not None:
            text = texts.daily_in_channel(EN, context.bot.username)
            await context.services.answers.answer(post, text)

    # -- /top daily ------------------------------------------------------------------------

    async def cmd_top(self, update: Update, context: CodemojexContext) -> None:
        who = sender_of(update)
        if who is None:
            return
        if command_text(who.message).strip().lower() != TOP_DAILY:
            await cmd_top(update, context)  # the room's boards (group chats only)
            return
        if await paid_sender(update, context) is None:
            return
        services = context.services
        lang = await chat_language(services, who)
        top = await world_top(
            services.sessionmaker, services.board, services.rng, services.clock(), who.user, lang
        )
        await services.answers.answer_paid(who.message, top)

    # -- /me -------------------------------------------------------------------------------

    async def cmd_me(self, update: Update, context: CodemojexContext) -> None:
        """The user's records of every chat, and their daily's streaks and histogram."""
        who = await paid_sender(update, context)
        if who is None:
            return
        services = context.services
        lang = await chat_language(services, who)
        if who.user is None:
            await services.answers.answer_paid(who.message, texts.anonymous_player(lang))
            return
        async with reading(services.sessionmaker) as session:
            stats = await store.global_stats(session, who.user.id)
            record = await store.daily_record(session, who.user.id)
        everywhere = texts.record_everywhere(lang, display_name(who.user), stats)
        streak = daily.streak_on(record, daily.day_of(services.clock()))
        dailies = texts.daily_record(
            lang, streak, record.best, record.played, record.cracked, record.histogram
        )
        await services.answers.answer_paid(who.message, f"{everywhere}\n\n{dailies}")

    # -- the Share button's inline query ---------------------------------------------------

    async def on_inline_query(self, update: Update, context: CodemojexContext) -> None:
        """The asker's card of today, to post in the chat they picked; nothing that tells
        the code to someone who has not finished it (an invitation to play instead). At most
        inline.INLINE_RATE_MAX a user per window are answered."""
        query = update.inline_query
        if query is None:
            return
        services = context.services
        user = query.from_user
        if not await services.inline.admit(user.id):
            return  # a flood: ignored, before any read (the asker is shown nothing)
        lang = user_language(user)
        now = services.clock()
        view = await usecases.todays(services.sessionmaker, user.id, now, services.rng)
        number = view.puzzle.number
        # Telegram keeps an answer for `cache_time` and asks again only after it: a card stays
        # the same until the next code; an invitation may turn into a card at any moment.
        cache_s = INLINE_CACHE_S
        if view.status == "finished":
            cache_s = max(1, min(INLINE_CARD_CACHE_S, daily.seconds_to_next(now)))
            card = view.card(lang)
            result = InlineQueryResultArticle(
                id=f"card-{number}",
                title=card.split("\n", 1)[0],
                description=texts.daily_share_description(lang),
                input_message_content=InputTextMessageContent(card),
            )
        else:
            result = InlineQueryResultArticle(
                id=f"play-{number}",
                title=texts.daily_invite_title(lang),
                input_message_content=InputTextMessageContent(
                    texts.daily_invite(lang, number, context.bot.username)
                ),
            )
        # Personal: each asker has a card of their own.
        await query.answer([result], cache_time=cache_s, is_personal=True)


def sent_at(message: Message, now: datetime) -> datetime:
    """When `message` was sent, on the clock that says `now` (the services'): its age by the
    wall clock (Telegram's `date` is on it, in whole seconds) taken from `now`, and never
    after `now` (a Telegram clock ahead of ours). With the services' clock the wall clock,
    that is the message's date."""
    return now - max(timedelta(0), utcnow() - message.date)


async def world_top(
    sessionmaker: async_sessionmaker[AsyncSession],
    board: DailyBoard,
    rng: random.Random,
    now: datetime,
    user: User | None,
    lang: Lang,
) -> str:
    """/top daily's answer as of `now`: today's world top from the board in Redis (O(log n),
    rebuilt from Postgres when lost), with the names of its rows, and where `user` stands
    (None: an anonymous admin, no place of their own). `rng` draws today's puzzle when nobody
    opened it yet."""
    day = daily.day_of(now)
    if user is None:
        view = None
        puzzle = await usecases.puzzle_today(sessionmaker, now, rng)
    else:
        view = await usecases.todays(sessionmaker, user.id, now, rng)
        puzzle = view.puzzle
    await board.ensure(day, sessionmaker)
    best = await board.top(day, TOP_ROWS)
    async with reading(sessionmaker) as session:
        names = await store.daily_names(session, day, [uid for uid, _ in best])
    mine = None
    if view is not None and user is not None:
        mine = await _standing(board, lang, view, user.id)
    rows = [(names.get(uid, "?"), attempts) for uid, attempts in best]
    return texts.daily_world_top(lang, puzzle.number, rows, puzzle.max_attempts, mine)


async def _standing(
    board: DailyBoard, lang: Lang, view: usecases.DailyView, user_id: int
) -> str | None:
    """The asker's line under the world's best."""
    if view.status == "none":
        return texts.daily_rank_none(lang)
    if view.status != "finished":
        return texts.daily_rank_playing(lang)
    if not view.cracked:
        return texts.daily_rank_missed(lang)
    standing = await board.standing(view.puzzle.day, user_id)
    if standing.rank is None:  # finished this instant: the board has not taken it yet
        return None
    return texts.daily_rank_cracked(lang, standing.rank, standing.cracked)


async def _best_effort(step: Awaitable[None], what: str) -> None:
    """A step the answer does not depend on (the world board's): Redis out, it is skipped
    (the board is rebuilt from Postgres when next read)."""
    try:
        await step
    except Exception as exc:
        if outage_of(exc) != "redis":
            raise
        log.warning("could not %s on the daily board: %s", what, type(exc).__name__)
