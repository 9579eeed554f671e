"""The secrets Codemojex is given: how strong a secret of ours must be to start with, and
how every secret is kept out of every log line.

A secret we choose (the webhook secret, the ops page's token) guards a door anyone can knock
on, so it must be long and random: `weakness` refuses a short one, one with few different
characters, and the placeholders our own examples show ("a-long-random-string") or that
people type ("changeme", "secret…"). The bot token we are given, not choose.

Logs: python-telegram-bot logs its Bot API URL, which holds the token, at DEBUG (`-v`); a
library may one day log a request or a URL at another level. So every process formats its
log records through `MaskingFormatter`, installed by `mask_logs` on the handlers the CLI
configures: whatever the level and the logger, a secret in a record's text comes out as `***`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote, urlsplit

MASK: Final = "***"
# Fewer different characters than this is no random string (a 32-character hex string has
# 14 on average, a token_urlsafe(32) about 30).
DISTINCT_MIN: Final = 8
# Compared case-insensitively with every part of a secret: what examples and people use.
PLACEHOLDERS: Final = (
    "a-long-random-string",
    "random-string",
    "replace",
    "change",
    "example",
    "placeholder",
    "secret",
    "password",
    "passw0rd",
    "token",
    "your-",
    "xxxxxx",
    "123456",
)
HOW_TO_MAKE: Final = (
    "e.g. the output of: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
)
# A secret shorter than this is not masked where it appears inside other text (a stand-in's
# "123:TEST" would turn every "TEST" into ***): too short to be a secret anyway.
MASK_MIN: Final = 8


def weakness(value: str, name: str, minimum: int) -> str | None:
    """Why `value` will not do as the secret `name` (None: it will)."""
    if len(value) < minimum:
        return f"{name} must be at least {minimum} characters, and random ({HOW_TO_MAKE})"
    folded = value.casefold()
    if len(set(folded)) < DISTINCT_MIN or any(p in folded for p in PLACEHOLDERS):
        return f"{name} looks like a placeholder: use a random one ({HOW_TO_MAKE})"
    return None


def secret_forms(secrets: Iterable[str | None]) -> list[str]:
    """Every form in which these secrets may show up in a log line: as given, percent-encoded
    (in a URL), and a bot token's part after the colon alone. Longest first, so that a longer
    secret is masked whole before a part of it."""
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        parts = [secret]
        if ":" in secret:  # a bot token: <bot id>:<the secret part>
            parts.append(secret.split(":", 1)[1])
        for part in parts:
            forms |= {part, quote(part, safe=""), quote(part, safe="/:")}
    return sorted((f for f in forms if len(f) >= MASK_MIN), key=len, reverse=True)


def url_password(url: str | None) -> str | None:
    """The password in a connection URL (redis://:pw@host, postgresql://user:pw@host)."""
    if not url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None


class MaskingFormatter(logging.Formatter):
    """Formats a record with the handler's own formatter, then masks every secret in the text
    (message, arguments, traceback, stack: everything that reaches the output)."""

    def __init__(self, inner: logging.Formatter | None, secrets: Iterable[str]) -> None:
        super().__init__()
        self._inner = inner or logging.Formatter()
        self._secrets = list(secrets)

    def format(self, record: logging.LogRecord) -> str:
        text = self._inner.format(record)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


def mask_logs(secrets: Iterable[str | None], logger: logging.Logger | None = None) -> None:
    """Mask `secrets` (in every form, see `secret_forms`) in whatever the handlers of `logger`
    (the root logger: every record of every logger ends there) write."""
    forms = secret_forms(secrets)
    for handler in (logger or logging.getLogger()).handlers:
        current = handler.formatter
        if isinstance(current, MaskingFormatter):
            current = current._inner
        handler.setFormatter(MaskingFormatter(current, forms))
