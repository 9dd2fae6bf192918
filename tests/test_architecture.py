"""The house's shape: docs/architecture.md's map names every module of nbprof/ and nothing else,
the top level stays small, and no module grows past what one person reads in a sitting.

Oracle: the files on disk (``nbprof/**.py`` and its packages), read apart from the document.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nbprof"
DOC = ROOT / "docs" / "architecture.md"

MAX_TOP_LEVEL_PUBLIC = 15  # issue 39: the public surface and the magics at the top, not every module
MAX_LINES = 1000


def map_entries(text: str) -> set[str]:
    """The paths the map names (``nbprof/run/runner.py``, ``nbprof/run/`` ...): the ```text block
    under "## The map", one folder or file per line (several files may share a line), nesting by
    indentation, each line's names before its description."""
    section = text.split("\n## The map\n", 1)[1]
    block = re.search(r"```text\n(.*?)```", section, flags=re.S)
    assert block, "docs/architecture.md: no ```text block under ## The map"
    lines = block.group(1).splitlines()
    assert lines[0] == "nbprof/", lines[0]
    entries = {"nbprof/"}
    stack: list[tuple[int, str]] = [(-1, "nbprof/")]
    for line in lines[1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack[-1][0] >= indent:
            stack.pop()
        folder = stack[-1][1]
        names = []
        for token in line.split():
            if not re.fullmatch(r"[\w.]+(\.py|\.js|/)", token):
                break
            names.append(token)
        assert names, f"a line of the map that names nothing: {line!r}"
        for name in names:
            entries.add(folder + name)
        if names[0].endswith("/"):
            stack.append((indent, folder + names[0]))
    return entries


def tree_entries() -> set[str]:
    """Every module and package of nbprof/ (what the map must name)."""
    out = {"nbprof/"}
    for p in PACKAGE.rglob("*.py"):
        rel = p.relative_to(ROOT)
        out.add(rel.as_posix())
        for parent in rel.parents:
            if parent != Path(".") and (ROOT / parent / "__init__.py").exists():
                out.add(parent.as_posix() + "/")
    return out


def test_the_map_names_every_module_and_nothing_else():
    named = map_entries(DOC.read_text())
    missing = sorted(tree_entries() - named)
    assert not missing, f"modules not in docs/architecture.md's map (add a line each): {missing}"
    gone = sorted(e for e in named if not (ROOT / e).exists())
    assert not gone, f"docs/architecture.md's map names what is not in nbprof/: {gone}"


def test_the_map_reader_reads_nesting_and_shared_lines():
    """The reader the test above relies on: nesting by indentation, several names on a line, a
    long name followed by one space and its description."""
    text = ("x\n## The map\n\n```text\nnbprof/\n  a.py             the a\n  sub/  a folder\n"
            "    b.py c.py   two\n    long_name.py the long one\n  d.py\n```\n")
    assert map_entries(text) == {"nbprof/", "nbprof/a.py", "nbprof/sub/", "nbprof/sub/b.py", "nbprof/sub/c.py",
                                 "nbprof/sub/long_name.py", "nbprof/d.py"}


def test_the_top_level_holds_at_most_15_public_modules():
    public = sorted(p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("_"))
    assert len(public) <= MAX_TOP_LEVEL_PUBLIC, public


def test_no_module_is_over_1000_lines():
    long = {p.relative_to(ROOT).as_posix(): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split by responsibility (docs/architecture.md): {long}"
