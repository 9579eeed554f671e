"""Thin handlers: parse, call a store use-case or a lanes verb, answer briefly.

Only new messages reach these (edited messages are not guesses and do not re-run commands).
Messages without a person behind them (no sender, or posted on behalf of a channel) are
ignored; an anonymous admin (posting as the group) may run admin commands but not play.
Results and round announcements are posted by the worker's outbox sender, not from here.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

from telegram import Chat, Message, Update, User
from telegram.constants import ChatType

from codemojex.bot.admin import is_admin, is_anonymous_admin
from codemojex.bot.context import CodemojexContext
from codemojex.bot.guesses import Source, submit_guess, tell
from codemojex.bot.replies import answer
from codemojex.bot.rooms import display_name, ensure_room, storable
from codemojex.db import Room, store
from codemojex.game import texts
from codemojex.limits import CEILING_MAX, CEILING_MIN, WEIGHT_MAX, WEIGHT_MIN
from codemojex.outages import outage_of
from codemojex.scoring import DEFAULT_LENGTH, InvalidSettings, parse_settings

log = logging.getLogger(__name__)

Handler = Callable[[Update, CodemojexContext], Coroutine[Any, Any, None]]

LIMIT_RANGE: Final = (CEILING_MIN, CEILING_MAX)
WEIGHT_RANGE: Final = (WEIGHT_MIN, WEIGHT_MAX)
AUDIT_ARGS_MAX: Final = 200


def guarded(handler: Handler) -> Handler:
    """Storage outages (Redis, Postgres) become "try again in a moment" instead of an error
    report: nothing was half-written (each lanes verb is one script, each store use-case one
    transaction). Telegram failing is not one of them: that is reported, and apologised for."""

    @functools.wraps(handler)
    async def wrapper(update: Update, context: CodemojexContext) -> None:
        try:
            await handler(update, context)
        except Exception as exc:
            if outage_of(exc) not in ("redis", "postgres"):
                raise  # a bug, or Telegram out (on_error's: an answer would fail too)
            log.warning("update %s: storage unavailable (%s)", update.update_id, type(exc).__name__)
            if update.message is not None:
                # Paced like any answer; unpaced when it is Redis that is down (replies.answer).
                await answer(context.services, update.message, texts.TRY_AGAIN)

    return wrapper


@dataclass(frozen=True, slots=True)
class Sender:
    message: Message
    chat: Chat
    user: User | None  # None for an anonymous admin
    in_group: bool


def sender_of(update: Update) -> Sender | None:
    """Who sent this message, or None when nobody we can answer to did."""
    message = update.message
    if message is None:
        return None
    chat = message.chat
    in_group = chat.type in (ChatType.GROUP, ChatType.SUPERGROUP)
    if is_anonymous_admin(message):
        return Sender(message, chat, None, in_group)
    user = message.from_user
    if user is None or message.sender_chat is not None or user.is_bot:
        return None
    return Sender(message, chat, user, in_group)


def command_text(message: Message) -> str:
    """Everything after the command word, as typed (spaces inside kept)."""
    text = message.text or ""
    parts = text.split(maxsplit=1)
    return parts[1] if len(parts) > 1 else ""


def parse_bounded_int(text: str, low: int, high: int, what: str) -> int | str:
    """The whole number in `text` within [low, high], or the reason it is not one."""
    value = text.strip()
    usage = f"{what} takes one whole number from {low} to {high}."
    if not value or not value.isascii() or not value.isdigit() or len(value) > len(str(high)):
        return usage
    number = int(value)
    if not low <= number <= high:
        return usage
    return number


# Players ---------------------------------------------------------------------------------


@guarded
async def cmd_help(update: Update, context: CodemojexContext) -> None:
    who = sender_of(update)
    if who is not None:
        await answer(context.services, who.message, texts.HELP)


@guarded
async def cmd_rules(update: Update, context: CodemojexContext) -> None:
    """The rules with this room's numbers (the open round's, else the next round's)."""
    who = sender_of(update)
    if who is None:
        return
    services = context.services
    length, palette, repeats = DEFAULT_LENGTH, None, True
    timeout_s = services.settings.round_timeout_s
    if who.in_group:
        async with services.sessionmaker() as session:
            room = await ensure_room(services, session, who.chat)
            round_ = await store.open_round(session, room.id)
        length, palette, repeats = room.length, room.palette, room.repeats
        timeout_s = room.round_timeout_s
        if round_ is not None:
            length, palette, repeats = round_.length, round_.palette, round_.repeats
    await answer(
        context.services,
        who.message,
        texts.rules_text(length, palette, timeout_s, repeats=repeats),
    )


