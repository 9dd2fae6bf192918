"""Contracts of the CUDA memory snapshot's path (reader, x axis, report text, chart axis, segments
table) and of the timeline SVG's header, pinned where seed 52's mutation sample (issue 38) found
them loose. Every expected value is counted by hand from the snapshot dict the test builds
(tests/snapshots.py, whose docstrings count hand_snapshot()), or read back from the SVG/HTML with a
parser and compared with the layout the drawing itself states (the title's and note's lines)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.collect.snapshot import parse_snapshot, snapshot_dict

from .conftest import trace_path
from .htmltext import read
from .snapshots import CELL, KiB, MiB, SEG_A, SEG_B, block, entry, hand_snapshot, segment, stack, write

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    return nbprof.load_snapshot(write(hand_snapshot(), tmp_path_factory.mktemp("hand") / "hand.pickle"))


# ------------------------------------------------------------------ reading: legacy blocks, torch's counts


def _legacy_block(addr: int, size: int, requested: int, state: str, frames: list) -> dict:
    """A block as torch <= 2.0 wrote it: no requested_size, no frames; its allocation's request
    and traceback in ``history[0]`` (``real_size``, ``frames``), as memory_viz reads them."""
    return {"address": addr, "size": size, "state": state,
            "history": [{"addr": addr, "real_size": requested, "frames": frames}]}


def test_a_legacy_blocks_stack_and_request_come_from_its_history():
    """Every form a block's stack can take: its own ``frames`` (torch 2.1+, preferred over a
    history), ``history[0]["frames"]`` (torch <= 2.0), and none (no history, an empty one, a
    history whose first item is not a dict): the stack is the very list the file holds, or -1."""
    old = stack(2)  # the traceback of a block allocated before the history
    own, shadowed = stack(9), stack(8)
    blocks = [
        _legacy_block(SEG_A, 64 * KiB, 60 * KiB, "active_allocated", old),
        {**block(SEG_A + 64 * KiB, 64 * KiB, 50 * KiB, "active_allocated", own),
         "history": [{"real_size": 1, "frames": shadowed}]},
        {"address": SEG_A + 128 * KiB, "size": 64 * KiB, "state": "inactive"},
        {"address": SEG_A + 192 * KiB, "size": 64 * KiB, "state": "inactive", "history": []},
        {"address": SEG_A + 256 * KiB, "size": 64 * KiB, "state": "inactive", "history": ["not a dict"]},
        {"address": SEG_A + 320 * KiB, "size": 64 * KiB, "state": "inactive", "history": {"frames": old}},
    ]
    data = parse_snapshot({"segments": [{**segment(SEG_A, 2 * MiB, []), "blocks": blocks}], "device_traces": []})
    ids = data.blocks["stack"].tolist()
    assert data.stacks[ids[0]] is old and data.stacks[ids[1]] is own
    assert ids[2:] == [-1, -1, -1, -1]
    # the request: requested_size, else history[0]["real_size"], else the block's size
    assert data.blocks["requested_bytes"].tolist() == [60 * KiB, 50 * KiB] + [64 * KiB] * 4


def test_a_legacy_block_held_from_before_the_history_is_named_by_its_line(tmp_path):
    """hand_snapshot() as torch <= 2.0 writes its blocks: y (the 100 KiB block held from before
    the history) given a traceback at cell line 2; the end's blocks name it by that line, and the
    others by the lines that allocated them in the history (a2: 4, a3: 5)."""
    snap = hand_snapshot()
    for s in snap["segments"]:
        s["blocks"] = [_legacy_block(b["address"], b["size"], b["requested_size"], b["state"],
                                     b["frames"] or (stack(2) if b["state"] == "active_allocated" else []))
                       for b in s["blocks"]]
    p = nbprof.load_snapshot(write(snap, tmp_path / "legacy.pickle"))
    end = p.blocks("end")
    assert end["requested_bytes"].tolist() == [MiB, 256 * KiB, 100 * KiB]
    assert end["line"].tolist() == [4, 5, 2] and end["file"].tolist() == [CELL] * 3


def _without_torch_counts(snap: dict) -> dict:
    for s in snap["segments"]:
        del s["allocated_size"], s["active_size"], s["requested_size"]
    return snap


def test_torchs_own_counts_are_kept_and_missing_ones_are_minus_one_then_recounted():
    """A segment's allocated_size / active_size / requested_size are torch's own (kept as they
    are, even where the blocks would say otherwise); a file without them (memory_viz's CPU
    snapshots, older torch) reads -1, and writing it back counts them from the blocks: segment A
    holds a3 (256 KiB) and a2 (1 MiB), segment B y (a 128 KiB block for 100 KiB asked)."""
    snap = hand_snapshot()
    snap["segments"][0]["allocated_size"] = 7  # not what the blocks say: torch's word is kept
    data = parse_snapshot(snap)
    seg = data.segments
    assert seg["torch_allocated_bytes"].tolist() == [7, 128 * KiB]
    assert seg["torch_active_bytes"].tolist() == [1280 * KiB, 128 * KiB]
    assert seg["torch_requested_bytes"].tolist() == [1280 * KiB, 100 * KiB]
    assert [s["allocated_size"] for s in snapshot_dict(data)["segments"]] == [7, 128 * KiB]

    bare = parse_snapshot(_without_torch_counts(hand_snapshot()))
    cols = ["torch_allocated_bytes", "torch_active_bytes", "torch_requested_bytes"]
    assert bare.segments[cols].to_numpy().tolist() == [[-1, -1, -1], [-1, -1, -1]]
    back = snapshot_dict(bare)["segments"]
    assert [(s["allocated_size"], s["active_size"], s["requested_size"]) for s in back] == [
        (1280 * KiB, 1280 * KiB, 1280 * KiB), (128 * KiB, 128 * KiB, 100 * KiB)]


# ------------------------------------------------------------------------------------- the x axis


def _memory(device, entry_, time_us) -> pd.DataFrame:
    return pd.DataFrame({"device": np.asarray(device, np.int64), "entry": np.asarray(entry_, np.int64),
                         "time_us": np.asarray(time_us, np.float64)})


def test_x_axis_is_time_since_the_first_entry_when_every_device_runs_forward():
    from nbprof.analysis.snapshot import x_axis

    # two devices interleaved, each forward (ties allowed): µs since the earliest entry of all
    x, is_time, t0 = x_axis(None, _memory([0, 0, 1, 1, 0], [0, 1, 0, 1, 2], [150, 150, 100, 130, 160]))
    assert is_time and t0 == 100.0 and x.tolist() == [50.0, 50.0, 0.0, 30.0, 60.0]
    # one device's clock going back: each entry's position, origin 0
    x, is_time, t0 = x_axis(None, _memory([0, 0, 1], [0, 1, 0], [150, 140, 100]))
    assert (x.tolist(), is_time, t0) == ([0.0, 1.0, 0.0], False, 0.0) and x.dtype == np.float64
    # an entry without a time (before torch 2.1): positions
    x, is_time, t0 = x_axis(None, _memory([0, 0, 0], [0, 1, 2], [100, np.nan, 120]))
    assert (x.tolist(), is_time, t0) == ([0.0, 1.0, 2.0], False, 0.0)
    # no history at all
    x, is_time, t0 = x_axis(None, _memory([], [], []))
    assert (x.tolist(), is_time, t0) == ([], False, 0.0)


def test_the_hand_snapshots_chart_axis_is_ms_since_its_first_entry_with_ticks_under_the_axis(hand):
    """hand_snapshot()'s history runs t=100..160 µs: the chart's x axis reads 0 to 0.06 ms, each
    tick a short mark hanging under the axis line at its label's x, the label under it."""
    from nbprof.views.snapshot_chart import drawn_devices, snapshot_svg

    root = ET.fromstring(snapshot_svg(drawn_devices(hand)))
    lines = list(root.iter(SVG + "line"))
    [axis] = [ln for ln in lines if ln.get("stroke") == "#bbb"]
    y_axis = float(axis.get("y1"))
    assert float(axis.get("y2")) == y_axis
    x_left, x_right = float(axis.get("x1")), float(axis.get("x2"))
    marks = [ln for ln in lines if ln.get("stroke") == "#999"]
    labels = [t for t in root.iter(SVG + "text") if t.get("text-anchor") == "middle"]
    assert [t.text for t in labels] == [f"{v:g} ms" for v in (0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06)]
    assert len(marks) == len(labels)
    for i, (mark, label) in enumerate(zip(marks, labels)):
        x = float(mark.get("x1"))
        assert float(mark.get("x2")) == x == float(label.get("x"))
        # the axis runs 0..61.2 µs: the entries' 60, then 2 % of that after the last (its final step)
        assert x == pytest.approx(x_left + i * 10 / 61.2 * (x_right - x_left), abs=0.05)
        top, end = float(mark.get("y1")), float(mark.get("y2"))
        assert top == y_axis and y_axis < end < float(label.get("y"))  # under the axis, above its label


