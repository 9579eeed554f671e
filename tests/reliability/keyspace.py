"""What may be a key name in Redis: the lanes keyspace (codemojex/lanes/keys.py) and the few
`cmx:` keys of the bot and the worker (posting/keys.py, state/keys.py), each built from
branded ids or integers only."""

from __future__ import annotations

import re

from codemojex.lanes import keys as K
from codemojex.values.redistypes import AnyRedis

_ID = r"[0-9A-HJKMNP-TV-Z]{26}"


def cmx_patterns(queue: str) -> list[re.Pattern[str]]:
    tag = re.escape(f"cmx:{{{queue}}}:")
    return [
        re.compile(rf"{tag}(flood|paused):PLR{_ID}\Z"),
        re.compile(rf"{tag}pace:(c|m|a):-?\d+\Z"),
        re.compile(rf"{tag}pace:b:\d+:(s|rate|block)\Z"),
        re.compile(rf"{tag}pace:block:c:-?\d+\Z"),
        re.compile(rf"{tag}answers:-?\d+:-?\d+\Z"),
        re.compile(rf"{tag}members:-\d+\Z"),
        re.compile(rf"{tag}send:(lease|posted|sending):-?\d+\Z"),
        re.compile(rf"{tag}send:(ring|dirty|cool)\Z"),
        re.compile(rf"{tag}tap:draft:\d+:\d+\Z"),
        re.compile(rf"{tag}tap:rate:\d+\Z"),
        re.compile(rf"{tag}tap:seen:[0-9a-f]{{24}}\Z"),
        re.compile(rf"{tag}seen:-?\d+:\d+\Z"),
        re.compile(rf"{tag}inbox:(parked|where|holders|fences|dead)\Z"),
        re.compile(rf"{tag}inbox:key:[a-z]+(:-?\d+)+\Z"),
        re.compile(rf"{tag}inbox:held:([0-9a-f]{{16}}|-)\Z"),
        re.compile(rf"{tag}poller:\d+(:fence)?\Z"),
        re.compile(rf"{tag}inline:rate:\d+\Z"),
        re.compile(rf"{tag}daily:(board|played|built|rebuild):\d{{8}}\Z"),
        re.compile(rf"{tag}ops:procs\Z"),
        re.compile(rf"{tag}ops:proc:[0-9a-f]{{16}}\Z"),
        re.compile(rf"{tag}room:-?\d+:\d+\Z"),
        re.compile(rf"{tag}card:ROM{_ID}(:(gen|seats|bans|names))?\Z"),
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
