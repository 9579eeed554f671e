"""Every limit and default of Codemojex, defined once.

Settings take their defaults from here, handlers and the store validate against these ranges,
and the lanes facade refuses what is out of them. Nothing here imports the project: any module
may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- a process's connections and waits -----------------------------------------------------

# Redis connections a process may use at once (runtime.pool_size): REDIS_POOL_PER_CONSUMER per
# consumer and REDIS_POOL_SPARE more, at least REDIS_POOL_MIN. A consumer pool needs few (its
# claim round, its one waiter's BLPOP, heartbeats and maintenance); the rest is for the
# sender, which speaks for every chat at once, and the bot's traffic. A command waits up to
# REDIS_POOL_WAIT_S for a free one, then fails as an outage.
REDIS_POOL_MIN: Final = 64
REDIS_POOL_PER_CONSUMER: Final = 4
REDIS_POOL_SPARE: Final = 16
REDIS_POOL_WAIT_S: Final = 10.0
# SQLite (the embedded demo): a writer waits this long for the database's write lock.
SQLITE_BUSY_TIMEOUT_S: Final = 30.0
# A health probe of a dependency, and the ops page's read of another process's metrics.
HEALTH_PROBE_TIMEOUT_S: Final = 2.0
FLEET_READ_TIMEOUT_S: Final = 2.0

# --- what is taken in at most ---------------------------------------------------------------

# Telegram caps a message at 4,096 characters, counted in UTF-16 code units (an emoji outside
# the BMP is 2, a family emoji more): what one post of ours holds at most, and anything longer
# is not a player's guess.
TELEGRAM_MESSAGE_MAX: Final = 4096
# No real emoji is longer (the longest RGI sequences are ~10 code points); longer clusters (a
# letter under 4,000 combining marks) are refused without further work.
EMOJI_CODEPOINTS_MAX: Final = 32
# Stored palettes and secrets whose emoji split a process keeps (scoring.split_emojis): the
# open rounds' of a busy worker, a few hundred bytes each.
EMOJI_SPLIT_CACHE: Final = 4096
# Far more than any real palette or settings line; keeps the work per command small.
SETTINGS_CHARS_MAX: Final = 1024
# A player's name as the bot keeps it, an operator's name on the ops page.
NAME_CHARS_MAX: Final = 64
# Players' names a bot process remembers how to show (bot/rooms.py, least recently used out).
SHOWN_NAMES_CACHE: Final = 8192
# An admin command's arguments as the audit log keeps them.
AUDIT_ARGS_MAX: Final = 200
# A failed job's error as the lanes keep it.
JOB_ERROR_CHARS_MAX: Final = 2_000
# Jobs acked per script call: Lua's unpack() takes a few thousand values at most.
ACK_CHUNK: Final = 1_000

# --- a room's queue -------------------------------------------------------------------------

# Guesses of one room in flight at once. Every room has a ceiling, so no room ever holds the
# whole worker pool.
CEILING_MIN: Final = 1
CEILING_MAX: Final = 1000
CEILING_DEFAULT: Final = 2

# A player's heads per turn of their room's lane ring (/weight).
WEIGHT_MIN: Final = 1
WEIGHT_MAX: Final = 100

# Guesses a player may have waiting in their lane before "slow down".
DEPTH_DEFAULT: Final = 20
DEPTH_MAX: Final = 10_000

# A claimed batch's lease; the pool's heartbeat extends it while a batch is handled.
LEASE_MS_DEFAULT: Final = 30_000
LEASE_MS_MAX: Final = 24 * 3600 * 1000

# Every lease a guess loses spends an attempt: a worker killed or starved past its lease, a
# Redis restart outlasting the lease, not only a failing handler. Recording a guess is
# idempotent, so more attempts cost nothing, while a dead-lettered guess is a lost guess
# (the soak at lease 2 s, with workers SIGKILLed every few seconds, spent 5 on a few).
GUESS_MAX_ATTEMPTS: Final = 25

# How long Redis remembers an update it handled, so that the same update delivered again (after
# a kill, Telegram sends again whatever it was not confirmed) changes nothing: a producer's
# dedupe key in the lanes, a callback query seen (taps), a command seen. Redelivery comes within
# a restart, so minutes; the lasting guard of a guess is the database (its id is derived from
# its origin and is the guesses' primary key). At most an hour: no key of ours outlives that
# but the lanes' own state and the documented few (docs/architecture.md, "Keys that last").
DEDUPE_WINDOW_S_DEFAULT: Final = 600
DEDUPE_WINDOW_S_MAX: Final = 3600

# Worker consumers per process. Most batches are one guess (weight 1), and the batches in hand
# are recorded together in one transaction (group commit), so more consumers means bigger
# transactions, not more database connections: half the Postgres CPU per guess at 128 as at
# 32, and 1.7x the guesses/s (bench.pipeline 1x128 vs 1x32; docs/benchmarks.md). A quiet
# worker pays nothing for them: one waiter parks, whatever the count.
CONCURRENCY_DEFAULT: Final = 128
CONCURRENCY_MAX: Final = 1024

# An idle pool: its one waiter blocks on the wake list this long per BLPOP (a wake token ends
# it at once, so this is no latency; each timeout costs a BLPOP and a safety claim), and its
# reap/promote/retention pass runs every MAINTENANCE_INTERVAL_S while it works, stretched
# MAINTENANCE_IDLE_FACTOR times while it has had nothing to do (a dead worker's leases are
# reaped at most that much later; this pool's own retries are promoted when due regardless).
PARK_TIMEOUT_S_DEFAULT: Final = 5.0
# Expired leases reaped, due retries promoted, per script call of the maintenance pass.
MAINTENANCE_BATCH_DEFAULT: Final = 1000
MAINTENANCE_BATCH_MAX: Final = 100_000
# A job's attempts when its enqueuer names none (a guess names GUESS_MAX_ATTEMPTS).
JOB_MAX_ATTEMPTS_DEFAULT: Final = 5
# A pool's claim round (ack_wclaims) serves at most this many consumers' requests; the rest go
# in the next round.
CLAIM_ROUND_MAX: Final = 256
MAINTENANCE_INTERVAL_S_DEFAULT: Final = 2.0
MAINTENANCE_IDLE_FACTOR: Final = 5

# --- the game -------------------------------------------------------------------------------

LENGTH_MIN: Final = 3
LENGTH_MAX: Final = 6
LENGTH_DEFAULT: Final = 4
PALETTE_MIN: Final = 4
PALETTE_MAX: Final = 10
PALETTE_SIZE_DEFAULT: Final = 6

ROUND_TIMEOUT_S_MIN: Final = 30
ROUND_TIMEOUT_S_MAX: Final = 7 * 24 * 3600
ROUND_TIMEOUT_S_DEFAULT: Final = 600
# A guess counts as in time when the bot took it before the round's deadline, however late it is
# scored (a paused room, an outage, a flood's wait). So the round timer keeps a round open past
# its deadline while guesses taken before it still wait in the lanes, for at most
# ROUND_HOLD_S_MAX (a room paused longer, or a dead worker fleet, cannot hold a round for ever:
# after that the round ends and those guesses are too late), looking again every
# ROUND_HOLD_RECHECK_S.
ROUND_HOLD_S_MAX: Final = 600
ROUND_HOLD_RECHECK_S: Final = 1.0

# Tap to guess: a player's taps on round keyboards, at most TAP_RATE_MAX per TAP_RATE_WINDOW_MS
# (in every chat together); past that a tap is refused with a toast and changes nothing. A
# thumb taps four or five times a second; the limit stops scripted hammering of the bot.
TAP_RATE_MAX: Final = 8
TAP_RATE_WINDOW_MS: Final = 2_000
# Emoji buttons per row of a round's keyboard (Telegram allows 8; 5 fit a phone's width).
TAP_ROW_MAX: Final = 5

# --- the bot --------------------------------------------------------------------------------

# How long a chat's administrator list is trusted before Telegram is asked again.
ADMIN_CACHE_TTL_S_DEFAULT: Final = 300.0
# At most this long: a demoted admin keeps acting until then where the bot is not an admin
# itself (Telegram sends chat_member updates only to bots that are; docs/game.md).
ADMIN_CACHE_TTL_S_MAX: Final = 600.0
# Updates handled at once (in order per sender). A guess needs no database connection and is
# enqueued with the others of its event-loop turn in one script call: more at once means
# bigger batches (bench/ingest.py: 64 took in about a fifth more than 16). 128 takes in 4-11 %
# more again when the bot has its own cores, but beside a worker on two shared cores it takes
# them from the worker: 1,347-1,465 guesses/s end to end against 1,655-1,721 at 64
# (docs/benchmarks.md, "The front door"). Those runs had python-telegram-bot's Updater, whose
# queue had no bound. Now the bot holds at most BOT_IN_HAND (100) updates, and the guesses of
# one turn finish together: at 64, only the other 36 are in hand while the next are fetched.
# At half the window one half is handled while the other is fetched: side by side with that
# code at its 64 (bench.ingest, bot alone, 6,000 guesses, on a 2-core host loaded by other
# sessions, so indicative only), 1.47x and 1.14x its guesses/s at 50 against 0.72x and 0.86x
# at 64 (48: 1.18x, both at 48); bot + worker, once: 990 against 379 guesses/s. A bot on a
# host of its own may take more (CODEMOJEX_BOT_CONCURRENCY), up to the window.
BOT_CONCURRENCY_DEFAULT: Final = 50
# Database connections a process keeps open (db/engine.py), DB_POOL_OVERFLOW more for a
# burst: what needs one queues for it rather than opening and closing connections as it goes
# (SQLAlchemy's default of 5 churned under the sender's 32 chats in hand and the bot's
# concurrent updates: asyncpg.connect and SSL set-up showed in their profiles). The bot keeps
# as many as it handles updates at once, up to this. Several processes share Postgres's
# max_connections (100 by default): 2 bots and 3 workers keep at most 100.
DB_POOL_SIZE: Final = 16
DB_POOL_OVERFLOW: Final = 4
# A pooled database connection is replaced after this long (none is pinged before use).
DB_POOL_RECYCLE_S: Final = 600

# A room's card in Redis (what taking a guess needs: the open round, the players' ids, the
# bans; posting/cards.py) lives this long after it was last written from the database, then
# is read from it again: whatever a process that died between a commit and the card's write
# left stale is gone by then. Every round a bot opens writes it anew.
CARD_TTL_S: Final = 3600

# Rooms whose card a bot process remembers (bot/cards.py, a hint the enqueue checks; a room
# forgotten costs one Redis read on its next guess), and 16 times as many players' seats.
CARD_CACHE_ROOMS: Final = 100_000

# How long the bot's own answer may wait for a posting slot before it is dropped: it waits
# outside the update's handling (bot/replies.py), so this bounds staleness, not a slot.
REPLY_WAIT_S_DEFAULT: Final = 3.0

# Every answer of the bot (to a command, a refused guess or admin command, a "slow down")
# spends one of its member's answer budget in that chat: ANSWER_BUDGET answers, refilled
# evenly over ANSWER_BUDGET_WINDOW_S (one every 15 s). Past it the member is told once to
# slow down and then gets no answer, and leaves no audit row, until the budget is whole again
# (a minute after the last answer). Kept in Redis, so every bot process spends the same budget.
ANSWER_BUDGET_DEFAULT: Final = 4
ANSWER_BUDGET_MAX: Final = 1000
ANSWER_BUDGET_WINDOW_S: Final = 60
# The worker's "too late" lines spend the same budget (their member's, in their chat), asked
# inside the transaction that records them: Redis is given this long, then the lines are
# posted as while Redis is out, rather than holding the rounds' locks longer.
LATE_BUDGET_WAIT_S: Final = 0.5

# PTB's own bound in the update processor (bot/processor.py): set out of the way; what the
# bot holds is bounded before it (BOT_IN_HAND), what runs at once after the sender's lock
# (BOT_CONCURRENCY).
BOT_UPDATE_BACKLOG: Final = 100_000
# Updates the bot holds at most: fetched (polling) or received (webhook) and not yet confirmed
# to Telegram, which happens only once their handlers finished (bot/polling.py, webhook.py).
# Whatever waits beyond them waits at Telegram, so the bot's memory does not grow with a
# backlog. A polling bot confirms in order, so the bound is a window of update ids after the
# first unfinished one, and getUpdates returns at most 100 updates from there: 100 is the
# most a window can ever hold, and setWebhook's max_connections (1-100) is the same number.
# 100, the most, by default: the window must stay wider than BOT_CONCURRENCY (64), or a slow
# update at its front idles the slots while the fetched ones wait for it. A smoke run of
# bench.ingest (bot alone, 6,000 guesses, twice at each bound, at 64 at once, on a loaded
# 2-core host where python-telegram-bot alone varied 2-3x between runs) showed nothing that
# favours a narrower window: as a share of PTB alone with one script call per update in the
# same run, 0.86 and 0.97 at 100, 0.26 and 0.94 at 50. Indicative only: `bench.ingest
# --bot-in-hand N` on a quiet host decides; bench/backlog.py measures memory and the drain.
BOT_IN_HAND_DEFAULT: Final = 100
BOT_IN_HAND_MAX: Final = 100
# A polling bot's long poll (getUpdates' timeout; a webhook bot has none), and the read timeout
# it allows on top for the answer to travel.
BOT_POLL_TIMEOUT_S: Final = 10
BOT_POLL_READ_MARGIN_S: Final = 5.0
# SIGTERM: the bot stops taking updates and finishes those in hand within this long, then
# confirms exactly those that finished (the rest come again from Telegram). Under the 20 s
# that systemd (TimeoutStopSec) and Kubernetes (terminationGracePeriodSeconds) give the
# process in deploy/, with room to close its clients.
BOT_STOP_S: Final = 12.0
# A webhook request past BOT_IN_HAND is answered 503 with this Retry-After: Telegram's Bot API
# server delays that update, and the rest of its chat, by so many seconds (bot/webhook.py).
WEBHOOK_BUSY_RETRY_AFTER_S: Final = 1
# A "slow down" or "scoring is paused" notice is given once per this long per player
# (posting/flags.py: an episode is the time its flag lives).
NOTICE_EPISODE_S: Final = 60
# A room's card read from the database and written again at most this many times when it
# changes under the write (posting/cards.py `reload`; then CardBusy).
CARD_RELOAD_TRIES: Final = 3

# --- posting pace ---------------------------------------------------------------------------

# Telegram's published limits (settings CODEMOJEX_PACE_*). A group's minute is spread evenly:
# one post per 60/PACE_GROUP_PER_MIN seconds, with a burst of PACE_GROUP_BURST for a room that
# was quiet (a GCRA), and never more than PACE_GROUP_PER_MIN in any sliding minute.
PACE_CHAT_PER_S: Final = 1
PACE_GROUP_PER_MIN: Final = 20
PACE_BOT_PER_S: Final = 30
PACE_GROUP_BURST: Final = 3
# Of a group's minute, the results (the sender) spread PACE_GROUP_PER_MIN - this evenly, so a
# room whose results fill their share still has a post a minute for a refusal or a "slow down".
PACE_ANSWER_RESERVE: Final = 1
# The bot's own answers get what the results leave of every limit they share, never all of it,
# so that whatever a chat's members send, the results keep a share nobody else can use:
# - a group's minute: answers take at most this percentage of it (5 of 20), and beyond their
#   reserve only while the minute holds fewer than the rest (15): those are the results';
# - the bot's second: answers take at most this percentage of it (6 of 30), and only while it
#   holds fewer than the rest (24), so spammers in many chats take nothing from the results;
# - a chat's second: two answers to one chat are PACE_ANSWER_GAP of its intervals apart, so an
#   answer never takes two of a chat's seconds in a row and a result waiting for the chat gets
#   the one between.
PACE_ANSWER_GROUP_PCT: Final = 25
PACE_ANSWER_BOT_PCT: Final = 20
PACE_ANSWER_GAP: Final = 2
# Added to a chat's second and a group's minute for the time a request spends on the wire. The
# bot's second needs none: a grant counts as "now" there until its post is answered, or at
# most PACE_FLIGHT_MS (longer than any post: the Bot API client's timeouts are 10 s).
PACE_MARGIN_MS: Final = 100
PACE_FLIGHT_MS: Final = 12_000
PACE_RATE_MAX: Final = 1000

# The sender (posting/sender/): chats one sender holds at once (each waits for its pace or
# posts; the rest wait their turn in the posting ring), how often it looks at the ring when it
# has heard nothing (the processes that write outbox rows add their chats to the ring and wake
# their own sender at once), and how often it scans the outbox for rows a dead process never
# added (the only periodic SQL of an idle sender).
SENDER_HOLD_DEFAULT: Final = 32
SENDER_PEEK_S: Final = 1.0
SENDER_RECONCILE_S: Final = 60.0
# A chat's lease (renewed before every post: the fence) and its rows' claim in the database; a
# post is bounded by SENDER_POST_TIMEOUT_S, well inside both (the sender refuses otherwise), and
# a slot is never waited for past half the claim. A turn claims at most SENDER_CLAIM_LIMIT rows.
SENDER_CHAT_LEASE_MS: Final = 20_000
SENDER_CLAIM_LEASE_S: Final = 20.0
SENDER_CLAIM_LIMIT: Final = 200
SENDER_POST_TIMEOUT_S: Final = 8.0
# A chat whose own pace frees it within this long waits in hand; a longer wait goes back to the
# ring (a turn costs a few round trips; a sleep this short costs less).
SENDER_SHORT_WAIT_MS: Final = 50
# A delivery marker (posting/sender/delivery.py) outlives any plausible outage between a post
# and its mark_sent: it is deleted as soon as mark_sent succeeded; only the markers of a crash
# or an outage wait for this.
SENDER_MARKER_TTL_S: Final = 7 * 24 * 3600
# After a post failed in a way that is no 429 (network, an error answer), the chat waits this
# long plus up to as long again at random before its next post.
SENDER_FAILED_POST_PAUSE_MS: Final = 1000
# A chat's turn that failed (a bug, or an outage mid-turn) gives the chat back after this long.
SENDER_TURN_FAILED_PAUSE_S: Final = 1.0

# The worker's Bot API client (worker/botapi.py): PTB's default HTTP pool has ONE connection
# and a 1 s pool timeout, which turns a busy sender's concurrent posts into spurious TimedOut
# errors; the sender posts to many chats at once, so it gets a pool.
BOTAPI_CONNECTIONS: Final = 32
BOTAPI_POOL_TIMEOUT_S: Final = 10.0
BOTAPI_CONNECT_TIMEOUT_S: Final = 5.0
BOTAPI_READ_TIMEOUT_S: Final = 10.0
BOTAPI_WRITE_TIMEOUT_S: Final = 10.0

# --- retries --------------------------------------------------------------------------------

# The shared backoff (outages.backoff_ms): full jitter over base * 2^(attempt-1), capped.
BACKOFF_BASE_MS: Final = 500
BACKOFF_CAP_MS: Final = 30_000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How `outages.retrying` waits out an outage. The pause before attempt n+1 is
    base_s * 2^(n-1), capped at cap_s; with `jitter`, uniform in [0, that] (full jitter: many
    waiters that failed together do not come back together), and at least floor_s. After
    `give_up_s` of failures it stops (None: it goes on until its caller stops it)."""

    name: str  # the label of codemojex_retries_total
    base_s: float
    cap_s: float
    give_up_s: float | None = None
    jitter: bool = False
    floor_s: float = 0.0


