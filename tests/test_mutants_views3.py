"""The views' HTML read back as a user (or the browser's table) reads it, and the folder's pool and
timeline as a caller uses them, pinned where seed 52's fresh mutation sample (issue 38) found them
loose: the Functions tab's ncalls sorted by the total calls (its render function run by node), the
Callers & callees tab's cell names on both sides, the Flame tab's drawing, the Actions tab's
indented functions, the Ranks tab's and the comparisons' column titles, the live timeline's answers
to each browser message, a dead worker's error, a folder timeline's mime bundle. Expected values
come from pstats, the raw trace files, the messages the test sends, or are worked out by hand."""

from __future__ import annotations

import base64
import gzip
import html as htmllib
import json
import pstats
import re
import shutil
import subprocess

import numpy as np
import pytest

import nbprof

from .conftest import run, trace_path


def dt_tables(markup: str) -> list[dict]:
    """Each interactive table of ``markup`` as the browser's DataTables gets it: its headers (as
    the user reads them), its rows (data_json) and each column's render function (JavaScript)."""
    out = []
    for m in re.finditer(r"let dt_args = ", markup):
        args, _ = json.JSONDecoder().raw_decode(markup[m.end():])
        heads = [htmllib.unescape(h) for h in re.findall(r"<th>(.*?)</th>", args["table_html"])]
        renders = {d["targets"][0]: d["render"] for d in args["columnDefs"]}
        out.append({"headers": heads, "rows": json.loads(args["data_json"]), "renders": renders,
                    "order": args.get("order")})
    return out


def panels(markup: str) -> dict[str, str]:
    """A report's tab panels by their tab's label."""
    labels = [htmllib.unescape(x) for x in re.findall(r"<label[^>]*><b>(.*?)</b></label>", markup)]
    if not labels:
        labels = [htmllib.unescape(x) for x in re.findall(r'<label for="nbprof-\d+-\d+"[^>]*>(.*?)</label>', markup)]
    parts = markup.split('class="nbprof-panel nbprof-panel-')[1:]
    assert len(parts) == len(labels), (labels, len(parts))
    return dict(zip(labels, parts))


def sort_keys(render_js: str, values: list) -> list:
    """What DataTables sorts by: the column's render function called with type 'sort' (node)."""
    script = (f"var f = {render_js}; var v = {json.dumps(values)};"
              "process.stdout.write(JSON.stringify(v.map(function (d) { return f(d, 'sort'); })));")
    return json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60,
                                     check=True).stdout)


needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def raw_events(name: str) -> list[dict]:
    with gzip.open(trace_path(name)) as f:
        return json.load(f)["traceEvents"]


# ------------------------------------------------------------------ a cProfile report's tabs

CELL = """def leaf(n):
    return sum(range(n))

def middle(n):
    return [leaf(n) for _ in range(3)]

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def nine():
    pass

def ten():
    pass

middle(10)
fib(12)
for _ in range(9):
    nine()
for _ in range(10):
    ten()
"""


@pytest.fixture(scope="module")
def cell_profile(ip):
    """%%cprofile of CELL in a real IPython shell: its functions are named by the cell ("In [n]")."""
    count = ip.execution_count
    result, _ = run(ip, "%%cprofile -q -o cell_cp\n" + CELL)
    assert result.error_in_exec is None
    return ip.user_ns["cell_cp"], f"In [{count}]"


def line_of(text: str) -> int:
    """The line of ``text`` as the cell numbers it: the ``%%cprofile`` line is its line 1."""
    return CELL.splitlines().index(text) + 2


def pstats_ncalls(nc: int, cc: int) -> str:
    """pstats.print_stats' ncalls column: "465/1" where a function recursed."""
    return f"{nc:,}" if nc == cc else f"{nc:,}/{cc:,}"


