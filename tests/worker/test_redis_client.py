"""The Redis client a process builds (codemojex.runtime.redis_client): one server, or a
Redis Cluster with CODEMOJEX_REDIS_CLUSTER=true, whose commands queue for a free slot
instead of failing, and whose first burst of commands is routed by the slot map."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import SlotNotCoveredError

from codemojex.outages import outage_of
from codemojex.runtime import GatedRedisCluster, pool_size, redis_client
from codemojex.settings import Settings
from tests.conftest import REDIS_URL
from tests.support import drop_keys


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
    single = redis_client(Settings(redis_url=REDIS_URL, concurrency=8))
    cluster = redis_client(Settings(redis_url=redis_cluster_url, redis_cluster=True, concurrency=8))
    try:
        assert isinstance(single, aioredis.Redis)
        assert isinstance(cluster, GatedRedisCluster)
        key = f"cmx:{{{queue_name}}}:probe"
        assert await cluster.set(key, b"1", ex=60)
        assert await cluster.get(key) == b"1"
        # Sized like the single-node pool (parked consumers hold a connection each).
        assert pool_size(Settings(concurrency=8)) == 64
        assert pool_size(Settings(concurrency=100)) == 416
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
