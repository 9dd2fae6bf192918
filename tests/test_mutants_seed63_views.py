"""What seed 63's sample of mutants (docs/testing.md) showed no test held in the views, each against
an answer of its own: the memory chart of a profile shorter than a microsecond (its x positions
counted by hand), the Functions tab of a Python profile whose sort names none of its columns (the
order by own time, by hand), a folder of ranks' Operators tab sorted by calls (the spread of
self CPU time over the ranks, by hand), HTA's idle breakdown of a profile without ranks (HTA's own
numbers, tests/data/hta_oracle.json) and the timeline's merging at the width its caller asks for."""

from __future__ import annotations

import json
import marshal
import re

import pytest

import nbprof

from .conftest import DATA
from .synthetic import Trace
from .test_mutants_views3 import dt_tables, panels

# ---------------------------------------------------------------- views.memory.memory_curve_svg


def test_the_memory_chart_of_a_profile_under_a_microsecond_spans_the_profile(tmp_path):
    """An op 0-0.5 µs that allocates 1 KiB at 0.2 µs and frees it at 0.4 µs: the Memory tab's
    chart draws 0-0.5 µs over its 672 px plot (x 72-744), so the peak (0.2 µs) is at
    72 + 0.4 * 672 = 340.8 and the free (0.4 µs) at 72 + 0.8 * 672 = 609.6."""
    t = Trace()
    t.op("aten::empty", 0, 0.5)
    t.memory(0.2, 1024, 1024, 2048)
    t.memory(0.4, -1024, 0, 2048)
    panel = panels(t.load(tmp_path).report().html(include_library=False))["Memory"]
    svg = panel[panel.index("<svg"):panel.index("</svg>")]  # the chart, the tab's first drawing
    assert "Allocated memory over time" in svg
    assert re.search(r'<circle cx="340\.8" cy="[\d.]+" r="4"', svg)
    (points,) = re.findall(r'<polyline [^>]*points="([^"]+)"', svg)
    assert [float(p.split(",")[0]) for p in points.split()] == [72.0, 340.8, 340.8, 609.6, 609.6, 744.0]


# ---------------------------------------------------------------- views.tabs.functions.render


def test_a_python_profiles_sort_that_is_no_column_orders_the_functions_by_own_time(tmp_path):
    """A .prof written by hand (cProfile's marshal format): a 3 ms, b 1 ms, c 2 ms of own time.
    A sort the table has no column for (a torch key, set on the profile's meta by hand) falls back
    to own time, as the text report does: a, c, b, the table ordered by tottime descending."""
    stats = {("m.py", 1, "a"): (1, 1, 0.003, 0.003, {}), ("m.py", 5, "b"): (2, 2, 0.001, 0.001, {}),
             ("m.py", 9, "c"): (1, 1, 0.002, 0.002, {})}
    path = tmp_path / "x.prof"
    path.write_bytes(marshal.dumps(stats))
    p = nbprof.load_prof(str(path))
    p.meta.sort = "self_cpu_us"
    (table,) = dt_tables(panels(p.report().html(include_library=False))["Functions"])
    assert [r[-1] for r in table["rows"]] == ["m.py:1(a)", "m.py:9(c)", "m.py:5(b)"]
    assert [r[1] for r in table["rows"]] == [0.003, 0.002, 0.001]
    assert table["order"] == [[table["headers"].index("tottime"), "desc"]]


# ---------------------------------------------------------------- views.tabs.operators._render (per rank)


