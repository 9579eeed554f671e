"""The bot's own answers, paced with every other post of the bot.

Telegram allows about one message a second per chat, twenty a minute in a group and thirty a
second for the whole bot. The worker's outbox sender and the bot post into the same chats, so
both take their slots from the same `Pacer` (its state is in Redis, namespace = the queue). An
answer waits at most `reply_wait_s` for a slot (ANSWER_POLICY); past that the chat is busy
enough that a late answer helps nobody, and it is dropped (logged). A 429 blocks the chat for
everyone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable

from telegram import Message
from telegram.error import RetryAfter

from codemojex.bot.context import BotServices
from codemojex.limits import PACE_GROUP_PER_MIN
from codemojex.outages import is_outage, retry_after_ms
from codemojex.posting.pacer import Grant, PacePolicy, Window

log = logging.getLogger(__name__)

# The sender's windows, index for index (so the same Redis keys, the same pace), except that
# an answer is not held to the sender's smoothing of a group nor to its 16-a-minute share:
# only Telegram's own limits bind it (1 a second per chat, 20 a minute per group, 30 a second
# for the bot), so the 4 a minute the sender leaves free are the answers' own.
_SENDER = PacePolicy()
ANSWER_POLICY = PacePolicy(
    chat=_SENDER.chat,
    group=(
        _SENDER.group[0],
        Window(PACE_GROUP_PER_MIN, 15_000),
        Window(PACE_GROUP_PER_MIN, 60_000),
    ),
    bot=_SENDER.bot,
    margin_ms=_SENDER.margin_ms,
)


async def _unless_redis_is_out(call: Awaitable[None]) -> None:
    """Best effort: the pace is in Redis, and a Redis outage must not stop an answer."""
    try:
        await call
    except Exception as exc:
        if not is_outage(exc):
            raise


async def answer(services: BotServices, message: Message, text: str) -> Message | None:
    """Reply to `message` once the chat's pace allows; None when dropped.

    The pace lives in Redis: when Redis cannot be asked, the answer goes out unpaced (there is
    no shared pace to keep then, and the answer is often the "try again" about that outage)."""
    chat_id = message.chat_id
    pacer = services.pacer
    grant: Grant | None = None
    try:
        grant = await pacer.acquire(chat_id, deadline=time.monotonic() + services.reply_wait_s)
        if grant is None:
            log.info("chat %s is at its posting pace: an answer was dropped", chat_id)
            return None
    except Exception as exc:
        if not is_outage(exc):
            raise
        log.warning(
            "chat %s: pacer unavailable (%s), answering unpaced", chat_id, type(exc).__name__
        )
    try:
        return await message.reply_text(text)
    except RetryAfter as exc:
        await _unless_redis_is_out(pacer.block_chat(chat_id, retry_after_ms(exc)))
        log.warning("chat %s: Telegram asked to wait; an answer was dropped", chat_id)
        return None
    finally:
        if grant is not None:
            await _unless_redis_is_out(pacer.settle(grant))
