"""A folder's report has every view its ranks have (issue 33, item 2): By input shape, By stack,
Memory, Modules and Ranges besides Operators, Kernels and Steps, summed over the ranks (each
rank's, for memory) from what the workers sent, the notebook process holding no rank's events.

The folders: ``tests/data/cluster_views`` (tests/cluster_workload.py, a two-process DDP run on the
CPU recorded with shapes, stacks, memory, ranges and steps, and torch's own ``key_averages()`` of
each rank), and the same run where rank 1 recorded no memory (``partial/``). The oracles: each
rank's file loaded alone with ``load_trace`` (its own tables, added up here), torch's answers,
the raw JSON's events, and the old path (every rank's events merged into one table)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.cluster import ClusterProfile

from .conftest import DATA
from .synthetic import Trace

VIEWS = DATA / "cluster_views"
FOLDERS = {"ranks": VIEWS / "ranks", "partial": VIEWS / "partial"}
NEW_TABS = ("By input shape", "By stack", "Memory", "Modules", "Ranges")


@pytest.fixture(scope="module")
def loaded():
    """Each folder as a ClusterProfile (read in this process) and each of its ranks alone."""
    out = {}
    for name, folder in FOLDERS.items():
        p = nbprof.load_trace(folder, workers=0, progress=False)
        alone = {}
        for f in sorted(folder.iterdir()):
            one = nbprof.load_trace(f)
            alone[one.meta.rank] = one
        out[name] = (p, alone)
    return out


def merged(name: str):
    """The old path: every rank's events merged into one profile (a profile of its own, so that the
    fixture's profiles keep holding none)."""
    return nbprof.load_trace(FOLDERS[name], workers=0, progress=False)._merged


def titles(p) -> list[str]:
    return [t.title for t in p.report().tabs if t.shown(p)]


def no_events_here(p: ClusterProfile) -> None:
    """What the report needs came from the summaries: no rank's events merged into this process."""
    assert "_merged" not in p.__dict__ and "_events" not in p.__dict__


def strip_ids(html: str) -> str:
    """A panel's HTML without the numbers that differ between two drawings of the same table."""
    return re.sub(r"itables_[0-9a-f_]+", "ID", html)


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_the_tabs_of_a_folder_are_every_tab_its_ranks_have(loaded, name):
    p, alone = loaded[name]
    union: set[str] = set()
    for one in alone.values():
        union |= set(titles(one))
    assert set(NEW_TABS) <= union  # the recorded ranks have every view
    got = titles(p)
    assert got[0] == "Ranks" and set(got) == union | {"Ranks"}
    # in a rank's own order, the Ranks tab first
    order = [t for t in titles(alone[0]) + titles(alone[1]) if t in union]
    assert got[1:] == list(dict.fromkeys(order))
    html = p.report().html(include_library=False)
    for title in NEW_TABS:
        assert f">{title}</label>" in html
    # it opens on the Ranks tab, or on the grouping asked for
    for group_by, title in ((None, "Ranks"), ("shape", "By input shape"), ("stack", "By stack")):
        html = p.report(group_by=group_by).html(include_library=False)
        checked = re.search(r'<input type="radio"[^>]* id="nbprof-\d+-(\d+)" checked', html)
        assert checked and got[int(checked.group(1))] == title
    no_events_here(p)


def summed(frames: list[pd.DataFrame], keys: list[str], columns: list[str]) -> dict:
    """Per key, the sum of ``columns`` over the frames (each rank's own table): plain loops."""
    out: dict = defaultdict(lambda: dict.fromkeys(columns, 0.0))
    for f in frames:
        for r in f.to_dict("records"):
            acc = out[tuple(str(r[k]) for k in keys)]
            for c in columns:
                acc[c] += r[c]
    return out


def assert_sums(ours: pd.DataFrame, want: dict, keys: list[str], columns: list[str]) -> None:
    got = {tuple(str(r[k]) for k in keys): r for r in ours.to_dict("records")}
    assert set(got) == set(want)
    for key, row in want.items():
        for c in columns:
            assert got[key][c] == pytest.approx(row[c], rel=1e-9, abs=1e-6), (key, c)


KEY_SUMS = ["count", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "self_cpu_mem_bytes",
            "cpu_mem_bytes", "flops"]


