"""Every name of nbprof's own that its docstrings, comments and docs pages give still exists: a
module path (``analysis.lines.join_lines``, ``nbprof.collect.user_code.UserCode``), a Sphinx role
(:class:`LineData`, :func:`...`) and a file of the repository (``collect/line_tracer.py``,
``tests/test_x.py``). Names go stale when code moves (issue 39 found ``join_lines``,
``LineData``, ``line_table_from_frames`` left behind); the oracle is the package's own sources
and the files on disk, read (not imported: that would import torch). Read from the package's
docstrings and comments and from docs/ and README.md outside their code blocks."""

from __future__ import annotations

import builtins
import re
from functools import lru_cache
from pathlib import Path
from types import CodeType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "nbprof"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# read from the sources, not imported (importing every module would import torch: seconds)
FILES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}
MODULES = set(FILES)
SUBPACKAGES = sorted({n.split(".")[1] for n in MODULES if n.count(".") >= 2})
# ``collect.user_code.UserCode``, ``nbprof.model.TorchProfile``: a subpackage or nbprof first (a
# top-level module's name alone, ``events.columns``, is as often a variable's)
DOTTED = re.compile(r"(?<![\w./-])(?:nbprof\.[A-Za-z_]\w*|(?:%s)\.[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)*"
                    % "|".join(map(re.escape, SUBPACKAGES)))
ROLE = re.compile(r":(?:class|func|meth|data|attr|exc):`~?([\w.]+)`")
# a path into the repository (``nbprof/collect/x.py``, ``tests/test_x.py``) or into the package
# from a subpackage (``collect/x.py``)
PATH = re.compile(r"(?<![\w./-])((?:nbprof|tests|benchmarks|docs|scripts|notebooks|binder)/[\w./-]*\w)")
SUBPATH = re.compile(r"(?<![\w./-])((?:%s)/[\w/]*\w\.py)\b" % "|".join(map(re.escape, SUBPACKAGES)))
FILE_SUFFIX = re.compile(r"\.(py|md|ipynb|sh|toml|json|gz|txt|yml|yaml|cfg|png|html|exe|io|org|com|prof)$")
# subpackages whose name is also the usual name of a variable (a Run is ``run``: ``run.begin()``):
# a reference to them is checked only where its second part is one of their modules
AMBIGUOUS = {"run"}


@lru_cache(maxsize=None)
def _code(name: str) -> CodeType:
    """A module's code, compiled (not run, not imported: that would import torch)."""
    path = FILES[name]
    return compile(path.read_text(encoding="utf-8"), str(path), "exec", dont_inherit=True)


def _nested(code: CodeType) -> dict[str, CodeType]:
    """The functions and classes defined in ``code``'s body, by name."""
    return {c.co_name: c for c in code.co_consts if isinstance(c, CodeType)}


def _scope(code: CodeType) -> set[str]:
    """The names a module's or class's body binds or uses (imports, defs, classes, assignments;
    also the attributes it reads: a little more than it binds, never less)."""
    return set(code.co_names) | set(code.co_varnames) | set(_nested(code))


def _attribute(code: CodeType, name: str) -> tuple[bool, CodeType | None]:
    """Whether the module or class ``code`` has ``name`` (a module with ``__getattr__``: any), and
    its body's code where it is a class."""
    scope = _scope(code)
    if name in scope:
        return True, _nested(code).get(name)
    return "__getattr__" in scope, None


def _defined_names() -> set[str]:
    """Every name the package's code binds or uses anywhere (for a role's short name)."""
    names: set[str] = set(MODULES) | {n.split(".")[-1] for n in MODULES}
    todo = [_code(m) for m in MODULES]
    while todo:
        code = todo.pop()
        names |= _scope(code) | set(code.co_freevars) | set(code.co_cellvars) | {code.co_name}
        todo += _nested(code).values()
    return names


