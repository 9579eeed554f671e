"""parse_guess: what counts as a guess, and the reason given when it does not (as the player
reads it in English: codemojex.game.texts.guess_refused)."""

from __future__ import annotations

import pytest

from codemojex.game.texts import guess_refused
from codemojex.locale import EN
from codemojex.scoring import (
    DEFAULT_PALETTE,
    EMOJI_POOL,
    MAX_GUESS_CHARS,
    InvalidGuess,
    parse_guess,
)

P = DEFAULT_PALETTE  # 🍎🍌🍇🍒🍋🥝
TRICKY = ("👨‍👩‍👧", "👍🏽", "🇫🇷", "3️⃣", "❤️", "☀️")


def refusal(text: str, palette: object = P, length: int = 4) -> InvalidGuess:
    with pytest.raises(InvalidGuess) as info:
        parse_guess(text, palette, length)  # type: ignore[arg-type]
    return info.value


# --- accepted ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "🍎🍌🍇🍒",
        "🍎 🍌 🍇 🍒",
        "  🍎\t🍌\n🍇\r\n🍒  ",
        "\u200e🍎\u200f🍌\ufeff🍇\u200b🍒\u2060",  # invisible marks clients add
        "\u200d🍎🍌🍇🍒",  # a lone ZWJ before the first emoji
    ],
)
def test_accepts_four_palette_emojis_with_whitespace(text: str) -> None:
    assert parse_guess(text, P, 4) == ("🍎", "🍌", "🍇", "🍒")


def test_repeats_are_a_valid_guess() -> None:
    assert parse_guess("🍎🍎🍋🍎", P, 4) == ("🍎", "🍎", "🍋", "🍎")


def test_palette_may_be_the_stored_string() -> None:
    assert parse_guess("🍎 🍌 🍇", "🍎🍌🍇🍒🍋🥝", 3) == ("🍎", "🍌", "🍇")


@pytest.mark.parametrize("length", [3, 4, 5, 6])
def test_every_allowed_length(length: int) -> None:
    guess = tuple(P[i % len(P)] for i in range(length))
    assert parse_guess(" ".join(guess), P, length) == guess


# --- grapheme clusters ---------------------------------------------------------


def test_multi_codepoint_emojis_are_one_each() -> None:
    palette = (*TRICKY, "🍎")
    assert parse_guess("👨‍👩‍👧👍🏽🇫🇷3️⃣", palette, 4) == ("👨‍👩‍👧", "👍🏽", "🇫🇷", "3️⃣")
    assert parse_guess("❤️☀️👨‍👩‍👧🍎", palette, 4) == ("❤️", "☀️", "👨‍👩‍👧", "🍎")


def test_fe0f_missing_in_the_guess_matches_the_palette_form() -> None:
    palette = ("❤️", "☀️", "3️⃣", "🍎")
    # U+2764 and U+2600 typed bare, keycap typed without FE0F
    got = parse_guess("\u2764\u2600\u0033\u20e3🍎", palette, 4)
    assert got == ("❤️", "☀️", "3️⃣", "🍎")
    assert got[0] == "\u2764\ufe0f"


def test_fe0f_present_in_the_guess_but_not_in_the_palette() -> None:
    palette = ("\u2764", "🍎", "🍌", "🍇")
    assert parse_guess("❤️🍎\ufe0f🍌🍇", palette, 4) == ("\u2764", "🍎", "🍌", "🍇")


def test_text_presentation_selector_is_ignored_too() -> None:
    assert parse_guess("\u2764\ufe0e🍎🍌🍇", ("❤️", "🍎", "🍌", "🍇"), 4)[0] == "❤️"


def test_skin_tone_is_part_of_the_emoji() -> None:
    palette = ("👍🏽", "🍎", "🍌", "🍇")
    err = refusal("👍🍎🍌🍇", palette)
    assert err.kind == "not_in_palette"
    assert err.offenders == ("👍",)
    err = refusal("👍🏿🍎🍌🍇", palette)
    assert err.offenders == ("👍🏿",)


def test_family_is_not_its_members() -> None:
    palette = ("👨‍👩‍👧", "👨", "👩", "👧")
    assert parse_guess("👨‍👩‍👧👨👩👧", palette, 4) == ("👨‍👩‍👧", "👨", "👩", "👧")
    # members typed with spaces are three emojis, not the family
    assert parse_guess("👨 👩 👧 👨", palette, 4) == ("👨", "👩", "👧", "👨")


def test_flags_pair_up() -> None:
    palette = ("🇫🇷", "🇩🇪", "🇯🇵", "🇧🇷")
    assert parse_guess("🇫🇷🇩🇪🇯🇵🇧🇷", palette, 4) == palette
    # an odd regional indicator is not an emoji
    assert refusal("🇫🇷🇩🇪🇯🇵🇧", palette).kind == "not_emoji"


def test_subdivision_flag_is_one_emoji() -> None:
    scotland = "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
    palette = (scotland, "🍎", "🍌", "🍇")
    assert parse_guess(f"{scotland}🍎🍌🍇", palette, 4)[0] == scotland


def test_plain_digit_is_not_the_keycap() -> None:
    assert refusal("3🍎🍌🍇", ("3️⃣", "🍎", "🍌", "🍇")).kind == "not_emoji"


def test_whole_pool_round_trips() -> None:
    for i in range(0, len(EMOJI_POOL) - 3, 4):
        chunk = EMOJI_POOL[i : i + 4]
        assert parse_guess(" ".join(chunk), EMOJI_POOL, 4) == chunk
        assert parse_guess("".join(chunk), EMOJI_POOL, 4) == chunk


