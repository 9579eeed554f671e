"""The game's decisions, pure (no I/O): what a batch of guesses does (`decide`), what a new or
ended round is (`rounds`), and every text a player or admin reads (`texts`).

The store loads the state these functions need and writes what they decide; the bot and the
worker never decide a rule themselves.
"""
