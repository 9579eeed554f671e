"""One order per key across processes, as deployed: real `codemojex bot` processes on the
stand-in. A chat's admin commands apply in the order sent whichever process holds them:

- two webhook processes behind a round-robin balancer (deploy/nginx): an admin's `/ban`,
  waiting for Telegram's admin list past its deadline, is parked in one process and answered;
  the chat's next update, another admin's `/unban`, goes to the other process, which must
  not run it before the `/ban`;
- a poller SIGKILLed while it holds the parked `/ban`: the standby that takes over takes the
  `/ban` before it fetches the `/unban`.

Either way Alice ends unbanned, as the two admins meant. And a player's order: a poller
SIGKILLed holding Alice's parked guess (her room's card had to be read from Postgres, where
the rooms table was locked); her next guess, fetched by the standby, reaches her lane after
it; and through two webhook processes: her guess parked in one (then frozen, SIGSTOP), her
next guess handed to the other, whose admission finds the older one parked and parks it behind
instead."""

from __future__ import annotations

import random
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from sqlalchemy import func, select

from bench.backlog_world import BotProcess, bot_env, eventually_true
from codemojex import usecases
from codemojex.db import Round, make_engine, make_sessionmaker, store
from codemojex.game import texts
from codemojex.lanes import Lanes
from codemojex.limits import ROOM
from codemojex.locale import EN
from codemojex.standin import StandIn
from codemojex.state.keys import Keys
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import valid_guess
from tests.bot.test_two_processes import Balancer, balanced
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, free_port, wipe_tables

ADMIN, DAVE, ALICE = 7401, 7402, 7403
CHAT = -1_007_400_000_001
# The /ban's admin list comes this late: past the deadline, so the /ban is parked.
SLOW_ADMIN_LIST_S = 4.0
DEADLINE = {"CODEMOJEX_BOT_UPDATE_DEADLINE_S": "0.5"}


