"""The timeline view: lanes, levels, merging, hover, colors, and its renderings.

Answers are computed here independently of nbprof where we can: lanes from the events table's
own columns, launching ops by joining External ids in the raw chrome trace, busy time as the
union of event intervals.
"""

from __future__ import annotations

import gzip
import html
import json
import re
import shutil
import sys

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.events import KIND_CODE, make_events_frame
from nbprof.model import TorchProfile
from nbprof.views.figure import PLOTLY_MIME, figure_bundle, figure_json
from nbprof.views.timeline import (
    PALETTES,
    prepare_timeline,
    timeline_figure,
    timeline_svg,
)

from nbprof.views.timeline_view import TimelineView

from .conftest import TRACES, trace_path, union_length

CPU_KINDS = ("op", "annotation", "runtime", "overhead", "other")
DEVICE_KINDS = ("kernel", "memcpy", "memset", "gpu_annotation")
WORK_KINDS = ("kernel", "memcpy", "memset")


# ------------------------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def profiles():
    return {name: nbprof.load_trace(trace_path(name)) for name in TRACES}


def raw_events(name: str) -> list[dict]:
    with gzip.open(trace_path(name), "rt") as f:
        return json.load(f)["traceEvents"]


def row_traces(fig) -> list:
    return [t for t in fig.data if t.type == "heatmap"]


OPS = [f"aten::{n}" for n in ("add", "mul", "linear", "conv2d", "relu", "matmul", "softmax", "layer_norm",
                               "dropout", "gelu", "copy_", "sum", "mean", "addmm", "bmm", "cat")]
CHILD = [f"aten::{n}" for n in ("empty", "view", "as_strided", "mm", "_to_copy", "fill_", "transpose")]
KERNELS = [f"void at::native::kernel_{i}<float, 128, 4>(at::TensorIteratorBase&, float const*, long)"
           for i in range(20)]


