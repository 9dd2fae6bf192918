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
