"""The secrets Codemojex is given: how strong a secret of ours must be to start with, and
how every secret is kept out of every log line.

A secret we choose (the webhook secret, the ops page's token) guards a door anyone can knock
on, so it must be long and random: `weakness` refuses a short one, one with few different
characters, and the placeholders our own examples show ("a-long-random-string") or that
people type ("changeme", "secret…"). The bot token we are given, not choose.

Logs: python-telegram-bot logs its Bot API URL, which holds the token, at DEBUG (the CLI's
`--wire-debug`), httpx and posting/request.py every call's URL at INFO (`-v`); a library may
one day log a request or a URL at another level. So every process formats its log records
through `MaskingFormatter`, installed by `mask_logs` on the handlers the CLI configures:
whatever the level and the logger, a secret in a record's text comes out as `***`, in every
form it may take there (`secret_forms`). The rule by length: 8 characters or more, masked
wherever it appears; 4 to 7, masked where it stands alone; under 4, not maskable (the CLI
warns at start-up).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

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
# How long a form of a secret (as given, percent-encoded, decoded) must be to be masked where
# it appears inside other text. A shorter one is masked only where it stands alone (no letter,
# digit, "_" or "-" right before or after it: a URL's password between ":" and "@", a quoted
# value): masked inside words, a stand-in's "123:TEST" would turn every "TEST" into ***, and
# each *** in a known word would spell the secret out for whoever reads the log.
MASK_MIN: Final = 8
# Shorter than this, a secret is not masked at all: one to three characters stand alone in
# ordinary lines ("a", "ok", "42"), so masking them blanks noise and points at the secret.
# The CLI says so at start-up, naming the setting (never the value).
ALONE_MIN: Final = 4


def weakness(value: str, name: str, minimum: int) -> str | None:
    """Why `value` will not do as the secret `name` (None: it will)."""
    if len(value) < minimum:
        return f"{name} must be at least {minimum} characters, and random ({HOW_TO_MAKE})"
    folded = value.casefold()
    if len(set(folded)) < DISTINCT_MIN or any(p in folded for p in PLACEHOLDERS):
        return f"{name} looks like a placeholder: use a random one ({HOW_TO_MAKE})"
    return None


def secret_forms(secrets: Iterable[str | None]) -> list[str]:
    """Every form in which these secrets may show up in a log line: as given, decoded (a URL's
    password is percent-encoded in the URL, and its driver uses it decoded), percent-encoded
    (in a URL, in a form), and a bot token's secret part (after the colon) alone, in each of
    those forms, each also as a JSON string writes it (CODEMOJEX_LOG_FORMAT=json: a `"` or a
    `\\` escaped). Longest first, so that a longer form is masked whole before a part of it.
    Forms shorter than `ALONE_MIN` are left out (see `unmaskable`)."""
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        parts = [secret]
        if ":" in secret:  # a bot token: <bot id>:<the secret part>
            parts.append(secret.split(":", 1)[1])
        for part in parts:
            for plain in {part, unquote(part), unquote_plus(part)}:
                forms |= {
                    plain,
                    quote(plain, safe=""),
                    quote(plain, safe="/:"),
                    quote_plus(plain, safe=""),
                }
    forms |= {json.dumps(form, ensure_ascii=False)[1:-1] for form in forms}
    return sorted((f for f in forms if len(f) >= ALONE_MIN), key=len, reverse=True)


def unmaskable(secrets: Mapping[str, str | None]) -> list[str]:
    """The names of the secrets too short to be masked (shorter than `ALONE_MIN` as given)."""
    return [name for name, value in secrets.items() if value and len(value) < ALONE_MIN]


def masking_pattern(forms: Sequence[str]) -> re.Pattern[str] | None:
    """One pattern for all the forms, in the order given (longest first): a form of
    `MASK_MIN` characters or more wherever it appears, a shorter one where it stands alone."""
    if not forms:
        return None
    return re.compile(
        "|".join(
            re.escape(form) if len(form) >= MASK_MIN else rf"(?<![\w-]){re.escape(form)}(?![\w-])"
            for form in forms
        )
    )


def url_password(url: str | None) -> str | None:
    """The password in a connection URL (redis://:pw@host, postgresql://user:pw@host), as
    written there (percent-encoded; `secret_forms` adds the decoded form)."""
    if not url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None


class MaskingFormatter(logging.Formatter):
    """Formats a record with the handler's own formatter, then masks every secret in the text
    (message, arguments, traceback, stack: everything that reaches the output)."""

    def __init__(self, inner: logging.Formatter | None, forms: Sequence[str]) -> None:
        super().__init__()
        self._inner = inner or logging.Formatter()
        self._pattern = masking_pattern(forms)

    def format(self, record: logging.LogRecord) -> str:
        text = self._inner.format(record)
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)


def mask_logs(secrets: Mapping[str, str | None], logger: logging.Logger | None = None) -> list[str]:
    """Mask `secrets` (by name: the setting each comes from; every form, see `secret_forms`)
    in whatever the handlers of `logger` (the root logger: every record of every logger ends
    there) write. Returns the names of those too short to be masked (`unmaskable`)."""
    forms = secret_forms(secrets.values())
    for handler in (logger or logging.getLogger()).handlers:
        current = handler.formatter
        if isinstance(current, MaskingFormatter):
            current = current._inner
        handler.setFormatter(MaskingFormatter(current, forms))
    return unmaskable(secrets)
