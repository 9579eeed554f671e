"""Configuration from the environment (prefix CODEMOJEX_), read when asked, never at import.

A file named `.env` in the working directory is read too (variables set in the environment
win over it): `codemojex` started from a directory holding someone else's `.env` takes its
settings, token included. Run it from a directory of its own (systemd starts the units in
deploy/ in /, with EnvironmentFile=).

A setting's default and range are its owner's, where that part says why (`lanes/facade.py`
`DEAD_MAX` and the bound type `DeadMax`, which the owner checks its callers against too);
values several parts share come from codemojex/limits.py. No number is written here but a
port's.

Settings flow down: only the composition roots (cli.py, the demo) read them, and hand each
part its own config (`bot()`, `worker()`, `runtime()`, `metrics()`, `ops_page()`,
`bot_api()`, `pace()`), made of plain values; no module below names `Settings`
(tests/test_structure.py)."""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Network, IPv6Network
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from codemojex import logformat
from codemojex.bot import admin, door
from codemojex.bot.context import BotConfig
from codemojex.db import engine
from codemojex.lanes import admission, consumer, facade
from codemojex.limits import (
    ROOM,
    TELEGRAM,
)
from codemojex.ops import collect
from codemojex.ops.page.main import OpsPageConfig
from codemojex.ops.server import MetricsConfig
from codemojex.posting import pace_policy
from codemojex.posting.keys import bot_id
from codemojex.posting.pace_policy import PacePolicy
from codemojex.runtime import RuntimeConfig
from codemojex.state import budget
from codemojex.values.botapi import BotApi
from codemojex.values.hosts import Port, is_loopback
from codemojex.worker import retention
from codemojex.worker.service import WorkerConfig


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CODEMOJEX_", env_file=".env", extra="ignore")

    # Telegram
    token: SecretStr | None = None
    bot_api_base_url: str = "https://api.telegram.org/bot"
    bot_api_base_file_url: str = "https://api.telegram.org/file/bot"
    operator_ids: Annotated[list[int], NoDecode] = Field(default_factory=list)
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: Port = 8443

    # Storage. No Redis URL means the in-process stand-in (demo only: one process).
    redis_url: str | None = None
    # The URL names one node of a Redis Cluster (any node: the client discovers the rest).
    redis_cluster: bool = False
    database_url: str = "sqlite+aiosqlite:///./codemojex.db"
    # Postgres connections each process keeps, and opens beyond them for a burst
    # (db/engine.py DB_POOL_SIZE says why; docs/operations.md, "Connections", the budget).
    db_pool_size: engine.PoolSize = engine.DB_POOL_SIZE
    db_pool_overflow: engine.PoolOverflow = engine.DB_POOL_OVERFLOW
    queue: str = "cm"

    # Worker: consumers per process (lanes/consumer.py CONCURRENCY says why), a claimed batch's
    # lease.
    concurrency: consumer.Concurrency = consumer.CONCURRENCY
    lease_ms: facade.LeaseMs = facade.LEASE_MS
    # A post the sender cannot tell went out (its answer was lost, or a sender died while
    # posting): "repost" (at least once: never lost, rarely twice) or "assume_sent" (at most
    # once: never twice, rarely lost).
    sender_ambiguous: Literal["repost", "assume_sent"] = "repost"
    # Telegram's posting limits, kept by every process together (the pace is in Redis):
    # messages a second per chat, a minute per group, a second for the whole bot.
    pace_chat_per_s: pace_policy.Rate = TELEGRAM.chat_per_s
    pace_group_per_min: pace_policy.Rate = TELEGRAM.group_per_min
    pace_bot_per_s: pace_policy.Rate = TELEGRAM.bot_per_s
    # The bot's rate is learned from Telegram's 429s (posting/pacer.py), starting at
    # pace_bot_per_s, never below the floor nor above the ceiling (equal: a fixed rate).
    pace_bot_floor_per_s: pace_policy.Rate = pace_policy.BOT_FLOOR_PER_S
    pace_bot_ceiling_per_s: pace_policy.Rate = pace_policy.BOT_CEILING_PER_S

    # Lanes retention: dead jobs kept (count and age), how long an empty lane is remembered.
    lanes_dead_max: facade.DeadMax = facade.DEAD_MAX
    lanes_dead_age_ms: facade.RetentionMs = facade.DEAD_AGE_MS
    lanes_idle_ms: facade.RetentionMs = facade.IDLE_MS
    # How long an update handled is remembered in Redis (facade.DEDUPE_WINDOW_S says why
    # minutes are enough): dedupe keys, callback queries and commands seen.
    dedupe_window_s: facade.DedupeWindowS = facade.DEDUPE_WINDOW_S

    # Game defaults for new rooms
    default_ceiling: int = Field(
        default=ROOM.ceiling_default, ge=ROOM.ceiling_min, le=ROOM.ceiling_max
    )
    round_timeout_s: int = Field(
        default=ROOM.round_timeout_s_default,
        ge=ROOM.round_timeout_s_min,
        le=ROOM.round_timeout_s_max,
    )

    # Bot: guesses a player may have waiting before "slow down"; how long admin lists are cached
    max_depth: admission.Depth = admission.DEPTH
    # The bot's answers one member gets in one chat per budget.WINDOW_S
    answer_budget: budget.Budget = budget.BUDGET
    admin_cache_ttl_s: admin.TtlS = admin.TTL_S
    # Updates handled at once (in order per sender); guesses need no database connection
    bot_concurrency: door.Concurrency = door.CONCURRENCY
    # Updates the bot holds unconfirmed at most (polling: its window; webhook: requests in
    # hand, and setWebhook's max_connections); the rest wait at Telegram
    bot_in_hand: door.InHand = door.IN_HAND
    # An update not finished this long after the bot took it is parked in Redis and confirmed
    # (bot/door.py): what one stuck update costs every other chat, at most
    bot_update_deadline_s: door.DeadlineS = door.DEADLINE_S

    # Log lines: text, or one JSON object per line with the same fields (logformat.py)
    log_format: logformat.Format = logformat.FORMAT

    # Operators (codemojex/ops): /metrics, /healthz and /readyz of this process on
    # metrics_host:metrics_port (off without a port; give each process its own); per-room
    # series for the deepest rooms only. `codemojex ops` serves the operator page on
    # ops_host:ops_port to whoever has ops_token (it refuses to start without one).
    metrics_port: Port | None = None
    metrics_host: str = "127.0.0.1"
    metrics_top_rooms: collect.TopRooms = collect.TOP_ROOMS
    ops_port: Port = 8080
    ops_host: str = "127.0.0.1"
    ops_token: SecretStr | None = None
    # The TLS proxies in front of the ops page (addresses or networks, comma or space
    # separated): what they forward (X-Forwarded-For/-Proto, Forwarded) is believed, so the
    # session cookie is Secure behind them; from anyone else those headers are ignored.
    ops_trusted_proxies: Annotated[list[IPv4Network | IPv6Network], NoDecode] = Field(
        default_factory=list
    )
    # The page speaks plain http. On an address other than loopback it starts only behind a
    # trusted proxy, or when this says the operator accepts the token and the cookie crossing
    # that network in clear (a network that is theirs alone).
    ops_plain_http_ok: bool = False

    # Hardening: how long the audit log of admin commands is kept (the workers trim it)
    audit_keep_days: retention.KeepDays = retention.AUDIT_KEEP_DAYS

    # The daily code: how long players' daily rows are kept (the workers trim them), and
    # whether inline mode is switched on for the bot (BotFather: /setinline). Only then does
    # a daily card carry a Share button: without inline mode Telegram never sends the bot
    # the query the button starts, so the button would share nothing.
    daily_keep_days: retention.KeepDays = retention.DAILY_KEEP_DAYS
    inline_mode: bool = False

    @field_validator("bot_api_base_url", "bot_api_base_file_url")
    @classmethod
    def _https_unless_loopback(cls, value: str) -> str:
        """The token travels in every Bot API URL: over https, or plain http to this machine
        only (a Bot API server of your own on loopback, the stand-in)."""
        parts = urlsplit(value)
        if parts.scheme == "https" and parts.hostname:
            return value
        if parts.scheme == "http" and is_loopback(parts.hostname):
            return value
        raise ValueError(
            "the Bot API URL must be https:// (plain http:// only to 127.0.0.1, ::1 or "
            "localhost): the bot's token is part of every request"
        )

    @field_validator("ops_trusted_proxies", mode="before")
    @classmethod
    def _split_networks(cls, value: object) -> object:
        if isinstance(value, str):
            return [
                ipaddress.ip_network(part, strict=False) for part in value.replace(",", " ").split()
            ]
        return value

    @field_validator("operator_ids", mode="before")
    @classmethod
    def _split_ids(cls, value: object) -> object:
        if isinstance(value, str):
            return [int(part) for part in value.replace(",", " ").split()]
        if isinstance(value, int):
            return [value]
        return value

    # What each part is built from: its own config, the settings of its fields' names.

    def runtime(self) -> RuntimeConfig:
        return RuntimeConfig(
            database_url=self.database_url,
            queue=self.queue,
            redis_url=self.redis_url,
            redis_cluster=self.redis_cluster,
            concurrency=self.concurrency,
            lanes_dead_max=self.lanes_dead_max,
            lanes_dead_age_ms=self.lanes_dead_age_ms,
            lanes_idle_ms=self.lanes_idle_ms,
            dedupe_window_s=self.dedupe_window_s,
            db_pool_size=self.db_pool_size,
            db_pool_overflow=self.db_pool_overflow,
        )

    def pace(self, *, answers: bool = False) -> PacePolicy:
        """The results' pace, or the bot's own answers' (`answers`)."""
        return PacePolicy.from_rates(
            self.pace_chat_per_s,
            self.pace_group_per_min,
            self.pace_bot_per_s,
            answers=answers,
            bot_floor=self.pace_bot_floor_per_s,
            bot_ceiling=self.pace_bot_ceiling_per_s,
        )

    def bot_api(self) -> BotApi:
        return BotApi(self.token, self.bot_api_base_url, self.bot_api_base_file_url)

    def bot(self) -> BotConfig:
        return BotConfig(
            api=self.bot_api(),
            operator_ids=tuple(self.operator_ids),
            webhook_url=self.webhook_url,
            webhook_secret=self.webhook_secret,
            webhook_listen=self.webhook_listen,
            webhook_port=self.webhook_port,
            inline_mode=self.inline_mode,
            pace=self.pace(answers=True),
            default_ceiling=self.default_ceiling,
            round_timeout_s=self.round_timeout_s,
            max_depth=self.max_depth,
            answer_budget=self.answer_budget,
            admin_cache_ttl_s=self.admin_cache_ttl_s,
            bot_concurrency=self.bot_concurrency,
            bot_in_hand=self.bot_in_hand,
            bot_update_deadline_s=self.bot_update_deadline_s,
            dedupe_window_s=self.dedupe_window_s,
        )

    def worker(self) -> WorkerConfig:
        return WorkerConfig(
            queue=self.queue,
            pace=self.pace(),
            sender_ambiguous=self.sender_ambiguous,
            inline_mode=self.inline_mode,
            answer_budget=self.answer_budget,
            concurrency=self.concurrency,
            lease_ms=self.lease_ms,
            audit_keep_days=self.audit_keep_days,
            daily_keep_days=self.daily_keep_days,
        )

    def metrics(self) -> MetricsConfig:
        return MetricsConfig(
            port=self.metrics_port,
            host=self.metrics_host,
            top_rooms=self.metrics_top_rooms,
            bot=bot_id(self.token),
        )

    def ops_page(self) -> OpsPageConfig:
        return OpsPageConfig(
            host=self.ops_host,
            port=self.ops_port,
            token=self.ops_token,
            trusted_proxies=tuple(self.ops_trusted_proxies),
            plain_http_ok=self.ops_plain_http_ok,
            bot=bot_id(self.token),
        )


def load_settings() -> Settings:
    return Settings()
