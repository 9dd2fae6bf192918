"""Which code is the user's, and how the user names it: notebook cells and the user's own files.

One answer for every ``--lines`` path (the hook both share, ``collect.line_hook``: for
``%%cprofile --lines`` and ``%%torchprof --lines``, and ``collect.lines`` reading torch's tree)
and for the cell names
every view shows. Line-level profiles follow only the user's code: the cell, the functions defined
in other cells of the notebook, and the user's own files; not the standard library, not installed
packages (site-packages, dist-packages, the interpreter's ``bin/`` scripts), not torch, IPython,
numpy, pandas or nbprof wherever they are installed from (an editable install of torch outside
site-packages is still torch).

Cells are named from IPython's own table, never from the shape of a file name: IPython compiles
each cell from a file name it makes up (``/tmp/ipykernel_<pid>/<hash>.py`` in a kernel,
``<ipython-input-N-...>`` in a terminal, names VS Code sets) and records it in
``shell.compile._filename_map`` (name -> execution count) while ``linecache`` keeps the text it
compiled. The table is read live, so cells compiled during the run (the profiled cell itself) are
known too. The text shown is the cell as typed (``history_manager.input_hist_raw``: ``!ls``,
``%time`` and the magic line as the user wrote them) when it has as many lines as the compiled
text, so that line numbers agree; otherwise the compiled text.

torch names the files of its Python frames without their ``sys.path`` prefix ("mymodel.py",
"torch/nn/modules/module.py"): ``learn`` (each user file seen running) and ``resolve`` map those
names back to the user's files.

Standard library only: the line hook and its recorders import it in interpreters without torch
or pandas (tests/test_line_tracer.py).
"""

from __future__ import annotations

import linecache
import os
import site
import sys
import sysconfig
from types import CodeType
from typing import Any

__all__ = ["UserCode", "library_dirs", "current_shell"]

_NBPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# installed anywhere (an editable or source install too), these are never the user's code
_LIBRARIES = ("torch", "IPython", "ipykernel", "numpy", "pandas")


