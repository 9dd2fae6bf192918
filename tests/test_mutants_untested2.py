"""Functions that no fast test called in the pytest process (seed 52's mutation run, issue 38: their
every mutant "not killed"), run here in this process and pinned as a user or a caller sees them:
the Actions tab as its table reads, the live timeline's selected span and its widget, a folder's
live timeline's hover arrows and its repr, a rank's cache built again from its file, a pool's
timeline-worker death message, its workers' idle timer and its Dask path (an in-process Dask
client: no process spawned). Expected values come from the raw trace files, the messages sent,
or are worked out by hand."""

from __future__ import annotations

import base64
import gzip
import json
import os
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import nbprof
from nbprof.format import esc_plotly, fmt_us

from .conftest import trace_path
from .synthetic import Trace
from .test_cluster_timeline import DEVICE, Raw, h100, load
from .test_mutants_views3 import _raw, _static_rows, dt_tables, panels

CPU_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead")
WORK_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
DRAWN_CATS = CPU_CATS + WORK_CATS + ("gpu_user_annotation",)


def raw_x(name: str, profile, cats) -> list[tuple[str, float, float]]:
    """(name, start_us, end_us) of the raw trace's complete events of ``cats``, on the profile's clock."""
    origin = profile.meta.origin_ns / 1000.0
    with gzip.open(trace_path(name), "rt") as f:
        events = json.load(f)["traceEvents"]
    return [(e["name"], e["ts"] - origin, e["ts"] - origin + e.get("dur", 0)) for e in events
            if e.get("ph") == "X" and e.get("cat") in cats]


def covered(intervals, a: float, b: float) -> float:
    """How much of [a, b] the intervals cover: a plain sweep, apart from nbprof's."""
    total, end = 0.0, a
    for s, e in sorted((max(s, a), min(e, b)) for s, e in intervals if e > a and s < b):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


# ------------------------------------------------------------------ the Actions tab, as its table reads


def test_the_actions_tab_shows_every_row_with_its_units_and_caption():
    """Five actions of six functions each (action k: function j's own time (j + 1)(k + 1) * 10 ms,
    1000 (j + 1) calls, cumtime twice the own time; runs k + 2): 31 rows (each action, its top 5,
    and the outside-every-action line), all shown at once (no pages: the rows are a tree, in their
    order), in the static preview as in the interactive table, with units worked out by hand."""
    by_action = {f"step{k}": _raw(*[("/w/m.py", 10 * k + j, f"f{k}{j}", 1000 * (j + 1), 1000 * (j + 1),
                                     0.01 * (j + 1) * (k + 1), 0.02 * (j + 1) * (k + 1)) for j in range(6)])
                 for k in range(5)}
    from nbprof.model import PythonProfile

    p = PythonProfile({key: v for raw in by_action.values() for key, v in raw.items()}, by_action=by_action,
                      action_counts={f"step{k}": k + 2 for k in range(5)})
    tab = panels(p.report().html(include_library=False))["Actions"]
    [table] = dt_tables(tab)
    m = tab.index("let dt_args = ")
    args, _ = json.JSONDecoder().raw_decode(tab[m + len("let dt_args = "):])
    assert args["paging"] is False and "pageLength" not in args and args["order"] == []  # the tree's own order
    assert args["caption"] == ("calls grouped by the action they ran under, by own time; the top 5 functions of "
                               "the bigger ones (p.action_stats(action) has them all)")
    # the name column reads left, the numbers right
    assert [d["className"] for d in args["columnDefs"]] == ["dt-left"] + ["dt-right"] * 5
    total = 0.21 * 15  # 3.15 s
    assert len(table["rows"]) == 31
    step4 = table["rows"][0]
    assert step4[:3] == ["step4", 6, 21000] and step4[5] == "___NaN___"
    np.testing.assert_allclose(step4[3:5], [1.05, 1.05 / total])
    # the static preview (what shows without scripts): every row, humanized
    rows = _static_rows(tab.split("nbprof-static", 1)[1])
    assert "more rows" not in tab and len(rows) == 31
    assert rows[0] == ["step4", "6", "21,000", "1.050 s", "33.3%", "—"]
    assert rows[1] == ["\u2003/w/m.py:45(f45)", "—", "6,000", "300.00 ms", "9.5%", "600.00 ms"]  # 0.3 of 3.15 s
    assert rows[5] == ["\u2003/w/m.py:41(f41)", "—", "2,000", "100.00 ms", "3.2%", "200.00 ms"]
    assert rows[6] == ["step3", "5", "21,000", "840.00 ms", "26.7%", "—"]
    assert rows[-2] == ["\u2003/w/m.py:1(f01)", "—", "2,000", "20.00 ms", "0.6%", "40.00 ms"]
    assert rows[-1] == ["(outside every action)", "1", "0", "0", "0.0%", "—"]
    assert [r[0] for r in rows] == [r[0] for r in table["rows"]]


