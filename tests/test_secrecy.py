"""The masking of secrets in log lines (`codemojex.secrecy`), on a real logger and handler:
every form a secret may take in a line (as given, percent-encoded, decoded, a bot token's
secret part alone), and the rule by length (8 characters or more: masked wherever it appears;
4 to 7: where it stands alone; under 4: not maskable, and named as such). The processes
that log through it are tested in test_secrets_in_logs.py."""

from __future__ import annotations

import io
import logging
from urllib.parse import quote

import pytest

from codemojex.secrecy import MASK, mask_logs, url_password

TOKEN = "987654321:AAF-the_secret_part_Of_the_bot_token-0123456789"
TOKEN_SECRET = TOKEN.split(":", 1)[1]
BOT_ID = TOKEN.split(":", 1)[0]


def logged(secrets: dict[str, str | None], *lines: str, exc: BaseException | None = None) -> str:
    """What a logger whose handler `mask_logs` set up writes for `lines` (and `exc`'s
    traceback)."""
    logger = logging.Logger("masking-test")  # a logger of its own, outside the tree
    out = io.StringIO()
    logger.addHandler(logging.StreamHandler(out))
    mask_logs(secrets, logger)
    for line in lines:
        logger.warning("%s", line)
    if exc is not None:
        logger.error("failed", exc_info=exc)
    return out.getvalue()


def test_a_percent_encoded_password_is_masked_encoded_and_decoded() -> None:
    """The URL holds the password percent-encoded; the driver uses it decoded (and says so
    in an error); a library may encode it again its own way."""
    decoded = "Zq@r7/pw:k2+x"
    url = f"postgresql+asyncpg://cmx:{quote(decoded, safe='')}@db:5432/cmx"
    password = url_password(url)
    assert password == "Zq%40r7%2Fpw%3Ak2%2Bx"  # as written in the URL: encoded
    out = logged(
        {"the password of CODEMOJEX_DATABASE_URL": password},
        f"connecting to {url}",
        f"password authentication failed for password {decoded!r}",
        f"dsn=host=db password={decoded} dbname=cmx",
        f"query: ?password={quote(decoded, safe='/:')}",
    )
    for form in (decoded, password, quote(decoded, safe="/:")):
        assert form not in out, out
    assert out.count(MASK) == 4, out


def test_the_bot_tokens_secret_part_is_masked_alone_encoded_and_split() -> None:
    """Whole, percent-encoded (a URL's "%3A"), and its secret part alone: split off at the
    colon, or next to the bot id written apart. The bot id alone is public."""
    out = logged(
        {"CODEMOJEX_TOKEN": TOKEN},
        f"Set Bot API URL: https://api.telegram.org/bot{TOKEN}",
        f"GET https://example.test/bot{quote(TOKEN, safe='')}/getMe",
        f"the secret part: {TOKEN_SECRET}",
        f"bot id {BOT_ID}, key {TOKEN_SECRET}.",
        f"quoted as '{TOKEN_SECRET}'",
    )
    assert TOKEN_SECRET not in out, out
    assert out.count(MASK) == 5, out
    assert f"bot id {BOT_ID}," in out


@pytest.mark.parametrize(
    "secret",
    ["k3Y-p9", "Q7w", "longer-Than-8"],
    ids=["6 characters", "3 characters", "13 characters"],
)
def test_the_rule_by_length(secret: str) -> None:
    """8 or more: masked wherever it appears, inside a word too. 4 to 7: masked where it
    stands alone (a URL's password between ":" and "@", a quoted value, a word of its own),
    not inside a longer word (it would blank words and spell itself out). Under 4: not masked
    at all, and `mask_logs` names it."""
    name = "the password of CODEMOJEX_REDIS_URL"
    url = f"redis://:{secret}@cache:6379/0"
    alone = [f"connecting to {url}", f"AUTH '{secret}' refused", f"{secret} is wrong"]
    inside = f"x{secret}y and {secret}_z"
    logger_out = io.StringIO()
    logger = logging.Logger("masking-test")
    logger.addHandler(logging.StreamHandler(logger_out))
    too_short = mask_logs({name: url_password(url)}, logger)
    for line in [*alone, inside]:
        logger.warning("%s", line)
    lines = logger_out.getvalue().splitlines()
    if len(secret) < 4:
        assert too_short == [name]
        assert lines == [*alone, inside]  # untouched: masking it would be noise
        return
    assert too_short == []
    assert [secret in line for line in lines[:-1]] == [False] * len(alone), lines
    assert lines[:-1] == [line.replace(secret, MASK) for line in alone]
    if len(secret) >= 8:
        assert lines[-1] == inside.replace(secret, MASK)
    else:
        assert lines[-1] == inside


def test_a_traceback_is_masked_too() -> None:
    try:
        raise ConnectionError(f"could not log in with {TOKEN_SECRET}")
    except ConnectionError as exc:
        out = logged({"CODEMOJEX_TOKEN": TOKEN}, exc=exc)
    assert "ConnectionError" in out
    assert TOKEN_SECRET not in out


def test_no_secret_masks_nothing() -> None:
    assert logged({"CODEMOJEX_TOKEN": None, "x": ""}, "a line") == "a line\n"
