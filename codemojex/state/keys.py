"""Every key name of the state bot, worker and ops share in Redis (codemojex/state: cards,
the daily board, members, answer budgets, notices, the bot's inbox and poller lease, the
command and tap marks) and of the processes the ops page lists, built in one place.

The lanes own `emq:{q}:` (codemojex/lanes/keys.py); the rest of Codemojex's Redis state for a
queue `q` lives under `cmx:{q}:`, with the same `{q}` hash tag, so that every script and
multi-key command of all of them stays in one Redis Cluster slot: posting's pace and sender
keys (`pace:`, `send:`, posting/keys.py) and these:

    cmx:{q}:flood:<PLR…>           "slow down" was said this episode
    cmx:{q}:answers:<chat>:<member>  a member's answer budget in a chat (hash: next free, told,
                                   the last update that spent and what it was told)
    cmx:{q}:waiting:<chat>:<member>  "catching up" was said to a member in a chat this outage
    cmx:{q}:members:<chat>         a group's members as the bot saw them (zset: user id -> when
                                   last seen, ms; bounded, expiring: state/members.py)
    cmx:{q}:paused:<PLR…>          "scoring is paused" was said this episode
    cmx:{q}:tap:draft:<round>:<user>  a player's tapped draft of a round (expires with it)
    cmx:{q}:tap:rate:<user>        a user's taps in the current rate window (set of query ids)
    cmx:{q}:inline:rate:<user>     a user's inline queries in the current rate window
    cmx:{q}:tap:seen:<hash>        a callback query already handled (its id, hashed)
    cmx:{q}:seen:<chat>:<message>  a command already run (bot/once.py)
    cmx:{q}:inbox:parked           updates taken and confirmed, not yet finished (hash: update
                                   id -> its JSON and tries: state/inbox.py)
    cmx:{q}:inbox:where            who holds each and its order key (hash: update id ->
                                   "<holder> <key>"; holder `-`: behind another's key)
    cmx:{q}:inbox:key:<key>        a key's parked updates (zset: update id -> update id)
    cmx:{q}:inbox:held:<holder>    a holder's parked updates (zset: update id -> update id)
    cmx:{q}:inbox:holders          the holders' leases (zset: holder -> when it ends, ms)
    cmx:{q}:inbox:fences           the poller's fence each polling holder had (hash)
    cmx:{q}:inbox:dead             the dead letters: updates that could not be handled (list,
                                   newest first, bounded, expiring)
    cmx:{q}:poller:<bot>           the one process polling Telegram for bot <bot> (its token)
    cmx:{q}:poller:<bot>:fence     the number of the last process that took that lease
    cmx:{q}:daily:board:<day>      the day's world board of the daily code (zset: user id ->
                                   attempts then finish time, game.daily.board_score)
    cmx:{q}:daily:played:<day>     who opened the day's daily (HyperLogLog of user ids)
    cmx:{q}:daily:built:<day>      the board holds every finish Postgres has (else rebuilt)
    cmx:{q}:daily:rebuild:<day>    the process rebuilding the day's board (a lock)
    cmx:{q}:room:<chat>:<thread>   the room of a chat (of its forum topic; 0: none): ROM id
    cmx:{q}:card:<ROM…>            the room's card: what taking a guess needs (hash, cards.py)
    cmx:{q}:card:<ROM…>:gen        the card's generation: every change bumps it
    cmx:{q}:card:<ROM…>:seats      the room's players: Telegram user -> PLR id (hash)
    cmx:{q}:card:<ROM…>:bans       the room's banned Telegram users (set)
    cmx:{q}:card:<ROM…>:names      the room's players' names as the bot last sent them (hash,
                                   PLR -> name: /queue names a player the worker did not
                                   write yet)
    cmx:{q}:ops:procs              the processes that publish for the operator page (zset:
                                   process id -> when it last published, ms)
    cmx:{q}:ops:proc:<id>          that process's kind, pid, host and counters (expires)

Chat, round and user ids are integers formatted with %d, days as YYYYMMDD, rooms and
players are branded ids checked here, callback query ids are hashed: user text never reaches a
key name.

A card's script reads the keys of a room it finds (through the chat's room) itself, on the
prefix `cmx:{q}:` it is given as KEYS[1]: their names are rendered from the same spellings
(`lua_names`, the include `keys` of the state's scripts, codemojex/lua/loader.py):
`card_key(room)`, `card_gen_key(room)`, `seats_key(room)`, `bans_key(room)`, `names_key(room)`;
the inbox's scripts so build a key's and a holder's sets, `inbox_key_key(key)` and
`inbox_held_key(holder)`. An order key is made of ids and fixed words (bot/order.py), a
holder's name of 16 hex digits.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date
from typing import Final, Literal

from codemojex.lanes.keys import check_queue
from codemojex.lua.loader import key_builder
from codemojex.values import ids

Notice = Literal["flood", "paused"]
NOTICES: Final = ("flood", "paused")
_PROC: Final = re.compile(r"[0-9a-f]{16}\Z")


# A room's card and what goes with it: `cmx:{q}:card:<room>` and these suffixes;
# `Keys.<name>(room)` in Python, `<name>_key(room)` in Lua.
CARD: Final = "card:"
ROOM_KEYS: Final = {
    "card": "",
    "card_gen": ":gen",
    "seats": ":seats",
    "bans": ":bans",
    "names": ":names",
}


# The inbox's sets of one order key and of one holder: `cmx:{q}:inbox:key:<key>`,
# `cmx:{q}:inbox:held:<holder>`.
INBOX_KEY: Final = "inbox:key:"
INBOX_HELD: Final = "inbox:held:"
_ORDER_KEY: Final = re.compile(r"[a-z]+(:-?[0-9]+)+\Z")
_HOLDER: Final = re.compile(r"([0-9a-f]{16}|-)\Z")


def lua_names() -> dict[str, str]:
    """The Lua definition of every key name the state's scripts may use, by that name."""
    return {
        **{
            f"{name}_key": key_builder(f"{name}_key", "room", CARD, after)
            for name, after in ROOM_KEYS.items()
        },
        "inbox_key_key": key_builder("inbox_key_key", "key", INBOX_KEY),
        "inbox_held_key": key_builder("inbox_held_key", "holder", INBOX_HELD),
    }


