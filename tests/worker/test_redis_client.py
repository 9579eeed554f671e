"""The Redis client a process builds (codemojex.runtime.redis_client): one server, or a
Redis Cluster with CODEMOJEX_REDIS_CLUSTER=true, whose commands queue for a free slot
instead of failing, and whose first burst of commands is routed by the slot map; either with
a socket and a connect timeout, TCP keepalive and a health check, so that a Redis that stops
answering fails a call within seconds (an outage), never hangs it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import SlotNotCoveredError

from codemojex.lanes import Lanes
from codemojex.outages import outage_of
from codemojex.runtime import (
    REDIS_ADMIN_TIMEOUT_S,
    REDIS_CONNECT_TIMEOUT_S,
    REDIS_HEALTH_CHECK_S,
    REDIS_SOCKET_TIMEOUT_S,
    GatedRedisCluster,
    pool_size,
    redis_client,
)
from codemojex.settings import Settings
from codemojex.values.redistypes import AnyRedis
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, free_port


def test_the_cluster_flag_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMOJEX_REDIS_URL", "redis://10.0.0.7:7000")
    monkeypatch.setenv("CODEMOJEX_REDIS_CLUSTER", "true")
    settings = Settings()
    assert settings.redis_cluster is True
    monkeypatch.delenv("CODEMOJEX_REDIS_CLUSTER")
    assert Settings().redis_cluster is False


async def test_the_client_is_a_cluster_client_only_when_told(
    redis_cluster_url: str, queue_name: str
) -> None:
    single = redis_client(Settings(redis_url=REDIS_URL, concurrency=8).runtime())
    cluster = redis_client(
        Settings(redis_url=redis_cluster_url, redis_cluster=True, concurrency=8).runtime()
    )
    try:
        assert isinstance(single, aioredis.Redis)
        assert isinstance(cluster, GatedRedisCluster)
        key = f"cmx:{{{queue_name}}}:probe"
        assert await cluster.set(key, b"1", ex=60)
        assert await cluster.get(key) == b"1"
        # Sized like the single-node pool (parked consumers hold a connection each).
        assert pool_size(8) == 64
        assert pool_size(100) == 416
    finally:
        await drop_keys(cluster, queue_name)
        await cluster.aclose()
        await single.aclose()


async def test_a_first_burst_of_commands_is_routed_by_the_slot_map(
    redis_cluster_url: str, queue_name: str
) -> None:
    """A worker starting up sends many commands at once before the client knows the slot
    map. Each must still go to the node owning its key: without that, each earns a MOVED,
    and every fifth MOVED rebuilds the client's nodes under the others' feet."""
    client = GatedRedisCluster.from_url(redis_cluster_url, max_in_flight=200)
    try:
        keys = [f"cmx:{{{queue_name}}}:send:lease:{-i}" for i in range(100)]
        results = await asyncio.gather(*(client.set(k, b"t", nx=True, px=5000) for k in keys))
        assert all(results)
        assert client.reinitialize_counter == 0  # no MOVED at all
    finally:
        await drop_keys(client, queue_name)
        await client.aclose()


async def test_commands_beyond_the_gate_wait_instead_of_failing(
    redis_cluster_url: str, queue_name: str
) -> None:
    """Two parked BLPOPs fill a gate of two: a third command waits for one of them (the
    single-node client's blocking pool does the same), and fails only after `wait_s`."""
    wake = f"emq:{{{queue_name}}}:wake"
    patient = GatedRedisCluster.from_url(redis_cluster_url, max_in_flight=2, wait_s=5)
    hasty = GatedRedisCluster.from_url(redis_cluster_url, max_in_flight=2, wait_s=0.2)
    try:
        for client in (patient, hasty):
            await client.initialize()
            parked = [asyncio.ensure_future(client.blpop([wake], timeout=0.6)) for _ in range(2)]
            await asyncio.sleep(0.1)
            started = time.monotonic()
            if client is patient:
                assert await client.get(wake) is None
                assert time.monotonic() - started >= 0.3  # it waited for a BLPOP to end
            else:
                with pytest.raises(RedisConnectionError):
                    await client.get(wake)
                assert time.monotonic() - started < 0.5
            assert await asyncio.gather(*parked) == [None, None]
    finally:
        await patient.aclose()
        await hasty.aclose()


async def test_a_slot_without_a_master_is_an_outage_not_a_bug(
    redis_cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SlotNotCoveredError (no master for the slot, mid-failover) is not a RedisError; it
    comes out of the client as it is, and the one classifier the consumer loop, the sender
    and the bot ask takes it for a Redis outage."""

    async def uncovered(self: RedisCluster, *args: Any, **kwargs: Any) -> Any:
        raise SlotNotCoveredError('Slot "42" not covered by the cluster.')

    client = GatedRedisCluster.from_url(redis_cluster_url, max_in_flight=2)
    try:
        await client.initialize()
        monkeypatch.setattr(RedisCluster, "execute_command", uncovered)
        with pytest.raises(SlotNotCoveredError) as caught:
            await client.get("cmx:{x}:probe")
        assert outage_of(caught.value) == "redis"
    finally:
        monkeypatch.undo()
        await client.aclose()


# --- timeouts: a Redis that stops answering costs seconds ----------------------------------


@contextlib.contextmanager
def redis_server() -> Iterator[subprocess.Popen[bytes]]:
    """A redis-server of the test's own (no persistence) on a free loopback port, stopped by
    its PID: the shared one is never stopped."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    server.port = port  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.send_signal(signal.SIGCONT)
        server.terminate()
        server.wait(10)


async def answering(client: AnyRedis) -> None:
    for _ in range(100):
        with contextlib.suppress(RedisConnectionError, OSError):
            if await client.ping():
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the redis-server did not start")


async def test_a_redis_that_stops_answering_fails_a_call_within_the_socket_timeout() -> None:
    """SIGSTOP: the server's sockets stay open and say nothing, as a Redis that hangs (or a
    host gone without a FIN) does. A call fails as a Redis outage within the socket timeout,
    instead of waiting for ever; once it answers again, the same client goes on."""
    with redis_server() as server:
        client = redis_client(Settings(redis_url=f"redis://127.0.0.1:{server.port}/0").runtime())  # type: ignore[attr-defined]
        lanes = Lanes(client, queue="timeouts")
        try:
            await answering(client)
            assert (await lanes.stats()).pending == 0  # a script call, answered
            server.send_signal(signal.SIGSTOP)
            for call in (client.get("k"), lanes.stats()):
                began = time.monotonic()
                with pytest.raises(Exception) as failed:
                    await asyncio.wait_for(call, REDIS_SOCKET_TIMEOUT_S * 4)
                took = time.monotonic() - began
                assert outage_of(failed.value) == "redis", repr(failed.value)
                assert not isinstance(failed.value, TimeoutError | asyncio.TimeoutError)
                assert took >= REDIS_SOCKET_TIMEOUT_S - 0.5
                assert took <= REDIS_SOCKET_TIMEOUT_S + 2.0, took
            server.send_signal(signal.SIGCONT)
            assert await client.set("k", b"v") and await client.get("k") == b"v"
        finally:
            await client.aclose()


async def test_every_client_a_process_builds_has_the_timeouts(redis_cluster_url: str) -> None:
    """The single-node pool, the cluster client (each node's connections) and the operators'
    client: a socket and a connect timeout, TCP keepalive and a health check."""
    single = redis_client(Settings(redis_url=REDIS_URL, concurrency=8).runtime())
    admin = redis_client(Settings(redis_url=REDIS_URL, concurrency=8).runtime(), admin=True)
    cluster = redis_client(
        Settings(redis_url=redis_cluster_url, redis_cluster=True, concurrency=8).runtime()
    )
    try:
        assert isinstance(single, aioredis.Redis) and isinstance(admin, aioredis.Redis)
        assert isinstance(cluster, RedisCluster)
        await cluster.initialize()
        nodes = cluster.get_nodes()
        assert nodes
        for kwargs in (
            single.connection_pool.connection_kwargs,
            cluster.connection_kwargs,
            *(node.connection_kwargs for node in nodes),
        ):
            assert kwargs["socket_timeout"] == REDIS_SOCKET_TIMEOUT_S
            assert kwargs["socket_connect_timeout"] == REDIS_CONNECT_TIMEOUT_S
            assert kwargs["socket_keepalive"] is True and kwargs["socket_keepalive_options"]
            assert kwargs["health_check_interval"] == REDIS_HEALTH_CHECK_S
        kwargs = admin.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == REDIS_ADMIN_TIMEOUT_S
        # The connections themselves (what redis-py opens from those).
        await single.ping()
        conn = await single.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            assert conn.socket_timeout == REDIS_SOCKET_TIMEOUT_S
            assert conn.health_check_interval == REDIS_HEALTH_CHECK_S
        finally:
            await single.connection_pool.release(conn)
    finally:
        for client in (single, admin, cluster):
            await client.aclose()