def synthetic_events(n_target: int, seed: int = 0, blocks_per_step: int = 2000) -> pd.DataFrame:
    """About ``n_target`` events shaped like a training loop, built with numpy in about a second
    per million: ProfilerStep#N annotations on the main CPU thread; on two CPU threads, runs of
    ops, each with two child ops that launch a kernel through cudaLaunchKernel; kernels on two
    CUDA streams linked to their ops by External id; an idle gap between steps."""
    rng = np.random.default_rng(seed)
    B = max((n_target - n_target // (7 * blocks_per_step)) // 7, 1)
    thread_of = np.array([100, 200])[np.arange(B) % 2]
    stream_of = np.array([7, 20])[np.arange(B) % 2]
    top_dur = rng.uniform(15, 30, B) * np.where(rng.random(B) < 0.002, 40, 1)  # a few long ops
    gap = rng.uniform(1, 4, B)
    step_of = np.arange(B) // blocks_per_step
    gap = gap + np.where(np.r_[step_of[2:] != step_of[:-2], False, False], 3000.0, 0.0)
    start = np.zeros(B)
    for t in (0, 1):
        sel = np.arange(t, B, 2)
        start[sel] = 10.0 + np.concatenate(([0.0], np.cumsum(top_dur[sel] + gap[sel])[:-1])) + t * 5
    c_start = np.stack([start + 1, start + top_dur / 2], 1)
    c_dur = np.stack([top_dur / 2 - 2, top_dur / 2 - 1], 1)
    r_start = c_start + 1
    r_dur = np.minimum(c_dur - 2, 3.0)
    # kernels queue on their stream: each starts after its launch and after the previous one ends
    k_dur = rng.uniform(1, 6, (B, 2)) * np.where(rng.random((B, 2)) < 0.01, 30, 1)
    k_ready = (r_start + 5 + rng.uniform(0, 3, (B, 2))).ravel()
    k_dur_flat = k_dur.ravel()
    k_stream = np.repeat(stream_of, 2)
    k_start = np.empty_like(k_ready)
    for s in (7, 20):
        sel = np.flatnonzero(k_stream == s)
        sel = sel[np.argsort(k_ready[sel], kind="stable")]
        ready, dur = k_ready[sel], k_dur_flat[sel]
        # start_i = max(ready_i, end_{i-1}): a running maximum of (ready_j - sum of earlier durations)
        before = np.concatenate(([0.0], np.cumsum(dur)[:-1]))
        k_start[sel] = np.maximum.accumulate(ready - before) + before
    ext_top = 1 + 3 * np.arange(B)
    ext_child = np.stack([ext_top + 1, ext_top + 2], 1)
    corr = np.stack([1 + 2 * np.arange(B), 2 + 2 * np.arange(B)], 1)
    main = thread_of == 100
    s_start, s_end = [], []
    for k in np.unique(step_of):
        sel = (step_of == k) & main
        if sel.any():
            s_start.append(start[sel].min() - 1)
            s_end.append((start[sel] + top_dur[sel]).max() + 1)
    S = len(s_start)
    s_start, s_end = np.array(s_start), np.array(s_end)
    names = np.concatenate([
        np.asarray(OPS, dtype=object)[rng.integers(0, len(OPS), B)],
        np.asarray(CHILD, dtype=object)[rng.integers(0, len(CHILD), 2 * B)],
        np.full(2 * B, "cudaLaunchKernel", dtype=object),
        np.asarray(KERNELS, dtype=object)[rng.integers(0, len(KERNELS), 2 * B)],
        np.array([f"ProfilerStep#{k}" for k in range(S)], dtype=object),
    ])
    kind = np.concatenate([np.full(3 * B, KIND_CODE["op"]), np.full(2 * B, KIND_CODE["runtime"]),
                           np.full(2 * B, KIND_CODE["kernel"]), np.full(S, KIND_CODE["annotation"])])
    th2 = np.repeat(thread_of, 2)
    thread = np.concatenate([thread_of, th2, th2, np.full(2 * B, -1), np.full(S, 100)])
    stream = np.concatenate([np.full(5 * B, -1), k_stream, np.full(S, -1)])
    device = np.concatenate([np.full(5 * B, -1), np.zeros(2 * B, dtype=np.int64), np.full(S, -1)])
    st = np.concatenate([start, c_start.ravel(), r_start.ravel(), k_start, s_start])
    du = np.concatenate([top_dur, c_dur.ravel(), r_dur.ravel(), k_dur_flat, s_end - s_start])
    ext = np.concatenate([ext_top, ext_child.ravel(), ext_child.ravel(), ext_child.ravel(), 3 * B + 10 + np.arange(S)])
    cor = np.concatenate([np.zeros(3 * B, dtype=np.int64), corr.ravel(), corr.ravel(), np.zeros(S, dtype=np.int64)])
    n = len(st)
    return make_events_frame(
        name=names, kind=kind.astype(np.int64), device=device, thread=thread, stream=stream,
        start_us=np.rint(st * 1000) / 1000.0, dur_us=np.rint(du * 1000) / 1000.0,
        correlation=cor, external_id=ext.astype(np.int64), pid=np.full(n, 1, dtype=np.int64),
    )


@pytest.fixture(scope="module")
def big():
    """A synthetic profile of a million events."""
    return TorchProfile(synthetic_events(1_000_000))


# --------------------------------------------------------------------------------------- lanes


@pytest.mark.parametrize("name", TRACES)
def test_every_thread_and_stream_gets_a_lane(profiles, name):
    p = profiles[name]
    ev = p.events
    kind = ev["kind"].astype(str)
    cpu = ev[kind.isin(CPU_KINDS) & (ev["thread"] >= 0)]
    dev = ev[kind.isin(DEVICE_KINDS) & (ev["stream"] >= 0)]
    expected_threads = set(cpu["thread"].unique().tolist())
    expected_streams = set(zip(dev["device"].astype(str), dev["stream"]))

    data = prepare_timeline(p)
    lanes = data.lanes
    assert set(lanes.loc[lanes["kind"] == "cpu", "thread"].tolist()) == expected_threads
    assert set(zip(lanes.loc[lanes["kind"] == "device", "device"], lanes.loc[lanes["kind"] == "device", "stream"])) \
        == expected_streams
    assert len(lanes) == len(expected_threads) + len(expected_streams)
    # lanes are labelled on the figure's y axis, CPU threads first, the main thread first of all
    fig = timeline_figure(p)
    labels = list(fig.layout.yaxis.ticktext)
    main = p.meta.main_thread
    assert labels[0] == f"CPU thread {main} (main)"
    for t in expected_threads:
        assert any(lab.startswith(f"CPU thread {t}") for lab in labels)
    for d, s in expected_streams:
        assert f"CUDA {d.split(':')[1]} stream {s}" in labels
    first_device = min(i for i, lab in enumerate(labels) if lab.startswith("CUDA"))
    assert all(lab.startswith("CPU") for lab in labels[:first_device])


def test_two_streams_have_two_lanes(profiles):
    data = prepare_timeline(profiles["two_streams"])
    dev = data.lanes[data.lanes["kind"] == "device"]
    assert list(dev["label"]) == ["CUDA 0 stream 46", "CUDA 0 stream 50"]
    # kernels land on their own stream's lane, at level 0
    ev = profiles["two_streams"].events
    r = data.rects[data.rects["event"] >= 0]
    kern = r[r["family"] == "kernel"]
    streams = ev["stream"].to_numpy()[kern["event"].to_numpy()]
    lane_stream = dict(zip(dev["lane"], dev["stream"]))
    assert [lane_stream[lane] for lane in kern["lane"]] == streams.tolist()
    assert (kern["level"] == 0).all()


def test_autograd_thread_is_named(profiles):
    labels = prepare_timeline(profiles["cnn_train_cuda"]).lanes["label"].tolist()
    assert labels == ["CPU thread 403 (main)", "CPU thread 429 (autograd)", "CUDA 0 stream 7"]


def test_levels_are_the_tree_depth(profiles):
    p = profiles["cnn_train_cuda"]
    ev = p.events
    data = prepare_timeline(p)
    r = data.rects[(data.rects["event"] >= 0)]
    cpu = r[data.lanes.set_index("lane").loc[r["lane"], "kind"].to_numpy() == "cpu"]
    assert (cpu["level"].to_numpy() == ev["depth"].to_numpy()[cpu["event"].to_numpy()]).all()
    # record_function ranges are drawn, on the main thread, at their depth
    ann = r[r["family"] == "annotation"]
    assert sorted(set(ann["name"])) == sorted(set(ev.loc[ev["kind"] == "annotation", "name"].astype(str)))
    # a GPU annotation sits under the kernels of its stream
    gpu = r[r["family"] == "gpu_annotation"]
    assert len(gpu) == (ev["kind"] == "gpu_annotation").sum() and (gpu["level"] == 1).all()


def test_memory_events_are_not_drawn(profiles):
    p = profiles["cnn_train_cuda"]
    data = prepare_timeline(p)
    n_memory = int((p.events["kind"] == "memory").sum())
    assert n_memory > 0
    assert data.hidden.get("memory") == n_memory
    drawn = data.rects.loc[data.rects["event"] >= 0, "event"]
    assert not (p.events["kind"].to_numpy()[drawn.to_numpy()] == "memory").any()


# ------------------------------------------------------------------------------- coverage, merge


@pytest.mark.parametrize("name", TRACES)
def test_top_level_coverage_equals_union_of_events(profiles, name):
    p = profiles[name]
    ev = p.events
    kind = ev["kind"].astype(str)
    data = prepare_timeline(p)
    assert data.merged_rects == 0  # small profiles are drawn event by event
    r = data.rects
    for lane in data.lanes.itertuples():
        if lane.kind == "cpu":
            sel = kind.isin(CPU_KINDS) & (ev["thread"] == lane.thread) & (ev["depth"] == 0)
        else:
            sel = kind.isin(WORK_KINDS) & (ev["stream"] == lane.stream) & (ev["device"].astype(str) == lane.device)
        top = ev[sel]
        expected = union_length(zip(top["start_us"], top["start_us"] + top["dur_us"]))
        rr = r[(r["lane"] == lane.lane) & (r["level"] == 0)]
        got = union_length(zip(rr["x0_us"], rr["x1_us"]))
        assert got == pytest.approx(expected, abs=1e-6), lane.label
        assert rr["busy_us"].sum() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", TRACES)
def test_every_event_is_in_one_rect(profiles, name):
    p = profiles[name]
    ev = p.events
    kind = ev["kind"].astype(str)
    drawable = (kind.isin(CPU_KINDS) & (ev["thread"] >= 0) & (ev["depth"] >= 0)) | \
        (kind.isin(DEVICE_KINDS) & (ev["stream"] >= 0))
    for merge in (False, True):
        data = prepare_timeline(p, merge=merge)
        r = data.rects
        assert r["count"].sum() == drawable.sum() == data.events_drawn
        merged = r[r["count"] > 1]
        assert merged["count"].sum() + (r["count"] == 1).sum() == drawable.sum()
        assert (data.merged_events, data.merged_rects) == (merged["count"].sum(), len(merged))
        # unmerged rects are exactly the events they stand for
        single = r[r["event"] >= 0]
        assert single["x0_us"].to_numpy() == pytest.approx(ev["start_us"].to_numpy()[single["event"]])
        assert single["x1_us"].to_numpy() == pytest.approx(
            (ev["start_us"] + ev["dur_us"]).to_numpy()[single["event"]])


def test_merging_at_pixel_resolution(profiles):
    p = profiles["cnn_train_cuda"]
    data = prepare_timeline(p, merge=True)
    px = data.span_us / 2000
    assert data.px_us == pytest.approx(px)
    r = data.rects
    merged = r[r["count"] > 1]
    assert len(merged) and merged["count"].sum() == data.merged_events
    # a merged rect covers events narrower than a pixel, within about two pixels
    assert (merged["x1_us"] - merged["x0_us"] <= 2 * px + 1e-9).all()
    assert (merged["busy_us"] <= merged["x1_us"] - merged["x0_us"] + 1e-9).all()
    # rects of one row do not overlap
    for _, g in r.groupby("row"):
        assert (g["x0_us"].to_numpy()[1:] >= g["x1_us"].to_numpy()[:-1] - 1e-9).all()
    fig = timeline_figure(data)
    sub = fig.layout.title.subtitle.text
    assert f"{data.merged_events:,} events below 1 px" in sub and f"{data.merged_rects:,} rects" in sub


def test_big_profile_is_merged_and_small(big):
    ev = big.events
    data = prepare_timeline(big)
    n = len(ev)
    assert data.events_drawn == n
    r = data.rects
    assert len(r) <= 20_000
    assert r["count"].sum() == n
    assert data.merged_events + (r["count"] == 1).sum() == n
    # busy time at the top level is still the union of the top-level events, per lane
    for lane in data.lanes.itertuples():
        if lane.kind == "cpu":
            top = ev[(ev["thread"] == lane.thread) & (ev["depth"] == 0)]
        else:
            top = ev[ev["stream"] == lane.stream]
        rr = r[(r["lane"] == lane.lane) & (r["level"] == 0)]
        expected = union_length(zip(top["start_us"].tolist(), (top["start_us"] + top["dur_us"]).tolist()))
        assert rr["busy_us"].sum() == pytest.approx(expected, rel=1e-9)
        # and the rects cover every top-level event
        assert union_length(zip(rr["x0_us"], rr["x1_us"])) >= expected - 1e-6

    fig = timeline_figure(data)
    out = json.dumps(figure_json(fig), allow_nan=False)
    assert len(out) < 5_000_000
    svg = timeline_svg(data)
    assert len(svg) < 300_000
    assert "events below" in svg and "merged into" in svg


def test_max_rects_bounds_the_rects(big):
    data = prepare_timeline(big, max_rects=2_000)
    assert len(data.rects) <= 2_000
    assert data.rects["count"].sum() == len(big.events)
    assert data.px_us > data.span_us / 2000  # the pixel grew to fit


def test_window_draws_part_at_full_resolution(big):
    ev = big.events
    w0, w1 = 100_000.0, 101_000.0  # µs
    data = prepare_timeline(big, window_us=(w0, w1))
    start, end = ev["start_us"], ev["start_us"] + ev["dur_us"]
    inside = ((end >= w0) & (start <= w1)).sum()
    assert data.events_drawn == inside
    assert data.merged_rects == 0  # a few thousand events: all drawn
    r = data.rects
    assert r["x0_us"].min() >= w0 and r["x1_us"].max() <= w1
    # the profile's timeline() draws the same window; window= (ms) still works, with a warning
    fig = big.timeline(window_us=(w0, w1))
    assert fig.layout.meta["description"] == timeline_figure(data).layout.meta["description"]
    with pytest.warns(DeprecationWarning, match="window_us"):
        old = big.timeline(window=(w0 / 1000, w1 / 1000))
    assert old.layout.meta["description"] == fig.layout.meta["description"]
    # both at once: which one is meant is not known; one line says what to pass
    from nbprof.errors import OptionError

    with pytest.raises(OptionError) as e:
        big.timeline(window=(w0 / 1000, w1 / 1000), window_us=(w0, w1))
    assert str(e.value) == "timeline: pass window_us=(start_us, end_us), not window= as well"


# ------------------------------------------------------------------------------------- hover


@pytest.mark.parametrize("name", ["cnn_train_cuda", "two_streams", "transformer_infer_stack"])
def test_kernel_hover_names_the_launching_op(profiles, name):
    # independent answer: join each kernel's External id with the CPU op that has it
    raw = raw_events(name)
    ops = {e["args"]["External id"]: e["name"] for e in raw
           if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})}
    kernels = sorted((e for e in raw if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                     key=lambda e: (e["args"]["stream"], e["ts"]))
    p = profiles[name]
    data = prepare_timeline(p)
    fig = timeline_figure(data)
    lanes = data.lanes.set_index("lane")
    r = data.rects
    work = r[r["family"].isin(WORK_KINDS)].copy()
    work["stream"] = lanes.loc[work["lane"], "stream"].to_numpy()
    work = work.sort_values(["stream", "x0_us"], kind="stable")
    assert len(work) == len(kernels)
    checked = 0
    for k, (_, rect) in zip(kernels, work.iterrows()):
        assert rect["name"] == k["name"]
        launcher = ops.get(k["args"].get("External id"))
        if launcher is None:
            continue
        assert f"launched by {html.escape(launcher, quote=False)}" in rect["hover"]
        checked += 1
    assert checked >= len(kernels) * 0.9
    # the figure carries these texts: each row's hover cells are its rects' texts, gaps empty
    rows = row_traces(fig)
    assert len(rows) == len(data.rows)
    for t, (_, g) in zip(rows, r.groupby("row", sort=True)):
        z = np.asarray(t.z, dtype=float).reshape(-1)
        texts = list(t.hovertext[0])
        filled = [texts[i] for i in np.flatnonzero(~np.isnan(z))]
        assert filled == g["hover"].tolist()
        assert all(texts[i] == "" for i in np.flatnonzero(np.isnan(z)))
        assert t.hoverongaps is False


def test_hover_has_name_duration_and_shapes(profiles):
    p = profiles["cnn_train_cuda"]
    ev = p.events
    data = prepare_timeline(p)
    r = data.rects.set_index("event")
    conv = ev[(ev["name"] == "aten::conv2d")].index[0]
    text = r.loc[conv, "hover"]
    assert "<b>aten::conv2d</b>" in text
    assert html.escape(str(ev.loc[conv, "input_shapes"]), quote=False)[:40] in text
    dur = ev.loc[conv, "dur_us"]
    assert (f"{dur / 1e3:.2f} ms" if dur >= 1000 else f"{dur:.1f} µs") in text
    # an op that launched kernels says how much CUDA time it has under it
    assert "CUDA time" in text
    merged = prepare_timeline(p, merge=True).rects
    m = merged[merged["count"] > 1].iloc[0]
    assert m["hover"].startswith(f"<b>{m['count']:,} merged events</b>")


# --------------------------------------------------------------------------------- python frames


def test_python_frames_are_hidden_unless_asked(profiles):
    p = profiles["transformer_infer_stack"]
    ev = p.events
    n_py = int((ev["kind"] == "python").sum())
    data = prepare_timeline(p)
    assert "python" not in set(data.lanes["kind"])
    assert data.hidden["python"] == n_py
    assert f"{n_py:,} Python frames hidden" in timeline_figure(p).layout.title.subtitle.text

    data = prepare_timeline(p, python=True)
    py_lanes = data.lanes[data.lanes["kind"] == "python"]
    assert list(py_lanes["label"]) == ["Python thread 403 (main)"]
    lane = py_lanes["lane"].iat[0]
    # the Python lane sits right above its thread's op lane
    assert data.lanes["label"].iat[lane + 1] == "CPU thread 403 (main)"
    r = data.rects[data.rects["lane"] == lane]
    assert r["count"].sum() == n_py
    # a frame's level is one more than its caller's
    lvl = dict(zip(r["event"], r["level"]))
    parent = ev["parent"].to_numpy()
    for e, level in lvl.items():
        if parent[e] in lvl:
            assert level == lvl[parent[e]] + 1
        else:
            assert level == 0


# -------------------------------------------------------------------------------------- colors


def test_colors_are_stable_per_name_and_kernels_differ(profiles):
    a = prepare_timeline(profiles["cnn_train_cuda"]).rects
    b = prepare_timeline(profiles["cnn_cuda_toggled"]).rects
    ca = a[a["count"] == 1].groupby("name")["color"].agg(set)
    cb = b[b["count"] == 1].groupby("name")["color"].agg(set)
    common = ca.index.intersection(cb.index)
    assert len(common) > 10
    for name in common:
        assert len(ca[name]) == 1 and ca[name] == cb[name], name
    kernel_colors = set(a.loc[a["family"] == "kernel", "color"])
    op_colors = set(a.loc[a["family"] == "op", "color"])
    assert kernel_colors and op_colors and not kernel_colors & op_colors
    assert kernel_colors <= set(PALETTES["kernel"])


# ------------------------------------------------------------------------------ figure, bundle


def test_figure_is_compact_and_interactive(profiles):
    p = profiles["cnn_train_cuda"]
    data = prepare_timeline(p)
    fig = timeline_figure(data)
    rows = row_traces(fig)
    assert len(rows) == len(data.rows)  # one trace per (lane, level), not one per event
    assert len(fig.layout.shapes) == len(data.lanes)  # lane bands only
    assert fig.layout.dragmode == "zoom"
    assert fig.layout.xaxis.title.text.startswith("time (ms")
    for t in rows:
        x = np.asarray(t.x)
        assert (np.diff(x) >= 0).all()
    j = figure_json(fig)
    x0 = j["data"][0]["x"]
    assert isinstance(x0, dict) and "bdata" in x0  # typed arrays, not lists of decimals
    assert "config" in j and j["config"]["displaylogo"] is False
    # x is in ms since the profile start
    assert fig.layout.xaxis.range[0] <= data.t0_us / 1000 and fig.layout.xaxis.range[1] >= data.t1_us / 1000


def test_mime_bundle(profiles):
    p = profiles["cnn_train_cuda"]
    bundle = TimelineView(p).figure._repr_mimebundle_()
    assert set(bundle) == {PLOTLY_MIME, "text/plain", "text/html"}
    assert bundle["text/plain"] == "Timeline: 3 lanes, 1,508 events"
    assert "\n" not in bundle["text/plain"]
    page = bundle["text/html"]
    assert "<svg" in page and "<script" not in page and len(page) < 300_000
    assert bundle[PLOTLY_MIME]["layout"]["meta"]["description"] == bundle["text/plain"]
    json.dumps(bundle, allow_nan=False)  # what the kernel sends: plain JSON (jupyter_client refuses NaN)
    # what result.timeline() returns renders itself the same way, and is still a plotly Figure
    import plotly.graph_objects as go

    fig = p.timeline()
    assert isinstance(fig, go.Figure) and fig._repr_mimebundle_()["text/plain"] == bundle["text/plain"]
    assert fig._repr_mimebundle_(include={"text/plain"}) == {"text/plain": bundle["text/plain"]}
    # a figure without a static rendering still gets all three
    generic = figure_bundle(timeline_figure(p))
    assert set(generic) == {PLOTLY_MIME, "text/plain", "text/html"}
    assert "<script" not in generic["text/html"]
    # the prepared view as a cell's value shows the figure, not its one-line repr; a fixed height
    # (responsive figures collapse in notebooks, see views.figure.DEFAULT_CONFIG)
    view_bundle = p.timeline_view()._repr_mimebundle_()
    assert view_bundle[PLOTLY_MIME]["data"] and view_bundle["text/plain"] == bundle["text/plain"]
    assert view_bundle[PLOTLY_MIME]["config"]["responsive"] is False
    assert view_bundle[PLOTLY_MIME]["layout"]["height"] > 200


def test_svg_draws_lanes_ticks_and_tooltips(profiles):
    p = profiles["cnn_train_cuda"]
    svg = timeline_svg(p, width=900)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    for label in ("CPU thread 403 (main)", "CPU thread 429 (autograd)", "CUDA 0 stream 7"):
        assert label in svg
    assert "time (ms since profile start)" in svg
    assert svg.count("<title>") > 50
    assert "train_step" in svg
    # tooltips carry the figure's hover details (computed for the tooltip rectangles only)
    titles = re.findall(r"<title>([^<]*)</title>", svg)
    train_step = [t for t in titles if t.startswith("ProfilerStep") or t.startswith("train_step")]
    assert train_step and all("CUDA time" in t and " · at " in t for t in train_step), train_step[:2]
    # parsable XML
    import xml.etree.ElementTree as ET

    ET.fromstring(svg)


def test_svg_names_read_back_as_text(tmp_path):
    """Names with <, > and & (C++ templates, lambdas) are text in the SVG: an XML parser reads
    them back as they are in the trace, in the labels and in the tooltips."""
    import xml.etree.ElementTree as ET

    from .synthetic import Trace

    t = Trace()
    ext = t.op("aten::<lambda> & co", 0, 100)
    t.launch("void gemm<float, 4>(float*)", ext, 5, 5, 20, 60)
    t.op("aten::relu", 150, 10)
    root = ET.fromstring(timeline_svg(t.load(tmp_path), width=900))
    svg = "{http://www.w3.org/2000/svg}"
    titles = [e.text for e in root.iter(svg + "title")]
    assert "aten::<lambda> & co\nCPU op · 100.0 µs · at 0.000 ms\nCUDA time 60.0 µs" in titles
    assert "void gemm<float, 4>(float*)\nkernel · 60.0 µs · at 0.020 ms\nlaunched by aten::<lambda> & co" in titles
    assert "aten::<lambda> & co" in [e.text for e in root.iter(svg + "text")]


# ----------------------------------------------------------------------------------- edge cases


def test_empty_profile(profiles):
    ev = profiles["two_streams"].events.iloc[0:0]
    p = TorchProfile(ev.drop(columns=[c for c in ev.columns if c not in _event_columns()]))
    fig = timeline_figure(p)
    assert [a.text for a in fig.layout.annotations] == ["no events"]
    assert "no events" in timeline_svg(p)
    bundle = TimelineView(p).figure._repr_mimebundle_()
    assert bundle["text/plain"] == "Timeline: no events"


def _event_columns():
    from nbprof.events import EVENT_COLUMNS

    return EVENT_COLUMNS


def test_cpu_only_profile(profiles):
    ev = profiles["cnn_train_cuda"].events
    cpu = ev[ev["device"] == "cpu"][list(_event_columns())].reset_index(drop=True)
    p = TorchProfile(cpu)
    data = prepare_timeline(p)
    assert set(data.lanes["kind"]) == {"cpu"}
    fig = timeline_figure(p)
    assert all(lab.startswith("CPU") for lab in fig.layout.yaxis.ticktext)
    assert "kernel" not in set(data.rects["family"])
    assert "<svg" in timeline_svg(p)


def test_multi_rank_profile_has_lanes_per_rank(tmp_path):
    for r in range(2):
        shutil.copy(trace_path("two_streams"), tmp_path / f"rank{r}.trace.json.gz")
    p = nbprof.load_trace(tmp_path)
    assert "rank" in p.events.columns
    data = prepare_timeline(p)
    labels = data.lanes["label"].tolist()
    one = prepare_timeline(nbprof.load_trace(trace_path("two_streams"))).lanes["label"].tolist()
    assert labels == [f"rank 0 · {x}" for x in one] + [f"rank 1 · {x}" for x in one]
    assert data.rects["count"].sum() == data.events_drawn
    assert data.events_drawn == 2 * prepare_timeline(nbprof.load_trace(trace_path("two_streams"))).events_drawn
    fig = timeline_figure(p)
    assert list(fig.layout.yaxis.ticktext) == labels


def test_partial_overlaps_are_clipped_not_lost():
    # two events on one thread that overlap partially, at the same depth, and one hidden under
    n = 3
    ev = make_events_frame(
        name=np.array(["a", "b", "c"], dtype=object), kind=np.full(n, KIND_CODE["kernel"]),
        device=np.zeros(n, dtype=np.int64), thread=np.full(n, -1), stream=np.full(n, 7),
        start_us=np.array([0.0, 5.0, 6.0]), dur_us=np.array([10.0, 10.0, 1.0]),
    )
    data = prepare_timeline(TorchProfile(ev))
    r = data.rects
    assert r["count"].sum() == 3
    assert union_length(zip(r["x0_us"], r["x1_us"])) == pytest.approx(15.0)
    assert (r["x0_us"].to_numpy()[1:] >= r["x1_us"].to_numpy()[:-1]).all()
    timeline_figure(data)  # edges stay monotonic


def test_colab_gets_the_interactive_figure_as_html(profiles, monkeypatch):
    """Colab draws text/html but not the plotly mimetype: there the html is the interactive figure
    with plotly.js from plotly's CDN (plotly's own "colab" renderer, found the same way), and each
    report carries the tables' library (each output is a frame of its own)."""
    import types

    from plotly.offline import get_plotlyjs_version

    from nbprof.views.report import TorchReport

    p = profiles["cnn_train_cuda"]
    plain = p.timeline()._repr_mimebundle_()
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    bundle = p.timeline()._repr_mimebundle_()
    assert bundle[PLOTLY_MIME] == plain[PLOTLY_MIME] and bundle["text/plain"] == plain["text/plain"]
    page = bundle["text/html"]
    assert f'src="https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"' in page, page[:500]
    assert "Plotly.newPlot" in page and "<svg" not in page and "\"responsive\": false" in page
    first, second = TorchReport(p).html(), TorchReport(p).html()
    assert "DecompressionStream" in first and "DecompressionStream" in second


# ------------------------------------------------------------------ live timeline: the data side
# Oracles from the raw chrome trace of an H100 run: its X events, its correlation ids, its
# "Total Allocated" instants (times as start_us: ts minus the profile's origin).

from nbprof.analysis.timeline import timeline_rects  # noqa: E402
from nbprof.analysis.timeline_tracks import flows, gpu_busy_track, memory_track  # noqa: E402
from nbprof.analysis.timeline_window import find_events, window_summary  # noqa: E402

DRAWN_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead", "kernel", "gpu_memcpy",
              "gpu_memset", "gpu_user_annotation")
