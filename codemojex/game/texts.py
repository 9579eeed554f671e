"""Everything the bot and the worker say to players and admins, in one place, in every language
the bot speaks, as docs/game.md shows them.

Every text is a function whose first argument is the reader's language (`lang`, one of
`codemojex.locale.LANGUAGES`: a group's setting, or a private reader's `language_code`). The
English strings here are the gettext message ids; `codemojex/locale/<lang>/LC_MESSAGES/
codemojex.po` translates them. After changing a text, run `make i18n` (Babel extracts the
template, merges it into every catalog and compiles them) and translate what it marks new.

Writing a text: whole sentences, each one call (`_` or, when it counts something, `_n`, so
that every language gets its plural forms right), placeholders as `%(name)s` (python-format:
the tests check every translation keeps them); emojis, command names and setting names are
the same in every language. Pure: no state but the catalogs, each read once on first use.

Plain text (sent without parse_mode): names and emojis typed by players are embedded as is,
so no Markdown/HTML escaping is needed or wanted.

Why one module of about 1,100 lines: it is a catalog, not logic: some hundred functions of a
few lines each, in the order a player meets them (menus, short answers, rounds, refusals,
admin answers, records, the daily code, the queue). Translators and reviewers read the
English beside the `.po` files top to bottom, and one file keeps every message id of the
`codemojex` domain in one place for `make i18n`; the sections are marked `# ---`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from codemojex.locale import LANGUAGES, NAMES, Lang, tag, translation
from codemojex.scoring import (
    EXACT,
    MAX_LENGTH,
    MAX_PALETTE,
    MIN_LENGTH,
    MIN_PALETTE,
    MISPLACED,
    MISS,
    Feedback,
    InvalidGuess,
    InvalidSettings,
    points_for,
    render_result,
    split_emojis,
)
from codemojex.scoring.rules import ROUND_HOLD_S_MAX


def _(lang: Lang, message: str, **params: object) -> str:
    """`message` in `lang`, its placeholders filled from `params`."""
    text = translation(lang).gettext(message)
    return text % params if params else text


def _n(lang: Lang, singular: str, plural: str, n: int, **params: object) -> str:
    """The form of a counted message that `n` takes in `lang`; `%(n)s` is the count."""
    return translation(lang).ngettext(singular, plural, n) % {"n": n, **params}


# --- commands (also the menus of setMyCommands) -------------------------------------------------


def player_commands(lang: Lang) -> tuple[tuple[str, str], ...]:
    """Every player's commands in a group chat: (name, description)."""
    return (
        ("newgame", _(lang, "Start a round")),
        ("g", _(lang, "Guess: /g 🍎🍌🍇🍒")),
        ("rules", _(lang, "How a round works")),
        ("stats", _(lang, "Your record in this chat")),
        ("top", _(lang, "Leaderboard: /top all time, /top week this week")),
        ("me", _(lang, "Your record in all chats")),
        ("daily", _(lang, "Today's daily code: who here cracked it")),
        ("help", _(lang, "Commands")),
    )


def admin_commands(lang: Lang) -> tuple[tuple[str, str], ...]:
    """The commands chat administrators have besides the players'."""
    return (
        ("pause", _(lang, "Pause scoring here (guesses kept)")),
        ("resume", _(lang, "Resume scoring")),
        ("limit", _(lang, "Guesses scored at once here: /limit 2")),
        ("weight", _(lang, "Reply to a player: their share per turn")),
        ("ban", _(lang, "Reply to a player: ban from the game")),
        ("unban", _(lang, "Reply to a player: lift the ban")),
        ("endround", _(lang, "End the round and reveal the code")),
        ("settings", _(lang, "Next rounds: length, palette, repeats; the chat's language")),
        ("queue", _(lang, "Guesses waiting here, per player")),
    )


def private_commands(lang: Lang) -> tuple[tuple[str, str], ...]:
    """The menu of a private chat with the bot: the daily code is played here, rounds in
    groups."""
    names = {"me", "help", "rules"}
    return (
        ("daily", _(lang, "Today's code, the same for everyone")),
        ("top", _(lang, "/top daily: today's best in the world")),
        *(item for item in player_commands(lang) if item[0] in names),
    )


SETTINGS_EXAMPLE: Final = "/settings length=5 palette=🍎🍌🍇🍒🍋🥝 repeats=off"


def help_text(lang: Lang) -> str:
    """What /help (and /start) answers."""
    return "\n".join(
        (
            _(lang, "Codemojex: crack the secret emoji code."),
            _(lang, "/newgame start a round"),
            _(lang, "/g 🍎🍌🍇🍒 guess (or just send the emojis, or reply to the round)"),
            _tap_hint(lang),
            _(
                lang,
                "/rules how a round works · /stats your record · /top leaderboard "
                "(/top week: this week) · /me all chats",
            ),
            _(
                lang,
                "/daily today's code, the same for everyone: play it in a private chat with "
                "me (in a group: who here cracked it) · /top daily the world's best",
            ),
            _(
                lang,
                "Admins: /pause /resume /limit N /weight N /ban /unban /endround "
                "/settings length=5 palette=🍎🍌🍇🍒🍋🥝 /queue",
            ),
        )
    )


