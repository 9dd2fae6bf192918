"""The CUDA memory snapshot family read back as a user reads it, pinned where mutation samples
(issue 38, seed 52) found it loose: the chart's SVG (each layer's step, the reserved line, the
peak, the OOM, both axes, the legend), the plotly spec, the segments' bars, the tab's panels (their
heads and their tables' rows), the text report, the live chart's span, ``blocks(at=)`` with two
devices, the replay's allocations, ``save``'s dict, the reader's edges and refusals.

Oracles: tests/snapshots.hand_snapshot, its numbers counted by hand in its docstring (and the
small snapshots built here, counted here); torch's own ``torch.cuda._memory_viz`` (``calc_active``,
``segsum``) on the same dicts; memory_viz's replay loop (tests/test_snapshot.memory_viz_totals).
Pixels are read back to bytes and µs through the chart's own axis ticks (their labels are text
the user reads), never through nbprof's scale functions."""

from __future__ import annotations

import copy
import html as htmllib
import json
import pickle
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import nbprof
from nbprof.errors import OptionError, TraceError

from .snapshots import CELL, KiB, MiB, SEG_A, SEG_B, block, entry, hand_snapshot, segment, simulated, stack, write

NS = "{http://www.w3.org/2000/svg}"
BEFORE = "(allocated before the history began)"
LINE = "…/ipykernel_4242/1234567.py:"  # the chart's name of a line of the hand snapshot's cell
NAN = "___NaN___"  # itables' JSON for a missing time ("At": before the history)
T = [0, 10, 20, 30, 31, 40, 50, 60]  # the hand snapshot's entries, µs since its first (t=100)


def load(snap, tmp_path, name="s.pickle"):
    return nbprof.load_snapshot(write(snap, tmp_path / name))


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    return load(hand_snapshot(), tmp_path_factory.mktemp("hand"))


def two_devices() -> dict:
    """The hand snapshot (cuda:0) and a second device, counted by hand: cuda:1 has one 2 MiB
    segment C; t=200 segment_alloc C; t=210 alloc c1 300 KiB at C (line 9); t=220 alloc c2 200 KiB
    at C + 512 KiB (line 10): 500 KiB, its peak; t=230 free_completed c1: 200 KiB. At the end c2
    is held (200 KiB), the rest of C free: 1,848 KiB."""
    snap = hand_snapshot()
    c = 0x7F10_0000_0000
    s9, s10 = stack(9), stack(10)
    snap["device_traces"].append([entry("segment_alloc", c, 2 * MiB, 200, stack(9)),
                                  entry("alloc", c, 300 * KiB, 210, s9),
                                  entry("alloc", c + 512 * KiB, 200 * KiB, 220, s10),
                                  entry("free_completed", c, 300 * KiB, 230, s9)])
    snap["segments"].append(segment(c, 2 * MiB, [block(c, 512 * KiB, 512 * KiB, "inactive"),
                                                 block(c + 512 * KiB, 200 * KiB, 200 * KiB, "active_allocated", s10),
                                                 block(c + 712 * KiB, 2 * MiB - 712 * KiB, 2 * MiB - 712 * KiB,
                                                       "inactive")], device=1))
    return snap


# ------------------------------------------------------------------------------ reading helpers

_UNITS = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": 1 << 30}


def as_bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * _UNITS[unit]


def points(el) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in el.get("points").split()]


def line_fit(pairs):
    """The straight line through (pixel, value) pairs: each of them on it (the axis is linear)."""
    (p0, v0), (p1, v1) = pairs[0], pairs[-1]
    slope = (v1 - v0) / (p1 - p0)
    for p, v in pairs:
        assert v0 + (p - p0) * slope == pytest.approx(v, abs=abs(slope) * 0.11), pairs
    return lambda p: v0 + (p - p0) * slope


def read_chart(svg: str) -> dict:
    """The chart as a reader reads it: per panel, the title, the y ticks (label -> pixel), the x
    ticks, the layers' polygons, the reserved line, the peak, the OOMs, the legend."""
    root = ET.fromstring(svg)
    texts = [(t, "".join(t.text or "")) for t in root.iter(NS + "text")]
    titles = [(t, s) for t, s in texts if t.get("font-weight") == "600"]
    out = {"height": float(root.get("height")), "panels": []}
    for k, (title_el, title) in enumerate(titles):
        top = float(title_el.get("y")) - 20 + 30  # the panel's plot starts under its title row
        bottom = top + 170
        nxt = float(titles[k + 1][0].get("y")) if k + 1 < len(titles) else float("inf")
        mine = lambda el, y="y": top - 30 <= float(el.get(y)) < nxt - 20  # noqa: E731
        y_ticks = [(float(t.get("y")) - 4, as_bytes(s)) for t, s in texts
                   if t.get("text-anchor") == "end" and t.get("x") == "66" and mine(t)]
        x_ticks = [(float(t.get("x")), s) for t, s in texts
                   if t.get("text-anchor") == "middle" and float(t.get("y")) == bottom + 16]
        polys = [el for el in root.iter(NS + "polygon") if top <= points(el)[0][1] <= bottom]
        res = [el for el in root.iter(NS + "polyline") if top <= points(el)[0][1] <= bottom]
        circles = [el for el in root.iter(NS + "circle") if top <= float(el.get("cy")) <= bottom]
        ooms = [el for el in root.iter(NS + "line") if el.get("stroke") == "#d62728" and float(el.get("y1")) == top]
        legend = [(r.get("fill"), t) for r, (el, t) in zip(
            [r for r in root.iter(NS + "rect") if bottom < float(r.get("y")) < nxt],
            [(el, s) for el, s in texts if el.get("font-weight") is None and el.find(NS + "title") is not None
             and bottom < float(el.get("y")) < nxt])]
        out["panels"].append(dict(title=title, top=top, bottom=bottom, y_ticks=y_ticks, x_ticks=x_ticks,
                                  layers=[(p.find(NS + "title").text, p.get("fill"), points(p)) for p in polys],
                                  reserved=points(res[0]), peak=(float(circles[0].get("cx")), float(circles[0].get("cy"))),
                                  ooms=[(float(o.get("x1")), o.find(NS + "title").text) for o in ooms], legend=legend))
    return out


def x_reader(panel, unit: str):
    """Pixels -> the x value, from the x ticks' labels ("0.02 ms" -> 20 µs; entries: "4")."""
    pairs = [(px, float(s.replace(" ms", "").replace(",", "")) * (1000.0 if unit == "us" else 1.0))
             for px, s in panel["x_ticks"]]
    assert len(pairs) >= 2 and all(s.endswith(" ms") == (unit == "us") for _, s in panel["x_ticks"])
    return line_fit(pairs)