class Stage:
    """The stand-in, the database and the processes of one test."""

    def __init__(self, standin: StandIn, database_url: str, queue: str) -> None:
        self.standin = standin
        self.database_url = database_url
        self.queue = queue
        self.engine = make_engine(database_url)
        self.sessionmaker = make_sessionmaker(self.engine)
        self.redis = aioredis.Redis.from_url(REDIS_URL)
        self.logs = Path(tempfile.mkdtemp(prefix="cmx-order-"))
        self.bots: list[BotProcess] = []

    async def bot(self, mode: str = "polling", webhook_port: int = 0, **env: str) -> BotProcess:
        process = BotProcess(
            bot_env(
                self.standin,
                redis_url=REDIS_URL,
                database_url=self.database_url,
                queue=self.queue,
                mode=mode,
                webhook_port=webhook_port,
                **DEADLINE,
                **env,
            ),
            self.logs / f"bot-{len(self.bots)}.log",
        )
        self.bots.append(process)
        await process.start()
        return process

    async def poller_and_standby(self) -> tuple[BotProcess, BotProcess]:
        """Two polling bot processes: the first polls, the second stands by."""
        first = await self.bot()

        async def polling() -> bool:
            return "polling Telegram" in first.output()

        await eventually_true(polling, 60, "the first bot polling")
        second = await self.bot()

        async def standing_by() -> bool:
            return "another process polls this bot" in second.output()

        await eventually_true(standing_by, 60, "the second bot standing by")
        return first, second

    async def round_without_a_card(self) -> Round:
        """A round opened without the bot: no bot process has the room's card, and Redis has
        none either, so Alice's first guess reads the room from Postgres."""
        room = await usecases.ensure_room(
            self.sessionmaker, CHAT, "room", default_ceiling=2,
            round_timeout_s=ROOM.round_timeout_s_max,
        )  # fmt: skip
        rnd = await usecases.start_round(self.sessionmaker, room.id, random.Random(1))
        keys = Keys(self.queue)
        await self.redis.delete(keys.room_of(CHAT, 0), keys.card(room.id))
        return rnd

    async def guess_parked(
        self, rnd: Round, then: Callable[[], Awaitable[None]]
    ) -> tuple[int, int]:
        """Alice's guess parked (the rooms table locked while her room is read), confirmed;
        `then()` with the lock still held; then, the lock let go, her next guess. Both
        message ids."""
        url = self.database_url.replace("postgresql+asyncpg", "postgresql")
        holder = await asyncpg.connect(url)
        try:
            lock = holder.transaction()
            await lock.start()
            await holder.execute("LOCK TABLE rooms IN ACCESS EXCLUSIVE MODE")
            parked = self.standin.send_text(CHAT, ALICE, valid_guess(rnd, 1))
            await eventually_true(self.parked, 30, "the guess parked")
            await self.standin.wait_until_delivered(timeout=10)
            await then()
            await lock.rollback()
        finally:
            await holder.close()
        return parked, self.standin.send_text(CHAT, ALICE, valid_guess(rnd, 2))

    async def her_lane(self, count: int) -> list[int]:
        """The message ids in Alice's lane, in its order, once it holds `count`."""
        lanes = Lanes(self.redis, self.queue)

        async def enough() -> bool:
            return len(await _lane(lanes, self.redis)) >= count

        await eventually_true(enough, 60, f"{count} guesses in Alice's lane", 0.1)
        return await _lane(lanes, self.redis)

    async def parked(self) -> bool:
        return bool(await self.redis.hlen(Keys(self.queue).inbox_parked))

    async def guess_to_reply_to(self) -> int:
        """A round in the chat (Alice's /newgame), and a guess of Alice's to reply to."""
        self.standin.send_text(CHAT, ALICE, "/newgame")

        async def round_open() -> bool:
            async with self.sessionmaker() as session:
                count = await session.execute(select(func.count()).select_from(Round))
                return bool(count.scalar())

        await eventually_true(round_open, 60, "a round open")
        async with self.sessionmaker() as session:
            room = await store.room_by_chat(session, CHAT)
            assert room is not None
            rnd = await store.open_round(session, room.id)
            assert rnd is not None
        guess = self.standin.send_text(CHAT, ALICE, valid_guess(rnd))
        await self.standin.wait_until_delivered(timeout=30)
        return guess

    async def ban_then_unban(
        self, guess: int, between: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """ADMIN's /ban, slowed past its deadline by Telegram's admin list, parked and
        confirmed; `between()`, when given; then DAVE's /unban. Both answered, in order:
        Alice ends unbanned."""
        self.standin.inject_latency(
            SLOW_ADMIN_LIST_S, 1, methods=["getChatAdministrators"], chat_id=CHAT
        )
        ban = self.standin.send_text(CHAT, ADMIN, "/ban", reply_to=guess)

        await eventually_true(self.parked, 10, "the /ban parked")
        await self.standin.wait_until_delivered(timeout=10)  # answered, confirmed
        if between is not None:
            await between()
        unban = self.standin.send_text(CHAT, DAVE, "/unban", reply_to=guess)

        def said() -> dict[int | None, str]:
            return {m.reply_to_message_id: m.text for m in self.standin.sent_messages(CHAT)}

        async def both_answered() -> bool:
            return ban in said() and unban in said()

        await eventually_true(both_answered, 60, "the /ban and the /unban answered", 0.1)
        answers = said()
        assert answers.get(ban) == texts.player_banned(EN, "Alice", 1)
        assert answers.get(unban) == texts.player_unbanned(EN, "Alice")
        async with self.sessionmaker() as session:
            room = await store.room_by_chat(session, CHAT)
            assert room is not None
            assert not await store.is_banned(session, room.id, ALICE)

    async def close(self) -> list[str]:
        for bot in self.bots:
            if bot.proc is not None and bot.proc.returncode is None:
                bot.signal(signal.SIGTERM)
        outputs = []
        for bot in self.bots:
            await bot.ensure_gone()
            outputs.append(bot.output())
        await drop_keys(self.redis, self.queue)
        await self.redis.aclose()
        await self.engine.dispose()
        return outputs


@asynccontextmanager
async def stage(database_url: str, queue: str) -> AsyncIterator[Stage]:
    engine = make_engine(database_url)
    await wipe_tables(engine, restart_ids=False)
    await engine.dispose()
    async with StandIn() as standin:
        for user, name in ((ADMIN, "Carol"), (DAVE, "Dave"), (ALICE, "Alice")):
            standin.add_user(user, name)
        standin.add_group(CHAT, "room", admins=[ADMIN, DAVE], members=[ALICE])
        on = Stage(standin, database_url, queue)
        try:
            yield on
        finally:
            for output in await on.close():
                assert "Traceback" not in output, output[-3000:]


@pytest.mark.timeout(180)
async def test_two_webhook_processes_keep_a_chats_order(
    bot_database_url: str, bot_queue: str
) -> None:
    balancer = Balancer([free_port(), free_port()])
    async with stage(bot_database_url, bot_queue) as on, balanced(balancer):
        for port in balancer.ports:
            await on.bot(
                mode="webhook",
                webhook_port=port,
                CODEMOJEX_WEBHOOK_URL=f"http://127.0.0.1:{balancer.port}/telegram/hook",
            )

        async def both_up() -> bool:
            return on.standin.calls["setWebhook"] >= 2

        await eventually_true(both_up, 90, "both bot processes up")
        guess = await on.guess_to_reply_to()
        await on.ban_then_unban(guess)
        turns = [turn for turn, body in balancer.served if "message" in body]
        assert turns[-1] != turns[-2]  # the /ban and the /unban went to different processes


@pytest.mark.timeout(180)
async def test_a_poller_killed_with_a_parked_update_is_followed_in_order(
    bot_database_url: str, bot_queue: str
) -> None:
    async with stage(bot_database_url, bot_queue) as on:
        first, _ = await on.poller_and_standby()
        guess = await on.guess_to_reply_to()

        async def kill_the_first() -> None:
            first.signal(signal.SIGKILL)
            await first.wait(10)

        await on.ban_then_unban(guess, between=kill_the_first)


@pytest.mark.timeout(180)
async def test_a_poller_killed_with_a_players_parked_guess_keeps_her_order(
    bot_database_url: str, bot_queue: str
) -> None:
    async with stage(bot_database_url, bot_queue) as on:
        rnd = await on.round_without_a_card()
        first, _ = await on.poller_and_standby()

        async def kill_the_first() -> None:
            first.signal(signal.SIGKILL)
            await first.wait(10)

        parked, newer = await on.guess_parked(rnd, kill_the_first)
        assert await on.her_lane(2) == [parked, newer]


async def _lane(lanes: Lanes, redis: aioredis.Redis) -> list[int]:
    """The message ids of the guesses in the lanes, in each lane's order (one lane here)."""
    out = []
    snapshot = await lanes.snapshot()
    for view in snapshot["rooms"].values():
        for lane in view["lanes"]:
            for job_id in await redis.zrange(lanes.keys.pending(lane), 0, -1):
                assert isinstance(job_id, bytes)
                payload = await redis.hget(lanes.keys.job(job_id.decode()), "p")
                assert isinstance(payload, bytes)
                out.append(GuessJob.decode(payload).message_id)
    return out


@pytest.mark.timeout(180)
async def test_two_webhook_processes_keep_a_players_order(
    bot_database_url: str, bot_queue: str
) -> None:
    balancer = Balancer([free_port(), free_port()])
    async with stage(bot_database_url, bot_queue) as on, balanced(balancer):
        rnd = await on.round_without_a_card()
        bots = []
        for port in balancer.ports:
            bots.append(
                await on.bot(
                    mode="webhook",
                    webhook_port=port,
                    CODEMOJEX_WEBHOOK_URL=f"http://127.0.0.1:{balancer.port}/telegram/hook",
                )
            )

        async def both_up() -> bool:
            return on.standin.calls["setWebhook"] >= 2

        await eventually_true(both_up, 90, "both bot processes up")

        async def freeze_the_holder() -> None:
            bots[balancer.served[-1][0]].signal(signal.SIGSTOP)  # it holds her guess

        try:
            parked, newer = await on.guess_parked(rnd, freeze_the_holder)
            await on.standin.wait_until_delivered(timeout=30)  # answered by the other
            assert balancer.served[-1][0] != balancer.served[-2][0]
        finally:
            for bot in bots:
                bot.signal(signal.SIGCONT)
        assert await on.her_lane(2) == [parked, newer]
