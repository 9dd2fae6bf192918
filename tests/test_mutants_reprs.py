"""How results show themselves, in the fast tier (mutmut found no fast test calling these): what
IPython asks of each result object (``_repr_mimebundle_``, ``_ipython_display_``, ``repr``), the
memory snapshot's live chart, a folder's ``from_trace``, and Lightning's copies of nbprof's profiler.

Each is checked against what the user reads or what the object's own documented parts give: the
report's text and HTML, the chart drawn from the hand-counted snapshot (tests/snapshots.py), a
profile read straight from the same trace.
"""

from __future__ import annotations

import copy
import importlib.util
import pickle
from pathlib import Path

import pytest

import nbprof

from .snapshots import hand_snapshot, write

DATA = Path(__file__).parent / "data"
TRACE = DATA / "two_streams.trace.json.gz"


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    return nbprof.load_snapshot(write(hand_snapshot(), tmp_path_factory.mktemp("hand") / "s.pickle"))


def _displayed(shell, obj) -> list[dict]:
    """What IPython shows for ``obj`` as a cell's value: each output's mime bundle, in order."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        shell.display_formatter.format(obj)  # IPython's formatter hands the object to _ipython_display_
    return [o.data for o in captured.outputs]


def _panel_titles(html: str) -> list[str]:
    import re

    return re.findall(r'<label[^>]*>([^<]+)</label>', html)


# -- the memory snapshot ---------------------------------------------------------------------------


def test_a_snapshots_bundle_is_its_reports(hand):
    report = hand.report()
    bundle = hand._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == report.text() == repr(report) == repr(hand)
    assert report._repr_mimebundle_()["text/plain"] == report.text()
    # the same panels (each HTML has its own element ids, and the first one the tables' library)
    assert _panel_titles(bundle["text/html"]) == _panel_titles(report.html()) != []
    assert bundle["text/plain"].startswith("CUDA memory snapshot")
    assert "<b>CUDA memory snapshot</b>" in bundle["text/html"]


def test_a_snapshot_displays_its_report_and_no_live_chart_without_a_kernel(shell, hand):
    outputs = _displayed(shell, hand)
    # the plain IPython shell has no kernel: the report alone, its chart drawn inside it
    assert [o["text/plain"] for o in outputs] == [hand.report().text()]
    assert "<svg" in outputs[0]["text/html"]


def test_the_live_chart_is_the_snapshots_chart_answering_from_the_kernel(hand):
    pytest.importorskip("anywidget")
    from nbprof.views.snapshot_chart import SnapshotChartState, describe, live_chart

    widget = live_chart(hand)
    assert isinstance(widget.state, SnapshotChartState) and widget.state.profile is hand
    assert widget.spec == SnapshotChartState(hand).spec()  # the whole history's chart, as first drawn
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["text/plain"] == describe(hand)
    # where no kernel answers: the static chart of the same snapshot (its hand-counted peak)
    assert "<svg" in data["text/html"] and "The memory chart is a drawing" in data["text/html"]
    assert "cuda:0: peak 1.66 MiB at 20.0 µs" in data["text/html"]
    # zooming asks the kernel for the window: the answer is the chart of that window
    reply = widget.state.answer({"type": "window", "x0": 0.0, "x1": 0.03, "seq": 4, "width_px": 400})
    assert reply["type"] == "spec" and reply["seq"] == 4
    assert reply["spec"]["layout"]["xaxis"]["range"] == [0.0, 0.03]


# -- a cProfile result, a folder, a timeline ---------------------------------------------------------


def test_a_python_profiles_bundle_is_its_reports_and_its_repr_counts_calls(shell):
    from .conftest import run

    run(shell, "%%cprofile -q -o rp\nsorted(range(5))\nsorted(range(7))\n")
    p = shell.user_ns["rp"]
    bundle = p._repr_mimebundle_()
    assert bundle["text/plain"] == p.report().text()
    assert _panel_titles(bundle["text/html"]) == _panel_titles(p.report().html()) != []
    calls = int(p.stats["ncalls"].sum())
    assert repr(p) == (f"<PythonProfile {calls:,} call{'s' if calls != 1 else ''} in {p.total_s:.3f} s, "
                       f"{len(p.stats)} function{'s' if len(p.stats) != 1 else ''}>")
    assert p.stats.loc[p.stats["function"] == "<built-in method builtins.sorted>", "ncalls"].tolist() == [2]


def test_a_folders_from_trace_is_one_ranks_plain_profile():
    from nbprof.cluster.profile import ClusterProfile
    from nbprof.collect.chrome_trace import read_trace_file

    marker = object()
    one = ClusterProfile.from_trace(read_trace_file(str(TRACE)), profiler=marker, notes=["a note of the run"])
    assert type(one) is nbprof.TorchProfile
    assert one.profiler is marker and "a note of the run" in one.meta.notes
    plain = nbprof.load_trace(str(TRACE))
    assert one.key_averages().equals(plain.key_averages())


def test_a_folder_displays_its_report_then_its_timeline(shell, tmp_path):
    import shutil

    for r in (0, 1):
        shutil.copy(TRACE, tmp_path / f"rank{r}.pt.trace.json.gz")
    c = nbprof.load_trace(str(tmp_path), workers=1)
    try:
        outputs = _displayed(shell, c)
        # the report (a text and an HTML), then the timeline as an output of its own: without a
        # kernel its figure, which names the timeline as describe() does
        assert outputs[0]["text/plain"] == c.report().text()
        assert len(outputs) == 2 and "application/vnd.plotly.v1+json" in outputs[1]
        from nbprof.views.timeline import describe

        assert repr(c.timeline_view()) == f"<{describe(c.timeline_view().data)}>"
        assert repr(c.timeline_view()).startswith("<Timeline: ")
    finally:
        c.close()


def test_a_timeline_views_repr_names_its_lanes_and_events():
    from nbprof.views.timeline import describe

    view = nbprof.load_trace(str(TRACE)).timeline_view()
    assert repr(view) == f"<{describe(view.data)}>"
    assert repr(view).startswith("<Timeline: ") and " lane" in repr(view) and " event" in repr(view)


# -- Lightning's copies of nbprof's profiler -------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs lightning (the test extra)")
def test_a_copied_or_pickled_lightning_profiler_is_a_new_one_with_the_same_options(tmp_path):
    from .lightning_fit import lightning

    lightning("lightning")
    made = nbprof.lightning.Profiler(str(tmp_path), "prof", sort="cpu_total_us", limit=7, memory=True,
                                     schedule=(1, 1, 2, 1), quiet=True)
    for copied in (copy.deepcopy(made), pickle.loads(pickle.dumps(made))):
        assert type(copied) is type(made) and isinstance(copied, nbprof.lightning.Profiler) and copied is not made
        assert (copied.dirpath, copied.filename) == (str(tmp_path), "prof")
        assert vars(copied._flags) == vars(made._flags)
        assert copied._run is None and copied.results == []


# -- the standalone page's Content-Security-Policy -------------------------------------------------------


def test_the_standalone_pages_policy_runs_only_its_own_scripts_and_loads_nothing(tmp_path):
    """The written page's Content-Security-Policy, directive by directive (CSP level 3): nothing
    from anywhere by default, scripts only with the page's nonce (every script of the page has it),
    no inline event handlers, plugins, frames, forms or <base> (the browser test in test_hostile.py
    runs hostile pages under it; seed 53's csp 1 broke its default-src)."""
    import re

    path = tmp_path / "p.html"
    nbprof.load_trace(str(TRACE)).to_html(str(path))
    page = path.read_text(encoding="utf-8")
    import html as htmllib

    [policy] = [htmllib.unescape(p) for p in re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', page)]
    directives = {d.split()[0]: d.split()[1:] for d in (p.strip() for p in policy.split(";")) if d}
    [nonce] = {v for v in directives["script-src"] if v.startswith("'nonce-")}
    assert directives["default-src"] == ["'none'"]
    assert "'unsafe-inline'" not in directives["script-src"] and "*" not in policy and "http" not in policy
    for name in ("object-src", "base-uri", "form-action", "frame-src"):
        assert directives[name] == ["'none'"], name
    scripts = re.findall(r"<script\b([^>]*)>", page)
    assert scripts and all(f'nonce="{nonce[7:-1]}"' in attrs for attrs in scripts)


# -- what a failing cell's report says ------------------------------------------------------------------


@pytest.mark.parametrize("raised, said", [("ValueError()", "ValueError"), ("ValueError('  ')", "ValueError"),
                                          ("ValueError('bad batch\\nmore')", "ValueError: bad batch"),
                                          ("KeyError(3)", "KeyError: 3")])
def test_a_failing_cells_note_names_the_error_and_its_first_line_only_when_it_has_one(shell, raised, said):
    """The note of a cell that raised: its type, then the message's first line where it has one
    (seed 53's Run._notes 30 gave an empty message a made-up text)."""
    from .conftest import run

    result, _ = run(shell, f"%%cprofile -q -o failed\nsorted(range(5))\nraise {raised}\n")
    assert result.error_in_exec is not None
    notes = shell.user_ns["failed"].meta.notes
    assert f"the cell raised ({said}); this report shows what was recorded until then" in notes, notes


def test_a_timeline_views_drawing_is_the_size_asked(tmp_path):
    """``timeline_view().svg(width, height)``: the SVG of that size (seed 53's TimelineView.svg 8
    dropped the height)."""
    import re

    view = nbprof.load_trace(str(TRACE)).timeline_view()
    for width, height in ((640, 480), (1000, None)):
        head = re.match(r"<svg [^>]*>", view.svg(width=width, height=height)).group(0)
        assert f'width="{width}"' in head
        if height is not None:
            assert f'height="{height}"' in head
    assert view.svg(640, 480) != view.svg(640, 900)