# ------------------------------------------------------------------ the live timeline: a selected span


@pytest.fixture(scope="module")
def cnn():
    return nbprof.load_trace(trace_path("cnn_train_cuda"))


def expected_tables(name: str, profile, a: float, b: float, rows: int = 12) -> list[dict]:
    """The selection's tables from the raw trace: per name the events overlapping [a, b], their
    time inside it and their whole time, by time inside (then name); the first ``rows`` shown."""
    out = []
    for title, cats in (("Operators and ranges", CPU_CATS), ("Kernels", WORK_CATS)):
        by: dict[str, list] = {}
        for n, s, e in raw_x(name, profile, cats):
            if e >= a and s <= b:
                c = by.setdefault(n, [0, 0.0, 0.0])
                c[0] += 1
                c[1] += min(e, b) - max(s, a)
                c[2] += e - s
        order = sorted(by.items(), key=lambda kv: (-round(kv[1][1], 6), kv[0]))
        if order:
            out.append(dict(title=title, more=max(len(order) - rows, 0),
                            rows=[[n, f"{c:,}", fmt_us(w), fmt_us(t)] for n, (c, w, t) in order[:rows]]))
    return out


def test_a_selected_span_of_the_live_timeline_is_the_raw_traces_events_in_it(cnn):
    """``select`` (the toolbar's "Select span", then a drag): its head line (the span in ms, its
    length, the device's busy time as the union of the raw kernels in it) and its tables (ops,
    then kernels; 12 rows each, how many more), all from the raw trace; a span without device work
    has no busy part and no kernels' table; a span of nothing, no table; a span under 1 µs."""
    from nbprof.views.live_timeline import LiveTimelineState
    from nbprof.views.timeline import prepare_timeline

    full = prepare_timeline(cnn)
    state = LiveTimelineState(cnn, full, python=False, max_rects=20_000, height=None)
    work = [(s, e) for _, s, e in raw_x("cnn_train_cuda", cnn, WORK_CATS)]
    span = full.t1_us - full.t0_us
    a, b = full.t0_us + 0.3 * span, full.t0_us + 0.6 * span
    busy = covered(work, a, b)
    sel = state.select(a, b)
    assert sel["head"] == (f"{a / 1000:.3f} – {b / 1000:.3f} ms · {fmt_us(b - a)} · device busy {fmt_us(busy)} "
                           f"({100 * busy / (b - a):.0f} %)")
    want = expected_tables("cnn_train_cuda", cnn, a, b)
    assert [t["title"] for t in want] == ["Operators and ranges", "Kernels"] and want[0]["more"] > 0
    assert sel["tables"] == want
    # the longest stretch without device work: CPU ops only
    ends = sorted(work)
    gaps = [(e0, s1) for (_, e0), (s1, _) in zip(ends, ends[1:]) if s1 > e0]
    g0, g1 = max(gaps, key=lambda g: g[1] - g[0])
    a, b = g0 + 0.25 * (g1 - g0), g0 + 0.75 * (g1 - g0)
    assert covered(work, a, b) == 0
    sel = state.select(a, b)
    assert sel["head"] == f"{a / 1000:.3f} – {b / 1000:.3f} ms · {fmt_us(b - a)}"
    want = expected_tables("cnn_train_cuda", cnn, a, b)
    assert [t["title"] for t in want] == ["Operators and ranges"] and sel["tables"] == want
    # nothing before the first event
    sel = state.select(full.t0_us - 200.0, full.t0_us - 150.0)
    assert sel == {"head": f"{(full.t0_us - 200) / 1000:.3f} – {(full.t0_us - 150) / 1000:.3f} ms · 50.0 µs",
                   "tables": []}
    # half a µs inside the longest kernel: busy all of it
    s, e = max(work, key=lambda w: w[1] - w[0])
    a, b = s + 1.0, s + 1.5
    sel = state.select(a, b)
    assert sel["head"].endswith(" ms · 0.5 µs · device busy 0.5 µs (100 %)")


