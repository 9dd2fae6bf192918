"""Functions no fast-tier test called in the pytest process (seed 52's "no tests" mutants): the
controls panel, the empty line table, the merged cProfile profile, the data-loading import hook, the
reprs. Each is pinned against an independent answer: the widgets read back through ipywidgets' own
API and the options the next ``%%torchprof`` run in a real IPython shell recorded with, pstats
reading what a dump wrote, the dtypes of a real line table, an import observed through sys.modules."""

from __future__ import annotations

import dataclasses

import pytest

from .conftest import DATA, needs_torch, run

# ------------------------------------------------------------------------------ the controls panel

# the panel's toggles as the user sees them: (label, tooltip), written out by hand
TOGGLES = [
    ("CUDA", "Record CUDA kernels, copies and streams"),
    ("Memory", "Record allocations: memory per operator and the memory curve"),
    ("Shapes", "Record input shapes (group by shape)"),
    ("Stacks", "Record Python stacks (group by stack); costs the most"),
]
NO_CUDA = "CUDA is not available on this machine"


@pytest.fixture
def panel():
    """A panel made fresh from the built-in defaults; the kernel's panel state put back after."""
    from nbprof import settings, widgets

    saved, saved_widget = dataclasses.asdict(settings.panel), widgets._panel
    for key, value in dataclasses.asdict(settings.Panel()).items():
        setattr(settings.panel, key, value)
    widgets._panel = None
    yield settings.panel
    for key, value in saved.items():
        setattr(settings.panel, key, value)
    widgets._panel = saved_widget


def _parts(c):
    """The panel's widgets, found through ipywidgets' own containers: (title, toggles, reason, status)."""
    title, row, reason, status = c.widget.children
    return title, list(row.children), reason, status


def _cuda_here() -> bool:
    import torch

    return bool(torch.cuda.is_available())


@needs_torch
def test_a_new_panel_shows_the_builtin_defaults(panel):
    import ipywidgets as W

    import nbprof

    cuda = _cuda_here()
    c = nbprof.controls()
    assert isinstance(c.widget, W.VBox)
    title, toggles, reason, status = _parts(c)
    assert title.value == "<b>nbprof</b> · defaults for the next <code>%%torchprof</code> runs (flags still win)"
    assert [type(t) for t in toggles] == [W.ToggleButton] * 4
    assert [t.description for t in toggles] == [label for label, _ in TOGGLES]
    assert [t.layout.width for t in toggles] == ["110px"] * 4
    # the built-ins: CUDA on where there is CUDA, the costly ones off
    assert [t.value for t in toggles] == [cuda, False, False, False]
    assert [t.icon for t in toggles] == ["check" if cuda else "", "", "", ""]
    assert [t.disabled for t in toggles] == [not cuda, False, False, False]
    tips = [tip for _, tip in TOGGLES]
    if not cuda:  # the CUDA toggle says why it is off
        tips[0] = f"CUDA: {NO_CUDA}"
        assert reason.value == f'<span style="color:#8a4b00">CUDA off: {NO_CUDA}</span>'
    else:
        assert reason.value == ""
    assert [t.tooltip for t in toggles] == tips
    said = "next %%torchprof records: CPU" + (", CUDA" if cuda else "")
    assert status.value == f'<span style="color:#555">{said}</span>'
    assert c.describe() == said
    assert c.state() == {"cuda": cuda, "memory": False, "shapes": False, "stack": False}
    assert (c.cuda_available, c.cuda_reason) == (cuda, "" if cuda else NO_CUDA)


@needs_torch
def test_the_toggles_set_the_next_runs_options(panel, shell):
    import nbprof

    cuda = _cuda_here()
    c = nbprof.controls()
    _, (t_cuda, t_memory, t_shapes, t_stack), _, status = _parts(c)
    # a click, as ipywidgets delivers it: the value trait changes and the observers run
    t_memory.value = True
    t_shapes.value = True
    assert (panel.memory, panel.shapes, panel.stack) == (True, True, False)
    assert [t.icon for t in (t_memory, t_shapes, t_stack)] == ["check", "check", ""]
    said = "next %%torchprof records: CPU" + (", CUDA" if cuda else "") + ", Memory, Shapes"
    assert status.value == f'<span style="color:#555">{said}</span>'

    run(shell, "%%torchprof -o panel_on -q\nimport torch\ntorch.ones(8, 8) @ torch.ones(8, 8)")
    on = shell.user_ns["panel_on"]
    assert {k: on.collected[k] for k in ("memory", "shapes", "stack")} == {"memory": True, "shapes": True, "stack": False}
    # what torch recorded with: input shapes only when record_shapes was on
    assert on.profiler.record_shapes and on.profiler.profile_memory and not on.profiler.with_stack

    # a flag typed on the line wins over the panel
    run(shell, "%%torchprof -o panel_flag -q --no-memory\nimport torch\ntorch.ones(8, 8) @ torch.ones(8, 8)")
    flagged = shell.user_ns["panel_flag"]
    assert not flagged.profiler.profile_memory and flagged.profiler.record_shapes

    # clicked off again: the icon goes, the panel and the next run follow
    t_memory.value = False
    t_stack.value = True
    assert (panel.memory, panel.shapes, panel.stack) == (False, True, True)
    assert [t.icon for t in (t_memory, t_shapes, t_stack)] == ["", "check", "check"]
    said = "next %%torchprof records: CPU" + (", CUDA" if cuda else "") + ", Shapes, Stacks"
    assert status.value == f'<span style="color:#555">{said}</span>'
    run(shell, "%%torchprof -o panel_off -q\nimport torch\ntorch.ones(8, 8) @ torch.ones(8, 8)")
    off = shell.user_ns["panel_off"]
    assert not off.profiler.profile_memory and off.profiler.record_shapes and off.profiler.with_stack
    assert off.collected["cuda"] is False or cuda
    for name in ("panel_on", "panel_flag", "panel_off"):
        del shell.user_ns[name]


