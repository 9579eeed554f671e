"""The languages Codemojex speaks: which catalogs ship, how a Telegram `language_code` or an
admin's `/settings lang=…` picks one, and each language's compiled catalog.

The catalogs are gettext's, one per language beside this file:
`<lang>/LC_MESSAGES/codemojex.po` (the translations, edited by hand) and `codemojex.mo` (compiled
from it, shipped as package data; tests/game/test_catalogs.py checks it is up to date), from the
template `codemojex.pot` that Babel extracts from codemojex/game/texts.py (`make i18n`). English
is the message ids themselves and has no catalog.

A leaf module (standard library only), so that every layer may name a language. A catalog is
read on first use and kept for the life of the process: nothing is read at import.
"""

from __future__ import annotations

import functools
import gettext
from importlib import resources
from typing import Final, NewType

# A language the bot ships, spelled as its catalog's directory: "en", "ru", "pt_BR".
Lang = NewType("Lang", str)

EN: Final = Lang("en")
DOMAIN: Final = "codemojex"

# Every shipped language, in the order /settings lists them.
LANGUAGES: Final[tuple[Lang, ...]] = (
    EN,
    Lang("ru"),
    Lang("uk"),
    Lang("es"),
    Lang("pt_BR"),
    Lang("id"),
)

# Each language's own name for itself: the same whichever language the list is shown in.
NAMES: Final[dict[Lang, str]] = {
    EN: "English",
    Lang("ru"): "Русский",
    Lang("uk"): "Українська",
    Lang("es"): "Español",
    Lang("pt_BR"): "Português (Brasil)",
    Lang("id"): "Bahasa Indonesia",
}

_BY_KEY: Final = {lang.lower(): lang for lang in LANGUAGES}


def match(code: str | None) -> Lang | None:
    """The shipped language for a Telegram `language_code` ("ru", "pt-br", "es-419") or what an
    admin typed (any case, "-" or "_"); None when no catalog fits.

    An exact match wins; otherwise the language without its region: "es-419" is "es", and a
    Portuguese reader ("pt", "pt-pt") gets the Brazilian catalog rather than English."""
    if not code:
        return None
    key = code.strip().replace("-", "_").lower()
    if key in _BY_KEY:
        return _BY_KEY[key]
    base = key.split("_", 1)[0]
    for lang in LANGUAGES:
        if lang.split("_", 1)[0].lower() == base:
            return lang
    return None


def resolve(code: str | None) -> Lang:
    """`match(code)`, English when no catalog fits (or no code is known)."""
    return match(code) or EN


def tag(lang: Lang) -> str:
    """How a language is typed and shown to admins: "pt_BR" -> "pt-br"."""
    return lang.replace("_", "-").lower()


def menu_code(lang: Lang) -> str:
    """The two-letter ISO 639-1 code Telegram keys command menus by ("pt_BR" -> "pt")."""
    return lang.split("_", 1)[0]


@functools.cache
def translation(lang: Lang) -> gettext.NullTranslations:
    """The catalog of a shipped language (English: the message ids as they are), read from the
    package on first use. Raises ValueError for a language that does not ship."""
    if lang == EN:
        return gettext.NullTranslations()
    if lang not in LANGUAGES:
        raise ValueError(f"no catalog for language {lang!r}")
    catalog = resources.files(__name__).joinpath(lang, "LC_MESSAGES", f"{DOMAIN}.mo")
    with catalog.open("rb") as fp:
        return gettext.GNUTranslations(fp)
