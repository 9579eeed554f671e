"""The ops page's login: a strong token to start with, a constant-time compare of the whole
token, a budget of tries per client address (the page's budget, which only slows, and the
forged addresses: test_lockout.py), sessions bounded in number and idle time, and a Secure
`__Host-` cookie with HSTS behind a trusted TLS proxy only."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections import Counter
from pathlib import Path

import aiohttp
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from codemojex import cli
from codemojex.ops.page.auth import LoginBudget, Sessions, token_problem
from codemojex.ops.page.main import run_ops
from codemojex.settings import Settings
from tests.conftest import REDIS_URL
from tests.helpers.support import free_port
from tests.ops.clock import ManualClock, settled
from tests.ops.conftest import OPS_TOKEN, serve_ops

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "token",
    [
        "a",
        "short-but-random-Zq8",
        "a-long-random-string",
        "a-long-random-string-a-long-random-string",
        "x" * 40,
        "abababababababababababababababababab",
        "changeme-changeme-changeme-changeme-1234",
        "replace-with-a-long-random-token-of-yours",
    ],
)
def test_a_short_or_placeholder_token_is_refused_at_start(token: str) -> None:
    problem = token_problem(token)
    assert problem is not None and "CODEMOJEX_OPS_TOKEN" in problem
    assert len(token) < 3 or token not in problem
    with pytest.raises(ValueError, match="CODEMOJEX_OPS_TOKEN"):
        settings = Settings(redis_url=REDIS_URL, ops_token=SecretStr(token))
        asyncio.run(run_ops(settings.ops_page(), settings.runtime()))


def test_a_random_token_will_do() -> None:
    for _ in range(50):
        assert token_problem(secrets.token_urlsafe(32)) is None
        assert token_problem(secrets.token_hex(16)) is None
    assert token_problem(OPS_TOKEN) is None


def test_codemojex_ops_refuses_a_weak_token_in_one_line(tmp_path: Path) -> None:
    """In-process (CliRunner): refused before any connection, the token never printed."""
    for token in ("a", "a-long-random-string"):
        env = {
            "CODEMOJEX_REDIS_URL": REDIS_URL,
            "CODEMOJEX_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/t.db",
            "CODEMOJEX_OPS_TOKEN": token,
            "CODEMOJEX_OPS_PORT": str(free_port()),
        }
        result = CliRunner().invoke(cli.app, ["ops"], env=env)
        assert result.exit_code == 2, result.output
        assert "CODEMOJEX_OPS_TOKEN" in result.output and "Traceback" not in result.output
        assert f"={token}" not in result.output and f" {token}\n" not in result.output


def test_the_deploy_examples_ship_no_token_the_page_would_take() -> None:
    """A copied example must not start with a token everybody has read."""
    shipped = []
    for path in (ROOT / "deploy").rglob("*"):
        if path.is_file():
            shipped += re.findall(r'CODEMOJEX_OPS_TOKEN[=:]\s*"?([^"\s#]*)', path.read_text())
    assert shipped, "no example sets CODEMOJEX_OPS_TOKEN"
    for value in shipped:
        assert token_problem(value) is not None, value


def test_the_deploy_examples_keep_the_internal_endpoints_internal() -> None:
    """The ops page behind TLS believes its proxy; /metrics, /healthz and /readyz are on
    loopback (systemd) or admitted to Prometheus alone (Kubernetes)."""
    k8s = "\n".join(p.read_text() for p in (ROOT / "deploy" / "kubernetes").rglob("*.yaml"))
    assert "CODEMOJEX_OPS_TRUSTED_PROXIES" in k8s
    policies = k8s.split("kind: NetworkPolicy")[1:]
    assert any("port: 9100" in p for p in policies) and any("port: 8080" in p for p in policies)
    for unit in ("codemojex-bot.service", "codemojex-worker@.service", "codemojex-sender@.service"):
        text = (ROOT / "deploy" / "systemd" / unit).read_text()
        assert "CODEMOJEX_METRICS_HOST=127.0.0.1" in text, unit
    env = (ROOT / "deploy" / "codemojex.env.example").read_text()
    assert "CODEMOJEX_OPS_TRUSTED_PROXIES=127.0.0.1" in env


def test_the_deploy_examples_forward_the_client_the_way_the_page_reads_it() -> None:
    """The page reads the client from X-Forwarded-For and the scheme from X-Forwarded-Proto,
    which the proxies set themselves (nginx replaces what a client sent; ingress-nginx does
    by default), and never Forwarded: the examples clear a client's Forwarded."""
    nginx = (ROOT / "deploy" / "nginx" / "codemojex-ops.conf").read_text()
    directives = {" ".join(line.split()) for line in nginx.splitlines()}
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in directives
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in directives
    assert 'proxy_set_header Forwarded "";' in directives
    # ingress-nginx's own configuration is its Helm release's, never changed by our example:
    # the runbook says how to clear Forwarded there.
    k8s = "\n".join(p.read_text() for p in (ROOT / "deploy" / "kubernetes").rglob("*.yaml"))
    assert "ingress-nginx-controller" not in k8s and 'use-forwarded-headers: "true"' not in k8s
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert 'proxySetHeaders: {Forwarded: ""}' in operations


