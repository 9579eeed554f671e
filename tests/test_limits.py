"""What codemojex/limits.py promises, read from the module and its text so it cannot drift:
only what no one part owns, one retry policy per distinct set of numbers, one backoff formula,
no measurements or history in its comments (they live in docs/benchmarks.md and
CHANGELOG.md), and every limit the docs and comments name by its constant existing under that
name. What Settings takes from it and from the parts: tests/test_settings.py."""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterator

import pytest

from codemojex import limits, outages
from tests.helpers.support import ROOT

SOURCE = ROOT / "codemojex" / "limits.py"


def _groups() -> dict[str, object]:
    """The module's instances of its frozen dataclasses: `TELEGRAM`, `ROOM`, … by name."""
    return {
        name: value
        for name, value in vars(limits).items()
        if name.isupper() and dataclasses.is_dataclass(value) and not isinstance(value, type)
    }


def _policies() -> Iterator[tuple[str, limits.RetryPolicy]]:
    """Every retry policy the module defines: a module constant or a group's field."""
    for name, value in vars(limits).items():
        if isinstance(value, limits.RetryPolicy):
            yield name, value
    for name, group in _groups().items():
        for field in dataclasses.fields(group):  # type: ignore[arg-type]
            value = getattr(group, field.name)
            if isinstance(value, limits.RetryPolicy):
                yield f"{name}.{field.name}", value


def test_only_what_no_one_part_owns_is_here_frozen_and_saying_why() -> None:
    """Telegram's limits, a room's settings several parts check, the retry policies: a value
    one part uses is that part's constant (a new group here is a choice to review)."""
    groups = _groups()
    assert set(groups) == {"TELEGRAM", "ROOM", "RETRIES"}
    for name, group in groups.items():
        params = type(group).__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, name
        assert (type(group).__doc__ or "").strip(), name


def test_retry_policies_differ_in_their_numbers() -> None:
    """Policies with the same numbers are one policy: a distinct one has a reason to be."""
    seen: dict[tuple[object, ...], str] = {}
    named = {id(policy): (name, policy) for name, policy in reversed(list(_policies()))}
    for name, policy in named.values():  # a name that is another's alias is the same policy
        numbers = (policy.base_s, policy.cap_s, policy.give_up_s, policy.jitter, policy.floor_s)
        assert numbers not in seen, f"{name} repeats {seen[numbers]}"
        seen[numbers] = name
    assert len(seen) >= 2


def test_one_backoff_formula() -> None:
    """`outages.pause_s` is the only backoff: no other function of outages computes one, and
    a job's delay in its lane is `pause_s` under RETRIES.job (full jitter, no floor)."""
    assert not hasattr(outages, "backoff_ms")
    job, loop = limits.RETRIES.job, limits.RETRIES.loop
    rng = random.Random(3)
    draws = [outages.pause_s(job, 3, rng) for _ in range(300)]
    ceiling = min(job.cap_s, job.base_s * 4)
    assert 0 <= min(draws) < ceiling * 0.1 and ceiling * 0.9 < max(draws) <= ceiling
    assert outages.pause_s(loop, 1, random.Random(0)) >= loop.floor_s > 0


# Measurements, dates, tickets and history belong to docs/benchmarks.md and CHANGELOG.md.
_NOT_IN_LIMITS = {
    "a date": r"\b20\d\d-\d\d-\d\d\b",
    "a benchmark": r"\bbench[./]",
    "a throughput": r"guesses/s|jobs/s",
    "a ratio measured": r"\b\d+(\.\d+)?x\b",
    "a percentage measured": r"\d+(-\d+)? ?%",
    "a ticket number": r"\bissue \d+|\(H\d+[a-z]?\)|#\d+",
    "history": r"\bwas \d|\bused to\b|\btoday\b|\bnow\b",
}


@pytest.mark.parametrize("what", sorted(_NOT_IN_LIMITS))
def test_limits_keeps_no_figures_or_history(what: str) -> None:
    lines = enumerate(SOURCE.read_text().splitlines(), 1)
    found = [(n, line) for n, line in lines if re.search(_NOT_IN_LIMITS[what], line)]
    assert not found, f"{what} in limits.py: {found}"


# `GROUP.field`, or `GROUP.prefix_*` for every field of that prefix.
_GROUP_FIELD = re.compile(r"\b([A-Z][A-Z_]+)\.([a-z][a-z0-9_]*)(\*?)")


def _named_limits() -> Iterator[tuple[str, str, str, bool]]:
    """(where, group, field, a prefix?) for every `GROUP.field` the docs and the code name."""
    groups = _groups()
    paths = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    for pattern in ("*.md", "*.py", "*.lua"):
        paths += sorted((ROOT / "codemojex").rglob(pattern))
    for path in paths:
        text = path.read_text()
        for match in _GROUP_FIELD.finditer(text):
            if match.group(1) in groups:
                where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
                yield where, match.group(1), match.group(2), bool(match.group(3))


def test_every_limit_named_in_the_docs_and_comments_exists() -> None:
    fields = {
        name: {f.name for f in dataclasses.fields(group)}  # type: ignore[arg-type]
        for name, group in _groups().items()
    }
    missing = [
        f"{where} {group}.{field}{'*' if prefix else ''}"
        for where, group, field, prefix in _named_limits()
        if not _names_a_field(fields[group], field, prefix)
    ]
    assert not missing, missing


def _names_a_field(fields: set[str], name: str, prefix: bool) -> bool:
    return any(f.startswith(name) for f in fields) if prefix else name in fields


def test_the_limits_module_reads_in_one_sitting() -> None:
    assert len(SOURCE.read_text().splitlines()) <= 500
