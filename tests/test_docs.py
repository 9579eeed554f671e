"""The docs name only what exists, so a rename or a removal cannot leave them telling a
newcomer about a file or a function that is gone.

docs/architecture.md, every name in it. The doc is read in rows: a table row, a paragraph or
list item, a heading, and in the package tree each folder's or file's entry. In a row:

- A path (it has a `/`, or ends in a file's extension): from the repo's root when it starts
  with one of its folders (`codemojex/`, `bench/`, `tests/`, `deploy/`, `docs/`,
  `migrations/`), else from `codemojex/` (the doc's way: `bot/polling.py`) or from a folder
  the row names before it (`lua/budget_take.lua` after `state/budget.py`). A bare file name
  (`postgres.py`) is in a folder the row names, searched down (in the tree, the entry's own
  folder), or at the top of `codemojex/` or of the repo. A link's target is from docs/.
- A Python name, in backticks (`Lanes.admit`, `OutboxSender`, `uow`, `retrying(...)`,
  `RECORD_RETRY`). Dotted: its first part is a module (by its last name: `outages`, `store`),
  a class or a module-level instance of one (`OUTAGES`), or a variable (`tx`) of a class a
  module of the row defines; every next part is a name of that module or a member of that
  class (its own, its methods' `self.x`, its bases'). Undotted: when Codemojex defines the
  name anywhere (a module, a function, a class or a member, a constant, a parameter), a
  module the row names must define or import it, so a row points at the right home; a
  row that names no module may name it from anywhere. A word Codemojex defines nowhere as a
  Python name must be one of its other words: a setting (`bot_in_hand`, or its variable
  `CODEMOJEX_DEDUPE_WINDOW_S`), a string its code spells (a message kind, a table, a
  Redis book: `keys_off`, `npending`), a Lua script's name, a word of pyproject.toml's
  import-linter contracts (`layers`, `acyclic_siblings`), or one of NOT_CODE's, each with
  why it is no Codemojex name.
- Not checked: spans with spaces (`make lint`, `codemojex bot`, SQL), bot commands (`/daily`),
  flags (`-v`), and key or metric shapes (`cmx:{q}:…`, `codemojex_retries_total{policy}`).
- A layers' picture (a fence of names and `|` alone): its names are the modules of one
  package (codemojex's layers, the bot's).

Everywhere else (README.md, docs/*.md, the packages' READMEs, the code's docstrings are not
read): a path from the repo's root in backticks or a link exists, and `tests/x.py::test_y`
names a test function of that file; `git log -- <path>` names what history holds, not a
file. And the README stays a README: at most 200 lines, no commit hashes; no issue numbers
anywhere in the code, the docs, the benchmarks, the tests or deploy/.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.docnames import PACKAGE, CodeIndex, ModuleInfo
from tests.helpers.support import ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"
ROOT_FOLDERS = ("codemojex", "bench", "tests", "deploy", "docs", "migrations", ".ci")
EXTENSION = re.compile(r"\.(py|lua|md|toml|json|sql|conf|service|ini|ya?ml|png|txt|cfg|example)$")
PYTHON_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
CALL = re.compile(r"([\w.]+)\(.*\)")
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s#]+)[^)]*\)")
# What a run writes and git ignores: named in the docs, absent from a fresh checkout.
UNTRACKED = ("bench/out",)

# Words architecture.md writes in backticks that are not Codemojex's names, and why.
NOT_CODE = {
    "commit": "SQLAlchemy's session method, which only the unit of work calls",
    "rollback": "SQLAlchemy's session method, which only the unit of work calls",
    "ignore_imports": "import-linter's option, named as gone",
    "editMessageReplyMarkup": "a Bot API method",
    "chat_member": "a Bot API update's kind",
}


@dataclass
class Row:
    text: str
    line: int
    folder: Path | None = None  # in the tree: the entry's folder
    module: Path | None = None  # in the tree: the entry's own module


LAYER_LINE = re.compile(r"\w+( \| \w+)*")


def rows(doc: str) -> Iterator[Row]:
    """The doc's rows; the package tree's entries (the fence that opens with `codemojex/`),
    and each layers' picture (a fence of names and `|` alone) as a row of its own kind."""
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            block = lines[i + 1 : end]
            if block and block[0].strip() == "codemojex/":
                yield from _tree(block[1:], i + 2)
            elif block and all(LAYER_LINE.fullmatch(b.strip()) for b in block):
                yield Row("LAYERS " + " ".join(block), i + 1)
            i = end + 1
            continue
        if not line.strip():
            i += 1
            continue
        start, text = i, [line]
        i += 1
        single = line.startswith(("|", "#"))
        while not single and i < len(lines) and lines[i].strip():
            if lines[i].lstrip().startswith(("- ", "|", "#", "```")):
                break
            text.append(lines[i])
            i += 1
        yield Row(" ".join(text), start + 1)


