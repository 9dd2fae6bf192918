"""``collect.user_code.UserCode``: the one answer both ``--lines`` paths (``%%cprofile`` and
``%%torchprof``) give to "is this the user's code?" and "what is this cell called?", checked
against IPython's own table of compiled cells in a real shell and files made here."""

from __future__ import annotations

import sys

import nbprof
from nbprof.collect.user_code import UserCode

from .conftest import run


def test_cells_are_named_from_ipythons_table_read_live(shell):
    user = UserCode(shell)  # made before the cell below is compiled, as a profile starting in it is
    run(shell, "def named_here():\n    return 1")
    code = shell.user_ns["named_here"].__code__
    n = shell.compile._filename_map[code.co_filename]  # IPython's own answer
    assert user.cell_name(code.co_filename) == f"In [{n}]" and user.cell_number(code.co_filename) == n
    assert user.is_user_code(code) and user.is_cell(code.co_filename)
    assert user.cell_names()[code.co_filename] == f"In [{n}]"
    assert user.source(code.co_filename) == "def named_here():\n    return 1\n"


def test_libraries_are_not_the_users_wherever_they_live(tmp_path, monkeypatch):
    import json

    import IPython

    mine = tmp_path / "app" / "mine.py"
    mine.parent.mkdir()
    mine.write_text("def f():\n    return [i for i in range(3)]\n")
    tool = tmp_path / "bin" / "tool.py"
    tool.parent.mkdir()
    tool.write_text("x = 1\n")
    # a system Python's prefix holds the user's project too (/usr/src/app under /usr): only its
    # bin/ scripts are not the user's
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    user = UserCode(None)
    assert user.is_user_file(str(mine)) and not user.is_user_file(str(tool))
    assert not user.is_user_file(json.__file__)  # the standard library
    assert not user.is_user_file(IPython.__file__)  # installed packages
    assert not user.is_user_file(nbprof.__file__)  # nbprof itself, from wherever it runs
    assert not user.is_user_file("<string>") and not user.is_user_file(str(tmp_path / "app" / "gone.py"))
    # a comprehension runs inside its line: cProfile's lines do not follow it on its own
    namespace: dict = {}
    exec(compile(mine.read_text(), str(mine), "exec"), namespace)
    f = namespace["f"].__code__
    inner = next(c for c in f.co_consts if hasattr(c, "co_name"))
    assert user.is_user_code(f) and not user.is_user_code(inner) and user.is_user_file(inner.co_filename)


def test_torchs_stripped_names_map_back_to_the_users_files(tmp_path, monkeypatch):
    mine = tmp_path / "pkg_for_names" / "model.py"
    mine.parent.mkdir()
    mine.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    user = UserCode(None)
    # torch's python tracer names it without its sys.path prefix
    assert user.resolve("pkg_for_names/model.py") == str(mine)
    assert user.resolve("json/__init__.py") is None and user.resolve("<string>") is None
    user.learn(str(mine))
    assert user.by_stripped["pkg_for_names/model.py"] == str(mine)
