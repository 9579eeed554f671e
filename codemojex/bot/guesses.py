"""From a message to a job in the player's lane: the bot's half of a guess.

Which messages are guess attempts (the rule, documented in the README of the bot):

* `/g <emojis>` always is: an invalid one gets the reason.
* A reply to one of the bot's own messages (the round announcement, a result) while a round
  is open always is: replying to the bot is addressing it.
* Any other plain group message is one only when it is made of emojis alone (spaces and
  invisible marks between them allowed) and has from `MIN_PLAIN_EMOJIS` (3, the shortest
  code) to `MAX_PLAIN_EMOJIS` (6, the longest) of them. Words, a lone 👍, a 😂😂 or a wall of
  emojis are chat: ignored, never answered, and they cost no storage round trip. Without an
  open round, plain messages are ignored too.

Validation happens before anything is written to Redis: an invalid guess gets a short reason
and is never enqueued. The enqueue carries a dedupe key built from the chat and message ids,
so an update processed twice makes one guess. A guess tapped on the round message's keyboard
(bot/taps.py) goes through the same `load_context`, `check_guess` and `enqueue_guess`,
deduplicated by its callback query id.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession
from telegram import Chat, Message, User

from codemojex import limits
from codemojex.bot.context import BotServices
from codemojex.bot.incoming import topic_of
from codemojex.bot.language import room_language
from codemojex.bot.replies import answer
from codemojex.bot.rooms import apply_ceiling, display_name, ensure_room, room_title
from codemojex.db import store
from codemojex.game import texts
from codemojex.jobs import GuessJob
from codemojex.lanes import LaneFull
from codemojex.locale import Lang
from codemojex.posting.flags import Notice
from codemojex.scoring import MAX_GUESS_CHARS, MAX_LENGTH, MIN_LENGTH, InvalidGuess, parse_guess
from codemojex.scoring.emoji import clusters, is_emoji

log = logging.getLogger(__name__)

# Fewer emojis than the shortest code in a plain message is a reaction, not a guess; more than
# the longest code is an emoji wall. The scan stops there, so the work per message is bounded
# whatever its length (splitting a run of flags into graphemes costs the square of its length:
# 80 ms for the 4,096 regional indicators of one message, all of it blocking the event loop).
MIN_PLAIN_EMOJIS = MIN_LENGTH
MAX_PLAIN_EMOJIS = MAX_LENGTH


class Source(Enum):
    COMMAND = "command"  # /g <emojis>
    REPLY = "reply"  # a reply to one of the bot's messages
    PLAIN = "plain"  # any other group message


# What became of a message taken for a guess (counted per process, e.g. by the demo):
# enqueued: a new job, or the same update seen again (deduplicated); ignored: chat, not a
# guess (no answer); no_round, invalid, banned: refused with a reason; flood: the lane is full.
Outcome = Literal["enqueued", "ignored", "no_round", "invalid", "banned", "flood"]


@dataclass(frozen=True, slots=True)
class GuessAnswer:
    """The bot's answer to one guess message: what became of it, and what to tell the player."""

    outcome: Outcome
    reply: str | None = None  # what to tell the player, None = say nothing
    job_id: str | None = None
    notice: Notice | None = None  # the reply is this once-per-episode notice of `lane`
    lane: str | None = None


def looks_like_guess(text: str) -> bool:
    """The plain-message rule: emojis alone (separators allowed), MIN_PLAIN_EMOJIS to
    MAX_PLAIN_EMOJIS of them.

    Decided before any storage is touched, so group chatter costs no database round trip, and
    from at most MAX_PLAIN_EMOJIS + 1 grapheme clusters, so no message costs more than that."""
    count = 0
    for cluster in clusters(text[: MAX_GUESS_CHARS + 1]):
        if not is_emoji(cluster) or count == MAX_PLAIN_EMOJIS:
            return False
        count += 1
    return count >= MIN_PLAIN_EMOJIS


async def submit_guess(
    services: BotServices, message: Message, user: User, text: str, source: Source
) -> GuessAnswer:
    """Validate `text` against the room's open round and enqueue it into the player's lane."""
    explicit = source is not Source.PLAIN
    if not explicit and not looks_like_guess(text):
        return GuessAnswer("ignored")
    chat = message.chat
    async with services.sessionmaker() as session:
        ctx = await load_context(services, session, chat, topic_of(message), user)
        checked = await check_guess(services, session, ctx, user, text, explicit=explicit)
    if isinstance(checked, GuessAnswer):
        return checked
    return await enqueue_guess(
        services,
        checked,
        message_id=message.message_id,
        dedupe_key=f"{chat.id}:{message.message_id}",
    )