# ----------------------------------------------------------------------------------- the report


def test_the_report_text_line_by_line(hand):
    """The summary (hand_snapshot's docstring: the peak 1,700 KiB active, 4 MiB reserved; at the
    end 768 KiB free in A and 1,920 KiB in B, 2,688 KiB = 66 % of 4 MiB), then the blocks alive at
    the peak, biggest first (a2 1 MiB line 4 at t=120, a1 512 KiB line 3 at t=110, y and x from
    before the history), each a line of its own; a limit keeps the biggest."""
    rule = "----------  ------------------------------------  --------  -------"
    head = ("CUDA memory snapshot: cuda:0 peak 1.66 MiB active, 4.00 MiB reserved · now 4.00 MiB reserved in "
            "2 segments, 2.62 MiB of it free (66 %) · 8 history entries · 1 OOM")
    rows = ["  1.00 MiB  /tmp/ipykernel_4242/1234567.py:4      <module>  20.0 µs",
            "512.00 KiB  /tmp/ipykernel_4242/1234567.py:3      <module>  10.0 µs",
            "100.00 KiB  (allocated before the history began)                  —",
            " 64.00 KiB  (allocated before the history began)                  —"]
    header = "      Size  Allocated by                          In             At"
    assert hand.report().text().split("\n") == [head, "alive at the peak, biggest first:", rule, header, rule,
                                                 *rows, rule]
    two = hand.report(limit=2).text().split("\n")
    assert two[:2] == [head, "alive at the peak, biggest first:"] and len(two) == 2 + 3 + 2 + 1
    assert [" ".join(ln.split()[:2]) for ln in two[5:7]] == ["1.00 MiB", "512.00 KiB"]


