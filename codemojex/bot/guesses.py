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

No SQL on a guess's path: the guess is parsed against the room's open round as its card
says it (codemojex.state.cards; this process's memory of it first, bot/cards.py), and
enqueued with one script call for every guess of the event-loop turn (bot/intake.py) that
checks atomically that the round is still the room's open round, that the player is not
banned, that the lane is the player's seat (a new player's id is minted here and fixed there,
first writer wins), that the lane has room, and dedupes; the room's ceiling is set on the way
when the lanes lost it. Whatever the answer is other than "taken", it is decided on the card
as Redis has it now, never on this process's memory: several bot processes answer alike.

A guess's job id is derived from its origin (`origin_of`: the chat and message, with the
message's date; a tapped one's callback query id, bot/taps.py), so an update delivered twice
(after a kill, Telegram sends again whatever it was not confirmed) makes the same job id: the
lanes answer "duplicate" while the first job lives, and afterwards the guesses' primary key
(the guess id is the job id) makes the worker record it once and answer it once, even when
Redis lost its data in between. No dedupe key is stored beside the job: the job hash is one.

A private chat with the bot is a room too, where the daily code is played (its round opened
by /daily, bot/daily.py): every message there is addressed to the bot, so a message that is a
guess by the plain-message rule is taken, and refused with a reason when it is no valid one.
With no daily running there (or the one there past its midnight), a guess is told to send
/daily, or, the player's daily of today being over, to come back tomorrow: decided on the world
board in Redis (`DailyBoard.standing`), with no SQL either.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Final, Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Chat, Message, User
from telegram.constants import ChatType

from codemojex.bot.cards import Cards
from codemojex.bot.intake import Intake
from codemojex.bot.language import room_language, user_language
from codemojex.bot.names import display_name, room_title, topic_of
from codemojex.bot.order import Behind, order_guard
from codemojex.bot.replies import Answers
from codemojex.game import daily, texts
from codemojex.lanes import Admission, Admitted, LaneError
from codemojex.locale import Lang
from codemojex.scoring import (
    MAX_GUESS_CHARS,
    MAX_LENGTH,
    MIN_LENGTH,
    InvalidGuess,
    exact_guess,
    parse_guess,
)
from codemojex.scoring.emoji import clusters, is_emoji
from codemojex.state.board import DailyBoard
from codemojex.state.cards import ORDER_GUARD, SEAT_GUARD, Card, CardBusy, CardRead
from codemojex.state.flags import FloodNotices
from codemojex.state.keys import Notice
from codemojex.values import ids
from codemojex.values.jobs import GuessJob

log = logging.getLogger(__name__)
# A guess's attempts in its lane: every lease it loses spends one (a worker killed, a Redis
# restart); recording it again costs nothing, while a dead-lettered guess is a lost guess.
GUESS_ATTEMPTS: Final = 25

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
    PRIVATE = "private"  # a message in a private chat (the daily's)


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


def origin_of(message: Message) -> str:
    """What a typed guess's job id is derived from: its chat and message id (unique for ever on
    Telegram) and the message's date, which a redelivered update carries unchanged; the date
    keeps apart the messages of a Bot API stand-in started again over the same database (its
    message ids start again from 1)."""
    return f"m:{message.chat.id}:{message.message_id}:{int(message.date.timestamp())}"


# A guess is tried against what this process remembers, then against Redis's card; the card
# changing under it again (a round ending twice in a row) is answered "try again".
_TRIES = 3


