"""The bot's own answers, paced with every other post of the bot.

Telegram allows about one message a second per chat, twenty a minute in a group and thirty a
second for the whole bot. The worker's outbox sender and the bot post into the same chats, so
both take their slots from the same `Pacer` (its state is in Redis, namespace = the queue). An
answer waits at most `reply_wait_s` for a slot (ANSWER_POLICY); past that the chat is busy
enough that a late answer helps nobody, and it is dropped (logged). A 429 blocks the chat for
everyone.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from datetime import timedelta

from redis.exceptions import RedisError
from telegram import Message
from telegram.error import RetryAfter

from codemojex.bot.context import BotServices
from codemojex.worker.pacing import Grant, PacePolicy, Window

log = logging.getLogger(__name__)

# The sender's windows, index for index (so the same Redis keys, the same pace), except that
# an answer is not held to the sender's smoothing of a group nor to its 16-a-minute share:
# only Telegram's own limits bind it (1 a second per chat, 20 a minute per group, 30 a second
# for the bot), so the 4 a minute the sender leaves free are the answers' own.
_SENDER = PacePolicy()
ANSWER_POLICY = PacePolicy(
    chat=_SENDER.chat,
    group=(Window(1, 1000), Window(20, 15_000), Window(20, 60_000)),
    bot=_SENDER.bot,
    margin_ms=_SENDER.margin_ms,
)


def retry_after_ms(exc: RetryAfter) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PTB 22 announces a timedelta; both are handled
        value = exc.retry_after
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return max(1, int(seconds * 1000))


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
    except RedisError as exc:
        log.warning(
            "chat %s: pacer unavailable (%s), answering unpaced", chat_id, type(exc).__name__
        )
    try:
        return await message.reply_text(text)
    except RetryAfter as exc:
        with contextlib.suppress(RedisError):
            await pacer.block_chat(chat_id, retry_after_ms(exc))
        log.warning("chat %s: Telegram asked to wait; an answer was dropped", chat_id)
        return None
    finally:
        if grant is not None:
            with contextlib.suppress(RedisError):
                await pacer.settle(grant)