@needs_torch
def test_the_panel_is_one_per_kernel_and_rereads_what_code_set(panel):
    import nbprof

    cuda = _cuda_here()
    c = nbprof.controls()
    assert nbprof.controls() is c  # shown twice: the same widgets
    _, (t_cuda, t_memory, t_shapes, t_stack), _, status = _parts(c)
    panel.stack = True
    panel.memory = True
    panel.cuda = False  # set from code: the CUDA toggle follows where there is CUDA, stays off where not
    assert t_stack.value is False  # not re-read until the panel is shown again
    assert nbprof.controls() is c
    assert [t.value for t in (t_cuda, t_memory, t_shapes, t_stack)] == [False, True, False, True]
    assert t_cuda.disabled is (not cuda)
    said = "next %%torchprof records: CPU, Memory, Stacks"
    assert status.value == f'<span style="color:#555">{said}</span>'
    assert c.state() == {"cuda": False, "memory": True, "shapes": False, "stack": True}
    # a toggle the user clicked writes through even when the value is the same as before
    t_stack.value = False
    assert panel.stack is False and t_stack.icon == ""


@needs_torch
def test_the_panel_displays_as_its_widget_with_a_text_summary(panel, shell):
    import nbprof

    cuda = _cuda_here()
    c = nbprof.controls()
    panel.shapes = True
    nbprof.controls()
    # what IPython's display machinery makes of it, as a notebook would receive it
    data, _ = shell.display_formatter.format(c)
    view = data["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == c.widget.model_id  # ipywidgets' own id of the VBox
    assert (view["version_major"], view["version_minor"]) == (2, 0)
    text = "nbprof controls: cuda={}, memory=off, shapes=on, stack=off".format("on" if cuda else "off")
    if not cuda:
        text += f" (CUDA: {NO_CUDA})"
    assert data["text/plain"] == text
    assert repr(c) == text
    assert set(data) == {"text/plain", "application/vnd.jupyter.widget-view+json"}


@needs_torch
def test_cuda_state_says_what_torch_says():
    from nbprof.widgets import _cuda_state

    cuda = _cuda_here()
    assert _cuda_state() == ((True, "") if cuda else (False, NO_CUDA))


# ------------------------------------------------------------------------------ the empty line table


@pytest.fixture(scope="module")
def stack_trace_lines():
    """The line table of a trace torch wrote with ``with_stack`` (tests/data)."""
    import nbprof

    return nbprof.load_trace(DATA / "transformer_infer_stack.trace.json.gz")


def test_an_empty_line_table_has_a_real_ones_columns_and_dtypes(stack_trace_lines):
    import numpy as np

    from nbprof.analysis.lines import line_join, line_table, merge_lines

    real = stack_trace_lines.lines()
    assert len(real) > 0
    want = {c: str(t) for c, t in real.dtypes.items()}
    # written out too, so that the real table's own dtypes cannot drift with the empty one's
    assert want == {"cell": "object", "file": "object", "line": "Int64", "function": "object",
                    "function_line": "Int64", "source": "object", "ops": "int64", "self_cpu_us": "float64",
                    "cpu_total_us": "float64", "self_device_us": "float64", "device_total_us": "float64",
                    "alloc_bytes": "int64", "alive_at_end_bytes": "int64"}
    events = stack_trace_lines.events
    table, rows = line_join(events, None)
    empties = [merge_lines([]), merge_lines([real.iloc[:0]]), line_table(events, None), line_table(events, {}), table]
    for empty in empties:
        assert len(empty) == 0
        assert list(empty.columns) == list(real.columns)
        assert {c: str(t) for c, t in empty.dtypes.items()} == want
    # no line holds any event
    assert rows.dtype == np.int64 and len(rows) == len(events) and (rows == -1).all()
    # merging with an empty table changes nothing
    merged = merge_lines([real, merge_lines([])])
    assert {c: str(t) for c, t in merged.dtypes.items()} == want
    assert merged["self_cpu_us"].sum() == pytest.approx(real["self_cpu_us"].sum())


# ------------------------------------------------------------------------------ data loading


def _write_package(root, package: str) -> None:
    """A real package on disk: ``package/sub.py`` sets ``ran`` and reads ``package.order``."""
    folder = root / package
    folder.mkdir()
    (folder / "__init__.py").write_text("order = []\n")
    (folder / "sub.py").write_text(
        f"import {package}\n{package}.order.append('sub ran')\nran = True\n\ndef f():\n    return 42\n")
    (folder / "other.py").write_text("ran = True\n")


@pytest.fixture
def probe_package(tmp_path, monkeypatch):
    import importlib
    import sys
    import uuid

    package = f"nbprof_probe_{uuid.uuid4().hex[:8]}"
    _write_package(tmp_path, package)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield package
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def test_the_import_hook_runs_after_its_module_and_only_its_module(probe_package):
    """What arms the DataLoader watch when torch's dataloader module is imported during the run:
    observed on a real submodule imported from disk."""
    import importlib
    import inspect
    import sys

    from nbprof.collect.data_loading import _ImportHook

    seen = []

    def then(module):
        # the module's code has run: its names exist and its side effect happened, once
        seen.append((module.__name__, getattr(module, "ran", None), list(sys.modules[probe_package].order)))

    hook = _ImportHook(f"{probe_package}.sub", then)
    sys.meta_path.insert(0, hook)
    try:
        other = importlib.import_module(f"{probe_package}.other")  # another module of the package: not it
        assert seen == [] and other.ran
        sub = importlib.import_module(f"{probe_package}.sub")
        assert seen == [(f"{probe_package}.sub", True, ["sub ran"])]
        assert sys.modules[f"{probe_package}.sub"] is sub and sub.f() == 42
        importlib.import_module(f"{probe_package}.sub")  # imported already: no second call
        assert len(seen) == 1
    finally:
        sys.meta_path.remove(hook)
    # the module is what the path finder would have made: its file, and its source through the
    # wrapping loader (what tracebacks and inspect read)
    assert sub.__file__ == str(sys.modules[probe_package].__path__[0]) + "/sub.py"
    assert sub.__spec__.origin == sub.__file__
    assert inspect.getsource(sub.f) == "def f():\n    return 42\n"
    assert sub.__spec__.loader.get_filename(sub.__name__) == sub.__file__
    assert sub.__spec__.loader.is_package(sub.__name__) is False


def test_the_import_hook_finds_nothing_for_a_module_no_finder_has(probe_package):
    import sys

    from nbprof.collect.data_loading import _ImportHook

    seen = []
    hook = _ImportHook(f"{probe_package}.missing", seen.append)
    sys.meta_path.insert(0, hook)
    try:
        with pytest.raises(ModuleNotFoundError):
            __import__(f"{probe_package}.missing")
    finally:
        sys.meta_path.remove(hook)
    assert seen == []
    # asked directly: None for any other name, None for its own when no finder has it
    assert hook.find_spec("json", None) is None
    assert hook.find_spec(f"{probe_package}.missing", None) is None


def test_the_import_hook_keeps_an_extension_modules_own_create_module():
    """A C extension module is made by its loader's create_module: the wrapping loader forwards it."""
    import importlib
    import sys

    from nbprof.collect.data_loading import _ImportHook

    name = "_testmultiphase"  # CPython's multi-phase-init test extension: a fresh module each import
    try:
        importlib.util.find_spec(name)
    except ImportError:
        pytest.skip("this Python has no _testmultiphase")
    saved = sys.modules.pop(name, None)
    seen = []
    hook = _ImportHook(name, seen.append)
    sys.meta_path.insert(0, hook)
    try:
        module = importlib.import_module(name)
    finally:
        sys.meta_path.remove(hook)
        sys.modules.pop(name, None)
        if saved is not None:
            sys.modules[name] = saved
    assert seen == [module]
    assert type(module.Example).__name__ == "type" and module.__file__.endswith(".so")


@pytest.mark.parametrize("error,said", [
    (ValueError("bad sample 5"), "ValueError: bad sample 5"),
    (ValueError("  first line\nsecond line\n"), "ValueError: first line"),
    (RuntimeError(""), "RuntimeError"),
    (RuntimeError("   \n "), "RuntimeError"),
    (KeyError(3), "KeyError: 3"),
    (OSError("x" * 250), "OSError: " + "x" * 200),
    (StopIteration(), "StopIteration"),
])
def test_a_failed_batchs_outcome_is_the_exceptions_type_and_first_line(error, said):
    from nbprof.collect.data_loading import _outcome

    assert _outcome(error) == said


@needs_torch
def test_a_batch_that_raised_in_the_main_process_is_recorded_with_its_error(shell):
    code = ("import torch\nfrom torch.utils.data import DataLoader, Dataset\n"
            "class Fails(Dataset):\n"
            "    def __len__(self):\n        return 12\n"
            "    def __getitem__(self, i):\n"
            "        if i == 5:\n            raise ValueError(f'bad sample {i}\\nmore')\n"
            "        return torch.tensor([i])\n"
            "failing_loader = DataLoader(Fails(), batch_size=4)\n")
    result, _ = run(shell, code)
    assert result.error_in_exec is None
    result, _ = run(shell, "%%torchprof -q --no-cuda -o failed_run\nfor b in failing_loader:\n    pass")
    assert type(result.error_in_exec) is ValueError
    p = shell.user_ns.pop("failed_run")
    waits = p.meta.data_loading.waits
    # batch 0 (samples 0-3) came; batch 1 raised at sample 5: its type and first line
    assert [(w[2], w[3], w[6]) for w in waits] == [(0, -1, "ok"), (1, -1, "ValueError: bad sample 5")]
    b = p.data_loading()
    assert list(b["batch"]) == [0, 1] and list(b["status"]) == ["ok", "error"]
    del shell.user_ns["failing_loader"]


def _ended(code: int):
    import multiprocessing

    p = multiprocessing.get_context("fork").Process(target=__import__("os")._exit, args=(code,))
    p.start()
    p.join()
    return p


def test_why_a_workers_functions_never_came():
    import multiprocessing
    import os
    import signal
    import time

    from nbprof.collect.data_loading import FLUSH_WAIT_S, _missing_reason

    assert _missing_reason(None) == "its process ended without writing them"
    assert _missing_reason(_ended(3)) == "its process exited with code 3 before writing them"
    assert _missing_reason(_ended(0)) == "its process exited with code 0 before writing them"
    busy = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    busy.start()
    try:
        assert FLUSH_WAIT_S == 2.0
        assert _missing_reason(busy) == ("it was still busy when the run ended and did not stop within 2 s "
                                        "(a batch still being made, e.g. after the DataLoader timed out)")
        os.kill(busy.pid, signal.SIGKILL)
        busy.join()
        assert _missing_reason(busy) == "its process was killed by SIGKILL before writing them"
    finally:
        if busy.is_alive():
            busy.kill()
            busy.join()
    closed = _ended(1)
    closed.close()  # its exitcode now raises ValueError: no code to say
    with pytest.raises(ValueError):
        closed.exitcode
    assert _missing_reason(closed).startswith("it was still busy when the run ended")


# ------------------------------------------------------------------------------ cProfile, merged


def _work(n):
    return sum(range(n))


def test_a_merged_profile_is_what_pstats_reads_prints_and_dumps(tmp_path, capsys):
    import cProfile
    import pstats

    from nbprof.collect.cprofile import MergedProfile, stats_table

    a, b = cProfile.Profile(), cProfile.Profile()
    a.runcall(_work, 10)
    a.runcall(_work, 20)
    b.runcall(_work, 5)
    # the oracle: pstats' own merge of the two profiles
    both = pstats.Stats(a)
    both.add(b)
    merged = MergedProfile(dict(both.stats), {"train": a, "eval": b})
    assert merged.profiles == {"train": a, "eval": b}
    key = next(k for k in both.stats if k[2] == "_work")

    read = pstats.Stats(merged)
    assert read.stats[key][:4] == both.stats[key][:4] and read.stats[key][1] == 3
    # pstats takes a profile's stats over (and empties them): a second read gets them all again,
    # as from a live cProfile.Profile, and what it does to its copy leaves the profile's alone
    read.add(b)
    again = pstats.Stats(merged)
    assert again.stats == both.stats and again.stats[key][1] == 3

    path = tmp_path / "merged.prof"
    assert merged.dump_stats(str(path)) is None
    from_file = pstats.Stats(str(path))
    assert from_file.stats == both.stats
    assert stats_table(from_file.stats).equals(stats_table(both.stats))

    capsys.readouterr()
    merged.print_stats("ncalls")
    printed = capsys.readouterr().out
    # strip_dirs: the file's base name only; sorted by calls: _work's 3 calls first
    assert "test_mutants_untested.py" in printed and "/tests/test_mutants_untested.py" not in printed
    rows = [line for line in printed.splitlines() if "(_work)" in line or "{built-in method builtins.sum}" in line]
    assert [r.split()[0] for r in rows] == ["3", "3"]
    merged.print_stats()  # pstats' default order (-1: as stored): still every function
    assert "(_work)" in capsys.readouterr().out
