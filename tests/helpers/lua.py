"""Which names a Lua text defines and which it uses without a definition: a tokenizer and a
scope walk over Lua 5.1 (what Redis runs), enough for our scripts.

The walk follows blocks (`function … end`, `do … end`, `then … elseif/else … end`, `repeat …
until`) and declares a block's locals, a function's parameters and a `for`'s variables in the
block they belong to. A name is used where it is read or assigned, not after `.` or `:` (a
field) nor as the key of a table constructor (`{p = 'payload'}`). A local is visible from its
`local` on (`local x = x` would see itself: none of our scripts does that).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

# What Redis gives every script, and the parts of Lua's library it keeps.
REDIS_GLOBALS: Final = frozenset(
    {
        "redis", "KEYS", "ARGV", "cjson", "cmsgpack", "string", "table", "math", "tonumber",
        "tostring", "type", "pairs", "ipairs", "unpack", "select", "next", "error", "pcall",
        "assert", "bit", "struct",
    }
)  # fmt: skip
KEYWORDS: Final = frozenset(
    {
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in",
        "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    }
)  # fmt: skip
_TOKEN: Final = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>--\[(?P<c>=*)\[.*?\](?P=c)\]|--[^\n]*)
    | (?P<long>\[(?P<l>=*)\[.*?\](?P=l)\])
    | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
    | (?P<number>0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
    | (?P<name>[A-Za-z_]\w*)
    | (?P<op>\.\.\.|\.\.|==|~=|<=|>=|[-+*/%^\#<>=(){}\[\];:,.])
    """,
    re.S | re.X,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # name, keyword, op, value (a string or a number)
    text: str
    line: int


def tokens(text: str) -> list[Token]:
    """The tokens of `text`, comments and white space left out."""
    out: list[Token] = []
    pos, line = 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"line {line}: cannot read {text[pos : pos + 20]!r}")
        kind = match.lastgroup
        assert kind is not None
        word = match.group()
        if kind == "name" and word in KEYWORDS:
            kind = "keyword"
        elif kind in ("long", "string", "number"):
            kind = "value"
        if kind not in ("space", "comment"):
            out.append(Token(kind, word, line))
        line += word.count("\n")
        pos = match.end()
    return out


@dataclass
class Names:
    """What a text defines at its top level, which of the names it was given it uses, and
    every name it uses that nothing defines (with its line)."""

    defined: set[str] = field(default_factory=set)
    used_outer: set[str] = field(default_factory=set)
    free: list[tuple[str, int]] = field(default_factory=list)


def names(text: str, given: Iterable[str] = ()) -> Names:
    """Walk `text` with `given` defined around it (see the module's docstring)."""
    toks = tokens(text)
    outer = set(given)
    scopes: list[set[str]] = [set()]
    found = Names(defined=scopes[0])
    brackets: list[str] = []
    pending: list[str] = []  # a `for`'s variables, declared in the block its `do` opens
    i = 0

    def declare(name: str) -> None:
        scopes[-1].add(name)

    def use(tok: Token) -> None:
        if any(tok.text in scope for scope in scopes):
            return
        if tok.text in outer:
            found.used_outer.add(tok.text)
        else:
            found.free.append((tok.text, tok.line))

    def text_at(j: int) -> str:
        return toks[j].text if j < len(toks) else ""

    while i < len(toks):
        tok = toks[i]
        word = tok.text
        if tok.kind == "keyword":
            if word == "local" and text_at(i + 1) == "function":
                declare(text_at(i + 2))
                i += 1  # on to `function`, whose name is now declared
                continue
            if word == "local":
                i += 1
                while i < len(toks) and toks[i].kind == "name":
                    declare(toks[i].text)
                    if text_at(i + 1) != ",":
                        break
                    i += 2
            elif word == "function":
                i += 1
                method = False
                if i < len(toks) and toks[i].kind == "name":
                    use(toks[i])  # `function f()` assigns f; `local function f` declared it
                    i += 1
                    while text_at(i) in (".", ":"):
                        method = method or text_at(i) == ":"
                        i += 2
                params = ["self"] if method else []
                assert text_at(i) == "(", f"line {tok.line}: a function without parameters"
                i += 1
                while text_at(i) != ")":
                    if toks[i].kind == "name":
                        params.append(toks[i].text)
                    i += 1
                scopes.append(set(params))
            elif word == "for":
                i += 1
                while toks[i].kind == "name" or text_at(i) == ",":
                    if toks[i].kind == "name":
                        pending.append(toks[i].text)
                    i += 1
                continue
            elif word == "do":
                scopes.append(set(pending))
                pending.clear()
            elif word in ("then", "repeat"):
                scopes.append(set())
            elif word == "else":
                scopes.pop()
                scopes.append(set())
            elif word in ("elseif", "until", "end"):
                scopes.pop()
        elif tok.kind == "op":
            if word in ("(", "[", "{"):
                brackets.append(word)
            elif word in (")", "]", "}"):
                brackets.pop()
        elif tok.kind == "name":
            field_name = i > 0 and toks[i - 1].text in (".", ":")
            table_key = (
                bool(brackets)
                and brackets[-1] == "{"
                and text_at(i + 1) == "="
                and text_at(i - 1) in ("{", ",", ";")
            )
            if not field_name and not table_key:
                use(tok)
        i += 1
    assert len(scopes) == 1, "a block is not closed"
    return found
