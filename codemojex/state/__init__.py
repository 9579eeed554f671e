"""State: what the bot, the worker and the ops page share in Redis besides the lanes and
posting (same `{q}` hash tag), each piece with the database as its truth or none needed.

- `keys.py`    builds every key name of it (from integers and checked ids only)
- `lua/`       the scripts, one file each, headed by their KEYS, ARGV and return value
- `cards.py`   the rooms' cards: what taking a guess needs, written after each commit
- `board.py`   the daily code's world board (rebuilt from Postgres when lost)
- `members.py` who the bot saw in each group, for the daily board of a group
- `budget.py`  the answer budget: how many of the bot's answers a member gets in a chat
- `flags.py`   once-per-episode notices ("slow down", "scoring is paused")
- `inbox.py`   the bot's parked updates, its dead letters and the poller's lease
- the marks of the bot's commands (command_claim, command_renew, command_release: bot/once.py)
  and taps (tap_done: bot/drafts.py), and the processes the ops page lists (ops/fleet.py):
  their scripts and keys live here, their code with their users

Nothing here posts to Telegram (posting does) or imports the bot or the worker.
"""
