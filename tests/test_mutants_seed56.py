"""Behaviour seed 56's mutation sample found untested (docs/testing.md), each against an answer
read from the recorded trace or the standard library, or worked out by hand: a comparison by
kernel naming its biggest changes short and its Change column signed, a snapshot frame's long
path, which ops wait for the cell thread's line, each memory event's outermost op against the raw
file, cProfile's cost per call measured once, a .prof whose numbers disagree, a zero-duration
copy's bandwidth, a nameless op under a range, the profiler holding the hook named, the Kernels
tab's GB/s column, the overview's 30 bars."""

from __future__ import annotations

import nbprof

from .conftest import trace_path


def test_a_comparison_by_kernel_names_its_biggest_changes_short():
    """The headline of cnn_train_cuda against cnn_cuda_toggled by kernel: the biggest regression is
    the direct-copy ``elementwise_kernel``, whose C++ signature is 814 characters; the line names
    it as a reader would (no ``void``, no ``at::native::``), and stays one line's length."""
    b = nbprof.load_trace(trace_path("cnn_train_cuda"))
    a = nbprof.load_trace(trace_path("cnn_cuda_toggled"))
    s = nbprof.compare(b, a, by="kernel").summary
    assert s.biggest_regression.startswith("void at::native::elementwise_kernel<128, 2,")
    assert len(s.biggest_regression) == 814
    text = s.text()
    assert "biggest regression elementwise_kernel<128, 2, gpu_kernel_impl_nocast<" in text
    assert "at::native::" not in text and "void " not in text and len(text) < 300, text
    assert "biggest win sm80_xmma_wgrad_implicit_gemm_indexed" in text


def test_a_snapshots_frames_keep_a_long_path_whole_and_read_a_number_as_text(tmp_path):
    """A block allocated from a file whose path is 300 characters long keeps the whole path in its
    frames (a path is text: only what is not text is cut to 200, after being made text)."""
    from .snapshots import MiB, block, segment, write

    long_path = "/home/user/" + "deep/" * 57 + "train.py"
    assert len(long_path) == 304
    frames = [{"filename": long_path, "line": 12, "name": "step"}, {"filename": 7 * 10**250, "line": 3, "name": 9}]
    a = 0x7F00_0000_0000
    snap = {"segments": [segment(a, 2 * MiB, [block(a, MiB, MiB, "active_allocated", frames),
                                              block(a + MiB, MiB, MiB, "inactive")])]}
    p = nbprof.load_snapshot(write(snap, tmp_path / "s.pickle"))
    ((first, second),) = p.blocks("end")["frames"].tolist()
    assert first == (long_path, 12, "step")
    assert second == (str(7 * 10**250)[:200], 3, "9") and len(second[0]) == 200


def test_which_ops_wait_for_the_cell_threads_line():
    """``analysis.lines._unplaced``'s rule, from the line recorder's per-op marks: ``True`` (no
    Python call above: autograd's device thread) always waits to be placed; ``False`` (a user line
    above it) never; a thread id does when it is the thread that made most of the user's calls
    (the cell's), or, with no calls recorded, whatever thread it names."""
    from nbprof.analysis.lines import _unplaced

    marks = [True, False, 4242, 77, False]
    assert _unplaced(marks, {}, 5).tolist() == [True, False, True, True, False]
    calls = {"thread": [4242, 4242, 77]}
    assert _unplaced(marks, calls, 5).tolist() == [True, False, True, False, False]
    assert _unplaced(None, calls, 3).tolist() == [False, False, False]


