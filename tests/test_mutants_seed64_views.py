"""The views seed 64's mutation sample found no test holding: the Callers & callees tab's edges (a
cell's function named "In [n]" on the other end of an edge, and the line that says the cell's own
code is no function cProfile sees), the Memory tab's per-step table paged by ten, the snapshot's
segment bars drawn to the biggest segment's size when it is a single byte, and the timeline's
memory counter track on the plotly axis its lines are drawn on.

Oracles: pstats' own keys and IPython's cell numbers, synthetic traces counted by hand, a snapshot
built by hand in torch's format, the recorded two_streams trace and plotly's own validators. The
renderers are called afresh in each test (the Callers & callees test of test_mutants_views3.py is
deselected under mutmut: its trampolines are frames of their own there; these look only at the
cell's functions)."""

from __future__ import annotations

import cProfile
import html as htmllib
import json
import re
import xml.etree.ElementTree as ET

import nbprof

from .conftest import run
from .snapshots import block, segment, write

NS = "{http://www.w3.org/2000/svg}"

CELL = """def leaf(n):
    return sum(range(n))
def middle():
    return [leaf(50) for _ in range(3)]
middle()"""


def _callgraph_panels(shell, name: str) -> tuple[dict[str, str], str, dict]:
    """%%cprofile of CELL: the Callers & callees panels of the cell's functions by function name,
    the cell's name ("In [n]", IPython's number of it) and pstats' keys of its functions."""
    count = shell.execution_count
    result, _ = run(shell, f"%%cprofile -q -o {name}\n" + CELL)
    assert result.error_in_exec is None
    p = shell.user_ns[name]
    keys = {k[2]: k for k in p.pstats.stats if k[2] in ("leaf", "middle")}
    html = p.report(limit=0).html(include_library=False)
    out = {}
    for panel in re.split(r'<div class="nbprof-cg" data-i="\d+">', html)[1:]:
        head = htmllib.unescape(re.search(r"<b>(.*?)</b>", panel).group(1))
        for fn in ("leaf", "middle"):
            if head.endswith(f"({fn})"):
                out[fn] = panel
    return out, f"In [{count}]", keys


def _edge_functions(panel: str, title: str) -> list[str]:
    """The function column of a panel's "called by" or "calls" table, as the user reads it."""
    m = re.search(rf'>{title}</div><div style="margin-bottom:8px">(<table.*?</table>)', panel, re.S)
    assert m is not None, title
    rows = re.findall(r"<tr>(.*?)</tr>", m.group(1).split("<tbody>", 1)[1], re.S)
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)[-1])) for tr in rows]


def test_a_cell_function_called_only_by_the_cell_says_cprofile_does_not_see_the_cell(shell):
    """``middle`` is called only by the cell's top-level code, which cProfile records as no function:
    its "called by" says so, naming the profiler as Python spells its module (``cProfile``)."""
    panels, _, keys = _callgraph_panels(shell, "cg64_cell")
    assert set(panels) == {"leaf", "middle"}
    assert shell.user_ns["cg64_cell"].pstats.stats[keys["middle"]][4] == {}  # pstats: no caller recorded
    text = htmllib.unescape(re.sub(r"<[^>]+>", "", panels["middle"]))
    assert (f"called by: the cell's own top-level code ({cProfile.__name__} does not see the cell as a function)"
            in text)


def test_the_edges_name_a_cells_functions_by_the_cell_on_both_sides(shell):
    """The edge middle -> leaf (a list comprehension's frame between them before Python 3.12):
    leaf's "called by" and middle's "calls" name the cell's function "In [n]:line(function)", the
    line pstats recorded, as the panels' own heads do, never the cell's file name."""
    panels, cell, keys = _callgraph_panels(shell, "cg64_edges")
    stats = shell.user_ns["cg64_edges"].pstats.stats
    callers_of_leaf = list(stats[keys["leaf"]][4])
    want = sorted(f"{cell}:{k[1]}({k[2]})" for k in callers_of_leaf)
    assert want and all(k[0] == keys["leaf"][0] for k in callers_of_leaf)  # all in the cell: middle or its listcomp
    assert sorted(_edge_functions(panels["leaf"], "called by")) == want
    callees = [k for k, v in stats.items() if keys["middle"] in v[4]]
    assert [k[0] for k in callees] == [keys["middle"][0]]  # one callee, in the cell: leaf or the listcomp
    assert _edge_functions(panels["middle"], "calls") == [f"{cell}:{callees[0][1]}({callees[0][2]})"]
    assert not any("ipython-input" in f or "ipykernel" in f
                   for f in _edge_functions(panels["leaf"], "called by") + _edge_functions(panels["middle"], "calls"))


