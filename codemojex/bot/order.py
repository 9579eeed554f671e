"""Which of the bot's updates run in order (the door, processor.py, runs the updates of one key
one at a time, in the order taken, and keys side by side).

An admin's command, `/newgame` and a member joining or leaving are ordered per chat, whoever
sends them (a `/ban` must not overtake a later `/unban` of another admin); everything else
per chat and sender (a player's guesses reach their lane in the order typed)."""

from __future__ import annotations

from collections.abc import Hashable

from telegram import Update
from telegram.constants import ChatType


def order_key(update: Update, chat_ordered: frozenset[str]) -> Hashable:
    """The key whose updates run one at a time, in order (module docstring): per chat for a
    command named in `chat_ordered` in a group and a member's change; per chat and sender
    otherwise (in a private chat, everything its one person sends)."""
    change = update.chat_member or update.my_chat_member
    if change is not None:
        return ("chat", change.chat.id)
    chat, user = update.effective_chat, update.effective_user
    message = update.message
    if (
        message is not None
        and chat is not None
        and chat.type != ChatType.PRIVATE
        and message.text
        and message.text.startswith("/")
        and _command(message.text) in chat_ordered
    ):
        return ("chat", chat.id)
    if chat is not None:
        return ("sender", chat.id, user.id if user is not None else 0)
    if user is not None:
        return ("user", user.id)
    return ("update", update.update_id)


def _command(text: str) -> str:
    """The command a message starts with ("/Ban@our_bot x" -> "ban")."""
    word = text[1:].split(maxsplit=1)
    return word[0].split("@", 1)[0].lower() if word else ""