def _resolve(ref: str) -> str | None:
    """None when ``ref`` names something of nbprof's that exists; else what is missing."""
    parts = ref.split(".")
    if parts[0] == "nbprof":
        parts = parts[1:]
    for i in range(len(parts), -1, -1):
        name = ".".join(["nbprof", *parts[:i]])
        if name in MODULES:
            scope: CodeType | None = _code(name)
            for j, part in enumerate(parts[i:]):
                if scope is None:  # an attribute of a function's result or an instance: not checked
                    return None
                found, scope = _attribute(scope, part)
                if not found and ".".join([name, *parts[i:i + j + 1]]) not in MODULES:
                    return f"{name} has no {'.'.join(parts[i:i + j + 1])}"
            return None
    return f"no module {ref}"


def _prose_of_python(path: Path) -> list[tuple[int, str]]:
    """A source file's prose: the lines of its triple-quoted strings (docstrings) whole, and of the
    other lines their comment (after ``#``). Code is left out: its names exist (it runs), and a
    variable may share a subpackage's name (``run.begin()``). Line by line, without a tokenizer
    (seconds for the package)."""
    out, inside = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        quotes = line.count('"""') + line.count("'''")
        if inside or quotes:
            out.append((n, line))
        elif "#" in line:
            out.append((n, line[line.index("#"):]))
        if quotes % 2:
            inside = not inside
    return out


def _prose_of_markdown(path: Path) -> list[tuple[int, str]]:
    """A page's lines outside fenced code blocks (the examples there are files to write)."""
    out, fenced = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            out.append((n, line))
    return out


def _stale(lines: list[tuple[int, str]], defined: set[str]) -> list[str]:
    found = []
    for n, line in lines:
        for m in DOTTED.finditer(line):
            ref = m.group(0)
            if FILE_SUFFIX.search(ref):  # a file name (``collect.py``): the path checks below
                continue
            first, *rest = ref.split(".")
            if first in AMBIGUOUS and not (rest and f"nbprof.{first}.{rest[0]}" in MODULES):
                continue
            why = _resolve(ref)
            if why:
                found.append(f"{n}: {ref} ({why})")
        for m in ROLE.finditer(line):
            ref = m.group(1)
            if ref.split(".")[0] in (*SUBPACKAGES, "nbprof"):
                why = _resolve(ref)
            else:  # a short name: defined somewhere in the package (or a builtin)
                why = None if ref.split(".")[-1] in defined or hasattr(builtins, ref) else "defined nowhere in nbprof"
            if why:
                found.append(f"{n}: {ref} ({why})")
        for m in PATH.finditer(line):
            path = m.group(1).rstrip(".")
            placeholder = re.search(r"\bNN\b|[*<{]", path)  # "notebooks/src/NN-name.py": a pattern
            if FILE_SUFFIX.search(path) and not placeholder and not (ROOT / path).exists():
                found.append(f"{n}: {path} (no such file)")
        for m in SUBPATH.finditer(line):
            if not (PKG / m.group(1)).exists():
                found.append(f"{n}: {m.group(1)} (no such file in nbprof/)")
    return found


SOURCES = sorted(p.relative_to(ROOT).as_posix() for p in PKG.rglob("*.py"))
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")
               if not {"_build", "_static"} & set(p.parts)) + ["README.md"]


@pytest.fixture(scope="module")
def defined() -> set[str]:
    return _defined_names()


def test_the_package_s_docstrings_and_comments_name_what_exists(defined):
    stale = {p: s for p in SOURCES if (s := _stale(_prose_of_python(ROOT / p), defined))}
    assert not stale, "\n".join(f"{p}:{x}" for p, xs in stale.items() for x in xs)


def test_the_docs_name_what_exists(defined):
    stale = {p: s for p in PAGES if (s := _stale(_prose_of_markdown(ROOT / p), defined))}
    assert not stale, "\n".join(f"{p}:{x}" for p, xs in stale.items() for x in xs)


def test_a_stale_name_is_found(defined):
    """The checker itself, on names that no longer exist (the ones issue 39 found)."""
    lines = [(1, "joined by ``analysis.lines.join_lines`` (:class:`LineData`), see collect/line_tracer.py"),
             (2, "``collect.user_code.UserCode`` and :class:`TorchProfile` in nbprof/model.py")]
    assert _stale(lines, defined) == [
        "1: analysis.lines.join_lines (nbprof.analysis.lines has no join_lines)",
        "1: LineData (defined nowhere in nbprof)",
        "1: collect/line_tracer.py (no such file in nbprof/)",
    ]
