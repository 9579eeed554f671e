"""A group's members as the bot saw them (state/members.py): bounded to the last seen,
expiring on the caller's clock, the set itself gone with its last member's time; on the real
Redis, fakeredis and a Redis Cluster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from codemojex.state.keys import Keys
from codemojex.state.members import GroupMembers
from codemojex.values.redistypes import AnyRedis

GROUP, OTHER = -100555, -100556
T0 = datetime(2026, 3, 14, 12, tzinfo=UTC)


async def test_a_group_keeps_its_last_seen_members_for_their_ttl(
    any_redis: AnyRedis, queue_name: str
) -> None:
    members = GroupMembers(any_redis, queue_name, most=3, ttl_s=600)
    for n, user in enumerate((11, 12, 13, 14)):
        await members.seen(GROUP, user, T0 + timedelta(minutes=n))
    await members.seen(OTHER, 11, T0)
    await members.seen(GROUP, 12, T0 + timedelta(minutes=4))  # seen again: the latest
    now = T0 + timedelta(minutes=5)
    assert await members.of(GROUP, now) == [12, 14, 13]  # 11: past the bound
    assert await members.of(OTHER, now) == [11]
    # ten minutes after each was last seen, each is forgotten
    assert await members.of(GROUP, T0 + timedelta(minutes=12, seconds=30)) == [12, 14]
    assert await members.of(GROUP, T0 + timedelta(minutes=14)) == []
    await members.forget(GROUP, 14)
    assert await members.of(GROUP, now) == [12, 13]
    pttl = await any_redis.pttl(Keys(queue_name).group_members(GROUP))
    assert 0 < pttl <= 600_000  # the set goes with its last member


async def test_a_note_rides_in_the_callers_round_trip(any_redis: AnyRedis, queue_name: str) -> None:
    members = GroupMembers(any_redis, queue_name)
    key = Keys(queue_name).prefix + "other"
    async with any_redis.pipeline(transaction=True) as pipe:
        pipe.set(key, 1, ex=60)
        members.add_to(pipe, GROUP, 21, T0)
        await pipe.execute()
    assert await members.of(GROUP, T0) == [21]