# The score worker's flush: a short database outage is waited out with the batch in hand (the
# pool's heartbeat keeps its lease), then the batch goes back to its lane (Retry) with the
# shared backoff. The sender's mark_sent insists until the sender stops (the delivery markers
# keep the rows from being posted again meanwhile).
SCORE_HOLD_S: Final = 5.0
RECORD_RETRY: Final = RetryPolicy("record_guesses", base_s=0.1, cap_s=2.0, give_up_s=SCORE_HOLD_S)
MARK_SENT_RETRY: Final = RetryPolicy("mark_sent", base_s=0.2, cap_s=5.0)
# What runs on a schedule (the outbox scan, the round timer) or once at start (the schema
# check) and failed: again soon with the shared backoff, never sooner than floor_s.
OUTBOX_SCAN_RETRY: Final = RetryPolicy(
    "outbox_scan", BACKOFF_BASE_MS / 1000, BACKOFF_CAP_MS / 1000, jitter=True, floor_s=0.2
)
ROUND_TIMER_RETRY: Final = RetryPolicy(
    "round_timer", BACKOFF_BASE_MS / 1000, BACKOFF_CAP_MS / 1000, jitter=True, floor_s=0.2
)
SCHEMA_CHECK_RETRY: Final = RetryPolicy(
    "schema_check", BACKOFF_BASE_MS / 1000, BACKOFF_CAP_MS / 1000, jitter=True, floor_s=0.2
)
# A polling bot's getUpdates that failed (Telegram out, a Conflict with another poller): asked
# again after this, never in a hot loop.
POLL_RETRY: Final = RetryPolicy(
    "get_updates", BACKOFF_BASE_MS / 1000, BACKOFF_CAP_MS / 1000, jitter=True, floor_s=0.2
)
# The bot's probe of a component it saw out (its next update may not touch it), until it answers.
OUTAGE_PROBE_RETRY: Final = RetryPolicy(
    "outage_probe", BACKOFF_BASE_MS / 1000, BACKOFF_CAP_MS / 1000, jitter=True, floor_s=0.2
)
# Guesses the score worker records in one transaction at most (group commit).
SCORE_FLUSH_MAX: Final = 512