WORK_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def raw_x(name: str, profile, cats=DRAWN_CATS) -> list[tuple[str, float, float, dict]]:
    """(name, start_us, end_us, args) of the raw trace's complete events of ``cats``."""
    origin = profile.meta.origin_ns / 1000.0
    return [(e["name"], e["ts"] - origin, e["ts"] - origin + e.get("dur", 0), e.get("args", {}))
            for e in raw_events(name) if e.get("ph") == "X" and e.get("cat") in cats]


@pytest.mark.parametrize("name, lo, hi", [("cnn_train_cuda", 0.4, 0.55), ("two_streams", 0.0, 0.7)])
def test_window_rects_are_the_raw_events_in_the_window(profiles, name, lo, hi):
    p = profiles[name]
    span = p.meta.span_us
    w0, w1 = span * lo, span * hi
    data = timeline_rects(p.events, p.meta, window=(w0, w1))
    assert data.merged_rects == 0  # a window this size is drawn event by event
    raw = raw_x(name, p)
    want = sorted((n, max(s, w0), min(e, w1)) for n, s, e, _ in raw if e >= w0 and s <= w1)
    r = data.rects
    got = sorted(zip(r["name"], r["x0_us"], r["x1_us"]))
    assert len(want) > 10
    assert [g[0] for g in got] == [w[0] for w in want]
    np.testing.assert_allclose([g[1:] for g in got], [w[1:] for w in want], atol=1e-3)