def tops(layer_points, n):
    """A stacked step layer's top edge: (x, y) of each of its n points (the step's left corner)."""
    return [layer_points[2 * i] for i in range(n)]


def dt_tables(markup: str) -> list[dict]:
    """Each interactive table of ``markup`` as DataTables gets it: headers, rows (data_json), paging."""
    out = []
    for m in re.finditer(r"let dt_args = ", markup):
        args, _ = json.JSONDecoder().raw_decode(markup[m.end():])
        heads = [htmllib.unescape(h) for h in re.findall(r"<th>(.*?)</th>", args["table_html"])]
        out.append({"headers": heads, "rows": json.loads(args["data_json"]), "page": args.get("pageLength"),
                    "order": args.get("order"), "caption": htmllib.unescape(args.get("caption") or "")})
    return out


def heads(markup: str) -> list[str]:
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r'<div class="nbprof-sub"[^>]*>(.*?)</div>', markup)]


def panels_of(p) -> dict[str, str]:
    from nbprof.views.tabs.snapshot import snapshot_panels

    return dict(snapshot_panels(p))


# ------------------------------------------------------------------------------- the chart's SVG


def test_the_chart_read_back_is_the_hand_counted_history(hand):
    """Every layer's step, read back through the axes' own tick labels, is the bytes its line held
    after each entry (counted by hand); the top one is the active memory; the reserved line is
    4 MiB; the peak dot is (20 µs, 1,700 KiB); the OOM is at 50 µs; the legend is each layer's
    bytes at the peak, in its colour."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_svg

    chart = read_chart(snapshot_svg(drawn_devices(hand)))
    assert chart["height"] == 18 + 30 + 170 + 24 + 2 * 16 + 6  # one panel, four layers: two legend rows
    (panel,) = chart["panels"]
    assert panel["title"] == f"cuda:0: peak 1.66 MiB at 20.0 µs · most of it from {LINE}4"
    assert [v for _, v in panel["y_ticks"]] == [0, 2 * MiB, 4 * MiB]
    y_bytes = line_fit(panel["y_ticks"])
    x_us = x_reader(panel, "us")
    by_line = {f"{LINE}4": [0, 0, 1024, 1024, 1024, 1024, 1024, 1024],
               f"{LINE}3": [0, 512, 512, 512, 0, 0, 0, 0],
               BEFORE: [164] * 7 + [100],
               f"{LINE}5": [0, 0, 0, 0, 0, 256, 256, 256]}
    # stacked largest at the peak first: line 4, line 3, before the history, then line 5 (0 there)
    assert [name for name, _, _ in panel["layers"]] == list(by_line)
    below = np.zeros(8)
    for name, _, pts in panel["layers"]:
        assert len(pts) == 4 * 8  # 8 steps up, 8 back
        top = tops(pts, 8)
        stacked = below + np.array(by_line[name]) * KiB
        assert [x_us(x) for x, _ in top] == pytest.approx(T, abs=0.1)
        assert [y_bytes(y) for _, y in top] == pytest.approx(stacked.tolist(), abs=3 * KiB), name
        bottom = pts[16:][::-1]  # the way back: the layer below's top
        assert [y_bytes(y) for _, y in bottom[::2]] == pytest.approx(below.tolist(), abs=3 * KiB)
        below = stacked
    assert (below / KiB).tolist() == [164, 676, 1700, 1700, 1188, 1444, 1444, 1380]
    assert {round(y_bytes(y) / MiB, 2) for _, y in panel["reserved"]} == {4.0}
    assert x_us(panel["peak"][0]) == pytest.approx(20, abs=0.1)
    assert y_bytes(panel["peak"][1]) == pytest.approx(1700 * KiB, abs=3 * KiB)
    ((ox, otext),) = panel["ooms"]
    assert x_us(ox) == pytest.approx(50, abs=0.1)
    assert otext == "OOM at 50.0 µs: asked for 8.00 MiB, CUDA had 1.00 MiB free"
    fills = [fill for _, fill, _ in panel["layers"]]
    assert len(set(fills)) == 4
    assert panel["legend"] == [(fills[0], f"{LINE}4 · 1.00 MiB"), (fills[1], f"{LINE}3 · 512.00 KiB"),
                               (fills[2], f"{BEFORE} · 164.00 KiB"), (fills[3], f"{LINE}5 · 0 B")]


def test_the_legend_sits_under_the_time_axis_labels(hand):
    """Each legend entry (its swatch and its text) is below the x axis' tick labels, not over them."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_svg

    root = ET.fromstring(snapshot_svg(drawn_devices(hand)))
    chart = read_chart(snapshot_svg(drawn_devices(hand)))
    (panel,) = chart["panels"]
    label_baseline = panel["bottom"] + 16  # the tick labels' y
    swatches = [r for r in root.iter(NS + "rect") if float(r.get("y")) > panel["bottom"]]
    texts = [t for t in root.iter(NS + "text") if t.find(NS + "title") is not None and t.get("font-weight") is None]
    assert len(swatches) == len(texts) == 4
    assert all(float(r.get("y")) > label_baseline for r in swatches)  # a swatch's top under the labels' baseline
    assert all(float(t.get("y")) > label_baseline + 10 for t in texts)


