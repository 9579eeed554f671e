"""The update queue and the two ways the bot fetches it: getUpdates long polls and a webhook.

Updates wait in one queue, in id order, until the bot confirms them, as on Telegram:

- getUpdates returns the updates from its offset on, and an offset confirms every update
  below it; whatever was returned and not confirmed is returned again by the next call (a
  bot that died before confirming gets it again after its restart).
- the webhook gets each update POSTed until it answers 2xx; any other answer, a refused or
  dropped connection or a timeout, and the update is sent again later (after the answer's
  Retry-After when it gives one, else at once the first time and then after a doubling
  backoff, scaled down from Telegram's seconds). As Telegram's Bot API server does
  (tdlib/telegram-bot-api, WebhookActor), at most `max_connections` updates are in flight,
  one at a time per chat (a chat's next update waits for its current one, so a retried update
  holds back its chat and the order is kept), picked from the first 2 x max_connections
  updates waiting.

`allowed_updates` is one setting per bot, shared by both ways; once the bot has stated it,
updates of kinds it did not ask for are not even stored.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import re
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from codemojex.standin.model import JSON, SECRET_HEADER, ApiError, Params, bad

# Telegram's default when allowed_updates was never given: everything but these.
_NOT_BY_DEFAULT = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
_MAX_CONNECTIONS = 100  # setWebhook's max_connections: 1-100
_ACKED_MAX = 1000
_RETRY_AFTER_MAX_S = 3600.0  # the longest Retry-After the Bot API server honours
# The webhook's retry of a failed update: at once the first time, then this doubling, capped
# (Telegram: 2 s doubling to a minute or two; scaled down for tests).
_RESEND_BASE_S = 0.05
_RESEND_CAP_S = 2.0


class Updates:
    """StandIn's update queue, getUpdates and webhook (a mixin: StandIn inherits every area)."""

    def __init__(self) -> None:
        super().__init__()
        self._updates: list[JSON] = []
        self._next_update_id = 100_000_001
        # One allowed_updates setting per bot, shared by getUpdates and setWebhook. Until the
        # bot first states it, updates of every kind are kept (it may ask for them).
        self._allowed: frozenset[str] | None = None
        self._allowed_stated = False
        self._raw_ids: set[int] = set()  # push_raw_update: delivered whatever their kind
        self._poll_generation = 0
        self._updates_changed = asyncio.Event()
        self._closing = False

        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self._webhook_max_connections = 40
        self._webhook_last_error: tuple[int, str] | None = None
        self._webhook_task: asyncio.Task[None] | None = None
        self._client: aiohttp.ClientSession | None = None
        # Updates the webhook answered 2xx for, still in `_updates` until the confirmed ones
        # at its head are cut off together (a list's head is costly to cut one at a time).
        self._acked: set[int] = set()
        self.webhook_posts = 0  # POSTs made to the webhook (retries included)
        self.webhook_max_in_flight = 0  # the most updates in flight at once

    def _open_updates(self) -> None:
        """The client session webhook deliveries share (opened with the server). Telegram
        waits about a minute for a webhook's answer."""
        self._client = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=60),
            connector=aiohttp.TCPConnector(limit=_MAX_CONNECTIONS),
        )

    async def _close_updates(self) -> None:
        """End long polls and webhook delivery (the server is stopping)."""
        self._closing = True
        self._wake_pollers()
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._webhook_task
            self._webhook_task = None
        if self._client is not None:
            await self._client.close()
            self._client = None

    # ------------------------------------------------------------------ for tests

    def push_raw_update(self, update: Mapping[str, Any], *, keep_id: bool = False) -> int:
        """Queue any update JSON as is (fuzzing), whatever allowed_updates says; a fresh
        update_id unless keep_id."""
        data = dict(update)
        if not keep_id or "update_id" not in data:
            data.pop("update_id", None)
            update_id = self._enqueue(data, filtered=False)
            self._raw_ids.add(update_id)
            return update_id
        update_id = int(data["update_id"])
        self._raw_ids.add(update_id)
        # Later updates must still sort after this one, as ids only grow on Telegram.
        self._next_update_id = max(self._next_update_id, update_id + 1)
        self._updates.append(data)
        self._updates.sort(key=lambda u: int(u["update_id"]))
        self._wake_pollers()
        return update_id

    def restart_update_ids(self, first: int) -> None:
        """Start the update ids anew at `first`, as Telegram may after a week without
        updates (its next id is then random, possibly below the bot's offset). An offset from
        before, above every id of the new run, then confirms nothing (`_confirm`)."""
        if self._updates:
            raise ValueError("update ids restart only after the queue has been empty a while")
        self._next_update_id = first

    @property
    def pending_updates(self) -> int:
        """Updates queued and not yet confirmed by the bot (getUpdates offset or webhook 2xx)."""
        return len(self._updates) - len(self._acked)

    async def wait_until_delivered(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Wait until the bot has confirmed every queued update. What that means is the bot's
        to say: Codemojex's confirms an update once its handlers finished (PTB's own Updater
        confirms a batch once it is in its update queue, before it is handled)."""
        deadline = time.monotonic() + timeout
        while self.pending_updates:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.pending_updates} updates still pending")
            event = self._updates_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, 0.05))

    async def post_update_to_webhook(
        self, url: str, update: Mapping[str, Any], secret_token: str | None = None
    ) -> int:
        """POST one update to a webhook like Telegram does; returns the HTTP status."""
        data = dict(update)
        if "update_id" not in data:
            data["update_id"] = self._new_update_id()
        status, _ = await self._post_update(url, data, secret_token)
        return status

    async def _post_update(
        self, url: str, update: Mapping[str, Any], secret_token: str | None
    ) -> tuple[int, float | None]:
        """The HTTP status and the Retry-After (seconds, None if not given) of one POST."""
        headers = {"Content-Type": "application/json"}
        if secret_token is not None:
            headers[SECRET_HEADER] = secret_token
        client = self._client or aiohttp.ClientSession()
        try:
            async with client.post(url, data=json.dumps(update), headers=headers) as response:
                await response.read()
                retry_after = response.headers.get("Retry-After")
                try:
                    wait = None if retry_after is None else float(retry_after)
                except ValueError:
                    wait = None
                return response.status, wait
        finally:
            if client is not self._client:
                await client.close()

    # ------------------------------------------------------------------ the queue

    def _enqueue(self, body: JSON, *, filtered: bool = True) -> int:
        update_id = self._new_update_id()
        update = {"update_id": update_id, **body}
        # Telegram does not even store an update of a kind the bot did not ask for.
        if not filtered or not self._allowed_stated or self._wanted(update):
            self._updates.append(update)
            self._wake_pollers()
        return update_id

    def _state_allowed(self, allowed: Any) -> None:
        """The bot states allowed_updates (None = keep the previous setting, [] = default)."""
        self._forget_acked()
        stated = self._allowed if allowed is None else frozenset(allowed) or None
        # Bots state the same list on every poll: the queue is sifted only when the setting
        # changes, so a poll costs nothing per update waiting (a backlog of 200,000).
        if stated != self._allowed or not self._allowed_stated:
            self._allowed, self._allowed_stated = stated, True
            self._updates = [
                u for u in self._updates if self._wanted(u) or u["update_id"] in self._raw_ids
            ]

    def _new_update_id(self) -> int:
        update_id = self._next_update_id
        self._next_update_id += 1
        return update_id

    def _wake_pollers(self) -> None:
        event, self._updates_changed = self._updates_changed, asyncio.Event()
        event.set()

    @staticmethod
    def _kind(update: JSON) -> str:
        return next((key for key in update if key != "update_id"), "")

    def _wanted(self, update: JSON) -> bool:
        kind = self._kind(update)
        if self._allowed:
            return kind in self._allowed
        return kind not in _NOT_BY_DEFAULT

    def _confirm(self, offset: int) -> None:
        if offset < 0:
            keep = self._updates[offset:]
            if len(keep) != len(self._updates):
                self._updates = keep
                self._wake_pollers()
        elif offset > self._next_update_id:
            return  # an offset of an earlier run of ids (restart_update_ids): nothing to confirm
        elif offset > 0:
            # Updates are kept in id order, so the confirmed ones are a prefix.
            done = bisect.bisect_left(self._updates, offset, key=lambda u: int(u["update_id"]))
            if done:
                del self._updates[:done]
                self._wake_pollers()

    # ------------------------------------------------------------------ Bot API methods

    async def _get_updates(self, params: Params) -> Any:
        self._forget_acked()
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use "
                "deleteWebhook to delete the webhook first",
            )
        offset = params.get_int("offset") or 0
        limit = min(max(params.get_int("limit") or 100, 1), 100)
        timeout = max(0.0, params.get_float("timeout") or 0.0)
        self._state_allowed(params.get_str_list("allowed_updates"))
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake_pollers()  # a newer poll ends an older one with 409, as on Telegram
        self._confirm(offset)
        deadline = time.monotonic() + timeout
        while True:
            event = self._updates_changed
            if generation != self._poll_generation:
                raise ApiError(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one "
                    "bot instance is running",
                )
            ready = self._updates[:limit]
            remaining = deadline - time.monotonic()
            if ready or remaining <= 0 or self._closing:
                return ready
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    async def _set_webhook(self, params: Params) -> Any:
        url = params.get_str("url") or ""
        secret = params.get_str("secret_token") or None
        if secret is not None and not _SECRET_RE.fullmatch(secret):
            raise bad("secret token contains unallowed characters")
        if url and not url.startswith(("http://", "https://")):
            raise bad("bad webhook: An HTTPS URL must be provided for webhook")
        if params.get_bool("drop_pending_updates"):
            self._updates.clear()
            self._acked.clear()
        self._state_allowed(params.get_str_list("allowed_updates"))
        self._webhook_max_connections = params.get_int("max_connections") or 40
        self.webhook_url, self.webhook_secret = url, secret
        self._webhook_last_error = None
        self._restart_webhook_delivery()
        return True

    async def _delete_webhook(self, params: Params) -> Any:
        if params.get_bool("drop_pending_updates"):
            self._updates.clear()
            self._acked.clear()
            self._wake_pollers()
        self.webhook_url, self.webhook_secret = "", None
        self._restart_webhook_delivery()
        return True

    async def _get_webhook_info(self, params: Params) -> Any:
        info: JSON = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": self.pending_updates,
            "max_connections": self._webhook_max_connections,
        }
        if self._allowed:
            info["allowed_updates"] = sorted(self._allowed)
        if self._webhook_last_error is not None:
            info["last_error_date"], info["last_error_message"] = self._webhook_last_error
        return info

    # ------------------------------------------------------------------ webhook delivery

    def _restart_webhook_delivery(self) -> None:
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            self._webhook_task = None
        self._forget_acked()
        if self.webhook_url:
            self._webhook_task = asyncio.get_running_loop().create_task(
                self._deliver_webhook(self.webhook_url, self.webhook_secret)
            )

    def _forget_acked(self) -> None:
        """Cut every update the webhook confirmed out of the queue (the webhook is changing)."""
        if self._acked:
            self._updates = [u for u in self._updates if u["update_id"] not in self._acked]
            self._acked.clear()

    def _acknowledge(self, update_id: int) -> None:
        """The webhook answered 2xx: the update is confirmed."""
        self._acked.add(update_id)
        head = 0
        while head < len(self._updates) and self._updates[head]["update_id"] in self._acked:
            head += 1
        if head and (head >= _MAX_CONNECTIONS or head == len(self._updates)):
            for update in self._updates[:head]:
                self._acked.discard(update["update_id"])
            del self._updates[:head]
        elif len(self._acked) > _ACKED_MAX:  # an update at the head keeps failing
            self._forget_acked()

    @staticmethod
    def _chat_of(update: JSON) -> object:
        """The queue an update is delivered in: its chat's (one in flight at a time), else
        its own."""
        for value in update.values():
            if not isinstance(value, dict):
                continue
            chat = value.get("chat") or (value.get("message") or {}).get("chat")
            if isinstance(chat, dict) and "id" in chat:
                return chat["id"]
            sender = value.get("from")
            if isinstance(sender, dict) and "id" in sender:
                return sender["id"]
        return ("update", update.get("update_id"))

    async def _deliver_webhook(self, url: str, secret: str | None) -> None:
        """Push queued updates to the webhook until each is answered 2xx (module docstring)."""
        in_flight: dict[int, asyncio.Task[None]] = {}
        busy: set[object] = set()  # chats with an update in flight
        not_before: dict[object, float] = {}  # chats whose update failed: not before then
        failures: dict[int, int] = {}  # update id -> failed deliveries

        async def deliver(update: JSON, chat: object) -> None:
            update_id = int(update["update_id"])
            self.webhook_posts += 1
            try:
                status, retry_after = await self._post_update(url, update, secret)
                error = None if 200 <= status < 300 else f"Wrong response from webhook: {status}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                retry_after, error = None, f"Connection failed: {exc.__class__.__name__}"
            finally:
                busy.discard(chat)
                in_flight.pop(update_id, None)
            if error is None:
                failures.pop(update_id, None)
                self._acknowledge(update_id)
            else:
                self._webhook_last_error = (int(time.time()), error)
                failed = failures[update_id] = failures.get(update_id, 0) + 1
                if retry_after is not None:
                    delay = min(max(retry_after, 0.0), _RETRY_AFTER_MAX_S)
                else:
                    delay = 0.0 if failed == 1 else min(_RESEND_BASE_S * 2**failed, _RESEND_CAP_S)
                not_before[chat] = time.monotonic() + delay
            self._wake_pollers()

        try:
            while not self._closing:
                event = self._updates_changed
                limit = self._webhook_max_connections
                now = time.monotonic()
                wake_at: float | None = None
                held: set[object] = set()  # chats whose earlier update is not done
                seen = 0
                for update in self._updates:
                    update_id = int(update["update_id"])
                    if update_id in self._acked:
                        continue
                    seen += 1
                    if seen > 2 * limit or len(in_flight) >= limit:
                        break
                    chat = self._chat_of(update)
                    if update_id in in_flight or chat in busy or chat in held:
                        held.add(chat)
                        continue
                    due = not_before.get(chat, 0.0)
                    if due > now:
                        held.add(chat)
                        wake_at = due if wake_at is None else min(wake_at, due)
                        continue
                    not_before.pop(chat, None)
                    busy.add(chat)
                    in_flight[update_id] = asyncio.ensure_future(deliver(update, chat))
                    self.webhook_max_in_flight = max(self.webhook_max_in_flight, len(in_flight))
                timeout = None if wake_at is None else max(0.0, wake_at - time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), timeout)
        finally:
            for task in in_flight.values():
                task.cancel()
