"""Tap to guess: the callback queries of a round's keyboard (codemojex.game.taps).

Each tap is answered with a toast only the tapper sees (answerCallbackQuery); nothing is posted
to the chat per tap. A player's draft of a round lives in Redis (state/keys.py names it) and
expires when the round would time out. The tap that completes the code hands it to the guess
intake exactly as a typed guess (codemojex.bot.guesses: validation, the player's lane, the
room's ceiling, "slow down"), its job id derived from the callback query's id. A tap is
marked seen only with its effect (bot/drafts.py `Drafts.done`): one whose handling failed or
whose process died half-way takes effect when Telegram delivers it again.

Refused with a toast, changing nothing: a tap faster than the player's tap rate
(drafts.TAP_RATE_MAX a window), on the keyboard of a round that is not the chat's open round (an old
message, or the round ended), or by a player banned in the room. The callback data is trusted
no further than what it names: the round must be the open round of the very chat and topic
the tapped message is in, and the index within its palette.
"""

from __future__ import annotations

import logging

from telegram import CallbackQuery, Message, Update
from telegram.error import BadRequest

from codemojex.bot.context import BotServices, CodemojexContext
from codemojex.bot.incoming import guarded
from codemojex.bot.language import room_language, user_language
from codemojex.bot.names import topic_of
from codemojex.game import taps, texts

log = logging.getLogger(__name__)


async def _toast(query: CallbackQuery, text: str | None) -> None:
    """Answer the tap (a toast for the tapper alone). A query answered late (Telegram gives a
    bot seconds) is refused by Telegram: nothing to tell anybody then."""
    try:
        await query.answer(text)
    except BadRequest as exc:
        log.info("a tap could not be answered: %s", exc.message)


@guarded
async def on_tap(update: Update, context: CodemojexContext) -> None:
    query = update.callback_query
    if query is None:
        return
    services = context.services
    message = query.message
    tap = taps.parse_tap(query.data)
    # A keyboard we did not make, or a message too old for Telegram to show us.
    if tap is None or not isinstance(message, Message) or query.from_user.is_bot:
        await _toast(query, None)
        return
    await _toast(query, await _handle(services, query, message, tap))


async def _handle(
    services: BotServices, query: CallbackQuery, message: Message, tap: taps.Tap
) -> str | None:
    """The toast of one tap on the keyboard under `message`."""
    user = query.from_user
    drafts = services.drafts
    within, first = await drafts.admit(
        user.id, query.id, also=services.members.tapper(message.chat, user)
    )
    if not within:
        return texts.tap_too_fast(user_language(user))
    if not first:
        return None  # the same query again (a redelivered update): it took effect
    # The card as Redis has it now: every toast is decided on it, never on this process's
    # memory (the next tap may reach another bot process).
    read = await services.cards.for_guess(message.chat, topic_of(message), user)
    card = read.card
    if card is None:  # a private chat without a room: no keyboard of ours is live there
        return texts.tap_round_over(user_language(user))
    lang = room_language(card, user)
    round_ = card.round
    if round_ is None or round_.id != tap.round_id:
        return texts.tap_round_over(lang)
    if read.banned:
        return texts.banned(lang)
    palette = round_.palette
    if isinstance(tap.action, int) and tap.action >= len(palette):
        return texts.tap_round_over(lang)  # not a button of this round's keyboard
    length = round_.length
    draft = taps.parse_draft(await drafts.get(round_.id, user.id), len(palette), length)
    step = taps.step(draft, tap.action, length)
    seen_s = services.config.dedupe_window_s
    if step.complete is None:
        if not await drafts.done(
            query.id, round_.id, user.id, step.draft, round_.expires_at, seen_s
        ):
            return None  # another delivery of this query took effect meanwhile
        return taps.show(step.draft, palette, length)
    guess = taps.emojis_of(step.complete, palette)
    outcome = await services.guesses.take(
        message.chat,
        topic_of(message),
        user,
        "".join(guess),
        explicit=True,
        message_id=0,
        origin=f"cb:{query.id}",
        round_id=round_.id,
    )
    services.guesses.outcomes[outcome.outcome] += 1
    if outcome.outcome == "no_round":
        return texts.tap_round_over(lang)  # it ended between the tap and the enqueue
    if outcome.outcome != "enqueued":
        # "Slow down" (or nothing, later in the flood episode): the draft stays complete but
        # for the last tap, which the player repeats when the lane has room.
        return outcome.reply or texts.slow_down(lang)
    # The draft cleared and the query marked seen only now that the guess is in its lane (a
    # delivery again before this admits it again: a duplicate of its job id, one guess).
    await drafts.done(query.id, round_.id, user.id, (), round_.expires_at, seen_s)
    sent = texts.tap_sent(lang, guess)
    return f"{sent}\n{outcome.reply}" if outcome.reply else sent
