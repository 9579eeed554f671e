"""The answer budget (state/budget.py): a few answers per member per chat, then one notice,
then silence until the budget is whole again; shared by every process through Redis (the real
Redis, fakeredis and a Redis Cluster), and answering everyone while Redis is away."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from codemojex.state.budget import AnswerBudget
from codemojex.values.redistypes import AnyRedis
from codemojex.values.types import Say

CHAT, OTHER_CHAT = -1001, -1002
ANN, BOB = 7, 8


async def test_a_few_answers_then_one_notice_then_silence_until_it_is_whole(
    redis_any: AnyRedis, queue_name: str
) -> None:
    budget = AnswerBudget(redis_any, queue_name, budget=3, window_s=0.6)
    said = [await budget.spend(CHAT, ANN) for _ in range(6)]
    assert said == [Say.ANSWER] * 3 + [Say.NOTICE] + [Say.NOTHING] * 2
    # One answer's worth has come back (0.2 s), but not the whole budget: still silence.
    await asyncio.sleep(0.25)
    assert await budget.spend(CHAT, ANN) is Say.NOTHING
    await asyncio.sleep(0.4)
    assert [await budget.spend(CHAT, ANN) for _ in range(4)] == [Say.ANSWER] * 3 + [Say.NOTICE]


async def test_each_member_of_each_chat_has_a_budget_of_their_own_in_every_process(
    redis_any: AnyRedis, queue_name: str
) -> None:
    one = AnswerBudget(redis_any, queue_name, budget=1, window_s=60)
    other = AnswerBudget(redis_any, queue_name, budget=1, window_s=60)  # another process
    assert await one.spend(CHAT, ANN) is Say.ANSWER
    assert await other.spend(CHAT, ANN) is Say.NOTICE
    assert await one.spend(CHAT, BOB) is Say.ANSWER
    assert await other.spend(OTHER_CHAT, ANN) is Say.ANSWER


async def test_a_check_finds_an_answer_without_spending_it_and_tells_past_the_budget(
    redis_any: AnyRedis, queue_name: str
) -> None:
    budget = AnswerBudget(redis_any, queue_name, budget=2, window_s=60)
    assert [await budget.spend(CHAT, ANN, check=True) for _ in range(5)] == [Say.ANSWER] * 5
    assert [await budget.spend(CHAT, ANN) for _ in range(2)] == [Say.ANSWER] * 2
    assert [await budget.spend(CHAT, ANN, check=True) for _ in range(2)] == [
        Say.NOTICE,
        Say.NOTHING,
    ]
    assert await budget.spend(CHAT, ANN) is Say.NOTHING


async def test_many_answers_are_spent_in_one_call_in_order(
    redis_any: AnyRedis, queue_name: str
) -> None:
    budget = AnswerBudget(redis_any, queue_name, budget=2, window_s=60)
    said = await budget.spend_many([(CHAT, ANN), (CHAT, BOB), (CHAT, ANN), (CHAT, ANN)] * 2)
    ann, bob = [said[i] for i in (0, 2, 3, 4, 6, 7)], [said[i] for i in (1, 5)]
    assert ann == [Say.ANSWER, Say.ANSWER, Say.NOTICE, Say.NOTHING, Say.NOTHING, Say.NOTHING]
    assert bob == [Say.ANSWER, Say.ANSWER]


async def test_a_notice_that_could_not_be_posted_is_given_again(
    redis_any: AnyRedis, queue_name: str
) -> None:
    budget = AnswerBudget(redis_any, queue_name, budget=1, window_s=60)
    assert [await budget.spend(CHAT, ANN) for _ in range(3)] == [
        Say.ANSWER,
        Say.NOTICE,
        Say.NOTHING,
    ]
    await budget.untell(CHAT, ANN)
    assert [await budget.spend(CHAT, ANN) for _ in range(2)] == [Say.NOTICE, Say.NOTHING]


async def test_the_budget_leaves_nothing_behind_once_whole(
    redis_any: AnyRedis, queue_name: str
) -> None:
    budget = AnswerBudget(redis_any, queue_name, budget=2, window_s=0.2)
    for _ in range(4):
        await budget.spend(CHAT, ANN)
    await asyncio.sleep(0.3)
    assert [k async for k in redis_any.scan_iter(match=f"cmx:{{{queue_name}}}:answers:*")] == []


async def test_without_redis_everyone_is_answered(
    redis_down: aioredis.Redis, queue_name: str
) -> None:
    budget = AnswerBudget(redis_down, queue_name, budget=1, window_s=60)
    assert [await budget.spend(CHAT, ANN) for _ in range(3)] == [Say.ANSWER] * 3