def _tree(block: list[str], first: int) -> Iterator[Row]:
    entry: Row | None = None
    for n, line in enumerate(block):
        m = re.match(r"  (\S+)\s", line + " ")
        if m:
            if entry:
                yield entry
            name = m.group(1)
            path = PACKAGE / name.rstrip("/")
            folder = path if name.endswith("/") else PACKAGE
            entry = Row(line, first + n, folder, None if name.endswith("/") else path)
        elif entry:
            entry.text += " " + line.strip()
    if entry:
        yield entry


def tree_paths(text: str) -> list[str]:
    """The paths an entry of the tree writes without backticks (`lua/includes/`, `cli.py`)."""
    bare = SPAN.sub(" ", text)
    found = re.findall(r"(?<![\w/.])((?:\.\./)?[\w-]+(?:\.[\w-]+)*(?:/[\w.-]+)*/?)", bare)
    return [p for p in found if p.endswith("/") or EXTENSION.search(p)]


def _importlinter_words() -> set[str]:
    """import-linter's words pyproject.toml uses (`layers`, `acyclic_siblings`, an id)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    words: set[str] = set()
    for contract in config.get("contracts", []):
        for key, value in contract.items():
            words.add(key)
            if isinstance(value, str):
                words.add(value)
    return words


class Checker:
    def __init__(self) -> None:
        self.code = CodeIndex()
        settings = self.code.modules["codemojex.settings"].classes["Settings"]
        self.settings = settings.members
        lua = {p.stem for p in PACKAGE.rglob("*.lua")}
        self.words = self.code.spelled | lua | _importlinter_words()

    def path(self, text: str, folders: list[Path], tree: bool = False) -> Path | None:
        """Where a path written in the doc is, or None."""
        text = text.rstrip("/")
        if text.split("/")[0] in ROOT_FOLDERS:
            return ROOT / text if (ROOT / text).exists() else None
        if "/" in text:
            for base in [PACKAGE, ROOT / "docs", *folders]:
                if (base / text).exists():
                    return (base / text).resolve()
            return None
        for base in [PACKAGE, ROOT]:
            if (base / text).exists():
                return base / text
        for folder in folders[:1] if tree else folders:
            found = next(folder.rglob(text), None)
            if found:
                return found
        return None

    def check(self, row: Row) -> list[str]:
        if row.text.startswith("LAYERS "):
            return self._layers([w for w in row.text.split()[1:] if w != "|"])
        problems: list[str] = []
        folders = [row.folder] if row.folder else []
        modules: list[ModuleInfo] = []
        if row.module and (m := self.code.module_at(row.module)):
            modules.append(m)
        spans = SPAN.findall(row.text)
        paths = [s for s in spans if self._is_path(s)] + tree_paths(row.text) * bool(row.folder)
        # the paths with a folder first: a bare file name is looked for in every folder named
        for text in sorted(paths, key=lambda p: "/" not in p):
            found = self.path(text, folders, tree=row.folder is not None)
            if found is None:
                problems.append(f"no such path: {text}")
                continue
            folders.append(found if found.is_dir() else found.parent)
            if (m := self.code.module_at(found)) and m not in modules:
                modules.append(m)
        for target in LINK.findall(row.text):
            if not target.startswith("http") and not (ARCHITECTURE.parent / target).exists():
                problems.append(f"no such link target: {target}")
        names = [s for s in spans if not self._is_path(s)]
        # dotted names first: a module they start from is one the row names (`outages.OUTAGES`)
        for span in sorted(names, key=lambda s: "." not in s):
            problems += self._name(span, modules)
        return problems

    def _layers(self, names: list[str]) -> list[str]:
        """A layers' picture names the modules of one package (codemojex, codemojex.bot…)."""
        packages = {m.name.rpartition(".")[0] for n in names for m in self.code.by_last.get(n, [])}
        best = max(
            packages,
            key=lambda p: sum(f"{p}.{n}" in self.code.modules for n in names),
            default="codemojex",
        )
        return [
            f"the layer {n} is no module of {best}"
            for n in names
            if f"{best}.{n}" not in self.code.modules
        ]

    @staticmethod
    def _is_path(span: str) -> bool:
        return (
            " " not in span
            and ("/" in span or bool(EXTENSION.search(span)))
            and not span.startswith("/")
        )

    def _name(self, span: str, row: list[ModuleInfo]) -> list[str]:
        if call := CALL.fullmatch(span):
            span = call.group(1)
        if not PYTHON_NAME.fullmatch(span):
            return []
        parts = span.split(".")
        if len(parts) > 1:
            if not self.code.resolves(parts, row):
                return [f"`{span}` resolves to nothing"]
            row += [m for m in self.code.by_last.get(parts[0], []) if m not in row]
            return []
        name = span
        if name.startswith("CODEMOJEX_"):
            setting = name.removeprefix("CODEMOJEX_").lower()
            return [] if setting in self.settings else [f"`{name}` is no setting"]
        if name in self.settings or name in self.code.by_last or name in self.words:
            return []
        if self.code.defined_anywhere(name):
            if not row or any(m.defines(name) for m in row):
                return []
            where = ", ".join(m.name for m in row)
            return [f"`{name}` is defined, but not in what its row names ({where})"]
        if name in NOT_CODE:
            return []
        return [f"`{name}` names nothing Codemojex has"]


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker()


