"""nbprof/ type-checks with mypy (settings in pyproject.toml's [tool.mypy]); no file of the project
uses a name it never defines (pyflakes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_passes_on_the_package(tmp_path):
    pytest.importorskip("mypy")
    run = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "Success: no issues found" in run.stdout


# pyflakes cannot tell a closure called only before its enclosing function's ``del name`` from one
# that reads the name after: these are read, and called before the del
CLOSURES_BEFORE_DEL = {("nbprof/collect/chrome_trace.py", "field")}


def test_no_file_uses_a_name_it_never_defines():
    """In the fast tier, over every Python file of the project: a name left undefined in a test of
    the slow tier (a bound cut by an edit, 2026-12-02) showed only in a 30-minute CI run."""
    pytest.importorskip("pyflakes")
    from pyflakes import api, messages, reporter

    class Collect(reporter.Reporter):
        def __init__(self) -> None:
            super().__init__(None, None)
            self.found: list[tuple[str, str, str]] = []

        def flake(self, message) -> None:
            if isinstance(message, (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)):
                where = Path(message.filename).resolve().relative_to(ROOT).as_posix()
                self.found.append((where, message.message_args[0],
                                   f"{where}:{message.lineno}: " + message.message % message.message_args))

        def syntaxError(self, filename, msg, lineno, offset, text) -> None:  # noqa: N802 (pyflakes' name)
            self.found.append((filename, "", f"{filename}:{lineno}: {msg}"))

        def unexpectedError(self, filename, msg) -> None:  # noqa: N802
            self.found.append((filename, "", f"{filename}: {msg}"))

    files = [p for folder in ("nbprof", "tests", "benchmarks", "scripts", "docs")
             for p in sorted((ROOT / folder).rglob("*.py")) if "_build" not in p.parts]
    assert len(files) > 200
    collect = Collect()
    for path in files:
        api.checkPath(str(path), collect)
    assert [text for where, name, text in collect.found if (where, name) not in CLOSURES_BEFORE_DEL] == []