def test_a_folder_sorted_by_calls_spreads_the_self_cpu_time_over_its_ranks(tmp_path):
    """Rank 0: aten::mm 100 µs, aten::add 10 µs; rank 1: aten::mm 30 µs, aten::add twice 10 µs.
    Sorted by calls, the profile's own sort too (no time to spread), the ranks' spread is of self
    CPU: add 3 calls, 30 µs, least 10 / most 20 on rank 1; mm 2 calls, 130 µs, least 30 / most 100
    on rank 0. The tab drawn by a renderer built now is the report's."""
    from nbprof.views.tabs.operators import _render

    a, b = Trace(rank=0), Trace(rank=1)
    a.op("aten::mm", 0, 100)
    a.op("aten::add", 200, 10)
    b.op("aten::mm", 0, 30)
    b.op("aten::add", 200, 10)
    b.op("aten::add", 300, 10)
    a.write(tmp_path / "a.json")
    b.write(tmp_path / "b.json")
    p = nbprof.load_trace(tmp_path, workers=0, progress=False)
    p.meta.sort = "count"  # what `nbprof view -s count FOLDER` sets: the profile's own order too
    assert p.summary.sort == "count"
    report = p.report()
    (table,) = dt_tables(_render("op", per_rank=True)(report))
    h = table["headers"]
    cols = [h.index(c) for c in ("Name", "Calls", "Self CPU", "Self CPU, least rank", "Self CPU, most rank",
                                 "Most on rank")]
    assert [[r[i] for i in cols] for r in table["rows"]] == [["aten::add", 3, 30.0, 10.0, 20.0, "1"],
                                                             ["aten::mm", 2, 130.0, 30.0, 100.0, "0"]]
    assert dt_tables(panels(report.html(include_library=False))["Operators"])[0]["rows"] == table["rows"]


# ---------------------------------------------------------------- views.tabs.ranks.hta_idle_html


def test_htas_idle_table_of_a_profile_without_ranks_has_a_row_per_stream():
    """two_streams (no rank): the idle table has its two streams, each with HTA 0.5.0's own host
    wait (hta_oracle.json: 10919.36 µs on 46, 10731.33 µs on 50) and no kernel wait or other."""
    from nbprof.views.tabs.ranks import hta_idle_html

    oracle = json.loads((DATA / "hta_oracle.json").read_text())["traces"]["two_streams.trace.json.gz"]
    hta = {(r["stream"], r["idle_category"]): r["idle_time"] for r in oracle["idle_time_breakdown"]}
    p = nbprof.load_trace(DATA / "two_streams.trace.json.gz")
    (table,) = dt_tables(hta_idle_html(p.ranks().hta_idle))
    assert table["headers"] == ["Rank", "Device", "Stream", "Host wait", "Kernel wait", "Other"]
    assert [r[2] for r in table["rows"]] == [46, 50]
    for row in table["rows"]:
        assert row[3] == pytest.approx(hta[(row[2], "host_wait")], abs=0.011)
        assert row[4] == 0.0 and row[5] == pytest.approx(hta[(row[2], "other")], abs=0.011)


# ---------------------------------------------------------------- views.timeline.prepare_timeline


def test_the_timeline_merges_at_the_width_its_caller_asks_for(tmp_path):
    """Twelve 10 µs ops 20 µs apart (0-230 µs), merged as a static drawing: at 2000 px (a pixel is
    0.115 µs) none merge; at 4 px a pixel is 230 / 4 = 57.5 µs, and the ops merge three by three
    into runs no wider than a pixel: 0-50, 60-110, 120-170, 180-230 µs, each 30 µs busy."""
    from nbprof.views.timeline import prepare_timeline

    t = Trace()
    for i in range(12):
        t.op(f"aten::op{i % 3}", 20 * i, 10)
    p = t.load(tmp_path)
    assert len(prepare_timeline(p, merge=True, width_px=2000).rects) == 12
    data = prepare_timeline(p, merge=True, width_px=4)
    assert data.px_us == 57.5
    r = data.rects
    assert list(zip(r["x0_us"], r["x1_us"], r["count"], r["busy_us"])) == [
        (0.0, 50.0, 3, 30.0), (60.0, 110.0, 3, 30.0), (120.0, 170.0, 3, 30.0), (180.0, 230.0, 3, 30.0)]
