"""What seed 63's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: the error a comparison by a name column raises, pstats of a cell whose profile another
thread fed, the outputs a real IPython shell captured, tqdm's bar drawn in a pseudo-terminal."""

from __future__ import annotations

import pstats
import subprocess
import sys

import pytest

import nbprof
from nbprof.errors import OptionError

from .conftest import run, trace_path
from .test_cluster import cpu_only_folder
from .test_flame import SPIN


# ---------------------------------------------------------------- comparison._compare_torch


def test_comparing_torch_profiles_by_name_says_a_number_column_is_needed():
    """``metric="name"`` is a sort key of the tables, but a comparison needs numbers: the error
    says so in one line, naming the column refused and what to pass instead."""
    p = nbprof.load_trace(trace_path("two_streams"))
    with pytest.raises(OptionError) as info:
        nbprof.compare(p, p, metric="name")
    msg = str(info.value)
    assert "number column" in msg and "self_cpu_us" in msg and msg.endswith("not name") and "\n" not in msg


# ---------------------------------------------------------------- run.runner.PythonRun._build

THREADED = "import sys, threading" + SPIN + """def feeding(prof, go):
    prof.enable()  # the cell's own profiler, now recording this thread too
    go.set()
    for _ in range(30):
        spin(20_000)
"""

# Python < 3.12: sys.getprofile() is the cell's cProfile.Profile; enabled in a second thread, both
# threads' calls go onto its one stack while they take turns
FED = """%%cprofile -q -o fed
_go = threading.Event()
_t = threading.Thread(target=feeding, args=(sys.getprofile(), _go))
_t.start()
_go.wait()
for _ in range(30):
    spin(20_000)
_t.join()
"""


def test_the_other_threads_note_is_for_python_312_on(shell):
    """The note "other threads ran Python code ... on Python 3.12+ cProfile records their calls" is
    about 3.12+'s cProfile. From 3.12 a cell that starts no thread gets no such note. Before 3.12
    only a thread that enables the cell's own profiler mixes into it: pstats of that profile then
    shows a function with more own time than cumulative time (which one stack never gives), and
    still the note, whose reason does not hold there, is not given."""
    if sys.version_info >= (3, 12):
        result, _ = run(shell, "%%cprofile -q -o fed\ns = sum(i * i for i in range(10_000))")
    else:
        run(shell, THREADED)
        result, _ = run(shell, FED)
        stats = pstats.Stats(shell.user_ns["fed"].profiler).stats
        assert any(tt > ct + 1e-6 for _, _, tt, ct, _ in stats.values())
    assert result.error_in_exec is None
    notes = shell.user_ns["fed"].meta.notes
    assert not [n for n in notes if n.startswith("other threads ran Python code")]


# ---------------------------------------------------------------- views.progress.Progress.done


def test_a_status_line_done_with_can_show_a_new_one(shell, monkeypatch):
    """A status line cleared (``done``) and started again shows again: in a real shell's outputs,
    the first stage, its clearing, the second stage in an output of its own, its clearing."""
    from nbprof.views import progress

    monkeypatch.setattr(progress, "BIG_TRACE_BYTES", 0)
    shell.user_ns["_progress"] = progress.Progress()
    code = ("_progress.start_if_big(1)\n_progress.stage('first')\n_progress.done()\n"
            "_progress.start_if_big(1)\n_progress.stage('second')\n_progress.done()")
    result, captured = run(shell, code)
    assert result.error_in_exec is None
    texts = [o.data.get("text/plain", "") for o in captured.outputs]
    assert [t.split(" (")[0] for t in texts] == ["nbprof: first", "", "nbprof: second", ""]
    ids = [o.transient["display_id"] for o in captured.outputs]
    assert ids[0] == ids[1] != ids[2] == ids[3]


# ---------------------------------------------------------------- views.progress.RankProgress


def test_the_ranks_bar_stays_when_tqdms_environment_says_not_to_leave_bars(tmp_path):
    """tqdm reads its defaults from TQDM_* variables (TQDM_LEAVE="" turns ``leave`` off for every
    bar that does not set it): the folder's bar in a pseudo-terminal still stays on screen at 3/3,
    ended by its one newline, as without the variable (tests/test_progress.py)."""
    from .test_progress import _env, terminal_bar

    folder = cpu_only_folder(tmp_path / "cpu")
    env = dict(_env(), TQDM_LEAVE="")
    check = subprocess.run([sys.executable, "-c", "import tqdm; print(tqdm.tqdm(disable=True).leave)"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert check.stdout.strip() == "False"  # the variable does reach tqdm's defaults
    bar = terminal_bar(folder, env)
    draws = [d for d in bar.split("\r") if d.strip()]
    assert "3/3" in draws[-1] and "100%" in draws[-1]
    assert bar.rstrip(" ").endswith("\n") and bar.count("\n") == 1
