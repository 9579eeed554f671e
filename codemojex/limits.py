"""Limits and defaults that are not one part's own: Telegram's, and values several parts read
(the lanes and the bot's commands, the bot and the worker), each field saying what it bounds
and why, and what shares it where that is not the group's whole. A value one part uses is
that part's: a documented constant and keyword default where it is used, a setting's range a
bound type there (`lanes/facade.py` `DeadMax`), which `Settings` types its field with; some
groups here still wait to move. Measurements behind a value: docs/benchmarks.md; what changed
and when: CHANGELOG.md. Nothing here imports the project; code that reads a limit per guess
binds it to a module constant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

_DAY_S: Final = 24 * 3600


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """A process's connections to Redis and the database (runtime.py, db/engine.py)."""

    # Redis connections a process may use, at least the minimum: per consumer (its claim round,
    # its waiter's BLPOP) plus a spare for the sender, which speaks for every chat, and the bot.
    redis_pool_min: int = 64
    redis_pool_per_consumer: int = 4
    redis_pool_spare: int = 16
    # A command waits this long for a free connection, then fails as an outage.
    redis_pool_wait_s: float = 10.0
    # A Redis that stops answering fails a call (an outage), never hangs it (an idle BLPOP
    # stays under it: lanes/facade.py `park`; `codemojex lanes` the admin one); keepalive
    # (idle, interval, count); a connection idle 15 s is PINGed before use.
    redis_socket_timeout_s: float = 5.0
    redis_admin_timeout_s: float = 300.0
    redis_connect_timeout_s: float = 3.0
    redis_keepalive: tuple[int, int, int] = (10, 5, 3)
    redis_health_check_s: int = 15
    # Database connections kept, and more for a burst: work queues rather than churning
    # connections. Postgres's max_connections (100) is shared: 2 bots and 3 workers keep 100
    # (a worker's flushes keep one of its own: worker/service.py FLUSH_CONNECTIONS).
    db_pool_size: int = 16
    db_pool_overflow: int = 4
    # A pooled connection is replaced (none is pinged) before an idle timeout can cut it.
    db_pool_recycle_s: int = 600
    # Every Postgres session of bot, worker and ops page (db/engine.py). The longest hot-path
    # transaction and lock holder, record_guesses, took 169 ms at full load, its statements
    # 145 ms (docs/benchmarks.md, "Statement times"): a lock is waited for 18 times that, a
    # statement runs 34 times; past them a Postgres outage, tried again (outages.py).
    db_lock_timeout_ms: int = 3_000
    db_statement_timeout_ms: int = 5_000
    # A client frozen or gone mid-transaction gives its locks back after this (not the two
    # hours of TCP keepalive): ours wait on nothing but the database and a bounded Redis call.
    db_idle_in_transaction_ms: int = 10_000
    # Server keepalive (idle, interval, count), connecting, asyncpg's bound past the statement
    # timeouts (a hung server sends none); the trims' own bounds (`SET LOCAL`; migrations none).
    db_keepalive: tuple[int, int, int] = (10, 5, 3)
    db_connect_timeout_s: float = 5.0
    db_command_margin_s: float = 5.0
    db_maintenance_statement_timeout_ms: int = 20_000
    db_maintenance_lock_timeout_ms: int = 10_000
    # SQLite (the embedded demo): a writer waits this long for the write lock.
    sqlite_busy_timeout_s: float = 30.0


CONNECTIONS: Final = ConnectionLimits()


@dataclass(frozen=True, slots=True)
class TelegramLimits:
    """Telegram's own limits: not ours to choose."""

    # A message's length in UTF-16 code units: what a post holds; anything longer is no guess.
    message_chars_max: int = 4096
    # The published posting rates, the defaults of the settings CODEMOJEX_PACE_*.
    chat_per_s: int = 1
    group_per_min: int = 20
    bot_per_s: int = 30
    # What one getUpdates returns at most, and setWebhook's max_connections at most.
    updates_max: int = 100
    # The webhook's secret header: 1-256 of A-Z a-z 0-9 _ -.
    webhook_secret_max: int = 256


TELEGRAM: Final = TelegramLimits()