def test_window_rects_of_a_merged_profile_have_full_detail():
    # a profile big enough to be merged in full is drawn event by event in a window
    events = synthetic_events(60_000)
    p = TorchProfile(events)
    full = timeline_rects(p.events, p.meta)
    assert full.merged_rects > 0
    span = full.t1_us - full.t0_us
    w0, w1 = full.t0_us + span * 0.5, full.t0_us + span * 0.5 + span / 200
    win = timeline_rects(p.events, p.meta, window=(w0, w1))
    assert win.merged_rects == 0
    ev = p.events
    e0 = ev["start_us"].to_numpy()
    e1 = e0 + ev["dur_us"].to_numpy()
    in_win = (e1 >= w0) & (e0 <= w1) & ev["kind"].isin(CPU_KINDS + DEVICE_KINDS).to_numpy()
    assert len(win.rects) == int(in_win.sum()) > 100
    # the full view had fewer rects there than the window shows
    fr = full.rects
    assert int(((fr["x1_us"] >= w0) & (fr["x0_us"] <= w1)).sum()) < len(win.rects)


def _union_in(intervals: list[tuple[float, float]], a: float, b: float) -> float:
    """Covered time of [a, b] by the intervals: a plain sweep, written apart from nbprof's."""
    return union_length([(max(s, a), min(e, b)) for s, e in intervals if e > a and s < b])


