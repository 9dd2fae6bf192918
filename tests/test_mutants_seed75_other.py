"""Surviving mutants of seed 75 outside the analyses: the Lightning profiler's ``memory`` option,
``from_profiler`` naming a kernel's cells "In [n]", the cell-flag check that never raises, the
flags table's "where" column, ``SnapshotProfile.save``'s refusal, the Colab figure's HTML, and the
static timeline's label colours (white or dark by the fill's luma)."""

from __future__ import annotations

import importlib.util
import re
import sys
import types

import pytest

from .conftest import needs_torch, run
from .test_messages import _command_line_options, _magic_options  # each front end's own parser

needs_lightning = pytest.mark.skipif(
    not all(importlib.util.find_spec(p) for p in ("pytorch_lightning", "lightning")),
    reason="needs pytorch-lightning and lightning (the test extra)")


# ---------------------------------------------------------------- integrations.lightning.Profiler


@needs_torch
@needs_lightning
def test_the_lightning_profilers_memory_option_records_each_operators_allocations():
    """``Profiler(memory=True)`` profiles the fit as ``%%torchprof --memory``: torch's own
    key_averages() of the profile has the allocations of aten::addmm (the Linear layers' outputs),
    and nbprof's table says the same bytes."""
    # kills nbprof.integrations.lightning.xǁProfilerǁ__init____mutmut_10 (memory=None: the default, off)
    import nbprof

    from .lightning_fit import PACKAGES, fit, lightning

    lightning(PACKAGES[0])
    prof = nbprof.lightning.Profiler(memory=True, quiet=True)
    fit(PACKAGES[0], prof, steps=2)
    p = prof.result
    assert p.collected["memory"] is True
    addmm = next(r for r in p.profiler.key_averages() if r.key == "aten::addmm")
    assert addmm.cpu_memory_usage > 0
    ours = p.key_averages().set_index("name").loc["aten::addmm"]
    assert ours["cpu_mem_bytes"] == addmm.cpu_memory_usage


@needs_torch
@needs_lightning
def test_the_lightning_profilers_memory_false_contradicting_its_sort_is_refused_when_made():
    """``memory=False`` is ``--no-memory``: sorting by memory then cannot turn it on, so the
    profiler is refused when made (as ``%%torchprof --no-memory --sort cpu_mem_bytes`` is)."""
    # kills nbprof.integrations.lightning.xǁProfilerǁ__init____mutmut_10
    import nbprof

    from .lightning_fit import PACKAGES, lightning

    lightning(PACKAGES[0])
    with pytest.raises(nbprof.OptionError, match="needs --memory, but --no-memory was given"):
        nbprof.lightning.Profiler(memory=False, sort="cpu_mem_bytes")


# ---------------------------------------------------------------- integrations.profilers._build


def _ipykernel_code_name(raw_code, transformed_code, number):
    """ipykernel's XCachingCompiler.get_code_name: a kernel compiles each cell from a temporary
    file (/tmp/ipykernel_<pid>/<hash>.py) that IPython maps back to its execution count."""
    import os
    import zlib

    return f"/tmp/ipykernel_{os.getpid()}/{zlib.crc32(transformed_code.encode())}.py"


@needs_torch
def test_from_profiler_in_a_kernel_names_the_cells_of_a_stack_in_n(shell, monkeypatch):
    """In a kernel (cells compiled from /tmp/ipykernel_<pid>/<hash>.py files), a user's own
    ``torch.profiler.profile(with_stack=True)`` read with ``from_profiler``: aten::mm's stack is
    the function's cell then the profiling cell, each named by its execution count, as IPython's
    table of cells says, with no kernel file names left."""
    # kills nbprof.integrations.profilers.x__build__mutmut_27 (shell=None: no cell names)
    monkeypatch.setattr(shell.compile, "get_code_name", _ipykernel_code_name)
    run(shell, "import torch, torch.profiler, nbprof\ndef work(a):\n    return a @ a\n")
    defined = shell.execution_count - 1
    result, _ = run(shell, "x = torch.randn(16, 16)\nwith torch.profiler.profile(with_stack=True) as prof:\n"
                           "    y = work(x)\n")
    assert result.error_in_exec is None, result.error_in_exec
    cell = shell.execution_count - 1
    result, _ = run(shell, "fp = nbprof.from_profiler(prof)\n")
    assert result.error_in_exec is None, result.error_in_exec
    [stack] = shell.user_ns["fp"].key_averages("stack").query("name == 'aten::mm'")["stack"].tolist()
    # the line torch gives the cell's frame: the `with` statement (2) or the call in it (3)
    assert re.fullmatch(rf"In \[{defined}\]\(2\): work ← In \[{cell}\]\([23]\): <module>", stack), stack
    assert "ipykernel_" not in " ".join(shell.user_ns["fp"].key_averages("stack")["stack"].tolist())


# ---------------------------------------------------------------- magics.check_cell_flags


def test_the_cell_flag_check_never_raises_with_a_stand_in_torch_module(monkeypatch):
    """The input transformer checks every ``%%torchprof`` cell's flags with ``check_cell_flags``,
    documented never to raise. A ``torch`` module already imported counts as torch being there,
    even one with no import spec (a stand-in module, as docs builds and test doubles put in
    sys.modules): the answer is the same as with the real torch, not importlib's ValueError."""
    # kills nbprof.magics.x_check_cell_flags__mutmut_11 (find_spec("torch") on a module whose __spec__ is None)
    from nbprof.magics import check_cell_flags

    stand_in = types.ModuleType("torch")
    assert stand_in.__spec__ is None
    monkeypatch.setitem(sys.modules, "torch", stand_in)
    assert check_cell_flags("torchprof", "-q -o p") is True
    assert check_cell_flags("torchprof", "--limit nope") is False  # bad flags are still said so


