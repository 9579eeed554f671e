"""The players' commands and the group chatter that may be a guess: thin handlers that call a
store use-case or the guess intake and answer briefly. Results and round announcements are
posted by the worker's outbox sender, not from here. /daily, /top daily and /me (which shows
the daily's record too) are the daily's (bot/daily.py).

A command pays its answer before its work (`incoming.paid_sender`): one past its sender's
answer budget costs one Redis call and no SQL. /newgame, whose round is no answer, only checks
its sender's budget first (and spends it when it says a round is running). A guess (/g) is
neither: its refusals spend the budget when they are said, and a guess taken says nothing."""

from __future__ import annotations

from typing import Final

from telegram import Update
from telegram.constants import ChatType

from codemojex import usecases
from codemojex.bot.context import BotServices, CodemojexContext
from codemojex.bot.guesses import Source
from codemojex.bot.incoming import (
    Handler,
    Sender,
    chat_language,
    command_text,
    guarded,
    paid_sender,
    replied_to,
    sender_of,
)
from codemojex.bot.language import room_language, user_language
from codemojex.bot.names import display_name
from codemojex.bot.once import Run, origin_of
from codemojex.bot.replies import outbox_written
from codemojex.db import reading, store
from codemojex.game import texts
from codemojex.scoring import DEFAULT_LENGTH

TOP_WEEK: Final = "week"  # /top week: this week's board
# /top and /top week show this many players.
LEADERBOARD_ROWS: Final = 10


@guarded
async def cmd_help(update: Update, context: CodemojexContext) -> None:
    who = await paid_sender(update, context)
    if who is not None:
        lang = await chat_language(context.services, who)
        await context.services.answers.answer_paid(who.message, texts.help_text(lang))


@guarded
async def cmd_rules(update: Update, context: CodemojexContext) -> None:
    """The rules with this room's numbers (the open round's, else the next round's)."""
    who = await paid_sender(update, context)
    if who is None:
        return
    services = context.services
    length, palette, repeats = DEFAULT_LENGTH, None, True
    timeout_s = services.config.round_timeout_s
    lang = user_language(who.user)
    if who.in_group:
        room = await services.cards.ensure_room(who.chat, who.thread_id)
        async with reading(services.sessionmaker) as session:
            round_ = await store.open_round(session, room.id)
        length, palette, repeats = room.length, room.palette, room.repeats
        timeout_s = room.round_timeout_s
        lang = room_language(room, who.user)
        if round_ is not None:
            length, palette, repeats = round_.length, round_.palette, round_.repeats
    await services.answers.answer_paid(
        who.message, texts.rules_text(lang, length, palette, timeout_s, repeats=repeats)
    )


async def _group_player(
    update: Update, context: CodemojexContext, *, paid: bool = True
) -> Sender | None:
    """The sender of a group-only player command; answers private chats and anonymous admins.
    `paid`: the command's answer is paid first (`paid_sender`); a guess's is not (a guess
    taken says nothing)."""
    who = await paid_sender(update, context) if paid else sender_of(update)
    if who is None:
        return None
    answers = context.services.answers
    say = answers.answer_paid if paid else answers.answer
    if not who.in_group:
        await say(who.message, texts.group_only(user_language(who.user)))
        return None
    if who.user is None:
        lang = await chat_language(context.services, who)
        await say(who.message, texts.anonymous_player(lang))
        return None
    return who


@guarded
async def cmd_newgame(update: Update, context: CodemojexContext) -> None:
    """A round, or "one is running". The round is no answer of the budget's: the budget is
    checked first (past it: "slow down" once, or nothing, at the cost of one Redis call), and
    spent only when the answer is that a round is running."""
    services = context.services
    asked = sender_of(update)
    if asked is None or not await services.answers.spend_first(asked.message, check=True):
        return
    who = await _group_player(update, context, paid=False)
    if who is None:
        return
    await services.members.seen(who.chat, who.user)
    # Once per message (bot/once.py): a /newgame delivered again after its round ended must
    # not open another.
    async with services.commands.once(who.message) as run:
        await _newgame(services, who, run)


async def _newgame(services: BotServices, who: Sender, run: Run) -> None:
    room = await services.cards.ensure_room(who.chat, who.thread_id)
    opened = repeated = False
    if not run.done:
        try:
            # The announcement is written to the outbox with the round: the sender posts it,
            # paced with every other game post of the chat. A room's first round takes its
            # starter's language. The round records this message: delivered again, however
            # late, it opens nothing.
            starter = user_language(who.user)
            await usecases.start_round(
                services.sessionmaker,
                room.id,
                services.rng,
                language=starter,
                origin=origin_of(who.message),
            )
            opened = True
        except store.RoundAlreadyOpen:
            pass
        except store.CommandRepeated:
            repeated = True
        if opened or repeated:
            await run.took_effect()
    # The round into the room's card (also when it was open already, or opened by this
    # message before: a bot that died between its commit and the card's write left the card
    # without it).
    await services.cards.refresh(room.id)
    if opened or repeated or run.done:
        await outbox_written(services.ring, who.chat.id)
        return
    # Outside the session: waiting for a posting slot must not hold a database connection.
    await services.answers.answer(who.message, texts.round_running(room_language(room, who.user)))


