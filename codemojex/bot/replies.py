"""The bot's own answers, budgeted per member, paced with every other post of the bot, never
holding an update.

Telegram limits a bot's messages per chat, per group and in all (TELEGRAM's rates). The
worker's outbox sender and the bot post into the same chats, so both take their slots from the
same `Pacer` (its state is in Redis, namespace = the queue, limits from the settings
CODEMOJEX_PACE_*; while Redis is down, each process keeps the pace alone). The answers are held
to a share of each limit (`PacePolicy.from_rates(..., answers=True)`:
pace_policy.ANSWER_GROUP_SHARE_PCT of a group's minute, pace_policy.ANSWER_BOT_SHARE_PCT of
the bot's second, never two of a chat's seconds in a row), so that the results keep the rest
whatever a chat's members send.

Each member's answers in a chat are budgeted first (state/budget.py, the setting
CODEMOJEX_ANSWER_BUDGET, state/budget.py BUDGET a minute): past the budget the member gets one
"slow down" instead of the answer, then nothing until the budget is whole again, so one
member's spam cannot take the chat's whole share of answers either. A command spends it before
its work (`spend_first`, then `answer_paid`), so one past the budget costs one Redis call and no
SQL. An admin's allowed commands are answered outside the budget (`answer_as(..., Say.ANSWER,
...)`): the pace still holds them to the answers' share.

The rule for an answer (a refusal, "slow down", an admin reply):
- the chat's pace allows a post now: it goes out at once, as a reply to the message it
  answers (the handler makes that one call);
- otherwise the handler hands it to the chat's queue in `Answers` and returns: waiting for a
  posting slot never holds one of the bot's update slots, so a raid of accounts that all get
  answers cannot hold up any other chat's updates;
- the queue posts at the chat's first slot, and every answer waiting for the chat then goes
  into that one message (folded as the sender folds results: one line each, naming whom it
  answers), never mixing forum topics;
- an answer not posted within `reply_wait_s` (WAIT_S) of being asked is
  dropped, and so is one whose chat's pace is known to need longer (said at once: nothing
  sleeps towards a deadline it will miss); a dropped answer is logged and its `on_dropped`
  called (a once-per-episode notice is then not spent);
- a RetryAfter blocks the chat for everyone (the whole bot, when the chat's own pace does
  not explain it: `Pacer.refused`) and drops the answers it carried.

An answer may carry an inline keyboard (`markup`, JSON as an outbox row's: a daily card's
Share button); such an answer is posted alone, never folded, so the keyboard stays under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from telegram import InlineKeyboardMarkup, Message
from telegram.error import RetryAfter, TelegramError

from codemojex.bot.names import display_name
from codemojex.game import texts
from codemojex.locale import Lang, resolve
from codemojex.outages import OUTAGES, is_outage, retry_after_ms
from codemojex.posting.fold import OutMessage, fold
from codemojex.posting.pace_policy import Grant
from codemojex.posting.pacer import Pacer
from codemojex.posting.ring import PostingRing
from codemojex.state.budget import AnswerBudget
from codemojex.values.types import KIND_CARD, Say

log = logging.getLogger(__name__)

OnDropped = Callable[[], Awaitable[None]]
# "Catching up" (an outage holds a chat's updates) is said once per chat this long, by a
# process that remembers at most so many chats told.
CATCHING_UP_EVERY_S: Final = 60.0
CATCHING_UP_CHATS_MAX: Final = 10_000
# An answer waits so long for a posting slot (outside the update's handling), then is dropped.
WAIT_S: Final = 3.0
_ids = itertools.count(1)


@dataclass(eq=False)
class _Waiting:
    """An answer waiting for its chat's slot (fold.OutRow)."""

    message: Message
    text: str
    deadline: float
    on_dropped: OnDropped | None
    markup: str | None = None  # an inline keyboard (JSON) to post with it
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def kind(self) -> str:
        # One with a keyboard is folded with nothing (a card is posted alone).
        return "answer" if self.markup is None else KIND_CARD

    @property
    def reply_to_message_id(self) -> int | None:
        return self.message.message_id

    @property
    def player_name(self) -> str | None:
        # Folded with others, the line names whom it answers: as every other text names them
        # (no bidi controls that would turn the line around).
        user = self.message.from_user
        return display_name(user) if user is not None else None

    @property
    def thread_id(self) -> int | None:
        return self.message.message_thread_id if self.message.is_topic_message else None


