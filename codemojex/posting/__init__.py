"""Posting: how the bot and the worker talk back to Telegram at the pace it allows, kept in
Redis beside the lanes (same `{q}` hash tag) but not part of them.

- `keys.py`    builds every key name of posting (`pace:`, `send:`; from integers only)
- `lua/`       the scripts, one file each, headed by their KEYS, ARGV and return value
- `pacer.py`   the posting pace every process shares (per chat, per group, per bot), with a
               per-process fallback while Redis is down (`local_pace.py`); the limits of
               each kind of post, results or the bot's answers, in `pace_policy.py`
- `ring.py`    the posting ring: chats with unsent rows taking turns for the bot's messages
- `fold.py`    folding one chat's outbox rows into as few messages as possible (pure)
- `request.py` the Bot API's HTTP client over aiohttp (the sender's and the worker's posts,
               and the bot's getUpdates): a fraction of PTB's own httpx client's CPU a call
- `sender/`    the outbox sender (worker side): turns from the ring (loop.py), a chat's
               turn (turn.py), chat leases, fence, posted/intent markers (delivery.py),
               the Telegram call (telegram.py)

The bot uses the pacer and the ring (for the rows it writes); the worker runs the sender.
What else the processes share in Redis (cards, budgets, notices, the inbox) is
codemojex/state. Nothing here imports the bot or the worker.
"""