async def _group_player(update: Update, context: CodemojexContext) -> Sender | None:
    """The sender of a group-only player command; answers private chats and anonymous admins."""
    who = sender_of(update)
    if who is None:
        return None
    if not who.in_group:
        await answer(context.services, who.message, texts.GROUP_ONLY)
        return None
    if who.user is None:
        await answer(context.services, who.message, texts.ANONYMOUS_PLAYER)
        return None
    return who


@guarded
async def cmd_newgame(update: Update, context: CodemojexContext) -> None:
    who = await _group_player(update, context)
    if who is None:
        return
    services = context.services
    async with services.sessionmaker() as session:
        room = await ensure_room(services, session, who.chat)
        try:
            # The announcement is written to the outbox with the round: the sender posts it,
            # paced with every other game post of the chat.
            await store.start_round(session, room.id, services.rng)
            return
        except store.RoundAlreadyOpen:
            pass
    # Outside the session: waiting for a posting slot must not hold a database connection.
    await answer(services, who.message, texts.ROUND_RUNNING)


@guarded
async def cmd_guess(update: Update, context: CodemojexContext) -> None:
    who = await _group_player(update, context)
    if who is None or who.user is None:
        return
    outcome = await submit_guess(
        context.services, who.message, who.user, command_text(who.message), Source.COMMAND
    )
    await tell(context.services, who.message, outcome)


@guarded
async def on_group_text(update: Update, context: CodemojexContext) -> None:
    """A plain group message: a guess if it looks like one (see guesses.py), else chat."""
    who = sender_of(update)
    if who is None or who.user is None or not who.in_group:
        return
    message = who.message
    replied = message.reply_to_message
    to_bot = (
        replied is not None
        and replied.from_user is not None
        and replied.from_user.id == context.bot.id
    )
    source = Source.REPLY if to_bot else Source.PLAIN
    outcome = await submit_guess(context.services, message, who.user, message.text or "", source)
    await tell(context.services, message, outcome)


@guarded
async def on_private_text(update: Update, context: CodemojexContext) -> None:
    who = sender_of(update)
    if who is not None and not who.in_group and who.chat.type == ChatType.PRIVATE:
        await answer(context.services, who.message, texts.PRIVATE_HINT)


@guarded
async def cmd_stats(update: Update, context: CodemojexContext) -> None:
    who = await _group_player(update, context)
    if who is None or who.user is None:
        return
    services = context.services
    async with services.sessionmaker() as session:
        room = await ensure_room(services, session, who.chat)
        stats = await store.player_stats(session, room.id, who.user.id)
    await answer(context.services, who.message, _format_stats(stats, display_name(who.user)))


@guarded
async def cmd_top(update: Update, context: CodemojexContext) -> None:
    who = await _group_player(update, context)
    if who is None:
        return
    services = context.services
    async with services.sessionmaker() as session:
        room = await ensure_room(services, session, who.chat)
        rows = await store.leaderboard(session, room.id, limit=10)
    await answer(context.services, who.message, _format_top(rows))


@guarded
async def cmd_me(update: Update, context: CodemojexContext) -> None:
    who = sender_of(update)
    if who is None:
        return
    if who.user is None:
        await answer(context.services, who.message, texts.ANONYMOUS_PLAYER)
        return
    async with context.services.sessionmaker() as session:
        stats = await store.global_stats(session, who.user.id)
    await answer(context.services, who.message, _format_global(stats, display_name(who.user)))


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
        await answer(context.services, who.message, texts.UNKNOWN_COMMAND)


# Formatting ------------------------------------------------------------------------------


def _format_stats(stats: store.PlayerStats | None, name: str) -> str:
    if stats is None:
        return texts.player_stats(name, 0, 0, 0, None)
    return texts.player_stats(name, stats.points, stats.wins, stats.guesses, stats.best_solve)


def _format_top(rows: list[store.LeaderRow]) -> str:
    return texts.leaderboard([(row.display_name, row.points, row.wins) for row in rows])


def _format_global(stats: store.GlobalStats, name: str) -> str:
    where = f"in {stats.rooms} chat" + ("" if stats.rooms == 1 else "s")
    return texts.player_stats(
        name, stats.points, stats.wins, stats.guesses, stats.best_solve, where=where
    )


QUEUE_LINES_MAX: Final = 15


