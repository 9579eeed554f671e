"""The payload of a guess job, as the bot enqueues it and the ScoreWorker reads it.

It is stored once per pending guess in Redis, so it carries only what the worker cannot find
elsewhere: the round the guess was typed against, the message to reply to, the Telegram user
(the worker writes the player's row with the score: the bot writes none), and the emojis;
the player's name only when the bot has not sent it before. The chat comes from the room
(the lane's room), the player's id from the lane, the time from the job's `enqueued_ms`.

Text, not JSON: `<round>:<message>:<user>:<emojis>`, then `\\n<name>` when it carries the
name: about 40 bytes for four emojis, which keeps the job's Redis hash in its compact encoding
(listpack: values up to `hash-max-listpack-value`, 64 bytes by default); a long name makes
one job's hash a little bigger, once per player. Emojis never hold ":" or a newline (they are
the round's palette) and a name has no newline (`bot.names.shown`). `<round>:<message>:
<emojis>`, as an older bot wrote it, is still read (its player's row exists: that bot wrote
it), so a worker can be upgraded before the bot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import regex

_GRAPHEME: Final = regex.compile(r"\X")


@dataclass(frozen=True, slots=True)
class GuessJob:
    round_id: int  # the round the guess was typed against
    message_id: int  # the guess message, replied to when the room is quiet
    emojis: tuple[str, ...]  # the validated guess, one palette emoji per position
    user_id: int = 0  # the Telegram user (0: an older bot's job, whose player exists)
    name: str | None = None  # the player's name, when the bot sends it (first, or changed)

    def encode(self) -> bytes:
        head = f"{self.round_id:d}:{self.message_id:d}:{self.user_id:d}:{''.join(self.emojis)}"
        return (head if self.name is None else f"{head}\n{self.name}").encode()

    @classmethod
    def decode(cls, payload: bytes) -> GuessJob:
        """Raises ValueError when it is not a guess."""
        text, _, name = payload.decode().partition("\n")
        parts = text.split(":", 3)
        if len(parts) == 3:  # an older bot's: no user, no name
            parts.insert(2, "0")
        round_id, message_id, user_id, emojis = parts
        return cls(
            round_id=int(round_id),
            message_id=int(message_id),
            emojis=tuple(_GRAPHEME.findall(emojis)),
            user_id=int(user_id),
            name=name or None,
        )
