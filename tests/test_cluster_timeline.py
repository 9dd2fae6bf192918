"""A folder of ranks' timeline (``nbprof.cluster.timeline``): every rank's lanes and events on one
clock, a window read again from each rank, the collectives linked across ranks and the last
arrival marked, a selected span per rank, the clock aligned on an event; checked against the raw
JSON of each rank's file, never against nbprof's own tables. The notebook process never merges
the ranks' events for any of it.

Folders: tutorial 6's DDP run (gloo, ``tests/data/ddp_gloo``), the recorded H100 trace twice
(one copy's gemm kernels 3x slower, as tests/test_cluster.py), two constructed NCCL ranks."""

from __future__ import annotations

import gc
import gzip
import json
import os
import shutil
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.errors import OptionError

from .conftest import DATA
from .synthetic import collectives_folder
from .test_cluster import perturbed_docs, spawned_workers, write

# what the timeline draws: CPU events on their threads, device work and GPU annotations on their
# streams (not memory instants, flows, the profiler's span)
DRAWN = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead", "kernel", "gpu_memcpy",
         "gpu_memset", "gpu_user_annotation"}
CPU = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead"}
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}


def ddp(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATA / "ddp_gloo", tmp_path / "ddp"))


def h100(tmp_path: Path) -> Path:
    return write(tmp_path / "h100", perturbed_docs())


def nccl(tmp_path: Path) -> Path:
    return collectives_folder(tmp_path / "coll")


FOLDERS = {"ddp": ddp, "h100": h100, "nccl": nccl}


class Raw:
    """The folder's files as JSON, one per rank (``distributedInfo.rank``), with the common clock's
    zero: the earliest event or profiler span of any rank (µs, as the files write times)."""

    def __init__(self, folder: Path) -> None:
        self.docs: dict[int, dict] = {}
        for f in sorted(folder.iterdir()):
            if f.name.endswith((".json", ".json.gz")):
                with (gzip.open(f) if f.suffix == ".gz" else open(f)) as fh:
                    d = json.load(fh, parse_float=Decimal)  # times exactly as written
                self.docs[d["distributedInfo"]["rank"]] = d
        self.origin_ns = min(ns(e["ts"]) for d in self.docs.values() for e in d["traceEvents"]
                             if e.get("ph") in ("X", "i", "I") and "ts" in e)
        self.origin = self.origin_ns / 1000.0

    def start(self, e: dict) -> float:
        """An event's start on the common clock (µs), exact: the file's µs with 3 decimals as ns."""
        return (ns(e["ts"]) - self.origin_ns) / 1000.0

    def end(self, e: dict) -> float:
        return (ns(e["ts"]) + ns(e.get("dur", 0)) - self.origin_ns) / 1000.0

    def events(self, rank: int, cats: set = DRAWN) -> list[dict]:
        return [e for e in self.docs[rank]["traceEvents"] if e.get("ph") == "X" and e.get("cat") in cats]

    def overlapping(self, rank: int, a: float, b: float, cats: set = DRAWN) -> list[dict]:
        """Events of ``cats`` overlapping [a, b] (µs on the common clock)."""
        return [e for e in self.events(rank, cats) if self.end(e) >= a and self.start(e) <= b]


def ns(us: Decimal | int) -> int:
    """µs as written in a trace (3 decimals), read as a Decimal, to exact ns (a float near 4.5e12
    µs is only exact to ~1 ns)."""
    return int(Decimal(us) * 1000)


