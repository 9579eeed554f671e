"""The values the layers pass to each other: frozen dataclasses and constants with no I/O and no
rules. The store loads them and writes them, the game decides over them
(`codemojex.game`), the use-cases hand them from one to the other (`codemojex.usecases`).

`types`: what the game's decisions are written in (message kinds, round kinds, end reasons,
`Message`); `batch`: a batch of guesses loaded and decided; `daily`: the daily code's puzzle,
rows, records and progress, and their spelling in the columns."""
