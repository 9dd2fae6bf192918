"""The line hook of ``--lines`` (``collect.line_hook``) and its two recorders on every Python of
this machine (pyenv's, as tests/test_python_versions.py finds them), without torch or numpy (the
hook and the recorders are the standard library only): the lines of a user file's function in the
order they ran, counted by hand, beside cProfile (sys.monitoring tool 2 on 3.12+); and the one
policy toward another tool, the same for both recorders: a trace function already set (3.10-3.11)
or both of nbprof's tool ids taken (3.12+) is left alone, nothing of nbprof's is installed and
``refused`` says why; on 3.12+ a ``sys.settrace`` function runs beside nbprof's; and nothing is
left behind after ``stop``."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYENV = Path.home() / ".pyenv" / "versions"

USER_FILE = """\
def work(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""

SCRIPT = textwrap.dedent("""
    import sys, time, cProfile, io, pstats
    sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
    from nbprof.collect.line_hook import TOOL_IDS
    from nbprof.collect.python_line_recorder import PythonLineRecorder
    from nbprof.collect.torch_line_recorder import TorchLineRecorder
    from nbprof.collect.user_code import UserCode
    import userfile
    assert "numpy" not in sys.modules and "pandas" not in sys.modules
    # counted by hand: line 2, then the loop header and body twice, the header's exit, the return
    BY_HAND = [2, 3, 4, 3, 4, 3, 5]
    t = TorchLineRecorder(UserCode(None))
    prof = cProfile.Profile()
    prof.enable()
    t0 = time.time_ns()
    t.start(sys._getframe())
    userfile.work(2)
    t.stop()
    prof.disable()
    names = {cid: c.co_name for cid, c in t.code_objects.items()}
    seen = [(names.get(c, "?"), l) for c, l in zip(t.codes, t.lines)]
    assert seen == [("work", n) for n in BY_HAND], seen
    assert all(x >= t0 for x in t.times) and list(t.times) == sorted(t.times)
    assert t.refused is None
    s = io.StringIO(); pstats.Stats(prof, stream=s).print_stats("work"); assert "work" in s.getvalue()
    n = len(t.times); userfile.work(3); assert len(t.times) == n  # stopped: nothing more
    # cProfile's recorder: each line, then the return (-1), of one activation of work
    p = PythonLineRecorder(UserCode(None))
    p.start()
    userfile.work(2)
    p.stop()
    assert [(p.codes[p.activation_code[a]].co_name, l) for a, l, _ in p.events] == [("work", n) for n in BY_HAND + [-1]]
    assert p.refused is None and not p.replaced

    def recorded(r):
        return len(r.times) if isinstance(r, TorchLineRecorder) else len(r.events)

    monitoring = getattr(sys, "monitoring", None)
    for make in (TorchLineRecorder, PythonLineRecorder):
        calls = []

        def other(frame, event, arg):  # a debugger's, coverage's or line_profiler's, as far as nbprof knows
            calls.append(event)
            return None

        if monitoring is not None:
            assert all(monitoring.get_tool(i) is None for i in TOOL_IDS)
            for i in TOOL_IDS:
                monitoring.use_tool_id(i, "other")
            r = make(UserCode(None)); r.start(); userfile.work(1); r.stop()
            assert r.refused and "taken" in r.refused and recorded(r) == 0, (make, r.refused)
            assert all(monitoring.get_tool(i) == "other" for i in TOOL_IDS)
            for i in TOOL_IDS:
                monitoring.free_tool_id(i)
            # a trace function runs beside nbprof's tool: both see the call
            sys.settrace(other)
            r = make(UserCode(None)); r.start(); userfile.work(1); r.stop()
            assert sys.gettrace() is other
            sys.settrace(None)
            assert r.refused is None and recorded(r) > 0 and "call" in calls, make
            assert all(monitoring.get_tool(i) is None for i in TOOL_IDS)
        else:
            assert sys.gettrace() is None
            sys.settrace(other)
            r = make(UserCode(None)); r.start(); userfile.work(1); r.stop()
            assert sys.gettrace() is other
            sys.settrace(None)
            assert r.refused and "another tracer runs" in r.refused and recorded(r) == 0, make
            assert "call" in calls  # the other one kept running, undisturbed
            # a tracer the code sets while nbprof's runs takes over: nbprof removes only its own
            r = make(UserCode(None)); r.start(); userfile.work(1); sys.settrace(other); userfile.work(1); r.stop()
            assert sys.gettrace() is other and r.replaced
            sys.settrace(None)
    # the frames already running: a cell (this script, named so in a shell's table of cells) that
    # starts a recorder is followed from its next line (its frame gets the local tracer, 3.10-3.11),
    # and at stop its frame is given back as it was
    import types
    cell = UserCode(types.SimpleNamespace(compile=types.SimpleNamespace(_filename_map={"<string>": 1})))
    for make in (TorchLineRecorder, PythonLineRecorder):
        r = make(cell)
        r.start(sys._getframe())
        during = sys._getframe().f_trace
        userfile.work(1)
        r.stop()
        assert sys._getframe().f_trace is None, make
        assert (during is None) == (monitoring is not None), make
        if isinstance(r, TorchLineRecorder):
            names = [r.code_objects[c].co_name for c in r.codes]
        else:
            names = [r.codes[r.activation_code[a]].co_name for a, _, _ in r.events]
        assert names[0] == "<module>" and "work" in names, (make, names)
    assert sys.gettrace() is None
    print("ok")
""")


def _interpreters() -> list[Path]:
    found = []
    for version in ("3.10", "3.11", "3.12", "3.13"):
        matches = sorted(PYENV.glob(f"{version}.*/bin/python")) if PYENV.is_dir() else []
        if matches:
            found.append(matches[-1])
    return found


@pytest.mark.parametrize("python", _interpreters() or [None], ids=lambda p: p.parent.parent.name if p else "none")
def test_the_hook_and_both_recorders(python, tmp_path):
    if python is None:
        pytest.skip("no pyenv interpreters on this machine")
    (tmp_path / "userfile.py").write_text(USER_FILE)
    out = subprocess.run([str(python), "-c", SCRIPT, str(ROOT), str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