def check_order_key(key: str) -> str:
    """An order key (bot/order.py): a word, then ids ("s:-100123:42")."""
    if not isinstance(key, str) or not _ORDER_KEY.match(key):
        raise ValueError(f"not an order key: {key!r}")
    return key


def check_holder(holder: str) -> str:
    """A holder of parked updates: 16 hex digits, or `-` (behind another's key)."""
    if not isinstance(holder, str) or not _HOLDER.match(holder):
        raise ValueError(f"not a holder: {holder!r}")
    return holder


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def _day(day: date) -> str:
    if not isinstance(day, date):
        raise ValueError(f"a day must be a date, got {day!r}")
    return day.strftime("%Y%m%d")


def check_proc(proc_id: str) -> str:
    if not _PROC.match(proc_id):
        raise ValueError(f"not a process id (16 hex digits): {proc_id!r}")
    return proc_id


class Keys:
    """Key names of one queue's `cmx:` state."""

    __slots__ = ("prefix", "queue")

    def __init__(self, queue: str) -> None:
        self.queue = check_queue(queue)
        self.prefix = f"cmx:{{{queue}}}:"

    # -- the notice flags (state/flags.py) ---------------------------------------------------

    def notice(self, lane: str, notice: Notice = "flood") -> str:
        if not ids.is_valid(lane, ids.PLAYER):
            raise ValueError("notice flags are keyed by player ids only")
        if notice not in NOTICES:
            raise ValueError(f"unknown notice {notice!r}")
        return f"{self.prefix}{notice}:{lane}"

    def catching_up(self, chat_id: int, member_id: int) -> str:
        chat = _integer(chat_id, "chat id")
        return f"{self.prefix}waiting:{chat:d}:{_integer(member_id, 'member id'):d}"

    # -- the answer budget (state/budget.py) ------------------------------------------------

    def answer_budget(self, chat_id: int, member_id: int) -> str:
        chat = _integer(chat_id, "chat id")
        return f"{self.prefix}answers:{chat:d}:{_integer(member_id, 'member id'):d}"

    # -- a group's members (state/members.py) -----------------------------------------------

    def group_members(self, chat_id: int) -> str:
        return f"{self.prefix}members:{_integer(chat_id, 'chat id'):d}"

    # -- tap to guess (bot/taps.py) ------------------------------------------------------------

    def tap_draft(self, round_id: int, user_id: int) -> str:
        round_part = _integer(round_id, "round id")
        return f"{self.prefix}tap:draft:{round_part:d}:{_integer(user_id, 'user id'):d}"

    def tap_rate(self, user_id: int) -> str:
        return f"{self.prefix}tap:rate:{_integer(user_id, 'user id'):d}"

    def inline_rate(self, user_id: int) -> str:
        return f"{self.prefix}inline:rate:{_integer(user_id, 'user id'):d}"

    def tap_seen(self, query_id: str) -> str:
        digest = hashlib.blake2b(query_id.encode(), digest_size=12).hexdigest()
        return f"{self.prefix}tap:seen:{digest}"

    def command_seen(self, chat_id: int, message_id: int) -> str:
        chat = _integer(chat_id, "chat id")
        return f"{self.prefix}seen:{chat:d}:{_integer(message_id, 'message id'):d}"

    # -- the updates the bot confirmed before finishing them (state/inbox.py) ----------------

    @property
    def inbox_parked(self) -> str:
        return self.prefix + "inbox:parked"

    @property
    def inbox_where(self) -> str:
        return self.prefix + "inbox:where"

    @property
    def inbox_legacy_lease(self) -> str:
        """The parked updates' leases of the version before one lease per process: read to
        take over what a bot of that version left (state/inbox.py `Inbox.legacy`)."""
        return self.prefix + "inbox:lease"

    @property
    def inbox_holders(self) -> str:
        return self.prefix + "inbox:holders"

    @property
    def inbox_fences(self) -> str:
        return self.prefix + "inbox:fences"

    def inbox_key(self, key: str) -> str:
        return self.prefix + INBOX_KEY + check_order_key(key)

    def inbox_held(self, holder: str) -> str:
        return self.prefix + INBOX_HELD + check_holder(holder)

    @property
    def inbox_dead(self) -> str:
        return self.prefix + "inbox:dead"

    def poller(self, bot_id: int) -> str:
        return f"{self.prefix}poller:{_integer(bot_id, 'bot id'):d}"

    def poller_fence(self, bot_id: int) -> str:
        return self.poller(bot_id) + ":fence"

    # -- the daily code's world board (state/board.py) ---------------------------------------

    def daily_board(self, day: date) -> str:
        return f"{self.prefix}daily:board:{_day(day)}"

    def daily_played(self, day: date) -> str:
        return f"{self.prefix}daily:played:{_day(day)}"

    def daily_built(self, day: date) -> str:
        return f"{self.prefix}daily:built:{_day(day)}"

    def daily_rebuild(self, day: date) -> str:
        return f"{self.prefix}daily:rebuild:{_day(day)}"

    # -- the rooms' cards (state/cards.py) ----------------------------------------------------

    def room_of(self, chat_id: int, thread_id: int) -> str:
        chat = _integer(chat_id, "chat id")
        return f"{self.prefix}room:{chat:d}:{_integer(thread_id, 'thread id'):d}"

    def _of_room(self, name: str, room_id: str) -> str:
        if not ids.is_valid(room_id, ids.ROOM):
            raise ValueError(f"not a room id: {room_id!r}")
        return f"{self.prefix}{CARD}{room_id}{ROOM_KEYS[name]}"

    def card(self, room_id: str) -> str:
        return self._of_room("card", room_id)

    def card_gen(self, room_id: str) -> str:
        return self._of_room("card_gen", room_id)

    def seats(self, room_id: str) -> str:
        return self._of_room("seats", room_id)

    def bans(self, room_id: str) -> str:
        return self._of_room("bans", room_id)

    def names(self, room_id: str) -> str:
        return self._of_room("names", room_id)

    # -- the processes the operator page lists (ops/fleet.py) ----------------------------------

    @property
    def procs(self) -> str:
        return self.prefix + "ops:procs"

    def proc(self, proc_id: str) -> str:
        return self.prefix + "ops:proc:" + check_proc(proc_id)