def test_the_report_text_ends_with_its_notes_one_a_line(tmp_path):
    """An entry of an action nbprof does not know is left out of the replay, said in a note line
    (its count in the number's form); a snapshot without blocks alive at its peak is its summary
    line and the notes: one free 2 MiB segment, nothing active."""
    seg = segment(SEG_B, 2 * MiB, [block(SEG_B, 2 * MiB, 2 * MiB, "inactive")])
    head = ("CUDA memory snapshot: cuda:0 peak 0 B active, 2.00 MiB reserved · now 2.00 MiB reserved in 1 segment, "
            "2.00 MiB of it free (100 %) · {}")
    for n, entries, unknown in ((1, "1 history entry", "1 history entry"),
                                (3, "3 history entries", "2 history entries")):
        trace = [entry("defragment", 0, 0, 100 + i) for i in range(min(n, 2))] + [entry("snapshot", 0, 0, 200)][:n - 1]
        path = write({"segments": [seg], "device_traces": [trace]}, tmp_path / f"s{n}.pickle")
        assert nbprof.load_snapshot(path).report().text().split("\n") == [
            head.format(entries), f"note: {unknown} of an action nbprof does not know: left out of the replay"]


# -------------------------------------------------------------------------------- the segments tab


def test_the_segments_table_headers_and_cells(hand):
    """The Segments tab's table, read back: its headers, and each segment's cells as the hand
    snapshot holds them (A: 2 MiB, a3 256 KiB + a2 1 MiB allocated and asked, 768 KiB free in two
    pieces, the largest 512 KiB, 4 blocks; B: y's 128 KiB block for 100 KiB asked, the rest free)."""
    from nbprof.views.tabs.snapshot import _segments_html

    html = _segments_html(hand)
    start = html.index('<table class="nbprof-static"')  # the preview shown before the table's script runs
    table = html[start:html.index("</table>", start)]
    heads = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", table)
    assert heads == ["Device", "Reserved", "Allocated", "Requested", "Free", "Largest free", "Blocks", "Pool",
                     "Stream"]
    cells = [re.findall(r"<td(?: [^>]*)?>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    cells = [c for c in cells if c]
    assert cells == [["cuda:0", "2.00 MiB", "1.25 MiB", "1.25 MiB", "768.00 KiB", "512.00 KiB", "4", "large", "0"],
                     ["cuda:0", "2.00 MiB", "128.00 KiB", "100.00 KiB", "1.88 MiB", "1.88 MiB", "2", "large", "0"]]
    assert "".join(read(html).text).startswith("4.00 MiB reserved in 2 segments: 1.35 MiB requested, 28.00 KiB "
                                               "rounding, 2.62 MiB free (66 %; the largest free piece 1.88 MiB)")


# ------------------------------------------------------------------------ the timeline SVG's header


def _header(svg: str) -> dict:
    root = ET.fromstring(svg)
    texts = list(root.iter(SVG + "text"))
    rects = list(root.iter(SVG + "rect"))
    squares = [r for r in rects if r.get("width") == "10" and r.get("height") == "10"]
    bands = [r for r in rects if r.get("x") == "0" and r.get("y") is not None]
    legend = [t for t in texts if t.get("fill") == "#444"]
    return {"title_y": float(texts[0].get("y")), "note_y": float(texts[1].get("y")),
            "squares": [(float(r.get("y")), float(r.get("y")) + 10) for r in squares],
            "legend_y": [float(t.get("y")) for t in legend],
            "band_top": min(float(r.get("y")) for r in bands), "height": float(root.get("height"))}


@pytest.mark.parametrize("height", [None, 400, 800])
def test_the_timeline_legend_and_the_lanes_leave_the_headers_lines_readable(height):
    """Wide enough, the legend sits on the title's line (its text on the title's baseline); too
    narrow, on a line of its own under the note: the next line (no further below the note than the
    note is below the title), above the first lane's band. Whatever the height asked for, no
    lane's band is drawn over the note (bands are opaque and come after it)."""
    from nbprof.views.timeline import timeline_svg

    p = nbprof.load_trace(trace_path("two_streams"))
    wide = _header(timeline_svg(p, width=1000, height=height))
    line = wide["note_y"] - wide["title_y"]
    assert line > 0 and wide["legend_y"] and set(wide["legend_y"]) == {wide["title_y"]}
    assert wide["band_top"] > wide["note_y"] + 3  # the note's descenders too

    narrow = _header(timeline_svg(p, width=500, height=height))
    assert narrow["legend_y"] and len(set(narrow["legend_y"])) == 1
    legend_y = narrow["legend_y"][0]
    assert narrow["note_y"] < legend_y <= narrow["note_y"] + line
    assert all(narrow["note_y"] < top and bottom <= narrow["band_top"] for top, bottom in narrow["squares"])
    assert narrow["band_top"] > narrow["note_y"] + 3
    if height:
        assert narrow["height"] == wide["height"] == height
    else:
        assert math.isclose(narrow["height"] - wide["height"], 20, abs_tol=1)  # the legend's line


def test_the_line_that_holds_most_wins_and_a_tie_goes_to_the_line_that_allocated_first():
    """memory_growth's holder (``_top_holder``): the line whose kept blocks add up to most; two
    lines keeping the same bytes: the one whose block came first in the steps (not the one whose
    file or line sorts first: seed 53's _top_holder 11); per step, the median of what it kept."""
    from nbprof.analysis.findings.memory_growth import _top_holder

    kept = pd.DataFrame({"cell": ["In [3]", "In [3]", "In [2]", "In [2]"],
                         "file": ["/tmp/ipykernel_1/b.py", "/tmp/ipykernel_1/b.py", "/tmp/ipykernel_1/a.py", "/tmp/ipykernel_1/a.py"],
                         "line": [9, 9, 4, 4], "source": ["keep.append(y)", "keep.append(y)", "z = x * 2", "z = x * 2"],
                         "bytes": [512, 512, 256, 768], "_n": [1, 2, 1, 2], "top_op": ["aten::mul"] * 4})
    holder = _top_holder(kept, True, np.array([1, 2]))
    assert (holder["cell"], holder["line"], holder["line_bytes"], holder["bytes_per_step"]) == ("In [3]", 9, 1024, 512.0)
    more = kept.assign(bytes=[512, 512, 256, 1024])  # a.py line 4 now keeps more: it holds it
    holder = _top_holder(more, True, np.array([1, 2]))
    assert (holder["cell"], holder["line"], holder["line_bytes"], holder["bytes_per_step"]) == ("In [2]", 4, 1280, 640.0)


def _curve_y_labels(totals: list[int], tmp_path) -> list[tuple[float, str]]:
    """The Memory tab's curve of a CPU whose allocator total goes through ``totals`` (one event each,
    10 µs apart): its y ticks as drawn, (pixel, label), top to bottom."""
    from nbprof.analysis.memory import memory_curve
    from nbprof.views.memory import memory_curve_svg

    from .synthetic import Trace

    t = Trace()
    t.op("aten::empty", 0, 10 * len(totals) + 10)
    before = totals[0]
    for k, total in enumerate(totals):
        t.memory(10 * k + 5, total - before, total_allocated=total, total_reserved=0, device=-1, addr=k + 1)
        before = total
    curve = memory_curve(t.load(tmp_path).events)
    root = ET.fromstring(memory_curve_svg(curve, 10 * len(totals) + 10))
    return sorted((float(el.get("y")), el.text) for el in root.iter(SVG + "text") if el.get("text-anchor") == "end"
                  and el.get("x") == "66")


_IN_BYTES = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


@pytest.mark.parametrize("totals", [[100 << 20, (100 << 20) + 64, 100 << 20, (100 << 20) + 128],  # flat at 100 MiB
                                    [0, 4, 2, 4],  # a few bytes
                                    [5 << 20, (5 << 20) + (40 << 10)]])  # 5 MiB and 40 KiB more
def test_a_nearly_flat_or_tiny_memory_curve_has_y_ticks_that_read_apart(totals, tmp_path):
    """Each panel's y axis names at least two values, each label a different one, in order (the
    higher on the page the larger), under 1 KiB whole bytes. A curve flat at 100 MiB give or take 128 B drew one tick, or three reading
    "100 MiB"; one of a few bytes drew "0 B, 0 B, 1 B" (quarters of a byte)."""
    labels = _curve_y_labels(totals, tmp_path)
    values = [float(text.split()[0]) * _IN_BYTES[text.split()[1]] for _, text in labels]
    assert len(labels) >= 2 and len({text for _, text in labels}) == len(labels), labels
    assert values == sorted(values, reverse=True), labels
    assert all(v == int(v) for v in values if v < 1024), labels


@pytest.mark.parametrize(("top", "count"), [(1.06, 4), (1.06, 3), (2, 4), (7.5, 3)])
def test_byte_ticks_under_ten_bytes_are_whole_bytes(top, count):
    """The snapshot chart's y axis of a device that holds nothing spans 0 to 1.06 B: its ticks
    were 0, 0.25, 0.5, 0.75, 1 B, labelled "0 B" four times."""
    from nbprof.format import fmt_bytes
    from nbprof.views.memory import _byte_ticks

    ticks = [t for t in _byte_ticks(0, top, count) if t <= top]
    labels = [fmt_bytes(t, compact=True) for t in ticks]
    assert len(ticks) >= 2 and all(t == int(t) for t in ticks) and len(set(labels)) == len(labels), labels
