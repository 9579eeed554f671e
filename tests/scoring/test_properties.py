"""Properties of feedback, parsing and drawing, over generated inputs."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from codemojex.game.texts import guess_refused, settings_refused
from codemojex.locale import EN
from codemojex.scoring import (
    EMOJI_POOL,
    MAX_LENGTH,
    MAX_PALETTE,
    MIN_LENGTH,
    MIN_PALETTE,
    InvalidGuess,
    InvalidSettings,
    draw_secret,
    feedback,
    parse_guess,
    parse_palette,
    parse_settings,
)

palettes = st.lists(
    st.sampled_from(EMOJI_POOL), min_size=MIN_PALETTE, max_size=MAX_PALETTE, unique=True
).map(tuple)
lengths = st.integers(MIN_LENGTH, MAX_LENGTH)


@st.composite
def guess_and_secret(draw: st.DrawFn) -> tuple[tuple[str, ...], tuple[str, ...]]:
    palette = draw(palettes)
    n = draw(lengths)
    code = st.lists(st.sampled_from(palette), min_size=n, max_size=n).map(tuple)
    return draw(code), draw(code)


@given(guess_and_secret())
def test_totals_never_exceed_length(gs: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    guess, secret = gs
    fb = feedback(guess, secret)
    assert fb.exact >= 0
    assert fb.misplaced >= 0
    assert fb.exact + fb.misplaced <= len(secret)
    assert fb.won == (guess == secret)


@given(guess_and_secret())
def test_symmetric(gs: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    guess, secret = gs
    assert feedback(guess, secret) == feedback(secret, guess)


@given(guess_and_secret())
def test_guess_equal_to_secret_is_all_exact(gs: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    _, secret = gs
    fb = feedback(secret, secret)
    assert (fb.exact, fb.misplaced) == (len(secret), 0)
    assert fb.won


@given(guess_and_secret(), st.randoms(use_true_random=False))
def test_same_permutation_of_both_keeps_totals(
    gs: tuple[tuple[str, ...], tuple[str, ...]], rnd: random.Random
) -> None:
    guess, secret = gs
    order = list(range(len(secret)))
    rnd.shuffle(order)
    shuffled = feedback(tuple(guess[i] for i in order), tuple(secret[i] for i in order))
    assert shuffled == feedback(guess, secret)


@given(guess_and_secret(), st.randoms(use_true_random=False))
def test_permuting_the_guess_alone_keeps_the_sum(
    gs: tuple[tuple[str, ...], tuple[str, ...]], rnd: random.Random
) -> None:
    guess, secret = gs
    shuffled = list(guess)
    rnd.shuffle(shuffled)
    a, b = feedback(guess, secret), feedback(tuple(shuffled), secret)
    assert a.exact + a.misplaced == b.exact + b.misplaced


# Any Unicode, with the awkward categories made likely.
awkward = st.sampled_from(
    [
        "\x00", "\x1b", "\x7f", "\u0301", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f",
        "\u202e", "\u2066", "\ufeff", "\ufe0f", "\ufe0e", "\u20e3", "\U0001f3fd", "\U0001f1eb",
        "\U000e0067", "\U000e007f", " ", "\n", "3", "#", "a", "🍎", "🍌", "❤", "👍", "👨",
    ]
)  # fmt: skip
hostile_text = st.one_of(
    st.text(max_size=4096),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Mn", "Zs", "So"]), max_size=4096),
    st.lists(st.one_of(awkward, st.sampled_from(EMOJI_POOL)), max_size=200).map("".join),
)


@given(hostile_text, palettes, lengths)
def test_parse_guess_only_refuses_or_returns_palette_emojis(
    text: str, palette: tuple[str, ...], length: int
) -> None:
    try:
        got = parse_guess(text, palette, length)
    except InvalidGuess as err:
        assert err.kind in ("empty", "not_emoji", "too_long", "too_short", "not_in_palette")
        assert str(err)
        assert guess_refused(EN, err)  # every refusal can be told
    else:
        assert len(got) == length
        assert set(got) <= set(palette)


@given(hostile_text)
def test_parse_palette_and_settings_only_refuse(text: str) -> None:
    for parse in (parse_palette, parse_settings):
        try:
            parse(text)
        except InvalidSettings as err:
            assert str(err)
            assert settings_refused(EN, err)


whitespace = st.text(alphabet=" \t\n\u200e\u200b\ufeff\u3000", max_size=3)


@given(palettes, lengths, st.data())
def test_rendered_guess_with_whitespace_round_trips(
    palette: tuple[str, ...], length: int, data: st.DataObject
) -> None:
    guess = data.draw(st.lists(st.sampled_from(palette), min_size=length, max_size=length))
    gaps = data.draw(st.lists(whitespace, min_size=length + 1, max_size=length + 1))
    text = gaps[0] + "".join(e + gap for e, gap in zip(guess, gaps[1:], strict=True))
    assert parse_guess(text, palette, length) == tuple(guess)
    assert parse_guess(text, "".join(palette), length) == tuple(guess)


@given(palettes, lengths, st.data())
def test_guess_typed_without_fe0f_round_trips(
    palette: tuple[str, ...], length: int, data: st.DataObject
) -> None:
    guess = data.draw(st.lists(st.sampled_from(palette), min_size=length, max_size=length))
    typed = " ".join(e.replace("\ufe0f", "") for e in guess)
    assert parse_guess(typed, palette, length) == tuple(guess)


@given(palettes)
def test_palette_round_trips_joined_or_spaced(palette: tuple[str, ...]) -> None:
    assert parse_palette("".join(palette)) == palette
    assert parse_palette(" ".join(palette)) == palette


@given(st.integers(0, 2**32), palettes, lengths, st.booleans())
def test_draw_secret_is_deterministic_and_uses_only_the_palette(
    seed: int, palette: tuple[str, ...], length: int, repeats: bool
) -> None:
    if not repeats and length > len(palette):
        length = len(palette)
    a = draw_secret(random.Random(seed), palette, length, repeats=repeats)
    b = draw_secret(random.Random(seed), palette, length, repeats=repeats)
    assert a == b
    assert len(a) == length
    assert set(a) <= set(palette)
    if not repeats:
        assert len(set(a)) == length