def test_a_history_without_times_is_drawn_by_entry(tmp_path):
    """A file before torch 2.1 (no ``time_us``): x is the entry's position, the ticks plain
    numbers, the peak and the OOM named by their entry."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_svg

    snap = hand_snapshot()
    for e in snap["device_traces"][0]:
        del e["time_us"]
    p = load(snap, tmp_path)
    (panel,) = read_chart(snapshot_svg(drawn_devices(p)))["panels"]
    assert panel["title"] == f"cuda:0: peak 1.66 MiB at entry 2 · most of it from {LINE}4"
    x_entry = x_reader(panel, "entry")
    assert [x_entry(x) for x, _ in tops(panel["layers"][-1][2], 8)] == pytest.approx(list(range(8)), abs=0.02)
    assert panel["ooms"][0][1] == "OOM at entry 6: asked for 8.00 MiB, CUDA had 1.00 MiB free"
    assert x_entry(panel["peak"][0]) == pytest.approx(2, abs=0.02)


def test_what_the_last_entry_leaves_is_drawn(tmp_path):
    """A cell that allocates 1 MiB and frees it: the chart ends at 0, a step of its own after the
    free, in the SVG and the figure (the axis ended at the last entry, so the free sat on its right
    edge and the chart showed 1 MiB held to the end)."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_spec, snapshot_svg

    a = 0x7F00_0000_0000
    snap = {"segments": [segment(a, 2 * MiB, [block(a, 2 * MiB, 2 * MiB, "inactive")])],
            "device_traces": [[entry("alloc", a, MiB, 100, stack(4)), entry("free_completed", a, MiB, 200, stack(4))]]}
    p = load(snap, tmp_path)
    (panel,) = read_chart(snapshot_svg(drawn_devices(p)))["panels"]
    y_bytes, x_us = line_fit(panel["y_ticks"]), x_reader(panel, "us")
    (_, _, pts), = [layer for layer in panel["layers"] if layer[0] == f"{LINE}4"]
    top = pts[:4]  # two steps: (x0, 1 MiB) to (x1, 1 MiB), then (x1, 0) to the end
    assert [round(y_bytes(y) / KiB) for _, y in top] == [1024, 1024, 0, 0]
    assert x_us(top[1][0]) == pytest.approx(100, abs=0.5) and x_us(top[3][0]) > 100 + 1
    (trace,) = [t for t in snapshot_spec(drawn_devices(p))["data"] if t["name"] == f"{LINE}4"]
    assert list(trace["y"]) == [MiB, 0, 0] and trace["x"][2] > trace["x"][1] == pytest.approx(0.1)


def test_two_devices_are_two_panels_each_on_its_own_scale(tmp_path):
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_svg

    p = load(two_devices(), tmp_path)
    chart = read_chart(snapshot_svg(drawn_devices(p)))
    first, second = chart["panels"]
    assert first["title"].startswith("cuda:0: peak 1.66 MiB at 20.0 µs")
    assert second["title"] == f"cuda:1: peak 500.00 KiB at 120.0 µs · most of it from {LINE}9"
    y_bytes = line_fit(second["y_ticks"])
    x_us = x_reader(second, "us")
    assert [name for name, _, _ in second["layers"]] == [f"{LINE}9", f"{LINE}10"]  # 300 KiB and 200 KiB at the peak
    top = tops(second["layers"][-1][2], 4)
    assert [x_us(x) for x, _ in top] == pytest.approx([100, 110, 120, 130], abs=0.2)  # since cuda:0's first entry
    assert [y_bytes(y) for _, y in top] == pytest.approx([0, 300 * KiB, 500 * KiB, 200 * KiB], abs=2 * KiB)
    assert {round(y_bytes(y) / MiB, 2) for _, y in second["reserved"]} == {2.0}
    assert second["ooms"] == [] and len(first["ooms"]) == 1


def test_a_line_has_one_colour_on_every_panel_and_no_other_line_has_it(tmp_path):
    """Two devices whose panels draw 16 lines between them (8 each, some on both): a line on both
    panels is one colour in both, in the SVG and the figure; two lines never share one (they did:
    each panel coloured its own lines from the palette's start, so cuda:1's lines took cuda:0's
    colours, and a line on both panels changed colour between them)."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_spec, snapshot_svg

    devices = drawn_devices(load(simulated(400, seed=3, devices=2, dropped=20), tmp_path))
    names = [{n for n, _ in d.layers} for d in devices]
    assert names[0] & names[1] and names[0] ^ names[1]  # shared lines, and lines of one panel only
    root = ET.fromstring(snapshot_svg(devices))
    svg = {(poly.find(NS + "title").text, poly.get("fill")) for poly in root.iter(NS + "polygon")}
    spec = snapshot_spec(devices)
    fig = {(htmllib.unescape(t["legendgroup"]), t["fillcolor"]) for t in spec["data"] if "stackgroup" in t}
    for pairs in (svg, fig):
        by_line: dict[str, set[str]] = {}
        for line, colour in pairs:
            by_line.setdefault(line, set()).add(colour)
        assert all(len(c) == 1 for c in by_line.values()), by_line
        assert len({c for cs in by_line.values() for c in cs}) == len(by_line) == len(names[0] | names[1])
    assert svg == fig
    legend = [t["name"] for t in spec["data"] if t.get("showlegend", True)]
    assert sorted(set(legend)) == sorted(legend)  # one OOM entry: both panels have OOMs


# ------------------------------------------------------------------------------ the plotly spec


def test_the_figure_spec_holds_the_hand_counted_values(tmp_path):
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_spec

    p = load(two_devices(), tmp_path)
    spec = snapshot_spec(drawn_devices(p))
    lay = spec["layout"]
    assert lay["yaxis"]["domain"] == pytest.approx([0.54, 1.0]) and lay["yaxis2"]["domain"] == pytest.approx([0, 0.46])
    assert lay["yaxis"]["title"]["text"] == "cuda:0" and lay["yaxis2"]["title"]["text"] == "cuda:1"
    for axis in ("yaxis", "yaxis2"):  # each tick's label is its value
        vals, texts = lay[axis]["tickvals"], lay[axis]["ticktext"]
        assert len(vals) >= 3 and vals[0] == 0 and [as_bytes(t) for t in texts] == vals
    assert lay["yaxis"]["tickvals"][-1] >= 4 * MiB and lay["yaxis2"]["tickvals"][-1] >= 2 * MiB
    assert lay["xaxis"]["title"]["text"] == "time since the first entry (ms)"
    assert lay["xaxis"]["anchor"] == "y2"  # the shared x axis under the lowest panel, not between them
    assert snapshot_spec(drawn_devices(load(hand_snapshot(), tmp_path, "one.pickle")))["layout"]["xaxis"]["anchor"] == "y"
    by_name = {(t["yaxis"], t["name"]): t for t in spec["data"]}
    res = by_name[("y", "cuda:0 reserved")]
    # each trace: the entries, then the last value held to the axis' end (past the last entry)
    assert res["line"]["dash"] == "dot" and list(res["y"]) == [4 * MiB] * 9
    assert list(res["x"][:8]) == pytest.approx([t / 1000 for t in T]) and res["x"][8] > T[-1] / 1000
    assert list(by_name[("y", f"{LINE}3")]["y"]) == [k * KiB for k in (0, 512, 512, 512, 0, 0, 0, 0, 0)]
    assert by_name[("y", f"{LINE}3")]["stackgroup"] == "active0"
    assert list(by_name[("y2", f"{LINE}10")]["y"]) == [0, 0, 200 * KiB, 200 * KiB, 200 * KiB]
    assert by_name[("y2", f"{LINE}10")]["stackgroup"] == "active1"
    oom = by_name[("y", "OOM")]
    assert list(oom["x"]) == pytest.approx([0.05]) and oom["text"] == ["OOM: asked for 8.00 MiB, CUDA had 1.00 MiB free"]
    a0, a1 = lay["annotations"]
    assert (a0["x"], a0["y"], a0["yref"], a0["text"]) == (pytest.approx(0.02), 1700 * KiB, "y", f"peak 1.66 MiB · {LINE}4")
    assert (a1["x"], a1["y"], a1["yref"]) == (pytest.approx(0.12), 500 * KiB, "y2")


# ------------------------------------------------------------------------- the segments' bars


def test_the_segment_bars_are_the_segments_bytes(hand):
    """Each bar's pieces, read back against the widest (2 MiB): requested, rounding, free."""
    from nbprof.views.tabs.snapshot import segments_svg

    root = ET.fromstring(segments_svg(hand.segments()))
    rects = [(float(r.get("x")), float(r.get("y")), float(r.get("width")), r.get("fill")) for r in root.iter(NS + "rect")]
    left, pw = 150.0, 760 - 150 - 16
    per_px = 2 * MiB / pw
    # segment A (first: 2 MiB at the lower address): 1,280 KiB requested, no rounding, 768 KiB free
    # segment B: 100 KiB requested, 28 KiB rounding (a 128 KiB block), 1,920 KiB free
    want = [(22, [(1280 * KiB, "#4e79a7"), (768 * KiB, "#d9d4d0")]),
            (36, [(100 * KiB, "#4e79a7"), (28 * KiB, "#f28e2c"), (1920 * KiB, "#d9d4d0")])]
    got = [(y, [(w * per_px, fill) for _, yy, w, fill in rects if yy == y]) for y, _ in want]
    for (y, pieces), (_, theirs) in zip(want, got):
        assert [f for _, f in theirs] == [f for _, f in pieces]
        assert [b for b, _ in theirs] == pytest.approx([b for b, _ in pieces], abs=KiB)
        xs = [x for x, yy, _, _ in rects if yy == y]
        assert xs[0] == left and all(x1 == pytest.approx(x0 + w0, abs=0.11) for x0, x1, w0 in
                                     zip(xs, xs[1:], [w for _, yy, w, _ in rects if yy == y]))
    assert all(float(r.get("height")) == 11 for r in root.iter(NS + "rect"))
    labels = [(t.text, t.find(NS + "title").text) for t in root.iter(NS + "text") if t.find(NS + "title") is not None]
    # each size label ends just left of its bar (right-aligned, 6 px before it), on the bar's row
    assert [(t.get("x"), t.get("text-anchor"), t.get("y")) for t in root.iter(NS + "text")
            if t.find(NS + "title") is not None] == [("144", "end", "31"), ("144", "end", "45")]
    assert labels == [("2.00 MiB", "cuda:0 2.00 MiB large: 1.25 MiB requested, 768.00 KiB free (largest piece 512.00 KiB)"),
                      ("2.00 MiB", "cuda:0 2.00 MiB large: 100.00 KiB requested, 1.88 MiB free (largest piece 1.88 MiB)")]
    assert float(root.get("height")) == 28 + 14 * 2 + 10


