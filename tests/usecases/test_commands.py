"""Each command's effect is idempotent on its message, durably, in the transaction of the
effect (real Postgres through the Alembic migrations; SQLite where a test says so): a round
records the message that opened it, an admin command's audit row the message it came in
(unique), and the change is written only with a new row. So a message delivered again, at once,
from two processes at the same moment, or a day later after a later command, applies nothing;
and what Redis holds of a change (the lanes' pause, ceiling, weights; a banned player's lanes
emptied) is made what the database says, never undoing a later command."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis
from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import AuditLog, Outbox, Player, Room, Round, reading, store
from codemojex.lanes import Lanes
from codemojex.locale import EN
from codemojex.state.cards import RoomCards, reload
from codemojex.usecases.derived import converge
from codemojex.values.clock import utcnow
from codemojex.values.types import KIND_REVEAL, Origin

CHAT = -1_006_000_000_001
ADMIN, ANN = 61, 62


def origin(message_id: int, sent_at: datetime | None = None) -> Origin:
    return Origin(CHAT, message_id, sent_at or utcnow())


def command(
    room: Room, action: str, message_id: int, *, sent_at: datetime | None = None
) -> usecases.Audit:
    """An admin's allowed command in the room, as the bot audits it."""
    return usecases.Audit(
        room_id=room.id,
        actor_tg_id=ADMIN,
        action=action,
        args="",
        allowed=True,
        origin=origin(message_id, sent_at),
    )


async def _room(sessions: async_sessionmaker[AsyncSession]) -> Room:
    return await usecases.ensure_room(
        sessions, CHAT, "Club", default_ceiling=3, round_timeout_s=600
    )


async def _count(sessions: async_sessionmaker[AsyncSession], stmt: object) -> int:
    async with reading(sessions) as session:
        return int((await session.execute(stmt)).scalar_one())  # type: ignore[call-overload]


async def _rounds(sessions: async_sessionmaker[AsyncSession]) -> int:
    return await _count(sessions, select(func.count()).select_from(Round))


async def _audits(sessions: async_sessionmaker[AsyncSession]) -> int:
    return await _count(sessions, select(func.count()).select_from(AuditLog))


# --- /newgame: a round records the message that opened it ---------------------------------------


async def test_a_newgame_message_opens_one_round_however_late_it_comes_again(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sessions)
    first = await usecases.start_round(sessions, room.id, random.Random(1), origin=origin(10))
    assert (first.origin_chat_id, first.origin_message_id) == (CHAT, 10)
    with pytest.raises(store.CommandRepeated):  # while its round runs
        await usecases.start_round(sessions, room.id, random.Random(2), origin=origin(10))
    await usecases.close_round(sessions, first.id, "endround")
    with pytest.raises(store.CommandRepeated):  # and after it ended: a day later too
        await usecases.start_round(sessions, room.id, random.Random(3), origin=origin(10))
    assert await _rounds(sessions) == 1
    # Another message opens the next round.
    second = await usecases.start_round(sessions, room.id, random.Random(4), origin=origin(11))
    assert second.id != first.id and await _rounds(sessions) == 2


async def test_two_processes_with_one_newgame_open_one_round(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sessions)

    async def start(seed: int) -> str:
        try:
            await usecases.start_round(sessions, room.id, random.Random(seed), origin=origin(20))
        except store.CommandRepeated:
            return "repeated"
        return "opened"

    for _ in range(5):
        outcomes = sorted(await asyncio.gather(start(1), start(2), start(3)))
        assert outcomes == ["opened", "repeated", "repeated"]
        assert await _rounds(sessions) == 1
        async with sessions() as session:
            opened = await store.open_round(session, room.id)
            assert opened is not None
            await usecases.close_round(sessions, opened.id, "endround")
        async with sessions() as session:
            await session.execute(delete(Round))
            await session.commit()


async def test_the_origin_index_holds_on_sqlite(
    sqlite_sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sqlite_sessions)
    rnd = await usecases.start_round(sqlite_sessions, room.id, random.Random(1), origin=origin(5))
    await usecases.close_round(sqlite_sessions, rnd.id, "endround")
    with pytest.raises(store.CommandRepeated):
        await usecases.start_round(sqlite_sessions, room.id, random.Random(1), origin=origin(5))


# --- /endround: once per message, and only a round opened before it was sent -------------------


async def test_endround_ends_the_round_once_per_message(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sessions)
    rnd = await usecases.start_round(sessions, room.id, random.Random(1), origin=origin(30))
    ended = await usecases.end_round(sessions, room.id, command(room, "endround", 31))
    assert ended.status == "ended" and ended.round is not None and ended.round.id == rnd.id
    again = await usecases.end_round(sessions, room.id, command(room, "endround", 31))
    assert again.status == "repeated" and again.round is None
    reveals = select(func.count()).select_from(Outbox).where(Outbox.kind == KIND_REVEAL)
    assert await _count(sessions, reveals) == 1
    assert await _audits(sessions) == 1


