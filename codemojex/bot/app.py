"""The python-telegram-bot Application of Codemojex: handlers, command list, error handler.

`build_application` wires the parts; `running` runs it inside the caller's event loop, with
polling, or with our own webhook server (codemojex.bot.webhook) when asked; `run_bot`
(codemojex.bot.main) is the process around it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import (
    BotCommand,
    BotCommandScope,
    BotCommandScopeAllChatAdministrators,
    BotCommandScopeAllGroupChats,
    BotCommandScopeAllPrivateChats,
    Update,
)
from telegram.error import Forbidden, RetryAfter, TelegramError
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    ChatMemberHandler,
    CommandHandler,
    ContextTypes,
    Defaults,
    MessageHandler,
    filters,
)

from codemojex.bot.admin import AdminCache
from codemojex.bot.admin_commands import ADMIN_COMMANDS
from codemojex.bot.cards import Cards, RoomDefaults
from codemojex.bot.context import (
    BotConfig,
    BotServices,
    CodemojexApp,
    CodemojexContext,
    bound_services_type,
)
from codemojex.bot.daily import DailyCommands
from codemojex.bot.door import STOP_S, Door
from codemojex.bot.drafts import Drafts
from codemojex.bot.guesses import Guesses
from codemojex.bot.handling import failed
from codemojex.bot.incoming import door_hooks
from codemojex.bot.inline import InlineQueries
from codemojex.bot.intake import Intake
from codemojex.bot.language import user_language
from codemojex.bot.members import Members
from codemojex.bot.once import CommandMarks
from codemojex.bot.order import Behind, order_key
from codemojex.bot.player_commands import (
    PLAYER_COMMANDS,
    cmd_unknown,
    on_group_other,
    on_group_text,
    on_private_text,
)
from codemojex.bot.polling import POLL_TIMEOUT_S, Poller, updates_request
from codemojex.bot.replies import Answers
from codemojex.bot.taps import on_tap
from codemojex.bot.tries import Before
from codemojex.bot.webhook import WebhookServer
from codemojex.game import texts
from codemojex.game.taps import TAP_PATTERN
from codemojex.lanes import Lanes
from codemojex.locale import EN, LANGUAGES, Lang, menu_code
from codemojex.outages import OUTAGES, outage_of
from codemojex.posting.keys import bot_id
from codemojex.posting.pacer import Pacer
from codemojex.posting.ring import PostingRing
from codemojex.state.board import DailyBoard
from codemojex.state.budget import AnswerBudget
from codemojex.state.cards import RoomCards
from codemojex.state.flags import CatchingUp, FloodNotices
from codemojex.state.inbox import Inbox, PollerLease
from codemojex.state.members import GroupMembers
from codemojex.values.clock import utcnow
from codemojex.values.redistypes import AnyRedis

log = logging.getLogger(__name__)

# Every kind of update we act on; chat_member must be asked for explicitly. Channel posts: a
# /daily there is told where the daily is played. Inline queries: a daily card's Share button
# (Telegram sends them only to a bot with inline mode on).
ALLOWED_UPDATES: list[str] = [
    Update.MESSAGE,
    Update.CALLBACK_QUERY,
    Update.CHAT_MEMBER,
    Update.MY_CHAT_MEMBER,
    Update.CHANNEL_POST,
    Update.INLINE_QUERY,
]


@dataclass(frozen=True, slots=True)
class BotParts:
    """What a caller gives the bot instead of what its config makes: the demo and the benches
    a seeded `rng` (their rounds replay) and their `max_depth`; the tests a `pacer` and a
    `budget` with limits no test reaches. None: the config's."""

    rng: random.Random | None = None
    max_depth: int | None = None
    pacer: Pacer | None = None
    budget: AnswerBudget | None = None


