"""Feedback, rendering, points, drawing, and room settings."""

from __future__ import annotations

import random

import pytest

from codemojex.game.texts import settings_refused
from codemojex.locale import EN, Lang
from codemojex.scoring import (
    DEFAULT_LENGTH,
    DEFAULT_PALETTE,
    DEFAULT_PALETTE_SIZE,
    DRAW_POOL,
    EMOJI_POOL,
    Feedback,
    InvalidSettings,
    SettingsUpdate,
    check_repeats,
    draw_palette,
    draw_secret,
    feedback,
    parse_length,
    parse_palette,
    parse_repeats,
    parse_settings,
    points_for,
    render_result,
    split_emojis,
)
from codemojex.scoring.emoji import is_emoji, key, rgi


def t(s: str) -> tuple[str, ...]:
    return split_emojis(s)


# --- feedback ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("guess", "secret", "exact", "misplaced"),
    [
        ("🍎🍌🍇🍒", "🍎🍌🍇🍒", 4, 0),
        ("🍎🍌🍇🍒", "🍋🥝🍋🥝", 0, 0),
        ("🍎🍌🍇🍒", "🍒🍇🍌🍎", 0, 4),
        ("🍎🍌🍇🍒", "🍎🍌🍒🍋", 2, 1),
        # repeats: the guess has three 🍎, the secret one -> min(3,1)=1, in place
        ("🍎🍎🍎🍌", "🍎🍇🍇🍇", 1, 0),
        # the secret has two 🍎, the guess one, misplaced -> 1
        ("🍌🍎🍇🍇", "🍎🍌🍎🍋", 0, 2),
        # docs' worked example
        ("🍎🍎🍌🍌", "🍎🍌🍎🍇", 1, 2),
        ("🍎🍎🍎🍎", "🍎🍌🍎🍇", 2, 0),
    ],
)
def test_feedback_cases(guess: str, secret: str, exact: int, misplaced: int) -> None:
    fb = feedback(t(guess), t(secret))
    assert (fb.exact, fb.misplaced) == (exact, misplaced)
    assert fb.length == 4
    assert fb.won is (exact == 4)


def test_feedback_accepts_stored_strings_and_multi_codepoint_emojis() -> None:
    fb = feedback("👨‍👩‍👧👍🏽🇫🇷3️⃣", "3️⃣👍🏽🇫🇷👨‍👩‍👧")
    assert (fb.exact, fb.misplaced) == (2, 2)


def test_feedback_treats_fe0f_spellings_as_equal() -> None:
    assert feedback(("\u2764", "🍎", "🍌"), ("❤️", "🍎", "🍌")).won


def test_feedback_length_mismatch_is_a_bug() -> None:
    with pytest.raises(ValueError):
        feedback(t("🍎🍌🍇"), t("🍎🍌🍇🍒"))


def test_feedback_rejects_impossible_values() -> None:
    with pytest.raises(ValueError):
        Feedback(exact=3, misplaced=2, length=4)
    with pytest.raises(ValueError):
        Feedback(exact=-1, misplaced=0, length=4)


def test_render_result() -> None:
    guess = t("🍎🍌🍇🍒")
    fb = feedback(guess, t("🍎🍌🍒🍋"))
    assert render_result(guess, fb) == "🍎🍌🍇🍒 → 🟢🟢🟡⚫"
    assert fb.pegs == "🟢🟢🟡⚫"
    assert fb.missed == 1
    won = feedback(guess, guess)
    assert render_result(guess, won) == "🍎🍌🍇🍒 → 🟢🟢🟢🟢"


# --- points ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "points"), [(1, 100), (2, 90), (5, 60), (9, 20), (10, 10), (11, 10), (500, 10)]
)
def test_points_for(attempts: int, points: int) -> None:
    assert points_for(attempts) == points


def test_points_need_an_attempt() -> None:
    with pytest.raises(ValueError):
        points_for(0)


# --- drawing --------------------------------------------------------------------------------


def test_defaults() -> None:
    assert DEFAULT_LENGTH == 4
    assert DEFAULT_PALETTE_SIZE == 6
    assert len(DEFAULT_PALETTE) == DEFAULT_PALETTE_SIZE