@needs_node
def test_the_functions_tab_sorts_ncalls_by_the_total_calls_in_the_browser(cell_profile):
    """The Functions tab's table: pstats' columns; ncalls shown as pstats prints it ("465/1") and
    sorted by the total calls, as pstats' numbers order them (as text "9" would sort after "10"
    and "465/1"); every row's ncalls is pstats' own."""
    p, cell = cell_profile
    st = pstats.Stats(p.profiler)
    [table] = dt_tables(panels(p.report(limit=0).html(include_library=False))["Functions"])
    assert table["headers"] == ["ncalls", "tottime", "tottime %", "percall", "cumtime", "percall",
                                "filename:lineno(function)"]
    assert table["order"] == [[1, "desc"]]  # by tottime, as the report sorts
    for fn, line in (("fib", "def fib(n):"), ("nine", "def nine():"), ("ten", "def ten():"),
                     ("leaf", "def leaf(n):"), ("middle", "def middle(n):")):
        [row] = [r for r in table["rows"] if r[-1].endswith(f"({fn})")]
        [(cc, nc, *_)] = [v for k, v in st.stats.items() if k[2] == fn and k[1] == line_of(line)]
        assert row[0] == pstats_ncalls(nc, cc), fn
    texts = [row[0] for row in table["rows"]]
    assert {"465/1", "9", "10", "3"} <= set(texts)
    keys = sort_keys(table["renders"][0], texts)
    assert keys == [int(t.split("/")[0].replace(",", "")) for t in texts]  # numbers: 9 < 10 < 465