# --- retention: what the lanes would otherwise keep forever ----------------------------------

# Dead-lettered jobs are kept for a look at what failed, then go with their hashes: at most
# this many (the oldest beyond go first) and none older than this. 0 keeps none.
DEAD_MAX_DEFAULT: Final = 10_000
DEAD_MAX_MAX: Final = 10_000_000
DEAD_AGE_MS_DEFAULT: Final = 7 * 24 * 3600 * 1000

# A lane (a player's seat in a room) with no job pending, in flight or delayed, and no new job
# for this long, is forgotten by the lanes; the player's next guess makes it a new lane.
LANE_IDLE_MS_DEFAULT: Final = 7 * 24 * 3600 * 1000
RETENTION_MS_MAX: Final = 10 * 365 * 24 * 3600 * 1000
# A lane due to be forgotten that still holds work (or whose room has guesses in flight, which
# may be its own) is looked at again after this long.
LANE_RECHECK_MS: Final = 60_000

# A daily board's rebuild holds its lock at most this long (a process that died mid-rebuild is
# replaced; posting/board.py).
BOARD_REBUILD_LOCK_MS: Final = 120_000

# --- boards (H14a) ---------------------------------------------------------------------------

# /top and /top week show this many players, best first.
LEADERBOARD_ROWS: Final = 10