def test_the_rectangle_under_the_pointer_in_each_lane_the_first_included(cnn):
    """``rect_at(data, trace, x_ms)``: plotly's trace number is the row's place among the rows
    that have rectangles; the answer is the rectangle of that row whose span holds x, from the
    rectangles table itself; outside any rectangle, or a trace number out of range, None."""
    from nbprof.views.live_timeline import rect_at
    from nbprof.views.timeline import prepare_timeline

    data = prepare_timeline(cnn)
    r = data.rects
    rows = sorted(set(r["row"].tolist()))
    assert len(rows) >= 3
    for trace in (0, 1, len(rows) - 1):
        mine = r[r["row"] == rows[trace]]
        j = int(mine.index[len(mine) // 2])
        x_ms = (r["x0_us"].iat[j] + r["x1_us"].iat[j]) / 2000.0
        assert rect_at(data, trace, x_ms) == j
    first = r[r["row"] == rows[0]]
    before = (first["x0_us"].min() - 1000.0) / 1000.0
    assert rect_at(data, 0, before) is None
    assert rect_at(data, -1, before + 1.0) is None and rect_at(data, len(rows), before + 1.0) is None


# ------------------------------------------------------------------ the live timeline's widget


@pytest.fixture(scope="module")
def streams():
    return nbprof.load_trace(trace_path("two_streams"))


def test_the_live_timeline_widget_shows_the_profile_and_answers_with_its_options(streams):
    """``TimelineView.live()`` outside a kernel (the widget is made; no comm answers it): its text
    and its static drawing count the raw trace's drawn events and lanes; its state answers a zoom
    with the view's height and its budget of rectangles (the window merged to at most 30)."""
    from nbprof.views.timeline_view import TimelineView

    origin = streams.meta.origin_ns / 1000.0
    with gzip.open(trace_path("two_streams"), "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") in DRAWN_CATS]
    # (kineto writes its "overhead" events on a thread of their own: drawn on the main thread, as test_cluster_timeline.py has it)
    lanes = {("cpu", e["tid"]) for e in events if e["cat"] in CPU_CATS and e["cat"] != "overhead"} | \
        {("gpu", e["args"]["stream"]) for e in events if e["cat"] in WORK_CATS}
    view = TimelineView(streams, max_rects=30, height=345)
    widget = view.live()
    bundle = widget._repr_mimebundle_()
    shown = bundle[0] if isinstance(bundle, tuple) else bundle
    merged = view.data.merged_rects
    assert merged > 0  # 45 events in 30 rectangles
    assert shown["text/plain"] == (f"Timeline: {len(lanes)} lanes, {len(events)} events "
                                   f"({view.data.merged_events:,} merged into {merged} rects)")
    # the static drawing (no kernel behind the output): the lanes of the raw trace, labelled
    html = shown["text/html"]
    assert f" · {len(lanes)} lanes · {len(events)} events · span" in html and "<svg" in html
    for kind, key in lanes:
        assert (f"<title>CPU thread {key} (main)</title>" if kind == "cpu" else f"<title>CUDA 0 stream {key}</title>") in html
    state = widget.state
    assert state.profile is streams and state.full is view.data and state.python is False
    # nearly everything: more than 30 events; the edges half-way between two events' edges
    edges = sorted({e["ts"] - origin for e in events} | {e["ts"] - origin + e["dur"] for e in events})
    x0, x1 = (edges[2] + edges[3]) / 2000, (edges[-4] + edges[-3]) / 2000
    inside = [e for e in events if e["ts"] - origin + e.get("dur", 0) >= x0 * 1000 and e["ts"] - origin <= x1 * 1000]
    reply = state.answer({"type": "window", "x0": x0, "x1": x1, "width_px": 800, "seq": 1})
    # the height asked for is the plot's (the counter tracks under it add their own)
    taller = TimelineView(streams, max_rects=30, height=545).live().state.answer(
        {"type": "window", "x0": x0, "x1": x1, "width_px": 800, "seq": 1})
    assert taller["spec"]["layout"]["height"] - reply["spec"]["layout"]["height"] == 200
    assert len(inside) > 30 and state.current.events_drawn == len(inside)
    assert len(state.current.rects) <= 30 and state.current.merged_rects > 0


def test_the_live_timeline_of_python_frames_keeps_them_when_zoomed():
    """``live_timeline(python=True)``: a zoom draws the window's Python frames (as many as the raw
    trace's python_function events in it); without ``python`` (False by default) none."""
    from nbprof.views.live_timeline import live_timeline
    from nbprof.views.timeline import prepare_timeline

    p = nbprof.load_trace(trace_path("transformer_infer_stack"))
    py = raw_x("transformer_infer_stack", p, ("python_function",))
    mid = sorted(s for _, s, _ in py)[len(py) // 2]
    a, b = mid - 300.0, mid + 300.0
    inside = [n for n, s, e in py if e >= a and s <= b]
    assert len(inside) > 5
    message = {"type": "window", "x0": a / 1000, "x1": b / 1000, "width_px": 1000}
    with_py = live_timeline(p, prepare_timeline(p, python=True), python=True, max_rects=20_000)
    with_py.state.answer(message)
    r = with_py.state.current.rects
    assert int(r.loc[r["family"] == "python", "count"].sum()) == len(inside)
    without = live_timeline(p, prepare_timeline(p), max_rects=20_000)
    without.state.answer(message)
    assert without.state.python is False and not (without.state.current.rects["family"] == "python").any()


# ------------------------------------------------------------------ a folder's live timeline: hover arrows


def heatmap_y(spec: dict) -> list[float]:
    """The y of each row's trace of the figure (plotly's trace order: one heatmap per row)."""
    out = []
    for d in spec["data"]:
        if d["type"] != "heatmap":
            continue
        y = d["y"]
        if isinstance(y, dict):  # a typed array, as plotly sends numpy's
            y = np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])
        out.append(float(np.mean(y)))
    return out