@guarded
async def cmd_guess(update: Update, context: CodemojexContext) -> None:
    who = sender_of(update)
    if who is None or who.user is None or who.chat.type != ChatType.PRIVATE:
        who = await _group_player(update, context, paid=False)  # private: the daily's guess
    if who is None or who.user is None:
        return
    guesses = context.services.guesses
    outcome = await guesses.submit(who.message, who.user, command_text(who.message), Source.COMMAND)
    await guesses.tell(who.message, outcome)


@guarded
async def on_group_text(update: Update, context: CodemojexContext) -> None:
    """A plain group message: a guess if it looks like one (see guesses.py), else chat."""
    who = sender_of(update)
    if who is None or who.user is None or not who.in_group:
        return
    message = who.message
    # A message in a forum topic whose root the bot posted is no reply to the bot.
    replied = replied_to(message)
    to_bot = (
        replied is not None
        and replied.from_user is not None
        and replied.from_user.id == context.bot.id
    )
    source = Source.REPLY if to_bot else Source.PLAIN
    guesses = context.services.guesses
    outcome = await guesses.submit(message, who.user, message.text or "", source)
    if outcome.outcome != "enqueued":
        # Said something, and no guess taken (the worker writes a guesser's row): one of the
        # group's members for its daily board, noted in memory (bot/members.py).
        context.services.members.note(who.chat, who.user)
    await guesses.tell(message, outcome)


async def on_group_other(update: Update, context: CodemojexContext) -> None:
    """Anything else said in a group (a sticker, a photo, a voice message): no guess and no
    command, but its sender is one of the group's members, noted in memory (no I/O)."""
    message = update.message
    if message is not None:
        context.services.members.note(message.chat, message.from_user)


@guarded
async def on_private_text(update: Update, context: CodemojexContext) -> None:
    """A message in a private chat: a guess at the daily code if it looks like one (or
    replies to the bot), else the hint of what is played where."""
    who = sender_of(update)
    if who is None or who.in_group or who.chat.type != ChatType.PRIVATE or who.user is None:
        return
    message = who.message
    replied = replied_to(message)
    author = replied.from_user if replied is not None else None
    to_bot = author is not None and author.id == context.bot.id
    source = Source.REPLY if to_bot else Source.PRIVATE
    services = context.services
    outcome = await services.guesses.submit(message, who.user, message.text or "", source)
    if outcome.outcome == "ignored":
        await services.answers.answer(message, texts.private_hint(user_language(who.user)))
        return
    await services.guesses.tell(message, outcome)


@guarded
async def cmd_stats(update: Update, context: CodemojexContext) -> None:
    who = await _group_player(update, context)
    if who is None or who.user is None:
        return
    services = context.services
    room = await services.cards.ensure_room(who.chat, who.thread_id)
    async with reading(services.sessionmaker) as session:
        stats = await store.player_stats(session, room.id, who.user.id)
    lang = room_language(room, who.user)
    await services.answers.answer_paid(
        who.message, texts.record_here(lang, display_name(who.user), stats)
    )


@guarded
async def cmd_top(update: Update, context: CodemojexContext) -> None:
    """/top: the chat's leaderboard of all time; /top week: this week's (since Monday 00:00
    UTC)."""
    who = await _group_player(update, context)
    if who is None:
        return
    services = context.services
    which = command_text(who.message).strip().lower()
    room = await services.cards.ensure_room(who.chat, who.thread_id)
    lang = room_language(room, who.user)
    async with reading(services.sessionmaker) as session:
        if which not in ("", TOP_WEEK):
            board = texts.top_usage(lang)
        elif which == TOP_WEEK:
            week = await store.weekly_board(session, room.id, limit=LEADERBOARD_ROWS)
            board = texts.leaderboard(
                lang, [(r.display_name, r.points, r.wins) for r in week], week=True
            )
        else:
            rows = await store.leaderboard(session, room.id, limit=LEADERBOARD_ROWS)
            board = texts.leaderboard(lang, [(r.display_name, r.points, r.wins) for r in rows])
    await services.answers.answer_paid(who.message, board)


@guarded
async def cmd_unknown(update: Update, context: CodemojexContext) -> None:
    """Commands we do not have: answered in private, and in groups only when addressed to us
    by name (/foo@ourbot); a bare /foo in a group may be meant for another bot."""
    who = sender_of(update)
    if who is None:
        return
    text = who.message.text or ""
    word = text.split(maxsplit=1)[0] if text.strip() else ""
    _, _, addressed = word.partition("@")
    if not who.in_group or (addressed and addressed.lower() == context.bot.username.lower()):
        services = context.services
        if not await services.answers.spend_first(who.message):
            return
        await services.members.seen(who.chat, who.user)
        lang = await chat_language(services, who)
        await services.answers.answer_paid(who.message, texts.unknown_command(lang))


PLAYER_COMMANDS: Final[dict[str, Handler]] = {
    "newgame": cmd_newgame,
    "g": cmd_guess,
    "rules": cmd_rules,
    "stats": cmd_stats,
    "top": cmd_top,
    "help": cmd_help,
    "start": cmd_help,
}