def make_services(
    config: BotConfig,
    *,
    lanes: Lanes,
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: AnyRedis,
    clock: Callable[[], datetime] = utcnow,
    parts: BotParts | None = None,
) -> BotServices:
    """Every part the handlers use, each built from the parts it needs."""
    parts = parts or BotParts()
    queue = lanes.queue
    answers = Answers(
        parts.pacer or Pacer(redis, queue, config.pace, bot=bot_id(config.api.token)),
        parts.budget or AnswerBudget(redis, queue, budget=config.answer_budget),
    )
    defaults = RoomDefaults(config.default_ceiling, config.round_timeout_s)
    cards = Cards(RoomCards(redis, queue), sessionmaker, defaults)
    intake = Intake(lanes)
    board = DailyBoard(redis, queue)
    guesses = Guesses(
        cards=cards,
        intake=intake,
        answers=answers,
        flood=FloodNotices(redis, queue),
        board=board,
        sessionmaker=sessionmaker,
        clock=clock,
        max_depth=config.max_depth if parts.max_depth is None else parts.max_depth,
        outcomes=Counter(),
    )
    return BotServices(
        config=config,
        lanes=lanes,
        sessionmaker=sessionmaker,
        redis=redis,
        admins=AdminCache(config.admin_cache_ttl_s),
        answers=answers,
        cards=cards,
        guesses=guesses,
        intake=intake,
        drafts=Drafts(redis, queue),
        ring=PostingRing(redis, queue),
        inline=InlineQueries(redis, queue),
        commands=CommandMarks(redis, queue, config.dedupe_window_s),
        catching_up=CatchingUp(redis, queue),
        members=Members(GroupMembers(redis, queue), clock),
        board=board,
        clock=clock,
        rng=parts.rng or random.SystemRandom(),
    )


def build_application(
    config: BotConfig,
    *,
    lanes: Lanes,
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: AnyRedis,
    clock: Callable[[], datetime] = utcnow,
    parts: BotParts | None = None,
) -> CodemojexApp:
    """The bot, ready for `running` (polling, or our webhook server).

    `parts`: what the demo, the benches and the tests give instead of what the config makes
    (`BotParts`). The pacer's and the budget's namespace is the queue name, as for the
    worker's sender. `clock`: the daily code's now (tests play it over midnight).
    """
    if config.api.token is None:
        raise ValueError("the bot needs a token (CODEMOJEX_TOKEN)")
    services = make_services(
        config, lanes=lanes, sessionmaker=sessionmaker, redis=redis, clock=clock, parts=parts
    )
    context_types = ContextTypes(context=CodemojexContext, bot_data=bound_services_type(services))
    application: CodemojexApp = (
        ApplicationBuilder()
        .token(config.api.token.get_secret_value())
        .base_url(config.api.base_url)
        .base_file_url(config.api.base_file_url)
        .context_types(context_types)
        # A player may delete the message before the answer goes out: answer anyway.
        .defaults(Defaults(allow_sending_without_reply=True))
        # Updates come from our polling loop or webhook server through our door (`running`,
        # bot/door.py), never PTB's Updater, which confirms them to Telegram before they
        # are handled (bot/polling.py), nor its update queue.
        .updater(None)
        # getUpdates through our aiohttp client (polling.py `updates_request` says why).
        .get_updates_request(updates_request())
        .job_queue(None)
        .post_init(register_commands)
        .build()
    )
    add_handlers(application, DailyCommands())
    return application


def add_handlers(application: CodemojexApp, daily: DailyCommands) -> None:
    # New messages only: an edited message is not a guess and does not re-run a command.
    new = filters.UpdateType.MESSAGE
    # Group text that is no command first: most updates are guesses typed as they are, and
    # each handler ahead of theirs costs every one of them a check.
    application.add_handler(
        MessageHandler(
            new & filters.ChatType.GROUPS & filters.TEXT & ~filters.COMMAND, on_group_text
        )
    )
    commands = {**PLAYER_COMMANDS, **ADMIN_COMMANDS, **daily.commands()}
    for name, callback in commands.items():
        application.add_handler(CommandHandler(name, callback, filters=new))
    for handler in daily.handlers():
        application.add_handler(handler)
    application.add_handler(MessageHandler(new & filters.COMMAND, cmd_unknown))
    application.add_handler(
        MessageHandler(new & filters.ChatType.PRIVATE & filters.TEXT, on_private_text)
    )
    # The rest of what members say in a group (stickers, photos...), not the service
    # messages (joins, pins, titles): its sender noted for the daily's group board.
    application.add_handler(
        MessageHandler(
            new & filters.ChatType.GROUPS & ~filters.TEXT & ~filters.StatusUpdate.ALL,
            on_group_other,
        )
    )
    # Taps on a round's keyboard: the data names the round (codemojex.game.taps).
    application.add_handler(CallbackQueryHandler(on_tap, pattern=TAP_PATTERN))
    application.add_handler(
        ChatMemberHandler(on_member_change, ChatMemberHandler.ANY_CHAT_MEMBER), group=1
    )
    application.add_error_handler(on_error)


