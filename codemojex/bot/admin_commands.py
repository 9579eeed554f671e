"""The admins' commands: each runs only after the admin gate (chat administrators, this
chat's anonymous admin, operators). Every allowed attempt is audited and answered outside the
answer budget (the pace still holds the answers to their share of the chat). A refused one
spends its sender's answer budget in the chat (state/budget.py), like any answer: within
it, audited and answered; past it, told once to slow down, and then neither answered nor
audited until the budget is whole again, so a spammer fills neither the audit log nor the
chat's posts.

Each command takes effect once per message (bot/once.py): its audit row is keyed by the
message and written in the transaction of its effect, the effect only with a new row; what
Redis holds of it is then made what the database says (`usecases.derived`, the room's card).
A command answers only when this handling wrote its row: delivered again, it applies nothing,
says nothing, and only makes Redis good."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from telegram import Update

from codemojex import metrics, usecases
from codemojex.bot.admin import is_admin
from codemojex.bot.context import BotServices, CodemojexContext
from codemojex.bot.incoming import (
    Handler,
    Sender,
    command_text,
    guarded,
    parse_bounded_int,
    replied_to,
    sender_of,
)
from codemojex.bot.language import room_language, user_language
from codemojex.bot.names import display_name, storable
from codemojex.bot.once import Run, origin_of
from codemojex.bot.replies import outbox_written
from codemojex.db import Room, reading, store
from codemojex.game import texts
from codemojex.lanes.admin import WEIGHT_MAX, WEIGHT_MIN
from codemojex.limits import ROOM
from codemojex.locale import Lang
from codemojex.scoring import InvalidSettings, parse_settings
from codemojex.values.types import Say

LIMIT_RANGE: Final = (ROOM.ceiling_min, ROOM.ceiling_max)
WEIGHT_RANGE: Final = (WEIGHT_MIN, WEIGHT_MAX)
# An admin command's arguments as the audit log keeps them.
AUDIT_ARGS_MAX: Final = 200
QUEUE_LINES_MAX: Final = texts.QUEUE_LINES_MAX


@dataclass(frozen=True, slots=True)
class AdminCall:
    who: Sender
    room: Room
    actor_tg_id: int
    args: str
    lang: Lang  # the chat's, to answer in
    run: Run  # this handling of the message (bot/once.py)
    audit: usecases.Audit  # its audit row, keyed by the message: written with its effect


async def _admin_gate(
    update: Update, context: CodemojexContext, action: str, run: Run
) -> AdminCall | None:
    """Authorise an admin command; the attempt is audited whether allowed or refused (refused
    ones within their sender's answer budget). A message that took effect before (`run.done`)
    is refused quietly: what was said of it was said then."""
    who = sender_of(update)
    if who is None:
        return None
    services = context.services
    if not who.in_group:
        if not run.done:
            lang = user_language(who.user)
            await services.answers.answer(who.message, texts.group_only(lang), lang=lang)
        return None
    allowed = await is_admin(
        context.bot, who.message, services.admins, services.config.operator_ids
    )
    if not allowed and run.done:
        return None
    # Past the budget: neither a row nor an answer, so a spammer fills neither the audit log
    # nor the chat's posting pace.
    said = Say.ANSWER if allowed else await services.answers.spend(who.message)
    if said is Say.NOTHING:
        return None
    await services.members.seen(who.chat, who.user)  # one of the group's members
    actor = who.user.id if who.user is not None else who.chat.id
    args = command_text(who.message)
    room = await services.cards.ensure_room(who.chat, who.thread_id)
    lang = room_language(room, who.user)
    audit = usecases.Audit(
        room_id=room.id,
        actor_tg_id=actor,
        action=action,
        args=storable(args[:AUDIT_ARGS_MAX]),
        allowed=allowed,
        origin=origin_of(who.message),
        applies=not run.done,
    )
    if allowed:  # audited by the command, with its effect
        return AdminCall(who, room, actor, args, lang, run, audit)
    if said is Say.ANSWER:  # not the attempt told to slow down: it is past the budget
        first = await usecases.audit_command(services.sessionmaker, audit)
        await run.took_effect()
        if not first:
            return None
    await services.answers.answer_as(who.message, said, texts.not_admin(lang), lang=lang)
    return None


async def reply(call: AdminCall, context: CodemojexContext, text: str) -> None:
    """Answer an admin's allowed command (outside the answer budget: see the module's doc)."""
    await context.services.answers.answer_as(call.who.message, Say.ANSWER, text)


async def record(call: AdminCall, context: CodemojexContext) -> bool:
    """An allowed command with no effect of its own (a usage error, a read): its audit row
    alone. True when written now (then it is answered); False when its message took effect
    before (answered then: not again)."""
    first = await usecases.audit_command(context.services.sessionmaker, call.audit)
    await call.run.took_effect()
    return first


def admin_command(
    action: str,
) -> Callable[[Callable[[AdminCall, CodemojexContext], Awaitable[None]]], Handler]:
    def decorate(body: Callable[[AdminCall, CodemojexContext], Awaitable[None]]) -> Handler:
        @guarded
        @functools.wraps(body)
        async def handler(update: Update, context: CodemojexContext) -> None:
            who = sender_of(update)
            if who is None:
                return
            # Once per message (bot/once.py: a redelivered /endround must not end the next
            # round, nor a /ban undo a later /unban). Run again when it took effect before
            # (`run.done`), the body applies nothing, says nothing, and makes Redis what the
            # database says.
            async with context.services.commands.once(who.message) as run:
                call = await _admin_gate(update, context, action, run)
                if call is not None:
                    await body(call, context)

        return handler

    return decorate


@admin_command("pause")
async def cmd_pause(call: AdminCall, context: CodemojexContext) -> None:
    if await _pause(call, context, paused=True):
        await reply(call, context, texts.paused(call.lang))


@admin_command("resume")
async def cmd_resume(call: AdminCall, context: CodemojexContext) -> None:
    if await _pause(call, context, paused=False):
        await reply(call, context, texts.resumed(call.lang))


async def _pause(call: AdminCall, context: CodemojexContext, *, paused: bool) -> bool:
    """The room's row, then the lanes as it says; whether this handling applied it."""
    services = context.services
    return await usecases.pause_room(
        services.sessionmaker,
        services.lanes,
        call.room.id,
        paused,
        command=call.audit,
        committed=call.run.took_effect,
    )