def test_each_memory_events_outermost_operator_is_the_raw_files():
    """``analysis.memory.outermost_op_rows`` (alive_at_end's and memory_growth's ``top_op``) on
    cnn_train_cuda's 425 memory events: the outermost CPU op whose span holds each one on its
    thread in the raw JSON (none: -1); and no rows, no answer."""
    from collections import Counter

    import numpy as np

    from nbprof.analysis.memory import outermost_op_rows

    from .test_compare import raw_trace

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    ev = p.events
    rows = np.flatnonzero((ev["kind"].astype(str) == "memory").to_numpy())
    top = outermost_op_rows(ev, rows)
    names = ev["name"].astype(str).to_numpy()
    got = Counter(names[t] if t >= 0 else None for t in top)
    raw = raw_trace("cnn_train_cuda")["traceEvents"]
    ops = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    want = Counter()
    for m in (e for e in raw if e.get("name") == "[memory]"):
        around = [o for o in ops if o["tid"] == m["tid"] and o["ts"] <= m["ts"] <= o["ts"] + o["dur"]]
        want[min(around, key=lambda o: (o["ts"], -o["dur"]))["name"] if around else None] += 1
    assert sum(want.values()) == len(rows) == 425 and got == want
    assert outermost_op_rows(ev, np.zeros(0, dtype=np.int64)).tolist() == []


def test_cprofiles_cost_per_call_is_measured_once_per_process(monkeypatch):
    """What cProfile adds to a call (the workers' time is corrected by it): a number of ns, not
    negative, measured on the first ask and the same number on every later one (each DataLoader
    iterator asks)."""
    from nbprof.collect import data_loading

    monkeypatch.setattr(data_loading, "_call_cost_ns", None)  # as in a fresh process
    first = data_loading.cprofile_call_cost_ns()
    assert isinstance(first, float) and 0.0 <= first < 1e6
    assert data_loading.cprofile_call_cost_ns() is first


def test_a_prof_whose_edge_holds_more_than_its_callees_total_still_draws(tmp_path):
    """A .prof whose numbers disagree (hand-edited, or merged from runs: main → f says 0.5 s, f's
    own total says 0 s, as a coarse clock reads it): the call tree is built, not a division by f's
    0 s; f gets its edge's 0.5 s under main, and its callee g nothing of f's 0."""
    import marshal

    main, f, g = ("m.py", 1, "main"), ("m.py", 5, "f"), ("m.py", 9, "g")
    stats = {main: (1, 1, 0.5, 1.0, {}), f: (1, 1, 0.0, 0.0, {main: (1, 1, 0.0, 0.5)}),
             g: (1, 1, 0.0, 0.0, {f: (1, 1, 0.0, 0.0)})}
    (tmp_path / "odd.prof").write_bytes(marshal.dumps(stats))
    tree = nbprof.load_prof(tmp_path / "odd.prof").call_tree(min_fraction=0)
    by = {r.function: r for r in tree.itertuples()}
    assert by["main"].value_s == 1.0 and by["f"].value_s == 0.5, tree
    assert tree.loc[by["f"].parent, "function"] == "main" and "g" not in by


