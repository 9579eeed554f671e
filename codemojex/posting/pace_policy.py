"""The vocabulary of the posting pace (pacer.py): the limits one kind of post keeps
(`PacePolicy`: the results' or the bot's answers', from the settings CODEMOJEX_PACE_* and the
constants below), a slot taken for one post (`Grant`) and the answer to a take
(`Wait`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Annotated, Final

from pydantic import Field

from codemojex.limits import TELEGRAM
from codemojex.values.bounds import within

# A rate of the settings CODEMOJEX_PACE_* (a chat's second, a group's minute, the bot's second):
# Telegram's published ones by default (limits.py TELEGRAM); lower for a throttled bot, higher
# only for one Telegram lets post more, never past a thousand.
Rate = Annotated[int, Field(ge=1, le=1000)]
# The bot's learned rate (pacer.py): the settings CODEMOJEX_PACE_BOT_FLOOR_PER_S and
# _CEILING_PER_S bound it (docs/operations.md says how these were chosen), it starts at
# CODEMOJEX_PACE_BOT_PER_S. Below the floor the bot would crawl on a transient 429; above the
# ceiling is more than one sender process here posted (bench.posting, docs/benchmarks.md).
BOT_FLOOR_PER_S: Final = 5
BOT_CEILING_PER_S: Final = 600
# The control law (docs/architecture.md says why, from bench.pace_law), as CUBIC's for TCP:
# while results wait for the bot's second the rate rises, before any cut by START_PM per
# mille of itself a second; an unexplained 429 keeps CUT_KEEP_PM per mille of it, nothing
# rises or is cut again for CUT_HOLD_MS, and then the rate climbs back along a cubic to
# where the cut came in REGAIN_MS, stays near it, and probes past it faster and faster.
START_PM: Final = 300
CUT_KEEP_PM: Final = 800
CUT_HOLD_MS: Final = 2000
REGAIN_MS: Final = 10_000
# A learned rate is spread evenly, with bursts of at most this long's worth of its posts.
BOT_BURST_MS: Final = 100
# A learned rate is forgotten this long after its last rise, cut or post (the next start is
# at CODEMOJEX_PACE_BOT_PER_S again): a week, so a restart or a quiet weekend keeps it.
RATE_TTL_MS: Final = 7 * 24 * 3600 * 1000
# A group's minute is spread evenly, with this burst for a quiet room, within its rate.
GROUP_BURST: Final = 3
# Added to a chat's second and a group's minute for a post's time on the wire. The bot's second
# counts a grant as in flight until answered, for at most FLIGHT_MS (past any post).
MARGIN_MS: Final = 100
FLIGHT_MS: Final = 12_000

# The bot's own answers get what the results leave, never all of it. The results spread a
# group's minute less ANSWER_GROUP_RESERVE, so a full room still has a post for a refusal or a
# "slow down".
ANSWER_GROUP_RESERVE: Final = 1
# Answers take at most this percentage of a group's minute, past the reserve only while the
# results' part still fits.
ANSWER_GROUP_SHARE_PCT: Final = 25
# Answers take at most this percentage of the bot's second, only while the results' part still
# fits: spammers in many chats take nothing from the results.
ANSWER_BOT_SHARE_PCT: Final = 20
# Chat intervals between two answers to one chat: an answer never takes two of its seconds in
# a row, so a waiting result gets the one between.
ANSWER_CHAT_GAP: Final = 2


@dataclass(frozen=True, slots=True)
class Wait:
    """The answer to a take: `ms` 0 when the slot was taken; else how long until it could be,
    and whether the bot's limits (`by_bot`) rather than the chat's own bind longest."""

    ms: int
    by_bot: bool = False


@dataclass(frozen=True, slots=True)
class Grant:
    """A slot taken for one post to `chat_id`."""

    chat_id: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True, slots=True)
class PacePolicy:
    """The limits one kind of post must fit in, in milliseconds: the results (the default) or
    the bot's own answers (`answers`). The defaults are the results' share of Telegram's
    published limits. `group_limit` is this kind's share of a group's minute and `bot_share`
    the answers' of the bot's second (the results may use all of it), `group_total` and
    `bot_limit` what every post together may use (a share above them is the whole).
    `margin_ms` is added to a chat's interval and a group's sliding minute for the time a
    request spends on the wire. The bot's second counts a grant in flight as "now" instead
    (for at most `flight_ms`), so it needs no margin."""

    chat_ms: int = 1000 // TELEGRAM.chat_per_s
    group_spacing_ms: int = -(-60_000 // (TELEGRAM.group_per_min - ANSWER_GROUP_RESERVE))
    group_burst: int = GROUP_BURST
    group_limit: int = TELEGRAM.group_per_min - ANSWER_GROUP_RESERVE
    group_window_ms: int = 60_000
    group_total: int = TELEGRAM.group_per_min
    bot_limit: int = TELEGRAM.bot_per_s
    bot_share: int = TELEGRAM.bot_per_s * ANSWER_BOT_SHARE_PCT // 100
    bot_window_ms: int = 1000
    margin_ms: int = MARGIN_MS
    flight_ms: int = FLIGHT_MS
    # The bot's rate is learned between these (None: `bot_limit`, a fixed rate), by this law.
    bot_floor: int | None = None
    bot_ceiling: int | None = None
    start_pm: int = START_PM
    cut_keep_pm: int = CUT_KEEP_PM
    cut_hold_ms: int = CUT_HOLD_MS
    regain_ms: int = REGAIN_MS
    bot_burst_ms: int = BOT_BURST_MS
    # A group's posts a minute a process may make alone, while Redis is away (LocalPace).
    group_alone: int = ANSWER_GROUP_RESERVE
    # The bot's own answers (else results), the ms between two of them to one chat, and how
    # many a group's minute they may post whatever the results use.
    answers: bool = False
    answer_gap_ms: int = 0
    answer_reserve: int = ANSWER_GROUP_RESERVE

    @classmethod
    def from_rates(
        cls,
        chat_per_s: int = TELEGRAM.chat_per_s,
        group_per_min: int = TELEGRAM.group_per_min,
        bot_per_s: int = TELEGRAM.bot_per_s,
        *,
        answers: bool = False,
        margin_ms: int = MARGIN_MS,
        bot_floor: int = BOT_FLOOR_PER_S,
        bot_ceiling: int = BOT_CEILING_PER_S,
    ) -> PacePolicy:
        """The pace of the settings CODEMOJEX_PACE_CHAT_PER_S, _GROUP_PER_MIN, _BOT_PER_S: for
        the results (the sender), a group's minute less ANSWER_GROUP_RESERVE spread evenly and
        the whole bot's second; for the bot's own answers (`answers`), no spacing but their
        share of the minute (ANSWER_GROUP_SHARE_PCT) and of the bot's second
        (ANSWER_BOT_SHARE_PCT), and ANSWER_CHAT_GAP chat intervals between two answers to one
        chat. Both on the same keys: each sees the other's posts. The bot's rate starts at
        `bot_per_s` and is learned between `bot_floor` and `bot_ceiling` (equal: fixed)."""
        for name, rate in (
            ("chat_per_s", chat_per_s),
            ("group_per_min", group_per_min),
            ("bot_per_s", bot_per_s),
            ("bot_floor", bot_floor),
            ("bot_ceiling", bot_ceiling),
        ):
            within(rate, Rate, name)
        if bot_floor > bot_ceiling:
            raise ValueError(f"the bot's floor {bot_floor}/s is above its ceiling {bot_ceiling}/s")

        chat_ms = -(-1000 // chat_per_s)
        if answers:
            return cls(
                chat_ms=chat_ms,
                group_spacing_ms=0,
                group_burst=1,
                group_limit=_share(group_per_min, ANSWER_GROUP_SHARE_PCT),
                group_total=group_per_min,
                bot_limit=bot_per_s,
                bot_share=_share(bot_per_s, ANSWER_BOT_SHARE_PCT),
                margin_ms=margin_ms,
                answers=True,
                answer_gap_ms=ANSWER_CHAT_GAP * (chat_ms + margin_ms),
                bot_floor=bot_floor,
                bot_ceiling=bot_ceiling,
            )
        share = max(1, group_per_min - ANSWER_GROUP_RESERVE)
        return cls(
            chat_ms=chat_ms,
            group_spacing_ms=-(-60_000 // share),
            group_burst=min(GROUP_BURST, share),
            group_limit=share,
            group_total=group_per_min,
            bot_limit=bot_per_s,
            margin_ms=margin_ms,
            bot_floor=bot_floor,
            bot_ceiling=bot_ceiling,
        )

    @property
    def chat_interval_ms(self) -> int:
        return self.chat_ms + self.margin_ms

    @property
    def kind(self) -> str:
        """What a grant's token starts with in the shared logs (pace_take.lua)."""
        return "a" if self.answers else "r"

    @property
    def own_bot_limit(self) -> int:
        """What this kind may use of the bot's second at the configured rate."""
        return self.own_share(self.bot_limit)

    def own_share(self, limit: int) -> int:
        """What this kind may use of a bot's second of `limit` posts (the learned rate's):
        the answers their share of it, in the proportion of the configured rate's."""
        if not self.answers or self.bot_share >= self.bot_limit:
            return limit
        return max(1, limit * self.bot_share // self.bot_limit)

    @property
    def learned_floor(self) -> int:
        return self.bot_limit if self.bot_floor is None else self.bot_floor

    @property
    def learned_ceiling(self) -> int:
        return self.bot_limit if self.bot_ceiling is None else self.bot_ceiling


def _share(limit: int, percent: int) -> int:
    return max(1, limit * percent // 100)