def test_the_segment_bars_stop_at_forty(tmp_path):
    """45 segments of 1..45 MiB, each with one 512 KiB block in use: the largest 40 are drawn,
    biggest first, each bar's length its size against the biggest."""
    from nbprof.views.tabs.snapshot import segments_svg

    segs = [segment(0x7F00_0000_0000 + k * 0x1_0000_0000, (k + 1) * MiB,
                    [block(0x7F00_0000_0000 + k * 0x1_0000_0000, 512 * KiB, 512 * KiB, "active_allocated"),
                     block(0x7F00_0000_0000 + k * 0x1_0000_0000 + 512 * KiB, (k + 1) * MiB - 512 * KiB,
                           (k + 1) * MiB - 512 * KiB, "inactive")]) for k in range(45)]
    p = load({"segments": segs, "device_traces": []}, tmp_path)
    root = ET.fromstring(segments_svg(p.segments()))
    labels = [t.text for t in root.iter(NS + "text") if t.find(NS + "title") is not None]
    assert labels == [f"{k}.00 MiB" for k in range(45, 5, -1)]
    assert float(root.get("height")) == 28 + 14 * 40 + 10
    ends = {}
    for r in root.iter(NS + "rect"):
        ends[r.get("y")] = float(r.get("x")) + float(r.get("width"))
    assert [round((e - 150) / 594 * 45, 1) for e in ends.values()] == [float(k) for k in range(45, 5, -1)]


# ------------------------------------------------------------------------- the tab's panels


def test_the_segments_panel_head_and_table(hand):
    html = panels_of(hand)["Segments"]
    assert heads(html) == ["4.00 MiB reserved in 2 segments: 1.35 MiB requested, 28.00 KiB rounding, 2.62 MiB free "
                           "(66 %; the largest free piece 1.88 MiB)"]
    (table,) = dt_tables(html)
    assert table["headers"] == ["Device", "Reserved", "Allocated", "Requested", "Free", "Largest free", "Blocks", "Pool",
                                "Stream"]
    assert table["rows"] == [["cuda:0", 2 * MiB, 1280 * KiB, 1280 * KiB, 768 * KiB, 512 * KiB, 4, "large", 0],
                             ["cuda:0", 2 * MiB, 128 * KiB, 100 * KiB, 1920 * KiB, 1920 * KiB, 2, "large", 0]]
    assert "The segments' bars is a drawing" in htmllib.unescape(html) and "<svg" in html


def test_the_ooms_panel(hand):
    (table,) = dt_tables(panels_of(hand)["OOMs"])
    assert table["headers"] == ["Device", "At", "Asked for", "CUDA free", "Active", "Reserved"]
    assert table["rows"] == [["cuda:0", 50.0, 8 * MiB, MiB, 1444 * KiB, 4 * MiB]]  # at t=150, 50 µs in