class Guesses:
    """The guess intake: from a message, or a tapped code, to a job in the player's lane (see
    the module docstring), and the answer that says what became of it. Built from what it
    uses: the cards, the batched enqueue, the answers, the flood notices, the daily's world
    board (with the session maker that rebuilds it), the daily's clock, the lanes' depth."""

    def __init__(
        self,
        *,
        cards: Cards,
        intake: Intake,
        answers: Answers,
        flood: FloodNotices,
        board: DailyBoard,
        sessionmaker: async_sessionmaker[AsyncSession],
        clock: Callable[[], datetime],
        max_depth: int,
        outcomes: Counter[str],
    ) -> None:
        self._cards = cards
        self._shared = cards.shared
        self._ceiling = cards.defaults.ceiling
        self._intake = intake
        self._answers = answers
        self._flood = flood
        self._board = board
        self._sessionmaker = sessionmaker
        self._clock = clock
        self._max_depth = max_depth
        # What became of the guesses this process was sent, by outcome (`Outcome`): the
        # demo's summary and the bot's metrics read it.
        self.outcomes = outcomes

    async def submit(self, message: Message, user: User, text: str, source: Source) -> GuessAnswer:
        """Validate `text` against the room's open round and enqueue it into the player's
        lane."""
        explicit = source is not Source.PLAIN
        filtered = source in (Source.PLAIN, Source.PRIVATE)  # the plain-message rule applies
        chat, thread_id = message.chat, topic_of(message)
        # A guess typed exactly in the palette of the round this process knows is one,
        # whatever the plain-message rule would say: the rule is only read for what is not.
        card = self._cards.known(chat.id, thread_id)
        rnd = card.round if card is not None else None
        exact = None if rnd is None else exact_guess(text, rnd.emojis, rnd.length)
        if filtered and exact is None and not looks_like_guess(text):
            return GuessAnswer("ignored")
        return await self.take(
            chat,
            thread_id,
            user,
            text,
            explicit=explicit,
            message_id=message.message_id,
            origin=origin_of(message),
            exact=None if exact is None or rnd is None else (rnd.id, exact),
        )

    async def take(
        self,
        chat: Chat,
        thread_id: int,
        user: User,
        text: str,
        *,
        explicit: bool,
        message_id: int,
        origin: str,
        round_id: int | None = None,
        exact: tuple[int, tuple[str, ...]] | None = None,
    ) -> GuessAnswer:
        """Parse `text` for the room's open round and enqueue it (see the module docstring).
        With `round_id` the guess is for that round only (a tapped one): any other is
        "no_round". `exact`: the caller already found it spelled exactly in the palette of
        this round. `origin`: the update it came from, one job id per origin (see the module
        docstring)."""
        read: CardRead | None = None  # Redis's card, once read for this guess
        card = self._cards.known(chat.id, thread_id)
        if card is not None and card.title != room_title(chat):
            card = None  # renamed: the room's title is written anew on the way
        for _ in range(_TRIES):
            private = chat.type == ChatType.PRIVATE
            if card is None:
                read = await self._cards.for_guess(chat, thread_id, user)
                card = read.card
                if card is None:  # a private chat where /daily was never sent
                    return GuessAnswer("no_round", texts.daily_send_first(user_language(user)))
            lang = room_language(card, user)
            rnd = card.round
            if private and rnd is not None and rnd.expires_at <= self._clock():
                rnd = None  # yesterday's daily, which the workers' round timer has yet to close
            if rnd is None or (round_id is not None and rnd.id != round_id):
                if read is None:
                    card = None  # this process may be behind: ask Redis before refusing
                    continue
                if private and round_id is None:
                    return GuessAnswer("no_round", await self._no_daily(lang, user))
                return GuessAnswer("no_round", texts.no_round(lang) if explicit else None)
            try:
                if exact is not None and exact[0] == rnd.id:
                    emojis = exact[1]
                else:
                    emojis = exact_guess(text, rnd.emojis, rnd.length) or parse_guess(
                        text, rnd.palette, rnd.length
                    )
            except InvalidGuess as exc:
                if read is None:
                    card = None
                    continue
                return GuessAnswer("invalid", texts.guess_refused(lang, exc))
            if read is not None and read.banned:
                return GuessAnswer("banned", texts.banned(lang))
            answer = await self._enqueue(card, rnd.id, user, emojis, message_id, origin)
            if answer is not None:
                return answer
            card, read = None, None  # the card moved under the guess: read it anew
        raise CardBusy(chat.id)

    async def tell(self, message: Message, outcome: GuessAnswer) -> None:
        """Send the outcome's reply. A once-per-episode notice that could not be sent (the
        chat was at its pace) is not spent: the next occasion in the episode tries again."""
        self.outcomes[outcome.outcome] += 1
        if outcome.reply is None:
            return
        notice, lane = outcome.notice, outcome.lane
        if notice is None or lane is None:
            await self._answers.answer(message, outcome.reply)
            return
        flood = self._flood

        async def unspent() -> None:
            await flood.forget(lane, notice)

        await self._answers.answer(message, outcome.reply, on_dropped=unspent)

    async def _no_daily(self, lang: Lang, user: User) -> str:
        """What a guess in a private chat with no daily running is told: to come back
        tomorrow when the player's daily of today is over (on the world board), else to send
        /daily."""
        now = self._clock()
        day = daily.day_of(now)
        board = self._board
        await board.ensure(day, self._sessionmaker)  # one EXISTS; rebuilt when Redis lost it
        if (await board.standing(day, user.id)).finished:
            return texts.daily_come_back(lang, daily.seconds_to_next(now))
        return texts.daily_send_first(lang)

    async def _enqueue(
        self,
        card: Card,
        round_id: int,
        user: User,
        emojis: tuple[str, ...],
        message_id: int,
        origin: str,
    ) -> GuessAnswer | None:
        """Into the player's lane, under the checks of the card; None when the card refused
        it (the round, the ban or the seat moved): the caller reads the card anew."""
        room_id = card.room_id
        cards, shared = self._cards, self._shared
        name = display_name(user)
        job_id = ids.derived(ids.JOB, origin)
        # Webhook: no older update of its key may be parked by another process (bot/order.py),
        # checked in the admission itself, the call a guess makes anyway.
        guard = order_guard()
        order = () if guard is None else (shared.order_guard(*guard),)
        for _ in range(2):
            seen = cards.seat(room_id, user.id)
            player_id = seen.player_id if seen is not None else ids.mint(ids.PLAYER)
            job = GuessJob(
                round_id,
                message_id,
                emojis,
                user_id=user.id,
                # A name travels when this process has not sent it yet (first sight, or
                # changed).
                name=None if seen is not None and seen.name == name else name,
            )
            admitted = await self._intake.admit(
                Admission(
                    room_id,
                    player_id,
                    job.encode(),
                    max_attempts=GUESS_ATTEMPTS,
                    max_depth=self._max_depth,
                    job_id=job_id,
                    guards=(*shared.guards(room_id, round_id, user.id, player_id), *order),
                    ceiling=self._ceiling,
                    ceiling_from=shared.ceiling_source(room_id),
                    notes=()
                    if job.name is None
                    else (shared.name_note(room_id, player_id, job.name),),
                )
            )
            if admitted.status == "refused" and admitted.guard == SEAT_GUARD and admitted.found:
                # The user has a seat this process did not know: their lane is that one.
                cards.keep_seat(room_id, user.id, admitted.found, None)
                continue
            if admitted.status == "refused" and admitted.guard == ORDER_GUARD:
                raise Behind(admitted.found)
            if admitted.status == "refused":
                return None
            if admitted.status == "error":
                raise LaneError(admitted.error or "refused by the lanes")
            if admitted.status == "full":  # the seat is the user's (the guards passed), unnamed
                cards.keep_seat(room_id, user.id, player_id, seen.name if seen else None)
                return await self._slow_down(card, user, player_id, job_id)
            if admitted.status == "duplicate":
                # The same update again (its job id is derived from it): answered the first
                # time. It passed no guard: `player_id` may be one minted here, never the
                # user's seat.
                return GuessAnswer("enqueued", None, admitted.job_id)
            cards.keep_seat(room_id, user.id, player_id, name)
            return await self._taken(card, user, player_id, admitted)
        return None

    async def _slow_down(self, card: Card, user: User, player_id: str, job_id: str) -> GuessAnswer:
        """A full lane: "slow down", once per flood episode (and again to the same guess
        tried again)."""
        if not await self._flood.first_of_episode(player_id, update=job_id):
            return GuessAnswer("flood")
        lang = await self._language_now(card, user)
        return GuessAnswer("flood", texts.slow_down(lang), notice="flood", lane=player_id)

    async def _taken(
        self, card: Card, user: User, player_id: str, admitted: Admitted
    ) -> GuessAnswer:
        """Taken. A paused room keeps guesses: say why no result comes (once per player per
        episode)."""
        if admitted.paused and await self._flood.first_of_episode(
            player_id, "paused", update=admitted.job_id or ""
        ):
            lang = await self._language_now(card, user)
            return GuessAnswer(
                "enqueued",
                texts.scoring_paused_note(lang),
                admitted.job_id,
                notice="paused",
                lane=player_id,
            )
        return GuessAnswer("enqueued", None, admitted.job_id)

    async def _language_now(self, card: Card, user: User) -> Lang:
        """The room's language as its card in Redis says it now (a notice is rare: one
        read)."""
        read = await self._shared.read(card.chat_id, card.thread_id, room_id=card.room_id)
        return room_language(read.card or card, user)
