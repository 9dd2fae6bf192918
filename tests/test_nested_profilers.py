"""A profiler the cell starts itself, under %%torchprof or %%cprofile: never a crash, never
silently partial.

torch runs one profiler session at a time. A ``with torch.profiler.profile()`` inside a
``%%torchprof`` cell ended nbprof's session inside torch, and reading nbprof's results then
crashed the process (torch 2.13: a segmentation fault in ``ActivityTraceWrapper::save``, exit
139; torch 2.4: a RuntimeError at the end of the cell); a ``cProfile.Profile().enable()`` inside
``%%cprofile`` left a report of the calls before it, saying nothing. Each nesting runs in one
real IPython shell in a fresh process, so a crash is seen as its exit code; after each, the next
``%%torchprof`` and ``%%cprofile`` cells must work and no profiler may be left running. The whole
list runs twice in the same process (36 nested runs). Oracles: the process's exit code, the
cell's own value and exception, torch's and Python's own state
(``torch.autograd._profiler_enabled()``, ``sys.getprofile()``), torch's ``key_averages()`` and
pstats of the inner profiler.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from .conftest import needs_torch

# one worker runs the module (under --dist loadgroup: both tiers), so the scenarios' process
# (nested_runs, 6-7 s) starts once, not once per worker
pytestmark = [needs_torch, pytest.mark.xdist_group("nested_profilers")]

PREFIX = "%%torchprof -q -o p\n"
X = "x = torch.randn(64, 64)\nfor _ in range(3):\n    x @ x\n"

# name -> (setup cell, profiled cell, teardown cell)
SCENARIOS: dict[str, tuple[str, str, str]] = {
    "inner_in_cell": ("", X + "with torch.profiler.profile() as inner:\n    y = x @ x\nz = x + 1\n'value'",
                      "inner_ops = sorted(set(nbprof.from_profiler(inner).key_averages()['name']))"),
    "inner_left_running": ("", X + "inner = torch.profiler.profile()\ninner.start()\ny = x @ x\n'value'",
                           "busy = ip.run_cell('%%torchprof -q\\n1 + 1').error_in_exec\n"
                           "busy = type(busy).__name__ + ': ' + str(busy)\ninner.stop()\n"
                           "inner_ops = sorted(set(nbprof.from_profiler(inner).key_averages()['name']))"),
    "started_before_ended_inside": ("inner = torch.profiler.profile()\ninner.start()", "inner.stop()\nran = True",
                                    "inner.stop()"),
    "scheduled_before_steps_inside": (
        "cycles = []\ninner = torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=1), "
        "on_trace_ready=lambda prof: cycles.append(len(prof.key_averages())))\ninner.start()",
        X + "for i in range(4):\n    y = x @ x\n    inner.step()\n'value'", "inner.stop()"),
    "nested_autograd_profiler": ("", X + "with torch.autograd.profiler.profile() as inner:\n    y = x @ x\nz = x + 1\n'value'",
                                 "inner_ops = sorted({a.key for a in inner.key_averages()})"),
    "record_function_only": ("", X + "with torch.profiler.record_function('mine'):\n    y = x @ x\n'value'", ""),
    "schedule_loop_inside": (
        "cycles = []",
        X + "with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1), "
        "on_trace_ready=lambda prof: cycles.append(len(prof.key_averages()))) as inner:\n"
        "    for i in range(6):\n        y = x @ x\n        inner.step()\n'value'", ""),
    "emit_itt": ("", X + "with torch.autograd.profiler.emit_itt():\n    y = x @ x\n'value'", ""),
    "legacy_profiler": ("", X + "with torch.autograd.profiler_legacy.profile() as inner:\n    y = x @ x\n"
                        "legacy_events = len(inner.function_events)\n'value'", ""),
    "inner_and_cell_raises": ("", X + "with torch.profiler.profile() as inner:\n    y = x @ x\n    raise ValueError('boom')",
                              ""),
    "inner_not_held": ("", X + "with torch.profiler.profile():\n    y = x @ x\n'value'", ""),
    "inner_held_by_an_object": ("class Trainer:\n    pass\ntrainer = Trainer()",
                                X + "trainer.profiler = torch.profiler.profile()\nwith trainer.profiler:\n    y = x @ x\n'value'",
                                "del trainer"),
    "ended_by_unseen_code": ("", X + "torch.autograd._disable_profiler()\nz = x + 1\n'value'", ""),
}
# %%cprofile: a Python profiler the cell starts itself (Python < 3.12: one profile function per
# thread; 3.12+: one sys.monitoring profiler, and a second cProfile's enable() raised)
FUNCS = "def before():\n    return sum(range(100))\ndef after():\n    return sum(range(100))\n"
PY_SCENARIOS: dict[str, tuple[str, str, str]] = {
    "cprofile_inside": (FUNCS, "before()\ninner = cProfile.Profile()\ninner.enable()\nafter()\ninner.disable()\n'value'",
                        "inner_ops = sorted({k[2] for k in pstats.Stats(inner).stats})"),
    "cprofile_left_running": (FUNCS, "before()\ninner = cProfile.Profile()\ninner.enable()\nafter()\n'value'",
                              "inner.disable()\ninner_ops = sorted({k[2] for k in pstats.Stats(inner).stats})"),
    "setprofile_inside": (FUNCS + "calls = []", "before()\nsys.setprofile(lambda frame, event, arg: calls.append(event))\n"
                          "after()\nsys.setprofile(None)\n'value'", ""),
    "cprofile_in_another_thread": (
        FUNCS, "def work():\n    other = cProfile.Profile()\n    other.enable()\n    sum(range(10))\n    other.disable()\n"
        "before()\nt = threading.Thread(target=work)\nt.start()\nt.join()\nafter()\n'value'", ""),
}
SCHEDULE_CELL = ("%%torchprof -q -o p --schedule 0,1,2\n" + X + "for i in range(3):\n    x @ x\n    nbprof.step()\n"
                 "with torch.profiler.profile() as inner:\n    y = x @ x\nfor i in range(3):\n    nbprof.step()\n'value'")

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output
    scenarios, py_scenarios, schedule_cell, prefix, rounds = json.loads(sys.argv[1])
    ip = start_ipython()
    ip.run_line_magic("load_ext", "nbprof")
    ip.run_cell("import torch, torch.profiler, torch.autograd.profiler_legacy, nbprof, sys, cProfile, pstats, threading")
    ip.user_ns["ip"] = ip

    def one(name, setup, cell, teardown):
        for k in ("p", "inner", "inner_ops", "busy", "ran", "cycles", "legacy_events"):
            ip.user_ns.pop(k, None)
        with capture_output() as shown:
            setup_error = ip.run_cell(setup).error_in_exec
            r = ip.run_cell(cell)
            err = r.error_in_exec or r.error_before_exec
            p = ip.user_ns.get("p")
            teardown_error = ip.run_cell(teardown).error_in_exec
            nxt = ip.run_cell("%%torchprof -q -o nxt\\ntorch.ones(3).sum()")
            nxt_py = ip.run_cell("%%cprofile -q -o nxt_py\\nsorted(range(9))")
        ns = ip.user_ns
        out = {
            "name": name,
            "value": r.result,
            "error": None if err is None else f"{type(err).__name__}: {err}",
            "setup_error": None if setup_error is None else repr(setup_error),
            "teardown_error": None if teardown_error is None else repr(teardown_error),
            "notes": list(p.meta.notes) if p is not None else None,
            "ops": None if p is None else sorted(set(p.key_averages()["name"] if p.kind == "torch" else p.stats["function"])),
            "inner_ops": ns.get("inner_ops"),
            "busy": ns.get("busy"),
            "ran": ns.get("ran", False),
            "cycles": ns.get("cycles"),
            "legacy_events": ns.get("legacy_events"),
            "stderr": shown.stderr[-500:],
            "next_ok": nxt.error_in_exec is None and "aten::sum" in set(ns["nxt"].key_averages()["name"])
                       and not ns["nxt"].meta.notes and nxt_py.error_in_exec is None
                       and "<built-in method builtins.sorted>" in set(ns["nxt_py"].stats["function"]) and not ns["nxt_py"].meta.notes,
            "idle": not torch.autograd._profiler_enabled() and sys.getprofile() is None,
        }
        print("RESULT " + json.dumps(out), flush=True)

    import torch
    for _ in range(rounds):
        for name, (setup, cell, teardown) in scenarios.items():
            one(name, setup, prefix + cell, teardown)
        for name, (setup, cell, teardown) in py_scenarios.items():
            one(name, setup, "%%cprofile -q -o p\\n" + cell, teardown)
        one("torchprof_schedule", "", schedule_cell, "")
    """
)