async def on_member_change(update: Update, context: CodemojexContext) -> None:
    """Someone was promoted or demoted: ask Telegram again next time (not on a join or leave).
    Someone joined or left a group: one of its members, or no longer (bot/members.py)."""
    change = update.chat_member or update.my_chat_member
    if change is not None:
        context.services.admins.note(change)
    if update.chat_member is not None:
        await context.services.members.changed(update.chat_member)


def command_menus(lang: Lang) -> list[tuple[BotCommandScope, list[BotCommand]]]:
    """The menus of one language, per scope: the players' commands in every group chat, the
    same plus the admins' for chat administrators (a scope's list replaces, never adds to, a
    wider one), and /daily /top /rules /me /help in private chats."""
    players = [BotCommand(name, text) for name, text in texts.player_commands(lang)]
    admins = players + [BotCommand(name, text) for name, text in texts.admin_commands(lang)]
    private = [BotCommand(name, text) for name, text in texts.private_commands(lang)]
    return [
        (BotCommandScopeAllGroupChats(), players),
        (BotCommandScopeAllChatAdministrators(), admins),
        (BotCommandScopeAllPrivateChats(), private),
    ]


async def register_commands(application: CodemojexApp) -> None:
    """Every menu in every shipped language: Telegram shows a user the list of their
    `language_code` (two letters), else the one without a language, which is English. The
    default scope is left alone: these three cover every chat the bot is in."""
    bot = application.bot
    await asyncio.gather(
        *(
            bot.set_my_commands(
                commands, scope=scope, language_code=None if lang == EN else menu_code(lang)
            )
            for lang in LANGUAGES
            for scope, commands in command_menus(lang)
        )
    )


async def on_error(update: object, context: CodemojexContext) -> None:
    """The handlers' one error handler. A storage outage, Telegram failing before the effect
    (bot/tries.py `Before`) and a bug go back to the door (which tries the update again within
    its budget of tries, waits an outage out, and at last keeps it as a dead letter, with an
    apology). Telegram failing a call of the handler after its effect ends the update: what it
    stored stays (every store is idempotent on the update), and a try again could answer
    twice; its sender is apologised to, unless Telegram refuses our messages there now. Logged
    with the update id, never the update's text or a secret."""
    error = context.error
    if error is None:
        return
    update_id = update.update_id if isinstance(update, Update) else None
    if isinstance(error, Behind):
        failed(error)  # no failure: an older update of its key runs first (bot/order.py)
        return
    if isinstance(error, Before) or outage_of(error) in ("redis", "postgres"):
        failed(error)  # booked in OUTAGES where it was raised: one line per outage
        return
    log.error("update %s failed: %s", update_id, type(error).__name__, exc_info=error)
    if not (outage_of(error) == "telegram" or isinstance(error, TelegramError)):
        failed(error)
        return
    if isinstance(error, RetryAfter | Forbidden):
        return  # Telegram refuses to take messages from us there now: an apology would fail too
    if isinstance(update, Update) and update.callback_query is not None:
        # A tap: the apology is the tapper's toast, not a post under the round message.
        try:
            await update.callback_query.answer(
                texts.went_wrong(user_language(update.effective_user))
            )
        except Exception as exc:  # the toast is a courtesy; the failure is logged above
            OUTAGES.swallow(exc, "the bot", "a failed tap's apology not shown")
        return
    if isinstance(update, Update) and update.effective_message is not None:
        try:
            lang = user_language(update.effective_user)
            await context.services.answers.answer(update.effective_message, texts.went_wrong(lang))
        except Exception:  # the apology is best effort; Telegram may be what failed
            log.warning("update %s: could not tell the user", update_id)


# Running --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Front:
    """The bot while it runs (`running`): its application, its door, and what feeds the door
    (the poller, or the webhook server)."""

    application: CodemojexApp
    door: Door
    poller: Poller | None
    server: WebhookServer | None

    @property
    def standby(self) -> bool:
        """Another process polls this bot: this one waits (its /readyz says so)."""
        return self.poller is not None and self.poller.standby

    def gauges(self) -> dict[str, float]:
        """What /metrics reads of the front door now (ops/collect.py `BotCollector`)."""
        return {
            "held": float(self.door.held),
            "standby": float(self.standby),
            "id_resets": float(self.poller.id_resets if self.poller is not None else 0),
        }


