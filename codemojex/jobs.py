"""The payload of a guess job, as the bot enqueues it and the ScoreWorker reads it.

It is stored once per pending guess in Redis, so it carries only what the worker cannot find
elsewhere: the round the guess was typed against, the message to reply to, and the emojis.
The chat comes from the room (the lane's room), the player from the lane, the time from the
job's `enqueued_ms`. Text, not JSON: `<round>:<message>:<emojis>`, about 30 bytes for four
emojis, which keeps the job's Redis hash in its compact encoding (listpack: values up to
`hash-max-listpack-value`, 64 bytes by default). A JSON payload, as an older bot wrote it, is
still read, so a worker can be upgraded before the bot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

import regex

_GRAPHEME: Final = regex.compile(r"\X")


@dataclass(frozen=True, slots=True)
class GuessJob:
    round_id: int  # the round the guess was typed against
    message_id: int  # the guess message, replied to when the room is quiet
    emojis: tuple[str, ...]  # the validated guess, one palette emoji per position

    def encode(self) -> bytes:
        return f"{self.round_id:d}:{self.message_id:d}:{''.join(self.emojis)}".encode()

    @classmethod
    def decode(cls, payload: bytes) -> GuessJob:
        """Raises ValueError (or KeyError, TypeError for a JSON one) when it is not a guess."""
        text = payload.decode()
        if text.startswith("{"):
            raw = json.loads(text)
            return cls(
                round_id=int(raw["r"]),
                message_id=int(raw["m"]),
                emojis=tuple(str(e) for e in raw["e"]),
            )
        round_id, message_id, emojis = text.split(":", 2)
        return cls(
            round_id=int(round_id),
            message_id=int(message_id),
            emojis=tuple(_GRAPHEME.findall(emojis)),
        )
