"""Rooms, players, settings, bans, audit and the records."""

from __future__ import annotations

import asyncio
import random

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import scoring, usecases
from codemojex.db import AuditLog, LeaderboardEntry, Player, Room, store
from codemojex.db.engine import Sessions
from tests.db.helpers import attempt, new_room, record_one
from tests.helpers import writes


async def test_ensure_room_gets_or_creates(session: AsyncSession, sessions: Sessions) -> None:
    room = await new_room(sessions, chat_id=-100, title="Fruit")
    assert room.id.startswith("ROM") and len(room.id) == 29
    assert (room.length, room.palette, room.palette_size, room.ceiling, room.round_timeout_s) == (
        scoring.DEFAULT_LENGTH,
        None,
        scoring.DEFAULT_PALETTE_SIZE,
        2,
        600,
    )
    assert room.created.tzinfo is not None
    same = await new_room(sessions, chat_id=-100, title="Fruit salad")
    assert same.id == room.id and same.title == "Fruit salad"
    assert (await store.room_by_chat(session, -100)).id == room.id  # type: ignore[union-attr]
    assert (await store.get_room(session, room.id)).chat_id == -100  # type: ignore[union-attr]
    assert await store.room_by_chat(session, -101) is None


async def test_concurrent_ensure_room_and_player_make_one_each(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async def room_once() -> str:
        return (await new_room(sessions, chat_id=-7)).id

    room_ids = await asyncio.gather(*(room_once() for _ in range(6)))
    assert len(set(room_ids)) == 1

    async def player_once() -> str:
        return (await usecases.ensure_player(sessions, room_ids[0], 11, "Zed")).id

    player_ids = await asyncio.gather(*(player_once() for _ in range(6)))
    assert len(set(player_ids)) == 1
    async with sessions() as s:
        assert (await s.execute(select(func.count(Room.id)))).scalar_one() == 1
        assert (await s.execute(select(func.count(Player.id)))).scalar_one() == 1


async def test_ensure_player_is_per_room(session: AsyncSession, sessions: Sessions) -> None:
    a = await new_room(sessions, chat_id=-1)
    b = await new_room(sessions, chat_id=-2)
    pa = await usecases.ensure_player(sessions, a.id, 5, "Eve")
    pb = await usecases.ensure_player(sessions, b.id, 5, "Eve")
    assert pa.id != pb.id and pa.id.startswith("PLR")
    renamed = await usecases.ensure_player(sessions, a.id, 5, "Eve B.")
    assert renamed.id == pa.id and renamed.display_name == "Eve B."
    assert (await store.get_player(session, pa.id)).display_name == "Eve B."  # type: ignore[union-attr]
    with pytest.raises(store.UnknownRoom):
        await usecases.ensure_player(sessions, "ROM00000000000000000000000000", 5, "Eve")


async def test_update_room_settings_validates_everything_first(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    bad: list[dict[str, object]] = [
        {"length": 2},
        {"length": 7},
        {"length": "five"},
        {"palette": "🍎🍌🍇"},
        {"palette": "🍎🍎🍌🍇"},
        {"palette": "abcd"},
        {"palette": "🍎🍌🍇🍒🍋🥝🍉🍓🍑🍍🥥"},
        {"ceiling": 0},
        {"ceiling": -1},
        {"ceiling": 99999999999999999999},
        {"round_timeout_s": 5},
        {"length": 5, "ceiling": 0},  # one bad value refuses the whole change
    ]
    for kwargs in bad:
        with pytest.raises(ValueError):
            await usecases.update_room_settings(sessions, room.id, **kwargs)  # type: ignore[arg-type]
    fresh = await store.get_room(session, room.id)
    assert fresh is not None
    assert (fresh.length, fresh.palette, fresh.ceiling, fresh.round_timeout_s) == (4, None, 2, 600)

    updated = await usecases.update_room_settings(
        sessions, room.id, length="5", palette="🍎 🍌 🍇 ❤", ceiling=3, round_timeout_s=120
    )
    assert (updated.length, updated.palette_emojis, updated.ceiling, updated.round_timeout_s) == (
        5,
        ("🍎", "🍌", "🍇", "❤️"),
        3,
        120,
    )
    with pytest.raises(store.UnknownRoom):
        await usecases.update_room_settings(sessions, "ROM00000000000000000000000000", ceiling=2)


async def test_bans_are_per_room(session: AsyncSession, sessions: Sessions) -> None:
    # (a refusal rolls its unit back, which expires what the session holds: ids are kept)
    a = (await new_room(sessions, chat_id=-1)).id
    b = (await new_room(sessions, chat_id=-2)).id
    pa = (await usecases.ensure_player(sessions, a, 5, "Eve")).id
    pb = (await usecases.ensure_player(sessions, b, 5, "Eve")).id
    assert await writes.ban(sessions, a, pa, actor=1) is True
    assert await writes.ban(sessions, a, pa, actor=1) is False
    assert await store.is_banned(session, a, 5)
    assert not await store.is_banned(session, b, 5)  # banned in a, plays in b
    assert not await store.is_banned(session, a, 6)
    with pytest.raises(store.UnknownPlayer):
        await writes.ban(sessions, a, pb, actor=1)  # not a player of room a

    rnd = await usecases.start_round(sessions, b, random.Random(1))
    result = await record_one(sessions, attempt(rnd, pb, rnd.secret_emojis))
    assert result.won

    assert await writes.unban(sessions, a, pa, actor=1) is True
    assert await writes.unban(sessions, a, pa) is False
    assert not await store.is_banned(session, a, 5)


async def test_audit_rows(session: AsyncSession, sessions: Sessions) -> None:
    room = await new_room(sessions)
    await usecases.audit(
        sessions, room_id=room.id, actor_tg_id=1, action="limit", args="3", allowed=True
    )
    await usecases.audit(
        sessions,
        room_id=room.id,
        actor_tg_id=2,
        action="ban",
        args={"player": "PLR1", "reason": "spam"},
        allowed=False,
    )
    await usecases.audit(sessions, room_id=None, actor_tg_id=None, action="x", allowed=False)
    rows = list((await session.execute(select(AuditLog).order_by(AuditLog.id))).scalars())
    assert [(r.action, r.actor_tg_id, r.allowed) for r in rows] == [
        ("limit", 1, True),
        ("ban", 2, False),
        ("x", None, False),
    ]
    assert rows[0].args == "3"
    assert rows[1].args == '{"player": "PLR1", "reason": "spam"}'
    assert all(r.at.tzinfo is not None for r in rows)


async def _seed_board(
    session: AsyncSession, sessions: Sessions, room_id: str, rows: list[tuple[int, int, int]]
) -> None:
    """(points, wins, guesses) per player, user ids 1..n."""
    for uid, (points, wins, guesses) in enumerate(rows, start=1):
        player = await usecases.ensure_player(sessions, room_id, uid, f"U{uid}")
        session.add(
            LeaderboardEntry(
                room_id=room_id,
                player_id=player.id,
                points=points,
                wins=wins,
                guesses=guesses,
                best_solve=None if not wins else 10 - uid,
            )
        )
    await session.commit()


async def test_leaderboard_orders_by_points_then_wins(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    await _seed_board(
        session, sessions, room.id, [(100, 1, 5), (200, 2, 9), (100, 3, 12), (0, 0, 4)]
    )
    board = await store.leaderboard(session, room.id)
    assert [(r.rank, r.display_name, r.points, r.wins) for r in board] == [
        (1, "U2", 200, 2),
        (2, "U3", 100, 3),
        (3, "U1", 100, 1),
        (4, "U4", 0, 0),
    ]
    assert [r.display_name for r in await store.leaderboard(session, room.id, limit=2)] == [
        "U2",
        "U3",
    ]
    stats = await store.player_stats(session, room.id, 1)
    assert stats is not None
    assert (stats.rank, stats.players, stats.points, stats.wins, stats.guesses) == (3, 4, 100, 1, 5)
    assert stats.best_solve == 9
    assert await store.player_stats(session, room.id, 99) is None
    newcomer = await usecases.ensure_player(sessions, room.id, 50, "New")
    fresh = await store.player_stats(session, room.id, 50)
    assert fresh is not None and fresh.player_id == newcomer.id
    assert (fresh.rank, fresh.points, fresh.guesses) == (None, 0, 0)


async def test_global_stats_join_rooms_by_telegram_user(
    session: AsyncSession, sessions: Sessions
) -> None:
    a = await new_room(sessions, chat_id=-1)
    b = await new_room(sessions, chat_id=-2)
    c = await new_room(sessions, chat_id=-3)
    await _seed_board(session, sessions, a.id, [(100, 1, 5)])
    await _seed_board(session, sessions, b.id, [(50, 2, 7), (1000, 10, 10)])
    await usecases.ensure_player(sessions, c.id, 1, "U1")  # joined c, never scored
    total = await store.global_stats(session, 1)
    assert (total.rooms, total.points, total.wins, total.guesses, total.best_solve) == (
        2,
        150,
        3,
        12,
        9,
    )
    nobody = await store.global_stats(session, 12345)
    assert (nobody.rooms, nobody.points, nobody.best_solve) == (0, 0, None)