def test_the_compare_takes_the_whole_token_and_nothing_else() -> None:
    sessions = Sessions(OPS_TOKEN)
    assert sessions.token_ok(OPS_TOKEN)
    wrong = [OPS_TOKEN[:k] for k in range(len(OPS_TOKEN))]  # every prefix, "" included
    wrong += [OPS_TOKEN + "x", OPS_TOKEN + OPS_TOKEN, OPS_TOKEN + "\x00", " " + OPS_TOKEN]
    wrong += [OPS_TOKEN[1:], OPS_TOKEN[:-1] + "A", OPS_TOKEN.upper(), OPS_TOKEN + " "]
    assert not any(sessions.token_ok(w) for w in wrong)


async def test_over_http_a_prefix_a_suffix_or_nothing_is_refused(
    ops_database_url: str, queue_name: str
) -> None:
    generous = LoginBudget(burst_addr=1000, burst=1000)
    async with serve_ops(ops_database_url, queue_name, budget=generous) as ops:
        tries = ["", OPS_TOKEN[:1], OPS_TOKEN[:20], OPS_TOKEN[:-1], OPS_TOKEN + "0"]
        async with aiohttp.ClientSession() as http:
            for token in tries:
                data = {"name": "Ann", "token": token}
                async with http.post(f"{ops.url}/login", data=data, allow_redirects=False) as r:
                    assert r.status == 401, (token, r.status)
                    assert "Set-Cookie" not in r.headers
            await ops.login(http)


async def test_a_burst_of_wrong_tokens_gets_10_compared_at_most(
    ops_database_url: str, queue_name: str
) -> None:
    """One client, 40 requests in parallel, 600 wrong tokens: its budget is taken before a
    token is compared, so 10 are (401, after their delay), the other 590 are answered 429 at
    once; the right token is refused too until the client's budget gives it one more try
    (budget.refill_addr_s later, on the test's clock), then gets in."""
    clock = ManualClock()
    budget = LoginBudget(clock=clock, sleep=clock.sleep)
    async with serve_ops(ops_database_url, queue_name, budget=budget) as ops:
        connector = aiohttp.TCPConnector(limit=40)
        async with aiohttp.ClientSession(connector=connector) as http:
            tokens = asyncio.Queue[str]()
            for n in range(600):
                tokens.put_nowait(f"wrong-{n:04d}-{secrets.token_urlsafe(24)}")
            answers: Counter[int] = Counter()

            async def client() -> None:
                while not tokens.empty():
                    data = {"name": "Mallory", "token": tokens.get_nowait()}
                    async with http.post(f"{ops.url}/login", data=data) as r:
                        answers[r.status] += 1

            burst = asyncio.gather(*(client() for _ in range(40)))
            await settled(lambda: answers.total() + clock.sleeping == 600, "600 tries")
            assert answers == Counter({429: 590}) and clock.sleeping == 10, answers
            clock.advance(budget.fail_delay_s)
            await burst
            assert answers == Counter({401: 10, 429: 590}), answers
            right = {"name": "Ann", "token": OPS_TOKEN}
            async with http.post(f"{ops.url}/login", data=right, allow_redirects=False) as r:
                assert r.status == 429  # never compared, never "wrong"
                assert r.headers["Retry-After"] == str(int(budget.refill_addr_s) + 1)
            clock.advance(budget.refill_addr_s)
            async with http.post(f"{ops.url}/login", data=right, allow_redirects=False) as r:
                assert r.status == 303


async def test_a_client_that_is_no_trusted_proxy_is_one_address_whatever_it_claims(
    ops_database_url: str, queue_name: str
) -> None:
    """40 tries, each claiming another address in X-Forwarded-For and Forwarded, from a client
    the page does not trust: one address, so 10 compared and 30 refused."""
    clock = ManualClock()
    budget = LoginBudget(clock=clock, sleep=clock.sleep)
    answers: Counter[int] = Counter()
    async with (
        serve_ops(ops_database_url, queue_name, budget=budget) as ops,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=40)) as http,
    ):

        async def one(n: int) -> None:
            headers = {"X-Forwarded-For": f"198.51.100.{n}", "Forwarded": f"for=192.0.2.{n}"}
            data = {"name": "M", "token": f"wrong-{n}"}
            async with http.post(f"{ops.url}/login", data=data, headers=headers) as r:
                answers[r.status] += 1

        tries = asyncio.gather(*(one(n) for n in range(40)))
        await settled(lambda: answers.total() + clock.sleeping == 40, "40 tries")
        clock.advance(budget.fail_delay_s)
        await tries
    assert answers == Counter({401: 10, 429: 30}), answers


