"""`admit`: a batch enqueued in one call, each job under its producer's guards, with a
ceiling for a room that has none. On the real Redis, fakeredis and a Redis Cluster; the
keyspace is read back after each call and `check()` must be clean."""

from __future__ import annotations

from unittest.mock import ANY

import pytest

from codemojex.lanes import Admission, Admitted, Guard, LaneError
from codemojex.values import ids
from tests.lanes.conftest import Env


def room() -> str:
    return ids.mint(ids.ROOM)


def lane() -> str:
    return ids.mint(ids.PLAYER)


def own(env: Env, name: str) -> str:
    """A producer's key in the queue's slot (outside the lanes keyspace)."""
    return f"test:{{{env.queue}}}:{name}"


async def test_a_batch_is_admitted_as_enqueue_admits_each(env: Env) -> None:
    r, a, b = room(), lane(), lane()
    got = await env.lanes.admit(
        [Admission(r, a, b"1"), Admission(r, b, b"2"), Admission(r, a, b"3")]
    )
    assert [x.status for x in got] == ["enqueued"] * 3
    ids_ = [x.job_id for x in got]
    dump = await env.dump()
    assert dump[f"g:{a}:pending"] == [(ids_[0], 1), (ids_[2], 3)]
    assert dump[f"g:{b}:pending"] == [(ids_[1], 2)]
    assert dump[f"r:{r}:ring"] == [a, b]
    assert dump["ring"] == [r]
    assert dump["npending"] == "3"
    assert "glimit" not in dump  # no ceiling asked for, none set
    assert await env.lanes.check() == []


async def test_guards_refuse_a_job_and_leave_the_others(env: Env) -> None:
    r, a = room(), lane()
    card, seats, bans = own(env, "card"), own(env, "seats"), own(env, "bans")
    await env.client.hset(card, "round", "7")
    await env.client.sadd(bans, "42")
    await env.client.hset(seats, "43", a)

    def guarded(user: str, want_round: str, candidate: str) -> Admission:
        return Admission(
            r,
            candidate,
            b"g",
            guards=(
                Guard("eq", card, "round", want_round),
                Guard("out", bans, user),
                Guard("nx", seats, user, candidate),
            ),
        )

    newcomer = lane()
    got = await env.lanes.admit(
        [
            guarded("41", "6", newcomer),  # an older round: refused by the first guard
            guarded("42", "7", lane()),  # banned
            guarded("43", "7", lane()),  # the user's seat is another lane: what it holds
            guarded("44", "7", newcomer),  # a new seat: set, then admitted
            guarded("41", "7", newcomer),  # the seat 41 never got (refused before the nx)
        ]
    )
    assert [(x.status, x.guard, x.found) for x in got] == [
        ("refused", 0, "7"),
        ("refused", 1, "42"),
        ("refused", 2, a),
        ("enqueued", None, None),
        ("enqueued", None, None),
    ]
    assert await env.client.hgetall(seats) == {b"43": a.encode(), b"44": newcomer.encode(),
                                               b"41": newcomer.encode()}  # fmt: skip
    assert (await env.dump())[f"g:{newcomer}:pending"] == [(got[3].job_id, 1), (got[4].job_id, 2)]
    # an absent field is found as ""
    await env.client.delete(card)
    (gone,) = await env.lanes.admit([guarded("44", "7", newcomer)])
    assert (gone.status, gone.guard, gone.found) == ("refused", 0, "")
    assert await env.lanes.check() == []


async def test_a_dedupe_hit_is_reported_whatever_the_guards_say_now(env: Env) -> None:
    r, a = room(), lane()
    card = own(env, "card")
    await env.client.hset(card, "round", "1")
    guard = (Guard("eq", card, "round", "1"),)
    (first,) = await env.lanes.admit([Admission(r, a, b"x", dedupe_key="m:1", guards=guard)])
    await env.client.hset(card, "round", "2")
    again = await env.lanes.admit([Admission(r, a, b"x", dedupe_key="m:1", guards=guard)] * 2)
    assert [(x.status, x.job_id) for x in again] == [("duplicate", first.job_id)] * 2
    assert (await env.dump())["npending"] == "1"


async def test_full_lanes_and_foreign_lanes_are_refused_alone(env: Env) -> None:
    r, other, a = room(), room(), lane()
    got = await env.lanes.admit(
        [
            Admission(r, a, b"1", max_depth=1),
            Admission(r, a, b"2", max_depth=1),  # full
            Admission(other, a, b"3"),  # the lane is bound to r
            Admission(r, a, b"4", max_depth=2),
        ]
    )
    assert [x.status for x in got] == ["enqueued", "full", "error", "enqueued"]
    assert got[1].error is not None and "max_depth 1" in got[1].error
    assert got[2].error is not None and "belongs to room" in got[2].error
    assert (await env.dump())["npending"] == "2"
    assert await env.lanes.check() == []


