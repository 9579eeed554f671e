"""The answer budget: how many of the bot's answers one member gets in one chat.

Every answer the bot gives (to a command, a refused guess or admin command, a "slow down") is
spent from its member's budget in that chat when it is given, whether or not the pace then
lets it out in time: ANSWER_BUDGET_DEFAULT answers (the setting CODEMOJEX_ANSWER_BUDGET),
refilled evenly over ANSWER_BUDGET_WINDOW_S. Past it the member is told once to slow down,
and then gets no answer at all until the budget is whole again. So a member sending a command
every half second gets a few answers and one notice a minute, and the chat's posts stay free
for its results (the pace, pacer.py, caps what all of a chat's answers together may take; the
budget keeps one member from taking all of that).

In Redis (`lua/budget_take.lua`, key `cmx:{q}:answers:<chat>:<member>`), so every bot process
spends the same budget. While Redis cannot be asked, everyone is answered: the pace, kept by
each process alone meanwhile, still holds the answers to their share of each chat.
"""

from __future__ import annotations

from enum import Enum

from codemojex.limits import ANSWER_BUDGET_DEFAULT, ANSWER_BUDGET_WINDOW_S
from codemojex.outages import OUTAGES, is_outage
from codemojex.posting import scripts
from codemojex.posting.keys import Keys
from codemojex.redistypes import AnyRedis


class Say(Enum):
    """What a member gets for what they sent (budget_take.lua's answer)."""

    NOTHING = 0  # the budget is spent and they were told: silence until it is whole
    ANSWER = 1  # the answer
    NOTICE = 2  # instead of the answer, once: "slow down"


class AnswerBudget:
    def __init__(
        self,
        redis: AnyRedis,
        namespace: str,
        *,
        budget: int = ANSWER_BUDGET_DEFAULT,
        window_s: float = ANSWER_BUDGET_WINDOW_S,
    ) -> None:
        self._redis = redis
        self._keys = Keys(namespace)
        self._args = [budget, int(window_s * 1000)]
        self._take = scripts.register(redis, "budget_take")

    async def spend(self, chat_id: int, member_id: int) -> Say:
        """Spend one answer of `member_id` in `chat_id`: what to say to them."""
        try:
            said = await self._take(
                keys=[self._keys.answer_budget(chat_id, member_id)], args=self._args
            )
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.failed(exc, "the answer budget (answering everyone meanwhile)")
            return Say.ANSWER
        OUTAGES.ok("redis")
        return Say(int(said))

    async def untell(self, chat_id: int, member_id: int) -> None:
        """The notice could not be posted: the next occasion may tell them again."""
        try:
            await self._redis.hdel(self._keys.answer_budget(chat_id, member_id), "told")
        except Exception as exc:  # they are told again when the budget is whole again
            OUTAGES.swallow(exc, "the answer budget", "a notice not marked untold")