@dataclass(frozen=True, slots=True)
class LaneLimits:
    """The fair queue (codemojex/lanes): what it accepts, and how long it keeps what it held."""

    # A room's guesses in flight at once: every room has a ceiling, so none holds every worker.
    # Shared: the lanes keep it, /limit, the ops page and a room's settings (use-cases) take it,
    # CODEMOJEX_DEFAULT_CEILING gives new rooms theirs.
    ceiling_min: int = 1
    ceiling_max: int = 1000
    ceiling_default: int = 2
    # A player's heads per turn of their room's lane ring (the lanes keep it, /weight sets it).
    weight_min: int = 1
    weight_max: int = 100
    # A job's attempts when its enqueuer names none.
    job_max_attempts_default: int = 5
    # A guess's attempts: every lease it loses spends one (a worker killed, a Redis restart);
    # recording it again costs nothing, while a dead-lettered guess is a lost guess.
    guess_max_attempts: int = 25
    # A failed job's error as kept; jobs acked per script call (Lua's unpack() has a limit).
    job_error_chars_max: int = 2_000
    ack_chunk: int = 1_000
    # How long an update handled is remembered (a dedupe key, a callback query or command seen)
    # so that one delivered again changes nothing: redelivery comes within a restart. At most
    # an hour: no key of ours outlives that but those docs/architecture.md lists. Shared: the
    # lanes' dedupe keys and the bot's command marks and taps (CODEMOJEX_DEDUPE_WINDOW_S).
    dedupe_window_s_default: int = 600
    dedupe_window_s_max: int = 3600
    # Expired leases reaped, due retries promoted, per script call of the maintenance pass.
    maintenance_batch_default: int = 1000
    maintenance_batch_max: int = 100_000


LANES: Final = LaneLimits()


@dataclass(frozen=True, slots=True)
class WorkerLimits:
    """The score worker (worker/score.py) and its round timer (worker/service.py)."""

    # Guesses recorded in one transaction at most (group commit).
    flush_max: int = 512
    # A database outage is waited out this long with the batch in hand, then it goes back.
    hold_s: float = 5.0
    # A round held open for guesses taken before its deadline is looked at this often.
    round_hold_recheck_s: float = 1.0


WORKER: Final = WorkerLimits()


@dataclass(frozen=True, slots=True)
class GameLimits:
    """A room's rules, and what a guess or a setting may be (codemojex/game, scoring)."""

    length_min: int = 3
    length_max: int = 6
    length_default: int = 4
    palette_min: int = 4
    palette_max: int = 10
    palette_size_default: int = 6
    # A round's timeout. Shared: the game's rules, a room's settings (use-cases), the round
    # timer's pace (worker/service.py: a round lasts at least the minimum), and
    # CODEMOJEX_ROUND_TIMEOUT_S for new rooms.
    round_timeout_s_min: int = 30
    round_timeout_s_max: int = 7 * _DAY_S
    round_timeout_s_default: int = 600
    # A round stays open past its deadline while guesses taken in time wait to be scored; at
    # most this long, so a paused room or a dead worker fleet cannot hold it for ever.
    round_hold_s_max: int = 600
    # No real emoji has more code points (RGI: about 10): a longer cluster is refused at once.
    emoji_codepoints_max: int = 32
    # Stored palettes and secrets whose split a process keeps: a busy worker's open rounds'.
    emoji_split_cache: int = 4096
    # A settings line: far more than any real palette, and the work per command stays small.
    settings_chars_max: int = 1024
    # Emoji buttons per row of a round's keyboard (Telegram allows 8; 5 fit a phone's width).
    tap_row_max: int = 5
    # /top and /top week show this many players.
    leaderboard_rows: int = 10


GAME: Final = GameLimits()


@dataclass(frozen=True, slots=True)
class BotLimits:
    """The front door: the bot process taking updates (codemojex/bot)."""

    # A polling bot's long poll, and the read timeout it allows on top for the answer.
    poll_timeout_s: int = 10
    poll_read_margin_s: float = 5.0
    # SIGTERM: the updates in hand are finished and confirmed within this long, under the 20 s
    # that deploy/'s systemd and Kubernetes give the process.
    stop_s: float = 12.0
    # A webhook request past `in_hand` gets 503 with this Retry-After (Telegram waits so long).
    webhook_busy_retry_after_s: int = 1
    # The shortest webhook secret we start with: a guessable one lets anyone inject updates.
    webhook_secret_min: int = 32
    # Webhook bodies over this are refused unread: an update is a few kB.
    webhook_body_max: int = 2 * 1024 * 1024
    # A command's run mark is a lease (bot/once.py), renewed every third of it while the
    # command runs: a process that died lets go of it within this long. Another process
    # given the same message waits up to `command_wait_s` (past the lease, so that a dead
    # holder's has run out) for it to be done or let go, polling every `command_poll_s`.
    command_lease_s: float = 15.0
    command_wait_s: float = 20.0
    command_poll_s: float = 0.2
    # A player's taps allowed per window, in every chat together (a toast past it): a thumb
    # taps four or five times a second; this stops scripted hammering.
    tap_rate_max: int = 8
    tap_rate_window_ms: int = 2_000
    # A player's name as kept, and the names a process remembers how to show (LRU).
    name_chars_max: int = 64
    shown_names_cache: int = 8192


BOT: Final = BotLimits()


