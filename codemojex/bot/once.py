"""Commands that run once per message, however often Telegram delivers it.

After a kill Telegram sends again every update the bot had not confirmed, so a command may
arrive twice, possibly long after a later command changed the same thing: a second `/newgame`
would open another round once the first ended, a second `/endround` end the next round, a
second `/settings`, `/ban` or `/weight` undo a later one, and every admin command be audited
twice. Each of them (`/newgame` in player_commands.py, every admin command in the admin gate,
admin_commands.py) first claims its message in Redis (`cmx:{q}:seen:<chat>:<message>`,
posting/keys.py, for the dedupe window `Settings.dedupe_window_s`: redelivery comes within a
restart) and runs only when the claim is granted.

Why one shared mark, and not a guard in each use-case: the effects are in several places (a
round and its outbox rows, a room's settings, a ban, the lanes' weight and pause, the audit
log), some of them in Redis and not transactional with the database, and what a redelivery
must not do is run the command again whatever it changed. Guesses do not go through it: their
job id is derived from the message (bot/guesses.py), so they are deduplicated where they are
stored, also after Redis lost its data. `/daily` does not either: opening today's daily is
idempotent (the second time it shows where the player stands).

The mark says who runs the command (`run:<owner>`, a token of this process) until it
finished (`done`), so that nothing is lost when the process dies at any point: a message is
delivered again only when no process confirmed it, so a mark left `run` by another owner is a
dead process's, and the command runs again (`posting/lua/command_claim.lua`). What it did
before it died is then met by the command itself: a round already open, a setting already
set; the bot answers at most once more. A command that fails (an exception: an outage answered
"try again", a bug) gives its mark back, so a redelivery runs it.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from telegram import Message

from codemojex.outages import OUTAGES
from codemojex.posting.keys import Keys
from codemojex.posting.scripts import register
from codemojex.redistypes import AnyRedis


class CommandMarks:
    """This process's claims on command messages (see the module docstring)."""

    def __init__(self, redis: AnyRedis, queue: str, window_s: int) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self._window_ms = window_s * 1000
        self._owner = secrets.token_hex(8)
        self._claim = register(redis, "command_claim")

    @contextlib.asynccontextmanager
    async def once(self, message: Message) -> AsyncIterator[bool]:
        """Yields whether to run the command `message` carries (claimed for this process);
        marked done when the block ends, given back if it raises."""
        key = self._keys.command_seen(message.chat.id, message.message_id)
        run = bool(await self._claim(keys=[key], args=[self._owner, self._window_ms]))
        try:
            yield run
        except BaseException:
            if run:
                try:
                    await self._redis.delete(key)
                except Exception as exc:  # the failure being raised matters more
                    OUTAGES.swallow(exc, "the bot", "a failed command's mark not given back")
            raise
        if run:
            # Done: a delivery again now changes nothing. Should this write fail, the mark
            # stays ours, and this process still refuses to run the command twice.
            try:
                await self._redis.set(key, "done", px=self._window_ms)
            except Exception as exc:  # the command did run: its answer is the one to give
                OUTAGES.swallow(exc, "the bot", "a finished command's mark not set done")
