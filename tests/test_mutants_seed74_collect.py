"""What seed 74's sample of mutants (docs/testing.md) showed no test held in ``nbprof.cli`` and
``nbprof.collect`` (lines, line_hook), each against an answer of its own: the global names a plain
``python job.py`` gives a script (a subprocess, no nbprof), the message a profiler already running
makes nbprof stop with (the script not run, the other profiler left as it was), ``LineHook``'s
documented return, the default of a saved line table without a "method" (the same file with the
writer's "tracer" spelled out), and the lines of a script run by ``nbprof torch --lines``, whose
``cpu_total_us`` is, by the table's definition, the line's own time plus that of the calls it made
into the user's code (which lines call what is known from the script the test writes)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap

import pytest

import nbprof
from nbprof import cli

from .conftest import needs_torch
from .synthetic import Trace
from .test_cluster import LINE_CELL


@pytest.fixture
def here(tmp_path, monkeypatch):
    """tmp_path as the current folder; sys.argv and sys.path given back after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


# kills nbprof.cli.x__load_target__mutmut_41
def test_a_script_has_the_global_names_plain_python_gives_it(here, capsys):
    """The script's globals() names, printed by the script: nbprof's are those a plain
    ``python job.py`` gives (no name of nbprof's own added, none left out), ``__name__`` "__main__"."""
    (here / "job.py").write_text("print('names', sorted(globals()))\nprint('name', __name__)\n")
    want = subprocess.run([sys.executable, "job.py"], cwd=here, capture_output=True, text=True, timeout=60)
    assert want.returncode == 0, want.stderr
    theirs = dict(line.split(" ", 1) for line in want.stdout.splitlines())
    assert cli.main(["cprofile", "-q", "--no-html", "job.py"]) == 0
    ours = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines() if line.startswith("name"))
    assert ours["name"] == theirs["name"] == "__main__"
    # the same names, none added and none missing (``__annotations__`` too, which a script may read)
    assert sorted(ast.literal_eval(ours["names"])) == sorted(ast.literal_eval(theirs["names"]))


# kills nbprof.cli.x_main__mutmut_107
def test_a_profiler_already_running_stops_the_command_with_its_reason(here, capsys):
    """A cProfile the caller already enabled holds the profile hook: ``nbprof cprofile`` does not
    start, says why on one line of stderr (exit 2, as for a usage error), runs nothing, and leaves
    the caller's cProfile enabled."""
    import cProfile

    (here / "ran.py").write_text("open('ran', 'w').close()\n")
    outer = cProfile.Profile()
    outer.enable()
    try:
        status = cli.main(["cprofile", "-q", "--no-html", "ran.py"])
        still = sys.getprofile()
    finally:
        outer.disable()
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("python -m nbprof: cannot start cProfile: another profiler is already active"), err
    assert err.count("\n") == 1 and err.endswith("stop it first (e.g. its .disable())\n"), err
    assert still is not None  # the caller's profiler was still the one set
    assert not (here / "ran").exists()


# kills nbprof.collect.line_hook.xǁLineHookǁstart_settrace__mutmut_17
def test_the_settrace_hook_says_whether_it_installed_itself():
    """``LineHook.start_settrace``'s documented answer: True when it installed its trace function
    (``sys.gettrace()`` is it until ``stop``), False with ``refused`` set when another was there
    (which stays)."""
    from nbprof.collect.line_hook import MONITORING, LineHook
    from nbprof.collect.user_code import UserCode

    if MONITORING:
        pytest.skip("Python 3.12+ uses sys.monitoring, not sys.settrace")
    if sys.gettrace() is not None:
        pytest.skip("a trace function (a debugger, coverage) is already set in this process")

    def call(frame, event, arg):
        return None

    def other(frame, event, arg):
        return None

    hook = LineHook(UserCode(None), nested=False)
    try:
        installed = hook.start_settrace(call, lambda f: None, sys._getframe())
        current = sys.gettrace()
    finally:
        hook.stop()
    assert installed is True and current is call and hook.refused is None
    assert sys.gettrace() is None
    refused = LineHook(UserCode(None), nested=False)
    sys.settrace(other)
    try:
        answer = refused.start_settrace(call, lambda f: None, sys._getframe())
        current = sys.gettrace()
    finally:
        sys.settrace(None)
        refused.stop()
    assert answer is False and current is other and "another tracer runs" in (refused.refused or "")


