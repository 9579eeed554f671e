"""Who may use the ops page: the holder of CODEMOJEX_OPS_TOKEN, after the login form.

A login makes a server-side session (in memory: a restart logs everyone out) whose id is an
HttpOnly, SameSite=Strict cookie; every action must carry the session's CSRF token. The
operator's name, given at login, is what the audit log records of each action.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from codemojex.limits import OPS_SESSION_S

COOKIE: Final = "cmx_ops"
NAME_MAX: Final = 64
# Pages anyone may fetch: the login form, its assets.
OPEN_PATHS: Final = ("/login", "/static/")


@dataclass(frozen=True, slots=True)
class Session:
    operator: str
    csrf: str
    expires: float


class Sessions:
    def __init__(self, token: str, lifetime_s: float = OPS_SESSION_S) -> None:
        if not token:
            raise ValueError("the ops page needs a token")
        self._token = token.encode()
        self._lifetime_s = lifetime_s
        self._by_id: dict[str, Session] = {}

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self._token)

    def open(self, operator: str) -> tuple[str, Session]:
        sid = secrets.token_urlsafe(32)
        session = Session(operator, secrets.token_urlsafe(32), time.time() + self._lifetime_s)
        self._by_id[sid] = session
        return sid, session

    def get(self, request: web.Request) -> Session | None:
        sid = request.cookies.get(COOKIE, "")
        session = self._by_id.get(sid)
        if session is None:
            return None
        if session.expires < time.time():
            del self._by_id[sid]
            return None
        return session

    def close(self, request: web.Request) -> None:
        self._by_id.pop(request.cookies.get(COOKIE, ""), None)

    @property
    def lifetime_s(self) -> float:
        return self._lifetime_s


def clean_name(raw: str) -> str:
    """The operator's name as the audit log will show it: printable, trimmed, bounded."""
    return "".join(ch for ch in raw if ch.isprintable()).strip()[:NAME_MAX]


def csrf_ok(session: Session, given: str) -> bool:
    return hmac.compare_digest(given.encode(), session.csrf.encode())


def set_cookie(
    response: web.StreamResponse, request: web.Request, sid: str, max_age: float
) -> None:
    response.set_cookie(
        COOKIE,
        sid,
        max_age=int(max_age),
        httponly=True,
        samesite="Strict",
        secure=request.secure,  # behind TLS (or a proxy that says so): never sent in clear
        path="/",
    )