async def load_context(
    services: BotServices, session: AsyncSession, chat: Chat, thread_id: int, user: User
) -> store.GuessContext:
    """The room of the chat (and forum topic), its open round, the user's player and ban: one
    query, and the room created (or renamed) on the slow path."""
    ctx = await store.guess_context(session, chat.id, user.id, thread_id)
    title = room_title(chat)
    if ctx is None or (title and ctx.room.title != title):
        # First sight of the chat, or a new title: the slow path creates or renames it.
        await ensure_room(services, session, chat, thread_id)
        ctx = await store.guess_context(session, chat.id, user.id, thread_id)
        assert ctx is not None  # ensure_room just made sure of it
    await apply_ceiling(services, ctx.room)
    return ctx


@dataclass(frozen=True, slots=True)
class Checked:
    """A guess that may be enqueued: valid for the open round, from a player not banned."""

    room_id: str
    player_id: str
    round_id: int
    emojis: tuple[str, ...]
    lang: Lang


async def check_guess(
    services: BotServices,
    session: AsyncSession,
    ctx: store.GuessContext,
    user: User,
    text: str,
    *,
    explicit: bool,
) -> GuessAnswer | Checked:
    """Everything a guess must pass before it is written to Redis (typed or tapped alike): an
    open round, a valid guess, a player who is not banned. The player is created on their
    first guess."""
    room = ctx.room
    lang = room_language(room, user)
    round_ = ctx.open_round
    if round_ is None:
        return GuessAnswer("no_round", texts.no_round(lang) if explicit else None)
    try:
        emojis = parse_guess(text, round_.palette_emojis, round_.length)
    except InvalidGuess as exc:
        return GuessAnswer("invalid", texts.guess_refused(lang, exc))
    if ctx.banned:
        return GuessAnswer("banned", texts.banned(lang))
    name = display_name(user)
    player = ctx.player
    if player is None or (name and player.display_name != name):
        player = await store.ensure_player(session, room.id, user.id, name)
    return Checked(room.id, player.id, round_.id, emojis, lang)


async def enqueue_guess(
    services: BotServices, guess: Checked, *, message_id: int, dedupe_key: str
) -> GuessAnswer:
    """Into the player's lane, under the room's ceiling, deduplicated by `dedupe_key`;
    "slow down" (once per episode) when the lane is full. `message_id` is the guess message
    the result replies to (0: none, a tapped guess)."""
    lang = guess.lang
    job = GuessJob(round_id=guess.round_id, message_id=message_id, emojis=guess.emojis)
    try:
        job_id = await services.lanes.enqueue(
            guess.room_id,
            guess.player_id,
            job.encode(),
            max_attempts=limits.GUESS_MAX_ATTEMPTS,
            max_depth=services.max_depth,
            dedupe_key=dedupe_key,
        )
    except LaneFull:
        first = await services.flood.first_of_episode(guess.player_id)
        if not first:
            return GuessAnswer("flood")
        return GuessAnswer("flood", texts.slow_down(lang), notice="flood", lane=guess.player_id)
    # A paused room keeps guesses; say why no result comes (once per player per episode).
    paused = await services.lanes.is_paused(guess.room_id)
    if paused and await services.flood.first_of_episode(guess.player_id, "paused"):
        return GuessAnswer(
            "enqueued",
            texts.scoring_paused_note(lang),
            job_id,
            notice="paused",
            lane=guess.player_id,
        )
    return GuessAnswer("enqueued", None, job_id)


async def tell(services: BotServices, message: Message, outcome: GuessAnswer) -> None:
    """Send the outcome's reply. A once-per-episode notice that could not be sent (the chat was
    at its pace) is not spent: the next occasion in the episode tries again."""
    services.guess_outcomes[outcome.outcome] += 1
    if outcome.reply is None:
        return
    notice, lane = outcome.notice, outcome.lane
    if notice is None or lane is None:
        await answer(services, message, outcome.reply)
        return

    async def unspent() -> None:
        await services.flood.forget(lane, notice)

    await answer(services, message, outcome.reply, on_dropped=unspent)
