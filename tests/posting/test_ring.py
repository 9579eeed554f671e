"""The posting ring: chats with unsent rows take turns, oldest turn first, one sender each
(on the real Redis, fakeredis and a Redis Cluster)."""

from __future__ import annotations

import asyncio

from codemojex.posting.keys import Keys
from codemojex.posting.ring import PostingRing
from codemojex.values.redistypes import AnyRedis

A, B, C = -11, -12, 13
LEASE = 20_000


async def test_chats_take_turns_oldest_first_one_sender_each(
    redis_any: AnyRedis, queue_name: str
) -> None:
    ring = PostingRing(redis_any, queue_name)
    assert await ring.add([A]) == 1
    await asyncio.sleep(0.005)
    assert await ring.add([B, C]) == 2
    first = await ring.take(1, LEASE, "s1")
    assert first.chats == [A]
    assert first.next_ms == 0  # B and C are due
    assert await redis_any.get(Keys(queue_name).chat_lease(A)) == b"s1"
    rest = await ring.take(10, LEASE, "s2")
    assert sorted(rest.chats) == [B, C]
    # Every chat is held: nothing for a third sender, and the next turn is a lease away.
    none = await ring.take(10, LEASE, "s3")
    assert none.chats == [] and none.next_ms is not None and none.next_ms > LEASE - 1000


async def test_a_chat_leaves_the_ring_when_done_unless_given_rows_meanwhile(
    redis_any: AnyRedis, queue_name: str
) -> None:
    ring = PostingRing(redis_any, queue_name)
    await ring.add([A, B])
    taken = await ring.take(2, LEASE, "s1")
    assert sorted(taken.chats) == [B, A]
    await ring.add([B])  # the worker committed rows for B while the sender held it
    assert await ring.release(A, "s1", 0, more=False) == 0
    assert await ring.release(B, "s1", 0, more=False) == 1
    again = await ring.take(10, LEASE, "s2")
    assert again.chats == [B]
    assert await ring.release(B, "s2", 0, more=False) == 0
    assert (await ring.take(10, LEASE, "s3")) == type(again)([], None)


async def test_a_chat_with_more_comes_back_after_its_pace_behind_the_others(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A flooding chat goes round like any other: handed back with more to post, its next
    turn is after the chats that were already waiting."""
    ring = PostingRing(redis_any, queue_name)
    await ring.add([A])
    taken = await ring.take(1, LEASE, "s1")
    await ring.add([B])  # B waits while A posts
    await ring.add([A])  # A is given more (it keeps its place: held, marked dirty)
    await asyncio.sleep(0.005)  # turns are in ms
    assert await ring.release(A, "s1", 0, more=True) == 1
    order = []
    for token in ("s2", "s3"):
        turn = await ring.take(1, LEASE, token)
        order += turn.chats
    assert taken.chats == [A] and order == [B, A]
    # Its pace decides when its next turn comes.
    assert await ring.release(A, "s3", 300, more=True) == 1
    later = await ring.take(5, LEASE, "s4")
    assert later.chats == [] and later.next_ms is not None and 200 < later.next_ms <= 300


async def test_a_dead_senders_chat_comes_round_after_its_lease(
    redis_any: AnyRedis, queue_name: str
) -> None:
    ring = PostingRing(redis_any, queue_name)
    await ring.add([C])
    assert (await ring.take(1, 200, "dead")).chats == [C]
    assert (await ring.take(1, 200, "s2")).chats == []
    await asyncio.sleep(0.25)
    assert (await ring.take(1, LEASE, "s2")).chats == [C]
    # The dead sender's late release changes nothing: the chat is s2's now.
    assert await ring.release(C, "dead", 0, more=False) == -1
    assert await redis_any.get(Keys(queue_name).chat_lease(C)) == b"s2"


async def test_a_chat_that_left_comes_back_when_its_pace_allows(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A chat that posted all it had leaves the ring; given rows again before its pace allows
    a post, its turn is then, behind the chats already waiting (no wasted turn)."""
    ring = PostingRing(redis_any, queue_name)
    await ring.add([A])
    await ring.take(1, LEASE, "s1")
    assert await ring.release(A, "s1", 400, more=False) == 0
    await ring.add([B, A])
    first = await ring.take(5, LEASE, "s2")
    assert first.chats == [B] and first.next_ms is not None and 300 < first.next_ms <= 400
    await asyncio.sleep(0.4)
    assert (await ring.take(5, LEASE, "s3")).chats == [A]


async def test_a_late_holder_handing_rows_back_brings_the_turn_forward_never_later(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A turn that outlived its lease hands its claimed rows back: the turn that took the
    chat meanwhile found them claimed and put the chat off until the claim ran out (or it
    left the ring). The late release brings the chat's turn forward, to now, never later."""
    ring = PostingRing(redis_any, queue_name)
    await ring.add([A, B])
    assert sorted((await ring.take(2, 200, "late")).chats) == [B, A]
    await asyncio.sleep(0.25)
    assert sorted((await ring.take(2, LEASE, "s2")).chats) == [B, A]
    assert await ring.release(A, "s2", 15_000, more=True) == 1  # A's rows still claimed
    assert await ring.release(B, "s2", 0, more=False) == 0  # B found none: it left
    assert await ring.release(A, "late", 0, more=True) == -1
    assert await ring.release(B, "late", 0, more=True) == -1
    assert sorted((await ring.take(5, LEASE, "s3")).chats) == [B, A]
    # Never later: a late holder's "in 15 s" leaves a due chat due.
    await ring.release(A, "s3", 0, more=True)
    assert await ring.release(A, "late", 15_000, more=True) == -1
    assert (await ring.take(5, LEASE, "s4")).chats == [A]
