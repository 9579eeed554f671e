"""A player whose name carries bidi controls ("Eve" + RIGHT-TO-LEFT OVERRIDE + "gnp.exe", which
a client shows as "Eveexe.png", turning the rest of the line around) is named without them in
what the worker posts and in /top (the bot's own answers: tests/bot/test_admin.py; names
stored before the fix are cleaned by the migration: tests/db/test_migrations.py)."""

from __future__ import annotations

import regex

from codemojex import scoring
from codemojex.game import texts
from codemojex.locale import EN
from tests.e2e.harness import ADMIN, Stack, in_process_worker

EVE = 2100
SHOWN = "Evegnp.exe"
BIDI = regex.compile(r"\p{Bidi_Control}")


async def test_results_wins_and_the_leaderboard_name_players_without_bidi_controls(
    stack: Stack,
) -> None:
    stack.standin.add_user(EVE, "Eve\u202egnp.exe", last_name="\u2067\u200f")
    chat = stack.new_group(members=[EVE])
    async with in_process_worker(stack):
        # Four posts (the round, the result, the win, /top): within a group's pace.
        _, rnd = await stack.new_round(chat)
        secret = rnd.secret_emojis
        stack.standin.send_text(chat, EVE, "".join(secret))
        win = texts.win(EN, SHOWN, secret, 1, scoring.points_for(1))
        await stack.standin.wait_for_sent(lambda m: win in m.text, 15, chat_id=chat)
        top = await stack.reply_to(chat, stack.standin.send_text(chat, ADMIN, "/top"))
        assert f"🥇 {SHOWN}: {scoring.points_for(1)} pts, 1 win" in top
        await stack.all_posted()

    shown = [m.text for m in stack.said(chat)]
    assert [text for text in shown if BIDI.search(text)] == []
