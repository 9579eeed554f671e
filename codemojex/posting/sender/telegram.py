"""The Telegram call: one message carried out, and what its answer means (an `Outcome`).

A post is bounded (`timeout_s`, well inside the chat lease and the row claim, so nobody else can
have taken the chat or its rows while it is in flight) and its pace slot is settled at once,
answered or not (until then it counts as in flight in the bot's second). Then:

- accepted: `Outcome.SENT`, with the message id;
- a 429 (RetryAfter): `NOT_SENT`, and the shared pace is told (`Pacer.refused`): the chat is
  blocked for the wait Telegram asked for when its own pace or its group's explains the 429,
  else the whole bot is, and its learned rate cut (every sender honours both);
- refused for good (BadRequest, Forbidden, ChatMigrated: the bot was kicked, the chat is gone,
  the text is refused): `REFUSED`;
- failed in a way that proves it did not go out (a refused connection, a connect or pool
  timeout, an error answer): `NOT_SENT`, the chat paused for a second or two;
- failed in a way that leaves it unknown (a read timeout, a connection dropped after the
  request went out, our own timeout): `MAYBE_SENT`. What to do then is the ambiguous-delivery
  rule (delivery.py), not this module's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from dataclasses import dataclass
from enum import Enum
from typing import Final

import aiohttp
import httpx
from telegram import Bot, InlineKeyboardMarkup
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from codemojex.outages import OUTAGES, retry_after_ms
from codemojex.posting.fold import OutMessage
from codemojex.posting.pace_policy import Grant
from codemojex.posting.pacer import Pacer
from codemojex.posting.sender.stats import SenderStats

log = logging.getLogger(__name__)


class Outcome(Enum):
    SENT = "sent"  # Telegram accepted it
    REFUSED = "refused"  # never will: its rows are done, with no message id
    NOT_SENT = "not_sent"  # known not to have gone out: its rows go out later
    MAYBE_SENT = "maybe_sent"  # may or may not have gone out (delivery.py decides)


@dataclass(frozen=True, slots=True)
class Answer:
    outcome: Outcome
    message_id: int = 0  # SENT: the message posted or edited (0: none, a keys_off with none)


# What a Bot API client raises when a request never left: no connection was made (refused,
# no route, a name not resolved, a certificate refused), or none was free in time. aiohttp's
# (posting/request.py, the sender's and the worker's) and httpx's (python-telegram-bot's own).
NOT_SENT_CAUSES: Final = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)


def maybe_delivered(exc: NetworkError) -> bool:
    """Whether Telegram may have carried out a post that failed with `exc`.

    An answer with an error status, a refused connection, a connect timeout or no free
    connection in the pool mean the request was not carried out. A read timeout or a
    connection dropped after the request went out leave it unknown."""
    if isinstance(exc, BadRequest):
        return False
    cause = exc.__cause__
    if cause is None:
        return False
    return not isinstance(cause, NOT_SENT_CAUSES)


async def post(bot: Bot, chat_id: int, msg: OutMessage) -> int:
    """Carry out one message: a post (in its forum topic, with its keyboard), or the removal
    of a round's keyboard (`keys_off`: an edit of message `reply_to`, nothing when the
    announcement was never posted). The id of the message posted or edited (0: none)."""
    if msg.keys_off:
        if msg.reply_to is None:
            return 0
        await bot.edit_message_reply_markup(chat_id=chat_id, message_id=msg.reply_to)
        return msg.reply_to
    markup = None
    if msg.markup is not None:
        markup = InlineKeyboardMarkup.de_json(json.loads(msg.markup), bot)
    sent = await bot.send_message(
        chat_id=chat_id,
        text=msg.text,
        message_thread_id=msg.thread_id,
        reply_to_message_id=msg.reply_to,
        allow_sending_without_reply=True if msg.reply_to is not None else None,
        reply_markup=markup,
    )
    return int(sent.message_id)


# After a post that failed (no 429) the chat waits this plus up to as long again, at random.
FAILED_POST_PAUSE_MS: Final = 1000


def failed_post_pause_ms() -> int:
    """How long a chat waits after a post that failed (no 429): a second or two, at random,
    so that chats that failed together do not come back together."""
    return FAILED_POST_PAUSE_MS + random.randint(0, FAILED_POST_PAUSE_MS)


class Poster:
    """Carries out one message under a pace grant and says what came of it."""

    def __init__(
        self, bot: Bot, pacer: Pacer, stats: SenderStats, timeout_s: float, in_flight: int
    ) -> None:
        self._bot = bot
        self._pacer = pacer
        self._stats = stats
        self._timeout_s = timeout_s
        # At most as many posts on the wire as the Bot API pool has connections: a post
        # queued inside httpcore's pool costs CPU on every other request (its pool scans its
        # waiting requests against its connections: 256 chats in hand on 256 connections
        # spent most of a sender's CPU there), one waiting here costs nothing.
        self._wire = asyncio.Semaphore(in_flight)

    async def settle(self, grant: Grant) -> None:
        """The grant's post is answered, or will not be made: the pace measures from now."""
        try:
            await self._pacer.settle(grant)
        except (
            Exception
        ) as exc:  # the grant stops counting as in flight after pace_policy.FLIGHT_MS
            OUTAGES.swallow(exc, "the outbox sender", "a pace slot not settled")

    async def attempt(self, chat_id: int, msg: OutMessage, grant: Grant) -> Answer:
        try:
            try:
                async with self._wire:
                    sent = await asyncio.wait_for(post(self._bot, chat_id, msg), self._timeout_s)
            except RetryAfter as exc:
                # Told before the settle: a refused post leaves the bot's second at once (were
                # it settled first, it would count as taken by Telegram to the cut of another
                # 429 answered meanwhile).
                wait_ms = retry_after_ms(exc)
                cause = await self._pacer.refused(grant, wait_ms)
                log.info("429 for chat %d (%s's pace): waiting %d ms", chat_id, cause, wait_ms)
                raise
            finally:
                await self.settle(grant)
        except RetryAfter:
            self._stats.retry_after += 1
            return Answer(Outcome.NOT_SENT)
        except (BadRequest, Forbidden, ChatMigrated) as exc:
            log.warning("chat %d refused a message: %s", chat_id, type(exc).__name__)
            return Answer(Outcome.REFUSED)
        except (TimedOut, NetworkError, TimeoutError) as exc:
            self._stats.errors += 1
            if isinstance(exc, TimeoutError) or maybe_delivered(exc):
                self._stats.ambiguous += 1
                return Answer(Outcome.MAYBE_SENT)
            return await self._not_sent(chat_id, exc)
        except TelegramError as exc:
            self._stats.errors += 1
            return await self._not_sent(chat_id, exc)
        return Answer(Outcome.SENT, sent)

    async def _not_sent(self, chat_id: int, exc: Exception) -> Answer:
        log.warning("posting to chat %d failed (%s); retrying", chat_id, type(exc).__name__)
        await self._pacer.block_chat(chat_id, failed_post_pause_ms())
        return Answer(Outcome.NOT_SENT)