def load(folder: Path) -> nbprof.ClusterProfile:
    p = nbprof.load_trace(folder, workers=0, progress=False)
    assert isinstance(p, nbprof.ClusterProfile)
    return p


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_every_rank_has_its_lanes_and_every_event_is_drawn(tmp_path, name):
    folder = FOLDERS[name](tmp_path)
    raw, p = Raw(folder), load(folder)
    data = p.timeline_view().data
    lanes = data.lanes
    counts = data.rects.groupby(data.lanes["rank"].to_numpy()[data.rects["lane"].to_numpy()])["count"].sum()
    for rank in raw.docs:
        labels = set(lanes.loc[lanes["rank"] == rank, "label"])
        threads = {e["tid"] for e in raw.events(rank, CPU) if e.get("cat") != "overhead"}
        streams = {e["args"]["stream"] for e in raw.events(rank, DEVICE)}
        assert {t.split(" (")[0] for t in labels if "CPU thread" in t} == {f"rank {rank} · CPU thread {t}" for t in threads}
        assert {t for t in labels if "stream" in t} == {f"rank {rank} · CUDA 0 stream {s}" for s in streams}
        # every drawn event of the file is in a rectangle of its rank (merged or not)
        assert counts[rank] == len(raw.events(rank)) > 0
    # one clock: the view spans the ranks' first event start to last event end, as the files say
    ends = [raw.end(e) for r in raw.docs for e in raw.events(r)]
    starts = [raw.start(e) for r in raw.docs for e in raw.events(r)]
    assert data.t0_us == pytest.approx(min(starts), abs=1e-6)
    assert data.t1_us == pytest.approx(max(ends), abs=1e-6)
    assert "_merged" not in p.__dict__


