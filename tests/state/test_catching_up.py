"""The catching-up notice's flag (state/flags.py `CatchingUp`) when Redis answers some of an
outage's tries and not others (a slot migrating, a failover): the member is told once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from codemojex.state.flags import CatchingUp
from tests.conftest import REDIS_URL
from tests.helpers.support import free_port
from tests.ops.proxy import TcpProxy


@pytest.fixture
async def cut() -> AsyncIterator[tuple[TcpProxy, aioredis.Redis]]:
    """A client of the machine's Redis through a proxy the test stops and starts."""
    target = aioredis.Redis.from_url(REDIS_URL).connection_pool.connection_kwargs
    proxy = TcpProxy(free_port(), str(target["host"]), int(target["port"]))
    await proxy.start()
    client = aioredis.Redis(
        host="127.0.0.1", port=proxy.port, socket_timeout=1, socket_connect_timeout=1
    )
    try:
        yield proxy, client
    finally:
        await client.aclose()
        await proxy.stop()


async def test_told_through_redis_then_cut_off_is_not_told_again(
    cut: tuple[TcpProxy, aioredis.Redis], queue_name: str
) -> None:
    proxy, client = cut
    flags = CatchingUp(client, queue_name)
    assert await flags.first(-1, 7) is True
    await proxy.stop()
    assert await flags.first(-1, 7) is False  # this try cannot reach the flag
    await proxy.start()
    assert await flags.first(-1, 7) is False


async def test_told_while_cut_off_then_through_redis_is_not_told_again(
    cut: tuple[TcpProxy, aioredis.Redis], queue_name: str
) -> None:
    proxy, client = cut
    flags = CatchingUp(client, queue_name)
    await proxy.stop()
    assert await flags.first(-1, 8) is True  # told, the flag out of reach
    await proxy.start()
    assert await flags.first(-1, 8) is False