def _tap_hint(lang: Lang) -> str:
    return _(lang, "Or tap the emojis on the round message's buttons.")


def _pegs_legend(lang: Lang) -> str:
    return _(
        lang,
        "%(exact)s right emoji, right place · %(misplaced)s right emoji, wrong place · "
        "%(miss)s the rest",
        exact=EXACT,
        misplaced=MISPLACED,
        miss=MISS,
    )


def _points_rule(lang: Lang) -> str:
    best = points_for(1)
    return _n(
        lang,
        "First to get all %(exact)s wins %(n)s point, %(step)s fewer per extra attempt "
        "(at least %(least)s).",
        "First to get all %(exact)s wins %(n)s points, %(step)s fewer per extra attempt "
        "(at least %(least)s).",
        best,
        exact=EXACT,
        step=best - points_for(2),
        least=points_for(10**6),
    )


# --- short answers ---


def group_only(lang: Lang) -> str:
    return _(lang, "That works in a group: add me to a group chat and use it there.")


def private_hint(lang: Lang) -> str:
    return _(
        lang,
        "Codemojex rounds are played in group chats: add me to one and send /newgame. "
        "Here you can play today's daily code: /daily. /help",
    )


def unknown_command(lang: Lang) -> str:
    return _(lang, "I don't know that command. /help lists mine.")


def no_round(lang: Lang) -> str:
    return _(lang, "No round running. /newgame starts one.")


def round_running(lang: Lang) -> str:
    return _(lang, "A round is already running: guess with /g or send the emojis.")


def banned(lang: Lang) -> str:
    return _(lang, "You are banned from this chat's games.")


def slow_down(lang: Lang) -> str:
    return _(lang, "Slow down: your earlier guesses are still being scored.")


def answers_spent(lang: Lang) -> str:
    """Said once to a member past their answer budget in a chat (state/budget.py)."""
    return _(lang, "Slow down: I will answer you again in a minute.")


def try_again(lang: Lang) -> str:
    return _(lang, "The game is busy; try again in a moment.")


def catching_up(lang: Lang) -> str:
    """Said once per chat while an outage holds its updates: they are kept, not lost."""
    return _(lang, "⏳ The game is catching up: your messages are safe and will count shortly.")


def went_wrong(lang: Lang) -> str:
    return _(lang, "Something went wrong, try again.")


def not_admin(lang: Lang) -> str:
    return _(lang, "Only this chat's admins can do that.")


def reply_to_player(lang: Lang) -> str:
    return _(lang, "Reply to a message of the player you mean.")


def anonymous_player(lang: Lang) -> str:
    return _(lang, "Post as yourself to play.")


def paused(lang: Lang) -> str:
    # The round timer holds a paused room's round open for rules.ROUND_HOLD_S_MAX past its end, so
    # that guesses sent in time are still scored in time after /resume (docs/game.md).
    return _(
        lang,
        "Scoring paused here; guesses are kept. Rounds go on: a guess sent before its round "
        "ended still counts if scoring resumes (/resume) in time (at most %(duration)s after "
        "that end).",
        duration=duration(lang, ROUND_HOLD_S_MAX),
    )


def resumed(lang: Lang) -> str:
    return _(lang, "Scoring resumed.")


def tap_sent(lang: Lang, guess: str | Sequence[str]) -> str:
    """The toast of the tap that completed a code: the guess went in."""
    return _(lang, "%(guess)s sent!", guess=_joined(guess))


def tap_round_over(lang: Lang) -> str:
    """The toast of a tap on the keyboard of a round that is no longer running."""
    return _(lang, "This round is over: tap the keyboard of the current round.")


def tap_too_fast(lang: Lang) -> str:
    return _(lang, "Too fast: tap a little slower.")


def scoring_paused_note(lang: Lang) -> str:
    return _(lang, "Scoring is paused here: your guess waits until /resume.")


