"""The typed context every handler receives: services as attributes, never string lookups.

python-telegram-bot builds `bot_data` by calling the type given to `ContextTypes` with no
arguments, so `bound_services_type` makes a one-off subclass whose constructor hands back
copies of the fields of the services built by `build_application`. Handlers then reach
`context.services.lanes`, `context.services.sessionmaker`, ... fully typed.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram.ext import Application, CallbackContext, ExtBot

from codemojex.bot.admin import AdminCache
from codemojex.bot.cards import Cards
from codemojex.bot.drafts import Drafts
from codemojex.bot.guesses import Guesses
from codemojex.bot.inline import InlineQueries
from codemojex.bot.intake import Intake
from codemojex.bot.members import Members
from codemojex.bot.once import CommandMarks
from codemojex.bot.replies import Answers
from codemojex.lanes import Lanes
from codemojex.posting.ring import PostingRing
from codemojex.state.board import DailyBoard
from codemojex.state.flags import CatchingUp
from codemojex.values.clock import utcnow
from codemojex.values.redistypes import AnyRedis

if TYPE_CHECKING:  # Settings sits above its readers: they take it, never build it
    from codemojex.settings import Settings


@dataclass
class BotServices:
    """What the handlers use, built once by `app.make_services`. Only the handlers (and
    their toolkit, incoming.py) read it: everything below them is built from, and given, the
    parts it needs."""

    settings: Settings
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
    # "Catching up" said once per member and chat per outage, in every process together
    # (state/flags.py).
    catching_up: CatchingUp
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
