"""A round in each shipped language, end to end: the real bot and the real worker around the
stand-in, one group per language, all at once. Whoever starts a group's first round gives it
their language; everything the group then reads (the announcement, a refusal, the results, the
win, this week's board, a record) is in it, with no English left in."""

from __future__ import annotations

import asyncio

import pytest

from codemojex.game import texts
from codemojex.locale import EN, LANGUAGES, Lang
from codemojex.scoring import InvalidGuess, feedback, parse_guess, points_for
from tests.e2e.harness import Stack, in_process_worker
from tests.helpers.languages import english_in
from tests.helpers.support import wrong_guess

# One player per language, with the language_code their Telegram app sends.
PLAYERS: dict[Lang, tuple[int, str, str]] = {
    Lang("ru"): (2101, "Иван", "ru"),
    Lang("uk"): (2102, "Оксана", "uk"),
    Lang("es"): (2103, "Lucía", "es-419"),
    Lang("pt_BR"): (2104, "João", "pt-br"),
    Lang("id"): (2105, "Putri", "id"),
}


async def play_a_round(stack: Stack, lang: Lang) -> int:
    """A round in a new group, started by the language's player: a refused guess, a miss, the
    win, then /top week and /stats. Returns the chat."""
    user, name, _ = PLAYERS[lang]
    chat = stack.new_group(members=(user,))
    say = stack.standin.send_text
    say(chat, user, "/newgame")
    announced = await stack.standin.wait_for_sent(None, 15, chat_id=chat)
    rnd = await stack.open_round(chat)
    assert rnd is not None
    secret, palette = rnd.secret_emojis, rnd.palette_emojis
    assert announced.text == texts.round_started(lang, palette, rnd.length, 600)

    with pytest.raises(InvalidGuess) as short:
        parse_guess(palette[0], palette, rnd.length)
    refused = say(chat, user, f"/g {palette[0]}")
    assert await stack.reply_to(chat, refused) == texts.guess_refused(lang, short.value)

    miss = wrong_guess(secret, palette)
    posted = await stack.result(chat, say(chat, user, "".join(miss)), name, "".join(miss))
    assert texts.result_line(lang, miss, feedback(miss, secret), 1) in posted.text
    say(chat, user, "".join(secret))
    win = texts.win(lang, name, secret, 2, points_for(2))
    await stack.standin.wait_for_sent(lambda m: win in m.text, 15, chat_id=chat)

    board = await stack.reply_to(chat, say(chat, user, "/top week"))
    assert board == texts.leaderboard(lang, [(name, points_for(2), 1)], week=True)
    record = await stack.reply_to(chat, say(chat, user, "/stats"))
    assert record == texts.player_stats(lang, name, points_for(2), 1, 2, 2)
    return chat


async def test_a_round_in_each_language_shows_no_english(stack: Stack) -> None:
    for user, name, code in PLAYERS.values():
        stack.standin.add_user(user, name, language_code=code)
    assert set(PLAYERS) == set(LANGUAGES) - {EN}
    async with in_process_worker(stack):
        chats = await asyncio.gather(*(play_a_round(stack, lang) for lang in PLAYERS))
    for lang, chat in zip(PLAYERS, chats, strict=True):
        said = [m.text for m in stack.said(chat)]
        assert len(said) >= 6  # announcement, refusal, results, win, board, record
        assert {text: english_in(text, lang) for text in said if english_in(text, lang)} == {}
    # and the check would have seen English: the same round in English is full of it
    assert english_in(texts.win(EN, "Ann", "🍎🍌🍒🍋", 2, 90), "ru")