def test_the_peak_panel_by_line_and_each_allocation(hand):
    html = panels_of(hand)["At the peak"]
    assert heads(html) == ["cuda:0 at its peak, after entry 2 (20.0 µs in): 1.66 MiB active in 4 allocations, "
                           "4.00 MiB reserved"]
    by_line, allocs = dt_tables(html)
    assert by_line["headers"] == ["Line", "Held", "Blocks"]
    assert by_line["rows"] == [[f"{CELL}:4", MiB, 1], [f"{CELL}:3", 512 * KiB, 1], [BEFORE, 164 * KiB, 2]]
    assert allocs["headers"] == ["Size", "Allocated by", "In", "At", "Device", "Stack (innermost first)"]
    torch_frames = ("linear (/usr/lib/python3.11/site-packages/torch/nn/functional.py:2150) ← _call_impl "
                    "(/usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1750)")
    assert allocs["rows"] == [[MiB, f"{CELL}:4", "<module>", 20.0, "cuda:0", f"{torch_frames} ← <module> ({CELL}:4)"],
                              [512 * KiB, f"{CELL}:3", "<module>", 10.0, "cuda:0", f"{torch_frames} ← <module> ({CELL}:3)"],
                              [100 * KiB, BEFORE, "", NAN, "cuda:0", ""], [64 * KiB, BEFORE, "", NAN, "cuda:0", ""]]
    assert allocs["order"] == [[0, "desc"]]


def test_the_end_panel_with_a_block_waiting_for_another_stream(tmp_path):
    """a3's block freed on its stream, awaiting another (active_pending_free): still in use."""
    snap = hand_snapshot()
    snap["segments"][0]["blocks"][0]["state"] = "active_pending_free"
    html = panels_of(load(snap, tmp_path))["At the end"]
    assert heads(html) == ["3 blocks in use when the snapshot was taken: 1.35 MiB requested; 1 block freed and waiting "
                           "for another stream"]
    by_line, blocks = dt_tables(html)
    assert by_line["rows"] == [[f"{CELL}:4", MiB, 1], [f"{CELL}:5", 256 * KiB, 1], [BEFORE, 100 * KiB, 1]]
    assert blocks["headers"] == ["Size", "Allocated by", "In", "At", "Device", "State", "Stack (innermost first)"]
    assert [r[:6] for r in blocks["rows"]] == [[MiB, f"{CELL}:4", "<module>", 20.0, "cuda:0", "active_allocated"],
                                               [256 * KiB, f"{CELL}:5", "<module>", 40.0, "cuda:0", "active_pending_free"],
                                               [100 * KiB, BEFORE, "", NAN, "cuda:0", "active_allocated"]]
    assert blocks["order"] == [[0, "desc"]]
    assert (by_line["caption"], blocks["caption"]) == ("held per line that allocated it",
                                                       'blocks alive at the end, biggest first; p.blocks(at="end")')
    hand_html = panels_of(load(hand_snapshot(), tmp_path, "h.pickle"))["At the end"]
    assert heads(hand_html) == ["3 blocks in use when the snapshot was taken: 1.35 MiB requested"]


def test_a_peak_of_many_lines_pages_its_tables_by_ten(tmp_path):
    """14 lines allocating: the peak's tables page by ten; the lines' bytes add up to the peak of
    memory_viz's own replay of the file."""
    from .test_snapshot import memory_viz_totals

    snap = simulated(500, seed=21, lines=14, ooms=0)
    by_line, allocs = dt_tables(panels_of(load(snap, tmp_path))["At the peak"])
    start, after = memory_viz_totals(snap, 0)
    assert len(by_line["rows"]) > 10 and by_line["page"] == 10 and allocs["page"] == 10
    assert sum(r[1] for r in by_line["rows"]) == max([start] + after)
    assert [r[1] for r in by_line["rows"]] == sorted((r[1] for r in by_line["rows"]), reverse=True)


def test_an_empty_snapshot_says_so_in_every_panel(tmp_path):
    p = load({"segments": [], "device_traces": []}, tmp_path)
    panels = panels_of(p)
    assert list(panels) == ["Over time", "At the peak", "At the end", "Segments"]
    assert "The snapshot has no history" in panels["Over time"]
    assert "No allocation recorded." in panels["At the peak"]
    assert "No block in use at the end." in panels["At the end"]
    assert "No segment: the allocator held no memory" in panels["Segments"]
    assert p.report().text() == "CUDA memory snapshot: 0 history entries"
    assert list(p.active_memory().columns) == ["device", "entry", "time_us", "action", "address", "size_bytes",
                                               "active_bytes", "reserved_bytes"] and len(p.active_memory()) == 0
    from nbprof.analysis.snapshot import SEGMENT_COLUMNS

    assert list(p.segments().columns) == list(SEGMENT_COLUMNS) and len(p.segments()) == 0


def test_segments_without_a_history_peak_before_it(tmp_path):
    p = load(hand_snapshot()["segments"], tmp_path)
    assert heads(panels_of(p)["At the peak"]) == [
        "cuda:0 at its peak, before the history's first entry: 1.35 MiB active in 3 allocations, 4.00 MiB reserved"]


# ------------------------------------------------------------------------------ the text report


def text_rows(text: str) -> list[list[str]]:
    """The text table's rows (between its second and last rules), cells split on 2+ spaces."""
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if line and set(line) <= {"-", " "}]
    return [re.split(r"\s{2,}", line.strip()) for line in lines[rules[1] + 1:rules[2]]]


def test_the_text_report(tmp_path):
    p = load(two_devices(), tmp_path)
    text = p.report().text()
    first = text.splitlines()[0]
    # free: 768 + 1,920 KiB (cuda:0) + 1,848 KiB (cuda:1) = 4,536 KiB of 6 MiB: 74 %
    assert first == ("CUDA memory snapshot: cuda:0 peak 1.66 MiB active, 4.00 MiB reserved · cuda:1 peak 500.00 KiB "
                     "active, 2.00 MiB reserved · now 6.00 MiB reserved in 3 segments, 4.43 MiB of it free (74 %) · "
                     "12 history entries · 1 OOM")
    assert text.splitlines()[1] == "alive at the peak, biggest first:"
    assert text_rows(text) == [["1.00 MiB", f"{CELL}:4", "<module>", "20.0 µs"],
                               ["512.00 KiB", f"{CELL}:3", "<module>", "10.0 µs"],
                               ["300.00 KiB", f"{CELL}:9", "<module>", "110.0 µs"],
                               ["200.00 KiB", f"{CELL}:10", "<module>", "120.0 µs"],
                               ["100.00 KiB", BEFORE, "—"], ["64.00 KiB", BEFORE, "—"]]
    assert len(text_rows(p.report(limit=2).text())) == 2
    snap = hand_snapshot()
    snap["device_traces"][0].append(entry("defragment", SEG_A, 0, 170))  # an action nbprof does not know
    text = load(snap, tmp_path, "n.pickle").report().text()
    assert text.splitlines()[-1].startswith("note: 1 history entry of an action nbprof does not know")


