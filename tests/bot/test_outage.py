"""Redis away at the bot while guesses arrive: backpressure, never loss. Nothing is confirmed
to Telegram that is not stored; when Redis is back every guess is in its lane exactly once, in
each player's order, and each player heard at most once that the game is catching up.

A redis-server of the test's own (AOF on, in a directory of the test's), stopped and started
again with its data on the same port: the shared one is never touched."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from codemojex.game import texts
from codemojex.locale import EN
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import (
    ALICE,
    BOB,
    MAX_DEPTH,
    World,
    bot_world,
    ready_client,
    seed_round,
    valid_guess,
)
from tests.helpers.support import free_port

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]


class OwnRedis:
    """A redis-server on a port and in a directory of the test's, that keeps its data (AOF)
    across a stop and a start."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.directory), "--appendonly", "yes", "--save", ""],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> None:
        """SIGTERM: Redis writes its AOF and exits, as a restart does."""
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
            self._process = None


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


SECRET = "s3cret-Token_for-the-outage-test-0123456789"


@pytest_asyncio.fixture(loop_scope="module", params=["polling", "webhook"])
async def world(
    request: pytest.FixtureRequest, bot_database_url: str, queue_name: str, own_redis: OwnRedis
) -> AsyncIterator[World]:
    """Polling (the window holds while Redis cannot keep anything) and webhook (503 with a
    Retry-After: the stand-in sends it again, as Telegram does)."""
    webhook: dict[str, Any] = {}
    if request.param == "webhook":
        port = free_port()
        webhook = {
            "webhook": True,
            "webhook_url": f"http://127.0.0.1:{port}/hook",
            "webhook_secret": SECRET,
            "webhook_port": port,
        }
    client = await ready_client(own_redis.url)
    async with bot_world(bot_database_url, queue_name, redis=client, **webhook) as world:
        yield world


async def test_guesses_sent_while_redis_is_away_are_all_taken_once_it_is_back(
    world: World, own_redis: OwnRedis
) -> None:
    chats = [world.new_group() for _ in range(3)]
    rounds = {chat: (await seed_round(world, chat))[1] for chat in chats}
    # The message ids of each player's guesses in each round, in the order typed.
    sent: dict[tuple[int, int], list[int]] = {}

    def guess(chat: int, player: int, n: int) -> None:
        mid = world.standin.send_text(chat, player, valid_guess(rounds[chat], n))
        sent.setdefault((player, rounds[chat].id), []).append(mid)

    for chat in chats:
        for player in (ALICE, BOB):
            guess(chat, player, 0)
    await world.standin.wait_until_delivered(timeout=20)
    await world.settle()
    assert await world.queued() == 6

    own_redis.stop()
    for n in range(1, MAX_DEPTH):  # guesses keep coming while Redis is away
        for chat in chats:
            for player in (ALICE, BOB):
                guess(chat, player, n)
        await asyncio.sleep(0.5)
    # Held past its deadline, each chat hears that the game is catching up (once a player).
    for chat in chats:
        await world.standin.wait_for_sent(
            lambda m: m.text == texts.catching_up(EN), 20, chat_id=chat
        )
    # Nothing that was not stored was confirmed: Telegram still has them.
    assert world.standin.pending_updates > 0
    own_redis.start()

    await world.standin.wait_until_delivered(timeout=30)
    await world.settle()
    taken: dict[tuple[int, int], list[int]] = {}
    while (job := await world.lanes.claim(10_000)) is not None:
        payload = GuessJob.decode(job.payload)
        taken.setdefault((payload.user_id, payload.round_id), []).append(payload.message_id)
        await world.lanes.ack(job)
    # Every guess exactly once, each player's in the order typed.
    assert taken == sent
    # One notice to each player held (each a player's first guess held past its deadline),
    # and no other answer.
    said = [m for chat in chats for m in world.said(chat)]
    assert {m.text for m in said} == {texts.catching_up(EN)}
    typed_by = {mid: player for (player, _), mids in sent.items() for mid in mids}
    told = Counter((m.chat_id, typed_by[m.reply_to_message_id or 0]) for m in said)
    assert all(n == 1 for n in told.values()), told
    assert world.errors == []