async def test_a_late_endround_does_not_end_a_round_opened_after_it_was_sent(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """Its first delivery never took effect (the process failed before the commit); it
    comes again after the round it meant ended and a new one opened."""
    room = await _room(sessions)
    async with sessions() as session:
        newer = await usecases.start_round(sessions, room.id, random.Random(1), origin=origin(41))
        late = await usecases.end_round(sessions, room.id, command(room, "endround", 40))
    assert late.status == "none"
    async with reading(sessions) as session:
        still = await store.open_round(session, room.id)
    assert still is not None and still.id == newer.id
    assert await _audits(sessions) == 1  # the attempt is audited, and is not applied again


async def test_a_round_with_no_message_is_ended_by_the_second_it_started_in(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """A round opened with no message (or before rounds recorded theirs): Telegram dates a
    command in whole seconds, so one started during the command's second counts as before
    it; one started a second or more later does not."""
    room = await _room(sessions)
    sent = datetime(2026, 3, 14, 12, 0, 0, tzinfo=UTC)
    async with sessions() as session:
        await usecases.start_round(
            sessions, room.id, random.Random(1), now=sent + timedelta(seconds=5)
        )
        later = await usecases.end_round(
            sessions, room.id, command(room, "endround", 50, sent_at=sent)
        )
        assert later.status == "none"
        rnd = await store.open_round(session, room.id)
        assert rnd is not None
        await usecases.close_round(sessions, rnd.id, "endround")
        await usecases.start_round(
            sessions, room.id, random.Random(2), now=sent + timedelta(milliseconds=600)
        )
        same_second = await usecases.end_round(
            sessions, room.id, command(room, "endround", 51, sent_at=sent)
        )
        assert same_second.status == "ended"


async def test_two_processes_with_one_endround_end_one_round(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sessions)
    await usecases.start_round(sessions, room.id, random.Random(1), origin=origin(60))

    async def end() -> str:
        return (await usecases.end_round(sessions, room.id, command(room, "endround", 61))).status

    assert sorted(await asyncio.gather(end(), end(), end())) == ["ended", "repeated", "repeated"]
    assert await _audits(sessions) == 1


# --- the audit row: one per command message ----------------------------------------------------


async def test_one_audit_row_per_command_message(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sessions)
    queue = command(room, "queue", 70)
    async with sessions() as session:
        assert await usecases.audit_command(sessions, queue) is True
        assert await usecases.audit_command(sessions, queue) is False
        # The operators' page writes rows with no message: never one another's duplicate.
        for _ in range(2):
            await usecases.audit(
                sessions, room_id=room.id, actor_tg_id=None, action="pause", allowed=True
            )
    assert await _audits(sessions) == 3
    async with sessions() as session:
        with pytest.raises(IntegrityError):  # the database, not the code, refuses a second
            await session.execute(
                insert(AuditLog).values(
                    room_id=room.id,
                    action="queue",
                    args="",
                    allowed=True,
                    at=utcnow(),
                    chat_id=CHAT,
                    message_id=70,
                )
            )
        await session.rollback()


async def test_one_audit_row_per_command_message_on_sqlite(
    sqlite_sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sqlite_sessions)
    assert await usecases.audit_command(sqlite_sessions, command(room, "queue", 71)) is True
    assert await usecases.audit_command(sqlite_sessions, command(room, "queue", 71)) is False
    assert await usecases.audit_command(sqlite_sessions, command(room, "queue", 72)) is True
    assert await _audits(sqlite_sessions) == 2


async def test_settings_apply_once_per_message(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    room = await _room(sessions)
    async with sessions() as session:
        changed = await usecases.update_room_settings(
            sessions, room.id, length=5, command=command(room, "settings", 80)
        )
        assert changed.length == 5
        await usecases.update_room_settings(
            sessions, room.id, length=4, command=command(room, "settings", 81)
        )
        with pytest.raises(store.CommandRepeated):
            await usecases.update_room_settings(
                sessions, room.id, length=5, command=command(room, "settings", 80)
            )
    async with reading(sessions) as session:
        now = await store.get_room(session, room.id)
    assert now is not None and now.length == 4
    assert await _audits(sessions) == 2


# --- what Redis holds, derived from the database ------------------------------------------------


async def test_a_pause_again_never_undoes_a_later_resume_and_makes_a_lost_pause_good(
    real_redis: aioredis.Redis, queue_name: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    lanes = Lanes(real_redis, queue_name)
    room = await _room(sessions)
    pause = command(room, "pause", 90)
    assert await usecases.pause_room(sessions, lanes, room.id, True, command=pause) is True
    assert await lanes.is_paused(room.id)
    # The process died between the commit and the lanes: they never heard of the pause.
    await lanes.resume(room.id)
    assert await usecases.pause_room(sessions, lanes, room.id, True, command=pause) is False
    assert await lanes.is_paused(room.id)  # made good by the delivery again
    # A later /resume, then the /pause again: it stays resumed, in the row and the lanes.
    resume = command(room, "resume", 91)
    assert await usecases.pause_room(sessions, lanes, room.id, False, command=resume) is True
    assert await usecases.pause_room(sessions, lanes, room.id, True, command=pause) is False
    assert not await lanes.is_paused(room.id)
    async with reading(sessions) as session:
        row = await store.get_room(session, room.id)
    assert row is not None and row.paused is False
    assert await _audits(sessions) == 2


async def test_a_ban_again_after_an_unban_bans_nobody(
    real_redis: aioredis.Redis, queue_name: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    cards, lanes = RoomCards(real_redis, queue_name), Lanes(real_redis, queue_name)
    room = await _room(sessions)
    await reload(cards, sessions, room.id)
    ann = usecases.Member(ANN, "Ann")
    ban, unban = command(room, "ban", 100), command(room, "unban", 101)

    banned = await usecases.ban(sessions, cards, lanes, room, ann, ADMIN, command=ban)
    assert banned.first
    again = await usecases.ban(sessions, cards, lanes, room, ann, ADMIN, command=ban)
    assert not again.first
    lifted = await usecases.unban(sessions, cards, room, ann, command=unban)
    assert lifted.first
    late = await usecases.ban(sessions, cards, lanes, room, ann, ADMIN, command=ban)
    assert not late.first and late.dropped == 0
    async with reading(sessions) as session:
        assert not await store.is_banned(session, room.id, ANN)
    assert (await cards.read(CHAT, 0, user_id=ANN)).banned is False  # the card says so too
    assert await _audits(sessions) == 2


async def test_a_command_known_to_have_taken_effect_applies_nothing_without_its_row(
    real_redis: aioredis.Redis, queue_name: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """Its mark says done, yet its message has no row (a bot of the version before rows were
    keyed by message handled it): nothing is written; Redis is still made what the database
    says."""
    cards, lanes = RoomCards(real_redis, queue_name), Lanes(real_redis, queue_name)
    room = await _room(sessions)
    known = dataclasses.replace(command(room, "ban", 120), applies=False)
    banned = await usecases.ban(
        sessions, cards, lanes, room, usecases.Member(ANN, "Ann"), ADMIN, command=known
    )
    assert not banned.first
    async with reading(sessions) as session:
        assert not await store.is_banned(session, room.id, ANN)
    assert await _audits(sessions) == 0
    async with sessions() as session:
        assert await usecases.audit_command(sessions, known) is False
    assert await _audits(sessions) == 0


async def test_a_weight_again_never_undoes_a_later_weight(
    real_redis: aioredis.Redis, queue_name: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    cards, lanes = RoomCards(real_redis, queue_name), Lanes(real_redis, queue_name)
    room = await _room(sessions)
    ann = usecases.Member(ANN, "Ann")
    three, two = command(room, "weight", 110), command(room, "weight", 111)
    first = await usecases.weight(sessions, cards, lanes, room, ann, 3, command=three)
    assert (first.weight, first.first) == (3, True)
    await usecases.weight(sessions, cards, lanes, room, ann, 2, command=two)
    await real_redis.hset(lanes.keys.gweight, first.player_id, 1)  # the lanes lost it
    again = await usecases.weight(sessions, cards, lanes, room, ann, 3, command=three)
    assert (again.weight, again.first) == (2, False)
    assert await real_redis.hget(lanes.keys.gweight, first.player_id) == b"2"
    async with reading(sessions) as session:
        player = await session.get(Player, first.player_id)
    assert player is not None and player.weight == 2


async def test_converge_writes_what_the_record_holds_last() -> None:
    """A change committed by another process between this one's read and its write: the
    write is followed by a read, and written again until they agree."""
    record = iter([1, 2, 2])
    written: list[int] = []

    async def read() -> int:
        return next(record)

    async def write(value: int) -> None:
        written.append(value)

    assert await converge(read, write) == 2
    assert written == [1, 2]


# --- /daily: a day that is over is not opened ---------------------------------------------------


async def test_a_daily_of_a_day_that_is_over_is_not_opened(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    from codemojex.values.daily import PrivateChat

    chat = PrivateChat(
        chat_id=ANN,
        tg_user_id=ANN,
        name="Ann",
        title="Ann",
        default_ceiling=3,
        round_timeout_s=600,
    )
    yesterday = datetime(2026, 3, 14, 23, 59, tzinfo=UTC)
    now = yesterday + timedelta(minutes=2)
    assert await usecases.daily_on(sessions, ANN, yesterday.date()) is None  # none drawn
    opened = await usecases.open_daily(
        sessions, chat=chat, language=EN, rng=random.Random(1), now=yesterday
    )
    assert opened.view.status == "opened"
    with pytest.raises(ValueError):
        await usecases.open_daily(
            sessions,
            chat=chat,
            language=EN,
            rng=random.Random(1),
            now=now,
            day=yesterday.date(),
        )
    view = await usecases.daily_on(sessions, ANN, yesterday.date())
    assert view is not None and view.status == "playing"
    assert view.puzzle.day == yesterday.date()
    assert await _rounds(sessions) == 1