def _lines_doc(method: str | None) -> dict:
    """A hand-made trace: two ops, each on its own line of a cell (nbprofLines as --lines saves it)."""
    t = Trace()
    t.op("aten::mm", 10.0, 5.0)
    t.op("aten::add", 20.0, 3.0)
    doc = t.doc()
    data = {"version": 1, "cells": {LINE_CELL: "In [1]"},
            "frames": {"file": [LINE_CELL] * 2, "line": [1, 2], "function": ["<module>"] * 2, "function_line": [1, 1]},
            "stacks": [[], [0], [1]], "ops": {"external_id": [1, 2], "stack": [1, 2]},
            "allocs": {"stack": [], "bytes": []}, "notes": []}
    if method is not None:
        data["method"] = method
    doc["nbprofLines"] = {"line_data": data, "sources": {LINE_CELL: "y = torch.mm(a, a)\nz = y + 1\n"}}
    return doc


# kills nbprof.collect.lines.x_checked_lines__mutmut_135
def test_a_saved_line_table_without_a_method_reads_as_the_tracers(tmp_path):
    """A saved line table that does not name its method (as --lines' line tracer wrote them before
    "method" was saved) reads as one the tracer recorded: ``lines().attrs["method"]`` is "tracer",
    as for the same file that spells it out, and the tables are the same."""
    (tmp_path / "bare.json").write_text(json.dumps(_lines_doc(None)))
    (tmp_path / "named.json").write_text(json.dumps(_lines_doc("tracer")))
    bare, named = nbprof.load_trace(tmp_path / "bare.json"), nbprof.load_trace(tmp_path / "named.json")
    assert bare.meta.line_data is not None and bare.meta.line_data["method"] == "tracer"
    b, n = bare.lines(), named.lines()
    assert b.attrs["method"] == n.attrs["method"] == "tracer"
    assert b.to_dict("list") == n.to_dict("list")
    assert b["ops"].tolist() == [1, 1, 0]  # hand-made: one op per line, nothing outside


SCRIPT = """\
import torch
from helper import block

x = torch.randn(8, 8)
for i in range(4):
    z = block(x)
    w = z * 3
"""


# kills nbprof.collect.lines.x_read_lines__mutmut_57
@needs_torch
def test_a_scripts_line_totals_hold_only_the_calls_it_made(here):
    """``nbprof torch --lines train.py``: the script's top-level lines run from a frame torch's tracer
    does not record (exec'd), so their operators are placed by the calls made from its lines. By
    the table's definition a line's ``cpu_total_us`` is its own time plus that of the calls it made
    into the user's code; from the script: lines 4 (``torch.randn``) and 7 (``z * 3``) call none of
    it (total == self), line 6 calls ``block`` (helper.py's lines 5 and 6)."""
    (here / "helper.py").write_text("import torch\n\n\ndef block(x):\n    y = torch.tanh(x)\n    return y @ y\n")
    (here / "train.py").write_text(textwrap.dedent(SCRIPT))
    assert cli.main(["torch", "--lines", "-q", "--no-html", "--export", "t.json.gz", "train.py"]) == 0
    lines = nbprof.load_trace(here / "t.json.gz").lines()
    mine = lines[lines["file"].notna()]
    by = {(os.path.basename(row.file), row.line): row for row in mine.itertuples()}
    assert by[("train.py", 4)].ops == 1 and by[("train.py", 7)].ops == 4  # counted by hand
    for key in (("train.py", 4), ("train.py", 7), ("helper.py", 5), ("helper.py", 6)):
        assert by[key].cpu_total_us == pytest.approx(by[key].self_cpu_us), (key, mine)
    six = by[("train.py", 6)]
    called = by[("helper.py", 5)].self_cpu_us + by[("helper.py", 6)].self_cpu_us
    assert six.cpu_total_us == pytest.approx(six.self_cpu_us + called), mine
