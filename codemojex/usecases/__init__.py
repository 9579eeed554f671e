"""The flows that join the store and the game: each loads through `codemojex.db.store`,
decides through `codemojex.game` and writes through the store, in one transaction it opens.
The bot and the worker call them; they call neither."""