def test_pool_is_distinct_well_formed_canonical_and_varied() -> None:
    assert 35 <= len(EMOJI_POOL) <= 50
    assert len({key(e) for e in EMOJI_POOL}) == len(EMOJI_POOL)
    assert all(is_emoji(e) for e in EMOJI_POOL)
    # each is one grapheme cluster already in the spelling parse_palette gives it
    assert split_emojis("".join(EMOJI_POOL)) == EMOJI_POOL
    for i in range(0, len(EMOJI_POOL), 10):
        chunk = EMOJI_POOL[i : i + 10]
        if len(chunk) >= 4:
            assert parse_palette("".join(chunk)) == chunk
    tricky = {"❤️", "👍🏽", "🇫🇷", "3️⃣", "👨‍👩‍👧"}
    assert tricky <= set(EMOJI_POOL)
    assert set(DRAW_POOL) <= set(EMOJI_POOL)
    assert len(DRAW_POOL) >= 10


def test_draw_palette_is_seeded_distinct_and_from_the_pool() -> None:
    a = draw_palette(random.Random(7), 6)
    assert a == draw_palette(random.Random(7), 6)
    assert len(set(a)) == 6
    assert set(a) <= set(DRAW_POOL)
    assert parse_palette("".join(a)) == a
    assert draw_palette(random.Random(1), 4, pool=DEFAULT_PALETTE)[0] in DEFAULT_PALETTE
    with pytest.raises(ValueError):
        draw_palette(random.Random(1), 7, pool=DEFAULT_PALETTE)


def test_draw_palettes_vary() -> None:
    drawn = {draw_palette(random.Random(seed), 6) for seed in range(20)}
    assert len(drawn) > 15


def test_draw_secret_without_repeats() -> None:
    for seed in range(50):
        s = draw_secret(random.Random(seed), DEFAULT_PALETTE, 6, repeats=False)
        assert sorted(s) == sorted(DEFAULT_PALETTE)
    with pytest.raises(ValueError):
        draw_secret(random.Random(0), DEFAULT_PALETTE[:4], 5, repeats=False)


def test_draw_secret_with_repeats_repeats_sometimes() -> None:
    secrets = [draw_secret(random.Random(seed), DEFAULT_PALETTE, 4) for seed in range(50)]
    assert any(len(set(s)) < 4 for s in secrets)


def test_draw_secret_from_stored_string_and_system_random() -> None:
    s = draw_secret(random.SystemRandom(), "👨‍👩‍👧👍🏽🇫🇷3️⃣", 5)
    assert len(s) == 5
    assert set(s) <= {"👨‍👩‍👧", "👍🏽", "🇫🇷", "3️⃣"}


# --- palette and settings ---------------------------------------------------------------------


def _tag_flag(letters: str) -> str:
    """🏴 followed by the tag characters of `letters` and CANCEL TAG: how England (gbeng),
    Scotland and Wales are spelled, and how any invisible text can be made to look like one."""
    return "\U0001f3f4" + "".join(chr(0xE0000 + ord(c)) for c in letters) + "\U000e007f"


def test_parse_palette_accepts_rgi_emoji_only_in_their_qualified_spelling() -> None:
    england, scotland, wales = _tag_flag("gbeng"), _tag_flag("gbsct"), _tag_flag("gbwls")
    assert parse_palette(england + scotland + wales + "🍎") == (england, scotland, wales, "🍎")
    assert parse_palette("🏳‍🌈 👁‍🗨 🧑🏽‍🚀 🇺🇦") == (
        "🏳️‍🌈",
        "👁️‍🗨️",
        "🧑🏽‍🚀",
        "🇺🇦",
    )
    assert all(rgi(e) == e for e in EMOJI_POOL)


