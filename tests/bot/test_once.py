"""The run mark of a command message (bot/once.py) on the real Redis, fakeredis and a Redis
Cluster: a lease while a process runs it, renewed while it runs, waited for by a second
process, run out when its holder died; `done` once the effect committed, whatever raises
after; given back when the command fails before its commit."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from telegram import Chat, Message
from telegram.constants import ChatType

from codemojex.bot.once import CommandBusy, CommandMarks, origin_of
from codemojex.state.keys import Keys
from codemojex.values.redistypes import AnyRedis

CHAT = -1_005_000_000_001
SENT = datetime(2026, 3, 14, 23, 59, 58, tzinfo=UTC)
WINDOW_S = 60


def command(message_id: int = 7) -> Message:
    return Message(message_id, SENT, Chat(CHAT, ChatType.SUPERGROUP), text="/endround")


def marks(redis: AnyRedis, queue: str, **timing: float) -> CommandMarks:
    return CommandMarks(redis, queue, WINDOW_S, **timing)


async def mark_of(redis: AnyRedis, queue: str, message_id: int = 7) -> str | None:
    raw: Any = await redis.get(Keys(queue).command_seen(CHAT, message_id))
    return None if raw is None else bytes(raw).decode()


def test_the_origin_is_the_messages_chat_id_and_date() -> None:
    origin = origin_of(command(9))
    assert (origin.chat_id, origin.message_id, origin.sent_at) == (CHAT, 9, SENT)


async def test_a_message_runs_once_and_is_done_after(any_redis: AnyRedis, queue_name: str) -> None:
    one = marks(any_redis, queue_name)
    async with one.once(command()) as run:
        assert not run.done
        assert (await mark_of(any_redis, queue_name) or "").startswith("run:")
    assert await mark_of(any_redis, queue_name) == "done"
    ttl = await any_redis.pttl(Keys(queue_name).command_seen(CHAT, 7))
    assert 0 < ttl <= WINDOW_S * 1000  # kept for the dedupe window
    # Done: this process and any other are told so (they apply nothing).
    for process in (one, marks(any_redis, queue_name)):
        async with process.once(command()) as again:
            assert again.done


async def test_a_failure_before_the_commit_gives_the_message_back(
    any_redis: AnyRedis, queue_name: str
) -> None:
    one, two = marks(any_redis, queue_name), marks(any_redis, queue_name)
    with pytest.raises(ConnectionError):
        async with one.once(command()) as run:
            assert not run.done
            raise ConnectionError("the database went away before the commit")
    assert await mark_of(any_redis, queue_name) is None
    async with two.once(command()) as run:
        assert not run.done  # a delivery again runs it


@pytest.mark.parametrize("raised", [TimeoutError, asyncio.CancelledError])
async def test_a_failure_after_the_commit_leaves_it_done(
    any_redis: AnyRedis, queue_name: str, raised: type[BaseException]
) -> None:
    """A reply's timeout or a cancel after the effect committed: the mark stays done, so a
    delivery again never runs the command a second time."""
    one = marks(any_redis, queue_name)
    with pytest.raises(raised):
        async with one.once(command()) as run:
            await run.took_effect()
            assert await mark_of(any_redis, queue_name) == "done"
            raise raised()
    assert await mark_of(any_redis, queue_name) == "done"
    async with marks(any_redis, queue_name).once(command()) as again:
        assert again.done


async def test_a_second_process_waits_for_the_first_and_finds_it_done(
    any_redis: AnyRedis, queue_name: str
) -> None:
    """A rolling update: two processes hold one command message at once; the second waits
    for the first's lease instead of running it beside it."""
    one, two = marks(any_redis, queue_name), marks(any_redis, queue_name, poll_s=0.02)
    ran: list[str] = []
    first_holds = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with one.once(command()) as run:
            assert not run.done
            ran.append("first")
            first_holds.set()
            await release.wait()
            await run.took_effect()

    async def second() -> bool:
        await first_holds.wait()
        async with two.once(command()) as run:
            if not run.done:
                ran.append("second")
            return run.done

    task = asyncio.create_task(first())
    waiting = asyncio.create_task(second())
    await first_holds.wait()
    await asyncio.sleep(0.2)
    assert not waiting.done()  # waiting for the lease, not running
    release.set()
    await task
    assert await waiting is True
    assert ran == ["first"]


async def test_a_second_process_runs_it_when_the_first_gave_it_back(
    any_redis: AnyRedis, queue_name: str
) -> None:
    one, two = marks(any_redis, queue_name), marks(any_redis, queue_name, poll_s=0.02)
    first_holds = asyncio.Event()

    async def first() -> None:
        async with one.once(command()):
            first_holds.set()
            await asyncio.sleep(0.2)
            raise ConnectionError("Redis went away")

    task = asyncio.create_task(first())
    await first_holds.wait()
    async with two.once(command()) as run:
        assert not run.done
    with pytest.raises(ConnectionError):
        await task
    assert await mark_of(any_redis, queue_name) == "done"


async def test_the_lease_is_renewed_while_the_command_runs(
    any_redis: AnyRedis, queue_name: str
) -> None:
    one = marks(any_redis, queue_name, lease_s=0.3)
    key = Keys(queue_name).command_seen(CHAT, 7)
    async with one.once(command()) as run:
        await asyncio.sleep(1.0)  # three leases long: still held
        assert (await mark_of(any_redis, queue_name) or "").startswith("run:")
        assert 0 < await any_redis.pttl(key) <= 300
        await run.took_effect()
    assert await mark_of(any_redis, queue_name) == "done"


async def test_a_dead_holders_lease_runs_out_and_the_message_runs(
    any_redis: AnyRedis, queue_name: str
) -> None:
    """A process killed while running a command renews its lease no more: the next delivery
    waits for it to run out, then runs the command (whose effect, if the dead one committed
    it, the database then finds there: tests/bot/test_redelivery.py)."""
    key = Keys(queue_name).command_seen(CHAT, 7)
    await any_redis.set(key, "run:0123456789abcdef", px=300)
    began = time.monotonic()
    async with marks(any_redis, queue_name, poll_s=0.02).once(command()) as run:
        assert not run.done
        assert time.monotonic() - began >= 0.25


async def test_a_holder_alive_past_the_wait_is_busy(any_redis: AnyRedis, queue_name: str) -> None:
    """The holder is alive and renewing past the wait: the second is refused (its sender is
    told to try again), never runs it beside the first."""
    one = marks(any_redis, queue_name, lease_s=0.3)
    two = marks(any_redis, queue_name, wait_s=0.5, poll_s=0.05)
    async with one.once(command()) as run:
        assert not run.done
        with pytest.raises(CommandBusy):
            async with two.once(command()):
                raise AssertionError("ran beside the holder")
    async with two.once(command()) as again:
        assert again.done


async def test_messages_are_marked_apart(any_redis: AnyRedis, queue_name: str) -> None:
    one = marks(any_redis, queue_name)
    async with one.once(command(7)), one.once(command(8)) as other:
        assert not other.done
    assert await mark_of(any_redis, queue_name, 8) == "done"
