"""Helpers the tests share, defined once: free ports, `codemojex` as a process of this
checkout, a queue's keys (dump and drop), table wipes and guess builders. Fixtures stay in the
conftest files; these are plain functions."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from codemojex.db import Base
from codemojex.lanes.keys import Keys
from codemojex.values.redistypes import AnyRedis

# --- ports ----------------------------------------------------------------------------------


def free_port() -> int:
    """A loopback TCP port the OS just handed out. The probe socket is closed again, so
    nothing listens there: connections are refused until someone binds it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- processes ------------------------------------------------------------------------------

# The checkout these tests belong to (the one under test).
ROOT = Path(__file__).resolve().parents[2]


def codemojex_command(*args: str) -> list[str]:
    """`codemojex ARGS` as a process of the checkout under test: this interpreter running the
    CLI module, never an entry point that happens to sit beside it (which may belong to another
    install). Start it with `checkout_env`, which puts this checkout first on the path."""
    return [sys.executable, "-m", "codemojex.cli", *args]


def checkout_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this environment) with this checkout first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + rest if rest else "")
    return env


# --- Redis ----------------------------------------------------------------------------------


async def dump(client: AnyRedis, queue: str, *, cmx: bool = False) -> dict[str, Any]:
    """Every lanes key of the queue (name after `emq:{q}:`) with its contents, typed:
    string -> str, hash -> dict, list -> list, set -> set, zset -> [(member, score), ...].
    Each name must parse as a documented lanes key. With `cmx`, the bot's and the worker's
    `cmx:{q}:` keys too, under their full names. The client must answer bytes
    (decode_responses=False). On a cluster, SCAN visits every master (the queue's keys are
    all on the one owning the `{q}` slot)."""
    keys = Keys(queue)
    out: dict[str, Any] = {}
    c: Any = client  # redis-py types replies as bytes | str; this client returns bytes
    patterns = [keys.prefix + "*"] + ([f"cmx:{{{queue}}}:*"] if cmx else [])
    for pattern in patterns:
        async for raw in c.scan_iter(match=pattern, count=1000):
            name = raw.decode()
            if name.startswith(keys.prefix):
                keys.parse(name)  # every key written must belong to the documented keyspace
            kind = (await c.type(raw)).decode()
            value: Any
            if kind == "none":  # deleted since the SCAN (a pool may be running)
                continue
            if kind == "string":
                value = await c.get(raw)
                if value is None:  # expired since the TYPE (a dedupe window)
                    continue
                value = value.decode()
            elif kind == "hash":
                value = {k.decode(): v.decode() for k, v in (await c.hgetall(raw)).items()}
            elif kind == "list":
                value = [v.decode() for v in await c.lrange(raw, 0, -1)]
            elif kind == "set":
                value = {v.decode() for v in await c.smembers(raw)}
            elif kind == "zset":
                value = [
                    (m.decode(), int(s)) for m, s in await c.zrange(raw, 0, -1, withscores=True)
                ]
            else:  # pragma: no cover - nothing writes another type
                raise AssertionError(f"unexpected type {kind} for {name}")
            out[name.removeprefix(keys.prefix)] = value
    return out


async def drop_keys(client: AnyRedis, queue: str) -> None:
    """Delete this test's keys: the lanes' (`emq:{q}:*`) and the bot's and worker's
    (`cmx:{q}:*`), in one SCAN pass with a large COUNT (the shared Redis holds other runs'
    keys too). On a cluster SCAN visits every master, and the keys share one slot."""
    keys = [key async for key in client.scan_iter(match=f"*:{{{queue}}}:*", count=20_000)]
    if keys:
        await client.delete(*keys)


# --- Postgres -------------------------------------------------------------------------------


async def wipe_tables(engine: AsyncEngine, *, restart_ids: bool = True) -> None:
    """Empty every table of the schema (from the models, so a new table is wiped too).

    By default TRUNCATE ... RESTART IDENTITY (ids count from 1 again), failing loudly after
    10 s rather than hanging if something else holds the tables. `restart_ids=False` runs
    DELETE in dependency order instead: several times faster on tables this small, for a
    fixture that wipes before every test while the bot keeps running.
    """
    tables = Base.metadata.sorted_tables
    async with engine.begin() as conn:
        if not restart_ids:
            for table in reversed(tables):
                await conn.execute(table.delete())
            return
        names = ", ".join(f'"{table.name}"' for table in tables)
        await conn.execute(text("SET LOCAL lock_timeout = '10s'"))
        await conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


# --- guesses --------------------------------------------------------------------------------


def wrong_guess(secret: tuple[str, ...], palette: tuple[str, ...], n: int = 0) -> tuple[str, ...]:
    """A guess from the palette that is not the secret; a different one for each n (the
    n-th code in counting order, the secret skipped)."""
    size = len(palette)
    # Code k has palette[(k // size**i) % size] at position i: the secret is one such code.
    secret_code = sum(palette.index(e) * size**i for i, e in enumerate(secret))
    k = n + 1 if n >= secret_code else n
    return tuple(palette[(k // size**i) % size] for i in range(len(secret)))