def _static_rows(table_html: str) -> list[list[str]]:
    """A static table's cells as the user reads them."""
    return [[htmllib.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", table_html.split("<tbody>", 1)[1], re.S)]


def test_the_callers_and_callees_tab_names_cell_functions_on_both_sides(cell_profile):
    """Each function's panel: its callers ("called by") and callees ("calls") with pstats' numbers
    for each edge (print_callers / print_callees), every function of the cell named "In [n]:line"
    as the cell's own lines number it, on both sides."""
    p, cell = cell_profile
    st = pstats.Stats(p.profiler)
    st.calc_callees()
    tab = panels(p.report(limit=0).html(include_library=False))["Callers & callees"]
    cell_file = next(k[0] for k in st.stats if k[2] == "middle")
    # pstats' view without nbprof's own frames (as result.stats leaves them out: test_cprofile.py)
    ours = {k for k in st.stats if "nbprof" not in k[0] and not k[2].startswith("<method 'disable'")}

    def label(key):
        f, line, fn = key
        if f == "~":
            return "{%s}" % fn[1:-1] if fn.startswith("<") else fn
        assert f == cell_file, key  # only the cell's functions and builtins here
        return f"{cell}:{line}({fn})"

    found = 0
    for panel in re.split(r'<div class="nbprof-cg" data-i="\d+">', tab)[1:]:
        head = htmllib.unescape(re.search(r"<b>(.*?)</b>", panel).group(1))
        [key] = [k for k in ours if label(k) == head]
        sides = {}
        for title in ("called by", "calls"):
            m = re.search(rf'>{title}</div><div style="margin-bottom:8px">(<table.*?</table>)', panel, re.S)
            sides[title] = {} if m is None else {r[3]: (r[0]) for r in _static_rows(m.group(1))}
        # an edge is (ncalls, primitive calls, tottime, cumtime), as test_cprofile.py reads it
        callers = {label(k): pstats_ncalls(v[0], v[1]) for k, v in st.stats[key][4].items() if k in ours}
        callees = {label(k): pstats_ncalls(v[0], v[1]) for k, v in st.all_callees.get(key, {}).items() if k in ours}
        assert sides == {"called by": callers, "calls": callees}, head
        if not callers:
            assert "the cell's own top-level code" in panel
        if not callees:
            assert "calls: no other function" in panel
        found += 1
    assert found == len(ours)
    # the ones that matter here: middle's callee, fib's recursion on both sides
    assert f"{cell}:{line_of('def leaf(n):')}(leaf)" in tab
    assert found >= 6


def test_the_flame_tab_draws_the_profiles_functions(cell_profile):
    """The Flame tab: an SVG overview whose boxes are the profile's functions (pstats' names; the
    small ones may be grouped as "other"), not a message that it could not be drawn."""
    p, cell = cell_profile
    st = pstats.Stats(p.profiler)
    labels = {f"{cell}:{line}({fn})" if f.startswith("<ipython-input") else "{%s}" % fn[1:-1]
              for f, line, fn in st.stats if f.startswith("<ipython-input") or f == "~"}
    tab = panels(p.report(limit=0).html(include_library=False))["Flame"]
    assert "could not be drawn" not in tab
    [svg] = re.findall(r"<svg.*?</svg>", tab, re.S)
    heads = [htmllib.unescape(t).splitlines()[0] for t in re.findall(r"<title>(.*?)</title>", svg, re.S)]
    # fib takes nearly all the time (465 calls): its box is drawn whatever the machine's timings
    assert f"{cell}:{line_of('def fib(n):')}(fib)" in heads
    for head in heads:
        if "/mutmut/" in head:  # under mutmut: its trampolines around nbprof's functions
            continue
        assert head in labels or re.fullmatch(r"other \(\d+ functions\)", head) or "profiled functions" in head, head
    assert "zoomable flame view is shown under this report" in tab


# ------------------------------------------------------------------ column titles as the user reads them
# DESIGN.md does not name the tables' visible titles; these are pinned as the rendered HTML (and
# the text table, where there is one) shows them: a title is what tells the reader what a column
# holds, so a changed title is a changed view, to be made on purpose (and the text and the HTML
# titles are one list: a title changed in one place changes both).


def test_the_ranks_tabs_differences_table_titles_and_values(tmp_path):
    """Two ranks (tests/synthetic.collectives_folder): gemm 100 µs on rank 0, 550 µs on rank 1; the
    all-reduce 500 and 50 µs; one call of each per rank. The differences table as the user reads
    it: its titles, and each row's numbers in the columns those titles name."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile
    from nbprof.views.tabs.ranks import render

    from .synthetic import collectives_folder

    d = collectives_folder(tmp_path / "ranks")
    p = TorchProfile.from_trace(concat_traces([read_trace_file(d / "a.json"), read_trace_file(d / "b.json")],
                                              labels=[0, 1], label_column="rank"))
    tables = dt_tables(render(p.report(limit=0)))
    [diff] = [t for t in tables if t["headers"][0] == "Name"]
    assert diff["headers"] == ["Name", "Kind", "Calls (min)", "Calls (max)", "Time (min rank)", "Time (max rank)",
                               "Spread", "Slowest rank"]
    # biggest spread first: both by 450 µs, the gemm's over a 325 µs mean, the all-reduce's over 275
    assert diff["rows"] == [
        ["gemm", "kernel", 1, 1, 100.0, 550.0, 450 / 325, "1"],
        ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", 1, 1, 50.0, 500.0, 450 / 275, "0"]]  # the rank as text
    [ranks] = [t for t in tables if t["headers"][0] == "Rank" and "Span" in t["headers"]]
    assert ranks["headers"] == ["Rank", "Span", "Self CPU", "Ops", "Device time", "Kernels", "GPU busy", "Compute",
                                "Communication", "Comm. overlapped", "GPU idle"]


@pytest.fixture(scope="module")
def two_torch():
    return nbprof.load_trace(trace_path("cnn_train_cuda")), nbprof.load_trace(trace_path("cnn_cuda_toggled"))


def _titles(c) -> tuple[list[str], list[str]]:
    """The comparison's titles in its HTML table and in its text table (split at two spaces)."""
    [table] = dt_tables(c.html(include_library=False))
    lines = c.text().splitlines()
    ruler = next(i for i, line in enumerate(lines) if line.startswith("---"))
    return table["headers"], re.split(r"\s{2,}", lines[ruler + 1].strip())


@pytest.mark.parametrize("by, titles", [
    ("op", ["Name", "self CUDA before", "self CUDA after", "Change", "Speed-up", "Calls before", "Calls after"]),
    ("kernel", ["Kernel", "Kind", "CUDA total before", "CUDA total after", "Change", "Speed-up", "Calls before",
                "Calls after", "GPU time % before", "GPU time % after"]),
    ("range", ["Range", "total before", "total after", "Change", "Speed-up", "Calls before", "Calls after",
               "Span % before", "Span % after"]),
    # torch's name for its operator library: "ATen"
    ("compiled", ["ATen op", "time before", "time after", "Change", "Speed-up", "Calls before", "Calls after",
                  "Compiled from"]),
])
def test_comparison_titles_in_the_html_and_the_text(two_torch, by, titles):
    html_titles, text_titles = _titles(nbprof.compare(*two_torch, by=by))
    assert html_titles == titles + ["Status"]  # the HTML adds the status, to filter by
    assert text_titles == titles


def test_cprofile_comparison_titles(cell_profile):
    from nbprof.model import PythonProfile

    p, _ = cell_profile
    c = nbprof.compare(p, PythonProfile(dict(p.pstats.stats), p.meta))
    html_titles, text_titles = _titles(c)
    titles = ["Function", "tottime before", "tottime after", "Change", "Speed-up", "Calls before", "Calls after"]
    assert html_titles == titles + ["Status"] and text_titles == titles


# ------------------------------------------------------------------ the Actions tab


def _raw(*rows):
    """cProfile's raw dict from (file, line, function, primitive calls, calls, tottime, cumtime)."""
    return {(f, line, fn): (pc, nc, tt, ct, {}) for f, line, fn, pc, nc, tt, ct in rows}


def test_the_actions_tab_lists_each_action_then_its_top_functions_indented():
    """Actions by own time, each followed by its functions by own time (at most TOP_FUNCTIONS, only
    under the actions with at least FUNCTIONS_FROM_SHARE of the total), one em space in: worked
    out by hand from the per-action stats given."""
    from nbprof.model import PythonProfile
    from nbprof.views.tabs.actions import TOP_FUNCTIONS, rows

    assert TOP_FUNCTIONS == 5
    step = [("/w/model.py", 10 + i, f"f{i}", 2, 2, 0.1 * (i + 1), 0.2 * (i + 1)) for i in range(6)]  # 2.1 s
    by_action = {
        "": _raw(("/w/loop.py", 1, "main", 1, 1, 0.5, 9.0)),
        "training_step": _raw(*step),
        "tiny_hook": _raw(("/w/hook.py", 3, "hook", 1, 1, 0.001, 0.001)),  # 0.001 of 2.601 s: under 0.5 %
    }
    p = PythonProfile({k: v for raw in by_action.values() for k, v in raw.items()},
                      by_action=by_action, action_counts={"training_step": 3, "tiny_hook": 4})
    total = 0.5 + 2.1 + 0.001
    r = rows(p)
    assert list(r.columns) == ["name", "depth", "runs", "calls", "tottime_s", "cumtime_s", "share"]
    assert r["name"].tolist() == ["training_step", "/w/model.py:15(f5)", "/w/model.py:14(f4)", "/w/model.py:13(f3)",
                                  "/w/model.py:12(f2)", "/w/model.py:11(f1)",
                                  "(outside every action)", "/w/loop.py:1(main)", "tiny_hook"]
    assert r["depth"].tolist() == [0, 1, 1, 1, 1, 1, 0, 1, 0]
    assert r["runs"].fillna(-1).tolist() == [3, -1, -1, -1, -1, -1, 1, -1, 4]
    assert r["calls"].tolist() == [12, 2, 2, 2, 2, 2, 1, 1, 1]
    np.testing.assert_allclose(r["tottime_s"], [2.1, 0.6, 0.5, 0.4, 0.3, 0.2, 0.5, 0.5, 0.001])
    np.testing.assert_allclose(r["cumtime_s"].fillna(-1), [-1, 1.2, 1.0, 0.8, 0.6, 0.4, -1, 9.0, -1])
    np.testing.assert_allclose(r["share"], r["tottime_s"] / total)
    # the tab: each function one em space in under its action, as the user reads the table
    [table] = dt_tables(panels(p.report().html(include_library=False))["Actions"])
    assert table["headers"] == ["Action › its functions by own time", "Runs", "Calls", "Own time", "Share of total",
                                "cumtime"]
    assert [row[0] for row in table["rows"]][:3] == ["training_step", "\u2003/w/model.py:15(f5)",
                                                     "\u2003/w/model.py:14(f4)"]
    assert [row[0] for row in table["rows"]][6:] == ["(outside every action)", "\u2003/w/loop.py:1(main)", "tiny_hook"]


def test_the_actions_rows_of_actions_without_time():
    """A profile of no time: every action's row, the functions of those with any (0 s is 0.5 % of
    0 s), no share (0 / 0); a profile without actions: no rows, the columns."""
    from nbprof.model import PythonProfile
    from nbprof.views.tabs.actions import rows

    by_action = {"": _raw(("/w/a.py", 1, "a", 1, 1, 0.0, 0.0)), "fit": {}}
    r = rows(PythonProfile(_raw(("/w/a.py", 1, "a", 1, 1, 0.0, 0.0)), by_action=by_action, action_counts={"fit": 2}))
    assert r["name"].tolist() == ["(outside every action)", "/w/a.py:1(a)", "fit"]
    assert r["depth"].tolist() == [0, 1, 0] and r["runs"].fillna(-1).tolist() == [1, -1, 2]
    assert r["calls"].tolist() == [1, 1, 0] and r["share"].isna().all()
    empty = rows(PythonProfile(_raw(("/w/a.py", 1, "a", 1, 1, 0.5, 0.5))))
    assert list(empty.columns) == ["name", "depth", "runs", "calls", "tottime_s", "cumtime_s", "share"]
    assert len(empty) == 0


# ------------------------------------------------------------------ the live timeline's answers

DRAWN_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead", "kernel", "gpu_memcpy",
              "gpu_memset", "gpu_user_annotation")


@pytest.fixture(scope="module")
def streams():
    return nbprof.load_trace(trace_path("two_streams"))


def test_the_live_timeline_answers_each_browser_message(streams):
    """``answer`` turns each message of live_timeline.js (times in ms, as plotly's axis has them)
    into the kernel's reply: the zoomed window is the one the browser sent, with its rectangles;
    a search counts the raw trace's matching events; a selected span starts and ends where it was
    dragged; a hover on a kernel draws the arrow from its launch (the raw trace's correlation)."""
    from nbprof.views.live_timeline import LiveTimelineState, describe
    from nbprof.views.timeline import prepare_timeline

    full = prepare_timeline(streams)
    state = LiveTimelineState(streams, full, python=False, max_rects=20_000, height=None)
    origin = streams.meta.origin_ns / 1000.0
    events = raw_events("two_streams")
    raw = [(e["name"], e["ts"] - origin, e["ts"] - origin + e.get("dur", 0), e.get("args", {}))
           for e in events if e.get("ph") == "X" and e.get("cat") in DRAWN_CATS]
    span = full.t1_us - full.t0_us
    x0_ms, x1_ms = (full.t0_us + 0.1 * span) / 1000, (full.t0_us + 0.9 * span) / 1000
    reply = state.answer({"type": "window", "x0": x0_ms, "x1": x1_ms, "width_px": 800, "seq": 7})
    assert reply["type"] == "spec" and reply["seq"] == 7 and "find" not in reply
    assert reply["spec"]["layout"]["xaxis"]["range"] == [x0_ms, x1_ms]
    assert (state.current.t0_us, state.current.t1_us) == (x0_ms * 1000, x1_ms * 1000)
    inside = [n for n, a, b, _ in raw if b >= x0_ms * 1000 and a <= x1_ms * 1000]
    assert reply["status"] == describe(state.current) and state.current.events_drawn == len(inside) > 3
    # a search: its status, and every later zoom's reply carries it again
    relu = [n for n, *_ in raw if "mm" in n.lower()]
    found = state.answer({"type": "find", "text": " MM ", "seq": 8})
    assert found["type"] == "spec" and found["seq"] == 8 and found["find"].startswith(f"{len(relu):,} events match “MM”")
    again = state.answer({"type": "window", "x0": None, "x1": None, "seq": 9})
    assert state.current is full and again["find"].startswith(f"{len(relu):,} events match")
    assert again["spec"]["layout"]["xaxis"]["range"] == [full.t0_us / 1000, full.t1_us / 1000]
    # a selected span: its head line and its kernels, those of the raw trace in it
    sel = state.answer({"type": "select", "x0": x0_ms, "x1": x1_ms})
    assert sel["type"] == "selection" and sel["selection"]["head"].startswith(f"{x0_ms:.3f} – {x1_ms:.3f} ms")
    work = [(e["name"], e["ts"] - origin, e["ts"] - origin + e["dur"]) for e in events
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    kernels = {n for n, a, b in work if b >= x0_ms * 1000 and a <= x1_ms * 1000}  # the device work
    [table] = [t for t in sel["selection"]["tables"] if t["title"] == "Kernels"]
    assert {row[0] for row in table["rows"]} <= kernels and len(table["rows"]) + table["more"] == len(kernels) > 0
    # a hover on a kernel's rectangle: the arrow from its launch (the runtime call of its correlation)
    launches = {a["correlation"]: s for n, s, _, a in raw if "correlation" in a and n.startswith("cuda")}
    r = full.rects
    rows = sorted(set(r["row"]))
    k = r[r["family"] == "kernel"].iloc[0]
    ev = streams.events.iloc[int(k["event"])]
    hover = state.answer({"type": "hover", "trace": rows.index(k["row"]), "x": (k["x0_us"] + k["x1_us"]) / 2000})
    assert hover["type"] == "flow"
    assert hover["flow"]["x1"] == pytest.approx(ev["start_us"] / 1000)
    assert hover["flow"]["x0"] == pytest.approx(launches[ev["correlation"]] / 1000, abs=1e-6)
    assert state.answer({"type": "no such message"}) is None
    # plotly.js, sent once per page: the installed package's, gzipped
    import plotly.offline

    source = state.answer({"type": "plotly"})
    assert source["type"] == "plotly"
    assert len(relu) > 0 and gzip.decompress(base64.b64decode(source["source"])).decode() == plotly.offline.get_plotlyjs()


# ------------------------------------------------------------------ a folder's pool and timeline


@pytest.mark.slow  # spawns a worker process: ~1.5-4 s here
def test_a_pool_worker_that_dies_names_how_and_the_job_it_had_started():
    """A worker process that exits in the middle of a job (``os._exit(3)``: no Python error, the
    pool only sees it gone): the caller's one-line error gets the Death, read from the process's
    exit code and from what the worker said as it started the job; the workers are ended."""
    import os

    from nbprof.cluster.workers import RankPool
    from nbprof.errors import TraceError

    deaths = []

    def died(death, left):
        deaths.append((death, left))
        return "a worker died"

    pool = RankPool(1, idle_s=None)
    try:
        with pytest.raises(TraceError, match="^a worker died$"):
            list(pool.as_completed(os._exit, [(3,)], died=died))
        [(death, left)] = deaths
        assert (death.code, death.how, death.out_of_memory, death.job, death.workers, left) == (
            3, "exited with code 3", False, 0, 1, 1)
        assert not pool.running
    finally:
        pool.close()


def test_a_folder_timelines_view_gives_the_mime_types_asked_for(tmp_path):
    """A folder's timeline as a cell's value (no kernel here: the figure): the three mime types, its
    line counting the raw files' drawn events; ``include`` / ``exclude`` as IPython passes them
    (IPython filters again; another front end calling the method may not)."""
    from nbprof.views.figure import PLOTLY_MIME

    from .synthetic import collectives_folder

    folder = collectives_folder(tmp_path / "coll")
    drawn = 0
    for f in folder.iterdir():
        drawn += sum(e.get("ph") == "X" and e.get("cat") in DRAWN_CATS for e in json.loads(f.read_text())["traceEvents"])
    view = nbprof.load_trace(folder, workers=0, progress=False).timeline_view()
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {PLOTLY_MIME, "text/plain", "text/html"}
    assert bundle["text/plain"].startswith("Timeline: ") and f"{drawn} events" in bundle["text/plain"]
    assert view._repr_mimebundle_(include={"text/plain"}) == {"text/plain": bundle["text/plain"]}
    assert set(view._repr_mimebundle_(exclude={"text/html"})) == {PLOTLY_MIME, "text/plain"}
