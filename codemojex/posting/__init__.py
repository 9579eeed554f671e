"""Posting: what the bot and the worker share to talk back to Telegram, kept in Redis beside
the lanes (same `{q}` hash tag) but not part of them.

- `keys.py`    builds every `cmx:{q}:` key name (from integers and checked ids only)
- `lua/`       the scripts, one file each, headed by their KEYS, ARGV and return value
- `pacer.py`   the posting pace every process shares (per chat, per group, per bot), with a
               per-process fallback while Redis is down (`local_pace.py`); the limits of
               each kind of post, results or the bot's answers, in `pace_policy.py`
- `ring.py`    the posting ring: chats with unsent rows taking turns for the bot's messages
- `flags.py`   once-per-episode notices ("slow down", "scoring is paused")
- `budget.py`  the answer budget: how many of the bot's answers a member gets in a chat
- `fold.py`    folding one chat's outbox rows into as few messages as possible (pure)
- `sender/`    the outbox sender (worker side): turns from the ring (loop.py), a chat's
               turn (turn.py), chat leases, fence, posted/intent markers (delivery.py),
               the Telegram call (telegram.py)

The bot uses the pacer, the flags, the answer budget and the ring (for the rows it writes);
the worker runs the sender. Nothing here imports the bot or the worker.
"""