async def test_a_room_without_a_ceiling_gets_one_and_a_ceiling_is_never_replaced(
    env: Env,
) -> None:
    capped, uncapped, sourced = room(), room(), room()
    card = own(env, "card")
    await env.lanes.limit(capped, 5)
    await env.client.hset(card, mapping={"ceiling": "3", "bad": "x", "big": "100000"})
    await env.lanes.admit(
        [
            Admission(capped, lane(), b"a", ceiling=2),
            Admission(uncapped, lane(), b"b", ceiling=2),
            Admission(sourced, lane(), b"c", ceiling=2, ceiling_from=(card, "ceiling")),
        ]
    )
    glimit = (await env.dump())["glimit"]
    assert glimit == {capped: "5", uncapped: "2", sourced: "3"}
    # a source that holds no valid ceiling: the one given
    for field in ("bad", "big", "missing"):
        r = room()
        await env.lanes.admit([Admission(r, lane(), b"d", ceiling=4, ceiling_from=(card, field))])
        assert (await env.dump())["glimit"][r] == "4", field
    assert await env.lanes.check() == []


async def test_a_ceiling_that_caps_a_room_running_uncapped_takes_it_off_the_ring(
    env: Env,
) -> None:
    """A room that ran without a ceiling holds 2 in flight; the ceiling it gets is 2: it
    leaves the ring (as limit would take it off) until one is acked."""
    r, a = room(), lane()
    for n in range(4):
        await env.lanes.enqueue(r, a, b"%d" % n)
    first, second = await env.lanes.claim(60_000), await env.lanes.claim(60_000)
    assert first is not None and second is not None
    assert (await env.dump())["ring"] == [r]
    (got,) = await env.lanes.admit([Admission(r, a, b"x", ceiling=2)])
    assert got.status == "enqueued"
    dump = await env.dump()
    assert dump["glimit"] == {r: "2"}
    assert "ring" not in dump
    assert await env.lanes.check() == []
    await env.lanes.ack(first)
    assert (await env.dump())["ring"] == [r]
    assert await env.lanes.check() == []


async def test_admit_says_whether_the_room_is_paused(env: Env) -> None:
    paused, running = room(), room()
    await env.lanes.pause(paused)
    got = await env.lanes.admit([Admission(paused, lane(), b"p"), Admission(running, lane(), b"r")])
    assert [(x.status, x.paused) for x in got] == [("enqueued", True), ("enqueued", False)]


@pytest.mark.parametrize(
    "bad",
    [
        {"room": "nope"},
        {"lane": "ROM" + "0" * 26},
        {"payload": "text"},
        {"max_depth": 0},
        {"ceiling": 0},
        {"ceiling": 1001},
        {"dedupe_key": ""},
        {"guards": (Guard("eq", "emq:{Q}:glimit", "f", "v"),)},  # the lanes' own keys
        {"guards": (Guard("eq", "other:{elsewhere}:k", "f", "v"),)},  # another slot
        {"guards": (Guard("xx", "test:{Q}:k", "f", "v"),)},  # type: ignore[arg-type]
        {"ceiling_from": ("plain-key", "f")},
    ],
)
async def test_a_malformed_admission_writes_nothing(env: Env, bad: dict[str, object]) -> None:
    fields: dict[str, object] = {"room": room(), "lane": lane(), "payload": b"p"}
    fields.update(bad)
    for name in ("guards", "ceiling_from"):
        value = fields.get(name)
        if value is not None:  # put this test's queue into the key
            fields[name] = _with_queue(value, env.queue)
    good = Admission(room(), lane(), b"ok")
    with pytest.raises(LaneError):
        await env.lanes.admit([good, Admission(**fields)])  # type: ignore[arg-type]
    assert await env.dump() == {}


def _with_queue(value: object, queue: str) -> object:
    if isinstance(value, tuple) and value and isinstance(value[0], Guard):
        return tuple(Guard(g.op, g.key.replace("{Q}", f"{{{queue}}}"), g.field, g.value)
                     for g in value)  # fmt: skip
    if isinstance(value, tuple):
        return (str(value[0]).replace("{Q}", f"{{{queue}}}"), value[1])
    return value


async def test_the_admitted_jobs_are_the_ones_enqueue_makes(env: Env) -> None:
    """The same job through enqueue and through admit: the same job hash and books."""
    r, a = room(), lane()
    (got,) = await env.lanes.admit([Admission(r, a, b"same", max_attempts=3)])
    assert got == Admitted("enqueued", got.job_id, False)
    assert got.taken
    assert (await env.dump())[f"job:{got.job_id}"] == {
        "p": "same",
        "r": r,
        "l": a,
        "s": "1",
        "m": "3",
        "t": "pending",
        "e": ANY,
    }


async def test_notes_are_written_with_an_admitted_job_only(env: Env) -> None:
    r, a = room(), lane()
    names, card = own(env, "names"), own(env, "card")
    await env.client.hset(card, "round", "1")
    note = ((names, a, "Ann"),)
    refused, taken, full = await env.lanes.admit(
        [
            Admission(r, a, b"x", guards=(Guard("eq", card, "round", "2"),), notes=note),
            Admission(r, a, b"y", max_depth=1, notes=((names, a, "Ann B."),)),
            Admission(r, a, b"z", max_depth=1, notes=((names, a, "Ann C."),)),
        ]
    )
    assert (refused.status, taken.status, full.status) == ("refused", "enqueued", "full")
    assert await env.client.hgetall(names) == {a.encode(): b"Ann B."}
    with pytest.raises(LaneError):
        await env.lanes.admit([Admission(r, a, b"w", notes=(("plain", "f", "v"),))])