@pytest.mark.parametrize("name", sorted(FOLDERS))
@pytest.mark.parametrize("group_by", ["op", "shape", "stack"])
def test_grouped_operators_are_the_sum_of_each_rank_alone(loaded, name, group_by):
    p, alone = loaded[name]
    keys = ["name", *{"shape": ["input_shapes"], "stack": ["stack"]}.get(group_by, []), "kind"]
    want = summed([one.key_averages(group_by) for one in alone.values()], keys, KEY_SUMS)
    ours = p.key_averages(group_by)
    assert_sums(ours, want, keys, KEY_SUMS)
    assert len(ours) > 30
    with np.errstate(invalid="ignore"):
        assert np.allclose(ours["cpu_avg_us"], ours["cpu_total_us"] / ours["count"], equal_nan=True)
    # each rank's own table, a rank column first
    per = p.key_averages(group_by, per_rank=True)
    assert per.columns[0] == "rank" and sorted(per["rank"].unique()) == sorted(alone)
    for r, one in alone.items():
        mine = per[per["rank"] == r].drop(columns="rank").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, one.key_averages(group_by).reset_index(drop=True), check_dtype=False)
    no_events_here(p)


def test_operators_equal_torchs_own_key_averages_summed(loaded):
    """torch's key_averages() of each rank's live profile (recorded with the traces), added up."""
    p, _ = loaded["ranks"]
    for group_by, field in (("op", "rows"), ("shape", "rows_by_input_shape")):
        theirs: dict = defaultdict(lambda: defaultdict(float))
        for r in (0, 1):
            with gzip.open(VIEWS / "oracle" / f"rank{r}.json.gz", "rt") as f:
                rows = json.load(f)[field]
            for row in rows:
                key = (row["key"],) + ((row["input_shapes"],) if group_by == "shape" else ())
                for c in ("count", "self_cpu_time_total", "cpu_time_total", "cpu_memory_usage", "self_cpu_memory_usage"):
                    theirs[key][c] += row[c]
        ours = p.key_averages(group_by)
        # the operators: torch's self times of ranges here subtract the Python frames under them
        # (train_step's self CPU time is -284 µs on rank 0), a matter of one rank alone, not of the sum
        ours = ours[ours["kind"] == "op"]
        compared = 0
        for row in ours.to_dict("records"):
            key = (row["name"],) + ((str(row["input_shapes"]),) if group_by == "shape" else ())
            if key not in theirs:
                continue
            t = theirs[key]
            assert row["count"] == t["count"], key
            assert row["self_cpu_us"] == pytest.approx(t["self_cpu_time_total"], abs=0.02), key
            assert row["cpu_total_us"] == pytest.approx(t["cpu_time_total"], abs=0.02), key
            assert row["cpu_mem_bytes"] == t["cpu_memory_usage"], key
            assert row["self_cpu_mem_bytes"] == t["self_cpu_memory_usage"], key
            compared += 1
        assert compared >= 40, group_by