def duration(lang: Lang, seconds: int) -> str:
    """600 -> "10 minutes", 90 -> "90 seconds", 7200 -> "2 hours".

    A length of time on its own, as a subject would be: the sentences that show it take it as
    it is, so translations word them around it (in parentheses, after a colon)."""
    if seconds >= 3600 and seconds % 3600 == 0:
        # Translators: a length of time on its own (see "No winner within %(duration)s").
        return _n(lang, "%(n)s hour", "%(n)s hours", seconds // 3600)
    if seconds >= 60 and seconds % 60 == 0:
        # Translators: a length of time on its own (see "No winner within %(duration)s").
        return _n(lang, "%(n)s minute", "%(n)s minutes", seconds // 60)
    # Translators: a length of time on its own (see "No winner within %(duration)s").
    return _n(lang, "%(n)s second", "%(n)s seconds", seconds)


def _spaced(emojis: str | Sequence[str]) -> str:
    return " ".join(split_emojis(emojis) if isinstance(emojis, str) else emojis)


def _joined(emojis: str | Sequence[str]) -> str:
    return emojis if isinstance(emojis, str) else "".join(emojis)


# --- rules and rounds ---


def rules_text(
    lang: Lang,
    length: int,
    palette: str | Sequence[str] | None,
    timeout_s: int,
    *,
    repeats: bool = True,
) -> str:
    """/rules for a room: its length, palette (None = drawn fresh each round) and timeout."""
    code = _n(
        lang, "Crack a secret code of %(n)s emoji.", "Crack a secret code of %(n)s emojis.", length
    )
    pal = (
        _(lang, "Palette: %(palette)s", palette=_spaced(palette))
        if palette
        else _(lang, "Palette: a fresh set of emojis each round, shown when it starts.")
    )
    how = _n(
        lang,
        "Guess by sending %(n)s palette emoji: as a message, as a reply to the round, "
        "or /g 🍎🍌🍇🍒.",
        "Guess by sending %(n)s palette emojis: as a message, as a reply to the round, "
        "or /g 🍎🍌🍇🍒.",
        length,
    )
    how = f"{how} {_tap_hint(lang)}"
    rep = (
        _(lang, "Emojis may repeat in the code.")
        if repeats
        else _(lang, "No emoji repeats in the code.")
    )
    clock = _(
        lang,
        "No winner within %(duration)s? The code is revealed.",
        duration=duration(lang, timeout_s),
    )
    return f"{code} {pal}\n{how} {rep}\n{_pegs_legend(lang)}\n{_points_rule(lang)}\n{clock}"


def round_started(
    lang: Lang,
    palette: str | Sequence[str],
    length: int,
    timeout_s: int,
    *,
    repeats: bool = True,
) -> str:
    """The announcement of a new round; players may reply to it with their guesses."""
    if repeats:
        head = _n(
            lang,
            "🎯 New round! Crack the secret code of %(n)s emoji (emojis may repeat).",
            "🎯 New round! Crack the secret code of %(n)s emojis (emojis may repeat).",
            length,
        )
    else:
        head = _n(
            lang,
            "🎯 New round! Crack the secret code of %(n)s emoji (no emoji repeats).",
            "🎯 New round! Crack the secret code of %(n)s emojis (no emoji repeats).",
            length,
        )
    send = _n(
        lang,
        "Send %(n)s palette emoji, reply to this message, or use /g.",
        "Send %(n)s palette emojis, reply to this message, or use /g.",
        length,
    )
    pal = _(lang, "Palette: %(palette)s", palette=_spaced(palette))
    tap = _(lang, "Or tap the buttons below: the guess goes in when the code is complete.")
    clock = _(lang, "%(duration)s on the clock.", duration=duration(lang, timeout_s))
    return f"{head}\n{pal}\n{send} {tap}\n{_pegs_legend(lang)}\n{clock} {_points_rule(lang)}"


def result_line(lang: Lang, guess: str | Sequence[str], fb: Feedback, attempt_no: int) -> str:
    """A scored guess, posted as a reply: "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)"."""
    # Translators: the number of the player's attempt in this round ("attempt no. 3").
    return _(lang, "%(result)s  (attempt %(n)s)", result=render_result(guess, fb), n=attempt_no)


def win(lang: Lang, name: str, secret: str | Sequence[str], attempt_no: int, points: int) -> str:
    cracked = _n(
        lang,
        "🏆 %(name)s cracked the code %(secret)s in %(n)s attempt!",
        "🏆 %(name)s cracked the code %(secret)s in %(n)s attempts!",
        attempt_no,
        name=name,
        secret=_joined(secret),
    )
    booked = _n(
        lang,
        "+%(n)s point. /newgame for another round.",
        "+%(n)s points. /newgame for another round.",
        points,
    )
    return f"{cracked} {booked}"


def already_solved(lang: Lang, guess: str | Sequence[str]) -> str:
    """A guess scored after the round was won: it earns nothing."""
    return _(
        lang, "%(guess)s: too late, this round is already solved. /newgame", guess=_joined(guess)
    )


def already_over(lang: Lang, guess: str | Sequence[str]) -> str:
    """A guess scored after the round timed out or was ended."""
    return _(lang, "%(guess)s: too late, this round is over. /newgame", guess=_joined(guess))


def timed_out(lang: Lang, secret: str | Sequence[str], timeout_s: int) -> str:
    return _(
        lang,
        "⏰ Time's up: nobody cracked it in %(duration)s. The code was %(secret)s. /newgame",
        duration=duration(lang, timeout_s),
        secret=_joined(secret),
    )


def ended_by_admin(lang: Lang, secret: str | Sequence[str]) -> str:
    return _(
        lang,
        "🛑 Round ended by an admin. The code was %(secret)s. /newgame",
        secret=_joined(secret),
    )


# --- refusals ---

# At most this many offending emojis are named in a refusal.
OFFENDERS_SHOWN: Final = 5


def guess_refused(lang: Lang, exc: InvalidGuess) -> str:
    """Why a message is not a guess of this round, to the player who sent it."""
    pal = "".join(exc.palette)
    if exc.kind == "not_in_palette":
        odd = exc.offenders
        named = "".join(odd[:OFFENDERS_SHOWN]) + ("…" if len(odd) > OFFENDERS_SHOWN else "")
        return _(
            lang,
            "Not in this round's palette: %(emojis)s. Pick from %(palette)s.",
            emojis=named,
            palette=pal,
        )
    if exc.kind == "empty":
        return _n(
            lang,
            "Empty guess: send %(n)s emoji from %(palette)s.",
            "Empty guess: send %(n)s emojis from %(palette)s.",
            exc.length,
            palette=pal,
        )
    if exc.kind == "not_emoji":
        return _n(
            lang,
            "That's not a guess: send %(n)s emoji from %(palette)s.",
            "That's not a guess: send %(n)s emojis from %(palette)s.",
            exc.length,
            palette=pal,
        )
    if exc.kind == "too_short":
        return _n(
            lang,
            "Too short: %(n)s emoji, this round needs %(length)s.",
            "Too short: %(n)s emojis, this round needs %(length)s.",
            exc.count or 0,
            length=exc.length,
        )
    if exc.count is not None:
        return _n(
            lang,
            "Too long: %(n)s emoji, this round needs %(length)s.",
            "Too long: %(n)s emojis, this round needs %(length)s.",
            exc.count,
            length=exc.length,
        )
    if exc.more_than is not None:
        return _n(
            lang,
            "Too long: more than %(n)s emoji, this round needs %(length)s.",
            "Too long: more than %(n)s emojis, this round needs %(length)s.",
            exc.more_than,
            length=exc.length,
        )
    return _n(
        lang,
        "Too long: this round needs %(n)s emoji.",
        "Too long: this round needs %(n)s emojis.",
        exc.length,
    )


def _languages_listed() -> str:
    return ", ".join(_language_named(code) for code in LANGUAGES)


def settings_refused(lang: Lang, exc: InvalidSettings) -> str:
    """Why `/settings …` changed nothing, to the admin who typed it."""
    kind = exc.kind
    if kind == "empty":
        return _(lang, "Nothing to change. Try: %(example)s", example=SETTINGS_EXAMPLE)
    if kind == "unknown_setting":
        if exc.name is None:
            return _(
                lang,
                "Settings are name=value pairs of length, palette, repeats and lang, "
                "e.g. %(example)s",
                example=SETTINGS_EXAMPLE,
            )
        return _(
            lang,
            "Unknown setting %(name)s: only length, palette, repeats and lang can be set, "
            "e.g. %(example)s",
            name=exc.name,
            example=SETTINGS_EXAMPLE,
        )
    if kind == "repeated_setting":
        return _(lang, "%(name)s is given twice.", name=exc.name)
    if kind == "length_not_number":
        return _(
            lang,
            "Length is a whole number from %(low)s to %(high)s, e.g. length=5.",
            low=MIN_LENGTH,
            high=MAX_LENGTH,
        )
    if kind == "length_range":
        return _(
            lang,
            "Length must be from %(low)s to %(high)s, not %(value)s.",
            low=MIN_LENGTH,
            high=MAX_LENGTH,
            value=exc.value,
        )
    if kind == "palette_not_emoji":
        return _(
            lang, "A palette is emojis only (spaces between them are fine), e.g. 🍎🍌🍇🍒🍋🥝."
        )
    if kind == "palette_duplicate":
        return _(
            lang,
            "Each emoji may be in the palette only once: %(emoji)s is repeated.",
            emoji=exc.emoji,
        )
    if kind == "palette_count":
        if exc.count is None:
            return _(
                lang,
                "A palette needs %(low)s to %(high)s different emojis; that has more.",
                low=MIN_PALETTE,
                high=MAX_PALETTE,
            )
        return _(
            lang,
            "A palette needs %(low)s to %(high)s different emojis; that has %(count)s.",
            low=MIN_PALETTE,
            high=MAX_PALETTE,
            count=exc.count,
        )
    if kind == "repeats_value":
        return _(lang, "Repeats is on or off (yes/no and true/false work too), e.g. repeats=off.")
    if kind == "repeats_palette":
        return _n(
            lang,
            "With repeats off, the palette needs at least as many emojis as the code: "
            "%(n)s emoji is too few for a code of %(length)s.",
            "With repeats off, the palette needs at least as many emojis as the code: "
            "%(n)s emojis are too few for a code of %(length)s.",
            exc.count or 0,
            length=exc.length,
        )
    # lang_unknown
    if exc.value is None:
        return _(
            lang,
            "Unknown language: lang= takes one of %(languages)s.",
            languages=_languages_listed(),
        )
    return _(
        lang,
        "Unknown language %(code)s: lang= takes one of %(languages)s.",
        code=exc.value,
        languages=_languages_listed(),
    )


# --- admin answers ---


def _settings(
    lang: Lang, length: int, palette: str | Sequence[str] | None, repeats: bool, language: Lang
) -> str:
    parts = (
        _(lang, "length %(length)s", length=length),
        _(lang, "palette %(palette)s", palette=_spaced(palette))
        if palette
        else _(lang, "palette drawn fresh each round"),
        _(lang, "repeats on") if repeats else _(lang, "repeats off"),
        _(lang, "language %(language)s", language=_language_named(language)),
    )
    return ", ".join(parts)


def _language_named(language: Lang) -> str:
    return f"{NAMES[language]} ({tag(language)})"


def settings_changed(
    lang: Lang,
    length: int,
    palette: str | Sequence[str] | None,
    *,
    repeats: bool = True,
    language: Lang | None = None,
) -> str:
    """The answer to `/settings …` that changed something (in the chat's language afterwards)."""
    shown = _settings(lang, length, palette, repeats, language or lang)
    return _(lang, "Settings saved for the next round: %(settings)s.", settings=shown)


def settings_shown(
    lang: Lang,
    length: int,
    palette: str | Sequence[str] | None,
    *,
    repeats: bool,
    language: Lang | None = None,
) -> str:
    """/settings with nothing to change: what the next round will use, and how to change it."""
    shown = _settings(lang, length, palette, repeats, language or lang)
    return "\n".join(
        (
            _(lang, "Settings for the next round: %(settings)s.", settings=shown),
            _(lang, "Change them with e.g. %(example)s", example=SETTINGS_EXAMPLE),
            _(
                lang,
                "Languages (lang=…): %(languages)s",
                languages=", ".join(tag(code) for code in LANGUAGES),
            ),
        )
    )


def limit_set(lang: Lang, n: int) -> str:
    return _n(
        lang,
        "At most %(n)s guess from this chat scored at once.",
        "At most %(n)s guesses from this chat scored at once.",
        n,
    )


def weight_set(lang: Lang, name: str, n: int) -> str:
    return _n(
        lang,
        "%(name)s now gets %(n)s guess per turn.",
        "%(name)s now gets %(n)s guesses per turn.",
        n,
        name=name,
    )


def player_banned(lang: Lang, name: str, dropped: int) -> str:
    text = _(lang, "%(name)s is banned from this chat's games.", name=name)
    if not dropped:
        return text
    waiting = _n(lang, "%(n)s pending guess dropped.", "%(n)s pending guesses dropped.", dropped)
    return f"{text} {waiting}"


def player_unbanned(lang: Lang, name: str) -> str:
    return _(lang, "%(name)s may play here again.", name=name)


def whole_number_usage(lang: Lang, command: str, low: int, high: int) -> str:
    return _(
        lang,
        "%(command)s takes one whole number from %(low)s to %(high)s.",
        command=command,
        low=low,
        high=high,
    )


def top_usage(lang: Lang) -> str:
    """/top with an argument it does not know."""
    return _(
        lang,
        "/top shows the leaderboard of all time, /top week this week's, "
        "/top daily today's daily code in the world.",
    )


# --- records ---


class Record(Protocol):
    """A player's record, in one room or summed over all (the store's stats rows fit)."""

    @property
    def points(self) -> int: ...
    @property
    def wins(self) -> int: ...
    @property
    def guesses(self) -> int: ...
    @property
    def best_solve(self) -> int | None: ...


class RecordEverywhere(Record, Protocol):
    @property
    def rooms(self) -> int: ...


def record_here(lang: Lang, name: str, record: Record | None) -> str:
    """/stats: a player's record in this chat (None: never played here)."""
    if record is None:
        return player_stats(lang, name, 0, 0, 0, None)
    return player_stats(lang, name, record.points, record.wins, record.guesses, record.best_solve)


def record_everywhere(lang: Lang, name: str, record: RecordEverywhere) -> str:
    """/me: a player's record summed over every chat they played in."""
    return player_stats(
        lang,
        name,
        record.points,
        record.wins,
        record.guesses,
        record.best_solve,
        rooms=record.rooms,
    )


def player_stats(
    lang: Lang,
    name: str,
    points: int,
    wins: int,
    guesses: int,
    best_solve: int | None,
    *,
    rooms: int | None = None,
) -> str:
    """A record in one chat ("here"), or in `rooms` chats."""
    parts = [
        _n(lang, "%(n)s point", "%(n)s points", points),
        _n(lang, "%(n)s win", "%(n)s wins", wins),
        _n(lang, "%(n)s guess", "%(n)s guesses", guesses),
    ]
    if best_solve:
        parts.append(
            _n(lang, "best solve in %(n)s attempt", "best solve in %(n)s attempts", best_solve)
        )
    record = ", ".join(parts)
    if rooms is None:
        return _(lang, "%(name)s here: %(record)s.", name=name, record=record)
    return _n(
        lang,
        "%(name)s in %(n)s chat: %(record)s.",
        "%(name)s in %(n)s chats: %(record)s.",
        rooms,
        name=name,
        record=record,
    )


MEDALS: Final = ("🥇", "🥈", "🥉")


def leaderboard(lang: Lang, rows: Sequence[tuple[str, int, int]], *, week: bool = False) -> str:
    """/top (all time) or /top week (since Monday 00:00 UTC): rows of (name, points, wins),
    best first."""
    if not rows:
        if week:
            return _(lang, "No points this week yet. /newgame and be the first!")
        return _(lang, "No points yet. /newgame and be the first!")
    lines = [
        _(lang, "🏆 This week's leaderboard (since Monday 00:00 UTC)")
        if week
        else _(lang, "🏆 Leaderboard")
    ]
    for i, (name, points, wins) in enumerate(rows):
        rank = MEDALS[i] if i < len(MEDALS) else f"{i + 1}."
        lines.append(
            _n(
                lang,
                "%(rank)s %(name)s: %(points)s pts, %(n)s win",
                "%(rank)s %(name)s: %(points)s pts, %(n)s wins",
                wins,
                rank=rank,
                name=name,
                points=points,
            )
        )
    return "\n".join(lines)


# --- the daily code ---

DAILY_CARD_NAME: Final = "Codemojex daily"  # the card's header, the same in every language
MISSED_MARK: Final = "X"  # the card's score when the code was not cracked


def span(lang: Lang, seconds: int) -> str:
    """A length of time in its two largest units: "5 hours 12 minutes", "2 minutes 10 seconds",
    "40 seconds" (each part `duration`'s)."""
    seconds = max(0, int(seconds))
    parts = [(seconds // 3600, 3600), (seconds % 3600 // 60, 60), (seconds % 60, 1)]
    first = next((i for i, (n, _unit) in enumerate(parts) if n), len(parts) - 1)
    shown = [(n, unit) for n, unit in parts[first : first + 2] if n] or [(0, 1)]
    return " ".join(duration(lang, n * unit) for n, unit in shown)


def time_left(lang: Lang, seconds: int) -> str:
    """Time until something, rounded up to whole minutes past the first one."""
    if seconds > 60:
        seconds = -(-seconds // 60) * 60
    return span(lang, seconds)


def daily_puzzle(
    lang: Lang, number: int, palette: str | Sequence[str], length: int, attempts: int
) -> str:
    """The day's puzzle, posted in a player's private chat with the tap keyboard."""
    head = _(lang, "📅 Daily #%(number)s: today's code, the same for everyone.", number=number)
    task = _n(
        lang,
        "You have %(n)s attempt to crack a code of %(length)s emojis (emojis may repeat).",
        "You have %(n)s attempts to crack a code of %(length)s emojis (emojis may repeat).",
        attempts,
        length=length,
    )
    pal = _(lang, "Palette: %(palette)s", palette=_spaced(palette))
    send = _n(
        lang,
        "Send %(n)s palette emoji, or tap the buttons below.",
        "Send %(n)s palette emojis, or tap the buttons below.",
        length,
    )
    return f"{head}\n{pal}\n{task}\n{send}\n{_pegs_legend(lang)}"


def daily_card(
    lang: Lang,
    number: int,
    rows: Sequence[str],
    max_attempts: int,
    *,
    cracked: bool,
    streak: int,
) -> str:
    """The spoiler-free card: `Codemojex daily #N 4/8` (X/8 when not cracked), one row of
    🟢🟡⚫ per attempt (no palette emoji: nothing about the code), then the streak."""
    score = f"{len(rows) if cracked else MISSED_MARK}/{max_attempts}"
    head = f"{DAILY_CARD_NAME} #{number} {score}"
    # Translators: the run of consecutive days with a cracked daily code.
    tail = _n(lang, "🔥 Streak: %(n)s day", "🔥 Streak: %(n)s days", streak)
    return "\n".join((head, *rows, tail))


def daily_cracked(lang: Lang, attempts: int) -> str:
    return _n(
        lang,
        "🎉 You cracked today's code in %(n)s attempt!",
        "🎉 You cracked today's code in %(n)s attempts!",
        attempts,
    )


def daily_missed(lang: Lang, seconds: int) -> str:
    """The last attempt missed while the day runs: the code is not shown yet (another account
    could read it and crack it at once), but when the day ends (00:00 UTC)."""
    return _(
        lang,
        "Out of attempts. Today's code will be shown when the day ends (00:00 UTC), in "
        "%(duration)s: send /daily then.",
        duration=time_left(lang, seconds),
    )


def daily_missed_over(lang: Lang, number: int, secret: str | Sequence[str]) -> str:
    """The last attempt, taken before midnight UTC, missed and scored after it: the day is
    over, so its code is shown."""
    return _(
        lang,
        "Out of attempts: the code of Daily #%(number)s was %(secret)s.",
        number=number,
        secret=_joined(secret),
    )


def daily_new_code_out(lang: Lang) -> str:
    """A finish scored after its day ended (its guess taken before): the next code is out."""
    return _(lang, "A new code is out: send /daily.")


def daily_yesterday(lang: Lang, number: int, secret: str | Sequence[str]) -> str:
    """Above the day's puzzle, for a player who lost yesterday's (out of attempts): its code,
    shown now that its day is over."""
    return _(
        lang,
        "Yesterday's code, Daily #%(number)s, was %(secret)s.",
        number=number,
        secret=_joined(secret),
    )


def daily_next_code(lang: Lang, seconds: int) -> str:
    """When the next daily code comes (at 00:00 UTC)."""
    return _(lang, "Next code in %(duration)s.", duration=time_left(lang, seconds))


def daily_send_first(lang: Lang) -> str:
    """A guess in a private chat with no daily running there."""
    return _(lang, "No daily code running here: send /daily to get today's.")


def daily_come_back(lang: Lang, seconds: int) -> str:
    """A guess after the player's daily is over (cracked, or out of attempts)."""
    return _(
        lang,
        "You have played today's code: come back tomorrow, the next one is in %(duration)s.",
        duration=time_left(lang, seconds),
    )


def daily_playing(lang: Lang, number: int, left: int, palette: str | Sequence[str]) -> str:
    """/daily again while the day's code is being played: no second puzzle."""
    on = _n(
        lang,
        "Daily #%(number)s is on: %(n)s attempt left.",
        "Daily #%(number)s is on: %(n)s attempts left.",
        left,
        number=number,
    )
    pal = _(lang, "Palette: %(palette)s", palette=_spaced(palette))
    send = _(lang, "Send your guess, or tap the buttons of the puzzle above.")
    return f"{on}\n{pal}\n{send}"


def daily_again(lang: Lang, card: str, seconds: int, *, share_via: str | None = None) -> str:
    """/daily again after the day's code is over: the card, and when the next code comes;
    with inline mode on, how to share the card (the bot's username in any chat)."""
    parts = [card, daily_next_code(lang, seconds)]
    if share_via:
        parts.append(_(lang, "Share it: type @%(bot)s in any chat.", bot=share_via))
    return "\n\n".join(parts)


def daily_in_channel(lang: Lang, bot: str) -> str:
    return _(
        lang,
        "The daily code is played in a private chat with me: open @%(bot)s and send /daily.",
        bot=bot,
    )


def share_button(lang: Lang) -> str:
    """The card's button that opens Telegram's chat picker to post the card elsewhere."""
    return _(lang, "Share")


def daily_share_description(lang: Lang) -> str:
    """The inline answer's line under the card's title: what choosing it does."""
    return _(lang, "Post your card in this chat")


def daily_invite_title(lang: Lang) -> str:
    """The inline answer for someone who has not finished today's code (nothing to share)."""
    return _(lang, "Play today's code")


def daily_invite(lang: Lang, number: int, bot: str) -> str:
    """What that answer posts: an invitation, nothing about the code."""
    return _(
        lang,
        "🧩 Codemojex daily #%(number)s: crack today's emoji code with @%(bot)s (/daily).",
        number=number,
        bot=bot,
    )


class GroupRow(Protocol):
    """A member's daily on a group's board (the store's rows fit)."""

    @property
    def name(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def cracked(self) -> bool: ...
    @property
    def seconds(self) -> int | None: ...  # time taken; None while still playing


def _score(row: GroupRow, max_attempts: int) -> str:
    return f"{row.attempts if row.cracked else MISSED_MARK}/{max_attempts}"


def daily_group_board(
    lang: Lang, number: int, rows: Sequence[GroupRow], played: int, max_attempts: int
) -> str:
    """/daily in a group: its members' dailies of today (best first), and the world's count."""
    world = _n(
        lang,
        "%(n)s player in the world played it today.",
        "%(n)s players in the world played it today.",
        played,
    )
    if not rows:
        none = _(
            lang,
            "Nobody here has played Daily #%(number)s yet. Play it in a private chat with me: "
            "/daily",
            number=number,
        )
        return f"{none}\n{world}"
    lines = [_(lang, "📅 Daily #%(number)s in this chat", number=number)]
    for i, row in enumerate(rows):
        if row.seconds is None:
            lines.append(_(lang, "%(name)s: still playing", name=row.name))
            continue
        medal = MEDALS[i] if i < len(MEDALS) and row.cracked else "·"
        taken = span(lang, row.seconds)
        lines.append(f"{medal} {row.name}: {_score(row, max_attempts)} · {taken}")
    lines.append(world)
    return "\n".join(lines)


def daily_world_top(
    lang: Lang,
    number: int,
    rows: Sequence[tuple[str, int]],
    max_attempts: int,
    mine: str | None,
) -> str:
    """/top daily: the world's best of today (name, attempts), then where the asker stands
    (`mine`, one of the daily_rank_* texts; None: nothing to say)."""
    if not rows:
        lines = [_(lang, "Nobody has cracked Daily #%(number)s yet.", number=number)]
    else:
        lines = [_(lang, "🌍 Daily #%(number)s: the best in the world today", number=number)]
    for i, (name, attempts) in enumerate(rows):
        rank = MEDALS[i] if i < len(MEDALS) else f"{i + 1}."
        lines.append(f"{rank} {name}: {attempts}/{max_attempts}")
    if mine:
        lines.append(mine)
    return "\n".join(lines)


def daily_rank_cracked(lang: Lang, rank: int, cracked: int) -> str:
    return _n(
        lang,
        "You: place %(rank)s of %(n)s who cracked it.",
        "You: place %(rank)s of %(n)s who cracked it.",
        cracked,
        rank=rank,
    )


def daily_rank_missed(lang: Lang) -> str:
    return _(lang, "You did not crack today's code: try again tomorrow.")


def daily_rank_playing(lang: Lang) -> str:
    return _(lang, "You have not finished today's code yet: keep going in our private chat.")


def daily_rank_none(lang: Lang) -> str:
    return _(lang, "You have not played today's code: send /daily in a private chat with me.")


HISTOGRAM_WIDTH: Final = 10  # blocks of the longest bar


def daily_histogram(histogram: Sequence[int]) -> str:
    """How many dailies took 1, 2, … attempts, and X (not cracked), as bars (like Wordle's)."""
    top = max(histogram, default=0) or 1
    labels = [str(i + 1) for i in range(len(histogram) - 1)] + [MISSED_MARK]
    lines = []
    for label, n in zip(labels, histogram, strict=True):
        bar = "█" * (-(-n * HISTOGRAM_WIDTH // top)) if n else "▏"
        lines.append(f"{label} {bar} {n}")
    return "\n".join(lines)


def daily_record(
    lang: Lang, streak: int, best: int, played: int, cracked: int, histogram: Sequence[int]
) -> str:
    """/me's daily part: streaks, how many were cracked, and the attempts histogram."""
    if not played:
        return _(lang, "Daily code: none played yet. /daily in a private chat with me.")
    head = _n(
        lang,
        "Daily code: streak %(streak)s (best %(best)s), %(cracked)s of %(n)s cracked.",
        "Daily code: streak %(streak)s (best %(best)s), %(cracked)s of %(n)s cracked.",
        played,
        streak=streak,
        best=best,
        cracked=cracked,
    )
    return f"{head}\n{daily_histogram(histogram)}"


# --- the queue ---

QUEUE_LINES_MAX: Final = 15


def queue_view(lang: Lang, room_view: dict[str, Any] | None, names: dict[str, str]) -> str:
    """/queue: the room's lanes from lanes.snapshot, players by name (ids stay internal)."""
    if room_view is None:
        return _(lang, "Nothing queued here yet.")
    ceiling = room_view.get("ceiling")
    numbers = {
        "in_flight": room_view.get("in_flight", 0),
        "ceiling": ceiling if ceiling is not None else "∞",
        "pending": room_view.get("pending", 0),
    }
    if room_view.get("paused"):
        head = _(
            lang,
            "Scoring paused · in flight %(in_flight)s/%(ceiling)s · waiting %(pending)s",
            **numbers,
        )
    else:
        head = _(
            lang,
            "Scoring running · in flight %(in_flight)s/%(ceiling)s · waiting %(pending)s",
            **numbers,
        )
    waiting = sorted(
        ((lane, info) for lane, info in room_view.get("lanes", {}).items() if info["depth"]),
        key=lambda item: (-int(item[1]["depth"]), item[0]),
    )
    lines = [head]
    for lane, info in waiting[:QUEUE_LINES_MAX]:
        extras = []
        if info.get("weight", 1) != 1:
            extras.append(_(lang, "weight %(n)s", n=info["weight"]))
        if info.get("paused"):
            extras.append(_(lang, "paused"))
        name = names.get(lane) or _(lang, "someone")
        line = _(lang, "%(name)s: %(n)s waiting", name=name, n=info["depth"])
        lines.append(f"{line} ({', '.join(extras)})" if extras else line)
    if len(waiting) > QUEUE_LINES_MAX:
        more = len(waiting) - QUEUE_LINES_MAX
        lines.append(_n(lang, "… and %(n)s more player", "… and %(n)s more players", more))
    return "\n".join(lines)
