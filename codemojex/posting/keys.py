"""Every key name of posting (the pace and the outbox sender), built in one place.

Posting keeps its Redis state under `cmx:{q}:` beside the state of codemojex/state (whose
names state/keys.py builds) and with the lanes' `{q}` hash tag, so that every script and
multi-key command stays in one Redis Cluster slot:

    cmx:{q}:pace:c:<chat>          a chat's next free second (GCRA: its theoretical arrival time)
    cmx:{q}:pace:m:<chat>          a group's last minute of posts (sorted set of grants)
    cmx:{q}:pace:b:<bot>:s         the bot's last seconds of posts (sorted set of grants)
    cmx:{q}:pace:b:<bot>:rate      the bot's learned rate and its 429s by cause (a hash)
    cmx:{q}:pace:b:<bot>:block     nobody posts for the bot before <value> (a bot-wide 429)
    cmx:{q}:pace:a:<chat>          the chat's next slot for one of the bot's answers
    cmx:{q}:pace:block:c:<chat>    nobody posts to the chat before <value> (a RetryAfter)
    cmx:{q}:send:ring              the posting ring: chats with unsent rows, scored by when
                                   their turn comes (ms, Redis time)
    cmx:{q}:send:dirty             chats given rows while a sender held them
    cmx:{q}:send:cool              chats out of the ring whose pace allows no post before <score>
    cmx:{q}:send:lease:<chat>      the sender that owns the chat (its token)
    cmx:{q}:send:sending:<row>     intent: an outbox row is being posted (owner and time)
    cmx:{q}:send:posted:<row>      posted: the message id that carried an outbox row

Chat, row and bot ids are integers formatted with %d: user text never reaches a key name.
The bot's keys carry its id (`bot_id`: the numeric head of its token), so a second bot's
token on the same queue would keep a pace of its own.

The ring's scripts build the keys of the chats they find on the ring themselves (a caller
cannot declare those), on the prefix `cmx:{q}:` they are given as KEYS[1]: their names are
rendered from the same spellings (`lua_names`, the include `keys` of posting's scripts,
codemojex/lua/loader.py): `RING`, `DIRTY`, `COOL` and `chat_lease_key(chat)`.
"""

from __future__ import annotations

from typing import Final

from pydantic import SecretStr

from codemojex.lanes.keys import check_queue
from codemojex.lua.loader import key_builder, key_constant

# The sender's keys of the whole queue: `Keys.<name>` in Python, `<NAME>` in Lua.
SENDER_KEYS: Final = {"ring": "send:ring", "dirty": "send:dirty", "cool": "send:cool"}
# A chat's lease: `Keys.chat_lease(chat)` in Python, `chat_lease_key(chat)` in Lua.
CHAT_LEASE: Final = "send:lease:"


def lua_names() -> dict[str, str]:
    """The Lua definition of every key name posting's scripts may use, by that name."""
    names = {key.upper(): key_constant(key.upper(), suffix) for key, suffix in SENDER_KEYS.items()}
    names["chat_lease_key"] = key_builder("chat_lease_key", "chat", CHAT_LEASE)
    return names


def bot_id(token: str | SecretStr | None) -> int:
    """The bot's id: the number before the colon of its token (`123456:ABC...`), which is
    no secret (it is the bot's user id). 0 for no token or one of another shape."""
    if isinstance(token, SecretStr):
        token = token.get_secret_value()
    head = (token or "").partition(":")[0]
    return int(head) if head.isdigit() else 0


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


class Keys:
    """Key names of one queue's pace and sender."""

    __slots__ = ("prefix", "queue")

    def __init__(self, queue: str) -> None:
        self.queue = check_queue(queue)
        self.prefix = f"cmx:{{{queue}}}:"

    # -- the pace (pacer.py) ---------------------------------------------------------------------

    def chat_pace(self, chat_id: int) -> str:
        return f"{self.prefix}pace:c:{_integer(chat_id, 'chat id'):d}"

    def group_minute(self, chat_id: int) -> str:
        return f"{self.prefix}pace:m:{_integer(chat_id, 'chat id'):d}"

    def bot_second(self, bot: int) -> str:
        return f"{self.prefix}pace:b:{_integer(bot, 'bot id'):d}:s"

    def bot_rate(self, bot: int) -> str:
        return f"{self.prefix}pace:b:{_integer(bot, 'bot id'):d}:rate"

    def bot_block(self, bot: int) -> str:
        return f"{self.prefix}pace:b:{_integer(bot, 'bot id'):d}:block"

    def chat_answers(self, chat_id: int) -> str:
        return f"{self.prefix}pace:a:{_integer(chat_id, 'chat id'):d}"

    def chat_block(self, chat_id: int) -> str:
        return f"{self.prefix}pace:block:c:{_integer(chat_id, 'chat id'):d}"

    # -- the sender (ring.py, sender/) -----------------------------------------------------------

    @property
    def ring(self) -> str:
        return self.prefix + SENDER_KEYS["ring"]

    @property
    def dirty(self) -> str:
        return self.prefix + SENDER_KEYS["dirty"]

    @property
    def cool(self) -> str:
        return self.prefix + SENDER_KEYS["cool"]

    def chat_lease(self, chat_id: int) -> str:
        return f"{self.prefix}{CHAT_LEASE}{_integer(chat_id, 'chat id'):d}"

    def sending(self, row_id: int) -> str:
        return f"{self.prefix}send:sending:{_integer(row_id, 'row id'):d}"

    def posted(self, row_id: int) -> str:
        return f"{self.prefix}send:posted:{_integer(row_id, 'row id'):d}"
