"""What tests share that is not a fixture: one home for each helper (a fixture lives in the
conftest.py of the folder that needs it, or in tests/conftest.py when several do).

- `support`: the checkout under test, ports, the stand-in's helpers, wiping tables and keys,
  guesses to type; `writes`: store writes made the way the use-cases make them;
  `dailies`: a daily opened and played; `sql`: the statements an engine sends; `waiting`:
  waiting for a condition; `lanes`: draining a queue's lanes; `languages`: the catalogs'
  languages; `docnames`: the names the docs may quote; `redis_cluster`: a cluster of the
  session's own; `lua`: which names a Lua text defines and which it uses from nowhere.
"""
