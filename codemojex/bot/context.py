"""The typed context every handler receives: services as attributes, never string lookups.

python-telegram-bot builds `bot_data` by calling the type given to `ContextTypes` with no
arguments, so `bound_services_type` makes a one-off subclass whose constructor hands back
copies of the fields of the services built by `build_application`. Handlers then reach
`context.services.lanes`, `context.services.sessionmaker`, ... fully typed.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram.ext import Application, CallbackContext, ExtBot

from codemojex.bot.admin import AdminCache
from codemojex.bot.cards import CardCache, Loads
from codemojex.bot.drafts import Drafts
from codemojex.bot.inline import InlineQueries
from codemojex.bot.intake import Intake
from codemojex.bot.once import CommandMarks
from codemojex.bot.replies import Answers
from codemojex.db.models import utcnow
from codemojex.lanes import Lanes
from codemojex.limits import DEPTH_DEFAULT, REPLY_WAIT_S_DEFAULT
from codemojex.posting.budget import AnswerBudget
from codemojex.posting.cards import RoomCards
from codemojex.posting.flags import FloodNotices
from codemojex.posting.members import GroupMembers
from codemojex.posting.pacer import Pacer
from codemojex.posting.ring import PostingRing
from codemojex.redistypes import AnyRedis
from codemojex.settings import Settings


@dataclass
class BotServices:
    settings: Settings
    lanes: Lanes
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: AnyRedis
    admins: AdminCache
    flood: FloodNotices
    # Posting pace shared with the worker's outbox sender (see replies.answer).
    pacer: Pacer
    # How many answers each member gets in each chat (see replies.answer).
    budget: AnswerBudget
    # Tap to guess: drafts, tap rate, callback queries seen (bot/taps.py).
    drafts: Drafts
    # The posting ring: the bot adds the chats it wrote outbox rows for (a round's announcement
    # or reveal), so that a sender posts them at once.
    ring: PostingRing
    # The rooms' cards in Redis (what a guess needs; posting/cards.py) and the guesses'
    # batched enqueue (one script call per event-loop turn: bot/intake.py).
    cards: RoomCards
    intake: Intake
    # How many inline queries each user gets answered (the Share button's; bot/inline.py).
    inline: InlineQueries
    # Commands run once per message, however often Telegram delivers it (bot/once.py).
    commands: CommandMarks
    # Who the bot saw in each group (the daily's group board; bot/members.py).
    members: GroupMembers
    # What this process remembers of the cards (a hint the enqueue checks) and its loads of
    # them from the database, one per chat at a time (bot/cards.py).
    card_cache: CardCache = field(default_factory=CardCache)
    loads: Loads = field(default_factory=Loads)
    # The answers waiting for their chat's pace, off the update path (replies.answer).
    answers: Answers = field(default_factory=Answers)
    # Now, in UTC, as the daily code reads it (which day's code, when the next comes, a
    # private chat's round past its midnight): tests pass their own to play over midnight.
    clock: Callable[[], datetime] = utcnow
    # Secrets of new rounds are drawn from this; tests may seed their own.
    rng: random.Random = field(default_factory=random.SystemRandom)
    # Most guesses a player may have waiting in their lane; more is a flood.
    max_depth: int = DEPTH_DEFAULT
    # How long an answer may wait for a posting slot before it is dropped (replies.answer).
    reply_wait_s: float = REPLY_WAIT_S_DEFAULT
    # What became of the guesses this process was sent, by outcome (guesses.Outcome values):
    # the demo's summary accounts for every guess with it.
    guess_outcomes: Counter[str] = field(default_factory=Counter)


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
