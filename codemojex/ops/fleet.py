"""Every bot and worker process publishes a few of its counters to Redis; the ops page reads
them all. So the page charts guesses scored per second and wait percentiles for the whole
deployment without a Prometheus, and without knowing where the processes run.

A process writes one hash (`Keys.proc`) every PUBLISH_S, which expires after
STALE_S: a process that died drops out by itself. Counters only grow within a process's
life; a restarted process is a new id, so the page takes rates per process (ops/page/history).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import CollectorRegistry
from redis.typing import EncodableT

from codemojex.outages import OUTAGES
from codemojex.state.keys import Keys
from codemojex.values.redistypes import AnyRedis

# The series the ops page charts (sample names, i.e. with _total, _bucket, ...).
# Each process publishes its counters every PUBLISH_S; one silent for STALE_S is gone.
PUBLISH_S: Final = 5.0
STALE_S: Final = 30.0
PUBLISHED: Final = frozenset(
    {
        "codemojex_guesses_scored_total",
        "codemojex_guesses_total",
        "codemojex_guess_wait_seconds_bucket",
        "codemojex_guess_wait_seconds_count",
        "codemojex_telegram_retry_after_total",
        "codemojex_posts_total",
        "codemojex_outages_total",
    }
)


def series(name: str, labels: dict[str, str]) -> str:
    """`name{a="x",b="y"}`, labels sorted: the field name of one series."""
    inside = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inside}}}"


def samples(registry: CollectorRegistry, names: Iterable[str] = PUBLISHED) -> dict[str, float]:
    wanted = set(names)
    return {
        series(s.name, s.labels): float(s.value)
        for metric in registry.collect()
        for s in metric.samples
        if s.name in wanted
    }


@dataclass(frozen=True, slots=True)
class Proc:
    """A live process as the ops page sees it."""

    id: str
    kind: str
    host: str
    pid: int
    since_ms: int
    at_ms: int
    values: dict[str, float]


class Publisher:
    """Publishes `registry`'s PUBLISHED series as process `kind` until stopped."""

    def __init__(self, redis: AnyRedis, queue: str, kind: str, registry: CollectorRegistry) -> None:
        self.redis = redis
        self.keys = Keys(queue)
        self.kind = kind
        self.registry = registry
        self.id = secrets.token_hex(8)
        self.since_ms = int(time.time() * 1000)

    async def publish(self) -> None:
        now = int(time.time() * 1000)
        fields: dict[EncodableT, EncodableT] = {
            "_kind": self.kind,
            "_host": socket.gethostname(),
            "_pid": os.getpid(),
            "_since": self.since_ms,
            "_at": now,
        }
        fields.update(samples(self.registry))
        key = self.keys.proc(self.id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.hset(key, mapping=fields)
            pipe.pexpire(key, int(STALE_S * 1000))
            pipe.zadd(self.keys.procs, {self.id: now})
            await pipe.execute()

    async def run(self, stop: asyncio.Event, every_s: float = PUBLISH_S) -> None:
        while not stop.is_set():
            try:
                await self.publish()
                OUTAGES.ok("redis")
            except Exception as exc:
                if OUTAGES.failed(exc, "the ops publisher") is None:
                    raise
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)

    async def withdraw(self) -> None:
        """A clean stop: the process leaves the page at once."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.proc(self.id))
            pipe.zrem(self.keys.procs, self.id)
            await pipe.execute()


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def read_fleet(redis: AnyRedis, queue: str) -> list[Proc]:
    """The processes that published within STALE_S (gone ones are dropped)."""
    keys = Keys(queue)
    now = int(time.time() * 1000)
    await redis.zremrangebyscore(keys.procs, "-inf", now - int(STALE_S * 1000))
    ids = [_s(i) for i in await redis.zrange(keys.procs, 0, -1)]
    async with redis.pipeline(transaction=False) as pipe:
        for proc_id in ids:
            pipe.hgetall(keys.proc(proc_id))
        hashes = await pipe.execute()
    out = []
    for proc_id, raw in zip(ids, hashes, strict=True):
        if not raw:
            continue
        fields = {_s(k): _s(v) for k, v in raw.items()}
        out.append(
            Proc(
                proc_id,
                fields.pop("_kind", "?"),
                fields.pop("_host", "?"),
                int(fields.pop("_pid", "0")),
                int(fields.pop("_since", "0")),
                int(fields.pop("_at", "0")),
                {k: float(v) for k, v in fields.items()},
            )
        )
    return out