@pytest.fixture(scope="module")
def nested_runs(tmp_path_factory):
    """Every scenario twice in one IPython process: (exit code, stderr, {name: [result per round]})."""
    script = tmp_path_factory.mktemp("nested") / "nested.py"
    script.write_text(SCRIPT)
    arg = json.dumps([SCENARIOS, PY_SCENARIOS, SCHEDULE_CELL, PREFIX, 2])
    out = subprocess.run([sys.executable, str(script), arg], capture_output=True, text=True, timeout=600)
    results: dict[str, list[dict]] = {}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            results.setdefault(r["name"], []).append(r)
    return out.returncode, out.stderr, results


def test_no_crash_in_36_nested_runs_and_each_next_cell_works(nested_runs):
    code, stderr, results = nested_runs
    assert code == 0, f"exit {code}: {stderr[-3000:]}"
    assert sorted(results) == sorted([*SCENARIOS, *PY_SCENARIOS, "torchprof_schedule"])
    runs = [r for rs in results.values() for r in rs]
    assert len(runs) == 2 * (len(SCENARIOS) + len(PY_SCENARIOS) + 1) == 36
    for r in runs:
        assert r["setup_error"] is None and r["teardown_error"] is None, r
        assert r["next_ok"], r
        assert r["idle"], r  # no torch profiler, no Python profiler left running