# ----------------------------------------------------------------------- blocks(at=), the replay


def test_blocks_at_a_time_per_device(tmp_path):
    """At t=125: cuda:0 after a2 (a1, a2, x, y), cuda:1 before its first entry (nothing); at
    t=215: cuda:0 at its end (a2, a3, y), cuda:1 after c1 (300 KiB)."""
    p = load(two_devices(), tmp_path)
    at = p.blocks(125)
    assert sorted(zip(at["device"], at["requested_bytes"])) == sorted(
        ("cuda:0", b * KiB) for b in (512, 1024, 64, 100))
    at = p.blocks(215.0)
    assert sorted(zip(at["device"], at["requested_bytes"])) == sorted(
        [("cuda:0", 256 * KiB), ("cuda:0", MiB), ("cuda:0", 100 * KiB), ("cuda:1", 300 * KiB)])
    assert p.blocks(99).sort_values("requested_bytes")["requested_bytes"].tolist() == [64 * KiB, 100 * KiB]
    for bad in ("middle", object(), "PEAK"):
        with pytest.raises(OptionError) as e:
            p.blocks(bad)
        assert str(e.value) == f'blocks(at={bad!r}): "end", "peak" or a time_us of active_memory()'


def test_the_replays_allocations_by_hand(hand):
    """a1, a2, a3 from the history; x freed in it from before it; y held from before it."""
    r = hand._replay
    a = r.allocations
    assert a[["address", "requested_bytes", "alloc_entry", "free_entry", "before"]].values.tolist() == [
        [SEG_A, 512 * KiB, 1, 4, False], [SEG_A + 512 * KiB, MiB, 2, -1, False], [SEG_A, 256 * KiB, 5, -1, False],
        [SEG_B + MiB, 64 * KiB, -1, 7, True], [SEG_B, 100 * KiB, -1, -1, True]]
    assert a["size_bytes"].tolist() == [-1, MiB, 256 * KiB, -1, 128 * KiB]
    assert a["state"].tolist() == ["", "active_allocated", "active_allocated", "", "active_allocated"]
    # each row of the history: the allocation it adds or takes away (-1: none)
    assert r.row_alloc.tolist() == [-1, 0, 1, -1, 0, 2, -1, 3]
    assert r.initial == {0: 164 * KiB}


# ------------------------------------------------------------------------------ the live chart


def test_a_span_names_its_allocations_in_order(tmp_path):
    """The history's very first entry an allocation (no segment_alloc before it): it is in a span
    from 0. Two lines allocating the same bytes keep the order they first allocated in."""
    from nbprof.views.snapshot_chart import SnapshotChartState

    snap = hand_snapshot()
    trace = snap["device_traces"][0][1:]  # a1 first
    s7, s2 = stack(7), stack(2)
    trace[5:5] = [entry("alloc", SEG_A + 1536 * KiB, 128 * KiB, 141, s7), entry("alloc", SEG_A + 1664 * KiB, 128 * KiB, 142, s2),
                  entry("free_completed", SEG_A + 1536 * KiB, 128 * KiB, 143, s7),
                  entry("free_completed", SEG_A + 1664 * KiB, 128 * KiB, 144, s2)]
    snap["device_traces"][0] = trace
    state = SnapshotChartState(load(snap, tmp_path))
    sel = state.select(0.0, 5.0)  # µs since t=110
    assert sel["head"] == "0 – 5.0 µs: 1 allocation"
    assert sel["tables"][0]["rows"] == [[f"{LINE}3", "1", "512.00 KiB", "512.00 KiB"]]
    assert sel["tables"][0]["title"] == "Allocated in the span, by line"
    sel = state.select(30.0, 34.0)  # t=140..144: a3 (256 KiB), then line 7 and line 2 (128 KiB each, freed)
    assert sel["head"] == "30.0 µs – 34.0 µs: 3 allocations"
    assert [r[0] for r in sel["tables"][0]["rows"]] == [f"{LINE}5", f"{LINE}7", f"{LINE}2"]
    assert [r[3] for r in sel["tables"][0]["rows"]] == ["256.00 KiB", "0 B", "0 B"]
    reply = state.answer({"type": "plotly"})
    import base64
    import gzip

    import plotly.offline

    assert reply["type"] == "plotly"
    assert gzip.decompress(base64.b64decode(reply["source"])).decode() == plotly.offline.get_plotlyjs()


# ------------------------------------------------------------------------------ save: the dict


def test_save_keeps_empty_stacks_empty_and_counts_segments_as_torch(tmp_path):
    """A block or segment without frames is written with none (not another's stack); a segment
    the file gave no counts is written with torch's own (``_memory_viz.calc_active``) and those
    of its blocks counted by hand."""
    from torch.cuda import _memory_viz as mv

    snap = hand_snapshot()
    snap["segments"][0]["blocks"][0]["state"] = "active_pending_free"
    for s in snap["segments"]:
        for k in ("allocated_size", "active_size", "requested_size"):
            del s[k]
    p = load(snap, tmp_path)
    with open(p.save(tmp_path / "out.pickle"), "rb") as f:
        out = pickle.load(f)
    for theirs, ours in zip(snap["segments"], out["segments"]):
        assert ours["frames"] == theirs["frames"] == []
        assert [(b["address"], b["size"], b["requested_size"], b["state"], b["frames"]) for b in ours["blocks"]] == \
            [(b["address"], b["size"], b["requested_size"], b["state"], b["frames"]) for b in theirs["blocks"]]
        assert ours["allocated_size"] == mv.calc_active(theirs)
    a, b = out["segments"]
    assert (a["allocated_size"], a["active_size"], a["requested_size"]) == (MiB, 1280 * KiB, 1280 * KiB)
    assert (b["allocated_size"], b["active_size"], b["requested_size"]) == (128 * KiB, 128 * KiB, 100 * KiB)
    assert mv.segsum(copy.deepcopy(out)) == mv.segsum(copy.deepcopy(snap))


# ------------------------------------------------------------------------ the reader's edges