# ---------------------------------------------------------------- run.flags.markdown_table



def test_the_flags_tables_where_column_says_where_each_flag_works():
    """The generated table (``markdown_table()``, in-process): every "where" is one the legend
    names, and each front end's real parser accepts exactly the flags the table puts there;
    ``-q``/``--quiet``, which every magic and both commands take, is "everywhere"."""
    # kills nbprof.run.flags.x_markdown_table__mutmut_57 (the -q row's where: None)
    from nbprof.run.flags import markdown_table

    where: dict[str, set[str]] = {}
    for line in markdown_table().splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            where.setdefault(cells[1], set()).update(m.split()[0] for m in re.findall(r"`([^`]+)`", cells[0]))
    assert set(where) == {"torch", "cProfile", "torch, cProfile", "magics", "everywhere", "command line"}, set(where)
    assert where["everywhere"] == {"-q", "--quiet"}
    torch, cprof = where["torch"] | where["torch, cProfile"], where["cProfile"] | where["torch, cProfile"]
    assert _magic_options("torchprof") == torch | where["everywhere"] | where["magics"]
    assert _magic_options("cprofile") == cprof | where["everywhere"] | where["magics"]
    assert _command_line_options("torch") == torch | where["everywhere"] | where["command line"]
    assert _command_line_options("cprofile") == cprof | where["everywhere"] | where["command line"]


# ---------------------------------------------------------------- snapshot.SnapshotProfile.save


def test_saving_a_snapshot_under_another_suffix_says_it_is_written_as_pickle(tmp_path):
    """``save("b.json")`` writes nothing and says why in one line: the path given and the
    suffix memory_viz opens."""
    # kills nbprof.snapshot.xǁSnapshotProfileǁsave__mutmut_9 (OptionError(None): no message)
    import nbprof
    from nbprof.errors import OptionError

    from .snapshots import hand_snapshot, write

    p = nbprof.load_snapshot(write(hand_snapshot(), tmp_path / "a.pickle"))
    target = tmp_path / "b.json"
    with pytest.raises(OptionError) as e:
        p.save(target)
    assert str(e.value) == f"{target}: a snapshot is written as .pickle (what memory_viz opens)"
    assert not target.exists()


# ---------------------------------------------------------------- views.figure.colab_html


def test_a_figure_in_colab_is_an_html_fragment_not_a_whole_page(monkeypatch):
    """Colab puts a figure's ``text/html`` into its output, beside other outputs: the HTML is
    a fragment (plotly's div and its scripts), not a document of its own with <html>, <head>
    and <body>."""
    # kills nbprof.views.figure.x_colab_html__mutmut_33 (full_html=True)
    import plotly.graph_objects as go

    from nbprof.views.figure import figure_bundle

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    fig = go.Figure([go.Bar(name="forward", x=["a", "b"], y=[3, 5])])
    html = figure_bundle(fig)["text/html"]
    assert html.lstrip().startswith("<div") and html.rstrip().endswith("</div>"), html[:200]
    assert "Plotly.newPlot(" in html
    for tag in ("<html", "<head", "<body", "</html>", "<!DOCTYPE"):
        assert tag.lower() not in html.lower(), tag


# ---------------------------------------------------------------- views.timeline._luminance


def test_a_timeline_label_is_white_on_a_dark_fill_and_dark_on_a_light_one(tmp_path):
    """The static timeline's labels read on their rectangles: white text where the fill's luma
    (ITU-R BT.601: 0.299 R + 0.587 G + 0.114 B, the channels read as hex bytes, computed here) is
    under 0.55, dark text above. 200 ProfilerSteps of 5 µs merged into a few wide rectangles
    (max_rects=5) have the step's lightened fill, luma 0.53: just under the line, where reading
    a channel in any other base than 16 puts it over."""
    # kills nbprof.views.timeline.x__luminance__mutmut_9 (int(..., 17))
    from nbprof.views.timeline import timeline_svg

    from .synthetic import Trace

    t = Trace()
    for i in range(200):
        t.annotation(f"ProfilerStep#{i}", i * 5, 5)
    t.op("aten::mm", 1000, 1000)
    svg = timeline_svg(t.load(tmp_path), width=1000, max_rects=5)

    def luma(color):
        r, g, b = (int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))
        return 0.299 * r + 0.587 * g + 0.114 * b

    labelled = []  # (the rectangle's fill, its label's fill, the label)
    fill = None
    for m in re.finditer(r'<rect x="[^"]*" y="[^"]*" width="[^"]*" height="[^"]*" fill="(#[0-9a-f]{6})">'
                         r'|<text [^>]*fill="(#[0-9a-f]+)"[^>]*pointer-events="none">([^<]*)', svg):
        if m.group(1):
            fill = m.group(1)
        else:
            labelled.append((fill, m.group(2), m.group(3)))
    assert [x[2] for x in labelled] == ["66 merged", "65 merged", "65 merged", "aten::mm"]
    assert any(0.5 < luma(f) < 0.55 for f, _, _ in labelled)  # the case near the line is drawn
    for f, text_fill, label in labelled:
        assert text_fill == ("#fff" if luma(f) < 0.55 else "#1f2328"), (f, text_fill, label)