def test_sessions_end_when_idle_and_the_oldest_give_way() -> None:
    clock = ManualClock()
    sessions = Sessions(OPS_TOKEN, idle_s=0.3, most=3, clock=clock)
    first, _ = sessions.open("Ann")
    clock.advance(0.2)
    assert sessions.get(first) is not None  # used: its idle time starts again
    clock.advance(0.2)
    assert sessions.get(first) is not None
    clock.advance(0.3)
    assert sessions.get(first) is None  # idle for 0.3 s
    ids = [sessions.open(f"op{n}")[0] for n in range(3)]
    assert sessions.get(ids[0]) is not None  # now the most recently used
    newest, _ = sessions.open("late")
    assert len(sessions) == 3
    assert sessions.get(ids[1]) is None  # the least recently used gave way
    assert all(sessions.get(sid) is not None for sid in (ids[0], ids[2], newest))
    short = Sessions(OPS_TOKEN, lifetime_s=0.2, idle_s=10, clock=clock)
    sid, _ = short.open("Ann")
    clock.advance(0.1)
    assert short.get(sid) is not None
    clock.advance(0.1)
    assert short.get(sid) is None  # past its lifetime, however busy


async def _login_headers(ops_url: str, **headers: str) -> aiohttp.ClientResponse:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{ops_url}/login",
            data={"name": "Ann", "token": OPS_TOKEN},
            headers=headers,
            allow_redirects=False,
        ) as r,
    ):
        return r


@pytest.mark.parametrize(
    "forwarded",
    [
        {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"},
        {
            "X-Forwarded-Proto": "http, https",
            "X-Forwarded-For": "198.51.100.1, 203.0.113.7",
            "Forwarded": "for=198.51.100.1;proto=http",
        },
    ],
    ids=["x-forwarded", "x-forwarded-chain-and-a-forwarded-to-ignore"],
)
async def test_behind_a_trusted_tls_proxy_the_cookie_is_secure_with_hsts(
    ops_database_url: str, queue_name: str, forwarded: dict[str, str]
) -> None:
    async with serve_ops(ops_database_url, queue_name, proxies=["127.0.0.1/32"]) as ops:
        r = await _login_headers(ops.url, **forwarded)
        assert r.status == 303
        cookie = r.headers["Set-Cookie"]
        assert cookie.startswith("__Host-cmx_ops=")
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert "Path=/" in cookie and "Domain" not in cookie
        assert r.headers["Strict-Transport-Security"].startswith("max-age=")
        sid = cookie.split("=", 1)[1].split(";", 1)[0]
        async with aiohttp.ClientSession() as http:
            headers = {**forwarded, "Cookie": f"__Host-cmx_ops={sid}"}
            async with http.get(f"{ops.url}/", headers=headers) as page:
                assert page.status == 200 and "Ann" in await page.text()
                assert "Strict-Transport-Security" in page.headers
            # the same session id under the plain name, over "http": not a session there
            async with http.get(
                f"{ops.url}/", headers={"Cookie": f"cmx_ops={sid}"}, allow_redirects=False
            ) as page:
                assert page.status == 303 and page.headers["Location"] == "/login"
                assert "Strict-Transport-Security" not in page.headers


async def test_the_forwarded_scheme_of_anyone_else_is_ignored(
    ops_database_url: str, queue_name: str
) -> None:
    """From a client that is no trusted proxy nothing is believed; from a trusted one, never
    RFC 7239 `Forwarded` (the shipped proxies do not write it: a client did)."""
    cases = [
        ([], {"X-Forwarded-Proto": "https"}),
        ([], {"Forwarded": "for=203.0.113.7;proto=https"}),
        (["10.0.0.0/8"], {"X-Forwarded-Proto": "https"}),  # a proxy that is not this client
        (["127.0.0.1/32"], {"Forwarded": "for=203.0.113.7;proto=https"}),
    ]
    for proxies, headers in cases:
        async with serve_ops(ops_database_url, queue_name, proxies=proxies) as ops:
            r = await _login_headers(ops.url, **headers)
            assert r.status == 303
            cookie = r.headers["Set-Cookie"]
            assert cookie.startswith("cmx_ops=") and "Secure" not in cookie, (proxies, headers)
            assert "Strict-Transport-Security" not in r.headers
