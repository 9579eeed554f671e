"""The gettext catalogs the bot ships: complete, correct and up to date.

- the template (codemojex.pot) is what Babel extracts from the code today (babel.cfg);
- every shipped language translates every message of it, nothing empty, nothing fuzzy, nothing
  left over, with Babel's plural rule for the language and every form present;
- placeholders match: Babel's checkers (python-format, number of plural forms), and stricter,
  every form of every translation names exactly the placeholders of its message id;
- the compiled .mo (what the package ships and loads) is the .po compiled now;
- the package data of pyproject.toml takes every compiled catalog into a wheel.
"""

from __future__ import annotations

import gettext
import io
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import DEFAULT_KEYWORDS, check_and_call_extract_file
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import write_mo
from babel.messages.plurals import get_plural
from babel.messages.pofile import read_po

from codemojex import locale
from codemojex.game import texts
from codemojex.locale import EN, LANGUAGES, Lang
from tests.helpers.languages import english_in

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "codemojex" / "locale"
TRANSLATED = [lang for lang in LANGUAGES if lang != EN]
PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _read(path: Path, lang: str | None = None) -> Catalog:
    with path.open("rb") as fp:
        return read_po(fp, locale=lang)


def _po(lang: Lang) -> Catalog:
    return _read(LOCALE / lang / "LC_MESSAGES" / f"{locale.DOMAIN}.po", lang)


def _key(message: Message) -> tuple[object, str | None]:
    return message.id, message.context


def _messages(catalog: Catalog) -> Iterator[Message]:
    return (m for m in catalog if m.id)


def _texts(value: object) -> tuple[str, ...]:
    """A message's id or string as its forms (one, or one per plural form)."""
    if isinstance(value, tuple | list):
        return tuple(str(v or "") for v in value)
    return (str(value or ""),)


def _extracted(capsys: pytest.CaptureFixture[str]) -> set[tuple[object, str | None]]:
    """The message ids Babel extracts from the code now, as `make i18n` does."""
    with (ROOT / "babel.cfg").open() as fp:
        method_map, options_map = parse_mapping_cfg(fp)  # type: ignore[no-untyped-call]
    found: set[tuple[object, str | None]] = set()
    for path in sorted((ROOT / "codemojex").rglob("*.py")):
        for _, _, message, _, context in check_and_call_extract_file(
            str(path),
            method_map,
            options_map,
            callback=None,
            keywords=DEFAULT_KEYWORDS,
            comment_tags=(),
            strip_comment_tags=False,
            dirpath=str(ROOT),
        ):
            found.add((message, context))
    assert "warning" not in capsys.readouterr().err  # e.g. an f-string Babel cannot extract
    return found


def test_the_template_is_what_the_code_says(capsys: pytest.CaptureFixture[str]) -> None:
    template = _read(LOCALE / f"{locale.DOMAIN}.pot")
    extracted = _extracted(capsys)
    assert extracted, "nothing extracted: babel.cfg does not reach codemojex/game/texts.py"
    in_template = {_key(m) for m in _messages(template)}
    assert extracted - in_template == set(), "new texts: run `make i18n` and translate them"
    assert in_template - extracted == set(), "texts gone from the code: run `make i18n`"


def test_every_shipped_language_has_a_catalog_and_nothing_else_does() -> None:
    on_disk = {p.parent.parent.name for p in LOCALE.glob("*/LC_MESSAGES/*.po")}
    assert on_disk == set(TRANSLATED)
    assert set(locale.NAMES) == set(LANGUAGES)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_a_catalog_translates_every_message(lang: Lang) -> None:
    template = _read(LOCALE / f"{locale.DOMAIN}.pot")
    catalog = _po(lang)
    assert catalog.fuzzy is False  # the header too
    assert {_key(m) for m in _messages(catalog)} == {_key(m) for m in _messages(template)}
    assert not catalog.obsolete
    rule = get_plural(lang)
    assert (catalog.num_plurals, catalog.plural_expr) == (rule.num_plurals, rule.plural_expr)
    for message in _messages(catalog):
        assert not message.fuzzy, message.id
        forms = _texts(message.string)
        assert len(forms) == (catalog.num_plurals if message.pluralizable else 1), message.id
        assert all(form.strip() for form in forms), f"untranslated: {message.id!r}"