RANGE_SUMS = ["count", "total_us", "device_us", "kernels", "gpu_span_us"]
MODULE_SUMS = ["calls", "cpu_total_us", "self_cpu_us", "device_total_us", "self_device_us"]


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_ranges_are_the_sum_of_each_rank_alone(loaded, name):
    p, alone = loaded[name]
    tables = [one.ranges() for one in alone.values()]
    ours = p.ranges()
    assert len(ours) >= 8
    assert_sums(ours, summed(tables, ["path"], RANGE_SUMS), ["path"], RANGE_SUMS)
    # min and max over every instance; shares of the ranks' spans summed (each rank's span: its
    # total over its own share)
    spans = [float((t["total_us"] / t["share_of_span"]).iloc[0]) for t in tables]
    for row in ours.to_dict("records"):
        rows = [t[t["path"] == row["path"]] for t in tables]
        assert row["min_us"] == min(float(r["min_us"].iloc[0]) for r in rows if len(r))
        assert row["max_us"] == max(float(r["max_us"].iloc[0]) for r in rows if len(r))
        assert row["mean_us"] == pytest.approx(row["total_us"] / row["count"])
        assert row["share_of_span"] == pytest.approx(row["total_us"] / sum(spans), rel=1e-9)
    # the raw JSON: each label's instances, on every rank ("ProfilerStep#N" as one label)
    label_us: dict = defaultdict(float)
    for f in sorted(FOLDERS[name].iterdir()):
        with gzip.open(f, "rt") as fh:
            for e in json.load(fh)["traceEvents"]:
                if e.get("cat") == "user_annotation" and e.get("ph") == "X":
                    label_us[re.sub(r"#\d+$", "*", e["name"]) if e["name"].startswith("ProfilerStep#") else e["name"]] += e["dur"]
    by_label = ours.groupby("label")["total_us"].sum()
    for label, us in label_us.items():
        assert by_label[label] == pytest.approx(us, abs=1e-3), label
    # the operators under each range, summed too; and its order is the merged events' own
    ops = [one.range_ops() for one in alone.values()]
    cols = ["count", "self_cpu_us", "self_device_us"]
    assert_sums(p.range_ops(), summed(ops, ["path", "name"], cols), ["path", "name"], cols)
    pd.testing.assert_frame_equal(ours, merged(name).ranges(), check_dtype=False, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_modules_are_the_sum_of_each_rank_alone(loaded, name):
    p, alone = loaded[name]
    ours = p.modules()
    assert len(ours) >= 6 and ours["module"].iloc[0] == "DistributedDataParallel_0"
    assert_sums(ours, summed([one.modules() for one in alone.values()], ["module"], MODULE_SUMS), ["module"],
                MODULE_SUMS)
    per = p.modules(per_rank=True)
    assert per.columns[0] == "rank" and set(per["rank"]) == set(alone)
    pd.testing.assert_frame_equal(ours, merged(name).modules(), check_dtype=False, rtol=1e-9, atol=1e-6)


LINE_KEYS = ["cell", "file", "line", "function", "function_line", "source"]
LINE_SUMS = ["ops", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "alloc_bytes"]


def raw_top_ops(path: Path, frame: str) -> int:
    """The top-level operator calls made in the user frame ``frame`` ("cluster_workload.py(49):
    forward"), counted on the raw JSON: the ``cpu_op`` events inside each of its
    ``python_function`` events (same thread) that no other such ``cpu_op`` contains."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    n = 0
    for fr in (e for e in events if e.get("cat") == "python_function" and e["name"] == frame):
        inside = [e for e in events if e.get("cat") == "cpu_op" and (e["pid"], e["tid"]) == (fr["pid"], fr["tid"])
                  and fr["ts"] <= e["ts"] and e["ts"] + e["dur"] <= fr["ts"] + fr["dur"]]
        n += sum(not any(o is not e and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in inside)
                 for e in inside)
    return n


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_lines_are_the_sum_of_each_rank_alone(loaded, name):
    """The Source tab's table (issue 33 item 2, issue 34): each rank's ``lines()`` (its with_stack
    frames) computed in its summary, summed per line here; the oracles are each rank loaded alone
    and the raw JSON's Python frames."""
    p, alone = loaded[name]
    ours = p.lines()
    one = next(iter(alone.values())).lines()
    assert list(ours.columns) == list(one.columns) and ours.dtypes.to_dict() == one.dtypes.to_dict()
    assert ours.attrs["method"] == "function_entries" and ours.attrs["notes"] == one.attrs["notes"]
    assert_sums(ours, summed([o.lines() for o in alone.values()], LINE_KEYS, LINE_SUMS), LINE_KEYS, LINE_SUMS)
    # one "(outside your code)" row, last; each self column still sums to every rank's total
    assert (ours["function"] == "(outside your code)").sum() == 1 and ours["file"].iloc[-1] is None
    assert ours["self_cpu_us"].sum() == pytest.approx(sum(o.summary.self_cpu_us for o in alone.values()), rel=1e-9)
    forward = ours[(ours["function"] == "forward") & (ours["line"] == 49)]
    assert len(forward) == 1
    frame = "cluster_workload.py(49): forward"
    assert forward["ops"].iloc[0] == sum(raw_top_ops(f, frame) for f in FOLDERS[name].iterdir()) == 12
    per = p.lines(per_rank=True)
    assert per.columns[0] == "rank" and sorted(set(per["rank"])) == sorted(alone)
    html = p.report().html(include_library=False)
    assert ">Source</label>" in html and "cluster_workload.py:49" in html
    # the tab's table says how the ranks differ on a line (their self CPU differs: each rank's own)
    from nbprof.views.tabs import CLUSTER_TABS

    tab = next(t for t in CLUSTER_TABS if t.title == "Source")
    panel = tab.html(p.report())
    own = {r: float(o.lines().set_index(["function", "line"])["self_cpu_us"][("main", 91)]) for r, o in alone.items()}
    assert own[0] != own[1] and "Self CPU, most rank" in panel and "Most on rank" in panel
    no_events_here(p)


def test_lines_of_a_folder_where_one_rank_has_none(tmp_path):
    """A rank without Python frames adds no line; a folder where no rank has any says so."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(FOLDERS["ranks"] / "rank0.pt.trace.json.gz", folder / "a.json.gz")
    shutil.copy(sorted((DATA / "ddp_gloo").iterdir())[1], folder / "b.json.gz")
    p = nbprof.load_trace(folder, workers=0, progress=False)
    a = nbprof.load_trace(folder / "a.json.gz").lines()
    assert [s.lines is None for s in p.rank_summaries] == [False, True]
    pd.testing.assert_frame_equal(p.lines(), a)
    assert set(p.lines(per_rank=True)["rank"]) == {p.rank_labels[0]}
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in sorted((DATA / "ddp_gloo").iterdir())[:2]:
        shutil.copy(f, bare / f.name)
    q = nbprof.load_trace(bare, workers=0, progress=False)
    with pytest.raises(nbprof.NbprofError, match="no rank of this folder has lines"):
        q.lines()
    assert "Source" not in titles(q)
    no_events_here(q)


def test_the_spread_columns_say_which_rank_spent_the_most(loaded):
    """Each row's least and most one rank spent and that rank, from each rank's own table."""
    from nbprof.analysis.ranks import rank_spread

    p, alone = loaded["ranks"]
    spread = rank_spread(p.ranges(per_rank=True), ["path"], "total_us", [0, 1]).set_index("path")
    for path, row in spread.iterrows():
        own = {r: float(one.ranges().set_index("path")["total_us"].get(path, 0.0)) for r, one in alone.items()}
        assert row["rank_min_us"] == min(own.values()) and row["rank_max_us"] == max(own.values())
        assert row["max_rank"] == max(own, key=own.get) and row["ranks"] == sum(v > 0 for v in own.values())
    html = p.report(group_by="shape").html(include_library=False)
    assert "Self CPU, most rank" in html and "Most on rank" in html and "Total, most rank" in html


def test_memory_per_rank_is_each_ranks_own_memory_view(loaded):
    from nbprof.analysis.memory import memory_peaks
    from nbprof.views.memory import memory_curve_svg
    from nbprof.views.tabs.memory import memory_html

    p, alone = loaded["ranks"]
    shifts = dict(zip(p.rank_labels, p._shift_us))
    peaks = p.rank_memory().set_index(["rank", "device"])
    for r, m, shift in p._memory_by_rank():
        one = alone[r]
        assert shift == shifts[r]
        assert m is not None and m.peaks == memory_peaks(one._memory_curve)
        # its chart: the same drawing as from every memory event of the rank alone
        ev = one.events
        assert (memory_curve_svg(m.curve, m.end_us, peaks=m.peaks)
                == memory_curve_svg(one._memory_curve, float((ev["start_us"] + ev["dur_us"]).max())))
        assert len(m.curve) <= len(one._memory_curve)
        # its blocks held at each peak
        assert [h.peak for h in m.held] == [h.peak for h in one._memory_summary.held]
        for a, b in zip(m.held, one._memory_summary.held):
            pd.testing.assert_frame_equal(a.blocks, b.blocks)
            assert a.older_bytes == b.older_bytes
        # the rank's panel is the rank alone's Memory tab
        s = p.rank_summaries[p.rank_labels.index(r)]
        assert strip_ids(memory_html(s.summary.has_device, s.key_averages, m)) == strip_ids(
            memory_html(one.summary.has_device, one.key_averages("op"), one._memory_summary))
        for pk in m.peaks:
            row = peaks.loc[(r, pk.device)]
            assert row["peak_allocated_bytes"] == pk.peak_allocated_bytes
            assert row["peak_time_us"] == pytest.approx(pk.peak_time_us + shift)
    # the raw JSON: each rank's peak is the most its allocator held (the totals after each event)
    for f in sorted(FOLDERS["ranks"].iterdir()):
        with gzip.open(f, "rt") as fh:
            doc = json.load(fh)
        top = max(e["args"]["Total Allocated"] for e in doc["traceEvents"] if e.get("ph") == "i"
                  and e.get("name") == "[memory]")
        assert peaks.loc[(doc["distributedInfo"]["rank"], "cpu"), "peak_allocated_bytes"] == top
    html = p.report().html(include_library=False)
    assert ">Every rank</label>" in html and ">Rank 0</label>" in html and ">Rank 1</label>" in html
    assert "rank 1 · cpu: peak" in html
    # the table of every rank's peaks (the Memory tab's first tab), its headers as a reader reads them
    from .test_mutants_views3 import dt_tables

    [first] = [t for t in dt_tables(html) if "Peak allocated" in t["headers"]]
    assert first["headers"] == ["Rank", "Device", "Peak allocated", "At", "In", "Reserved up to"]
    assert sorted((str(row[0]), str(row[1])) for row in first["rows"]) == [("0", "cpu"), ("1", "cpu")]
    no_events_here(p)


def test_a_rank_without_memory_has_its_line_and_the_others_their_views(loaded):
    p, alone = loaded["partial"]
    assert alone[0].collected["memory"] and not alone[1].collected["memory"]
    assert "Memory" in titles(p)
    got = {r: m for r, m, _ in p._memory_by_rank()}
    assert got[1] is None and got[0] is not None
    assert list(p.rank_memory()["rank"]) == [0]
    html = p.report().html(include_library=False)
    assert "Rank 1 recorded no memory: run with --memory." in html
    assert "rank 1 recorded no memory (run with --memory on every rank)" in html
    assert "rank 0 · cpu: peak" in html and "rank 1 · cpu" not in html
    fig = p.memory_curve()
    assert [t["name"] for t in fig.to_dict()["data"]] == ["rank 0 · cpu allocated", "rank 0 · cpu reserved"]
    no_events_here(p)


def test_a_rank_without_shapes_or_stacks_groups_as_its_events_do(tmp_path, loaded):
    """A folder where one rank recorded shapes and stacks and one did not (tutorial 6's DDP rank):
    the grouped tables still equal each rank alone, added up."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(FOLDERS["ranks"] / "rank0.pt.trace.json.gz", folder / "a.json.gz")
    shutil.copy(sorted((DATA / "ddp_gloo").iterdir())[1], folder / "b.json.gz")
    p = nbprof.load_trace(folder, workers=0, progress=False)
    alone = [nbprof.load_trace(f) for f in sorted(folder.iterdir())]
    assert alone[0].collected["shapes"] and not alone[1].collected["shapes"]
    for group_by in ("shape", "stack"):
        keys = ["name", "input_shapes" if group_by == "shape" else "stack", "kind"]
        want = summed([one.key_averages(group_by) for one in alone], keys, KEY_SUMS)
        assert_sums(p.key_averages(group_by), want, keys, KEY_SUMS)
    assert set(titles(p)) == {"Ranks"} | set(titles(alone[0])) | set(titles(alone[1]))
    p.report().html(include_library=False)
    no_events_here(p)


def tables(p) -> dict[str, pd.DataFrame]:
    return {"op": p.key_averages("op"), "shape": p.key_averages("shape"), "stack": p.key_averages("stack"),
            "ranges": p.ranges(), "range_ops": p.range_ops(), "modules": p.modules(), "memory": p.rank_memory(),
            "ranges_per_rank": p.ranges(per_rank=True), "lines": p.lines(), "lines_per_rank": p.lines(per_rank=True)}


@pytest.mark.slow  # spawns worker processes and a Dask LocalCluster: ~20-40 s
def test_workers_and_dask_give_the_same_views(loaded):
    p, _ = loaded["partial"]
    here = tables(p)
    pooled = nbprof.load_trace(FOLDERS["partial"], workers=2, progress=False)
    from .test_cluster import spawned_workers

    assert spawned_workers() == []
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask = nbprof.load_trace(FOLDERS["partial"], client=client, progress=False)
        for other in (pooled, on_dask):
            for key, frame in tables(other).items():
                pd.testing.assert_frame_equal(frame, here[key], check_dtype=False, rtol=1e-9, atol=1e-6, obj=key)
            assert titles(other) == titles(p)
            html = other.report().html(include_library=False)
            assert "Rank 1 recorded no memory" in html and ">By stack</label>" in html
            no_events_here(other)


def busy_memory_rank(rank: int, n: int = 12000) -> Trace:
    """A rank whose allocator moves thousands of times (more points than the chart has pixels),
    on a GPU and the CPU, its most reserved memory where allocated memory is not at its peak."""
    t = Trace(rank=rank)
    t.op("aten::step", 0, 10.0 * n + 10)
    total = {0: 0, -1: 0}
    rng = np.random.default_rng(rank)
    for k in range(n):
        device = 0 if k % 3 else -1
        size = int(rng.integers(1, 64)) << 10
        nbytes = size if total[device] < (1 << 22) and rng.random() < 0.6 else -min(size, total[device])
        total[device] += nbytes
        reserved = (8 << 22) if k == n // 7 else (6 << 22)
        t.memory(5.0 + 10.0 * k, nbytes, total[device], reserved if device == 0 else 0, device=device, addr=k + 1)
    return t


def test_a_busy_allocator_is_sent_as_the_chart_draws_it(tmp_path):
    """The worker sends the points the chart draws, not every memory event, and the peaks of every
    event: the rank's chart and peaks are the same as from its whole curve."""
    from nbprof.analysis.memory import memory_peaks
    from nbprof.views.memory import memory_curve_svg

    folder = tmp_path / "busy"
    folder.mkdir()
    for r in (0, 1):
        busy_memory_rank(r).write(folder / f"r{r}.json")
    p = nbprof.load_trace(folder, workers=0, progress=False)
    for r, m, _ in p._memory_by_rank():
        one = nbprof.load_trace(folder / f"r{r}.json")
        whole = one._memory_curve
        assert len(m.curve) < len(whole) / 2  # reduced
        assert m.peaks == memory_peaks(whole)
        assert max(pk.peak_reserved_bytes for pk in m.peaks) == 8 << 22  # kept, though not a drawn point
        ev = one.events
        assert (memory_curve_svg(m.curve, m.end_us, peaks=m.peaks)
                == memory_curve_svg(whole, float((ev["start_us"] + ev["dur_us"]).max())))
    html = p.report().html(include_library=False)
    assert "rank 1 · cuda:0: peak" in html and "reserved up to 32.00 MiB" in html
    no_events_here(p)


@pytest.mark.browser
def test_the_new_tabs_in_chromium(tmp_path, loaded):
    """The folder's standalone page in headless Chromium: each new tab shows its panel; the Memory
    tab's own tabs switch between every rank's chart and each rank's. Screenshots in tests/artifacts/."""
    lab = pytest.importorskip("tests.lab")
    if not lab.chromium_available():
        pytest.skip("Debian's chromium is not installed")
    p, _ = loaded["partial"]
    page_path = tmp_path / "folder.html"
    p.to_html(page_path)
    artifacts = Path(__file__).parent / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with lab.browser(1400, 1000) as context:
        page = context.new_page()
        page.goto(page_path.as_uri())
        top = page.locator(".nbprof-report > .nbprof-tabs > label")
        assert top.all_inner_texts() == titles(p)
        for title in NEW_TABS:
            top.filter(has_text=title).first.click()
            i = titles(p).index(title)
            panel = page.locator(f".nbprof-report > .nbprof-tabs > .nbprof-panel-{i}")
            assert panel.is_visible() and panel.bounding_box()["height"] > 100, title
            assert page.locator(".nbprof-report > .nbprof-tabs > .nbprof-panel:visible").count() == 1
            page.screenshot(path=str(artifacts / f"cluster-views-{title.replace(' ', '-').lower()}.png"))
            if title == "Ranges":  # each range a row, and the ranks' spread beside the totals
                assert panel.locator("table.dataTable tbody tr").count() == len(p.ranges())
                assert "Total, most rank" in panel.inner_text()
        # the Memory tab's own tabs: every rank's chart, then rank 0's own tab, then rank 1's line
        top.filter(has_text="Memory").first.click()
        memory = page.locator(f".nbprof-panel-{titles(p).index('Memory')}")
        sub = memory.locator(".nbprof-tabs > label")
        assert sub.all_inner_texts() == ["Every rank", "Rank 0", "Rank 1"]
        shown = memory.locator(".nbprof-tabs > .nbprof-panel:visible")
        assert shown.count() == 1 and "rank 0 · cpu: peak" in shown.locator("svg").first.inner_html()
        sub.nth(1).click()
        assert shown.count() == 1 and "Held on cpu at its peak" in shown.inner_text()
        assert shown.locator("svg").first.is_visible()
        page.screenshot(path=str(artifacts / "cluster-views-memory-rank0.png"))
        sub.nth(2).click()
        assert shown.count() == 1 and shown.inner_text().strip() == "Rank 1 recorded no memory: run with --memory."