def _note(r: dict) -> str:
    [note] = [n for n in r["notes"] if n.startswith(("another", "nbprof's"))]
    return note


def test_inner_profiler_ends_nbprofs_session_and_the_report_says_what_it_covers(nested_runs):
    for r in nested_runs[2]["inner_in_cell"]:
        assert r["value"] == "value" and r["error"] is None
        note = _note(r)
        assert note.startswith("another torch profiler (torch.profiler.profile, In [")
        assert "ended nbprof's torch session" in note and "this report covers the" in note and "before it" in note
        assert "not the" in note and "after" in note
        assert note.endswith("its own results: nbprof.from_profiler(inner)")
        # what ran before the inner profiler is in the report, what ran after it is not
        assert "aten::mm" in r["ops"] and "aten::add" not in r["ops"]
        assert "aten::mm" in r["inner_ops"] and "aten::add" not in r["inner_ops"]


def test_the_note_says_how_to_reach_the_other_profilers_results(nested_runs):
    for r in nested_runs[2]["inner_held_by_an_object"]:
        assert _note(r).endswith("its own results: nbprof.from_profiler(trainer.profiler)")
    for r in nested_runs[2]["inner_not_held"]:
        assert r["value"] == "value"
        assert _note(r).endswith("nbprof.from_profiler(prof) reads its results from the torch.profiler.profile that ran it")


def test_inner_profiler_left_running_stays_running_and_says_so(nested_runs):
    for r in nested_runs[2]["inner_left_running"]:
        assert r["value"] == "value"
        note = _note(r)
        assert "still running when the cell ended" in note and note.endswith("nbprof.from_profiler(inner) once it stops")
        # the user's profiler kept its session: nbprof refuses to start on top of it, and it
        # holds what ran after it started
        assert r["busy"].startswith("UsageError: a torch profiler is already running")
        assert "aten::mm" in r["inner_ops"]


def test_profiler_started_before_the_cell_is_refused_in_one_line(nested_runs):
    for r in nested_runs[2]["started_before_ended_inside"]:
        assert r["error"].startswith("UsageError: a torch profiler is already running") and not r["ran"]


def test_a_schedule_started_before_that_steps_inside_takes_over_at_its_warmup(nested_runs):
    for r in nested_runs[2]["scheduled_before_steps_inside"]:
        assert r["value"] == "value" and r["error"] is None
        assert _note(r).startswith("another torch profiler (torch.profiler.profile, In [")
        assert r["cycles"] and r["cycles"][0] > 0  # the user's own cycle recorded and handed over


def test_nested_autograd_profiler(nested_runs):
    for r in nested_runs[2]["nested_autograd_profiler"]:
        assert r["value"] == "value"
        assert _note(r).startswith("another torch profiler (torch.autograd.profiler.profile, In [")
        assert "aten::mm" in r["inner_ops"] and "aten::add" not in r["ops"]


def test_record_function_alone_is_a_range_not_a_takeover(nested_runs):
    for r in nested_runs[2]["record_function_only"]:
        assert r["value"] == "value" and r["notes"] == [] and "mine" in r["ops"]


def test_a_schedule_loop_inside_runs_its_cycle(nested_runs):
    for r in nested_runs[2]["schedule_loop_inside"]:
        assert r["value"] == "value"
        assert "another torch profiler (torch.profiler.profile" in _note(r)
        assert len(r["cycles"]) == 1 and r["cycles"][0] > 0


