"""The daily code in the store, on the real Postgres through the migrations (and SQLite): the
day's puzzle drawn once for everyone, opening a daily, scoring it through `record_guesses`
(the same path as every guess), finishing it, streaks over midnight, the expiry at midnight,
the group's board, the rebuild's pages and the retention trim."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import (
    DailyPuzzle,
    DailyRecord,
    DailyResult,
    Guess,
    LeaderboardEntry,
    Outbox,
    Round,
    store,
)
from codemojex.db.store import daily as daily_store
from codemojex.game import daily, taps, texts
from codemojex.locale import EN, Lang
from codemojex.usecases.daily import todays
from codemojex.values import ids
from codemojex.values.batch import Attempt
from codemojex.values.daily import Finish, decode_histogram, decode_rows
from codemojex.values.types import KIND_CARD, KIND_ROUND, OUT_OF_ATTEMPTS, ROUND_DAILY, SOLVED
from tests.helpers.dailies import daily_round, misses, open_for, play, player_of

DAY = datetime(2026, 3, 14, tzinfo=UTC)
NOON = DAY + timedelta(hours=12)
ALICE, BOB, CAROL = 5001, 5002, 5003
RU = Lang("ru")


async def count(sessions: async_sessionmaker[AsyncSession], stmt: object) -> int:
    async with sessions() as session:
        value = (await session.execute(stmt)).scalar_one()  # type: ignore[call-overload]
        await session.commit()
    return int(value)


async def test_everyone_plays_the_same_puzzle_drawn_once(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # Many players open it at once, each process with its own random source: one draw wins.
    users = range(6001, 6013)
    views = await asyncio.gather(*(open_for(sessions, u, NOON, random.Random(u)) for u in users))
    assert {v.status for v in views} == {"opened"}
    assert len({(v.puzzle.palette, v.puzzle.secret) for v in views}) == 1
    assert {v.puzzle.number for v in views} == {1}
    assert await count(sessions, select(func.count()).select_from(DailyPuzzle)) == 1
    rounds = [await daily_round(sessions, u, NOON) for u in users]
    assert {(r.secret, r.palette) for r in rounds} == {
        ("".join(views[0].puzzle.secret), "".join(views[0].puzzle.palette))
    }
    assert {(r.kind, r.max_attempts, r.expires_at) for r in rounds} == {
        (ROUND_DAILY, 8, DAY + timedelta(days=1))
    }


async def test_opening_posts_the_puzzle_once(sessions: async_sessionmaker[AsyncSession]) -> None:
    first = await open_for(sessions, ALICE, NOON, language=RU)
    again = await open_for(sessions, ALICE, NOON + timedelta(hours=1))
    assert (first.status, again.status) == ("opened", "playing")
    assert again.left == 8 and again.puzzle == first.puzzle
    async with sessions() as session:
        rows = list((await session.execute(select(Outbox))).scalars())
        room = await store.room_by_chat(session, ALICE)
    [post] = rows
    rnd = await daily_round(sessions, ALICE, NOON)
    assert (post.chat_id, post.kind, post.round_id) == (ALICE, KIND_ROUND, rnd.id)
    assert post.text == texts.daily_puzzle(RU, 1, first.puzzle.palette, 4, 8)
    assert post.markup == taps.keyboard(rnd.id, first.puzzle.palette)
    assert room is not None and room.language == "ru"  # results come in the player's language
    assert await count(sessions, select(func.count()).select_from(Round)) == 1


async def test_one_player_opening_twice_at_once_opens_one_daily(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await player_of(sessions, ALICE)
    views = await asyncio.gather(*(open_for(sessions, ALICE, NOON) for _ in range(4)))
    assert sorted(v.status for v in views) == ["opened", "playing", "playing", "playing"]
    assert await count(sessions, select(func.count()).select_from(Round)) == 1
    assert await count(sessions, select(func.count()).select_from(Outbox)) == 1


async def test_cracking_it_records_the_result_the_card_and_the_streak(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await open_for(sessions, ALICE, NOON)
    rnd = await daily_round(sessions, ALICE, NOON)
    verdicts = await play(
        sessions,
        ALICE,
        [*misses(rnd, 2), rnd.secret_emojis],
        NOON + timedelta(minutes=3),
        share=True,
    )
    assert [v.kind for v in verdicts] == ["scored"] * 3
    assert verdicts[-1].finish == Finish(NOON.date(), ALICE, 3, True, NOON + timedelta(minutes=3))
    async with sessions() as session:
        result = await session.get(DailyResult, (NOON.date(), ALICE))
        record = await session.get(DailyRecord, ALICE)
        closed = await session.get(Round, rnd.id)
        card = (await session.execute(select(Outbox).where(Outbox.kind == KIND_CARD))).scalar_one()
        await session.commit()
    assert result is not None and result.cracked and result.finished_at is not None
    assert len(decode_rows(result.rows)) == 3
    assert record is not None and (record.streak, record.best) == (1, 1)
    assert decode_histogram(record.histogram) == (0, 0, 1, 0, 0, 0, 0, 0, 0)
    assert closed is not None and closed.end_reason == SOLVED and closed.ended_at is not None
    assert "Codemojex daily #1 3/8" in card.text.splitlines()
    assert card.markup is not None and "switch_inline_query" in card.markup
    # the daily books no points and no leaderboard
    assert await count(sessions, select(func.count()).select_from(LeaderboardEntry)) == 0
    after = await todays(sessions, ALICE, NOON + timedelta(hours=1), random.Random(0))
    assert after.status == "finished" and after.cracked and len(after.rows) == 3


async def test_a_streak_is_carried_over_midnight(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    before_midnight = DAY + timedelta(hours=23, minutes=59)
    await open_for(sessions, ALICE, before_midnight)
    first = await daily_round(sessions, ALICE, before_midnight)
    await play(sessions, ALICE, [first.secret_emojis], before_midnight + timedelta(seconds=30))
    # a minute later it is the next day: a new puzzle, for everyone the same, #2
    after_midnight = DAY + timedelta(days=1, minutes=1)
    alice = await open_for(sessions, ALICE, after_midnight, random.Random(1))
    bob = await open_for(sessions, BOB, after_midnight, random.Random(2))
    assert alice.status == bob.status == "opened"
    assert alice.puzzle == bob.puzzle and alice.puzzle.number == 2
    assert alice.puzzle.day == after_midnight.date()
    second = await daily_round(sessions, ALICE, after_midnight)
    assert second.id != first.id
    await play(sessions, ALICE, [second.secret_emojis], after_midnight + timedelta(minutes=1))
    async with sessions() as session:
        record = await store.daily_record(session, ALICE)
    assert (record.streak, record.best) == (2, 2)
    assert daily.streak_on(record, after_midnight.date() + timedelta(days=1)) == 2
    assert daily.streak_on(record, after_midnight.date() + timedelta(days=2)) == 0


async def test_the_eighth_miss_ends_it_and_a_ninth_guess_is_told_to_come_back(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await open_for(sessions, ALICE, NOON)
    rnd = await daily_round(sessions, ALICE, NOON)
    verdicts = await play(sessions, ALICE, misses(rnd, 9), NOON)
    assert [v.kind for v in verdicts] == ["scored"] * 8 + ["late"]
    assert verdicts[7].finish is not None and not verdicts[7].finish.cracked
    async with sessions() as session:
        closed = await session.get(Round, rnd.id)
        late = (await session.execute(select(Outbox).where(Outbox.kind == "late"))).scalar_one()
        await session.commit()
    assert closed is not None and closed.end_reason == OUT_OF_ATTEMPTS
    assert closed.winner_player_id is None
    assert late.text == texts.daily_come_back(EN, 12 * 3600)
    later = await play(sessions, ALICE, misses(rnd, 1), NOON + timedelta(hours=1))
    assert later[0].kind == "late"


async def test_the_finishing_guess_delivered_again_tells_its_finish_again(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await open_for(sessions, ALICE, NOON)
    room_id, player_id = await player_of(sessions, ALICE)
    rnd = await daily_round(sessions, ALICE, NOON)
    winning = Attempt(ids.mint(ids.JOB), rnd.id, player_id, room_id, rnd.secret_emojis, None)
    [first] = await usecases.record_guesses(sessions, [winning], now=NOON)
    [again] = await usecases.record_guesses(sessions, [winning], now=NOON + timedelta(seconds=9))
    assert again.duplicate and again.finish == first.finish
    assert await count(sessions, select(func.count()).select_from(Guess)) == 1


async def test_an_unfinished_daily_closes_quietly_at_midnight(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await open_for(sessions, ALICE, NOON)
    rnd = await daily_round(sessions, ALICE, NOON)
    await play(sessions, ALICE, misses(rnd, 2), NOON)
    posted = await count(sessions, select(func.count()).select_from(Outbox))
    async with sessions() as session:
        assert await usecases.expire_rounds(sessions, DAY + timedelta(hours=23)) == []
    async with sessions() as session:
        closed = await usecases.expire_rounds(sessions, DAY + timedelta(days=1, seconds=1))
    assert [r.id for r in closed] == [rnd.id]
    assert await count(sessions, select(func.count()).select_from(Outbox)) == posted
    late = await play(sessions, ALICE, misses(rnd, 1), DAY + timedelta(days=1, seconds=2), of=NOON)
    assert late[0].kind == "late"
    async with sessions() as session:
        text = (
            await session.execute(select(Outbox.text).order_by(Outbox.id.desc()).limit(1))
        ).scalar_one()
        await session.commit()
    assert text == texts.daily_send_first(EN)


async def test_yesterdays_daily_still_open_is_closed_by_todays(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await open_for(sessions, ALICE, NOON)
    yesterday = await daily_round(sessions, ALICE, NOON)
    tomorrow = NOON + timedelta(days=1)
    view = await open_for(sessions, ALICE, tomorrow)  # before the round timer closed it
    assert view.status == "opened"
    async with sessions() as session:
        old = await session.get(Round, yesterday.id, populate_existing=True)
        await session.commit()
    assert old is not None and old.ended_at == tomorrow


async def test_a_groups_board_is_its_members_dailies(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    group = -100777
    async with sessions() as session:
        room = await usecases.ensure_room(
            sessions, group, "G", default_ceiling=2, round_timeout_s=600
        )
        for user, name in ((ALICE, "Alice"), (BOB, "Bob"), (CAROL, "Carol")):
            await usecases.ensure_player(sessions, room.id, user, name)
    for user in (ALICE, BOB, CAROL, 9999):  # 9999 never played in the group
        await open_for(sessions, user, NOON)
    rnd = await daily_round(sessions, ALICE, NOON)
    await play(sessions, ALICE, [*misses(rnd, 3), rnd.secret_emojis], NOON + timedelta(minutes=2))
    await play(sessions, BOB, [rnd.secret_emojis], NOON + timedelta(minutes=5))
    async with sessions() as session:
        board = await store.group_dailies(session, group, NOON.date(), 10)
    assert [(m.name, m.attempts, m.cracked, m.seconds) for m in board] == [
        ("Bob", 1, True, 300),
        ("Alice", 4, True, 120),
        ("Carol", 0, False, None),
    ]
    async with sessions() as session:
        names = await store.daily_names(session, NOON.date(), [ALICE, 9999, 1])
    assert names == {ALICE: f"user {ALICE}", 9999: "user 9999"}


async def test_a_groups_board_takes_the_others_seen_there_and_keeps_the_asker(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """Beside its players (by their name there), the users the bot saw in the group (by the
    name they opened the daily with; a player's own name wins); cut at the limit, but the
    asker's row stays, after the cut."""
    group = -100778
    async with sessions() as session:
        room = await usecases.ensure_room(
            sessions, group, "G", default_ceiling=2, round_timeout_s=600
        )
        await usecases.ensure_player(sessions, room.id, ALICE, "Alice here")
    for user in (ALICE, BOB, CAROL, 9999):
        await open_for(sessions, user, NOON)
    rnd = await daily_round(sessions, ALICE, NOON)
    for n, user in enumerate((ALICE, BOB, CAROL, 9999)):
        await play(sessions, user, [*misses(rnd, n), rnd.secret_emojis], NOON)
    async with sessions() as session:
        board = await store.group_dailies(session, group, NOON.date(), 10, also=[ALICE, BOB])
        cut = await store.group_dailies(
            session, group, NOON.date(), 1, also=[BOB, CAROL, 1], keep=CAROL
        )
    assert [(m.name, m.attempts) for m in board] == [("Alice here", 1), (f"user {BOB}", 2)]
    assert [(m.name, m.attempts) for m in cut] == [("Alice here", 1), (f"user {CAROL}", 3)]


async def test_the_rebuild_reads_the_day_a_page_at_a_time(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    users = list(range(7001, 7008))
    for user in users:
        await open_for(sessions, user, NOON)
    rnd = await daily_round(sessions, users[0], NOON)
    for user in users[:3]:
        await play(sessions, user, [rnd.secret_emojis], NOON)
    pages, after = [], None
    while True:
        async with sessions() as session:
            page = await store.daily_entries(session, NOON.date(), after, 3)
        if not page:
            break
        pages.append(page)
        after = page[-1].tg_user_id
    assert [len(p) for p in pages] == [3, 3, 1]
    entries = [e for p in pages for e in p]
    assert [e.tg_user_id for e in entries] == users
    assert [e.finish is not None for e in entries] == [True] * 3 + [False] * 4


async def test_old_dailies_are_trimmed_and_records_kept(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    old, recent = NOON - timedelta(days=40), NOON - timedelta(days=2)
    for when in (old, recent):
        for user in (ALICE, BOB):
            await open_for(sessions, user, when)
            rnd = await daily_round(sessions, user, when)
            await play(sessions, user, [rnd.secret_emojis], when)
    async with sessions() as session:
        assert await usecases.trim_daily(sessions, (NOON - timedelta(days=30)).date(), 1) == 1
    async with sessions() as session:
        assert await usecases.trim_daily(sessions, (NOON - timedelta(days=30)).date(), 10) == 1
    async with sessions() as session:
        assert await usecases.trim_daily(sessions, (NOON - timedelta(days=30)).date(), 10) == 0
    async with sessions() as session:
        days = set((await session.execute(select(DailyResult.day))).scalars())
        await session.commit()
    assert days == {recent.date()}
    assert await count(sessions, select(func.count()).select_from(Round)) == 2
    assert await count(sessions, select(func.count()).select_from(Guess)) == 2
    assert await count(sessions, select(func.count()).select_from(DailyPuzzle)) == 2
    assert await count(sessions, select(func.count()).select_from(DailyRecord)) == 2


async def the_next_days_puzzles(sessions: async_sessionmaker[AsyncSession]) -> dict[int, str]:
    """Alice loses day 1 (out of attempts), Bob leaves it unfinished, Carol cracks it; each
    opens day 2: the text of each one's puzzle post of day 2."""
    for user in (ALICE, BOB, CAROL):
        await open_for(sessions, user, NOON)
    rnd = await daily_round(sessions, ALICE, NOON)
    await play(sessions, ALICE, misses(rnd, 8), NOON)
    await play(sessions, BOB, misses(rnd, 2), NOON)
    await play(sessions, CAROL, [rnd.secret_emojis], NOON)
    tomorrow = NOON + timedelta(days=1)
    posts: dict[int, str] = {}
    for user in (ALICE, BOB, CAROL):
        await open_for(sessions, user, tomorrow)
        second = await daily_round(sessions, user, tomorrow)
        async with sessions() as session:
            posts[user] = (
                await session.execute(
                    select(Outbox.text).where(
                        Outbox.round_id == second.id, Outbox.kind == KIND_ROUND
                    )
                )
            ).scalar_one()
            await session.commit()
    return posts


async def test_the_next_days_puzzle_shows_the_code_lost_the_day_before(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    posts = await the_next_days_puzzles(sessions)
    async with sessions() as session:
        puzzle = await daily_store.get_puzzle(session, NOON.date())
        await session.commit()
    assert puzzle is not None
    shown = texts.daily_yesterday(EN, 1, puzzle.secret)
    assert posts[ALICE].startswith(f"{shown}\n\n📅 Daily #2:")
    # the unfinished and the cracked: the puzzle alone
    assert posts[BOB].startswith("📅 Daily #2:") and posts[CAROL].startswith("📅 Daily #2:")


async def test_the_next_days_puzzle_shows_the_lost_code_on_sqlite(
    sqlite_sessions: async_sessionmaker[AsyncSession],
) -> None:
    posts = await the_next_days_puzzles(sqlite_sessions)
    assert posts[ALICE].startswith("Yesterday's code, Daily #1, was ")
    assert posts[BOB].startswith("📅 Daily #2:") and posts[CAROL].startswith("📅 Daily #2:")


async def test_the_daily_on_sqlite(sqlite_sessions: async_sessionmaker[AsyncSession]) -> None:
    """The embedded demo's database: the same flow, through the portable statements."""
    views = [await open_for(sqlite_sessions, u, NOON, random.Random(u)) for u in (ALICE, BOB)]
    assert views[0].puzzle == views[1].puzzle
    rnd = await daily_round(sqlite_sessions, ALICE, NOON)
    verdicts = await play(sqlite_sessions, ALICE, [*misses(rnd, 1), rnd.secret_emojis], NOON)
    assert verdicts[-1].finish is not None and verdicts[-1].finish.attempts == 2
    misses_only = await play(sqlite_sessions, BOB, misses(rnd, 8), NOON)
    assert misses_only[-1].finish is not None and not misses_only[-1].finish.cracked
    async with sqlite_sessions() as session:
        alice = await store.daily_record(session, ALICE)
        bob = await store.daily_record(session, BOB)
        closed = await session.get(Round, rnd.id)
        await session.commit()
    assert (alice.streak, alice.histogram[1]) == (1, 1)
    assert (bob.streak, bob.histogram[-1]) == (0, 1)
    assert closed is not None and closed.end_reason == SOLVED
    async with sqlite_sessions() as session:
        assert await usecases.trim_daily(sqlite_sessions, NOON.date() + timedelta(days=1), 10) == 2
    assert await count(sqlite_sessions, select(func.count()).select_from(Guess)) == 0