def test_parse_palette_accepts_spaces_and_qualifies_bare_symbols() -> None:
    assert parse_palette("🍎 🍌 🍇 🍒") == ("🍎", "🍌", "🍇", "🍒")
    assert parse_palette("\u2764 \u2600 3\u20e3 🍎") == ("❤️", "☀️", "3️⃣", "🍎")
    assert parse_palette("👨‍👩‍👧👍🏽🇫🇷🍎") == ("👨‍👩‍👧", "👍🏽", "🇫🇷", "🍎")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("🍎🍌🍇", "palette_count"),
        ("", "palette_count"),
        ("🍎🍌🍇🍒🍋🥝🍉🍓🍑🍍🥥", "palette_count"),
        ("🍎" * 2000, "palette_count"),
        ("🍎🍌🍇🍎", "palette_duplicate"),
        ("❤️🍌🍇\u2764", "palette_duplicate"),
        ("🍎🍌🍇 abc", "palette_not_emoji"),
        ("🍎🍌🍇🍒 3", "palette_not_emoji"),
        ("🍎🍌🍇\x00🍒", "palette_not_emoji"),
        ("🍎🍌🍇🇫", "palette_not_emoji"),
        ("🍎🍌🍇🏽", "palette_not_emoji"),  # a skin tone on grapes
        ("🏽🍎🍌🍇", "palette_not_emoji"),  # a lone skin tone
        # well-formed but not RGI: a black flag with arbitrary tag letters (shown as a plain
        # black flag, or as identical flags, carrying invisible text), a pair of regional
        # indicators that is no country, a ZWJ sequence nobody draws
        ("🍎🍌🍇" + _tag_flag("ustx"), "palette_not_emoji"),
        ("🍎🍌🍇" + _tag_flag("gbeng") + _tag_flag("gbenh"), "palette_not_emoji"),
        ("🍎🍌🍇" + _tag_flag("hello there"), "palette_not_emoji"),
        ("🍎🍌🍇🇽🇽", "palette_not_emoji"),  # XX: no such flag
        ("🍎🍌🍇🍎‍🍌", "palette_not_emoji"),
    ],
)
def test_parse_palette_refusals(text: str, kind: str) -> None:
    with pytest.raises(InvalidSettings) as info:
        parse_palette(text)
    assert info.value.kind == kind
    assert str(info.value)


def test_palette_refusal_reasons() -> None:
    with pytest.raises(InvalidSettings) as few:
        parse_palette("🍎🍌🍇")
    assert (few.value.kind, few.value.count) == ("palette_count", 3)
    assert settings_refused(EN, few.value) == (
        "A palette needs 4 to 10 different emojis; that has 3."
    )
    with pytest.raises(InvalidSettings) as twice:
        parse_palette("🍎🍌🍇🍎")
    assert twice.value.emoji == "🍎"
    assert "🍎 is repeated" in settings_refused(EN, twice.value)


@pytest.mark.parametrize(("value", "length"), [("3", 3), (" 6 ", 6), (4, 4), ("5", 5)])
def test_parse_length(value: str | int, length: int) -> None:
    assert parse_length(value) == length


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("2", "length_range"),
        ("7", "length_range"),
        (0, "length_range"),
        ("five", "length_not_number"),
        ("", "length_not_number"),
        ("4.5", "length_not_number"),
        ("³", "length_not_number"),
        ("9" * 5000, "length_not_number"),
        ("-4", "length_not_number"),
    ],
)
def test_parse_length_refusals(value: str | int, kind: str) -> None:
    with pytest.raises(InvalidSettings) as info:
        parse_length(value)
    assert info.value.kind == kind


@pytest.mark.parametrize(
    ("value", "repeats"),
    [
        ("on", True),
        ("off", False),
        ("yes", True),
        ("no", False),
        ("true", True),
        ("false", False),
        ("OFF", False),
        (" Yes ", True),
        ("False", False),
        (True, True),
        (False, False),
    ],
)
def test_parse_repeats(value: str | bool, repeats: bool) -> None:
    assert parse_repeats(value) is repeats


@pytest.mark.parametrize(
    "value", ["", "maybe", "0", "1", "onn", "o ff", "ｏｆｆ", "off!", "x" * 5000]
)
def test_parse_repeats_refusals(value: str) -> None:
    with pytest.raises(InvalidSettings) as info:
        parse_repeats(value)
    assert info.value.kind == "repeats_value"
    assert settings_refused(EN, info.value) == (
        "Repeats is on or off (yes/no and true/false work too), e.g. repeats=off."
    )


