"""The typed context every handler receives: services as attributes, never string lookups.

python-telegram-bot builds `bot_data` by calling the type given to `ContextTypes` with no
arguments, so `bound_services_type` makes a one-off subclass whose constructor hands back
copies of the fields of the services built by `build_application`. Handlers then reach
`context.services.lanes`, `context.services.sessionmaker`, ... fully typed.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram.ext import Application, CallbackContext, ExtBot

from codemojex.bot import admin, door
from codemojex.bot.admin import AdminCache
from codemojex.bot.cards import Cards
from codemojex.bot.drafts import Drafts
from codemojex.bot.guesses import Guesses
from codemojex.bot.inline import InlineQueries
from codemojex.bot.intake import Intake
from codemojex.bot.members import Members
from codemojex.bot.once import CommandMarks
from codemojex.bot.replies import Answers
from codemojex.bot.webhook import WebhookConfig, webhook_config
from codemojex.lanes import Lanes, admission, facade
from codemojex.limits import ROOM
from codemojex.posting.pace_policy import PacePolicy
from codemojex.posting.ring import PostingRing
from codemojex.state import budget
from codemojex.state.board import DailyBoard
from codemojex.values.botapi import BotApi
from codemojex.values.clock import utcnow
from codemojex.values.redistypes import AnyRedis


@dataclass(frozen=True, slots=True, kw_only=True)
class BotConfig:
    """What the bot is built from (the composition root unpacks the settings into it, each
    field the CODEMOJEX_ setting of its name): the Bot API and the token, the operators, the
    webhook (no URL: polling), the answers' pace (`PacePolicy.from_rates(..., answers=True)`),
    the new rooms' defaults, the limits on players and admins, the front door's and whether
    inline mode is on."""

    api: BotApi
    operator_ids: Collection[int]
    webhook_url: str | None
    webhook_secret: SecretStr | None
    webhook_listen: str
    webhook_port: int
    inline_mode: bool
    pace: PacePolicy = field(default_factory=lambda: PacePolicy.from_rates(answers=True))
    default_ceiling: int = ROOM.ceiling_default
    round_timeout_s: int = ROOM.round_timeout_s_default
    max_depth: int = admission.DEPTH
    answer_budget: int = budget.BUDGET
    admin_cache_ttl_s: float = admin.TTL_S
    bot_concurrency: int = door.CONCURRENCY
    bot_in_hand: int = door.IN_HAND
    bot_update_deadline_s: float = door.DEADLINE_S
    dedupe_window_s: int = facade.DEDUPE_WINDOW_S

    def webhook(self) -> WebhookConfig:
        """The webhook this bot serves; WeakWebhook when there is no URL or no strong secret."""
        return webhook_config(
            self.webhook_url,
            self.webhook_secret,
            listen=self.webhook_listen,
            port=self.webhook_port,
        )


@dataclass
class BotServices:
    """What the handlers use, built once by `app.make_services`. Only the handlers (and
    their toolkit, incoming.py) read it: everything below them is built from, and given, the
    parts it needs."""

    config: BotConfig
    lanes: Lanes
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: AnyRedis
    admins: AdminCache
    # The bot's own answers: each member's budget, the pace shared with the worker's outbox
    # sender, and the answers waiting for it off the update path (bot/replies.py).
    answers: Answers
    # The rooms' cards as this process uses them: this process's memory of them, the cards in
    # Redis (`cards.shared`), the rooms on first sight (bot/cards.py).
    cards: Cards
    # The guess intake (bot/guesses.py) and its batched enqueue (one script call per
    # event-loop turn: bot/intake.py; its counters are read by the tests and the demo).
    guesses: Guesses
    intake: Intake
    # Tap to guess: drafts, tap rate, callback queries seen (bot/taps.py).
    drafts: Drafts
    # The posting ring: the bot adds the chats it wrote outbox rows for (a round's
    # announcement or reveal), so that a sender posts them at once.
    ring: PostingRing
    # How many inline queries each user gets answered (the Share button's; bot/inline.py).
    inline: InlineQueries
    # Commands run once per message, however often Telegram delivers it (bot/once.py).
    commands: CommandMarks
    # Who the bot saw in each group (the daily's group board; bot/members.py).
    members: Members
    # The daily code's world board in Redis (state/board.py).
    board: DailyBoard
    # Now, in UTC, as the daily code reads it (which day's code, when the next comes, a
    # private chat's round past its midnight): tests pass their own to play over midnight.
    clock: Callable[[], datetime] = utcnow
    # Secrets of new rounds are drawn from this; tests may seed their own.
    rng: random.Random = field(default_factory=random.SystemRandom)


def bound_services_type(services: BotServices) -> type[BotServices]:
    """A subclass of BotServices whose no-argument constructor yields `services`' fields."""
    values = {f.name: getattr(services, f.name) for f in dataclasses.fields(services)}

    class BoundServices(BotServices):
        def __init__(self) -> None:
            super().__init__(**values)

    return BoundServices


class CodemojexContext(CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], BotServices]):
    @property
    def services(self) -> BotServices:
        return self.bot_data


CodemojexApp = Application[
    ExtBot[None], CodemojexContext, dict[Any, Any], dict[Any, Any], BotServices, None
]
