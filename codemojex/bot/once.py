"""Commands that run once per message, however often Telegram delivers it.

After a kill Telegram sends again every update the bot had not confirmed, so a command may
arrive twice, possibly long after a later command changed the same thing: a second `/newgame`
would open another round once the first ended, a second `/endround` end the next round, a
second `/settings`, `/ban` or `/weight` undo a later one, and every admin command be audited
twice. Each of them (`/newgame` in player_commands.py, every admin command in the admin gate,
admin_commands.py) first marks its message seen in Redis (`cmx:{q}:seen:<chat>:<message>`,
posting/keys.py), for the dedupe window (`Settings.dedupe_window_s`: redelivery comes within a
restart); a message already marked is not run again, and not answered.

Why one shared mark, and not a guard in each use-case: the effects are in several places (a
round and its outbox rows, a room's settings, a ban, the lanes' weight and pause, the audit
log), some of them in Redis and not transactional with the database, and what a redelivery
must not do is run the command again whatever it changed. Guesses do not go through it: their
job id is derived from the message (bot/guesses.py), so they are deduplicated where they are
stored, also after Redis lost its data. `/daily` does not either: opening today's daily is
idempotent (the second time it shows where the player stands).

The mark is taken before the command runs, and given back when the command fails (an
exception: an outage answered "try again", a bug), so a redelivery then runs it. A process
killed while running a command leaves the mark: the command is run at most once, and the
person who sent it, unanswered, sends it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from telegram import Message

from codemojex.bot.context import BotServices
from codemojex.outages import OUTAGES
from codemojex.posting.keys import Keys


def _key(services: BotServices, message: Message) -> str:
    return Keys(services.settings.queue).command_seen(message.chat.id, message.message_id)


@contextlib.asynccontextmanager
async def once(services: BotServices, message: Message) -> AsyncIterator[bool]:
    """Yields whether this is the first run of the command `message` carries (then marked
    seen); the mark is given back if the block raises."""
    key = _key(services, message)
    window = services.settings.dedupe_window_s
    first = bool(await services.redis.set(key, 1, nx=True, ex=window))
    try:
        yield first
    except BaseException:
        if first:
            try:
                await services.redis.delete(key)
            except Exception as exc:  # the failure being raised matters more
                OUTAGES.swallow(exc, "the bot", "a failed command's mark not given back")
        raise
