"""The magics in a real IPython shell: the cell runs as without the magic, flags, faults."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from .conftest import HAS_TORCH, needs_torch, reports, run

MAGICS = ["torchprof", "cprofile"] if HAS_TORCH else ["cprofile"]


# ------------------------------------------------------------------------------ loading


def test_load_ext_imports_neither_torch_nor_plotly_nor_pandas():
    """What keeps ``%load_ext nbprof`` fast: it imports none of the heavy libraries. How fast it is
    (22 ms) is measured by benchmarks/bench_profiling.py, not here: a wall-clock bound in a test
    fails on a loaded machine (it failed mutmut's stats run at 0.303 s for 0.3 s)."""
    code = textwrap.dedent(
        """
        import sys
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        print("torch" in sys.modules, "plotly" in sys.modules, "pandas" in sys.modules)
        print(sorted(ip.magics_manager.magics["cell"]).count("torchprof"), sorted(ip.magics_manager.magics["line"]).count("cprofile"))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].split() == ["False", "False", "False"]
    assert out[1] == "1 1"


def test_unload_ext_removes_the_magics(shell):
    shell.run_line_magic("unload_ext", "nbprof")
    try:
        assert "torchprof" not in shell.magics_manager.magics["cell"]
        result, captured = run(shell, "%%cprofile\nx_after_unload = 1")
        assert result.error_in_exec is not None or result.error_before_exec is not None
        assert "x_after_unload" not in shell.user_ns
    finally:
        shell.run_line_magic("load_ext", "nbprof")
    result, _ = run(shell, "%%cprofile -q\nx_after_reload = 1")
    assert shell.user_ns["x_after_reload"] == 1


@pytest.mark.parametrize("magic", ["torchprof", "cprofile"])
def test_help_lists_every_flag(shell, magic):
    from IPython.core import page

    shown = []
    original = page.page
    page.page = lambda data, *a, **k: shown.append(data if isinstance(data, str) else data.get("text/plain", ""))
    try:
        shell.run_cell(f"%%{magic}?")
    finally:
        page.page = original
    text = "".join(shown)
    flags = ["--cuda", "--no-cuda", "--memory", "--shapes", "--stack", "--flops", "--sort", "--limit",
             "--group-by", "--schedule", "--export", "--tensorboard", "-o", "--quiet"] if magic == "torchprof" else [
             "--sort", "--limit", "--dump", "-o", "--quiet"]
    for flag in flags:
        assert flag in text, flag


# -------------------------------------------------------------------- runs as without the magic


@pytest.mark.parametrize("magic", MAGICS)
def test_cell_runs_in_the_user_namespace(shell, magic):
    shell.user_ns["base"] = 40
    result, captured = run(shell, f"%%{magic} -q\ndef helper(v):\n    return v + 1\nanswer = helper(base) + 1\nprint('answer is', answer)")
    assert result.error_in_exec is None
    assert shell.user_ns["answer"] == 42 and callable(shell.user_ns["helper"])
    assert "answer is 42" in captured.stdout


@pytest.mark.parametrize("magic", MAGICS)
def test_last_expression_is_the_cells_value(shell, magic):
    for unders in ("_", "__", "___"):  # IPython updates none of them if the user assigned one (tests loop with _)
        shell.user_ns.pop(unders, None)
    result, captured = run(shell, f"%%{magic}\nx = 20\nx * 2 + 2")
    assert result.result == 42
    assert shell.user_ns["_"] == 42
    assert "42" in captured.stdout
    assert len(reports(captured)) == 1
    # a trailing ; hides the value (IPython reads it from the stored input, as kernels store it)
    result, captured = run(shell, f"%%{magic}\n7 * 6;")
    assert "42" not in captured.stdout
    assert len(reports(captured)) == 1


@pytest.mark.parametrize("magic", MAGICS)
def test_the_value_comes_before_the_report(shell, magic, monkeypatch):
    """Out[]'s value is written first, then the report is displayed: what goes to stdout and to
    the display publisher, recorded in one list in the order it happens."""
    import io

    happened: list[tuple[str, str]] = []

    class Stdout(io.StringIO):
        def write(self, text: str) -> int:
            if text.strip():
                happened.append(("stdout", text))
            return len(text)

    def publish(data, metadata=None, *args, **kwargs):
        happened.append(("display", data.get("text/plain", "")))

    monkeypatch.setattr(sys, "stdout", Stdout())
    monkeypatch.setattr(shell.display_pub, "publish", publish)
    for unders in ("_", "__", "___"):
        shell.user_ns.pop(unders, None)
    result = shell.run_cell(f"%%{magic}\nx = 20\nx * 2 + 2", store_history=True)
    monkeypatch.undo()
    assert result.result == 42
    value = next(i for i, (where, text) in enumerate(happened) if where == "stdout" and "42" in text)
    report = next(i for i, (where, text) in enumerate(happened)
                  if where == "display" and text.startswith(("torch profile", "cProfile")))
    assert value < report, happened


@pytest.mark.parametrize("magic", MAGICS)
def test_ipython_syntax_works_inside(shell, magic):
    code = f"%%{magic} -q\nlisting = !echo hello-from-shell\n%time t = sum(range(10))\nprint(listing[0], t)"
    result, captured = run(shell, code)
    assert result.error_in_exec is None, result.error_in_exec
    assert "hello-from-shell 45" in captured.stdout


@pytest.mark.parametrize("magic", MAGICS)
def test_top_level_await(shell, magic):
    code = f"%%{magic} -q -o r\nimport asyncio\nasync def twice(v):\n    await asyncio.sleep(0.01)\n    return 2 * v\nawaited = await twice(21)\nawaited"
    result, captured = run(shell, code)
    assert result.error_in_exec is None, result.error_in_exec
    assert shell.user_ns["awaited"] == 42 and result.result == 42


@pytest.mark.parametrize("magic", MAGICS)
def test_line_numbers_in_tracebacks_are_the_cells(shell, magic):
    result, captured = run(shell, f"%%{magic}\na = 1\nb = 2\nraise ValueError('on line four')")
    assert isinstance(result.error_in_exec, ValueError)
    tb = shell.InteractiveTB.structured_traceback(
        type(result.error_in_exec), result.error_in_exec, result.error_in_exec.__traceback__
    )
    text = "\n".join(tb)
    assert "line 4" in text


@pytest.mark.parametrize("magic", MAGICS)
def test_line_magic(shell, magic):
    result, captured = run(shell, f"%{magic} -o line_result sum(i * i for i in range(100))")
    assert result.result == 328350
    kept = shell.user_ns["line_result"]
    assert type(kept).__name__ == {"torchprof": "TorchProfile", "cprofile": "PythonProfile"}[magic]
    if magic == "cprofile":  # cProfile's own count of the generator's frames, as the oracle
        import cProfile
        import pstats

        oracle = cProfile.Profile()
        oracle.runctx("sum(i * i for i in range(100))", {}, {})
        [want] = [v[1] for k, v in pstats.Stats(oracle).stats.items() if k[2] == "<genexpr>"]
        [got] = [v[1] for k, v in kept.pstats.stats.items() if k[2] == "<genexpr>"]
        assert got == want
    assert len(reports(captured)) == 1


@pytest.mark.parametrize("magic", MAGICS)
def test_run_cell_magic_directly(shell, magic):
    """Code that calls run_cell_magic itself (no input transformer) takes the synchronous path."""
    result, captured = run(shell, f"get_ipython().run_cell_magic({magic!r}, '-q -o direct', 'direct_value = 5\\ndirect_value * 2')")
    assert result.result == 10
    assert shell.user_ns["direct_value"] == 5


@needs_torch
def test_output_flag_keeps_the_live_profiler(shell):
    from torch.profiler import profile

    run(shell, "%%torchprof -q -o kept\nimport torch\ntorch.ones(2) + 1")
    kept = shell.user_ns["kept"]
    assert isinstance(kept.profiler, profile)
    # torch's own API still works on it: one torch.ones, one add
    counts = {r.key: r.count for r in kept.profiler.key_averages()}
    assert counts["aten::ones"] == 1 and counts["aten::add"] == 1


# ---------------------------------------------------------------------------------- bad flags


BAD_FLAGS = [
    ("torchprof", "--bogus", "unrecognized arguments: --bogus; valid flags:"),
    ("torchprof", "--sort wallclock", "unknown sort key 'wallclock'; choose one of: self_cpu_us"),
    ("torchprof", "--limit ten", "invalid int value"),
    ("torchprof", "--limit -3", "must be 0 (all rows) or a positive number"),
    ("torchprof", "--group-by kernel", "invalid choice: 'kernel'"),
    ("torchprof", "-o 2bad", "not a valid variable name"),
    ("torchprof", "--export trace.txt", "must end with .json or .json.gz"),
    ("torchprof", f"--export {__file__}/sub/t.json", "is a file, not a folder"),
    ("torchprof", f"--tensorboard {__file__}/tb", "is a file, not a folder"),
    ("torchprof", "--schedule 1,x,2", "expected wait,warmup,active"),
    ("cprofile", "--bogus", "unrecognized arguments: --bogus; valid flags:"),
    ("cprofile", "-s wallclock", "unknown sort key 'wallclock'; choose one of: tottime"),
    ("cprofile", "-l -1", "must be 0 (all rows)"),
]


@pytest.mark.parametrize("magic,flags,message", BAD_FLAGS)
def test_bad_flags_are_one_line_errors_and_the_cell_does_not_run(shell, magic, flags, message):
    if magic == "torchprof" and not HAS_TORCH:
        pytest.skip("torch is not installed")
    from IPython.core.error import UsageError

    shell.user_ns.pop("ran", None)
    result, captured = run(shell, f"%%{magic} {flags}\nran = True")
    err = result.error_in_exec or result.error_before_exec
    assert isinstance(err, UsageError), err
    assert message in str(err)
    assert "\n" not in str(err)
    assert "ran" not in shell.user_ns


def test_torchprof_without_torch_says_how_to_install(tmp_path):
    """In an interpreter where torch cannot be imported: a one-line error with the pip command."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # makes `import torch` fail
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "nbprof")
        r = ip.run_cell("%%torchprof\\nran = 1")
        err = r.error_in_exec or r.error_before_exec
        print(type(err).__name__, "|", err, "|", "ran" in ip.user_ns)
        r = ip.run_cell("%%cprofile -q\\nok = sum(range(10))")
        print(ip.user_ns["ok"])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, second = out.strip().splitlines()[-2:]
    kind, message, ran = first.split(" | ")
    assert kind == "UsageError" and "pip install torch" in message and ran == "False"
    assert second == "45"


# ------------------------------------------------------------------------------------- faults


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("exc", ["ValueError('boom')", "KeyboardInterrupt()"])
def test_exception_shows_traceback_and_partial_report_and_releases(shell, magic, exc):
    code = f"%%{magic} -o failed\nimport math\npartial = [math.sqrt(i) for i in range(1000)]\nraise {exc}"
    result, captured = run(shell, code)
    assert type(result.error_in_exec).__name__ == exc.split("(")[0]
    assert shell.user_ns["partial"][4] == 2.0  # what ran before the exception still ran
    [report] = reports(captured)
    assert "this report shows what was recorded until then" in report["text/plain"]
    failed = shell.user_ns["failed"]
    assert failed.meta.cell_error == exc.split("(")[0]
    # the profiler is released: the next profiled cell works
    result, captured = run(shell, f"%%{magic} -q -o again\nafter = 1 + 1")
    assert result.error_in_exec is None and shell.user_ns["after"] == 2


@pytest.mark.parametrize("magic", MAGICS)
def test_real_interrupt_releases_the_profiler(shell, magic):
    """A real SIGINT-style interrupt (interrupt_main) while the cell is busy."""
    import signal

    # as in a kernel, SIGINT raises KeyboardInterrupt; a test run started in the background by a
    # non-interactive shell inherits SIGINT ignored, and interrupt_main() would then do nothing
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_mid_cell(shell, magic)
    finally:
        signal.signal(signal.SIGINT, saved)


def _interrupt_mid_cell(shell, magic):
    import _thread

    shell.user_ns.pop("interrupt_probe", None)

    def interrupt_when_looping():
        # interrupt inside the user's loop, not during nbprof's own start-up
        deadline = time.time() + 20
        while shell.user_ns.get("interrupt_probe", 0) < 100 and time.time() < deadline:
            time.sleep(0.01)
        _thread.interrupt_main()

    body = ("import time\nend = time.time() + 10\ninterrupt_probe = 0\nwhile time.time() < end:\n"
            "    interrupt_probe += 1\n    sum(range(100))")
    if magic == "torchprof":
        body = "import torch\n" + body + "\n    torch.ones(8).add_(1)"
    thread = threading.Thread(target=interrupt_when_looping, daemon=True)
    thread.start()
    t0 = time.time()
    result, captured = run(shell, f"%%{magic} -o interrupted\n{body}")
    thread.join(timeout=5)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert time.time() - t0 < 8
    assert shell.user_ns["interrupted"].meta.cell_error == "KeyboardInterrupt"
    result, _ = run(shell, f"%%{magic} -q\nnext_ok = True")
    assert result.error_in_exec is None and shell.user_ns["next_ok"]


@pytest.mark.parametrize("line", [False, True])
def test_interrupt_right_after_the_profiler_starts_still_stops_it(shell, monkeypatch, line):
    """The run is active before its collector starts, so an interrupt landing just after the
    profiler started (before the cell's first statement) still stops it, in the cell and in the
    line magic (the ``shell`` fixture checks that no run and no profiler is left)."""
    import sys

    from nbprof.run import runner
    from nbprof.collect.cprofile import CProfileSession

    begin = CProfileSession.begin
    seen = []

    def begin_then_interrupt(self):
        begin(self)
        seen.append((runner.active() is not None, sys.getprofile() is not None))
        raise KeyboardInterrupt

    monkeypatch.setattr(CProfileSession, "begin", begin_then_interrupt)
    shell.user_ns.pop("ran_after_start", None)
    code = "%cprofile ran_after_start = True" if line else "%%cprofile\nran_after_start = True"
    result, _ = run(shell, code)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert seen == [(True, True)]  # the run was active and cProfile running when the interrupt came
    assert runner.active() is None and sys.getprofile() is None
    assert "ran_after_start" not in shell.user_ns


def test_cprofile_refuses_when_another_profiler_is_active(shell):
    import cProfile

    from IPython.core.error import UsageError

    other = cProfile.Profile()
    other.enable()
    try:
        result, captured = run(shell, "%%cprofile\nran_under_busy = True")
    finally:
        other.disable()
    err = result.error_in_exec
    assert isinstance(err, UsageError)
    assert "already active" in str(err) and "\n" not in str(err)
    assert "ran_under_busy" not in shell.user_ns
    result, _ = run(shell, "%%cprofile -q\nran_after = True")
    assert shell.user_ns["ran_after"]


@needs_torch
def test_torchprof_refuses_when_a_torch_profiler_is_running(shell):
    from IPython.core.error import UsageError

    run(shell, "import torch\nfrom torch.profiler import profile\nouter = profile()\nouter.__enter__()")
    try:
        result, captured = run(shell, "%%torchprof\nran_under_busy = True")
    finally:
        run(shell, "outer.__exit__(None, None, None)")
    err = result.error_in_exec
    assert isinstance(err, UsageError) and "already running" in str(err)
    assert "ran_under_busy" not in shell.user_ns
    result, _ = run(shell, "%%torchprof -q\nran_after = torch.ones(1) + 1")
    assert result.error_in_exec is None


@needs_torch
def test_profiles_cannot_nest(shell):
    from IPython.core.error import UsageError

    result, captured = run(shell, "%%torchprof -q\ninner = get_ipython().run_line_magic('cprofile', '-q 1 + 1')")
    assert isinstance(result.error_in_exec, UsageError)
    assert "already running" in str(result.error_in_exec)


@needs_torch
def test_big_profiles_show_a_status_line_that_updates(shell, monkeypatch):
    """Post-processing that takes a while shows what it is doing, then clears the line."""
    from nbprof.views import progress

    monkeypatch.setattr(progress, "BIG_TRACE_BYTES", 0)  # treat this small profile as big
    result, captured = run(shell, "%%torchprof\nimport torch\ntorch.ones(4) + 1")
    texts = [o.data.get("text/plain", "") for o in captured.outputs]
    status = [t for t in texts if t.startswith("nbprof: ")]
    assert any("reading the profile" in t and "iB of trace" in t for t in status)
    assert any("nesting" in t for t in status)
    assert any("drawing the report" in t for t in status)
    assert texts[-1] == ""  # the status line is cleared at the end
    assert len(reports(captured)) == 1


@needs_torch
def test_small_profiles_show_no_status_line(shell):
    result, captured = run(shell, "%%torchprof\nimport torch\ntorch.ones(4) + 1")
    assert not [o for o in captured.outputs if o.data.get("text/plain", "").startswith("nbprof: ")]


@needs_torch
@pytest.mark.parametrize("flags,needs", [("--no-memory --sort cpu_mem_bytes", "--memory"),
                                         ("--no-shapes --group-by shape", "--shapes"),
                                         ("--no-cuda --sort self_device_us", "--cuda")])
def test_sorting_by_a_column_the_line_turned_off_is_an_error(shell, flags, needs):
    """What the view needs is turned on (tests/test_consistency.py), unless the same line turned
    it off: then it is a one-line error before the code runs."""
    from IPython.core.error import UsageError

    shell.user_ns.pop("ran", None)
    result, _ = run(shell, f"%%torchprof {flags}\nran = True")
    err = result.error_in_exec
    assert isinstance(err, UsageError) and needs in str(err) and f"--no-{needs[2:]} was given" in str(err)
    assert "\n" not in str(err) and "ran" not in shell.user_ns
    result, _ = run(shell, "%%torchprof -q --memory --sort cpu_mem_bytes\nran = True")
    assert result.error_in_exec is None and shell.user_ns["ran"]


@needs_torch
def test_sorting_by_device_time_without_cuda_names_what_can_be_sorted_by(shell):
    """On a machine without CUDA, ``--sort self_device_us`` cannot be turned on: a one-line error
    before the code runs, listing the sort keys this run can record (none of the device ones)."""
    import torch
    from IPython.core.error import UsageError

    if torch.cuda.is_available():
        pytest.skip("CUDA is here: the sort is turned on")
    shell.user_ns.pop("ran", None)
    result, _ = run(shell, "%%torchprof --sort self_device_us\nran = True")
    assert isinstance(result.error_in_exec, UsageError) and "ran" not in shell.user_ns
    assert str(result.error_in_exec) == (
        "%%torchprof: --sort self_device_us: CUDA is not available here, so this run cannot record it; sort by one "
        "of: self_cpu_us, cpu_total_us, cpu_avg_us, self_cpu_mem_bytes, cpu_mem_bytes, flops, count, name")


@needs_torch
def test_the_panel_sets_defaults_and_flags_win(shell):
    from nbprof import settings

    saved = (settings.panel.memory, settings.panel.shapes)
    settings.panel.memory, settings.panel.shapes = True, True
    try:
        run(shell, "%%torchprof -q -o by_panel\nimport torch\ntorch.ones(3) * 2")
        run(shell, "%%torchprof -q -o by_flags --no-memory\nimport torch\ntorch.ones(3) * 2")
    finally:
        settings.panel.memory, settings.panel.shapes = saved
    assert shell.user_ns["by_panel"].collected["memory"] and shell.user_ns["by_panel"].collected["shapes"]
    assert not shell.user_ns["by_flags"].collected["memory"] and shell.user_ns["by_flags"].collected["shapes"]


def test_cprofile_reports_python_312s_refusal_in_one_line(shell, monkeypatch):
    """On Python 3.12+ a second profiler makes enable() raise ValueError("Another profiling tool
    is already active"); nbprof turns it into a one-line error and the cell does not run.
    (tests/test_python_versions.py sees the real thing on real 3.12 / 3.13 interpreters.)"""
    import cProfile

    from IPython.core.error import UsageError

    def refuse(self):
        raise ValueError("Another profiling tool is already active")

    monkeypatch.setattr(cProfile.Profile, "enable", refuse)
    shell.user_ns.pop("ran_under_312", None)
    result, _ = run(shell, "%%cprofile\nran_under_312 = True")
    err = result.error_in_exec
    assert isinstance(err, UsageError) and "Another profiling tool is already active" in str(err)
    assert "\n" not in str(err) and "ran_under_312" not in shell.user_ns


@needs_torch
def test_a_name_with_quotes_is_profiled_as_written(shell):
    # torch 2.4-2.14 write such a record_function name into their trace unescaped (invalid JSON);
    # nbprof read nothing, then saved again: "RuntimeError: Trace is already saved." as the cell's
    # error. torch's own in-memory table is the oracle for the name and its count.
    result, captured = run(shell, "%%torchprof -q -o quoted\nimport torch\nfrom torch.profiler import record_function\n"
                                  "for _ in range(2):\n    with record_function('say \"hi\", \"bye\"'):\n"
                                  "        y = torch.ones(3) + 1\n")
    assert result.error_in_exec is None, result.error_in_exec
    p = shell.user_ns["quoted"]
    theirs = {r.key: r.count for r in p.profiler.key_averages() if "hi" in r.key}
    assert theirs == {'say "hi", "bye"': 2}
    ours = p.key_averages().set_index("name")["count"]
    assert {name: int(ours[name]) for name in theirs} == theirs


@needs_torch
def test_a_profile_nbprof_cannot_read_never_replaces_the_cells_outcome(shell, monkeypatch):
    # whatever goes wrong reading the recorded trace: the cell's value stands, one line says what
    # happened, no profiler is left running (the shell fixture checks) and the next run works
    from nbprof.collect import torch_live
    from nbprof.errors import TraceError

    def unreadable(path, **_):
        raise TraceError(f"{path}: planted")

    monkeypatch.setattr(torch_live, "read_trace_file", unreadable)
    result, captured = run(shell, "%%torchprof\nimport torch\ntorch.ones(3).sum().item() + 39")
    assert result.error_in_exec is None and result.result == 42
    lines = [line for line in captured.stderr.splitlines() if "could not build the report" in line]
    assert len(lines) == 1 and "TraceError" in lines[0] and "planted" in lines[0], captured.stderr
    assert not reports(captured)
    monkeypatch.undo()
    result, captured = run(shell, "%%torchprof -q -o after\nimport torch\ntorch.ones(3) + 1")
    assert result.error_in_exec is None and len(shell.user_ns["after"].events) > 0


@needs_torch
def test_a_schedules_notes_join_the_runs_other_notes(shell):
    """``--schedule 0,0,2 --group-by shape``: the report keeps both what the view turned on
    (--shapes) and what the schedule says (no warmup step), one after the other."""
    result, _ = run(shell, "%%torchprof -q --schedule 0,0,2 --group-by shape -o sched\nimport torch, nbprof\n"
                           "for _ in range(3):\n    torch.ones(8) + 1\n    nbprof.step()")
    assert result.error_in_exec is None, result.error_in_exec
    notes = shell.user_ns.pop("sched").meta.notes
    shapes = [i for i, n in enumerate(notes) if n == "--group-by shape: recording --shapes too"]
    warmup = [i for i, n in enumerate(notes) if n.startswith("--schedule 0,0,2,1: no warmup step")]
    assert len(shapes) == 1 and len(warmup) == 1 and shapes[0] < warmup[0], notes