@pytest.mark.parametrize("name", ["ddp", "h100"])
def test_a_window_is_every_event_in_it_in_full_detail(tmp_path, name):
    folder = FOLDERS[name](tmp_path)
    raw, p = Raw(folder), load(folder)
    first = raw.events(0, {"cpu_op"})
    a = sorted(raw.start(e) for e in first)[len(first) // 3]
    b = a + 1000.0  # 1 ms
    window = p._timeline().window(a, b)
    assert window.px_us == 0 and window.t0_us == a and window.t1_us == b
    r = window.rects
    rank_of = window.lanes["rank"].to_numpy()[r["lane"].to_numpy()]
    assert sum(len(raw.overlapping(rank, a, b)) for rank in raw.docs) >= 20
    for rank in raw.docs:
        want = raw.overlapping(rank, a, b)
        mine = r[rank_of == rank]
        assert int(mine["count"].sum()) == len(want) > 0
        # each event drawn alone, where it is: its name, its start and end clipped to the window
        single = mine[mine["count"] == 1]
        got = sorted((n, round(float(x0), 3), round(float(x1), 3))
                     for n, x0, x1 in zip(single["name"], single["x0_us"], single["x1_us"]))
        expected = sorted((e["name"], round(max(raw.start(e), a), 3), round(min(raw.end(e), b), 3)) for e in want)
        assert set(got) <= set(expected) and len(single) >= len(want) - 5  # exact overlaps join their row's
    # the whole view's lanes and rows, so a zoom keeps every lane where it was (the window's own
    # events alone would leave out the lanes idle in it and stack the rest afresh)
    full = p.timeline_view().data
    assert window.lanes["label"].tolist() == full.lanes["label"].tolist()
    assert window.rows.equals(full.rows)
    assert "_merged" not in p.__dict__


def test_a_ranks_full_view_is_merged_to_the_rectangles_it_is_given(tmp_path):
    """A rank's part of the full view keeps to its budget (``rank_budget``: the whole view's
    rectangles shared among the ranks): the H100 rank's 1,508 drawn events in at most 500
    rectangles, every event in one of them, as the raw file counts them."""
    from nbprof.cluster.timeline import full_part

    folder = h100(tmp_path)
    raw, p = Raw(folder), load(folder)
    part = p._timeline().parts[0]
    data, _ = full_part(part.cache, part.file, 500, np.zeros(0, dtype=np.int64))
    drawn = len(raw.events(0))
    assert data.max_rects == 500 and len(data.rects) <= 500 < drawn
    assert int(data.rects["count"].sum()) == drawn


def test_launch_arrows_follow_each_ranks_shifted_clock(tmp_path):
    """Aligned on the first collective, rank 1 is drawn 450 µs earlier: each launch and kernel
    rectangle's arrow ends (launch_x_us, work_x_us) move with it, so each rectangle's own end of
    its arrow is where the rectangle starts, and the other end is its partner's start, in the
    partner's row."""
    folder = nccl(tmp_path)
    p = load(folder)
    assert [float(s) for s in p._timeline("collective").shifts] == [0.0, -450.0]
    r = p.timeline_view(align="collective").data.rects
    linked = r[r["launch_row"] >= 0]
    assert len(linked) == 8
    starts = {(int(row), float(x)) for row, x in zip(r["row"], r["x0_us"])}
    for _, e in linked.iterrows():
        launch = e["name"].startswith("cuda")
        assert (e["launch_x_us"] if launch else e["work_x_us"]) == e["x0_us"], e.to_dict()
        partner = (int(e["work_row"]), float(e["work_x_us"])) if launch else (int(e["launch_row"]), float(e["launch_x_us"]))
        assert partner in starts, e.to_dict()


def test_collectives_are_linked_and_the_last_arrival_marked(tmp_path):
    # gloo: each rank's backend ranges, in order; the last to start is the one the others wait for
    folder = ddp(tmp_path)
    raw, p = Raw(folder), load(folder)
    calls = p.collective_calls()
    starts = {r: sorted(raw.start(e) for e in raw.events(r) if e["name"].startswith("gloo:")) for r in raw.docs}
    assert len(calls) == sum(len(s) for s in starts.values()) == 6
    for seq in range(3):
        rows = calls[calls["seq"] == seq].set_index("rank")
        late = max(raw.docs, key=lambda r: starts[r][seq])
        assert rows.loc[late, "last"] and not rows.drop(index=late)["last"].any()
        for r in raw.docs:
            assert rows.loc[r, "start_us"] == pytest.approx(starts[r][seq], abs=1e-6)
            assert rows.loc[r, "wait_us"] == pytest.approx(starts[late][seq] - starts[r][seq], abs=1e-6)
    links = p.timeline_view().data.links
    assert len(links) == 6 and links["last"].sum() == 3
    assert all(t.startswith(f"<b>rank {late} arrived last</b>") for t in links.loc[links["last"], "text"])
    # NCCL: the communication kernels; rank 1 computes 550 µs, rank 0 100 µs
    folder = nccl(tmp_path)
    raw, p = Raw(folder), load(folder)
    calls = p.collective_calls().set_index("rank")
    kernel = {r: [e for e in raw.events(r, DEVICE) if "nccl" in e["name"]][0] for r in raw.docs}
    assert bool(calls.loc[1, "last"]) and not bool(calls.loc[0, "last"])
    assert calls.loc[0, "wait_us"] == pytest.approx(raw.start(kernel[1]) - raw.start(kernel[0])) == 450.0
    svg = p.timeline_view().svg()
    assert "<polyline" in svg and "rank 1 arrived last" in svg


def test_a_selected_span_lists_what_each_rank_ran(tmp_path):
    folder = h100(tmp_path)
    raw, p = Raw(folder), load(folder)
    kernels = sorted(raw.start(e) for e in raw.events(1, DEVICE))
    a = kernels[len(kernels) // 2]
    b = a + 2000.0
    per_rank = dict(p._timeline().selection(a, b))
    assert sorted(per_rank) == sorted(raw.docs)
    for rank, s in per_rank.items():
        for cats, table in ((CPU, s.ops), (DEVICE, s.kernels)):
            want: dict[str, float] = defaultdict(float)
            calls: dict[str, int] = defaultdict(int)
            for e in raw.overlapping(rank, a, b, cats):
                lo, hi = raw.start(e), raw.end(e)
                want[e["name"]] += min(hi, b) - max(lo, a)
                calls[e["name"]] += 1
            got = table.set_index("name")
            assert set(got.index) == set(want) and len(want) > 2
            for n, t in want.items():
                assert got.loc[n, "in_window_us"] == pytest.approx(t, abs=1e-3)
                assert got.loc[n, "calls"] == calls[n]
    # rank 1's gemms are 3x slower: more of its span is device time
    assert per_rank[1].device_busy_us > per_rank[0].device_busy_us
    from nbprof.cluster.timeline import selection_data

    shown = selection_data(a, b, sorted(per_rank.items()))
    assert shown["head"].startswith(f"{a / 1000:.3f} – {b / 1000:.3f} ms · ") and shown["head"].endswith(" · 2 ranks")
    ranks = shown["tables"][0]
    assert ranks["ranks"] == ["0", "1"] and [row[0] for row in ranks["rows"]] == ["rank 0", "rank 1"]
    assert ranks["columns"] == ["rank", "device busy", "ops", "top op", "in span", "kernels", "top kernel", "in span"]
    for row, (r, s) in zip(ranks["rows"], sorted(per_rank.items())):  # each rank's top op and kernel
        assert row[3] == s.ops["name"].iat[0] and row[6] == s.kernels["name"].iat[0]
        # the calls in the span (checked against the raw files above)
        assert row[2] == f"{int(s.ops['calls'].sum()):,}" and row[5] == f"{int(s.kernels['calls'].sum()):,}"
    assert {t["rank"] for t in shown["tables"][1:]} == {"0", "1"}


def test_the_clock_aligned_on_an_event(tmp_path):
    folder = ddp(tmp_path)
    raw, p = Raw(folder), load(folder)
    step3 = {r: [raw.start(e) for e in raw.events(r) if e["name"] == "ProfilerStep#3"][0] for r in raw.docs}
    data = p.timeline_view(align="ProfilerStep#3").data
    r = data.rects
    rank_of = data.lanes["rank"].to_numpy()[r["lane"].to_numpy()]
    at = {k: float(r.loc[(rank_of == k) & (r["name"] == "ProfilerStep#3"), "x0_us"].iat[0]) for k in raw.docs}
    assert at[0] == pytest.approx(at[1], abs=1e-6) == pytest.approx(min(step3.values()), abs=1e-3)
    # every event of a rank moved by the same amount
    recorded = p.timeline_view().data
    moved = {k: at[k] - step3[k] for k in raw.docs}
    assert moved[0] == pytest.approx(0.0, abs=1e-3) or moved[1] == pytest.approx(0.0, abs=1e-3)
    assert recorded.t0_us != data.t0_us
    gloo = p.timeline_view(align="collective").data
    firsts = gloo.links.groupby("group")["x_us"].agg(["min", "max"]).iloc[0]
    assert firsts["min"] == pytest.approx(firsts["max"], abs=1e-6)  # the first collective starts together
    with pytest.raises(OptionError, match="no event named 'nope' on ranks 0, 1"):
        p.timeline(align="nope")
    with pytest.raises(OptionError, match="python=True"):
        p.timeline(python=True)


def test_showing_the_report_and_the_timeline_never_merges_the_ranks(tmp_path, monkeypatch):
    """The report, its page, the timeline (figure, overview, live widget, zoom, selection, find)
    and the cell's display: none merges the ranks' events into this process (``_merged``), reads
    a rank whole (``rank(r)``) or concatenates traces."""
    import nbprof.events
    from IPython.core.formatters import DisplayFormatter

    def never(*args, **kwargs):
        raise AssertionError("the ranks' events were concatenated")

    monkeypatch.setattr(nbprof.events, "concat_traces", never)
    folder = h100(tmp_path)
    p = load(folder)
    DisplayFormatter().format(p.report())
    p.to_html(tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert "rank 1 · CUDA 0 stream" in page or "rank 1 \\u00b7 CUDA 0 stream" in page  # (in the figure's JSON)
    view = p.timeline_view()
    DisplayFormatter().format(view.figure)
    assert "rank 1 · CPU thread" in view.svg()
    live = view.live()
    s = live.state
    d = s.window(view.data.t0_us + 1000, view.data.t0_us + 2000, 800)
    assert d.events_drawn > 0 and s.spec()["data"]
    assert s.select(view.data.t0_us + 1000, view.data.t0_us + 2000)["tables"][0]["title"] == "Each rank in the span"
    assert "events match" in s.find("gemm")
    p.timeline(window_us=(view.data.t0_us, view.data.t0_us + 500))
    assert "_merged" not in p.__dict__ and p._one is None


def test_the_caches_go_with_the_profile(tmp_path):
    p = load(h100(tmp_path))
    caches = [s.timeline.cache for s in p.rank_summaries]
    root = os.path.dirname(caches[0])
    assert all(os.path.exists(os.path.join(c, "index.pkl")) for c in caches)
    del p
    gc.collect()
    assert not os.path.exists(root)


@pytest.mark.slow  # spawns worker processes: ~5-15 s
def test_zooms_keep_their_workers_until_closed(tmp_path):
    p = nbprof.load_trace(h100(tmp_path), workers=2, progress=False)
    tl = p._timeline()
    t0 = p.timeline_view().data.t0_us
    for k in range(3):
        assert tl.window(t0 + 1000 * k, t0 + 1000 * (k + 1)).events_drawn > 0
    assert p._pool.started == 1 and len(spawned_workers()) == 2
    p.close()
    assert spawned_workers() == []
    assert tl.window(t0, t0 + 1000).events_drawn > 0  # started again
    assert p._pool.started == 2
    del tl, p
    gc.collect()
    assert spawned_workers() == []


@pytest.mark.slow  # spawns worker processes and a Dask cluster: ~20-40 s
def test_the_timeline_is_the_same_from_worker_processes_and_dask(tmp_path):
    folder = h100(tmp_path)
    raw = Raw(folder)
    a = sorted(raw.start(e) for e in raw.events(1, DEVICE))[40]
    b = a + 1000.0

    def views(p):
        tl = p._timeline()
        full = p.timeline_view().data.rects[["row", "x0_us", "x1_us", "count", "name"]]
        window = tl.window(a, b).rects[["row", "x0_us", "x1_us", "count", "name", "hover"]]
        selection = {r: s.kernels for r, s in tl.selection(a, b)}
        return full, window, selection, tl.find("gemm")

    want = views(load(folder))
    pooled = nbprof.load_trace(folder, workers=2, progress=False)
    got = [views(pooled)]
    assert pooled._pool.kind == "processes" and pooled._pool.started == 1
    pooled.close()
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask = nbprof.load_trace(folder, client=client, progress=False)
        assert on_dask._pool.kind == "dask"
        assert all(s.timeline.worker for s in on_dask.rank_summaries)  # each rank's Dask worker, for its zooms
        got.append(views(on_dask))
    for full, window, selection, found in got:
        pd.testing.assert_frame_equal(full.reset_index(drop=True), want[0].reset_index(drop=True))
        pd.testing.assert_frame_equal(window.reset_index(drop=True), want[1].reset_index(drop=True))
        for r, kernels in selection.items():
            pd.testing.assert_frame_equal(kernels, want[2][r])
        assert found == want[3]


def test_caches_of_dead_sessions_on_this_machine_are_removed(tmp_path, monkeypatch):
    from nbprof.cluster.timeline import _prefix, new_cache_dir

    monkeypatch.setenv("NBPROF_CACHE_DIR", str(tmp_path))
    host = _prefix().rsplit("-", 2)[0]
    dead = 2**22 + 12345  # above pid_max's default: no such process
    stale = tmp_path / f"{host}-{dead}-abc"
    other_host = tmp_path / f"ranks-elsewhere-{dead}-abc"  # a shared home: another machine's, maybe alive
    alive = tmp_path / f"{host}-{os.getpid()}-old"
    for d in (stale, other_host, alive):
        (d / "rank0").mkdir(parents=True)
    made = new_cache_dir()
    assert not stale.exists() and other_host.exists() and alive.exists()
    assert os.path.basename(made).startswith(f"{host}-{os.getpid()}-")


def test_collectives_started_together_have_no_last_arrival(tmp_path):
    """Two ranks start every gloo collective at the same microsecond: no rank waited, so none is
    marked as the last to arrive (a tie once marked rank 0, "the longest 0")."""
    from .test_cluster_analyses import gloo_rank, write_folder

    p = load(write_folder(tmp_path, [gloo_rank(0, 300.0), gloo_rank(1, 120.5)]))
    calls = p.collective_calls()
    assert len(calls) == 8 and (calls["wait_us"] == 0).all()
    links = p.timeline_view().data.links
    assert len(links) == 8 and not links["last"].any()
    assert all(t.startswith("<b>every rank arrived at ") and t.endswith("none waited for another")
               for t in links["text"])
    assert "arrived last" not in p.timeline_view().svg()