# --- the daily code (codemojex/game/daily.py) -------------------------------------------------

# One code for the whole world each UTC day: its length, the palette it is drawn from (drawn
# afresh each day), and the attempts a player has (Wordle's six, plus two for the emojis that
# may repeat).
DAILY_LENGTH: Final = 4
DAILY_PALETTE_SIZE: Final = 6
DAILY_ATTEMPTS: Final = 8
# A player's daily rows (their result, their daily round and its guesses) are kept this many
# days, then trimmed by the workers (worker/retention.py), a bounded batch at a time. The day's
# puzzle row (one a day) and each player's streak and histogram are kept.
DAILY_KEEP_DAYS_DEFAULT: Final = 30
DAILY_KEEP_DAYS_MAX: Final = 3650
DAILY_TRIM_BATCH: Final = 1000
# The world board (a sorted set per day in Redis) and its companions expire this long after
# their day began: yesterday's stays readable for a while after midnight.
DAILY_BOARD_TTL_S: Final = 3 * 24 * 3600
# Finishers and starters read from Postgres per round trip when a lost board is rebuilt.
DAILY_REBUILD_CHUNK: Final = 5000
# /top daily shows this many; /daily in a group at most this many of its members.
DAILY_TOP_ROWS: Final = 10
DAILY_GROUP_ROWS: Final = 20
# A group's members as the bot saw them (a command, a tap, a join: posting/members.py; its
# players are known from their rows): at most GROUP_MEMBERS_MAX a group, the most recently
# seen, each forgotten GROUP_MEMBERS_TTL_S after it was last seen (and the group's set with
# its last one). 128 keeps the set in Redis's compact encoding (zset-max-listpack-entries):
# about 2 kB a group.
GROUP_MEMBERS_MAX: Final = 128
GROUP_MEMBERS_TTL_S: Final = 30 * 24 * 3600
# Telegram may cache an inline answer this long (per user: each card is personal): an
# invitation (not finished: it may be a card any moment), and a card (the same until the next
# code; no longer than that).
DAILY_INLINE_CACHE_S: Final = 5
DAILY_INLINE_CARD_CACHE_S: Final = 300
# The inline queries of one user answered per window (the Share button's; in every chat
# together): past that they are ignored until the window ends (an inline query needs no answer).
# Telegram asks again only as the text in the box changes, and keeps an answer for its
# cache_time: a person stays well under this; a script flooding the bot is cut to it before any
# database read.
INLINE_RATE_MAX: Final = 10
INLINE_RATE_WINDOW_MS: Final = 10_000
# The days' puzzles whose emojis a process keeps split (every /daily reads the day's puzzle;
# splitting its emojis anew each time costs more than the read).
DAILY_PUZZLES_SPLIT: Final = 4


