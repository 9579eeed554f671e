"""The payload of a guess job, as the bot enqueues it and the ScoreWorker reads it.

Compact JSON: it is stored once per pending guess in Redis, so short keys keep the
memory per guess small.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GuessJob:
    chat_id: int  # Telegram chat the result is posted to
    message_id: int  # the guess message, replied to when the room is quiet
    user_id: int  # Telegram user id of the player
    user_name: str  # display name, for the result line
    round_id: int  # the round the guess was typed against
    emojis: tuple[str, ...]  # the validated guess, one palette emoji per position
    sent_ms: int  # when the bot accepted it (epoch ms), for wait-time figures

    def encode(self) -> bytes:
        return json.dumps(
            {
                "c": self.chat_id,
                "m": self.message_id,
                "u": self.user_id,
                "n": self.user_name,
                "r": self.round_id,
                "e": list(self.emojis),
                "t": self.sent_ms,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, payload: bytes) -> GuessJob:
        raw = json.loads(payload)
        return cls(
            chat_id=int(raw["c"]),
            message_id=int(raw["m"]),
            user_id=int(raw["u"]),
            user_name=str(raw["n"]),
            round_id=int(raw["r"]),
            emojis=tuple(str(e) for e in raw["e"]),
            sent_ms=int(raw["t"]),
        )