def _dt_tables(markup: str) -> list[dict]:
    """Each interactive table of ``markup`` as DataTables gets it: headers, rows, paging."""
    out = []
    for m in re.finditer(r"let dt_args = ", markup):
        args, _ = json.JSONDecoder().raw_decode(markup[m.end():])
        heads = [htmllib.unescape(h) for h in re.findall(r"<th>(.*?)</th>", args["table_html"])]
        out.append({"headers": heads, "rows": json.loads(args["data_json"]), "page": args.get("pageLength"),
                    "paging": args.get("paging")})
    return out


def test_the_memory_per_step_table_of_twelve_steps_pages_by_ten(tmp_path):
    """Twelve ProfilerStep ranges, each keeping 8 KiB: the Memory tab's per-step table holds the
    twelve steps and shows ten a page (as the tab's other block tables), its preview the first ten."""
    from nbprof.views.tabs.memory import MEMORY

    from .test_boundaries import _growth_trace

    p = _growth_trace([8192] * 12).load(tmp_path)
    html = MEMORY.render(p.report(limit=0))
    [table] = [t for t in _dt_tables(html) if t["headers"][:1] == ["Step"]]
    assert [row[0] for row in table["rows"]] == list(range(12))
    assert table["page"] == 10 and table["paging"] is None
    # the static preview (what shows before the table's script runs): the first page, steps 0 to 9
    preview = re.search(r'<table class="nbprof-static".*?</table>', html[html.index("Memory per step"):], re.S).group(0)
    firsts = [re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)[0])
              for tr in re.findall(r"<tr>(.*?)</tr>", preview.split("<tbody>", 1)[1], re.S)]
    assert firsts == [str(k) for k in range(10)]


def test_a_one_byte_segment_in_use_is_a_full_bar(tmp_path):
    """A snapshot (torch's format, by hand) whose only segment is one byte, requested and in use:
    the biggest segment is that byte, so its requested piece spans the whole plot (760 - 150 - 16
    px), not half of it."""
    from nbprof.views.tabs.snapshot import segments_svg

    snap = {"segments": [segment(0x7F00_0000_0000, 1, [block(0x7F00_0000_0000, 1, 1, "active_allocated")])],
            "device_traces": []}
    p = nbprof.load_snapshot(write(snap, tmp_path / "one.pickle"))
    assert p.segments()["total_size_bytes"].tolist() == [1]
    root = ET.fromstring(segments_svg(p.segments()))
    rects = [(float(r.get("x")), float(r.get("width")), r.get("fill")) for r in root.iter(NS + "rect")]
    assert rects == [(150.0, 760 - 150 - 16, "#4e79a7")]


def test_each_counter_track_is_on_the_plotly_axis_its_lines_are_drawn_on():
    """The recorded cnn_train_cuda trace (CUDA kernels, --memory): a GPU-busy track and a
    memory track, each on an axis of its own; each track's axis is the one its lines are drawn on,
    an axis id plotly accepts."""
    import plotly.graph_objects as go

    from nbprof.views.timeline import counter_tracks, prepare_timeline

    from .conftest import trace_path

    tracks = counter_tracks(prepare_timeline(nbprof.load_trace(trace_path("cnn_train_cuda"))))
    assert [t["name"] for t in tracks] == ["gpu_busy", "memory"]
    assert len({t["axis"] for t in tracks}) == 2
    for track in tracks:
        assert {tr["yaxis"] for tr in track["traces"]} == {track["axis"]}, track["name"]
        assert go.Scatter(yaxis=track["axis"]).yaxis == track["axis"]
