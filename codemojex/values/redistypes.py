"""The Redis clients Codemojex accepts: one Redis server, or a Redis Cluster.

Everything that talks to Redis (the lanes, the pacer, the sender, the bot's notice flags)
takes an `AnyRedis`. Both clients speak the same commands; on a cluster every multi-key
command and script keeps its keys in one hash slot (they all carry the `{<queue>}` hash
tag), and every pipeline is either non-transactional or touches one key.
"""

from __future__ import annotations

from typing import TypeAlias

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

AnyRedis: TypeAlias = Redis | RedisCluster
