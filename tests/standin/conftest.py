"""A running stand-in and a real PTB Bot talking to it over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from telegram import Bot

from codemojex.standin import StandIn

GROUP = -1001234567890
OTHER_GROUP = -1009876543210
OWNER, ADMIN, ALICE, BOB = 11, 12, 21, 22


@pytest.fixture
async def standin() -> AsyncIterator[StandIn]:
    server = StandIn()
    await server.start()
    server.add_user(OWNER, "Olga", "olga")
    server.add_user(ADMIN, "Adam", "adam")
    server.add_user(ALICE, "Alice", "alice")
    server.add_user(BOB, "Bob")
    server.add_group(GROUP, "Emoji Club", admins=[OWNER, ADMIN], members=[ALICE, BOB])
    server.add_group(OTHER_GROUP, "Quiet Room", admins=[OWNER], kind="group")
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def bot(standin: StandIn) -> AsyncIterator[Bot]:
    async with Bot(
        standin.token, base_url=standin.base_url, base_file_url=standin.base_file_url
    ) as client:
        yield client