@pytest.mark.parametrize("name", ["cnn_train_cuda", "two_streams"])
def test_gpu_busy_track_is_the_union_of_raw_kernels_per_bin(profiles, name):
    p = profiles[name]
    work = [(s, e) for _, s, e, _ in raw_x(name, p, WORK_CATS)]
    span = p.meta.span_us
    track = gpu_busy_track(p.events, 0.0, span, bins=50)
    assert set(track["device"]) == {"cuda:0"}
    assert len(track) == 50
    for row in track.itertuples():
        want = _union_in(work, row.t0_us, row.t1_us)
        assert row.busy_us == pytest.approx(want, abs=0.01)  # start_us is at ns resolution
        assert row.busy_pct == pytest.approx(100 * want / (row.t1_us - row.t0_us), abs=0.01)
    assert track["busy_pct"].max() <= 100 + 1e-9
    assert track["busy_us"].sum() == pytest.approx(_union_in(work, 0.0, span), abs=0.05)
    assert track["busy_pct"].max() > 10


def test_memory_track_keeps_each_bins_peak_from_the_raw_allocator_totals(profiles):
    p = profiles["cnn_train_cuda"]
    origin = p.meta.origin_ns / 1000.0
    raw = [(e["ts"] - origin, e["args"]["Total Allocated"]) for e in raw_events("cnn_train_cuda")
           if e.get("cat") == "cpu_instant_event" and e["args"].get("Device Type") == 1]
    span = p.meta.span_us
    bins = 40
    track = memory_track(p._memory_curve, 0.0, span, bins=bins)
    dev = track[track["device"] == "cuda:0"]
    assert 0 < len(dev) <= 2 * bins + 1
    edges = np.linspace(0.0, span, bins + 1)
    got_t = dev["time_us"].to_numpy()
    got_a = dev["allocated_bytes"].to_numpy()
    for a, b in zip(edges[:-1], edges[1:]):
        vals = [v for t, v in raw if a <= t < b]
        here = got_a[(got_t >= a) & (got_t < b)]
        if vals:
            assert here.max() == max(vals)
        else:
            assert len(here) == 0
    assert got_a.max() == max(v for _, v in raw)


