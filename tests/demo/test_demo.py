"""`codemojex demo`, the README's first command, on its embedded defaults (fakeredis, SQLite,
the Bot API stand-in): a short run plays real rounds and accounts for every guess sent."""

from __future__ import annotations

import re

import pytest

from codemojex.demo import DemoPlan, run_demo
from codemojex.settings import Settings


def _number(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in the summary:\n{text}"
    return int(match[1])


async def test_a_short_demo_accounts_for_every_guess(capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(_env_file=None, redis_url=None)
    plan = DemoPlan(
        quiet_rooms=2,
        players_per_room=2,
        flood_players=3,
        seconds=12.0,
        flood_burst=30,  # past the lane's max_depth (20): some guesses are refused as a flood
        flood_interval_s=1.0,
    )

    assert await run_demo(settings, plan) == 0

    out = " ".join(capsys.readouterr().out.split())
    assert "Lanes invariants after the run: all hold." in out
    assert "Telegram flood limits broken: 0." in out
    sent = _number(r"Of (\d+) guesses sent", out)
    taken = _number(r"the bot took (\d+)", out)
    no_round = _number(r"(\d+) came while no round was running", out) if "no round" in out else 0
    flooded = _number(r"(\d+) were refused because the sender's lane was full", out)
    unread = _number(r"(\d+) had not reached the bot", out) if "not reached" in out else 0
    assert taken + no_round + flooded + unread == sent
    assert flooded > 0
    assert "were neither scored nor left queued" not in out
    assert re.search(r"Every guess taken was scored", out)
