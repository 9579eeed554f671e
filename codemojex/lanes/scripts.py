"""The Lua scripts of the lanes, one per verb, built by the one loader (codemojex/lua/loader.py)
when first needed.

A verb is `lua/<verb>.lua`; what verbs share is in `lua/includes/<name>.lua`, one helper
function per file, named after it (and the server's clock, `now_ms`, in the includes every
package shares). Each file names what it uses (`--- @include "<name>"`), the key names too:
they are the include `keys`, rendered from `codemojex/lanes/keys.py` (`keys.lua_names`). A
new key is a suffix in `keys.SINGLE` (used as its capitals) or a `keys.Shape` in
`keys.PER_ID` (used as `<builder>_key(id)`), never a string in a Lua file
(tests/lanes/test_cost.py checks).

Adding a verb: `lua/<verb>.lua` with its header (KEYS, ARGV, Returns), one `--- @include`
line per helper it calls (and `keys` when it uses a key name), its name in `VERBS`, and a
method of `Lanes` that calls it, in its family's module (facade.py the producer's and the
consumer's, admin.py, operators.py); a helper two verbs share goes into
`lua/includes/<helper>.lua`, naming its own includes.
"""

from __future__ import annotations

from typing import Final

from codemojex.lanes.keys import lua_names
from codemojex.lua.loader import Scripts

VERBS: Final = (
    "enqueue",
    "admit",
    "claim",
    "wclaim",
    "ack",
    "ack_many",
    "ack_wclaim",
    "ack_wclaims",
    "retry",
    "extend",
    "reap",
    "promote",
    "retain",
    "limit",
    "unlimit",
    "weight",
    "pause",
    "resume",
    "pause_queue",
    "resume_queue",
    "reassign",
    "purge",
    "snapshot",
    "check",
    "repair",
    "stats",
    "rooms",
    "dead",
    "requeue",
    "waiting",
)

SCRIPTS: Final = Scripts("codemojex.lanes", VERBS, lua_names())


def source(verb: str) -> str:
    """The full text of one verb's script: its header, its includes (each once, dependencies
    first, of `keys` the names it uses), its code."""
    return SCRIPTS.source(verb)