@pytest.mark.parametrize("name", ["cnn_train_cuda", "two_streams"])
def test_flows_pair_runtime_calls_and_kernels_by_raw_correlation(profiles, name):
    p = profiles[name]
    launches = {a["correlation"]: (n, s) for n, s, _, a in raw_x(name, p, ("cuda_runtime", "cuda_driver"))
                if "correlation" in a}
    work = [(n, s, a["correlation"]) for n, s, _, a in raw_x(name, p, WORK_CATS)]
    want = sorted((round(s, 1), n, round(launches[c][1], 1), launches[c][0]) for n, s, c in work if c in launches)
    f = flows(p.events)
    ev = p.events
    names = ev["name"].astype(str).to_numpy()
    start = ev["start_us"].to_numpy()
    got = sorted(zip(np.round(start[f["work"]], 1), names[f["work"]], np.round(start[f["launch"]], 1), names[f["launch"]]))
    assert len(want) == len(work) > 5
    assert [g[1::2] for g in got] == [w[1::2] for w in want]
    np.testing.assert_allclose([g[0::2] for g in got], [w[0::2] for w in want], atol=0.11)


def test_window_summary_sums_clipped_times_of_the_raw_events(profiles):
    p = profiles["cnn_train_cuda"]
    span = p.meta.span_us
    w0, w1 = span * 0.3, span * 0.6
    s = window_summary(p.events, w0, w1)
    for table, cats in ((s.kernels, WORK_CATS), (s.ops, ("cpu_op", "user_annotation", "cuda_runtime", "overhead"))):
        want: dict = {}
        for n, a, b, _ in raw_x("cnn_train_cuda", p, cats):
            if b >= w0 and a <= w1:
                c, t = want.get(n, (0, 0.0))
                want[n] = (c + 1, t + min(b, w1) - max(a, w0))
        assert len(table) == len(want) > 3
        for row in table.itertuples():
            assert row.calls == want[row.name][0]
            assert row.in_window_us == pytest.approx(want[row.name][1], abs=1e-3)
        assert list(table["in_window_us"]) == sorted(table["in_window_us"], reverse=True)
    work = [(a, b) for _, a, b, _ in raw_x("cnn_train_cuda", p, WORK_CATS)]
    assert s.device_busy_us == pytest.approx(_union_in(work, w0, w1), abs=0.05)