def test_check_repeats() -> None:
    check_repeats(5, 4, True)  # repeats on: any palette will do
    check_repeats(4, 4, False)
    check_repeats(6, 10, False)
    with pytest.raises(InvalidSettings) as info:
        check_repeats(5, 4, False)
    assert info.value.kind == "repeats_palette"
    assert (info.value.count, info.value.length) == (4, 5)
    assert settings_refused(EN, info.value) == (
        "With repeats off, the palette needs at least as many emojis as the code: "
        "4 emojis are too few for a code of 5."
    )


def test_parse_settings() -> None:
    assert parse_settings("length=5") == SettingsUpdate(length=5)
    assert parse_settings("repeats=off") == SettingsUpdate(repeats=False)
    assert parse_settings("Repeats = YES") == SettingsUpdate(repeats=True)
    assert parse_settings("repeats=off length=4 palette=🍎🍌🍇🍒") == SettingsUpdate(
        length=4, palette=("🍎", "🍌", "🍇", "🍒"), repeats=False
    )
    # repeats on, or only one of length/palette given: the store judges with the room's own
    assert parse_settings("repeats=on length=6 palette=🍎🍌🍇🍒").repeats is True
    assert parse_settings("repeats=off length=6") == SettingsUpdate(length=6, repeats=False)
    assert parse_settings("palette=🍎🍌🍇🍒") == SettingsUpdate(palette=("🍎", "🍌", "🍇", "🍒"))
    assert parse_settings(" palette = 🍎 🍌 🍇 🍒  length=3 ") == SettingsUpdate(
        length=3, palette=("🍎", "🍌", "🍇", "🍒")
    )
    assert parse_settings("LENGTH=6").length == 6


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("5", "unknown_setting"),
        ("hello length=5", "unknown_setting"),
        ("colour=red", "unknown_setting"),
        ("length=5 length=6", "repeated_setting"),
        ("length=9", "length_range"),
        ("palette=🍎🍌", "palette_count"),
        ("length=4 palette=abc", "palette_not_emoji"),
        ("repeats=maybe", "repeats_value"),
        ("repeats=", "repeats_value"),
        ("repeats=off repeats=on", "repeated_setting"),
        ("repeats=off length=5 palette=🍎🍌🍇🍒", "repeats_palette"),
        ("palette=🍎🍌🍇🍒🍋 length=6 REPEATS=no", "repeats_palette"),
    ],
)
def test_parse_settings_refusals(text: str, kind: str) -> None:
    with pytest.raises(InvalidSettings) as info:
        parse_settings(text)
    assert info.value.kind == kind
    assert str(info.value)
    assert settings_refused(EN, info.value)


@pytest.mark.parametrize(
    ("typed", "lang"),
    [("ru", "ru"), ("RU", "ru"), ("pt-br", "pt_BR"), ("pt_BR", "pt_BR"), ("pt", "pt_BR"),
     ("es-419", "es"), (" uk ", "uk"), ("id", "id"), ("en-GB", "en")],
)  # fmt: skip
def test_parse_settings_language(typed: str, lang: str) -> None:
    assert parse_settings(f"lang={typed}") == SettingsUpdate(language=Lang(lang))
    assert parse_settings(f"repeats=off lang={typed} length=5").language == lang


@pytest.mark.parametrize(
    ("typed", "shown"),
    [("de", "de"), ("klingon", "klingon"), ("", None), ("🍎", None), ("x" * 30, None)],
)
def test_parse_settings_unknown_language(typed: str, shown: str | None) -> None:
    with pytest.raises(InvalidSettings) as info:
        parse_settings(f"lang={typed}")
    assert (info.value.kind, info.value.value) == ("lang_unknown", shown)
    said = settings_refused(EN, info.value)
    assert said.startswith(f"Unknown language {shown}:" if shown else "Unknown language:")
    assert "Русский (ru)" in said and "Português (Brasil) (pt-br)" in said
