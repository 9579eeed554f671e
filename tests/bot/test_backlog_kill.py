"""A real `codemojex bot` process killed while it drains a backlog waiting at the stand-in,
then restarted: every guess is in the lanes exactly once. The stand-in confirms as Telegram
does (tests/standin/test_confirm.py), so whatever the bot had not confirmed comes again, and
whatever it had confirmed must already be stored.

SIGKILL, polling and webhook: the restarted bot gets again what the dead one held, and the
job id derived from the guess's origin makes a guess handled twice one job. SIGTERM: the bot
finishes what it holds and confirms exactly that; the restarted bot takes the rest.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bench.backlog_world import Backlog, BacklogPlan, BotProcess, Tally, bot_env, eventually_true
from codemojex.db import make_engine, make_sessionmaker
from codemojex.lanes import Lanes
from codemojex.standin import StandIn
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, free_port, wipe_tables

# 3,000 guesses in 40 rooms of 5 players, 15 each (the lane depth is 20).
PLAN = BacklogPlan(groups=40, players=5, per_player=15)


class Drain:
    """The stand-in with the backlog typed, the lanes, and the bot processes started on it."""

    def __init__(
        self, standin: StandIn, backlog: Backlog, lanes: Lanes, env: dict[str, str], log: Path
    ) -> None:
        self.standin, self.backlog, self.lanes = standin, backlog, lanes
        self.env, self.log = env, log
        self.bots: list[BotProcess] = []

    async def start_bot(self) -> BotProcess:
        bot = BotProcess(self.env, self.log)
        self.bots.append(bot)
        await bot.start()
        return bot

    async def taken(self) -> int:
        return (await self.lanes.stats()).pending

    async def until_taken(self, at_least: int, timeout_s: float = 45) -> int:
        async def enough() -> bool:
            return await self.taken() >= at_least

        await eventually_true(enough, timeout_s, f"{at_least} guesses taken")
        return await self.taken()

    async def drained(self, timeout_s: float = 45) -> Tally:
        async def confirmed() -> bool:
            return self.standin.pending_updates == 0

        try:
            await eventually_true(confirmed, timeout_s, "every update confirmed", every_s=0.05)
        except TimeoutError as exc:
            # What a stuck drain looked like: the stand-in's side, the lanes', the bot's.
            raise TimeoutError(
                f"{exc}; {self.standin.pending_updates} unconfirmed, {await self.taken()} "
                f"taken, {self.standin.webhook_posts} webhook posts; the bot's output: "
                f"{self.bots[-1].output()[-2000:]}"
            ) from exc
        return await self.backlog.tally(self.lanes)


@pytest.fixture
async def drain(
    request: pytest.FixtureRequest, bot_database_url: str, bot_queue: str, tmp_path: Path
) -> AsyncIterator[Drain]:
    mode = request.param
    queue = f"{bot_queue}{mode[0]}"
    engine = make_engine(bot_database_url)
    await wipe_tables(engine)
    redis = aioredis.Redis.from_url(REDIS_URL)
    standin = StandIn()
    await standin.start()
    backlog = Backlog(PLAN, standin)
    backlog.add_people()
    await backlog.open_rounds(make_sessionmaker(engine))
    assert backlog.type_guesses() == PLAN.guesses
    env = bot_env(
        standin,
        redis_url=REDIS_URL,
        database_url=bot_database_url,
        queue=queue,
        mode=mode,
        webhook_port=free_port(),
    )
    state = Drain(standin, backlog, Lanes(redis, queue=queue), env, tmp_path / "bot.log")
    try:
        yield state
    finally:
        for bot in state.bots:
            await bot.ensure_gone()
        await standin.stop()
        await drop_keys(redis, queue)
        await redis.aclose()
        await engine.dispose()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("drain", ["polling", "webhook"], indirect=True)
async def test_a_bot_killed_mid_backlog_loses_no_guess_and_takes_none_twice(
    drain: Drain,
) -> None:
    first = await drain.start_bot()
    await drain.until_taken(PLAN.guesses // 3)
    first.signal(signal.SIGKILL)
    assert await first.wait() == -signal.SIGKILL
    at_kill = await drain.taken()
    assert at_kill < PLAN.guesses, "the backlog drained before the kill"
    unconfirmed = drain.standin.pending_updates
    # What the dead bot had confirmed is stored: Telegram will not send it again.
    assert PLAN.guesses - unconfirmed <= at_kill, (unconfirmed, at_kill)

    second = await drain.start_bot()
    tally = await drain.drained()
    assert tally == Tally(taken=PLAN.guesses, lost=0, twice=0), first.output()[-3000:]
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0, second.output()[-3000:]
    print(f"\nkilled at {at_kill} taken, {unconfirmed} unconfirmed; after the restart {tally}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("drain", ["polling"], indirect=True)
async def test_a_bot_stopped_mid_backlog_confirms_exactly_what_it_finished(
    drain: Drain,
) -> None:
    first = await drain.start_bot()
    await drain.until_taken(PLAN.guesses // 3)
    first.signal(signal.SIGTERM)
    assert await first.wait() == 0, first.output()[-3000:]
    taken = await drain.taken()
    assert taken < PLAN.guesses, "the backlog drained before the stop"
    # Every update it confirmed was handled, and every one it handled was confirmed: the
    # updates still waiting at Telegram are exactly the guesses not in the lanes.
    assert drain.standin.pending_updates == PLAN.guesses - taken, first.output()[-3000:]
    assert "updates not finished" not in first.output()
    assert "not confirmed" not in first.output()

    second = await drain.start_bot()
    assert await drain.drained() == Tally(taken=PLAN.guesses, lost=0, twice=0)
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0