class Answers:
    """The bot's answers: each member's budget spent, the chat's pace taken, and what has to
    wait for it queued off the update path (one queue, and one task, per chat with something
    waiting). Built with the pacer and the budget it spends; `reply_wait_s` is how long an
    answer may wait for a posting slot before it is dropped."""

    def __init__(self, pacer: Pacer, budget: AnswerBudget, reply_wait_s: float = WAIT_S) -> None:
        self.pacer = pacer
        self.budget = budget
        self.reply_wait_s = reply_wait_s
        self._waiting: dict[int, list[_Waiting]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._caught_up: dict[int, float] = {}  # chat -> when last told "catching up"
        self.dropped = 0
        self.folded = 0

    # -- what a handler says ---------------------------------------------------------------

    async def spend(self, message: Message, *, check: bool = False) -> Say:
        """Spend one answer of the budget of `message`'s sender in its chat: what to say
        (`check`: an answer left is found, not spent)."""
        return await self.budget.spend(message.chat_id, member_of(message), check=check)

    async def answer(
        self,
        message: Message,
        text: str,
        *,
        lang: Lang | None = None,
        on_dropped: OnDropped | None = None,
        markup: str | None = None,
    ) -> None:
        """Answer `message` with `text` (in `lang`; with the inline keyboard `markup`), within
        its sender's answer budget in the chat (`answer_as` with what `spend` says). Returns
        without waiting for a posting slot."""
        said = await self.spend(message)
        await self.answer_as(message, said, text, lang=lang, on_dropped=on_dropped, markup=markup)

    async def spend_first(self, message: Message, *, check: bool = False) -> bool:
        """A command's answer paid before its work (its reads, its writes): True when the
        command is to be done, and answered with `answer_paid`. Otherwise its sender is past
        their budget in the chat: told once to slow down, or nothing, and the command does no
        more (one Redis call, no SQL). `check`: the command may post no answer (a round, a
        puzzle: through the outbox), so an answer left is only found; what it then answers
        spends (`answer`)."""
        said = await self.spend(message, check=check)
        if said is Say.ANSWER:
            return True
        await self.answer_as(message, said, "")  # "slow down" in their language, or nothing
        return False

    async def catching_up(self, message: Message) -> None:
        """Tell `message`'s chat that the bot is catching up (an outage holds its updates):
        once per chat every `CATCHING_UP_EVERY_S`, outside the budget (a member's
        budget is no measure of an outage), paced as any answer."""
        now = time.monotonic()
        told = self._caught_up
        if now - told.get(message.chat_id, -math.inf) < CATCHING_UP_EVERY_S:
            return
        if len(told) >= CATCHING_UP_CHATS_MAX:  # bounded: forget the oldest half
            for chat_id in sorted(told, key=told.__getitem__)[: len(told) // 2]:
                del told[chat_id]
        told[message.chat_id] = now
        user = message.from_user
        lang = resolve(user.language_code if user else None)
        await self.answer_as(message, Say.ANSWER, texts.catching_up(lang))

    async def answer_paid(
        self, message: Message, text: str, *, lang: Lang | None = None, markup: str | None = None
    ) -> None:
        """The answer of a command whose budget `spend_first` spent."""
        await self.answer_as(message, Say.ANSWER, text, lang=lang, markup=markup)

    async def answer_as(
        self,
        message: Message,
        said: Say,
        text: str,
        *,
        lang: Lang | None = None,
        on_dropped: OnDropped | None = None,
        markup: str | None = None,
    ) -> None:
        """Answer `message` as the budget said: `text`, or once "slow down" (in `lang`, the
        language of `text`; by default the sender's own), or nothing. At once when the chat's
        pace allows, else later from the chat's queue (folded with the other answers waiting
        there), or never (dropped past `reply_wait_s`). `on_dropped` is called when `text` is
        not posted."""
        if said is not Say.ANSWER and on_dropped is not None:
            # `text` will not be posted: a once-per-episode one is unspent
            try:
                await on_dropped()
            except Exception as exc:  # a notice's flag not given back: at worst unsaid
                OUTAGES.swallow(exc, "the answers", "a dropped answer's flag not released")
        if said is Say.NOTHING:
            return
        if said is Say.NOTICE:
            user = message.from_user
            text = texts.answers_spent(lang or resolve(user.language_code if user else None))
            on_dropped = functools.partial(self.budget.untell, message.chat_id, member_of(message))
            markup = None  # "slow down" is no card
        chat_id = message.chat_id
        pacer = self.pacer
        item = _Waiting(message, text, time.monotonic() + self.reply_wait_s, on_dropped, markup)
        if self.waiting(chat_id):
            self._queue(item)  # behind the answers already waiting, in order
            return
        grant = Grant(chat_id)
        wait = await pacer.take(chat_id, grant)
        if wait.ms > 0:
            if wait.ms / 1000 > self.reply_wait_s:
                await self.drop([item], "the chat's pace allows no post in time")
                return
            self._queue(item)
            return
        try:
            await message.reply_text(text, reply_markup=keyboard(markup, message))
        except RetryAfter as exc:
            await pacer.refused(grant, retry_after_ms(exc))
            await self.drop([item], "Telegram asked to wait")
        finally:
            await pacer.settle(grant)

    # -- the queues ------------------------------------------------------------------------

    def waiting(self, chat_id: int) -> int:
        return len(self._waiting.get(chat_id, ()))

    async def wait_idle(self) -> None:
        """Until no answer waits (tests: "the bot said all it was going to say")."""
        await self._idle.wait()

    async def close(self) -> None:
        """Let the waiting answers go out until their deadlines, then drop the rest."""
        deadline = max((w.deadline for items in self._waiting.values() for w in items), default=0.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - time.monotonic()))
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def drop(self, items: list[_Waiting], why: str) -> None:
        """These answers will not be posted: logged, counted, their `on_dropped` called."""
        if not items:
            return
        self.dropped += len(items)
        log.info("chat %s: %d answers dropped (%s)", items[0].message.chat_id, len(items), why)
        for item in items:
            if item.on_dropped is not None:
                try:
                    await item.on_dropped()
                except Exception as exc:  # a notice's flag not given back: at worst unsaid
                    OUTAGES.swallow(exc, "the answers", "a dropped answer's flag not released")

    def _queue(self, item: _Waiting) -> None:
        chat_id = item.message.chat_id
        self._waiting.setdefault(chat_id, []).append(item)
        if chat_id not in self._tasks:
            self._idle.clear()
            self._tasks[chat_id] = asyncio.create_task(
                self._serve(self.pacer, chat_id), name=f"answers:{chat_id}"
            )

    async def _serve(self, pacer: Pacer, chat_id: int) -> None:
        queue = self._waiting[chat_id]
        try:
            while queue:
                asked = list(queue)
                # The pacer says at once when even the latest deadline would be missed.
                grant = await pacer.acquire(chat_id, deadline=max(w.deadline for w in asked))
                now = time.monotonic()
                missed = [w for w in queue if w.deadline <= now or (grant is None and w in asked)]
                if missed:
                    queue[:] = [w for w in queue if w not in missed]
                    await self.drop(missed, "the chat's pace allows no post in time")
                if grant is None:
                    continue
                if not queue:
                    await pacer.settle(grant)
                    break
                # fold keeps forum topics apart: the first message is the first topic's
                first = fold(queue)[0]
                carried = [w for w in queue if w.id in first.row_ids]
                if not carried:  # an answer longer than a message: its first piece, cut there
                    carried = [next(w for w in queue if w.thread_id == first.thread_id)]
                queue[:] = [w for w in queue if w not in carried]
                if len(carried) > 1:
                    self.folded += len(carried)
                await self._post(pacer, grant, carried, first)
        except asyncio.CancelledError:
            await self.drop(queue[:], "the bot is stopping")
            queue.clear()
            raise
        finally:
            self._waiting.pop(chat_id, None)
            self._tasks.pop(chat_id, None)
            if not self._tasks:
                self._idle.set()

    async def _post(
        self,
        pacer: Pacer,
        grant: Grant,
        items: list[_Waiting],
        out: OutMessage,
    ) -> None:
        message = items[0].message
        reply_to = out.reply_to
        try:
            await message.get_bot().send_message(
                message.chat_id,
                out.text,
                reply_to_message_id=reply_to,
                allow_sending_without_reply=True if reply_to is not None else None,
                message_thread_id=out.thread_id,
                reply_markup=keyboard(out.markup, message),
            )
        except RetryAfter as exc:
            await pacer.refused(grant, retry_after_ms(exc))
            await self.drop(items, "Telegram asked to wait")
        except TelegramError as exc:
            log.warning("chat %s: an answer failed (%s)", message.chat_id, type(exc).__name__)
            await self.drop(items, "Telegram refused it")
        finally:
            await pacer.settle(grant)


def keyboard(markup: str | None, message: Message) -> InlineKeyboardMarkup | None:
    """An answer's inline keyboard from its JSON."""
    if markup is None:
        return None
    return InlineKeyboardMarkup.de_json(json.loads(markup), message.get_bot())


def member_of(message: Message) -> int:
    """Whose answer budget an answer to `message` spends: its sender's (an anonymous admin's
    or a channel's: the chat it posted as)."""
    if message.sender_chat is not None:
        return message.sender_chat.id
    return message.from_user.id if message.from_user is not None else message.chat_id


async def outbox_written(ring: PostingRing, chat_id: int) -> None:
    """The bot wrote outbox rows for this chat (a round opened or closed): into the posting
    ring, so that a sender posts them at once. Best effort: a sender's reconciliation scan
    finds them otherwise."""
    try:
        await ring.add([chat_id])
    except Exception as exc:
        if not is_outage(exc):
            raise
        OUTAGES.swallow(exc, "the bot", f"chat {chat_id}: not added to the posting ring")