@dataclass(frozen=True, slots=True)
class PaceLimits:
    """The posting pace all processes keep together in Redis, within TELEGRAM's rates."""

    # A group's minute is spread evenly, with this burst for a quiet room, within its rate.
    group_burst: int = 3
    # Added to a chat's second and a group's minute for a post's time on the wire. The bot's
    # second counts a grant as in flight until answered, for at most `flight_ms` (past any post).
    margin_ms: int = 100
    flight_ms: int = 12_000


PACE: Final = PaceLimits()


@dataclass(frozen=True, slots=True)
class AnswerLimits:
    """The bot's own answers: their share of the pace, each member's budget (posting/)."""

    # Answers get what the results leave, never all of it. The results spread a group's minute
    # less this reserve, so a full room still has a post for a refusal or a "slow down".
    group_reserve: int = 1
    # Answers take at most this percentage of a group's minute, past the reserve only while the
    # results' part still fits.
    group_share_pct: int = 25
    # Answers take at most this percentage of the bot's second, only while the results' part
    # still fits: spammers in many chats take nothing from the results.
    bot_share_pct: int = 20
    # Chat intervals between two answers to one chat: an answer never takes two of its seconds
    # in a row, so a waiting result gets the one between.
    chat_gap: int = 2
    # An answer waits so long for a slot (outside the update's handling), then is dropped.
    wait_s_default: float = 3.0
    # The worker's "too late" lines spend the same budget inside the transaction recording them
    # (rounds locked): Redis gets this long, then the lines go as while it is out.
    late_budget_wait_s: float = 0.5
    # A "slow down" or "scoring is paused" notice is given once per this long per player.
    notice_episode_s: int = 60


ANSWERS: Final = AnswerLimits()


@dataclass(frozen=True, slots=True)
class DailyLimits:
    """The daily code (game/daily.py, state/board.py, state/members.py, bot/daily.py)."""

    # One code a UTC day: its length, palette and attempts (Wordle's six, two more for repeats).
    length: int = 4
    palette_size: int = 6
    attempts: int = 8
    # The world board's life from its day's start: yesterday's stays readable past midnight.
    board_ttl_s: int = 3 * _DAY_S
    # A lost board's rebuild: rows per round trip, its lock's life (a dead rebuilder's ends).
    rebuild_chunk: int = 5000
    rebuild_lock_ms: int = 120_000
    # /top daily shows so many; /daily in a group at most so many of its members.
    top_rows: int = 10
    group_rows: int = 20
    # A group's members as the bot saw them: the last seen, each forgotten this long after.
    # 128 keeps the set in Redis's compact encoding: about 2 kB a group.
    group_members_max: int = 128
    group_members_ttl_s: int = 30 * _DAY_S
    # Members noted in memory, written together once a `flush_s` (no round trip per message);
    # at most `pending_max` wait (about 1 MB), a new one past them dropped.
    group_members_flush_s: float = 1.0
    group_members_pending_max: int = 10_000
    # How long Telegram may cache an inline answer: an invitation (it may become a card any
    # moment), and a card (the same until the next code).
    inline_cache_s: int = 5
    inline_card_cache_s: int = 300
    # A user's inline queries answered per window, the rest ignored before any read: a person
    # typing stays well under it.
    inline_rate_max: int = 10
    inline_rate_window_ms: int = 10_000
    # Days' puzzles whose emojis a process keeps split (cheaper than splitting per /daily).
    puzzles_split: int = 4


DAILY: Final = DailyLimits()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The wait after n failures (outages.pause_s): base_s * 2^(n-1) capped at cap_s, with
    `jitter` uniform in [0, that], at least floor_s; `outages.retrying` gives up after
    `give_up_s` of failures (None: when its caller stops)."""

    name: str  # the label of codemojex_retries_total
    base_s: float
    cap_s: float
    give_up_s: float | None = None
    jitter: bool = False
    floor_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Retries:
    """The named retry policies: a distinct one only where its numbers differ for a reason."""

    # A failed job's delay in its lane (pool retries, the worker's hand-back): the lane paces it.
    job: RetryPolicy = RetryPolicy("job", base_s=0.5, cap_s=30.0, jitter=True)
    # A loop of ours after a failure (outbox scan, round timer, getUpdates, outage probe,
    # schema check): the same backoff, but never a hot loop.
    loop: RetryPolicy = RetryPolicy("loop", base_s=0.5, cap_s=30.0, jitter=True, floor_s=0.2)
    # An update waiting out an outage, or tried again after a bug: quick, it holds its sender.
    update: RetryPolicy = RetryPolicy("update", base_s=0.2, cap_s=5.0, jitter=True, floor_s=0.05)
    # The score worker's flush: quick tries while it holds the batch.
    record: RetryPolicy = RetryPolicy("record_guesses", 0.1, 2.0, give_up_s=WORKER.hold_s)
    # The sender's mark_sent, until it stops (its markers keep rows from going out twice).
    mark_sent: RetryPolicy = RetryPolicy("mark_sent", base_s=0.2, cap_s=5.0)


RETRIES: Final = Retries()