def test_a_copy_of_no_measured_duration_has_no_bandwidth_and_no_warning(tmp_path):
    """A 4 KiB memcpy the device clock read as 0 µs (and a kernel beside it): kernels() gives its
    bandwidth as NaN, without numpy's "divide by zero" warning reaching the user's cell."""
    import math
    import warnings

    from .synthetic import Trace

    t = Trace()
    t.op("aten::copy_", 0, 20)
    t.launch("Memcpy HtoD (Pageable -> Device)", 0, 1.0, 5.0, 10.0, 0.0, runtime="cudaMemcpyAsync",
             cat="gpu_memcpy", nbytes=4096)
    t.launch("gemm", 0, 7.0, 2.0, 12.0, 3.0)
    p = nbprof.load_trace(t.write(tmp_path / "t.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = p.kernels().set_index("kind")
    assert k.loc["memcpy", "bytes"] == 4096 and k.loc["memcpy", "device_total_us"] == 0
    assert math.isnan(k.loc["memcpy", "bandwidth_gbps"])


def test_a_nameless_operator_under_a_range_is_its_own_row_named_empty(tmp_path):
    """``analysis.ranges.range_ops`` on an events table whose operator under a range has no name (a
    table built by hand: the reader leaves such events out): that operator is a row of its own
    named "", never given another name."""
    import numpy as np

    from nbprof.analysis.ranges import range_ops

    from .synthetic import Trace

    t = Trace()
    t.annotation("forward", 0, 100)
    t.op("aten::mm", 10, 30)
    t.op("aten::relu", 50, 20)
    ev = nbprof.load_trace(t.write(tmp_path / "t.json")).events.copy()
    ev.loc[(ev["name"] == "aten::relu").to_numpy(), "name"] = np.nan
    got = range_ops(ev)
    assert sorted(got["name"].tolist()) == ["", "aten::mm"] and set(got["path"]) == {"forward"}
    assert got.set_index("name").loc["", "self_cpu_us"] == 20


def test_the_profiler_holding_the_hook_is_named_by_its_type():
    """What ``%%cprofile`` says when the hook is taken: a ``cProfile.Profile`` enabled is named
    Profile, a plain function set with ``sys.setprofile`` is named function, a bound method by
    its object's class; a free hook: None."""
    import cProfile
    import sys

    from nbprof.collect.cprofile import another_profiler_active

    class Tracer:
        def hook(self, frame, event, arg):
            return None

    def plain(frame, event, arg):
        return None

    assert sys.getprofile() is None and another_profiler_active() is None
    said = []
    try:
        for start in (lambda: sys.setprofile(plain), lambda: sys.setprofile(Tracer().hook)):
            start()
            said.append(another_profiler_active())
            sys.setprofile(None)
        prof = cProfile.Profile()
        prof.enable()
        said.append(another_profiler_active())
        prof.disable()
    finally:
        sys.setprofile(None)
    assert said == ["another profiler is already active (function)", "another profiler is already active (Tracer)",
                    "another profiler is already active (Profile)"]


def test_the_kernels_tab_has_a_bandwidth_column_only_with_copies(tmp_path):
    """A copy of 8 MB in 4 µs moves 2,000 GB/s: the Kernels tab gains a GB/s column where the
    profile has a memcpy (its row 2000, the kernel's empty), none for kernels alone."""
    from .synthetic import Trace
    from .test_mutants_views3 import dt_tables, panels

    def kernels_table(with_copy: bool) -> dict:
        t = Trace()
        t.op("aten::mm", 0, 40)
        t.launch("gemm", 0, 1.0, 2.0, 10.0, 3.0)
        if with_copy:
            t.launch("Memcpy HtoD (Pageable -> Device)", 0, 5.0, 2.0, 20.0, 4.0, runtime="cudaMemcpyAsync",
                     cat="gpu_memcpy", nbytes=8_000_000)
        p = nbprof.load_trace(t.write(tmp_path / f"t{with_copy}.json"))
        [table] = dt_tables(panels(p.report(limit=0).html(include_library=False))["Kernels"])
        return table

    plain, copied = kernels_table(False), kernels_table(True)
    assert "GB/s" not in plain["headers"]
    col = copied["headers"].index("GB/s")
    by_name = {row[0]: row[col] for row in copied["rows"]}
    assert by_name["Memcpy HtoD (Pageable -> Device)"] == 2000.0


def test_the_overview_draws_thirty_steps_and_counts_the_rest(tmp_path):
    """32 steps (ProfilerStep#0..31, 1 ms each with an op inside): the overview's bars are the
    first 30, then a line saying 2 more steps are in p.overview()."""
    import re

    from nbprof.views.overview import overview_html

    from .htmltext import text
    from .synthetic import Trace

    t = Trace()
    for k in range(32):
        t.annotation(f"ProfilerStep#{k}", 1000 * k, 999)
        t.op("aten::mm", 1000 * k + 10, 500)
    p = nbprof.load_trace(t.write(tmp_path / "steps.json"))
    assert len(p.steps()) == 32
    html = overview_html(p)
    labels = re.findall(r'<span style="width:5em;flex:none">(.*?)</span>', html)
    assert labels == [f"step {k}" for k in range(30)]
    assert "2 more steps: p.overview()" in text(html)


def test_the_comparison_texts_change_column_carries_its_sign():
    """The text table of cnn_train_cuda against cnn_cuda_toggled: a row that got slower reads "+"
    (aten::copy_, 4.8 µs more self CUDA time), one that got faster "−" (convolution_backward,
    197.1 µs less): the Change column is signed, as the headline's biggest win and regression."""
    b = nbprof.load_trace(trace_path("cnn_train_cuda"))
    a = nbprof.load_trace(trace_path("cnn_cuda_toggled"))
    c = nbprof.compare(b, a, limit=0)
    t = c.table.set_index("name")
    assert round(t.loc["aten::copy_", "self_device_us_change"], 1) == 4.8
    assert round(t.loc["aten::convolution_backward", "self_device_us_change"], 1) == -197.1
    rows = {line.split("  ")[0]: line for line in c.text().splitlines()}
    assert " +4.8 µs " in rows["aten::copy_"] and " −197.1 µs " in rows["aten::convolution_backward"]


def test_the_memory_figures_hover_names_each_points_op_and_change():
    """``memory_curve()`` of cnn_train_cuda: each point of a device's allocated line carries (the op
    that was open, the bytes it added or freed) for the hover, the curve's own rows in order."""
    import numpy as np

    from nbprof.analysis.memory import memory_curve

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    fig = p.memory_curve()
    curve = memory_curve(p.events)
    for device, d in curve.groupby("device", sort=True):
        [trace] = [t for t in fig.data if t.name == f"{device} allocated"]
        custom = np.asarray(trace.customdata, dtype=object)
        assert custom.shape == (len(d), 2)
        assert [str(op) for op in custom[:, 0]] == d["op"].astype(str).tolist()
        assert [int(b) for b in custom[:, 1]] == d["delta_bytes"].tolist()
        assert "%{customdata[1]:+,} B in %{customdata[0]}" in trace.hovertemplate


def test_a_long_blocks_source_shows_what_ran_and_three_lines_around_it():
    """The Source tab's rule for a function of more than 150 lines: its first line, each line that
    ran with 3 lines before and after, "⋯" (None) for each gap; one of exactly 150 lines whole."""
    from nbprof.views.tabs.source import _shown_lines

    assert _shown_lines(1, 150, {70}) == list(range(1, 151))
    got = _shown_lines(1, 151, {70, 151})
    assert got == [1, None, 67, 68, 69, 70, 71, 72, 73, None, 148, 149, 150, 151]
    assert _shown_lines(10, 400, {12}) == [10, 11, 12, 13, 14, 15, None]


def test_callers_with_equal_times_keep_pstats_order(tmp_path):
    """g called from 20 functions, their edges alternately 2 ms and 1 ms (pstats' numbers, written
    by hand): ``callers("g")`` lists the 2 ms ones first, then the 1 ms ones, each group in the
    order pstats holds them (f0, f2, ... then f1, f3, ...): ties are not shuffled."""
    import marshal

    g = ("m.py", 100, "g")
    edges = {("m.py", i + 1, f"f{i}"): (1, 1, 0.0, 0.002 if i % 2 == 0 else 0.001) for i in range(20)}
    stats = {k: (1, 1, 0.0, v[3], {}) for k, v in edges.items()}
    stats[g] = (20, 20, 0.03, 0.03, edges)
    (tmp_path / "t.prof").write_bytes(marshal.dumps(stats))
    got = nbprof.load_prof(tmp_path / "t.prof").callers("g")["function"].tolist()
    assert got == [f"f{i}" for i in range(0, 20, 2)] + [f"f{i}" for i in range(1, 20, 2)]