def test_find_events_matches_names_case_insensitively(profiles):
    p = profiles["cnn_train_cuda"]
    hits = find_events(p.events, "CONV")
    raw = [n for n, *_ in raw_x("cnn_train_cuda", p) if "conv" in n.lower()]
    assert len(hits) == len(raw) > 0
    assert len(find_events(p.events, "  ")) == 0
    assert len(find_events(p.events, "no such name anywhere")) == 0


# ------------------------------------------------------------- live timeline: the kernel's answers

live_timeline_mod = pytest.importorskip("nbprof.views.live_timeline")


def test_live_window_keeps_the_whole_profiles_lanes_and_rows(profiles):
    p = profiles["cnn_train_cuda"]
    full = prepare_timeline(p)
    state = live_timeline_mod.LiveTimelineState(p, full, python=False, max_rects=20_000, height=None)
    w = state.window(full.t0_us + 8000, full.t0_us + 9000, 1000)
    pd.testing.assert_frame_equal(w.lanes.drop(columns="events"), full.lanes.drop(columns="events"))
    pd.testing.assert_frame_equal(w.rows, full.rows)
    # each window rect sits on the row its event has in the full view
    single = w.rects[w.rects["event"] >= 0]
    full_row = full.rects.set_index("event")["row"]
    assert len(single) > 10
    assert (single["row"].to_numpy() == full_row.loc[single["event"]].to_numpy()).all()
    spec = state.spec()
    assert spec["layout"]["xaxis"]["range"] == [(full.t0_us + 8000) / 1000, (full.t0_us + 9000) / 1000]
    assert list(spec["layout"]["yaxis"]["ticktext"]) == list(timeline_figure(full).layout.yaxis.ticktext)
    # the whole profile again: the full view itself
    assert state.window(None, None, 1000) is full