def test_one_device_of_several_and_entries_without_frames(tmp_path):
    """device_traces[0] empty, the history on cuda:1; entries without frames: no stack, said so."""
    snap = {"segments": [segment(SEG_A, 2 * MiB, [block(SEG_A, 256 * KiB, 256 * KiB, "active_allocated"),
                                                  block(SEG_A + 256 * KiB, 1792 * KiB, 1792 * KiB, "inactive")],
                                 device=1)],
            "device_traces": [[], [{"action": "alloc", "addr": SEG_A, "size": 256 * KiB, "stream": 0, "time_us": 5}]]}
    p = load(snap, tmp_path)
    m = p.active_memory()
    assert m[["device", "entry", "active_bytes", "reserved_bytes"]].values.tolist() == [["cuda:1", 0, 256 * KiB, 2 * MiB]]
    end = p.blocks("end")
    assert end[["device", "requested_bytes", "alloc_us"]].values.tolist() == [["cuda:1", 256 * KiB, 5.0]]
    assert end["file"].isna().all() and end["frames"].tolist() == [()]
    (table,) = dt_tables(panels_of(p)["At the end"])[1:]
    assert table["rows"][0][:2] == [256 * KiB, "(no Python stack recorded)"]
    assert p.report().text().startswith("CUDA memory snapshot: cuda:1 peak 256.00 KiB active, 2.00 MiB reserved")


@pytest.mark.parametrize("snap, message", [
    ({"segments": [{"address": 1, "total_size": 2, "blocks": "x"}]}, "a segment's blocks: not a list"),
    ({"segments": [{"address": 1, "total_size": 2, "blocks": [3]}]}, "a block: not a dict"),
    ({"segments": [], "device_traces": [[{"action": "alloc", "time_us": "soon"}]]}, "an entry's time_us: not a number"),
    ({"segments": [], "device_traces": [[{"action": ["alloc"]}]]}, "an entry's action"),
    ({"segments": [{"address": 1, "total_size": 2, "blocks": [{"address": 1, "size": 2, "state": ["x"]}]}]},
     "a block's state"),
    ({"segments": [], "device_traces": "x"}, "device_traces: not a list of lists"),
    ({"segments": [{"address": 1, "total_size": 2, "segment_type": 3, "blocks": []}]}, None),
    ({"segments": [{"address": "1", "total_size": 2, "blocks": []}]}, "a segment's address: str '1'"),
    ({"segments": [{"address": 1, "total_size": 2, "blocks": [{"address": 1, "size": 2.5, "state": "inactive"}]}]},
     "a block's size"),
])
def test_what_the_reader_refuses_is_one_line(tmp_path, snap, message):
    import gc

    path = write(snap, tmp_path / "bad.pickle")
    if message is None:  # a number where text belongs is read as its text (torch writes text there)
        assert nbprof.load_snapshot(path).segments()["segment_type"].tolist() == ["3"]
        return
    with pytest.raises(TraceError) as e:
        nbprof.load_snapshot(path)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{path}: not a CUDA memory snapshot") and message in text, text
    assert gc.isenabled()