@admin_command("limit")
async def cmd_limit(call: AdminCall, context: CodemojexContext) -> None:
    parsed = parse_bounded_int(call.args, *LIMIT_RANGE, "/limit", call.lang)
    if isinstance(parsed, str):
        if await record(call, context):
            await reply(call, context, parsed)
        return
    services = context.services
    # The room row is the record, then the card (where the lanes take a ceiling from when
    # they have lost theirs), then the lanes, as the row says.
    first = True
    try:
        await usecases.update_room_settings(
            services.sessionmaker, call.room.id, ceiling=parsed, command=call.audit
        )
    except store.CommandRepeated:
        first = False
    await call.run.took_effect()
    await services.cards.refresh(call.room.id)
    await usecases.derive_ceiling(services.sessionmaker, services.lanes, call.room.id)
    if first:
        await reply(call, context, texts.limit_set(call.lang, parsed))


async def _target(call: AdminCall, context: CodemojexContext) -> usecases.Member | None:
    """The player an admin command replies to; when there is none, the command is audited
    and answered so (once)."""
    # Not the topic's root: in a forum topic every message "replies" to it (its creator).
    replied = replied_to(call.who.message)
    user = replied.from_user if replied is not None else None
    if replied is None or user is None or user.is_bot or replied.sender_chat is not None:
        if await record(call, context):
            await reply(call, context, texts.reply_to_player(call.lang))
        return None
    return usecases.Member(user.id, display_name(user))


@admin_command("weight")
async def cmd_weight(call: AdminCall, context: CodemojexContext) -> None:
    parsed = parse_bounded_int(call.args, *WEIGHT_RANGE, "/weight", call.lang)
    if isinstance(parsed, str):
        if await record(call, context):
            await reply(call, context, parsed)
        return
    member = await _target(call, context)
    if member is None:
        return
    services = context.services
    weighted = await usecases.weight(
        services.sessionmaker,
        services.cards.shared,
        services.lanes,
        call.room,
        member,
        parsed,
        command=call.audit,
        committed=call.run.took_effect,
    )
    if weighted.first:
        await reply(call, context, texts.weight_set(call.lang, member.name, parsed))


