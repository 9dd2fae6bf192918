"""%%cprofile --lines in a real IPython shell, against line_profiler run on the same functions,
the cells as typed, and hand-worked counts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from . import htmltext
from .conftest import reports, run

ROOT = Path(__file__).resolve().parents[1]

# a generator, an exception caught and one finally, an exception out of a function, recursion, a
# genexpr, a while loop: each one
# makes Python's line events differ from "one hit per statement run"
WORKLOAD = """
def gen(n):
    for i in range(n):
        if i % 3 == 0:
            yield i
        else:
            continue

def risky(i):
    try:
        if i % 2:
            raise ValueError(i)
        return i
    except ValueError:
        return -i
    finally:
        pass

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def thrower(i):
    if i % 4 == 1:
        raise KeyError(i)
    return i

def work(n):
    total = 0
    for v in gen(n):
        total += risky(v)
        try:
            total += thrower(v)
        except KeyError:
            total -= 1
    total += sum(x * x for x in range(n))
    total += fib(10)
    while n > 0:
        n -= 7
    return total
"""
FUNCTIONS = ("gen", "risky", "fib", "thrower", "work")


@pytest.fixture
def workload(shell):
    result, _ = run(shell, WORKLOAD)
    assert result.error_in_exec is None
    return shell


def _line_profiler_hits(shell, call: str) -> dict[str, dict[int, int]]:
    """line_profiler's hits per function and line for ``call`` in the shell's namespace."""
    from line_profiler import LineProfiler

    lp = LineProfiler()
    for name in FUNCTIONS:
        lp.add_function(shell.user_ns[name])
    lp.enable_by_count()
    try:
        eval(call, shell.user_ns)
    finally:
        lp.disable_by_count()
    return {name: {line: hits for line, hits, _ in rows} for (_, _, name), rows in lp.get_stats().timings.items()}


def test_hits_equal_line_profiler(workload):
    shell = workload
    theirs = _line_profiler_hits(shell, "work(100)")
    assert set(theirs) == set(FUNCTIONS) and all(theirs.values())
    result, _ = run(shell, "%%cprofile -q -o cp --lines\nwork(100)")
    assert result.error_in_exec is None
    lines = shell.user_ns["cp"].lines()
    for name in FUNCTIONS:
        rows = lines[lines["function"] == name]
        assert dict(zip(rows["line"].tolist(), rows["hits"].tolist())) == theirs[name], name
    # the generator expression runs inside one of work's lines: no rows of its own, its time in that line's
    assert set(lines["function"]) == {*FUNCTIONS, "<module>"}
    # the function table is cProfile's as without --lines
    stats = shell.user_ns["cp"].stats.set_index("function")
    assert stats.loc["fib", "ncalls"] == 177 and stats.loc["gen", "ncalls"] == 35 and stats.loc["thrower", "ncalls"] == 34


def test_columns_cells_and_time(workload):
    shell = workload
    run(shell, "import time\ndef nap():\n    time.sleep(0.03)\n    return 1")
    result, _ = run(shell, "%%cprofile -q -o cp --lines\na = work(30)\nb = nap()\nc = [nap() for _ in range(2)]")
    cp = shell.user_ns["cp"]
    lines = cp.lines()
    assert list(lines.columns) == ["cell", "file", "line", "function", "function_line", "source", "hits", "time_us",
                                   "per_hit_us", "self_time_us"]
    cell_n = shell.execution_count - 1
    top = lines[lines["function"] == "<module>"]
    assert top["cell"].tolist() == [f"In [{cell_n}]"] * 3
    assert top["line"].tolist() == [2, 3, 4]  # the magic line is line 1
    assert (top["function_line"] == 1).all()
    nap = lines[lines["function"] == "nap"]
    assert nap["cell"].iloc[0] == f"In [{cell_n - 1}]" and (nap["function_line"] == 2).all()
    assert nap["line"].tolist() == [3, 4] and nap["hits"].tolist() == [3, 3]
    sleep = nap.iloc[0]
    assert sleep["time_us"] >= 3 * 30_000  # three naps of 30 ms
    assert sleep["per_hit_us"] == pytest.approx(sleep["time_us"] / 3)
    # a line's time includes what it calls: each cell line at least its naps
    by_line = dict(zip(top["line"], top["time_us"]))
    assert by_line[3] >= 30_000 and by_line[4] >= 60_000 and by_line[3] < by_line[4]
    # and the three cell lines hold the naps the cell made, within the cell's wall time (no bound
    # on nbprof's own start and end: that is the machine's, and a busy one stretches it)
    wall_us = cp.meta.wall_s * 1e6
    assert 3 * 30_000 <= sum(by_line.values()) <= wall_us
    # own time: without the lines of the user's code a line called. The sleep calls none; a cell
    # line that calls nap keeps at most its time less the naps it called (each nap line holds its
    # 30 ms sleep); the lines' own times add up to the cell lines' times
    assert sleep["self_time_us"] == sleep["time_us"]
    own = dict(zip(top["line"], top["self_time_us"]))
    assert 0 <= own[3] <= by_line[3] - 30_000 and 0 <= own[4] <= by_line[4] - 2 * 30_000
    assert lines["self_time_us"].sum() == pytest.approx(sum(by_line.values()), rel=1e-9)
    assert (lines["self_time_us"] <= lines["time_us"] + 1e-9).all()
    # the files' texts are kept: each row's source is its line there
    for row in lines.itertuples():
        assert cp.meta.sources[row.file].splitlines()[row.line - 1] == row.source
    # the report: the sleep is the hottest line (by own time), not the cell lines that called it
    text = cp.report().text()
    block = text[text.index("top lines by own time"):].splitlines()
    assert "time.sleep(0.03)" in block[4] and f"In [{cell_n - 1}] line 3" in block[4]


def test_source_is_the_cell_as_typed(workload):
    shell = workload
    cell = ("%%cprofile -q -o cp --lines\n"
            "x = work(10)  # a comment\n"
            "%time y = work(20)\n"
            "!true\n"
            "z = [x,\n"
            "     y]\n")
    result, _ = run(shell, cell)
    assert result.error_in_exec is None
    lines = shell.user_ns["cp"].lines()
    typed = cell.splitlines()
    top = lines[lines["function"] == "<module>"]
    assert top["line"].tolist()[:4] == [2, 3, 4, 5]  # and 6 where Python gives "y]" a line event (3.11)
    for row in top.itertuples():
        assert row.source == typed[row.line - 1]  # "%time ...", "!true": the raw line, not IPython's code
    work = lines[lines["function"] == "work"]
    # the cell that defined work, as typed but for its first, empty line: IPython drops leading empty
    # lines before compiling, so the line numbers (in tracebacks too) are those of the text without it
    earlier = WORKLOAD.lstrip("\n").splitlines()
    for row in work.itertuples():
        assert row.source == earlier[row.line - 1]
    assert shell.user_ns["cp"].meta.sources[top["file"].iloc[0]] == cell


def test_user_files_are_followed_libraries_are_not(shell, tmp_path):
    mod = tmp_path / "mine_for_lines.py"
    mod.write_text("import json\n\ndef encode(n):\n    out = []\n    for i in range(n):\n"
                   "        out.append(json.dumps({'i': i}))\n    return out\n")
    sys.path.insert(0, str(tmp_path))
    try:
        run(shell, "import mine_for_lines, textwrap")
        result, _ = run(shell, "%%cprofile -q -o cp --lines\nmine_for_lines.encode(50)\ntextwrap.dedent('  a\\n  b')")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mine_for_lines", None)
    assert result.error_in_exec is None
    cp = shell.user_ns["cp"]
    lines = cp.lines()
    mine = lines[lines["file"] == str(mod)]
    assert mine["cell"].isna().all()
    assert dict(zip(mine["line"], mine["hits"])) == {4: 1, 5: 51, 6: 50, 7: 1}
    assert mine["source"].tolist() == ["    out = []", "    for i in range(n):",
                                       "        out.append(json.dumps({'i': i}))", "    return out"]
    # json, textwrap (the standard library), IPython (site-packages) and nbprof ran: none has a line
    assert set(lines["file"]) == {str(mod), lines["file"].iloc[0]}
    assert not lines["file"].str.contains("json|textwrap|site-packages|nbprof").any()
    # cProfile's table still has the library functions
    assert {"dumps", "dedent"} <= set(cp.stats["function"])
    assert "In [" not in str(lines.loc[lines["file"] == str(mod), "cell"].tolist())


def test_without_the_flag_there_are_no_lines(workload):
    shell = workload
    run(shell, "%%cprofile -q -o cp\nwork(10)")
    cp = shell.user_ns["cp"]
    lines = cp.lines()
    assert len(lines) == 0 and list(lines.columns)[:3] == ["cell", "file", "line"]
    assert lines["hits"].dtype == np.int64 and lines["time_us"].dtype == np.float64
    assert "top lines" not in cp.report().text()
    assert "run %%cprofile --lines" in cp.report().html(include_library=False)
    assert sys.gettrace() is None


@pytest.mark.parametrize("ending", ["raise ValueError('boom')", "raise KeyboardInterrupt"])
def test_the_tracer_is_removed_whatever_the_cell_does(workload, ending):
    shell = workload
    result, _ = run(shell, f"%%cprofile -q -o cp --lines\nwork(10)\n{ending}")
    assert result.error_in_exec is not None
    assert sys.gettrace() is None
    if sys.version_info >= (3, 12):
        assert all(sys.monitoring.get_tool(i) is None for i in (3, 4))
    lines = shell.user_ns["cp"].lines()
    assert set(lines["function"]) >= {"work", "fib"}


def test_a_debugger_already_running_is_left_alone(workload):
    """The one policy of both --lines magics toward another tracer (collect/line_hook.py; the torch
    twin is in test_lines_torch.py): a real debugger (bdb, pdb's base) with a breakpoint in work,
    running as the cell starts, keeps running and stops at its breakpoint once per call of the
    profiled cell. On 3.10-3.11 (one trace function per thread) nbprof follows no line and says
    so, in the lines' notes, the report's notes and its Source tab; cProfile's table is whole. On
    3.12+ both run: the lines are line_profiler's, as without the debugger."""
    from .other_tracers import debugger_running

    shell = workload
    theirs = _line_profiler_hits(shell, "work(10)")["work"]
    with debugger_running(shell.user_ns["work"]) as dbg:
        result, captured = run(shell, "%%cprofile -o cp --lines\nwork(10)\nwork(10)")
        assert sys.gettrace() == dbg.trace_dispatch
    assert sys.gettrace() is None
    assert result.error_in_exec is None
    assert len(dbg.stops) == 2  # its breakpoint, once per call
    cp = shell.user_ns["cp"]
    assert int(cp.stats.set_index("function").loc["work", "ncalls"]) == 2
    lines = cp.lines()
    [report] = reports(captured)
    if sys.version_info >= (3, 12):
        work = lines[lines["function"] == "work"]
        assert dict(zip(work["line"].tolist(), work["hits"].tolist())) == {k: 2 * v for k, v in theirs.items()}
        assert lines.attrs["notes"] == [] and not any("tracer" in n for n in cp.meta.notes)
        return
    assert len(lines) == 0
    [note] = lines.attrs["notes"]
    assert "another tracer runs (Breakpoints.trace_dispatch (tests.other_tracers)" in note, note
    assert note in cp.meta.notes
    assert note in htmltext.text(report["text/html"])  # the report's notes and its Source tab say it
    assert htmltext.text(report["text/html"]).count(note) == 2


def test_line_profiler_already_running_is_left_alone(workload):
    """line_profiler counting work as the cell starts: its counts of the cell's call are what it
    counts alone, and it still runs after. On 3.10-3.11 nbprof follows no line and says so; on 3.12+
    line_profiler holds sys.monitoring's profiler id (2), which cProfile itself needs: %%cprofile
    does not start, in one line, and the cell does not run (test_nested_profilers' rule)."""
    from .other_tracers import hits_of, line_profiler_running

    shell = workload
    theirs = _line_profiler_hits(shell, "work(10)")["work"]
    with line_profiler_running(shell.user_ns["work"]) as lp:
        held = sys.gettrace()
        result, _ = run(shell, "%%cprofile -q -o cp_lp --lines\nwork(10)")
        assert sys.gettrace() is held
    assert sys.gettrace() is None
    if sys.version_info >= (3, 12):
        assert "already active" in str(result.error_in_exec) and "cp_lp" not in shell.user_ns
        return
    assert result.error_in_exec is None
    assert hits_of(lp, "work") == theirs  # undisturbed: the cell's call counted as alone
    cp = shell.user_ns["cp_lp"]
    assert len(cp.lines()) == 0 and int(cp.stats.set_index("function").loc["work", "ncalls"]) == 1
    assert any("another tracer runs (_LineProfilerManager" in n for n in cp.meta.notes), cp.meta.notes


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: sys.settrace runs beside sys.monitoring's tools")
def test_a_tracer_the_cell_sets_replaces_it_and_is_said(workload):
    shell = workload
    try:
        result, _ = run(shell, "%%cprofile -q -o cp --lines\nimport sys\nwork(5)\nsys.settrace(lambda *a: None)\n"
                               "work(5)")
        assert sys.gettrace() is not None  # the cell's own tracer stays
    finally:
        sys.settrace(None)
    cp = shell.user_ns["cp"]
    assert any("replaced nbprof's line tracer" in n for n in cp.meta.notes)
    lines = cp.lines()
    first = lines[(lines["function"] == "work") & (lines["source"] == "    total = 0")]
    assert first["hits"].tolist() == [1]  # the first call only: the second ran under the cell's tracer


def test_the_report_lists_the_hottest_lines_with_their_source(workload):
    shell = workload
    run(shell, "def hot():\n    return sum(i * i for i in range(200_000))")
    result, captured = run(shell, "%%cprofile --lines\nhot()\nwork(5)")
    [report] = reports(captured)
    text = report["text/plain"]
    header = text.index("top lines by own time")
    first = text[header:].splitlines()[4]  # title, rule, header, rule, then the hottest line
    assert "return sum(i * i for i in range(200_000))" in first
    assert f"In [{shell.execution_count - 2}] line 2" in first


def test_command_line_lines(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""\
        import time

        def slow(n):
            for _ in range(n):
                time.sleep(0.01)

        slow(3)
        """))
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-m", "nbprof", "cprofile", "--lines", "--no-html", str(script)],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    block = text[text.index("top lines by own time"):]
    rows = [r for r in block.splitlines() if "prog.py:" in r]
    assert "prog.py:5" in rows[0] and "time.sleep(0.01)" in rows[0] and " 3 " in rows[0]  # the hottest
    assert any("prog.py:7" in r and "slow(3)" in r for r in rows)  # the script's top level
    assert any("prog.py:4" in r and " 4 " in r for r in rows)  # the loop's header: 3 iterations + the end


def test_the_line_magic_follows_its_statement(workload):
    shell = workload
    typed = "%cprofile -q -o lm --lines work(10)"
    result, _ = run(shell, typed)
    assert result.error_in_exec is None
    lines = shell.user_ns["lm"].lines()
    top = lines[lines["function"] == "<module>"]
    # the statement, named as the cell that ran it (not "In [0]"), its line as typed
    assert top["cell"].tolist() == [f"In [{max(shell.compile._filename_map.values())}]"]
    assert top["line"].tolist() == [1] and top["source"].tolist() == [typed]
    assert lines.loc[lines["function"] == "work", "hits"].sum() > 0