def rank_of(data, rects):
    return data.lanes.set_index("lane")["rank"].reindex(rects["lane"].to_numpy()).to_numpy()


def folder_live_timeline(folder):
    """A folder's raw events, and its live timeline as the browser gets it: the view, its data, the
    kernel-side state, the heatmap's row positions and the drawn rectangles."""
    from nbprof.cluster.timeline import ClusterTimelineState

    view = load(folder).timeline_view()
    data = view.data
    state = ClusterTimelineState(view.timeline, data, height=None)
    return Raw(folder), view, data, state, heatmap_y(state.spec()), data.rects


def test_a_folders_live_timeline_draws_each_kernels_arrow_from_its_launch(tmp_path):
    """Hover on a kernel of a folder of ranks (the H100 trace twice): the arrow from the runtime
    call of its correlation id on the same rank to it, at the raw starts (common clock) and at the
    rows where the figure draws the two; back from the launch, the same arrow; on an op that
    launched nothing, a merged rectangle, or beside every rectangle, none."""
    folder = h100(tmp_path)
    raw, view, data, state, ys, r = folder_live_timeline(folder)
    rows = sorted(set(r["row"]))
    assert len(ys) == len(rows)
    ranks = rank_of(data, r)

    def hover(k):
        return state.answer({"type": "hover", "trace": rows.index(int(r["row"].iat[k])),
                             "x": (r["x0_us"].iat[k] + r["x1_us"].iat[k]) / 2000})["flow"]

    kernels = np.flatnonzero((r["family"] == "kernel").to_numpy() & (r["event"] >= 0).to_numpy())
    checked = 0
    for k in kernels[:: max(len(kernels) // 24, 1)]:
        rank, name, x0, x1 = int(ranks[k]), str(r["name"].iat[k]), float(r["x0_us"].iat[k]), float(r["x1_us"].iat[k])
        # the raw kernel the rectangle draws (a rectangle may start later than its event where the
        # one before it on the stream overlaps it)
        [e] = [e for e in raw.events(rank, DEVICE)
               if e["name"] == name and raw.start(e) <= x0 + 1e-3 and raw.end(e) >= x1 - 1e-3]
        [launch] = [c for c in raw.events(rank, {"cuda_runtime", "cuda_driver"})
                    if c.get("args", {}).get("correlation") == e["args"]["correlation"]]
        ls, ks = raw.start(launch), raw.start(e)
        [at] = np.flatnonzero((ranks == rank) & (np.abs(r["x0_us"].to_numpy() - ls) < 1e-3)
                              & (r["name"] == launch["name"]).to_numpy())
        f = hover(k)
        assert f == {"x0": pytest.approx(ls / 1000, abs=1e-9), "y0": pytest.approx(ys[rows.index(int(r["row"].iat[at]))]),
                     "x1": pytest.approx(ks / 1000, abs=1e-9), "y1": pytest.approx(ys[rows.index(int(r["row"].iat[k]))]),
                     "text": esc_plotly(name[:60]), "delay_us": pytest.approx(ks - ls, abs=1e-6)}
        # back from the launch: the same arrow (its text, which the browser does not show, is the
        # hovered rectangle's name here, the kernel's in one profile's live timeline)
        back = hover(at)
        assert {k: v for k, v in back.items() if k != "text"} == {k: v for k, v in f.items() if k != "text"}
        checked += 1
    assert checked >= 20 and len({int(ranks[k]) for k in kernels}) == 2
    assert max(len(str(n)) for n in r.loc[kernels, "name"]) > 60  # long names are cut
    ops = np.flatnonzero((r["name"] == "aten::mm").to_numpy() & (r["event"] >= 0).to_numpy())
    assert len(ops) and hover(ops[0]) is None
    merged = np.flatnonzero((r["event"] < 0).to_numpy())
    assert len(merged) and hover(merged[0]) is None
    assert state.flow(0, data.t0_us / 1000 - 5.0) is None and state.flow(len(rows), data.t0_us / 1000) is None
    # its repr: the lanes and events of the raw files
    lanes = sum(len({e["tid"] for e in raw.events(k, {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"})})
                + len({e["args"]["stream"] for e in raw.events(k, DEVICE)}) for k in raw.docs)
    drawn = sum(len(raw.events(k)) for k in raw.docs)
    assert repr(view).startswith(f"<Timeline: {lanes} lanes, {drawn:,} events") and repr(view).endswith(">")


def test_a_launch_on_the_first_row_has_its_arrow(tmp_path):
    """A runtime call at the top of rank 0's thread is the figure's first row (row 0): its kernel's
    arrow starts there (two hand-made ranks: a launch at 1 µs for 5 µs, its kernel at 10 µs)."""
    folder = tmp_path / "bare"
    folder.mkdir()
    for rank in (0, 1):
        t = Trace(rank=rank)
        t.launch("gemm", 0, 1.0 + rank, 5.0, 10.0 + rank, 20.0)
        t.write(folder / f"r{rank}.json")
    raw, view, data, state, ys, r = folder_live_timeline(folder)
    [k] = np.flatnonzero((r["name"] == "gemm").to_numpy() & (rank_of(data, r) == 0))
    [launch] = np.flatnonzero((r["name"] == "cudaLaunchKernel").to_numpy() & (rank_of(data, r) == 0))
    assert int(r["row"].iat[launch]) == 0
    [ls] = [raw.start(e) for e in raw.events(0, {"cuda_runtime"})]
    [ks] = [raw.start(e) for e in raw.events(0, DEVICE)]
    rows = sorted(set(r["row"]))
    f = state.flow(rows.index(int(r["row"].iat[k])), (r["x0_us"].iat[k] + r["x1_us"].iat[k]) / 2000)
    assert f == {"x0": pytest.approx(ls / 1000), "y0": pytest.approx(ys[0]), "x1": pytest.approx(ks / 1000),
                 "y1": pytest.approx(ys[rows.index(int(r["row"].iat[k]))]), "text": "gemm", "delay_us": pytest.approx(9.0)}


# ------------------------------------------------------------------ a rank's cache, built again from its file


def test_a_ranks_missing_cache_is_built_again_from_its_file(tmp_path, monkeypatch):
    """A rank whose cache is gone (a restarted Dask worker; none was written): the worker reads its
    file again, whatever the user's size limit (the file was read once under it), into the given
    folder or a new one under the cache directory (made with its parents); what it answers is the
    raw file's (find: the drawn events whose name holds the text, their time, their names)."""
    from nbprof.cluster import timeline as ct

    monkeypatch.setenv("NBPROF_CACHE_DIR", str(tmp_path / "deep" / "er" / "cache"))
    monkeypatch.setenv("NBPROF_MAX_TRACE_BYTES", "1000")  # far under the files' size
    monkeypatch.chdir(tmp_path)
    folder = h100(tmp_path)
    raw = Raw(folder)
    files = {d["distributedInfo"]["rank"]: str(f) for f in sorted(folder.iterdir())
             for d in [json.loads(f.read_text())]}
    try:
        for rank, file in files.items():
            gemm = [e for e in raw.events(rank) if "gemm" in e["name"].lower()]
            count, total, names = ct.find_part("", file, "GEMM")  # no cache: a new one, under the cache directory
            assert count == len(gemm) > 0 and names and set(names) == {e["name"] for e in gemm}
            assert total == pytest.approx(float(sum(e["dur"] for e in gemm)), rel=1e-9)
        made = sorted((tmp_path / "deep" / "er" / "cache").iterdir())
        assert len(made) == 2 and all(m.name.startswith(ct._prefix()) and (m / "index.pkl").exists() for m in made)
        assert sorted(os.listdir(tmp_path)) == sorted(["deep", "h100"])  # nothing written where it runs
        gone = tmp_path / "gone"  # the folder it was given, emptied
        gone.mkdir()
        first = min(raw.start(e) for e in raw.events(0))
        s = ct.select_part(str(gone), files[0], 0.0, 1e12)
        assert (gone / "index.pkl").exists()
        assert int(s.kernels["calls"].sum()) == len(raw.events(0, DEVICE)) and first >= 0
        # its full view, drawn from the rebuilt cache (its events and the trace's meta): every drawn event
        data, _ = ct.full_part(str(gone), files[0], 20_000, np.zeros(0, dtype=np.int64))
        assert int(data.rects["count"].sum()) == len(raw.events(0))
        # the lanes as the trace's meta names them: thread 403 is the process's own (pid 403), its main thread
        threads = sorted({e["tid"] for e in raw.events(0, {"cpu_op", "cuda_runtime"})})
        assert threads == [403, 429] and {e["pid"] for e in raw.events(0, {"cpu_op"})} == {403}
        assert data.lanes["label"].tolist() == ["CPU thread 403 (main)", "CPU thread 429 (autograd)", "CUDA 0 stream 7"]
    finally:
        for f in [f for f in ct._OPEN if f.startswith(str(tmp_path))]:
            ct._OPEN.pop(f)


# ------------------------------------------------------------------ the pool


def test_a_timeline_worker_that_died_is_one_line_saying_how():
    """What a view's caller reads when a timeline worker died (``RankPool.map``'s default): how it
    ended, from the process's exit code (read as ``death_of`` reads a dead worker), and that the
    next view starts new ones."""
    import signal

    from nbprof.cluster.workers import _view_death, death_of

    def died(code):
        return death_of([types.SimpleNamespace(pid=4242, exitcode=code)], None)

    end = "; the next view starts new ones"
    assert _view_death(died(-signal.SIGKILL), 2) == f"a timeline worker process was killed by SIGKILL (out of memory){end}"
    assert _view_death(died(3), 1) == f"a timeline worker process exited with code 3{end}"
    assert _view_death(died(-signal.SIGSEGV), 1) == f"a timeline worker process was killed by SIGSEGV{end}"
    assert _view_death(None, 1) == f"a timeline worker process ended unexpectedly{end}"
    assert _view_death(death_of([], None), 1) == f"a timeline worker process ended unexpectedly{end}"


def _new_threads(before: set) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before]


def test_a_pools_workers_are_made_once_and_end_when_idle():
    """The process pool a RankPool starts (no process yet: they are spawned on the first job): one
    per pool until closed, of ``workers`` spawned processes that do not run the caller's main, each
    started by nbprof's initializer with the pool's queue; after a call, a timer (a daemon thread:
    it keeps no interpreter from exiting) ends them ``idle_s`` later; none with ``idle_s=None`` or
    when nothing was started; a later call starts a new pool."""
    import concurrent.futures as cf

    from nbprof.cluster.workers import RankPool, _start_worker, _WorkerContext

    pool = RankPool(3, idle_s=0.05, keep_freed_memory=True)
    try:
        before = set(threading.enumerate())
        pool._arm()  # nothing started: nothing to end
        assert _new_threads(before) == [] and not pool.running
        ex = pool._start()
        assert isinstance(ex, cf.ProcessPoolExecutor) and pool.running and pool.started == 1
        assert pool._start() is ex and pool.started == 1
        # the stdlib's executor, as it was made (read back from it)
        assert ex._max_workers == 3 and isinstance(ex._mp_context, _WorkerContext)
        assert ex._mp_context.get_start_method() == "spawn"
        assert ex._initializer is _start_worker and ex._initargs == (pool._starts, True)
        assert hasattr(pool._starts, "put") and hasattr(pool._starts, "get") and pool._processes == []
        assert not ex._processes  # nothing spawned here
        pool._arm()
        [timer] = _new_threads(before)
        assert timer.daemon
        deadline = time.monotonic() + 10
        while pool.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pool.running
        timer.join(5)
        assert not timer.is_alive()
        assert pool._start() is not ex and pool.started == 2
    finally:
        pool.close()
    kept = RankPool(1, idle_s=None)
    try:
        kept._start()
        before = set(threading.enumerate())
        kept._arm()
        time.sleep(0.1)
        assert _new_threads(before) == [] and kept.running and kept.started == 1
        assert kept._pool._initargs == (kept._starts, False)
    finally:
        kept.close()
    assert not kept.running


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    # ":0": a free port (None here still takes 8787, and warns where another run holds it)
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        yield client


def _ran_on(x):
    from distributed import get_worker

    return x, get_worker().address


def _fails(x):
    raise ValueError(f"job {x} failed")


_RAN: list = []


def _slow(x):
    time.sleep(0.1)
    _RAN.append(x)
    return x


def test_a_failed_job_on_dask_cancels_the_jobs_not_started(dask_client):
    """A job's error on Dask: the caller gets it at once, and the jobs queued behind it on the same
    worker (one thread) are cancelled: at most the one running goes on (without the cancel, all
    five would run in the 0.5 s the test then waits)."""
    from nbprof.cluster.workers import RankPool

    pool = RankPool(0, client=dask_client)
    a, _ = sorted(dask_client.scheduler_info()["workers"])
    _RAN.clear()
    with pytest.raises(ValueError, match="^job 0 failed$"):
        list(pool.as_completed(lambda x: _fails(x) if x == 0 else _slow(x), [(i,) for i in range(6)], [a] * 6))
    time.sleep(0.8)
    assert len(_RAN) <= 2


def test_a_pool_on_dask_runs_each_job_where_it_is_named(dask_client):
    """A pool of a Dask client (an in-process one here): each job once (equal jobs too: each its
    own result), a job named for a worker on that worker, the others anywhere, the results in the
    jobs' order; a job's error goes on as it is."""
    from nbprof.cluster.workers import RankPool

    pool = RankPool(0, client=dask_client)
    assert pool.kind == "dask"
    a, b = sorted(dask_client.scheduler_info()["workers"])
    jobs = [(1,), (1,), (2,), (3,), (4,), (5,)]
    got = pool.map(_ran_on, jobs, [b, b, b, b, "", ""])
    assert [x for x, _ in got] == [1, 1, 2, 3, 4, 5]
    assert [w for _, w in got[:4]] == [b] * 4 and {w for _, w in got[4:]} <= {a, b}
    got = pool.map(_ran_on, [(7,), (8,)])  # named nowhere
    assert [x for x, _ in got] == [7, 8]
    got = pool.map(_ran_on, [(9,)] * 3, [a] * 3)
    assert got == [(9, a)] * 3
    with pytest.raises(ValueError, match="^job 2 failed$"):
        pool.map(_fails, [(2,)], [a])
    assert pool.map(_ran_on, []) == []


def test_a_folders_zoom_to_the_whole_span_or_wider_or_none_is_the_full_view(tmp_path):
    """Zooming a folder's live timeline out to its whole span (or wider, either way round, or with
    no window: plotly's autorange) shows the full view already drawn, without asking the workers;
    a narrower window asks them and draws only what it holds (seed 53's ClusterTimelineState.window 14)."""
    raw, view, data, state, ys, r = folder_live_timeline(h100(tmp_path))
    for x0, x1 in ((data.t0_us - 5, data.t1_us + 5), (data.t1_us + 5, data.t0_us - 5), (data.t0_us, data.t1_us),
                   (None, None), (None, data.t1_us)):
        state.current = None
        assert state.window(x0, x1, 800) is data and state.current is data, (x0, x1)
    mid = (data.t0_us + data.t1_us) / 2
    part = state.window(mid, mid + (data.t1_us - data.t0_us) / 10, 800)
    assert part is not data and state.current is part
    assert (part.t0_us, part.t1_us) == (mid, mid + (data.t1_us - data.t0_us) / 10)