def test_emit_itt_and_the_legacy_profiler_run_as_without_nbprof(nested_runs):
    """torch refuses to enable them while another profiler runs ("Profiler is already enabled on
    this thread"): without nbprof's hand-over the cell raised."""
    for r in nested_runs[2]["emit_itt"]:
        assert r["value"] == "value" and r["error"] is None
        assert _note(r).startswith("another torch profiler (torch.autograd.profiler.emit_itt")
        assert "from_profiler" not in _note(r)
    for r in nested_runs[2]["legacy_profiler"]:
        assert r["value"] == "value" and r["error"] is None and r["legacy_events"] > 0
        note = _note(r)
        assert note.startswith("another torch profiler (torch.autograd.profiler_legacy.profile")
        assert "from_profiler" not in note  # which cannot read it


def test_the_cells_exception_is_its_own(nested_runs):
    for r in nested_runs[2]["inner_and_cell_raises"]:
        assert r["error"] == "ValueError: boom"
        assert any(n.startswith("the cell raised (ValueError: boom)") for n in r["notes"])
        assert "another torch profiler" in _note(r)


def test_a_session_ended_where_nbprof_could_not_see_is_said_not_read(nested_runs):
    for r in nested_runs[2]["ended_by_unseen_code"]:
        assert r["value"] == "value" and r["error"] is None
        assert _note(r).startswith("nbprof's torch session was ended during the cell by code nbprof could not see")


def test_torchprof_schedule_keeps_its_cycle_and_stops_stepping(nested_runs):
    for r in nested_runs[2]["torchprof_schedule"]:
        assert r["value"] == "value" and r["error"] is None
        assert "aten::mm" in r["ops"]  # the active steps before the inner profiler started
        assert "another torch profiler (torch.profiler.profile" in _note(r)


def test_a_cprofile_inside_ends_nbprofs_and_the_report_says_what_it_covers(nested_runs):
    for r in nested_runs[2]["cprofile_inside"]:
        assert r["value"] == "value" and r["error"] is None
        note = _note(r)
        assert note.startswith("another Python profiler (cProfile.Profile.enable, In [")
        assert "replaced nbprof's cProfile" in note and "this report covers the" in note and "before it" in note
        # the calls before it are nbprof's, the calls after it the other profiler's, as without nbprof;
        # nothing of nbprof's own hand-over (it reads the calling code once its cProfile is off)
        assert r["ops"] == ["<built-in method builtins.sum>", "before"]
        assert "after" in r["inner_ops"] and "before" not in r["inner_ops"]


def test_a_cprofile_left_running_stays_running_and_says_so(nested_runs):
    for r in nested_runs[2]["cprofile_left_running"]:
        assert r["value"] == "value" and r["error"] is None
        assert _note(r).endswith("it was still running when the cell ended")
        assert "after" in r["inner_ops"]


def test_a_profile_function_set_inside_is_said_where_it_replaces_cprofile(nested_runs):
    for r in nested_runs[2]["setprofile_inside"]:
        assert r["value"] == "value" and r["error"] is None
        if sys.version_info < (3, 12):  # one profile function per thread: it replaced nbprof's
            assert _note(r).startswith("another Python profiler (sys.setprofile, In [")
            assert "before" in r["ops"] and "after" not in r["ops"]
        else:  # sys.setprofile runs beside cProfile's sys.monitoring hooks: nothing lost
            assert r["notes"] == [] and {"before", "after"} <= set(r["ops"])


def test_another_threads_cprofile(nested_runs):
    for r in nested_runs[2]["cprofile_in_another_thread"]:
        assert r["value"] == "value" and r["error"] is None
        if sys.version_info < (3, 12):  # its own thread's profile function: nbprof's is untouched
            assert r["notes"] == [] and {"before", "after"} <= set(r["ops"])
        else:  # one cProfile a process: it ran (it raised "Another profiling tool is already active")
            assert "cProfile.Profile.enable" in _note(r)