# --- hardening: webhook, audit retention ----------------------------------------------------

# The webhook's secret header: Telegram allows 1-256 of A-Z a-z 0-9 _ -; we start only with 32
# or more (a guessable secret lets anyone inject updates as any user, admins included).
WEBHOOK_SECRET_MIN: Final = 32
WEBHOOK_SECRET_MAX: Final = 256
# Bodies over this are refused before they are read. An update is a few KB (a message is at
# most 4,096 characters, with the message it replies to); 2 MiB leaves room for any of them.
WEBHOOK_BODY_MAX: Final = 2 * 1024 * 1024

# Audit rows are kept this long, then deleted by the workers' round timer, a bounded batch at a
# time: a full batch is followed by the next one on the next tick, otherwise the next look is
# AUDIT_TRIM_EVERY_S later.
AUDIT_KEEP_DAYS_DEFAULT: Final = 90
AUDIT_KEEP_DAYS_MAX: Final = 3650
AUDIT_TRIM_BATCH: Final = 1000
AUDIT_TRIM_EVERY_S: Final = 60.0


# --- operators: metrics, health, the ops page (codemojex/ops) --------------------------------

# Per-room series only for the rooms with the deepest queues: cardinality stays bounded.
METRICS_TOP_ROOMS_DEFAULT: Final = 20
METRICS_TOP_ROOMS_MAX: Final = 1000
# The queue's numbers are read once per this long per process, however often it is scraped.
METRICS_CACHE_S: Final = 1.0
# Every process publishes its counters for the ops page this often; a process silent for
# FLEET_STALE_S is taken for gone.
FLEET_PUBLISH_S: Final = 5.0
FLEET_STALE_S: Final = 30.0
# The ops page's charts: one sample every OPS_SAMPLE_S, OPS_HISTORY_S of them kept in memory.
OPS_SAMPLE_S: Final = 5.0
OPS_HISTORY_S: Final = 15 * 60
# Rows of the ops page's tables per page (a bounded page: never a scan of every room).
OPS_PAGE_ROWS: Final = 25
# An ops session (the login cookie) lasts this long at most, and ends after OPS_SESSION_IDLE_S
# without a request (an open page refreshes itself every few seconds, so only a closed tab or a
# sleeping laptop idles); at most OPS_SESSIONS_MAX live at once (the oldest is ended first).
OPS_SESSION_S: Final = 12 * 3600
OPS_SESSION_IDLE_S: Final = 30 * 60
OPS_SESSIONS_MAX: Final = 64
# CODEMOJEX_OPS_TOKEN: at least this long (as the webhook secret), and no known placeholder.
OPS_TOKEN_MIN: Final = 32
# Login tries (ops/page/auth.py says why one budget refuses and the other only slows). Each
# client address (an IPv6 client by its /64) has OPS_LOGIN_BURST_ADDR tries, then one every
# OPS_LOGIN_REFILL_ADDR_S, taken before the token is compared (a right token gives its try
# back); past them, 429 without comparing. The whole page answers OPS_LOGIN_BURST wrong tokens
# after OPS_LOGIN_FAIL_DELAY_S, then one every OPS_LOGIN_REFILL_S; past that (a swarm of
# addresses) a wrong token waits OPS_LOGIN_SLOW_DELAY_S for its answer. A right token never
# waits and is never refused by the page's budget.
OPS_LOGIN_BURST_ADDR: Final = 10
OPS_LOGIN_REFILL_ADDR_S: Final = 6.0
OPS_LOGIN_BURST: Final = 40
OPS_LOGIN_REFILL_S: Final = 3.0
# Client addresses remembered for their login budget (the least recently seen forgotten first).
OPS_LOGIN_ADDRS_MAX: Final = 10_000
OPS_LOGIN_FAIL_DELAY_S: Final = 0.5
OPS_LOGIN_SLOW_DELAY_S: Final = 5.0
# Wrong answers held at once (each an open request in memory); past that, answered at once.
OPS_LOGIN_HELD_MAX: Final = 1_000
# The page's query parameters: offsets into a table (rooms, dead guesses) at most this, a title
# cursor at most OPS_CURSOR_MAX characters.
OPS_OFFSET_MAX: Final = 10_000_000
OPS_CURSOR_MAX: Final = 512