def format_queue(room_view: dict[str, Any] | None, names: dict[str, str]) -> str:
    """/queue: the room's lanes from lanes.snapshot, players by name (ids stay internal)."""
    if room_view is None:
        return "Nothing queued here yet."
    ceiling = room_view.get("ceiling")
    head = (
        f"Scoring {'paused' if room_view.get('paused') else 'running'} · "
        f"in flight {room_view.get('in_flight', 0)}/{ceiling if ceiling is not None else '∞'} · "
        f"waiting {room_view.get('pending', 0)}"
    )
    waiting = sorted(
        ((lane, info) for lane, info in room_view.get("lanes", {}).items() if info["depth"]),
        key=lambda item: (-int(item[1]["depth"]), item[0]),
    )
    lines = [head]
    for lane, info in waiting[:QUEUE_LINES_MAX]:
        extras = []
        if info.get("weight", 1) != 1:
            extras.append(f"weight {info['weight']}")
        if info.get("paused"):
            extras.append("paused")
        extra = f" ({', '.join(extras)})" if extras else ""
        lines.append(f"{names.get(lane, 'someone')}: {info['depth']} waiting{extra}")
    if len(waiting) > QUEUE_LINES_MAX:
        lines.append(f"… and {len(waiting) - QUEUE_LINES_MAX} more players")
    return "\n".join(lines)


# Admins -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdminCall:
    who: Sender
    room: Room
    actor_tg_id: int
    args: str


async def _admin_gate(update: Update, context: CodemojexContext, action: str) -> AdminCall | None:
    """Authorise an admin command; the attempt is audited whether allowed or refused."""
    who = sender_of(update)
    if who is None:
        return None
    if not who.in_group:
        await answer(context.services, who.message, texts.GROUP_ONLY)
        return None
    services = context.services
    allowed = await is_admin(
        context.bot, who.message, services.admins, services.settings.operator_ids
    )
    actor = who.user.id if who.user is not None else who.chat.id
    args = command_text(who.message)
    async with services.sessionmaker() as session:
        room = await ensure_room(services, session, who.chat)
        await store.audit(
            session,
            room_id=room.id,
            actor_tg_id=actor,
            action=action,
            args=storable(args[:AUDIT_ARGS_MAX]),
            allowed=allowed,
        )
    if not allowed:
        await answer(context.services, who.message, texts.NOT_ADMIN)
        return None
    return AdminCall(who, room, actor, args)


def admin_command(
    action: str,
) -> Callable[[Callable[[AdminCall, CodemojexContext], Awaitable[None]]], Handler]:
    def decorate(body: Callable[[AdminCall, CodemojexContext], Awaitable[None]]) -> Handler:
        @guarded
        @functools.wraps(body)
        async def handler(update: Update, context: CodemojexContext) -> None:
            call = await _admin_gate(update, context, action)
            if call is not None:
                await body(call, context)

        return handler

    return decorate


@admin_command("pause")
async def cmd_pause(call: AdminCall, context: CodemojexContext) -> None:
    await context.services.lanes.pause(call.room.id)
    await answer(context.services, call.who.message, texts.PAUSED)


@admin_command("resume")
async def cmd_resume(call: AdminCall, context: CodemojexContext) -> None:
    await context.services.lanes.resume(call.room.id)
    await answer(context.services, call.who.message, texts.RESUMED)


@admin_command("limit")
async def cmd_limit(call: AdminCall, context: CodemojexContext) -> None:
    parsed = parse_bounded_int(call.args, *LIMIT_RANGE, "/limit")
    if isinstance(parsed, str):
        await answer(context.services, call.who.message, parsed)
        return
    services = context.services
    # The room row is the record (re-applied to the lanes on the next first sight), so it is
    # written first; should the lanes call fail, the next guess applies the new ceiling.
    async with services.sessionmaker() as session:
        await store.update_room_settings(session, call.room.id, ceiling=parsed)
    services.ceilings_applied.discard(call.room.id)
    await services.lanes.limit(call.room.id, parsed)
    services.ceilings_applied.add(call.room.id)
    await answer(context.services, call.who.message, texts.limit_set(parsed))


async def _target(call: AdminCall, context: CodemojexContext) -> User | None:
    """The player an admin command replies to; answers when there is none."""
    replied = call.who.message.reply_to_message
    user = replied.from_user if replied is not None else None
    if replied is None or user is None or user.is_bot or replied.sender_chat is not None:
        await answer(context.services, call.who.message, texts.REPLY_TO_PLAYER)
        return None
    return user