def test_live_flow_joins_a_kernel_and_its_launch_from_the_raw_trace(profiles):
    p = profiles["cnn_train_cuda"]
    full = prepare_timeline(p)
    state = live_timeline_mod.LiveTimelineState(p, full, python=False, max_rects=20_000, height=None)
    launches = {a["correlation"]: s for n, s, _, a in raw_x("cnn_train_cuda", p, ("cuda_runtime",)) if "correlation" in a}
    r = full.rects
    rows = sorted(set(r["row"]))
    checked = 0
    for rect in r[r["family"] == "kernel"].head(20).itertuples():
        k = p.events.iloc[rect.event]
        f = state.flow(rows.index(rect.row), (rect.x0_us + rect.x1_us) / 2000)
        assert f["x1"] == pytest.approx(k["start_us"] / 1000)
        assert f["x0"] == pytest.approx(launches[k["correlation"]] / 1000, abs=1e-6)
        # and from the launch back to the kernel
        launch = r[(r["x0_us"] - launches[k["correlation"]]).abs() < 1e-3]
        back = state.flow(rows.index(int(launch["row"].iloc[0])), (launch["x0_us"].iloc[0] + launch["x1_us"].iloc[0]) / 2000)
        assert back == f
        checked += 1
    assert checked == 20
    assert state.flow(0, -5.0) is None  # nothing under the cursor


def test_live_find_fades_what_does_not_match(profiles):
    p = profiles["cnn_train_cuda"]
    full = prepare_timeline(p)
    state = live_timeline_mod.LiveTimelineState(p, full, python=False, max_rects=20_000, height=None)
    status = state.find("relu")
    raw = [(n, e - s) for n, s, e, _ in raw_x("cnn_train_cuda", p) if "relu" in n.lower()]
    assert status.startswith(f"{len(raw):,} events match")
    spec = state.spec()
    scale = [c for _, c in spec["layout"]["coloraxis"]["colorscale"]]
    assert live_timeline_mod.FADED in scale
    matching = state._matching(full)
    assert int(matching.sum()) == sum(1 for n in full.rects["name"] if "relu" in n.lower())
    assert state.find("") == "" and live_timeline_mod.FADED not in [c for _, c in state.spec()["layout"]["coloraxis"]["colorscale"]]


def test_flows_pair_within_a_rank(tmp_path):
    # two ranks recorded with the same correlation ids: each kernel pairs with its own rank's launch
    for rank in (0, 1):
        shutil.copy(trace_path("two_streams"), tmp_path / f"rank{rank}.pt.trace.json.gz")
    p = nbprof.load_trace(str(tmp_path))
    ev = p.events
    assert "rank" in ev.columns and ev["rank"].nunique() == 2
    f = flows(ev)
    single = flows(nbprof.load_trace(trace_path("two_streams")).events)
    assert len(f) == 2 * len(single) > 0
    rank = ev["rank"].to_numpy()
    assert (rank[f["launch"]] == rank[f["work"]]).all()
    assert (ev["correlation"].to_numpy()[f["launch"]] == ev["correlation"].to_numpy()[f["work"]]).all()


def test_figure_draws_counter_tracks_above_the_lanes(profiles):
    p = profiles["cnn_train_cuda"]  # CUDA and --memory: both tracks
    fig = timeline_figure(p)
    busy = [t for t in fig.data if t.type == "scatter" and t.yaxis == "y2"]
    mem = [t for t in fig.data if t.type == "scatter" and t.yaxis == "y3"]
    assert [t.name for t in busy] == ["cuda:0 busy"]
    assert sorted(t.name for t in mem) == ["cpu allocated", "cuda:0 allocated"]
    data = prepare_timeline(p)
    track = gpu_busy_track(p.events, data.t0_us, data.t1_us, 400)
    np.testing.assert_allclose(np.asarray(busy[0].y, dtype=float), track["busy_pct"].to_numpy())
    cuda = [t for t in mem if t.name == "cuda:0 allocated"][0]
    assert max(np.asarray(cuda.y, dtype=float)) * 2**20 == pytest.approx(p._memory_curve.query("device == 'cuda:0'")["allocated_bytes"].max())
    # the tracks sit above the lanes, each on an axis of its own sharing the time axis
    lay = fig.layout
    assert lay.yaxis2.domain[0] > lay.yaxis3.domain[1] > lay.yaxis3.domain[0] > lay.yaxis.domain[1]
    assert [a.text for a in lay.annotations] == ["GPU busy %", "allocated MiB"]
    # no device work, no memory: no tracks
    plain = timeline_figure(profiles["two_streams"].events[profiles["two_streams"].events["device"].astype(str) == "cpu"])
    assert not [t for t in plain.data if t.type == "scatter" and t.yaxis in ("y2", "y3")]


def test_the_legend_lists_the_lanes_kinds_not_the_counter_tracks_and_the_cursor_spans_every_lane():
    """The timeline figure of a CUDA trace with memory events: the GPU-busy and memory counter
    tracks are lines on their own axes, named by their axis titles, not legend entries (seed 53's
    counter_tracks 61 put "cuda:0 busy" in the legend); the x axis' spike line runs across every
    lane at the cursor, so a kernel lines up with the op that launched it (_layout 631 hid it)."""
    import nbprof

    from .conftest import DATA

    fig = nbprof.load_trace(DATA / "two_streams.trace.json.gz").timeline()
    spec = fig.to_plotly_json()
    tracks = [t for t in spec["data"] if t.get("yaxis") in ("y2", "y3")]
    assert tracks and any(t["name"].endswith(" busy") for t in tracks)
    assert all(t.get("showlegend") is False for t in tracks)
    legend = [t["name"] for t in spec["data"] if t.get("showlegend") is not False]
    assert legend and not any("busy" in n for n in legend)
    xaxis = spec["layout"]["xaxis"]
    assert (xaxis["showspikes"], xaxis["spikemode"], xaxis["spikesnap"]) == (True, "across", "cursor")