# Commands that change a chat for everyone run in the order they came, whoever sent them; a
# player's other updates keep their own order (bot/order.py `order_key`).
CHAT_ORDERED = frozenset({*ADMIN_COMMANDS, "newgame"})


def make_door(application: CodemojexApp, *, webhook: bool) -> Door:
    """The door; a webhook process's gives back what Redis cannot keep, and checks each update
    against every process's parked ones (several webhook processes share one bot)."""
    services = application.bot_data
    config = services.config
    return Door(
        application,
        Inbox(services.redis, services.lanes.queue),
        door_hooks(services, application.bot),
        key_of=functools.partial(order_key, chat_ordered=CHAT_ORDERED),
        concurrency=config.bot_concurrency,
        deadline_s=config.bot_update_deadline_s,
        give_back=webhook,
        peers=webhook,
    )


@asynccontextmanager
async def running(
    application: CodemojexApp,
    *,
    webhook: bool = False,
    poll_timeout: float = POLL_TIMEOUT_S,
    stop_s: float = STOP_S,
    stop: asyncio.Event | None = None,
) -> AsyncIterator[Front]:
    """Run the bot inside the caller's event loop: our polling loop (codemojex.bot.polling,
    which says why not PTB's Updater) or our webhook server (codemojex.bot.webhook), each
    handing updates to the door (codemojex.bot.door) and confirming an update to Telegram
    only once the door settled it (finished, parked in Redis, or a dead letter). At most
    `config.bot_in_hand` updates are unsettled: a backlog waits at Telegram.

    With `webhook`, the webhook settings are checked (a strong secret) before anything starts,
    and Telegram is told the URL, the secret and max_connections (the same bound) once the
    server listens. Polling, only the process holding the bot's poller lease fetches; another
    waits (`Front.standby`). Leaving the context stops taking updates, finishes those in hand
    within `stop_s` and confirms what was settled. `stop` is set when the bot cannot go on
    (polling found its token rejected); leaving then raises that error. The first Bot API call
    (getMe) raises telegram.error.InvalidToken, whose message holds the token, when Telegram
    rejects it: codemojex.bot.main turns that into a message without it."""
    config = application.bot_data.config
    hook = config.webhook() if webhook else None
    server: WebhookServer | None = None
    poller: Poller | None = None
    relay: asyncio.Task[None] | None = None
    await application.initialize()
    door = make_door(application, webhook=webhook)
    if hook is not None:
        server = WebhookServer(hook, door, in_hand=config.bot_in_hand, stop_s=stop_s)
    else:
        services = application.bot_data
        lease = PollerLease(services.redis, services.lanes.queue, application.bot.id)
        poller = Poller(
            application,
            door,
            lease,
            in_hand=config.bot_in_hand,
            timeout=poll_timeout,
            allowed_updates=ALLOWED_UPDATES,
            stop_s=stop_s,
            concurrency=config.bot_concurrency,
        )
    if application.post_init is not None:
        await application.post_init(application)
    try:
        await application.start()
        try:
            if server is not None:
                await server.start()
                await application.bot.set_webhook(
                    server.config.url,
                    secret_token=server.config.secret,
                    allowed_updates=ALLOWED_UPDATES,
                    max_connections=config.bot_in_hand,
                )
            elif poller is not None:
                await poller.start()
                if stop is not None:
                    relay = asyncio.get_running_loop().create_task(_stop_on_failure(poller, stop))
            yield Front(application, door, poller, server)
        finally:
            # No new updates (Telegram delivers them again later), those in hand finished
            # and confirmed, then what the handlers left running (application.stop()).
            if server is not None:
                await server.stop()
            if poller is not None:
                await poller.stop()
            if relay is not None:
                relay.cancel()
            await application.stop()
            await application.bot_data.answers.close()
            # The group members noted in the last moments, written before Redis is let go.
            await application.bot_data.members.close()
        if poller is not None and poller.failure is not None:
            raise poller.failure
    finally:
        if server is not None:
            await server.stop()  # again after a failed start: cleanup() is idempotent
        await application.shutdown()


async def _stop_on_failure(poller: Poller, stop: asyncio.Event) -> None:
    await poller.stopped.wait()
    if poller.failure is not None:
        stop.set()