def test_architecture_names_only_what_exists(checker: Checker) -> None:
    problems = [
        f"docs/architecture.md:{row.line}: {problem}"
        for row in rows(ARCHITECTURE.read_text())
        for problem in checker.check(row)
    ]
    assert not problems, "\n".join(problems)


def _docs() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted(PACKAGE.rglob("README.md")),
        *sorted((ROOT / "bench").rglob("README.md")),
    ]


def _test_exists(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
        for node in ast.walk(tree)
    )


RESULTS_FILE = re.compile(r"([\w.-]+\.json)(?:@([0-9a-f]{7,40}))?")


def _in_history(commit: str, path: str) -> bool | None:
    """Whether git history has `path` at `commit`; None when this checkout lacks the commit
    (a shallow clone)."""
    git = ["git", "-C", str(ROOT)]
    if subprocess.run(
        [*git, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    ).returncode:
        return None
    return not subprocess.run(
        [*git, "cat-file", "-e", f"{commit}:{path}"], capture_output=True
    ).returncode


def _written_path(doc: Path, written: str) -> str | None:
    """What is wrong with a path a doc writes, or None."""
    if results := RESULTS_FILE.fullmatch(written):
        name, commit = results.groups()
        path = f"bench/results/{name}"
        if commit is None:
            return None if (ROOT / path).exists() else f"no such results file: {path}"
        return None if _in_history(commit, path) is not False else f"no {path} at {commit}"
    path, _, test = written.partition("::")
    if " " in path or path.split("/")[0] not in ROOT_FOLDERS or "…" in path or "<" in path:
        return None
    if path.startswith(UNTRACKED):
        return None
    if not (ROOT / path).exists():
        return f"no such path: {path}"
    if test and "…" not in test and not _test_exists(ROOT / path, test.split("[")[0]):
        return f"no test {test} in {path}"
    return None


def test_every_path_the_docs_write_from_the_root_exists() -> None:
    """Paths from the root, `tests/x.py::test_y`, and results files: `name.json` is
    bench/results/name.json, `name.json@<commit>` that file as git history has it."""
    problems = []
    for doc in _docs():
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            spans = [s for s in SPAN.findall(line) if not s.startswith("git ")]
            links = [
                os.path.relpath(doc.parent / t, ROOT)
                for t in LINK.findall(line)
                if not t.startswith("http")
            ]
            for written in [*spans, *links]:
                if problem := _written_path(doc, written):
                    problems.append(f"{doc.relative_to(ROOT)}:{n}: {problem}")
    assert not problems, "\n".join(problems)


def test_bench_results_keep_one_run_per_benchmark_each_in_the_index() -> None:
    """bench/results/ holds the index and, per benchmark, the latest saved run under the
    benchmark's name (bench/<name>.py or bench/<name>/); the index has a row for each."""
    results = ROOT / "bench" / "results"
    index = (results / "README.md").read_text()
    problems = []
    for path in sorted(results.iterdir()):
        if path.name == "README.md":
            continue
        bench = ROOT / "bench" / path.stem
        if path.suffix != ".json" or not (bench.with_suffix(".py").exists() or bench.is_dir()):
            problems.append(f"{path.name} is no benchmark's results file (bench/<name>.json)")
        if f"| `{path.name}` |" not in index:
            problems.append(f"{path.name} has no row in bench/results/README.md")
    assert not problems, "\n".join(problems)


ISSUE_NUMBER = re.compile(
    r"\bissues?\s*#?\d+|\bissue-?\d+|\b(?:the|this|that|an?) issue\b|\bissue's\b", re.IGNORECASE
)
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
TEXT_SUFFIXES = {".py", ".md", ".lua", ".toml", ".yml", ".yaml", ".conf", ".service", ".sh", ""}


def _texts() -> Iterator[Path]:
    """The repo's own text: the package, docs, benchmarks, tests, deploy/, CI, the build."""
    for top in ("codemojex", "docs", "bench", "tests", "deploy", ".ci", "migrations"):
        for path in sorted((ROOT / top).rglob("*")):
            if "node_modules" in path.parts or "__pycache__" in path.parts or path.is_dir():
                continue
            if path.suffix in TEXT_SUFFIXES | {".json", ".example", ".html", ".js", ".css"}:
                yield path
    yield from (ROOT / name for name in ("README.md", "CHANGELOG.md", "Makefile", "pyproject.toml"))


def test_no_issue_numbers_in_the_code_or_the_docs() -> None:
    """Code and docs say what, not which ticket: a ticket's number means nothing to a reader
    who has the code and not the tracker."""
    me = Path(__file__).resolve()
    found = [
        f"{path.relative_to(ROOT)}:{n}: {m.group(0)}"
        for path in _texts()
        if path.resolve() != me
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for m in [ISSUE_NUMBER.search(line)]
        if m
    ]
    assert not found, "\n".join(found)


def test_the_readme_reads_in_one_sitting() -> None:
    """At most 200 lines, and nothing dated by a commit: history is in git, figures in
    docs/benchmarks.md."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert not COMMIT_HASH.findall(readme)