def test_a_failed_read_at_the_hand_over_does_not_break_the_other_profiler(shell, monkeypatch):
    """Reading nbprof's part can fail (a full disk: torch's writer fails); the other profiler, which
    is starting at that moment, must start anyway, and the report says what failed."""
    from nbprof.collect import torch_live

    from .conftest import run

    def full_disk(results, progress=None):
        raise OSError("No space left on device")

    monkeypatch.setattr(torch_live, "_save_and_read", full_disk)
    result, _ = run(shell, "%%torchprof -q -o p\nimport torch\nx = torch.randn(8, 8)\n"
                           "with torch.profiler.profile() as inner:\n    y = x @ x\n'value'")
    assert result.error_in_exec is None and result.result == "value"
    monkeypatch.undo()
    note = [n for n in shell.user_ns["p"].meta.notes if n.startswith("another torch profiler")][0]
    assert "nbprof could not read its own part (OSError: No space left on device)" in note
    import nbprof

    assert "aten::mm" in set(nbprof.from_profiler(shell.user_ns["inner"]).key_averages()["name"])


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: cProfile is a sys.monitoring tool beside setprofile's hook")
@pytest.mark.parametrize("how", ["sys.setprofile", "_lsprof"])
def test_a_profile_function_the_cell_leaves_set_keeps_running_after_it(shell, how):
    """In this process (the subprocess scenarios above are out of mutmut's sight): a profile function
    the cell set without cProfile.Profile.enable (a hook of its own, or a C profiler started
    directly) replaced nbprof's and is still set when the cell ends; nbprof's end disables its own
    cProfile, which clears the thread's hook whoever set it, then gives the other one its hook back."""
    from .conftest import run

    start = {"sys.setprofile": "events = []\nsys.setprofile(lambda frame, event, arg: events.append(event))\n",
             "_lsprof": "import _lsprof\nother = _lsprof.Profiler()\nother.enable()\n"}[how]
    shell.run_cell(FUNCS + "import sys")
    try:
        result, _ = run(shell, "%%cprofile -q -o sp\nbefore()\n" + start + "after()\n'value'")
        hook = sys.getprofile()
        sys.setprofile(None)
        if how == "_lsprof":
            shell.user_ns["other"].disable()
    finally:
        sys.setprofile(None)
    assert result.error_in_exec is None and result.result == "value"
    assert hook is not None and (hook is shell.user_ns["other"] if how == "_lsprof" else hook.__name__ == "<lambda>")
    if how == "_lsprof":  # it kept counting after the cell: the cell's own after() is in its stats
        assert any(key[2] == "after" for key in _other_stats(shell.user_ns["other"]))
    else:
        assert "call" in shell.user_ns["events"]
    sp = shell.user_ns["sp"]
    [note] = [n for n in sp.meta.notes if n.startswith("another Python profiler")]
    # the note names the line of the cell that set it (the magic's line is the cell's first)
    line = {"sys.setprofile": 4, "_lsprof": 5}[how]
    assert note.startswith(f"another Python profiler (sys.setprofile, In [{shell.execution_count - 1}] line {line}) started ")
    assert note.endswith("it was still running when the cell ended")
    assert "after" not in set(sp.stats["function"]) and "before" in set(sp.stats["function"])
    nxt, _ = run(shell, "%%cprofile -q -o nxt_py\nsorted(range(9))")  # the next run records as usual
    assert nxt.error_in_exec is None and "sorted" in " ".join(shell.user_ns["nxt_py"].stats["function"])


def _other_stats(profiler) -> list:
    """The (file, line, name) keys a raw _lsprof.Profiler recorded (what cProfile.create_stats reads)."""
    return [(getattr(e.code, "co_filename", ""), 0, getattr(e.code, "co_name", str(e.code))) for e in profiler.getstats()]


def test_cprofiles_enable_is_put_back_after_the_cell_unless_the_cell_replaced_it(shell):
    """nbprof wraps ``cProfile.Profile.enable`` while a %%cprofile cell runs (to see another cProfile
    start); afterwards the class is as it was, whatever the cell did, except that a wrapper the
    cell itself put in place stays (seed 53's ProfilerHookWatch.remove 10 left nbprof's in place)."""
    import cProfile

    from .conftest import run

    before = dict(vars(cProfile.Profile))
    run(shell, "%%cprofile -q\nsorted(range(9))")
    assert vars(cProfile.Profile).get("enable") is before.get("enable")
    try:
        result, _ = run(shell, "%%cprofile -q\nimport cProfile\n_inner = cProfile.Profile.enable\n"
                               "def users_enable(self, *a, **k):\n    return _inner(self, *a, **k)\n"
                               "cProfile.Profile.enable = users_enable\n")
        assert result.error_in_exec is None
        assert vars(cProfile.Profile)["enable"] is shell.user_ns["users_enable"]  # the user's, left as set
    finally:
        if "enable" in before:
            cProfile.Profile.enable = before["enable"]
        elif "enable" in vars(cProfile.Profile):
            delattr(cProfile.Profile, "enable")
    assert dict(vars(cProfile.Profile)).get("enable") is before.get("enable")