def library_dirs() -> tuple[str, ...]:
    """Folders whose files are not the user's: the standard library, installed packages, the
    interpreters' scripts (a venv's ``bin/``, such as the ``nbprof`` command), nbprof, and the
    folders of ``_LIBRARIES`` that are imported; each as given and with its links resolved. Not
    the whole prefix: a system Python's is ``/usr``, and a project in ``/usr/src/app`` (as Docker
    images put it) is the user's."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    dirs = {_NBPROF_DIR} | {os.path.join(p, sub) for p in prefixes for sub in ("bin", "Scripts")}
    paths = sysconfig.get_paths()
    dirs.update(paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site.py has neither
        pass
    for name in _LIBRARIES:
        where = getattr(sys.modules.get(name), "__file__", None)
        if where:
            dirs.add(os.path.dirname(where))
    dirs = {d for d in dirs if d}
    dirs |= {os.path.realpath(d) for d in dirs}
    return tuple(sorted(os.path.join(os.path.abspath(d), "") for d in dirs))


def current_shell() -> Any:
    """The running IPython shell, or None (without importing IPython)."""
    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython

        return get_ipython()
    except Exception:
        return None


class UserCode:
    """Answers "is this code the user's?" and "what does the user call this file?" for one run.

    ``shell``: the IPython shell whose cells count as user code (None: a script, no cells)."""

    def __init__(self, shell: Any = None) -> None:
        table = getattr(getattr(shell, "compile", None), "_filename_map", None)
        # IPython's own dict, read live (an empty one too: the profiled cell joins it later)
        self.cells: dict[str, int] = table if isinstance(table, dict) else {}
        history = getattr(shell, "history_manager", None)
        self._raw: list[str] = getattr(history, "input_hist_raw", None) or []
        self._skip = library_dirs()
        self._files: dict[str, bool] = {}
        self._prefixes: list[str] | None = None
        self._resolved: dict[str, str | None] = {}
        self.by_stripped: dict[str, str] = {}  # torch's name of a user file -> its full path

    # -- which code is the user's -----------------------------------------------------------------

    def is_cell(self, filename: str) -> bool:
        return filename in self.cells

    def is_user_file(self, filename: str) -> bool:
        """A notebook cell, or a file on disk outside the library folders (``library_dirs``, and
        any ``site-packages`` / ``dist-packages`` folder); cached per name. Names in angle
        brackets (``<frozen ...>``, ``<string>``, code ``exec``'d or generated by torch.fx) are
        not files."""
        known = self._files.get(filename)
        if known is None:
            if filename in self.cells:
                known = True
            elif not filename or filename.startswith("<"):
                known = False
            else:
                path = os.path.abspath(filename)
                real = os.path.realpath(filename)
                parts = real.replace("\\", "/").split("/")
                known = (not path.startswith(self._skip) and not real.startswith(self._skip)
                         and "site-packages" not in parts and "dist-packages" not in parts and os.path.isfile(real))
            self._files[filename] = known
        return known

    def is_recorded_user_file(self, filename: str) -> bool:
        """A file a record names (a frame of a CUDA memory snapshot), perhaps recorded on another
        machine: the user's when ``is_user_file`` says so here; a file that is not here to look at
        is the user's unless its path is a library's (site-packages, dist-packages, a
        ``lib/pythonX.Y`` standard library, a torch / IPython / numpy / pandas folder) or it is not
        Python (a C++ frame: ``stacks="all"``)."""
        if self.is_user_file(filename):
            return True
        if filename in self.cells or not filename or filename.startswith("<") or os.path.exists(filename):
            return False
        if not filename.endswith(".py"):
            return False
        parts = filename.replace("\\", "/").split("/")
        if "site-packages" in parts or "dist-packages" in parts or any(p in _LIBRARIES for p in parts[:-1]):
            return False
        return not any(a == "lib" and b.startswith("python") for a, b in zip(parts, parts[1:]))

    def is_user_code(self, code: CodeType) -> bool:
        """A function (or a cell's or file's top level) of the user's. Comprehensions, generator
        expressions and lambdas are not followed on their own: they run inside one line of the
        code around them, whose time includes theirs (as line_profiler counts them). (The torch
        path asks ``is_user_file`` of their file instead, ``LineHook(nested=True)``: torch's tree
        has their frames, so operator syntax inside them joins to their own lines.)"""
        name = code.co_name
        if name.startswith("<") and name != "<module>":
            return False
        return self.is_user_file(code.co_filename)

    # -- how the user names it --------------------------------------------------------------------

    def cell_name(self, filename: str) -> str | None:
        """``"In [4]"`` for a cell, None for a file."""
        n = self.cells.get(filename)
        return None if n is None else f"In [{n}]"

    def cell_number(self, filename: str) -> int | None:
        return self.cells.get(filename)

    def cell_names(self) -> dict[str, str]:
        """Every cell the shell compiled: {file name: "In [n]"}."""
        return {f: f"In [{n}]" for f, n in list(self.cells.items())}

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

    # -- torch's names of files -------------------------------------------------------------------

    @property
    def prefixes(self) -> list[str]:
        """The prefixes torch strips from file names in this run (``sys.path`` when first asked)."""
        if self._prefixes is None:
            self._prefixes = _prefixes()
        return self._prefixes

    def canonical(self, filename: str) -> str:
        """A code object's file name as the line table names it: a script run by a relative path
        ("train.py") by its full path, as torch's tree names it once its prefix is put back."""
        if filename in self.cells or filename.startswith("<") or os.path.isabs(filename):
            return filename
        return os.path.abspath(filename)

    def learn(self, filename: str) -> None:
        """A user file seen running: remember the name torch will give it."""
        if filename in self.cells or filename.startswith("<"):
            return
        filename = self.canonical(filename)
        self.by_stripped.setdefault(_strip(filename, self.prefixes), filename)

    def resolve(self, name: str) -> str | None:
        """torch's name of a file (prefix stripped) -> the user file's full name, or None when it
        is not the user's."""
        if name in self._resolved:
            return self._resolved[name]
        full: str | None
        if name in self.cells:
            full = name
        elif name in self.by_stripped:
            full = self.by_stripped[name]
        elif name.startswith("<"):
            full = None
        elif os.path.isabs(name):
            full = name if self.is_user_file(name) else None
        else:
            full = None
            for prefix in self.prefixes:
                candidate = prefix + name
                if os.path.isfile(candidate):
                    full = candidate if self.is_user_file(candidate) else None
                    break
        self._resolved[name] = full
        return full


def _prefixes() -> list[str]:
    """torch's own list of the prefixes it strips from file names (torch.profiler.python_tracer),
    from ``sys.path`` as it is now; where torch is not imported (a cProfile run), the same rule
    by hand (never imported for it)."""
    if "torch" in sys.modules:
        try:
            from torch.profiler.python_tracer import _prefix_regex

            return list(_prefix_regex())
        except Exception:
            pass
    return sorted({os.path.abspath(p) + os.sep for p in sys.path if isinstance(p, str)}, reverse=True)


def _strip(filename: str, prefixes: list[str]) -> str:
    for prefix in prefixes:
        if filename.startswith(prefix):
            return filename[len(prefix):]
    return filename