def varied() -> dict:
    """Every field torch writes, none at its default: a small-pool segment on stream 7 of pool
    (3, 9), expandable; an OOM's device_free; entries on stream 7; a segment_free; frames shared."""
    s1, s2 = stack(1), stack(2)
    a = SEG_A
    small = segment(a, 2 * MiB, [block(a, 512, 500, "active_allocated", s1),
                                 block(a + 512, 2 * MiB - 512, 2 * MiB - 512, "inactive")], stream=7)
    small.update(segment_type="small", segment_pool_id=(3, 9), is_expandable=True, frames=s2)
    trace = [entry("segment_alloc", a, 2 * MiB, 10, s2, stream=7), entry("segment_alloc", SEG_B, MiB, 11, s2, stream=7),
             entry("alloc", a, 500, 12, s1, stream=7), entry("segment_free", SEG_B, MiB, 13, s2, stream=7),
             {"action": "oom", "device_free": 12345, "size": 3 * MiB, "stream": 7, "time_us": 14, "frames": s1}]
    return {"segments": [small], "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}


def test_the_tables_hold_every_field_as_torch_wrote_it(tmp_path):
    p = load(varied(), tmp_path)
    seg = p._data.segments
    assert seg[["device", "address", "total_size_bytes", "stream", "torch_allocated_bytes", "torch_active_bytes",
                "torch_requested_bytes", "is_expandable"]].values.tolist() == [[0, SEG_A, 2 * MiB, 7, 512, 512, 500, True]]
    assert (str(seg["segment_type"][0]), str(seg["pool_id"][0])) == ("small", "3,9")
    tr = p._data.trace
    assert tr[["entry", "address", "size_bytes", "stream", "time_us", "device_free_bytes"]].values.tolist() == [
        [0, SEG_A, 2 * MiB, 7, 10, -1], [1, SEG_B, MiB, 7, 11, -1], [2, SEG_A, 500, 7, 12, -1],
        [3, SEG_B, MiB, 7, 13, -1], [4, 0, 3 * MiB, 7, 14, 12345]]
    m = p.active_memory()
    # reserved: back from the 2 MiB held at the end: 2, 3, 3, 2, 2 MiB; active: 0, 0, 500, 500, 500
    assert (m["reserved_bytes"] // KiB).tolist() == [2048, 3072, 3072, 2048, 2048]
    assert m["active_bytes"].tolist() == [0, 0, 500, 500, 500]
    # a column of bools (seg[seg["is_expandable"]] selects rows; a float column would raise there)
    assert p.segments()["is_expandable"].dtype == bool and len(p.segments()[p.segments()["is_expandable"]]) == 1
    (seg_row,) = p.segments().to_dict("records")
    assert (seg_row["segment_type"], seg_row["pool_id"], seg_row["stream"], seg_row["is_expandable"]) == ("small", "3,9", 7, True)
    assert (seg_row["rounding_bytes"], seg_row["free_bytes"], seg_row["largest_free_bytes"]) == (12, 2 * MiB - 512, 2 * MiB - 512)
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in htmllib.unescape(p.report().html(include_library=False))
    assert p.report().text().startswith("CUDA memory snapshot: cuda:0 peak 500 B active, 3.00 MiB reserved · now 2.00 MiB "
                                     "reserved in 1 segment")  # the peak: after the alloc, B still held


def test_save_writes_back_every_field_torch_wrote(tmp_path):
    snap = varied()
    with open(load(snap, tmp_path).save(tmp_path / "out.pickle"), "rb") as f:
        out = pickle.load(f)
    drop = ("compile_context", "user_metadata")  # fields nbprof does not read
    assert out["device_traces"] == [[{k: v for k, v in e.items() if k not in drop} for e in snap["device_traces"][0]]]
    assert out["segments"] == snap["segments"] and out["allocator_settings"] == snap["allocator_settings"]


def test_blocks_without_addresses_lie_one_after_another(tmp_path):
    """Before torch 2.1 (and memory_viz's CPU snapshots) blocks carry no address: each starts where
    the one before it ends, from its segment's address (memory_viz reads them so); a torch 2.0
    block's request is in its history."""
    snap = hand_snapshot()
    for s in snap["segments"]:
        for b in s["blocks"]:
            del b["address"]
            b["history"] = [{"real_size": b.pop("requested_size"), "frames": b.pop("frames")}]
    data = load(snap, tmp_path)._data
    want = []
    for s in hand_snapshot()["segments"]:
        want += [[b["address"], b["size"], b["requested_size"]] for b in s["blocks"]]
    assert data.blocks[["address", "size_bytes", "requested_bytes"]].values.tolist() == want
    assert data.blocks["segment"].tolist() == [0, 0, 0, 0, 1, 1]


def test_past_eight_lines_the_rest_is_one_layer(tmp_path):
    """Ten lines allocate 10, 9, ..., 1 KiB (line k: 11 - k KiB) and hold them: lines 1-8 get a
    layer each, largest at the bottom; lines 9 and 10 are "(other lines)", 3 KiB, on top."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_spec, snapshot_svg

    blocks, trace, a = [], [], SEG_A
    for k in range(1, 11):
        st = stack(k)
        trace.append(entry("alloc", a, (11 - k) * KiB, 100 + k, st))
        blocks.append(block(a, (11 - k) * KiB, (11 - k) * KiB, "active_allocated", st))
        a += (11 - k) * KiB
    blocks.append(block(a, 2 * MiB - 55 * KiB, 2 * MiB - 55 * KiB, "inactive"))
    p = load({"segments": [segment(SEG_A, 2 * MiB, blocks)], "device_traces": [trace]}, tmp_path)
    (panel,) = read_chart(snapshot_svg(drawn_devices(p)))["panels"]
    names = [f"{LINE}{k}" for k in range(1, 9)] + ["(other lines)"]
    assert [name for name, _, _ in panel["layers"]] == names
    assert [text for _, text in panel["legend"]] == [f"{n} · {b}.00 KiB" for n, b in zip(names, [10, 9, 8, 7, 6, 5, 4, 3, 3])]
    y_bytes = line_fit(panel["y_ticks"])
    other = tops(panel["layers"][-1][2], 10)
    assert y_bytes(other[-1][1]) == pytest.approx(55 * KiB, abs=KiB)  # the top: all 55 KiB
    spec = snapshot_spec(drawn_devices(p))
    (oth,) = [t for t in spec["data"] if t["name"] == "(other lines)"]
    # line 9 (2 KiB) at t=109, line 10 at t=110, held to the axis' end
    assert list(oth["y"]) == [0] * 8 + [2 * KiB, 3 * KiB, 3 * KiB]


def test_a_line_on_two_devices_is_one_legend_entry(tmp_path):
    """cuda:1 allocates from the cell's line 4 too: its layer joins line 4's legend group, shown once."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_spec

    snap = two_devices()
    s4 = stack(4)
    snap["device_traces"][1][2]["frames"] = s4
    snap["segments"][2]["blocks"][1]["frames"] = s4
    spec = snapshot_spec(drawn_devices(load(snap, tmp_path)))
    fours = [t for t in spec["data"] if t["name"] == f"{LINE}4"]
    assert [(t["yaxis"], t["showlegend"], t["legendgroup"]) for t in fours] == [("y", True, f"{LINE}4"),
                                                                                 ("y2", False, f"{LINE}4")]
    nines = [t for t in spec["data"] if t["name"] == f"{LINE}9"]
    assert [(t["yaxis"], t["showlegend"]) for t in nines] == [("y2", True)]
    assert spec["layout"]["height"] == 130 + 300 * 2


def test_a_block_from_a_cell_of_this_notebook_is_named_by_the_cell(tmp_path, shell):
    """A frame in a cell of this shell: the tables say "In [n] line 2", not the cell's file."""
    from .conftest import run

    result, _ = run(shell, "def f():\n    return 1\nf()")
    cell = next(f for f, n in shell.compile._filename_map.items() if n == result.execution_count)
    snap = hand_snapshot()
    snap["segments"][0]["blocks"][2]["frames"] = [{"filename": cell, "line": 2, "name": "f"}]
    p = nbprof.SnapshotProfile(nbprof.load_snapshot(write(snap, tmp_path / "s.pickle"))._data, shell=shell)
    _, blocks = dt_tables(panels_of(p)["At the end"])
    assert blocks["rows"][0][:3] == [MiB, f"In [{result.execution_count}] line 2", "f"]


def test_the_figures_legend_sits_in_its_bottom_margin_under_each_panel_count(tmp_path):
    """The interactive chart's legend goes under the x axis' title, the same distance below the
    plot area for one device and for two (its y is a share of the plot area's height, which grows
    with the devices: 62 px at one and 99 px at two, the margin's bottom, before; seed 53's
    snapshot_spec 445 pushed it 186 px down, out of the figure)."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_spec

    below = []
    for snap, n in ((hand_snapshot(), 1), (two_devices(), 2)):
        layout = snapshot_spec(drawn_devices(load(snap, tmp_path, f"s{n}.pickle")))["layout"]
        plot_px = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
        below.append(-layout["legend"]["y"] * plot_px)
        assert layout["legend"]["yanchor"] == "top"
    assert below == pytest.approx([62, 62]) and below[0] < 100 - 30  # room for the legend's row in the margin


def test_a_panels_y_axis_has_about_three_ticks_at_round_steps(tmp_path):
    """A device with 7 MiB reserved (the axis to 7.42 MiB, 6 % over): three ticks of about a third
    of it, at the round step 2.5 MiB: 0, 2.5 and 5 MiB (7.5 is past the top)."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_svg

    a = SEG_A
    snap = {"segments": [segment(a, 7 * MiB, [block(a, MiB, MiB, "active_allocated", stack(4)),
                                              block(a + MiB, 6 * MiB, 6 * MiB, "inactive")])],
            "device_traces": [[entry("alloc", a, MiB, 100, stack(4))]]}
    (panel,) = read_chart(snapshot_svg(drawn_devices(load(snap, tmp_path))))["panels"]
    assert [v for _, v in panel["y_ticks"]] == [0, 2.5 * MiB, 5 * MiB]
