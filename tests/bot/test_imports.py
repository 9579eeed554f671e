"""The bot never imports the worker: what they share lives in a layer both import (posting,
lanes, db, jobs). Checked statically, on the source of every module of the bot package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import codemojex.bot

BOT = Path(codemojex.bot.__file__).parent
FORBIDDEN = "codemojex.worker"


def imported(source: str, package: str) -> set[str]:
    """Every module an import statement of `source` names (relative imports resolved against
    `package`; `from a import b` names both `a` and `a.b`, which may be a module)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names}
    return out


def forbidden(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m == FORBIDDEN or m.startswith(FORBIDDEN + "."))


def test_no_module_of_the_bot_imports_the_worker() -> None:
    files = sorted(BOT.rglob("*.py"))
    assert len(files) > 5  # the package was found
    offenders: dict[str, list[str]] = {}
    for path in files:
        package = ".".join(["codemojex", *path.relative_to(BOT.parent).parent.parts])
        bad = forbidden(imported(path.read_text("utf-8"), package))
        if bad:
            offenders[str(path.relative_to(BOT.parent))] = bad
    assert offenders == {}


@pytest.mark.parametrize(
    "source",
    [
        "import codemojex.worker.sender",
        "from codemojex.worker.pacing import Pacer",
        "from codemojex import worker",
        "from ..worker import score",
        "def late() -> None:\n    from codemojex.worker import service",
    ],
)
def test_every_form_of_importing_the_worker_is_seen(source: str) -> None:
    assert forbidden(imported(source, "codemojex.bot")) != []


def test_imports_of_the_shared_layers_are_allowed() -> None:
    source = "from codemojex.posting.pacer import Pacer\nfrom codemojex import lanes\n"
    assert forbidden(imported(source, "codemojex.bot")) == []
