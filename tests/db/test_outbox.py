"""The outbox: pending view, claims (never the same row to two senders), sent exactly once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import Outbox, store
from codemojex.db.engine import Sessions
from codemojex.values.types import KIND_RESULT, KIND_WIN, Message
from tests.helpers import writes

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


async def _fill(session: AsyncSession, n: int, chats: tuple[int, ...] = (-1, -2)) -> list[int]:
    rows = [
        Outbox(chat_id=chats[i % len(chats)], text=f"m{i}", reply_to_message_id=i, kind="notice")
        for i in range(n)
    ]
    session.add_all(rows)
    await session.commit()
    return [r.id for r in rows]


async def test_pending_is_oldest_first_and_filters_by_chat(
    session: AsyncSession, sessions: Sessions
) -> None:
    ids = await _fill(session, 6)
    assert [r.id for r in await store.pending_outbox(session, 10)] == ids
    assert [r.id for r in await store.pending_outbox(session, 2)] == ids[:2]
    assert [r.id for r in await store.pending_outbox(session, 10, chat_id=-2)] == ids[1::2]
    assert await writes.mark_sent(sessions, ids[:3], 900) == 3
    assert [r.id for r in await store.pending_outbox(session, 10)] == ids[3:]


async def test_written_messages_are_pending_in_order(
    session: AsyncSession, sessions: Sessions
) -> None:
    said = [
        Message(-5, "hello", KIND_RESULT, None, reply_to=9, guess_id="g", player_name="Al"),
        Message(-5, "bye", KIND_WIN, None),
    ]
    await writes.write_messages(sessions, said, T0)
    await session.commit()
    first, second = await store.pending_outbox(session, 10)
    assert first.id < second.id
    assert (first.chat_id, first.text, first.reply_to_message_id, first.kind) == (
        -5,
        "hello",
        9,
        KIND_RESULT,
    )
    assert (first.guess_id, first.player_name, second.text, second.kind) == (
        "g",
        "Al",
        "bye",
        KIND_WIN,
    )
    assert first.sent_at is None and first.created_at == T0 and first.created_at.tzinfo


async def test_mark_sent_is_once(session: AsyncSession, sessions: Sessions) -> None:
    [a, b] = await _fill(session, 2)
    assert await writes.mark_sent(sessions, [a], 500, now=T0) == 1
    # Marking again (a retry, a second sender) changes nothing: first send stands.
    assert await writes.mark_sent(sessions, [a, b], 501, now=T0 + timedelta(seconds=5)) == 1
    assert await writes.mark_sent(sessions, [a, b], 502) == 0
    assert await writes.mark_sent(sessions, [], 503) == 0
    rows = {r.id: r for r in (await session.execute(select(Outbox))).scalars()}
    assert (rows[a].sent_at, rows[a].sent_message_id) == (T0, 500)
    assert (rows[b].sent_at, rows[b].sent_message_id) == (T0 + timedelta(seconds=5), 501)


async def test_claim_leases_rows_to_one_owner(session: AsyncSession, sessions: Sessions) -> None:
    ids = await _fill(session, 5)
    first = await writes.claim_outbox(sessions, 3, 30, "sender-a", now=T0)
    assert [r.id for r in first] == ids[:3]
    held = {r.id: r.claimed_by for r in (await session.execute(select(Outbox))).scalars()}
    assert [held[i] for i in ids] == ["sender-a"] * 3 + [None] * 2
    second = await writes.claim_outbox(sessions, 10, 30, "sender-b", now=T0)
    assert [r.id for r in second] == ids[3:]
    assert await writes.claim_outbox(sessions, 10, 30, "sender-c", now=T0) == []
    # sender-a dies; after its lease the rows go to someone else.
    assert await writes.claim_outbox(sessions, 10, 30, "c", now=T0 + timedelta(seconds=29)) == []
    again = await writes.claim_outbox(sessions, 10, 30, "sender-c", now=T0 + timedelta(seconds=31))
    assert [r.id for r in again] == ids
    # Sent rows are never handed out again.
    await writes.mark_sent(sessions, ids[:4], 1)
    later = await writes.claim_outbox(sessions, 10, 30, "sender-d", now=T0 + timedelta(minutes=5))
    assert [r.id for r in later] == ids[4:]


async def test_chats_with_unsent_skips_sent_not_claimed(
    session: AsyncSession, sessions: Sessions
) -> None:
    ids = await _fill(session, 6, chats=(-3, -1, -2))
    assert sorted(await store.chats_with_unsent(session)) == [-3, -2, -1]
    # A claimed chat is still listed: whoever holds the claim may die before posting.
    await writes.claim_outbox(sessions, 10, 30, "a", chat_id=-3, now=T0)
    await writes.mark_sent(sessions, [ids[1], ids[4]], 7)  # both rows of chat -1
    assert sorted(await store.chats_with_unsent(session)) == [-3, -2]
    await writes.mark_sent(sessions, ids, 8)
    assert await store.chats_with_unsent(session) == []


async def test_claim_by_chat_and_release(session: AsyncSession, sessions: Sessions) -> None:
    ids = await _fill(session, 6)
    mine = await writes.claim_outbox(sessions, 10, 30, "a", chat_id=-1, now=T0)
    assert [r.id for r in mine] == ids[0::2]
    # Released (e.g. after a 429) only by its owner, then claimable at once.
    assert await writes.release_outbox(sessions, [r.id for r in mine], "someone-else") == 0
    assert await writes.release_outbox(sessions, [r.id for r in mine], "a") == 3
    assert await writes.release_outbox(sessions, [], "a") == 0
    back = await writes.claim_outbox(sessions, 10, 30, "b", chat_id=-1, now=T0)
    assert [r.id for r in back] == ids[0::2]


async def test_concurrent_claims_never_share_a_row(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with sessions() as s:
        ids = await _fill(s, 200, chats=(-1, -2, -3, -4))

    async def sender(owner: str) -> list[int]:
        got: list[int] = []
        while True:
            rows = await writes.claim_outbox(sessions, 7, 60, owner)
            if not rows:
                return got
            claimed = [r.id for r in rows]
            # Another sender may also try to mark them: the books still say "sent" once.
            await writes.mark_sent(sessions, claimed, hash(owner) % 1000)
            got.extend(claimed)

    results = await asyncio.gather(*(sender(f"sender-{i}") for i in range(6)))
    everything = [i for got in results for i in got]
    assert sorted(everything) == ids  # every row claimed, none twice
    assert len(set(everything)) == len(everything)
    async with sessions() as s:
        assert await store.pending_outbox(s, 10) == []


async def test_concurrent_mark_sent_marks_once(sessions: async_sessionmaker[AsyncSession]) -> None:
    async with sessions() as s:
        ids = await _fill(s, 50)

    async def mark(message_id: int) -> int:
        return await writes.mark_sent(sessions, ids, message_id)

    counts = await asyncio.gather(*(mark(m) for m in range(1, 6)))
    assert sum(counts) == 50
    async with sessions() as s:
        rows = list((await s.execute(select(Outbox))).scalars())
    assert all(r.sent_at is not None for r in rows)