# --- refusals, one per kind ------------------------------------------------------


def test_too_short() -> None:
    err = refusal("🍎🍌🍇")
    assert err.kind == "too_short"
    assert err.count == 3
    assert guess_refused(EN, err) == "Too short: 3 emojis, this round needs 4."
    assert guess_refused(EN, refusal("🍎")) == "Too short: 1 emoji, this round needs 4."


def test_too_long() -> None:
    err = refusal("🍎🍌🍇🍒🍋")
    assert err.kind == "too_long"
    assert err.count == 5
    assert guess_refused(EN, err) == "Too long: 5 emojis, this round needs 4."


def test_not_in_palette_names_the_strangers_once_each() -> None:
    err = refusal("🦄🍎🦄🐉")
    assert err.kind == "not_in_palette"
    assert err.offenders == ("🦄", "🐉")
    assert guess_refused(EN, err) == "Not in this round's palette: 🦄🐉. Pick from 🍎🍌🍇🍒🍋🥝."


def test_not_in_palette_names_at_most_five() -> None:
    err = refusal("🐶🐱🐭🐰🦊🐻", length=6)
    assert len(err.offenders) == 6
    assert guess_refused(EN, err).startswith("Not in this round's palette: 🐶🐱🐭🐰🦊…")


@pytest.mark.parametrize("text", ["hello", "🍎🍌🍇 x", "1234", "🍎🍌🍇🍒!", "abcd", "🍎🍌🍇🍒 :)"])
def test_not_emoji(text: str) -> None:
    err = refusal(text)
    assert err.kind == "not_emoji"
    assert guess_refused(EN, err) == "That's not a guess: send 4 emojis from 🍎🍌🍇🍒🍋🥝."


@pytest.mark.parametrize("text", ["", " ", "\n\t ", "\u200e\u200f", "\ufe0f", "\u200d"])
def test_empty(text: str) -> None:
    err = refusal(text)
    assert err.kind == "empty"
    assert guess_refused(EN, err) == "Empty guess: send 4 emojis from 🍎🍌🍇🍒🍋🥝."


def test_chatter_with_emojis_is_not_emoji_before_length() -> None:
    # the bot ignores not_emoji/empty plain messages, so chatter must land there
    assert refusal("lol 🍎").kind == "not_emoji"


# --- hostile input --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "\x00\x00\x00\x00",
        "🍎\x00🍌🍇🍒",
        "\u0301\u0301\u0301\u0301",  # lone combining marks
        "🍎\u0301🍌🍇🍒",  # a combining mark on an emoji
        "\u202e🍒🍇🍌🍎",  # bidi override: invisible, ignored
        "\x1b[31m🍎🍌🍇🍒",
        "\ud7ff" * 4,
        "\U000e0001🍎🍌🍇🍒",  # language tag
        "\U0010ffff" * 4,
        "🍎\u200c🍌🍇🍒\u200c",
        "🍎\u200d🍌\u200d🍇\u200d🍒",  # joined into one unknown sequence
        "a" + "\u0301" * 4000,
        "🍎\u200d" * 2000,
        "\u200d" * 4096,
        " " * 4096,
        "🍎" * 4096,
        "🍎" * (MAX_GUESS_CHARS + 1),
        "x" * 100_000,
    ],
)
def test_hostile_input_only_ever_refused_or_parsed(text: str) -> None:
    try:
        got = parse_guess(text, P, 4)
    except InvalidGuess as err:
        assert guess_refused(EN, err)
        assert len(guess_refused(EN, err)) < 200
    else:
        assert len(got) == 4
        assert set(got) <= set(P)


def test_rtl_override_is_treated_as_invisible() -> None:
    assert parse_guess("\u202e🍒🍇🍌🍎\u202c", P, 4) == ("🍒", "🍇", "🍌", "🍎")


def test_zwj_joined_palette_emojis_are_one_unknown_sequence() -> None:
    err = refusal("🍎\u200d🍌 🍇 🍒 🍋")
    assert err.kind == "not_in_palette"
    assert err.offenders == ("🍎\u200d🍌",)


def test_a_mark_on_whitespace_is_refused() -> None:
    assert refusal("🍎 \u0301🍌🍇🍒").kind == "not_emoji"
    assert refusal("🍎 \U0001f3fd🍌🍇🍒").kind == "not_emoji"  # a skin tone on a space


def test_control_characters_are_refused_not_ignored() -> None:
    assert refusal("🍎\x00🍌🍇🍒").kind == "not_emoji"
    assert refusal("🍎\x7f🍌🍇🍒").kind == "not_emoji"


def test_floods_are_refused_without_echoing_them() -> None:
    err = refusal("🍎" * 1000)
    assert err.kind == "too_long"
    assert err.count is None
    assert guess_refused(EN, err) == "Too long: more than 32 emojis, this round needs 4."
    huge = refusal("🦄" * 1000)
    assert huge.kind == "too_long"
    assert refusal("x" * 100_000).kind == "too_long"


def test_long_cluster_is_refused_not_echoed() -> None:
    err = refusal("🍎" + "\u200d🍎" * 100)
    assert err.kind == "not_emoji"
    assert "\u200d" not in guess_refused(EN, err)


def test_programmer_errors_are_not_invalid_guess() -> None:
    with pytest.raises(ValueError) as info:
        parse_guess("🍎", P, 0)
    assert not isinstance(info.value, InvalidGuess)
