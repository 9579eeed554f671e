"""The posting scripts ship as files, one per script, each headed by its KEYS, ARGV and
return value, and every file is one the code loads."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from codemojex.posting.scripts import NAMES, source


def test_every_lua_file_is_a_script_the_code_loads() -> None:
    folder = resources.files("codemojex.posting").joinpath("lua")
    files = {entry.name.removesuffix(".lua") for entry in folder.iterdir()}
    assert files == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_script_names_its_keys_argv_and_return_value(name: str) -> None:
    text = source(name)
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    assert header[0].startswith(f"-- {name}: ")
    assert any(re.match(r"-- KEYS\[1", line) for line in header)
    assert any(re.match(r"-- ARGV\[1\]", line) for line in header)
    assert any(line.startswith("-- Returns") for line in header)
    # The header describes what the body uses.
    body = text[len("\n".join(header)) :]
    assert "KEYS[" in body and "ARGV[" in body
    # includes are resolved (the ring scripts take the server's clock from the lanes' helpers)
    assert "@include" not in text
    assert ("now_ms()" in body) == ("local function now_ms()" in body)


def test_an_unknown_script_is_refused() -> None:
    with pytest.raises(KeyError):
        source("pace_everything")
