"""The answer budget: how many of the bot's answers one member gets in one chat.

Every answer the bot gives (to a command, a refused guess or admin command, a "slow down") is
spent from its member's budget in that chat when it is given, whether or not the pace then
lets it out in time: BUDGET answers (the setting CODEMOJEX_ANSWER_BUDGET, at most
BUDGET_MAX), refilled evenly over WINDOW_S. Past it the member is told once to slow down,
and then gets no answer at all until the budget is whole again. So a member sending a command
every half second gets a few answers and one notice a minute, and the chat's posts stay free
for its results (the pace, pacer.py, caps what all of a chat's answers together may take; the
budget keeps one member from taking all of that).

The bot spends it before a command does any work (bot/replies.py `Answers.spend_first`): a command
past the budget costs this one Redis call and no SQL (a command that may post no answer,
/newgame opening a round, /daily its puzzle, only checks: `spend(..., check=True)`, and
spends when it answers). The worker's "too late" lines (a guess
scored after its round ended) spend it too (`spend_many`, one call for a batch's lines), so a
member sending guesses after the end gets as few lines as answers and cannot crowd the
chat's results out.

In Redis (`lua/budget_take.lua`, key `cmx:{q}:answers:<chat>:<member>`), so every process
spends the same budget. While Redis cannot be asked, everyone is answered: the pace, kept by
each process alone meanwhile, still holds the answers to their share of each chat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Final

from pydantic import Field

from codemojex.outages import OUTAGES, is_outage
from codemojex.state import scripts
from codemojex.state.keys import Keys
from codemojex.values.bounds import within
from codemojex.values.redistypes import AnyRedis
from codemojex.values.types import Say as Say  # budget_take.lua's answer, named by its callers

# Each answer spends one of its member's budget in the chat, refilled over the window: a
# few answers a minute; past it one "slow down", then silence (and no audit row). In Redis,
# shared by every process.
BUDGET: Final = 4
BUDGET_MAX: Final = 1000
Budget = Annotated[int, Field(ge=1, le=BUDGET_MAX)]
WINDOW_S: Final = 60


class AnswerBudget:
    def __init__(
        self,
        redis: AnyRedis,
        namespace: str,
        *,
        budget: int = BUDGET,
        window_s: float = WINDOW_S,
    ) -> None:
        self._redis = redis
        self._keys = Keys(namespace)
        self._args = [within(budget, Budget, "budget"), int(window_s * 1000)]
        self._take = scripts.register(redis, "budget_take")

    async def spend(
        self, chat_id: int, member_id: int, *, check: bool = False, update: int | None = None
    ) -> Say:
        """Spend one answer of `member_id` in `chat_id`: what to say to them. With `check`,
        an answer left is found but not spent (past the budget: told, or nothing, as when
        spent). `update`: the message the answer is for; it spends once however often it is
        tried (the door tries an update again after a failure), and is told the same each
        time."""
        marks = None if update is None else [str(update)]
        [said] = await self.spend_many([(chat_id, member_id)], check=check, marks=marks)
        return said

    async def spend_many(
        self,
        members: Sequence[tuple[int, int]],
        *,
        check: bool = False,
        wait_s: float | None = None,
        marks: Sequence[str] | None = None,
    ) -> list[Say]:
        """Spend one answer of each (chat, member), in order, in one call (a member may come
        more than once): what to say for each (`marks`: the update each is for, as `spend`).
        Redis out, or not answering within `wait_s`: everything is said."""
        if not members:
            return []
        keys = [self._keys.answer_budget(chat, member) for chat, member in members]
        everything = [Say.ANSWER] * len(members)
        try:
            async with asyncio.timeout(wait_s):
                said = await self._take(keys=keys, args=[*self._args, int(check), *(marks or ())])
        except TimeoutError as exc:  # slow, not out: nothing to wait for the end of
            OUTAGES.swallow(exc, "the answer budget", "answers given past their budget")
            return everything
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.failed(exc, "the answer budget (answering everyone meanwhile)")
            return everything
        OUTAGES.ok("redis")
        return [Say(int(x)) for x in said]

    async def untell(self, chat_id: int, member_id: int) -> None:
        """The notice could not be posted: the next occasion may tell them again."""
        try:
            await self._redis.hdel(self._keys.answer_budget(chat_id, member_id), "told")
        except Exception as exc:  # they are told again when the budget is whole again
            OUTAGES.swallow(exc, "the answer budget", "a notice not marked untold")
