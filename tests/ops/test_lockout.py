"""Nobody can lock the operator out of the ops page: behind a trusted proxy the client is the
rightmost X-Forwarded-For entry that is not a trusted proxy (a forged prefix or a `Forwarded`
header names nobody), each address's budget refuses its own tries only, and the page's budget
slows wrong tries without ever refusing a right token. Through the real page on a test
server, on a clock the test moves (no real waiting for the page's delays)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, Final

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

from codemojex.ops.page.auth import LoginBudget
from codemojex.ops.page.proxies import TrustedProxies
from tests.ops.clock import ManualClock, settled
from tests.ops.conftest import OPS_TOKEN, Served, serve_ops

PROXY: Final = ["127.0.0.1/32"]  # the test client stands for nginx: what it forwards is believed
ATTACKER: Final = "203.0.113.66"  # the address the attacker really connects from
OPERATOR: Final = "198.51.100.7"


def budget_on(clock: ManualClock, **kwargs: int) -> LoginBudget:
    return LoginBudget(clock=clock, sleep=clock.sleep, **kwargs)


Send = Callable[[dict[str, str], str], Coroutine[Any, Any, int]]


def sender(ops: Served, http: aiohttp.ClientSession, answers: Counter[int]) -> Send:
    async def send(headers: dict[str, str], token: str) -> int:
        data = {"name": "Ann", "token": token}
        async with http.post(
            f"{ops.url}/login", data=data, headers=headers, allow_redirects=False
        ) as r:
            answers[r.status] += 1
            return r.status

    return send


async def operator_logs_in_at_once(send: Send, clock: ManualClock) -> None:
    """The right token from the operator's own address: let in without the page's clock moving
    (a page that held it would never answer), nor any real wait beyond a few seconds."""
    before = clock.now
    status = await asyncio.wait_for(send({"X-Forwarded-For": OPERATOR}, OPS_TOKEN), 10)
    assert status == 303, status
    assert clock.now == before


async def test_an_attacker_forging_addresses_cannot_lock_the_operator_out(
    ops_database_url: str, queue_name: str
) -> None:
    """The attack: 80 wrong tokens at once, then one every 0.5 s, each claiming a new address
    in an X-Forwarded-For prefix and in `Forwarded`; nginx puts the attacker's real address
    last. All of them count against that one address: 10 compared, then one every 6 s; the
    operator, from another address, gets in at once."""
    clock = ManualClock()
    budget = budget_on(clock)
    answers: Counter[int] = Counter()
    async with (
        serve_ops(ops_database_url, queue_name, proxies=PROXY, budget=budget) as ops,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as http,
    ):
        send = sender(ops, http, answers)
        tries: list[asyncio.Task[int]] = []

        def forge(n: int) -> None:
            forged = f"198.18.{n // 256}.{n % 256}"  # a new address (not /64) each time
            headers = {
                "X-Forwarded-For": f"{forged}, {ATTACKER}",
                "Forwarded": f"for={forged};proto=https",
            }
            tries.append(asyncio.create_task(send(headers, f"wrong-{n:04d}-{'x' * 32}")))

        for n in range(80):
            forge(n)
        await settled(lambda: answers.total() + clock.sleeping == 80, "the first 80 tries")
        steps = 40  # 20 s on the page's clock, one forged try every 0.5 s
        for n in range(80, 80 + steps):
            clock.advance(0.5)
            forge(n)

            def answered_or_held(sent: int = n + 1) -> bool:
                return answers.total() + clock.sleeping == sent

            await settled(answered_or_held, f"try {n}")
        await operator_logs_in_at_once(send, clock)
        clock.advance(budget.slow_delay_s)
        statuses = Counter(await asyncio.gather(*tries))
    # One address's budget: its burst, one more every 6 s (the 20 s of the test), no more.
    most = budget.burst_addr + int(steps * 0.5 / budget.refill_addr_s)
    assert set(statuses) == {401, 429}, statuses
    assert budget.burst_addr <= statuses[401] <= most, statuses


async def test_a_swarm_of_real_addresses_is_slowed_and_the_operator_gets_in(
    ops_database_url: str, queue_name: str
) -> None:
    """100 addresses (each one nginx really saw) × 3 wrong tokens: each address is within its
    own budget, so all 300 are compared and answered 401, none refused. The page's budget
    answers its first 40 after 0.5 s and holds the other 260 for 5 s; meanwhile the operator
    gets in at once from an address of their own."""
    clock = ManualClock()
    budget = budget_on(clock)
    answers: Counter[int] = Counter()
    async with (
        serve_ops(ops_database_url, queue_name, proxies=PROXY, budget=budget) as ops,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=400)) as http,
    ):
        send = sender(ops, http, answers)
        tries = [
            asyncio.create_task(send({"X-Forwarded-For": f"192.0.2.{n}"}, f"wrong-{n}-{k}"))
            for n in range(100)
            for k in range(3)
        ]
        await settled(lambda: answers.total() + clock.sleeping == 300, "300 tries")
        assert not answers, answers  # nothing refused, nothing answered before its delay
        await operator_logs_in_at_once(send, clock)
        clock.advance(budget.fail_delay_s)
        fast = budget.burst
        await settled(lambda: answers[401] == fast and clock.sleeping == 300 - fast, "40 fast")
        clock.advance(budget.slow_delay_s - budget.fail_delay_s)
        assert Counter(await asyncio.gather(*tries)) == Counter({401: 300})
    assert answers == Counter({401: 300, 303: 1})


async def test_wrong_answers_held_at_once_are_bounded(
    ops_database_url: str, queue_name: str
) -> None:
    """Memory stays bounded: past `held_most` wrong answers waiting, a wrong token is answered
    401 at once; a right one still gets in."""
    clock = ManualClock()
    budget = budget_on(clock, held_most=5)
    answers: Counter[int] = Counter()
    async with (
        serve_ops(ops_database_url, queue_name, proxies=PROXY, budget=budget) as ops,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=40)) as http,
    ):
        send = sender(ops, http, answers)
        tries = [
            asyncio.create_task(send({"X-Forwarded-For": f"192.0.2.{n}"}, "wrong"))
            for n in range(20)
        ]
        await settled(lambda: answers.total() + clock.sleeping == 20, "20 tries")
        assert answers == Counter({401: 15}) and clock.sleeping == budget.held == 5
        await operator_logs_in_at_once(send, clock)
        clock.advance(budget.slow_delay_s)
        assert Counter(await asyncio.gather(*tries)) == Counter({401: 20})
    assert budget.held == 0


async def test_one_address_is_refused_past_its_budget_and_no_other(
    ops_database_url: str, queue_name: str
) -> None:
    """Per-address budgets refuse: the attacker's 11th try is 429 without a comparison, even
    with the right token; another address is not touched; the attacker's address gets a try
    back after budget.refill_addr_s, and a right token does not spend it."""
    clock = ManualClock()
    budget = budget_on(clock)
    answers: Counter[int] = Counter()
    async with (
        serve_ops(ops_database_url, queue_name, proxies=PROXY, budget=budget) as ops,
        aiohttp.ClientSession() as http,
    ):
        send = sender(ops, http, answers)
        attacker = {"X-Forwarded-For": ATTACKER}
        tries = [asyncio.create_task(send(attacker, f"wrong-{n}")) for n in range(10)]
        await settled(lambda: answers.total() + clock.sleeping == 10, "10 tries")
        assert clock.sleeping == 10, answers
        assert await send(attacker, OPS_TOKEN) == 429  # not compared: right or wrong alike
        await operator_logs_in_at_once(send, clock)
        clock.advance(budget.refill_addr_s)
        assert Counter(await asyncio.gather(*tries)) == Counter({401: 10})
        assert await send(attacker, OPS_TOKEN) == 303  # the try refilled, given back
        assert await send(attacker, OPS_TOKEN) == 303
    assert answers[429] == 1


# --- who the client is, as the page reads it ------------------------------------------------


async def _peer_of(proxies: list[str], headers: list[tuple[str, str]]) -> tuple[str, bool]:
    """The peer a page with these trusted proxies believes, for a request from 127.0.0.1 with
    these header lines (a name may repeat), through a real server."""
    trusted = TrustedProxies([ipaddress.ip_network(p) for p in proxies])

    async def handler(request: web.Request) -> web.Response:
        peer = trusted.peer(request)
        return web.json_response({"address": peer.address, "https": peer.https})

    app = web.Application()
    app.router.add_get("/", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(server.make_url("/"), headers=CIMultiDict(headers)) as r,
        ):
            body = await r.json()
    finally:
        await server.close()
    return body["address"], body["https"]


XFF, XFP, FWD = "X-Forwarded-For", "X-Forwarded-Proto", "Forwarded"
TWO_PROXIES = ["127.0.0.1/32", "10.0.0.0/8"]


@pytest.mark.parametrize(
    ("proxies", "headers", "address", "https"),
    [
        (PROXY, [(XFF, "203.0.113.7"), (XFP, "https")], "203.0.113.7", True),
        (PROXY, [(XFF, "198.51.100.1, 203.0.113.7")], "203.0.113.7", False),
        (PROXY, [(XFF, "198.51.100.1"), (XFF, "203.0.113.7")], "203.0.113.7", False),
        (PROXY, [(XFF, "203.0.113.7:5555")], "203.0.113.7", False),
        (PROXY, [(XFF, "[2001:db8::7]:443")], "2001:db8::7", False),
        (TWO_PROXIES, [(XFF, "198.51.100.1, 203.0.113.7, 10.1.2.3")], "203.0.113.7", False),
        (TWO_PROXIES, [(XFF, "10.9.9.9, 10.1.2.3")], "10.9.9.9", False),  # all ours
        # RFC 7239 Forwarded is never read, from a trusted proxy or anyone
        (
            PROXY,
            [(FWD, "for=198.51.100.1;proto=https"), (XFF, "203.0.113.7")],
            "203.0.113.7",
            False,
        ),
        (PROXY, [(FWD, 'for="[2001:db8::1]";proto=https')], "127.0.0.1", False),
        # the scheme is the one the proxy next to us set: the rightmost
        (PROXY, [(XFF, "203.0.113.7"), (XFP, "https, http")], "203.0.113.7", False),
        (PROXY, [(XFF, "203.0.113.7"), (XFP, "http"), (XFP, "https")], "203.0.113.7", True),
        # from a client that is no trusted proxy, nothing is believed
        ([], [(XFF, "203.0.113.7"), (XFP, "https")], "127.0.0.1", False),
        (["10.0.0.0/8"], [(XFF, "203.0.113.7"), (XFP, "https")], "127.0.0.1", False),
    ],
)
async def test_the_client_is_the_rightmost_untrusted_x_forwarded_for_entry(
    proxies: list[str], headers: list[tuple[str, str]], address: str, https: bool
) -> None:
    assert await _peer_of(proxies, headers) == (address, https)