@admin_command("ban")
async def cmd_ban(call: AdminCall, context: CodemojexContext) -> None:
    member = await _target(call, context)
    if member is None:
        return
    services = context.services
    # The ban, then the card (a guess after it is refused), then the lanes emptied.
    banned = await usecases.ban(
        services.sessionmaker,
        services.cards.shared,
        services.lanes,
        call.room,
        member,
        call.actor_tg_id,
        command=call.audit,
        committed=call.run.took_effect,
    )
    _keep(services, banned)
    if banned.first:
        await reply(call, context, texts.player_banned(call.lang, member.name, banned.dropped))


@admin_command("unban")
async def cmd_unban(call: AdminCall, context: CodemojexContext) -> None:
    member = await _target(call, context)
    if member is None:
        return
    services = context.services
    unbanned = await usecases.unban(
        services.sessionmaker,
        services.cards.shared,
        call.room,
        member,
        command=call.audit,
        committed=call.run.took_effect,
    )
    _keep(services, unbanned)
    if unbanned.first:
        await reply(call, context, texts.player_unbanned(call.lang, member.name))


def _keep(services: BotServices, done: usecases.Moderated) -> None:
    """This process keeps the room's card as the change left it."""
    if done.card is not None:
        services.cards.keep(done.card)


@admin_command("endround")
async def cmd_endround(call: AdminCall, context: CodemojexContext) -> None:
    """The room's round ends, if it was opened before the command was sent (a /endround
    delivered late must not end the next round); the reveal goes through the outbox, like
    every game post."""
    services = context.services
    ended = await usecases.end_round(services.sessionmaker, call.room.id, call.audit)
    await call.run.took_effect()
    if ended.status == "none":
        await reply(call, context, texts.no_round(call.lang))
        return
    if ended.round is not None:
        metrics.EVENTS.rounds_ended += 1
        await services.cards.shared.close(call.room.id, ended.round.id)
    else:  # it took effect before: the card as the database says
        await services.cards.refresh(call.room.id)
    await outbox_written(services.ring, call.room.chat_id)


@admin_command("settings")
async def cmd_settings(call: AdminCall, context: CodemojexContext) -> None:
    """`/settings length=5 palette=🍎🍌🍇🍒🍋🥝 repeats=off lang=ru` for the next rounds (the
    language at once); `/settings` alone shows what the next round will use."""
    room = call.room
    if not call.args.strip():
        if await record(call, context):
            shown = texts.settings_shown(call.lang, room.length, room.palette, repeats=room.repeats)
            await reply(call, context, shown)
        return
    first = True
    try:
        wanted = parse_settings(call.args)
        # The store refuses what cannot be drawn with the room's other settings (repeats off
        # and a palette shorter than the length), whichever of them is being changed.
        room = await usecases.update_room_settings(
            context.services.sessionmaker,
            room.id,
            length=wanted.length,
            palette="".join(wanted.palette) if wanted.palette is not None else None,
            repeats=wanted.repeats,
            language=wanted.language,
            command=call.audit,
        )
    except InvalidSettings as exc:
        # The change and its row rolled back: the row alone. Answered outside the session:
        # waiting for a posting slot holds no connection.
        if await record(call, context):
            await reply(call, context, texts.settings_refused(call.lang, exc))
        return
    except store.CommandRepeated:
        first = False
    await call.run.took_effect()
    await context.services.cards.refresh(room.id)  # the language is the card's
    if first:
        # In the chat's language as it is now: a new one answers in itself.
        lang = room_language(room, call.who.user)
        changed = texts.settings_changed(lang, room.length, room.palette, repeats=room.repeats)
        await reply(call, context, changed)


@admin_command("queue")
async def cmd_queue(call: AdminCall, context: CodemojexContext) -> None:
    if not await record(call, context):
        return
    services = context.services
    snapshot = await services.lanes.snapshot(call.room.id)
    room_view = snapshot.get("rooms", {}).get(call.room.id)
    names: dict[str, str] = {}
    if room_view is not None:
        busy = [lane for lane, info in room_view.get("lanes", {}).items() if info["depth"]]
        shown = busy[: QUEUE_LINES_MAX + 1]
        async with reading(services.sessionmaker) as session:
            for lane in shown:
                player = await store.get_player(session, lane)
                if player is not None:
                    names[lane] = player.display_name
        # A player whose guesses wait with no score yet has no row: the name the bot sent.
        unnamed = [lane for lane in shown if lane not in names]
        names |= await services.cards.shared.names(call.room.id, unnamed)
    await reply(call, context, texts.queue_view(call.lang, room_view, names))


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
