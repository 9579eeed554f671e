"""What may be a key name in Redis: the lanes keyspace (codemojex/lanes/keys.py) and the few
`cmx:` keys of the bot and the worker, each built from branded ids or integers only."""

from __future__ import annotations

import re
from typing import Any

from codemojex.lanes import keys as K
from codemojex.redistypes import AnyRedis

_ID = r"[0-9A-HJKMNP-TV-Z]{26}"


def cmx_patterns(queue: str) -> list[re.Pattern[str]]:
    tag = re.escape(f"cmx:{{{queue}}}:")
    return [
        re.compile(rf"{tag}(flood|paused):PLR{_ID}\Z"),
        re.compile(rf"{tag}pace:c:-?\d+:\d+\Z"),
        re.compile(rf"{tag}pace:g:\d+\Z"),
        re.compile(rf"{tag}pace:block:(c:-?\d+|g)\Z"),
        re.compile(rf"{tag}send:(lease|posted):-?\d+\Z"),
    ]


def stray_keys(keys: list[str], queue: str) -> list[str]:
    """Keys of this queue that are not in the strict keyspace."""
    lanes_keys = K.Keys(queue)
    patterns = cmx_patterns(queue)
    stray = []
    for key in keys:
        if key.startswith("emq:"):
            try:
                lanes_keys.parse(key)
            except Exception:
                stray.append(key)
        elif not any(p.match(key) for p in patterns):
            stray.append(key)
    return stray


async def queue_keys(client: AnyRedis, queue: str) -> list[str]:
    found: list[str] = []
    for pattern in (f"emq:{{{queue}}}:*", f"cmx:{{{queue}}}:*"):
        found += [k.decode() async for k in client.scan_iter(match=pattern, count=1000)]
    return sorted(found)


async def dump(client: AnyRedis, queue: str) -> dict[str, Any]:
    """Every key of the queue with its type and full content (TTLs aside)."""
    out: dict[str, Any] = {}
    for key in await queue_keys(client, queue):
        kind_raw = await client.type(key)
        kind = kind_raw.decode() if isinstance(kind_raw, bytes) else str(kind_raw)
        value: Any
        if kind == "string":
            value = await client.get(key)
        elif kind == "hash":
            value = await client.hgetall(key)
        elif kind == "list":
            value = await client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(await client.smembers(key))
        elif kind == "zset":
            value = await client.zrange(key, 0, -1, withscores=True)
        else:
            value = kind
        out[key] = (kind, value)
    return out
