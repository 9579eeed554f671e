"""Player-facing texts, and their agreement with docs/game.md and the scoring rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codemojex.game import texts
from codemojex.locale import EN, LANGUAGES, Lang
from codemojex.scoring import (
    DEFAULT_PALETTE,
    InvalidGuess,
    InvalidSettings,
    feedback,
    parse_guess,
    parse_length,
    parse_palette,
    parse_settings,
    points_for,
    render_result,
    split_emojis,
)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "game.md").read_text(encoding="utf-8")
DESIGN_COMMANDS = {
    "newgame", "g", "rules", "stats", "top", "help", "me", "daily",
    "pause", "resume", "limit", "weight", "ban", "unban", "endround", "settings", "queue",
}  # fmt: skip
ALL_COMMANDS = [name for name, _ in (*texts.player_commands(EN), *texts.admin_commands(EN))]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_command_lists_cover_the_design(lang: Lang) -> None:
    menus = (*texts.player_commands(lang), *texts.admin_commands(lang))
    assert [name for name, _ in menus] == ALL_COMMANDS  # names are the same in every language
    assert set(ALL_COMMANDS) == DESIGN_COMMANDS
    assert len(ALL_COMMANDS) == len(set(ALL_COMMANDS))
    for name, description in (*menus, *texts.private_commands(lang)):
        # Telegram's limits for setMyCommands
        assert re.fullmatch(r"[a-z0-9_]{1,32}", name)
        assert 1 <= len(description) <= 256
    assert [name for name, _ in texts.private_commands(lang)] == [
        "daily",
        "top",
        "rules",
        "me",
        "help",
    ]


@pytest.mark.parametrize("name", sorted(DESIGN_COMMANDS))
def test_help_and_docs_mention_every_command(name: str) -> None:
    for lang in LANGUAGES:
        if name != "help":  # help_text is what /help answers
            assert re.search(rf"/{name}\b", texts.help_text(lang)), lang
    assert re.search(rf"`/{name}\b", DOC)


def test_help_fits_in_a_message() -> None:
    for lang in LANGUAGES:
        assert len(texts.help_text(lang)) < 1000


def test_rules_text_reflects_the_room() -> None:
    text = texts.rules_text(EN, 5, "🐶🐱🐭🐰", 90)
    assert "5 emojis" in text
    assert "🐶 🐱 🐭 🐰" in text
    assert "90 seconds" in text
    assert "🟢" in text and "🟡" in text and "⚫" in text
    assert "100 points" in text
    assert "fresh set" in texts.rules_text(EN, 4, None, 600)
    assert "10 minutes" in texts.rules_text(EN, 4, None, 600)
    assert "No emoji repeats" in texts.rules_text(EN, 4, DEFAULT_PALETTE, 600, repeats=False)
    assert "Emojis may repeat" in texts.rules_text(EN, 4, DEFAULT_PALETTE, 600)


def test_round_started_shows_palette_length_and_clock() -> None:
    text = texts.round_started(EN, DEFAULT_PALETTE, 4, 600)
    assert "Palette: 🍎 🍌 🍇 🍒 🍋 🥝" in text
    assert "4 emojis" in text
    assert "10 minutes" in text
    # the announcement shown in the docs is the real one
    for line in text.splitlines():
        assert line in DOC
    first = texts.round_started(EN, DEFAULT_PALETTE, 4, 600, repeats=False).splitlines()[0]
    assert first.endswith("(no emoji repeats).")
    assert '"(no emoji repeats)"' in DOC


def test_result_line() -> None:
    guess = ("🍎", "🍌", "🍇", "🍒")
    fb = feedback(guess, ("🍎", "🍌", "🍒", "🍋"))
    line = texts.result_line(EN, guess, fb, 3)
    assert line == "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)"
    # folded into a message with others, it is named (posting/fold.py), as the doc shows
    assert f"`Alice: {line}`" in DOC


def test_win_and_endings() -> None:
    win = texts.win(EN, "Alice", "🍎🍌🍒🍋", 3, points_for(3))
    assert win.startswith("🏆 Alice cracked the code 🍎🍌🍒🍋 in 3 attempts! +80 points.")
    assert win in DOC
    assert "1 attempt!" in texts.win(EN, "Bo", ("🍎",) * 4, 1, 100)
    assert "already solved" in texts.already_solved(EN, ("🍎",) * 4)
    assert "over" in texts.already_over(EN, "🍎🍎🍎🍎")
    timeout = texts.timed_out(EN, "🍎🍌🍒🍋", 600)
    assert "🍎🍌🍒🍋" in timeout and "10 minutes" in timeout
    assert timeout in DOC
    assert "🍎🍌🍒🍋" in texts.ended_by_admin(EN, ("🍎", "🍌", "🍒", "🍋"))


def test_admin_answers() -> None:
    assert texts.limit_set(EN, 1) == "At most 1 guess from this chat scored at once."
    assert texts.limit_set(EN, 3) == "At most 3 guesses from this chat scored at once."
    assert texts.weight_set(EN, "Bo", 2) == "Bo now gets 2 guesses per turn."
    assert texts.player_banned(EN, "Bo", 0) == "Bo is banned from this chat's games."
    assert texts.player_banned(EN, "Bo", 1).endswith("1 pending guess dropped.")
    assert "Bo" in texts.player_unbanned(EN, "Bo")
    assert texts.settings_changed(EN, 5, "🍎🍌🍇🍒") == (
        "Settings saved for the next round: length 5, palette 🍎 🍌 🍇 🍒, repeats on, "
        "language English (en)."
    )
    assert "fresh" in texts.settings_changed(EN, 4, None)
    assert ", repeats off, " in texts.settings_changed(EN, 4, None, repeats=False)
    # the chat's language, shown in itself whatever language the answer is in
    assert texts.settings_changed(EN, 4, None, language=Lang("pt_BR")).endswith(
        ", language Português (Brasil) (pt-br)."
    )
    # /settings alone: the answer shown in the docs is the real one, and its example works
    shown = texts.settings_shown(EN, 4, None, repeats=True)
    assert f"```\n{shown}\n```" in DOC
    assert "repeats off" in texts.settings_shown(EN, 4, None, repeats=False)
    assert texts.SETTINGS_EXAMPLE in shown
    wanted = parse_settings(texts.SETTINGS_EXAMPLE.removeprefix("/settings "))
    assert (wanted.length, len(wanted.palette or ()), wanted.repeats) == (5, 6, False)


def test_records() -> None:
    assert texts.player_stats(EN, "Al", 180, 2, 7, 3) == (
        "Al here: 180 points, 2 wins, 7 guesses, best solve in 3 attempts."
    )
    assert texts.player_stats(EN, "Al", 0, 0, 1, None) == "Al here: 0 points, 0 wins, 1 guess."
    board = texts.leaderboard(EN, [("A", 180, 2), ("B", 90, 1), ("C", 10, 1), ("D", 0, 0)])
    assert board.splitlines()[1] == "🥇 A: 180 pts, 2 wins"
    assert board.splitlines()[4] == "4. D: 0 pts, 0 wins"
    assert "No points yet" in texts.leaderboard(EN, [])


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1, "1 second"), (90, "90 seconds"), (600, "10 minutes"), (7200, "2 hours")],
)
def test_duration(seconds: int, text: str) -> None:
    assert texts.duration(EN, seconds) == text


def test_short_answers_documented() -> None:
    for say in (texts.no_round, texts.slow_down, texts.banned, texts.try_again, texts.not_admin):
        assert say(EN) in DOC


# --- the docs' examples are what the code does ---------------------------------------------------


def test_docs_worked_example_matches_feedback() -> None:
    secret = split_emojis("🍎🍌🍎🍇")
    rows = re.findall(r"^\| `(\S+)` \| (\d) \| (\d) \|", DOC, flags=re.MULTILINE)
    assert len(rows) == 5
    for guess, exact, misplaced in rows:
        fb = feedback(split_emojis(guess), secret)
        assert (fb.exact, fb.misplaced) == (int(exact), int(misplaced)), guess
    guess = split_emojis("🍎🍎🍌🍌")
    assert f"`{render_result(guess, feedback(guess, secret))}`" in DOC


def test_docs_points_match_points_for() -> None:
    assert "100 on the first attempt, 90 on the second" in DOC
    assert (points_for(1), points_for(2), points_for(10), points_for(11)) == (100, 90, 10, 10)


def test_docs_refusal_table_is_what_parse_guess_says() -> None:
    section = DOC.split("## When a guess is refused")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `(?:/g ?)?([^`]*)` \| ([^|]+?) \|$", section, flags=re.MULTILINE)
    assert len(rows) == 5
    for typed, said in rows:
        with pytest.raises(InvalidGuess) as info:
            parse_guess(typed, DEFAULT_PALETTE, 4)
        assert texts.guess_refused(EN, info.value) == said


def test_docs_settings_refusals_are_what_the_parser_says() -> None:
    examples = re.findall(r"^- `/settings ([^`]+)` → \"(.+?)\"$", DOC, flags=re.MULTILINE)
    assert len(examples) == 7
    kinds = {_refusal_kind(args) for args, _ in examples}
    assert {"repeats_value", "repeats_palette", "lang_unknown"} <= kinds
    for args, said in examples:
        with pytest.raises(InvalidSettings) as info:
            parse_settings(args)
        assert texts.settings_refused(EN, info.value).startswith(said.rstrip("…").rstrip())
    assert parse_length("6") == 6
    assert len(parse_palette("🍎🍌🍇🍒🍋🥝")) == 6


def _refusal_kind(args: str) -> str:
    with pytest.raises(InvalidSettings) as info:
        parse_settings(args)
    return info.value.kind


# --- every language ------------------------------------------------------------------------------

RU, UK, ES, PT, ID = (Lang(code) for code in ("ru", "uk", "es", "pt_BR", "id"))


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, "1 очко"),
        (2, "2 очка"),
        (5, "5 очков"),
        (11, "11 очков"),
        (21, "21 очко"),
        (22, "22 очка"),
        (100, "100 очков"),
    ],
)
def test_russian_counts_take_three_forms(n: int, expected: str) -> None:
    assert texts.player_stats(RU, "Аня", n, 0, 0, None).startswith(f"Аня в этом чате: {expected},")


def test_plural_forms_of_the_other_languages() -> None:
    assert texts.duration(UK, 60 * 3) == "3 хвилини"
    assert texts.duration(UK, 60 * 5) == "5 хвилин"
    assert texts.duration(UK, 60 * 21) == "21 хвилина"
    assert texts.limit_set(ES, 1) == "Como máximo se evalúa 1 intento de este chat a la vez."
    assert texts.limit_set(ES, 2) == "Como máximo se evalúan 2 intentos de este chat a la vez."
    assert texts.win(PT, "Ana", "🍎🍌🍒🍋", 1, 100).startswith(
        "🏆 Ana decifrou o código 🍎🍌🍒🍋 em 1 tentativa!"
    )
    assert "em 3 tentativas!" in texts.win(PT, "Ana", "🍎🍌🍒🍋", 3, 80)
    assert texts.duration(ID, 7200) == "2 jam"  # Indonesian counts without plural forms


@pytest.mark.parametrize("lang", LANGUAGES)
def test_refusals_in_every_language_keep_their_numbers_and_emojis(lang: Lang) -> None:
    with pytest.raises(InvalidGuess) as short:
        parse_guess("🍎🍌🍇", DEFAULT_PALETTE, 4)
    said = texts.guess_refused(lang, short.value)
    assert "3" in said and "4" in said
    with pytest.raises(InvalidGuess) as odd:
        parse_guess("🍎🍌🍇🦄", DEFAULT_PALETTE, 4)
    said = texts.guess_refused(lang, odd.value)
    assert "🦄" in said and "🍎🍌🍇🍒🍋🥝" in said
    with pytest.raises(InvalidSettings) as unknown:
        parse_settings("lang=de")
    said = texts.settings_refused(lang, unknown.value)
    assert "de" in said
    for code in ("en", "ru", "uk", "es", "pt-br", "id"):
        assert f"({code})" in said  # every shipped language is offered


def test_a_language_shows_in_its_own_name() -> None:
    shown = texts.settings_shown(RU, 4, None, repeats=True, language=RU)
    assert "Русский (ru)" in shown
    assert "en, ru, uk, es, pt-br, id" in shown.splitlines()[-1]


def test_many_offending_emojis_are_cut_short() -> None:
    with pytest.raises(InvalidGuess) as info:
        parse_guess("🐶🐱🐭🐰🦊🐻", DEFAULT_PALETTE, 6)
    assert texts.guess_refused(EN, info.value).startswith(
        "Not in this round's palette: 🐶🐱🐭🐰🦊…"
    )


def test_docs_show_the_real_russian_round_and_weekly_board() -> None:
    for line in texts.round_started(RU, DEFAULT_PALETTE, 4, 600).splitlines()[:3]:
        assert line in DOC
    week = texts.leaderboard(EN, [("Alice", 180, 2), ("Bob", 90, 1)], week=True)
    assert f"```\n{week}\n```" in DOC
    assert "No points this week yet" in texts.leaderboard(EN, [], week=True)
