"""Which code is the user's, and how the user names it: notebook cells and the user's own files.

Line-level profiles (``--lines``) follow only the user's code: the cell, the functions defined in
other cells of the notebook, and the user's own files; not the standard library, not installed
packages (site-packages, dist-packages, anything under the interpreter's prefix: a venv's ``bin/``
scripts too), not nbprof.

Cells are named from IPython's own table, never from the shape of a file name: IPython compiles
each cell from a file name it makes up (``/tmp/ipykernel_<pid>/<hash>.py`` in a kernel,
``<ipython-input-N-...>`` in a terminal, names VS Code sets) and records it in
``shell.compile._filename_map`` (name -> execution count) while ``linecache`` keeps the text it
compiled. The text shown is the cell as typed (``history_manager.input_hist_raw``: ``!ls``,
``%time`` and the magic line as the user wrote them) when it has as many lines as the compiled
text, so that line numbers agree; otherwise the compiled text.
"""

from __future__ import annotations

import linecache
import os
import site
import sys
import sysconfig
from types import CodeType
from typing import Any

__all__ = ["UserCode", "library_dirs"]

_NBPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def library_dirs() -> tuple[str, ...]:
    """Folders whose files are not the user's: the standard library, installed packages, the
    interpreter's prefixes (a venv's ``bin/`` scripts, such as the ``nbprof`` command) and nbprof."""
    dirs = {_NBPROF_DIR, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths = sysconfig.get_paths()
    dirs.update(paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site.py has neither
        pass
    return tuple(sorted(os.path.join(os.path.abspath(d), "") for d in dirs if d))


class UserCode:
    """Answers "is this code the user's?" and "what does the user call this file?" for one run.

    ``shell``: the IPython shell whose cells count as user code (None: a script, no cells). Its
    table is read live, so cells compiled during the run are known too."""

    def __init__(self, shell: Any = None) -> None:
        compiler = getattr(shell, "compile", None)
        self.cells: dict[str, int] = getattr(compiler, "_filename_map", None) or {}
        history = getattr(shell, "history_manager", None)
        self._raw: list[str] = getattr(history, "input_hist_raw", None) or []
        self._skip = library_dirs()
        self._files: dict[str, bool] = {}

    def is_cell(self, filename: str) -> bool:
        return filename in self.cells

    def is_user_file(self, filename: str) -> bool:
        """A notebook cell, or a file on disk outside the library folders; cached per name."""
        known = self._files.get(filename)
        if known is None:
            if filename in self.cells:
                known = True
            elif not filename or filename.startswith("<"):  # <frozen ...>, <string>, <stdin>
                known = False
            else:
                known = not os.path.abspath(filename).startswith(self._skip)
            self._files[filename] = known
        return known

    def is_user_code(self, code: CodeType) -> bool:
        """A function (or a cell's or file's top level) of the user's. Comprehensions, generator
        expressions and lambdas are not followed on their own: they run inside one line of the
        code around them, whose time includes theirs (as line_profiler counts them)."""
        name = code.co_name
        if name.startswith("<") and name != "<module>":
            return False
        return self.is_user_file(code.co_filename)

    def cell_name(self, filename: str) -> str | None:
        """``"In [4]"`` for a cell, None for a file."""
        n = self.cells.get(filename)
        return None if n is None else f"In [{n}]"

    def cell_number(self, filename: str) -> int | None:
        return self.cells.get(filename)

    def source(self, filename: str) -> str:
        """The text of a cell (as typed, where its lines match the compiled ones) or a file; ""
        when it cannot be read."""
        lines = linecache.getlines(filename)
        n = self.cells.get(filename)
        if n is not None and 0 <= n < len(self._raw):
            raw = self._raw[n]
            if raw and len(raw.splitlines()) == len(lines):
                return raw if raw.endswith("\n") else raw + "\n"
        return "".join(lines)