@pytest.mark.parametrize("lang", TRANSLATED)
def test_placeholders_match(lang: Lang) -> None:
    catalog = _po(lang)
    problems = [(m.id, [str(e) for e in errors]) for m, errors in catalog.check()]
    assert problems == []  # Babel's checkers: python-format, number of plural forms
    for message in _messages(catalog):
        names = {frozenset(PLACEHOLDER.findall(i)) for i in _texts(message.id)}
        assert len(names) == 1, message.id  # singular and plural name the same
        (wanted,) = names
        for form in _texts(message.string):
            assert frozenset(PLACEHOLDER.findall(form)) == wanted, (message.id, form)
            assert "python-format" in message.flags or not wanted


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_compiled_catalog_is_the_po_compiled_now(lang: Lang) -> None:
    compiled = io.BytesIO()
    write_mo(compiled, _po(lang))
    compiled.seek(0)
    fresh = gettext.GNUTranslations(compiled)
    shipped = locale.translation(lang)
    assert isinstance(shipped, gettext.GNUTranslations)
    # every message and every plural form, as gettext reads them (run `make i18n` if not)
    assert shipped._catalog == fresh._catalog  # type: ignore[attr-defined]


def test_the_package_ships_every_compiled_catalog() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["codemojex.locale"]
    shipped = {p for pattern in patterns for p in LOCALE.glob(pattern)}
    assert shipped == set(LOCALE.glob("*/LC_MESSAGES/*.mo"))
    assert {p.parent.parent.name for p in shipped} == set(TRANSLATED)


def test_a_catalog_is_read_once_and_an_unknown_language_refused() -> None:
    assert locale.translation(Lang("ru")) is locale.translation(Lang("ru"))
    with pytest.raises(ValueError):
        locale.translation(Lang("de"))
    assert isinstance(locale.translation(EN), gettext.NullTranslations)


@pytest.mark.parametrize(
    ("code", "lang"),
    [
        ("ru", "ru"),
        ("uk", "uk"),
        ("pt-br", "pt_BR"),
        ("pt-BR", "pt_BR"),
        ("pt", "pt_BR"),
        ("es-419", "es"),
        ("es", "es"),
        ("id", "id"),
        ("en-US", "en"),
        ("de", None),
        ("", None),
        (None, None),
    ],
)
def test_telegram_language_codes(code: str | None, lang: str | None) -> None:
    assert locale.match(code) == lang
    assert locale.resolve(code) == (lang or EN)


def test_menu_codes_are_two_letters() -> None:
    assert [locale.menu_code(lang) for lang in LANGUAGES] == ["en", "ru", "uk", "es", "pt", "id"]
    assert [locale.tag(lang) for lang in LANGUAGES] == ["en", "ru", "uk", "es", "pt-br", "id"]


def test_no_catalog_is_read_at_import() -> None:
    probe = (
        "import codemojex.bot, codemojex.worker.service\n"
        "from codemojex import locale\n"
        "print(locale.translation.cache_info().currsize)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
    assert texts.no_round(Lang("uk")) != texts.no_round(EN)  # read on first use


@pytest.mark.parametrize("lang", TRANSLATED)
def test_no_translation_is_left_in_english(lang: Lang) -> None:
    leftovers = {
        form: words
        for message in _messages(_po(lang))
        for form in _texts(message.string)
        if (words := english_in(form, lang))
    }
    assert leftovers == {}
    # the check itself sees English
    assert english_in(texts.slow_down(EN), lang) == {
        "slow",
        "down",
        "your",
        "earlier",
        "guesses",
        "are",
        "still",
        "being",
        "scored",
    }