@admin_command("weight")
async def cmd_weight(call: AdminCall, context: CodemojexContext) -> None:
    parsed = parse_bounded_int(call.args, *WEIGHT_RANGE, "/weight")
    if isinstance(parsed, str):
        await answer(context.services, call.who.message, parsed)
        return
    user = await _target(call, context)
    if user is None:
        return
    services = context.services
    async with services.sessionmaker() as session:
        player = await store.ensure_player(session, call.room.id, user.id, display_name(user))
    await services.lanes.weight(player.id, parsed)
    await answer(context.services, call.who.message, texts.weight_set(display_name(user), parsed))


@admin_command("ban")
async def cmd_ban(call: AdminCall, context: CodemojexContext) -> None:
    user = await _target(call, context)
    if user is None:
        return
    services = context.services
    async with services.sessionmaker() as session:
        player = await store.ensure_player(session, call.room.id, user.id, display_name(user))
        # The ban is recorded first: a guess racing the purge is then refused by the bot.
        await store.ban(session, call.room.id, player.id, call.actor_tg_id)
    dropped = await services.lanes.purge(player.id)
    await answer(
        context.services, call.who.message, texts.player_banned(display_name(user), dropped)
    )


@admin_command("unban")
async def cmd_unban(call: AdminCall, context: CodemojexContext) -> None:
    user = await _target(call, context)
    if user is None:
        return
    services = context.services
    async with services.sessionmaker() as session:
        player = await store.ensure_player(session, call.room.id, user.id, display_name(user))
        await store.unban(session, call.room.id, player.id, call.actor_tg_id)
    await answer(context.services, call.who.message, texts.player_unbanned(display_name(user)))


@admin_command("endround")
async def cmd_endround(call: AdminCall, context: CodemojexContext) -> None:
    async with context.services.sessionmaker() as session:
        round_ = await store.open_round(session, call.room.id)
        if round_ is None:
            await answer(context.services, call.who.message, texts.NO_ROUND)
            return
        # The reveal goes through the outbox, like every game post.
        await store.close_round(session, round_.id, "endround")


@admin_command("settings")
async def cmd_settings(call: AdminCall, context: CodemojexContext) -> None:
    """`/settings length=5 palette=🍎🍌🍇🍒🍋🥝 repeats=off` for the next rounds; `/settings`
    alone shows what the next round will use."""
    room = call.room
    if not call.args.strip():
        shown = texts.settings_shown(room.length, room.palette, repeats=room.repeats)
        await answer(context.services, call.who.message, shown)
        return
    try:
        wanted = parse_settings(call.args)
        async with context.services.sessionmaker() as session:
            # The store refuses what cannot be drawn with the room's other settings (repeats
            # off and a palette shorter than the length), whichever of them is being changed.
            room = await store.update_room_settings(
                session,
                room.id,
                length=wanted.length,
                palette="".join(wanted.palette) if wanted.palette is not None else None,
                repeats=wanted.repeats,
            )
    except InvalidSettings as exc:
        # Answered outside the session: waiting for a posting slot holds no connection.
        await answer(context.services, call.who.message, str(exc))
        return
    await answer(
        context.services,
        call.who.message,
        texts.settings_changed(room.length, room.palette, repeats=room.repeats),
    )


@admin_command("queue")
async def cmd_queue(call: AdminCall, context: CodemojexContext) -> None:
    services = context.services
    snapshot = await services.lanes.snapshot(call.room.id)
    room_view = snapshot.get("rooms", {}).get(call.room.id)
    names: dict[str, str] = {}
    if room_view is not None:
        busy = [lane for lane, info in room_view.get("lanes", {}).items() if info["depth"]]
        async with services.sessionmaker() as session:
            for lane in busy[: QUEUE_LINES_MAX + 1]:
                player = await store.get_player(session, lane)
                if player is not None:
                    names[lane] = player.display_name
    await answer(context.services, call.who.message, format_queue(room_view, names))


ADMIN_COMMANDS: Final[dict[str, Handler]] = {
    "pause": cmd_pause,
    "resume": cmd_resume,
    "limit": cmd_limit,
    "weight": cmd_weight,
    "ban": cmd_ban,
    "unban": cmd_unban,
    "endround": cmd_endround,
    "settings": cmd_settings,
    "queue": cmd_queue,
}

PLAYER_COMMANDS: Final[dict[str, Handler]] = {
    "newgame": cmd_newgame,
    "g": cmd_guess,
    "rules": cmd_rules,
    "stats": cmd_stats,
    "top": cmd_top,
    "help": cmd_help,
    "start": cmd_help,
    "me": cmd_me,
}
