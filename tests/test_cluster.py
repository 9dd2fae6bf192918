"""A folder of ranks summarized where each rank is read (``nbprof.cluster``): the tables equal the
old path's (every rank's events merged into one table, still what ``p.events`` does), counts and
times equal sums over the raw JSON of the files, the same in this process, in worker processes
and on Dask; one rank's profile on demand; errors and interrupts leave nothing running.

Folders: the recorded H100 trace twice, one copy perturbed (as tests/test_ranks.py); constructed
ranks with collectives, CPU-only ranks, steps; and tutorial 6's real two-process DDP run (gloo,
``tests/data/ddp_gloo``: its script run once with torch.distributed.run)."""

from __future__ import annotations

import copy
import gzip
import json
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.cluster.profile import ClusterProfile, _ranges
from nbprof.cluster.summary import RankSummary, rank_summary
from nbprof.errors import OptionError, TraceError
from nbprof.views.tabs.ranks import RANKS

from .conftest import DATA, trace_path
from .reference import Model, ns, read
from .synthetic import Trace, collectives_folder, training_loop

WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def recorded(name: str = "cnn_train_cuda") -> dict:
    with gzip.open(trace_path(name)) as f:
        return json.load(f)


def write(folder: Path, docs: list[dict]) -> Path:
    folder.mkdir(exist_ok=True)
    for r, doc in enumerate(docs):
        doc["distributedInfo"] = {"rank": r, "world_size": len(docs)}
        with open(folder / f"host_{r}.pt.trace.json", "w") as f:
            json.dump(doc, f)
    return folder


def perturbed_docs() -> list[dict]:
    base = recorded()
    slow = copy.deepcopy(base)
    for e in slow["traceEvents"]:
        if e.get("cat") == "kernel" and "gemm" in e["name"]:
            e["dur"] = round(e["dur"] * 3, 3)
    slow["traceEvents"] = [e for e in slow["traceEvents"] if e.get("cat") != "gpu_memset"]
    return [base, slow]


def cpu_only_folder(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for r, dur in ((0, 100.0), (1, 130.0), (2, 100.0)):
        t = Trace(rank=r)
        t.op("aten::mm", 0, dur)
        t.op("aten::relu", 200, 10)
        t.write(folder / f"r{r}.json")
    return folder


def ddp_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "ddp"
    shutil.copytree(DATA / "ddp_gloo", folder)
    return folder


FOLDERS = {
    "perturbed_h100": lambda tmp: write(tmp / "h100", perturbed_docs()),
    "steps": lambda tmp: write(tmp / "steps", [training_loop(3, kernel_us=500).doc(),
                                               training_loop(3, kernel_us=250).doc()]),
    "collectives": lambda tmp: collectives_folder(tmp / "coll"),
    "cpu_only": lambda tmp: cpu_only_folder(tmp / "cpu"),
    "ddp_gloo": ddp_folder,
}


def assert_frames(a: pd.DataFrame, b: pd.DataFrame, sort: list[str] | None = None) -> None:
    if sort:
        a = a.sort_values(sort, kind="stable").reset_index(drop=True)
        b = b.sort_values(sort, kind="stable").reset_index(drop=True)
    assert list(a.columns) == list(b.columns)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False,
                                  check_categorical=False, rtol=1e-9, atol=1e-6)


def assert_model_tables(p, folder: Path) -> None:
    """The independent side beside the differential checks: every rank file rebuilt in plain
    Python from its JSON (tests/reference.py), its key averages summed over the ranks, and each
    rank's row of ranks().table (ops, self CPU, device work, span) from its own file."""
    files = sorted(f for f in folder.iterdir() if f.name.endswith((".json", ".json.gz")))
    total: dict = {}
    rows = {}
    for f in files:
        doc = read(f)
        model = Model(doc)
        for key, row in model.key_averages().items():
            acc = total.setdefault(key, dict.fromkeys(row, 0))
            for c, v in row.items():
                acc[c] += v
        events = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i") and e.get("cat") not in (None, "Trace")]
        span = max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in events) - min(ns(e["ts"]) for e in events)
        rank = (doc.get("distributedInfo") or {}).get("rank")
        rows[rank] = {"ops": sum(1 for e in model.live() if e.kind == "op"),
                      "self_cpu_us": sum(model.self_cpu(e) for e in model.live()) / 1000,
                      "device_us": sum(w.dur for w in model.work) / 1000, "kernels": len(model.work),
                      "span_us": span / 1000}
    ours = {(r["name"], r["kind"]): r for r in p.key_averages().to_dict("records")}
    assert set(ours) == set(total)
    for key, want in total.items():
        for c, v in want.items():
            assert ours[key][c] == pytest.approx(v, abs=1e-6), (key, c)
    table = p.ranks().table.set_index("rank")
    assert sorted(table.index) == sorted(rows)
    for rank, want in rows.items():
        for c, v in want.items():
            assert table.loc[rank, c] == pytest.approx(v, abs=1e-3), (rank, c)


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_tables_equal_the_merged_events_path(tmp_path, name):
    """Every table the cluster builds from summaries equals the one today's path builds from the
    merged events of every rank (``_merged``: concat_traces + TorchProfile, as load_trace did)."""
    folder = FOLDERS[name](tmp_path)
    p = nbprof.load_trace(folder, workers=0, progress=False)
    assert isinstance(p, ClusterProfile)
    assert_model_tables(p, folder)
    m = p._merged
    assert_model_tables(m, folder)  # the merged events: one tree over every rank's processes
    assert_frames(p.key_averages(), m.key_averages())  # same rows, same order
    assert_frames(p.kernels(), m.kernels(), sort=["name", "kind"])
    assert_frames(p.steps(), m.steps())
    pd.testing.assert_frame_equal(p.step_breakdown(), m.step_breakdown(), check_dtype=False, rtol=1e-9)
    assert_frames(p.device_stats.devices, m.device_stats.devices, sort=["rank", "device"])
    assert_frames(p.device_stats.streams, m.device_stats.streams,
                  sort=[c for c in ("rank", "device", "stream") if c in m.device_stats.streams.columns])
    r, mr = p.ranks(), m.ranks()
    assert_frames(r.table, mr.table)
    assert r.slowest == mr.slowest and r.imbalance == pytest.approx(mr.imbalance)
    assert_frames(r.differences, mr.differences)
    assert_frames(p.overview(), m.overview())
    assert_frames(p.collectives(), m.collectives(), sort=["rank", "name", "process_group"])
    assert_frames(p.queue_length(), m.queue_length(), sort=["rank", "device", "stream"])
    s, ms = p.summary, m.summary
    for field in ("events", "has_device", "has_memory", "sort", "top_name", "peak_allocated_bytes",
                  "peak_reserved_bytes"):
        assert getattr(s, field) == getattr(ms, field), field
    for field in ("span_us", "self_cpu_us", "self_device_us", "top_value", "top_share"):
        assert getattr(s, field) == pytest.approx(getattr(ms, field), rel=1e-9, abs=1e-6), field
    # the findings that compare ranks are the merged ones', word for word
    fs = p.findings
    for kind in ("straggler", "collective_wait"):
        assert (fs[fs["kind"] == kind]["message"].tolist()
                == m.findings[m.findings["kind"] == kind]["message"].tolist()), kind


def test_totals_are_sums_over_the_raw_json(tmp_path):
    """Independent oracle: kernel counts and times, op counts, summed over the files' JSON."""
    docs = perturbed_docs()
    p = nbprof.load_trace(write(tmp_path / "h100", copy.deepcopy(docs)), workers=0, progress=False)
    count: Counter = Counter()
    time: Counter = Counter()
    for doc in docs:
        for e in doc["traceEvents"]:
            if e.get("cat") in WORK:
                count[e["name"]] += 1
                time[e["name"]] += e["dur"]
    k = p.kernels().set_index("name")
    assert k["count"].to_dict() == dict(count)
    for name, t in time.items():
        assert k.loc[name, "device_total_us"] == pytest.approx(t, abs=1e-6)
        assert k.loc[name, "device_min_us"] == min(e["dur"] for d in docs for e in d["traceEvents"]
                                                   if e.get("name") == name and e.get("cat") in WORK)
    # the operators: torch's own key_averages of the recorded run (its oracle), twice
    with open(DATA / "cnn_train_cuda.oracle.json") as f:
        torch_rows = json.load(f)["rows"]
    ka = p.key_averages()
    ka = ka[ka["kind"] == "op"].set_index("name")
    checked = 0
    for row in torch_rows:
        if row["key"] in ka.index and row["device_type"] == "DeviceType.CPU":
            assert ka.loc[row["key"], "count"] == 2 * row["count"], row["key"]
            assert ka.loc[row["key"], "self_cpu_us"] == pytest.approx(2 * row["self_cpu_time_total"], rel=1e-6)
            checked += 1
    assert checked >= 20
    assert p.summary.self_device_us == pytest.approx(sum(time.values()), abs=1e-3)
    per = p.key_averages(per_rank=True)
    assert per.columns[0] == "rank" and sorted(per["rank"].unique()) == [0, 1]
    assert per.groupby("name")["count"].sum().to_dict() == p.key_averages().set_index("name")["count"].to_dict()


def test_ddp_ranks_table_from_the_raw_json(tmp_path):
    """Tutorial 6's DDP run: rank 1 sleeps 20 ms per step in load_batch, so it is the slowest
    (the straggler finding), and its load_batch time (from the JSON) differs."""
    folder = ddp_folder(tmp_path)
    p = nbprof.load_trace(folder, workers=0, progress=False)
    docs = {}
    for f in sorted(os.listdir(folder)):
        with gzip.open(folder / f) as fh:
            doc = json.load(fh)
        docs[doc["distributedInfo"]["rank"]] = doc
    t = p.ranks().table.set_index("rank")
    assert list(t.index) == [0, 1]
    for r, doc in docs.items():
        ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
        assert t.loc[r, "ops"] == len(ops)
    load = {r: sum(e["dur"] for e in doc["traceEvents"] if e.get("name") == "load_batch" and e.get("ph") == "X")
            for r, doc in docs.items()}
    assert load[1] > load[0] + 3 * 15_000  # three recorded steps, ~20 ms more each
    # gloo: the waiting shows on the CPU, in the all-reduce of the rank that waits (rank 0)
    assert t.loc[0, "comm_us"] > t.loc[1, "comm_us"] + 3 * 10_000
    d = p.ranks().differences.set_index("name")
    assert d.loc["load_batch", "slowest_rank"] == 1
    f = p.findings
    assert f["kind"].iloc[0] == "straggler" and "Rank 1 is the slowest" in f["message"].iloc[0]


@pytest.mark.slow  # spawns worker processes and a Dask LocalCluster: ~10-25 s
def test_workers_and_dask_give_the_same_tables(tmp_path):
    folder = write(tmp_path / "h100", perturbed_docs())
    local = nbprof.load_trace(folder, workers=0, progress=False)
    pooled = nbprof.load_trace(folder, workers=2, progress=False)
    assert spawned_workers() == []  # the pool is shut down once the ranks are back
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask = nbprof.load_trace(folder, client=client, progress=False)
        # the session's active client is used when none is given
        active = nbprof.load_trace(folder, progress=False)
    assert_model_tables(local, folder)
    for other in (pooled, on_dask, active):
        assert_frames(other.key_averages(), local.key_averages())
        assert_frames(other.kernels(), local.kernels())
        assert_frames(other.ranks().table, local.ranks().table)
        assert_frames(other.ranks().differences, local.ranks().differences)
        assert_frames(other.steps(), local.steps())
        assert_frames(other.findings[["kind", "severity", "message"]], local.findings[["kind", "severity", "message"]])


def test_rank_r_is_that_file_loaded_alone(tmp_path):
    folder = write(tmp_path / "h100", perturbed_docs())
    p = nbprof.load_trace(folder, workers=0, progress=False)
    one = p.rank(1)
    alone = nbprof.load_trace(folder / "host_1.pt.trace.json")
    assert_frames(one.key_averages(), alone.key_averages())
    assert_frames(one.kernels(), alone.kernels())
    assert len(one.events) == len(alone.events) == p.rank_summaries[1].events
    assert p.rank(1) is one  # kept
    p.rank(0)
    assert p._one is not None and p._one[0] == 0  # at most one kept
    with pytest.raises(OptionError, match=r"no rank 5 in this profile; its ranks: 0-1"):
        p.rank(5)


def test_findings_of_ranks_are_one_line_per_kind_and_subject(tmp_path):
    doc = recorded("two_streams")
    p = nbprof.load_trace(write(tmp_path / "same", [copy.deepcopy(doc), copy.deepcopy(doc), copy.deepcopy(doc)]),
                          workers=0, progress=False)
    single = nbprof.load_trace(trace_path("two_streams")).findings
    f = p.findings
    assert len(f) == len(single) > 0
    assert sorted(f["kind"]) == sorted(single["kind"])
    for _, row in f.iterrows():
        assert row["message"].startswith("Ranks 0-2 (the numbers of rank 0): ")
        assert row["evidence"]["ranks"] == [0, 1, 2]
        assert set(row["evidence"]["by_rank"]) == {"0", "1", "2"}
    assert (f["message"].str.replace("Ranks 0-2 (the numbers of rank 0): ", "", regex=False).tolist()
            == single["message"].tolist())
    # and the numbers are the file's: the top op by kernel time (the model of the JSON) and its share
    model = Model(read(trace_path("two_streams")))
    ops = {name: row["self_device_us"] for (name, kind), row in model.key_averages().items() if kind == "op"}
    top = max(ops, key=ops.get)
    evidence = f[f["kind"] == "top_op"].iloc[0]["evidence"]
    assert evidence["op"] == top
    assert evidence["share"] == pytest.approx(ops[top] / (sum(w.dur for w in model.work) / 1000))


def test_a_folders_finding_shows_the_rank_it_covers_most(tmp_path):
    # every rank has the same top op at the same severity ("medium"); its share differs: the line
    # speaks for the rank where it is largest, not the first rank (issue 38's noticed-and-left)
    folder = cpu_only_folder(tmp_path / "cpu")
    share = {}
    for r in range(3):  # the top op's share of self CPU time, from the JSON (tests/reference.py)
        ops = {name: row["self_cpu_us"] for (name, kind), row in Model(read(folder / f"r{r}.json")).key_averages().items()
               if kind == "op"}
        share[r] = ops["aten::mm"] / sum(ops.values())
    worst = max(share, key=share.get)
    assert worst != 0 and sorted(share.values())[-2] < share[worst]  # the folder makes the first rank not the one
    row = nbprof.load_trace(folder, workers=0, progress=False).findings.set_index("kind").loc["top_op"]
    assert row["severity"] == "medium"
    assert row["message"].startswith(f"Ranks 0-2 (the numbers of rank {worst}): ")
    assert row["evidence"]["rank"] == worst and row["evidence"]["ranks"] == [0, 1, 2]
    assert row["evidence"]["share"] == pytest.approx(share[worst])
    alone = nbprof.load_trace(folder / f"r{worst}.json").findings.set_index("kind").loc["top_op"]
    assert row["message"].endswith(alone["message"])


@pytest.mark.parametrize("name", ["collectives", "steps"])
def test_report_opens_with_ranks_and_merges_no_events(tmp_path, name):
    folder = FOLDERS[name](tmp_path)
    p = nbprof.load_trace(folder, workers=0, progress=False)
    html = p.report().html(include_library=False)
    titles = [t.title for t in p.report().tabs if t.shown(p)]
    # every tab a rank alone has (tests/test_cluster_views.py: the folders with every view)
    alone = set()
    for f in folder.iterdir():
        one = nbprof.load_trace(f)
        alone |= {t.title for t in one.report().tabs if t.shown(one)}
    assert titles[0] == "Ranks" and titles[-1] == "Timeline" and set(titles) == alone | {"Ranks"}
    assert f"slowest rank: {p.ranks().slowest}" in html
    checked = re.search(r'<input type="radio"[^>]* id="nbprof-\d+-(\d+)" checked', html)
    assert checked and checked.group(1) == "0"  # it opens on the Ranks tab
    assert "p.rank(r)" in p.report().text()
    page = (tmp_path / "report.html")
    p.to_html(page)
    assert f"slowest rank: {p.ranks().slowest}" in page.read_text()
    assert "_merged" not in p.__dict__  # neither the report nor its page merged the events
    assert repr(p).startswith("<ClusterProfile 2 ranks")
    # IPython's display of the report (its formatters call _repr_mimebundle_); not through a
    # shell: an InteractiveShell singleton would stay for the tests after this one
    from IPython.core.formatters import DisplayFormatter

    shown, _ = DisplayFormatter().format(p.report())
    assert shown["text/plain"] == p.report().text()
    assert f"slowest rank: {p.ranks().slowest}" in shown["text/html"]
    assert "_merged" not in p.__dict__


def test_events_merge_on_demand_with_a_note(tmp_path, capsys):
    p = nbprof.load_trace(collectives_folder(tmp_path / "coll"), workers=0, progress=False)
    ev = p.events
    assert sorted(ev["rank"].unique()) == [0, 1]
    assert len(ev) == p.summary.events
    assert "merging all 2 ranks' events" in capsys.readouterr().err
    out = p.save(tmp_path / "merged.json.gz")
    assert len(nbprof.load_trace(out).events) == len(ev)


MiB = 1 << 20


def memory_steps_folder(folder: Path) -> Path:
    """Two ranks on one OS pid and GPU 0 each (two machines' ranks), two steps each: in each step
    rank r allocates (r + 1) MiB on cuda:0 and frees nothing."""
    folder.mkdir(exist_ok=True)
    for rank in (0, 1):
        t = Trace(rank=rank)
        for k in range(2):
            t.annotation(f"ProfilerStep#{k}", 1000 * k, 999)
            t.op("aten::empty", 1000 * k + 10, 5)
            t.memory(1000 * k + 11, (rank + 1) * MiB, (k + 1) * (rank + 1) * MiB, 8 * MiB, addr=100 + k)
        t.write(folder / f"r{rank}.json")
    return folder


SAVED_FOLDERS = {"memory_steps": lambda tmp: memory_steps_folder(tmp / "mem"),
                 "collectives": lambda tmp: collectives_folder(tmp / "coll")}


def rank_events(folder: Path) -> dict[int, int]:
    """The events (complete and instant ones, the profiler's span aside) of each rank's file, from the JSON."""
    out = {}
    for f in sorted(folder.iterdir()):
        doc = json.loads(f.read_text())
        out[doc["distributedInfo"]["rank"]] = sum(1 for e in doc["traceEvents"] if e.get("ph") in ("X", "i")
                                                  and e.get("cat") not in (None, "Trace"))
    return out


@pytest.mark.parametrize("name", sorted(SAVED_FOLDERS))
def test_a_saved_folder_reads_back_with_each_events_rank(tmp_path, name):
    """``p.save()`` of a folder writes every rank's events into one trace; load_trace gives each
    event its rank back, so what is per rank (memory per step and rank, steps, the Ranks tab) is
    what the folder gives, and Perfetto shows the ranks apart (their processes named for them)."""
    folder = SAVED_FOLDERS[name](tmp_path)
    p = nbprof.load_trace(folder, workers=0, progress=False)
    out = p.save(tmp_path / "merged.json.gz")
    q = nbprof.load_trace(out, progress=False)
    assert not isinstance(q, ClusterProfile) and q.meta.notes == []
    ev, merged = q.events, p.events
    assert dict(Counter(ev["rank"].tolist())) == rank_events(folder) == dict(Counter(merged["rank"].tolist()))
    # the same events, in the same order, each with its rank and its process's id in its own trace
    columns = ["rank", "name", "kind", "device", "pid", "thread", "stream", "bytes", "total_allocated_bytes", "addr"]
    assert_frames(ev[columns].astype({c: str for c in ("name", "kind", "device")}),
                  merged[columns].astype({c: str for c in ("name", "kind", "device")}))
    assert [ns(t) for t in ev["start_us"]] == [ns(t) for t in merged["start_us"]]  # to the ns
    assert_model_tables(q, folder)  # key averages summed over the raw files; each rank's row of ranks()
    assert RANKS.applies(q) and "Ranks" in [t.title for t in q.report().tabs]
    assert_frames(q.key_averages(), p.key_averages())
    assert_frames(q.steps(), p.steps())
    assert_frames(q.overview(), p.overview())
    assert_frames(q.kernels(), p.kernels(), sort=["name", "kind"])
    assert_frames(q.memory_growth(), p._merged.memory_growth())  # (with no steps, the folder's has a rank column)
    if name == "memory_steps":  # rank r: (r + 1) MiB a step, kept; (k + 1)(r + 1) MiB held after step k
        growth = q.memory_growth().set_index(["step", "rank"])
        assert sorted(growth.index) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        for (k, r), row in growth.iterrows():
            assert (row["device"], row["start_us"], row["end_us"]) == ("cuda:0", 1000.0 * k, 1000.0 * k + 999)
            assert row["held_bytes"] == (k + 1) * (r + 1) * MiB
            assert row["added_bytes"] == row["allocated_bytes"] == row["added_never_freed_bytes"] == (r + 1) * MiB
            assert row["never_freed_blocks"] == 1
    # no one rank's trace: each rank's in meta.parts, as its file says
    assert (q.meta.rank, q.meta.world_size) == (None, 2)
    assert [(m.rank, m.source) for m in q.meta.parts] == [(r, str(f)) for r, f in
                                                          zip((0, 1), sorted(folder.iterdir()))]
    # the file: chrome-trace JSON whose processes say their rank; ranks share no process
    with gzip.open(out) as f:
        doc = json.load(f)
    named = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    pids = Counter(e["pid"] for e in doc["traceEvents"] if e["ph"] in ("X", "i") and e.get("cat") != "Trace")
    assert set(pids) == set(named)
    by_rank = Counter()
    for pid, count in pids.items():
        by_rank[int(re.fullmatch(r"rank (\d+) · .+", named[pid]).group(1))] += count
    assert dict(by_rank) == rank_events(folder)
    # saved again, the same
    again = nbprof.load_trace(q.save(tmp_path / "again.json"), progress=False)
    assert_frames(again.events[columns].astype(str), ev[columns].astype(str))


def _saved_folder(tmp_path: Path) -> dict:
    p = nbprof.load_trace(collectives_folder(tmp_path / "coll"), workers=0, progress=False)
    with gzip.open(p.save(tmp_path / "merged.json.gz")) as f:
        return json.load(f)


# nbprofRanks that does not fit its file: (what is wrong with it, a change of the key, the note's reason)
BAD_RANKS = {
    "not an object": (lambda key: [0, 1], "Expected `object`, got `array`"),
    "processes not an object": (lambda key: {**key, "processes": [[1000, 0, 1000]]}, "Expected `object`, got `array`"),
    "no process": (lambda key: {**key, "processes": {}}, "it names no process"),
    "a negative rank": (lambda key: {**key, "processes": {**key["processes"], "1001": [-1, 1000]}},
                        "Expected `int` >= 0"),
    "a rank of text": (lambda key: {**key, "processes": {**key["processes"], "1001": ["1", 1000]}},
                       "Expected `int`, got `str`"),
    "a fractional rank": (lambda key: {**key, "processes": {**key["processes"], "1001": [0.5, 1000]}},
                          "Expected `int`, got `float`"),
    "a pid that is no number": (lambda key: {**key, "processes": {"p1000" if k == "1000" else k: v for k, v in
                                                                  key["processes"].items()}},
                                "its pid 'p1000' is not an integer"),
    "a pid no event has": (lambda key: {**key, "processes": {**key["processes"], "4242": [1, 4242]}},
                           "it names pid 4242, which no event of the trace has"),
    "an event's pid it does not name": (lambda key: {**key, "processes": {k: v for k, v in key["processes"].items()
                                                                          if k != "1002"}},
                                        "it names no rank for the events of pid 1002"),
    "parts that are not its ranks": (lambda key: {**key, "parts": key["parts"][:1]},
                                     "rank 1 is none of its 1 parts' ranks"),
    "a part's field of the wrong type": (lambda key: {**key, "parts": [{**key["parts"][0], "main_thread": "main"},
                                                                       key["parts"][1]]},
                                         "Expected `int | null`, got `str`"),
}


@pytest.mark.parametrize("case", sorted(BAD_RANKS))
def test_a_saved_folders_ranks_that_do_not_fit_are_a_note(tmp_path, case):
    """A merged trace whose nbprofRanks is malformed reads as the same file without it (one trace,
    its processes as the file numbers them), with one note that says why."""
    change, reason = BAD_RANKS[case]
    doc = _saved_folder(tmp_path)
    assert sorted(doc["nbprofRanks"]["processes"]) == ["0", "1000", "1001", "1002"]
    doc["nbprofRanks"] = change(doc["nbprofRanks"])
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    del doc["nbprofRanks"]
    (tmp_path / "plain.json").write_text(json.dumps(doc))
    bad, plain = nbprof.load_trace(tmp_path / "bad.json"), nbprof.load_trace(tmp_path / "plain.json")
    assert "rank" not in bad.events.columns and bad.meta.parts == [] and plain.meta.notes == []
    [note] = bad.meta.notes
    assert note.startswith("nbprofRanks: ") and reason in note and "\n" not in note
    assert note.endswith(": the events' ranks are not read (read as one trace)")
    pd.testing.assert_frame_equal(bad.events, plain.events)
    assert sorted(bad.events["pid"].unique()) == [0, 1000, 1001, 1002]


def test_progress_counts_ranks(tmp_path, capsys):
    folder = cpu_only_folder(tmp_path / "cpu")
    nbprof.load_trace(folder, workers=0)
    err = capsys.readouterr().err
    assert "nbprof: 3 of 3 ranks loaded in" in err and err.endswith("\n")
    nbprof.load_trace(folder, workers=0, progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])  # 2: spawns workers, ~5 s
def test_a_bad_rank_file_names_it_and_stops_the_workers(tmp_path, workers):
    folder = cpu_only_folder(tmp_path / "cpu")
    with gzip.open(folder / "r3.json.gz", "wb") as f:
        f.write(b'{"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')
    bad = folder / "r3.json.gz"
    bad.write_bytes(bad.read_bytes()[:30])  # truncated
    with pytest.raises(TraceError) as e:
        nbprof.load_trace(folder, workers=workers, progress=False)
    assert str(e.value).startswith(str(bad)) and "\n" not in str(e.value)
    assert spawned_workers() == []


@pytest.mark.slow  # spawns worker processes: ~5-15 s
def test_an_interrupt_stops_every_worker(tmp_path, monkeypatch):
    from nbprof.views import progress

    folder = write(tmp_path / "h100", perturbed_docs() + perturbed_docs())

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(progress.RankProgress, "advance", interrupted)
    with pytest.raises(KeyboardInterrupt):
        nbprof.load_trace(folder, workers=2, progress=False)
    assert spawned_workers() == []


@pytest.mark.slow  # spawns worker processes: ~5-15 s
def test_a_worker_that_dies_as_it_starts_is_one_line_and_the_others_stop(tmp_path):
    """A worker killed while it starts (before it reads a rank): a one-line TraceError naming the
    folder and the signal, and no worker left."""
    import signal
    import threading

    folder = write(tmp_path / "h100", perturbed_docs() * 3)
    killed: list[str] = []

    def kill_the_first_worker() -> None:
        for _ in range(600):
            workers = spawned_workers()
            if workers:
                os.kill(int(workers[0]), signal.SIGKILL)
                killed.append(workers[0])
                return
            threading.Event().wait(0.02)

    killer = threading.Thread(target=kill_the_first_worker)
    killer.start()
    with pytest.raises(TraceError) as e:
        nbprof.load_trace(folder, workers=2, progress=False)
    killer.join()
    assert killed
    assert str(e.value).startswith(f"{folder}: a worker process was killed by SIGKILL as it started, "
                                   "before reading a rank") and "\n" not in str(e.value)
    assert "6 ranks not read" in str(e.value)
    assert spawned_workers() == []


def test_a_worker_that_dies_while_the_next_one_starts_is_one_line(tmp_path, monkeypatch):
    """The same death at its worst moment (a clean-clone CI once hit it): the first worker dies
    while ``submit()`` starts the second, after the pool checked it was whole. Python's pool then
    marks itself broken and closes its queues from its manager thread while ``submit()`` is
    sending them to the new process, which fails with ``OSError: handle is closed``. Here the
    moment is made sure: the pool's own process start (``_spawn_process``, the real one, run
    afterwards) waits until the first worker is killed and the pool has closed its queues. The
    answer is still the one line and no worker left."""
    import concurrent.futures.process as cfp
    import signal
    import time

    if not hasattr(cfp.ProcessPoolExecutor, "_spawn_process"):
        pytest.skip("this Python's process pool starts its processes another way")
    folder = write(tmp_path / "h100", perturbed_docs() * 3)
    real = cfp.ProcessPoolExecutor._spawn_process
    killed: list[int] = []

    def spawn_once_the_first_is_dead(pool) -> None:
        first = list(pool._processes.values())
        if first and not killed:
            os.kill(first[0].pid, signal.SIGKILL)
            killed.append(first[0].pid)
            deadline = time.monotonic() + 60
            while not pool._call_queue._reader.closed and time.monotonic() < deadline:
                time.sleep(0.01)
            assert pool._broken  # the pool saw the death before this start went on
        return real(pool)

    monkeypatch.setattr(cfp.ProcessPoolExecutor, "_spawn_process", spawn_once_the_first_is_dead)
    with pytest.raises(TraceError) as e:
        nbprof.load_trace(folder, workers=2, progress=False)
    assert killed
    message = str(e.value)
    assert message.startswith(f"{folder}: a worker process was killed by SIGKILL") and "\n" not in message, message
    assert "ranks not read" in message
    assert spawned_workers() == []


def big_rank(path: Path, ops: int, rank: int) -> Path:
    """A rank whose file takes a worker a second or more to read (``ops`` top-level ops)."""
    t = Trace(rank=rank)
    for k in range(ops):
        t.op(f"aten::op{k % 50}", 10.0 * k, 5.0)
    return t.write(path)


@pytest.mark.slow  # spawns worker processes and reads two ~20 MB ranks: ~10-20 s
def test_a_worker_killed_while_reading_a_rank_names_it_and_its_size(tmp_path):
    """What the out-of-memory killer does (SIGKILL) to a worker while it reads a rank: the error
    says how it ended, that it most likely ran out of memory, and which rank, with its size."""
    import signal
    import threading

    folder = tmp_path / "big"
    folder.mkdir()
    files = [big_rank(folder / f"r{r}.json", 150_000, r) for r in range(2)]
    killed: list[Path] = []

    def kill_a_worker_reading_a_rank() -> None:  # the file is open while the worker parses it
        for _ in range(30_000):
            for pid in spawned_workers():
                try:
                    open_files = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
                except OSError:
                    continue
                for f in files:
                    if str(f) in open_files:
                        os.kill(int(pid), signal.SIGKILL)
                        killed.append(f)
                        return
            threading.Event().wait(0.002)

    killer = threading.Thread(target=kill_a_worker_reading_a_rank)
    killer.start()
    with pytest.raises(TraceError) as e:
        nbprof.load_trace(folder, workers=2, progress=False)
    killer.join()
    assert killed, "no worker was seen reading a rank"
    msg = str(e.value)
    size = killed[0].stat().st_size
    assert msg.startswith(f"{folder}: a worker process was killed by SIGKILL while reading {killed[0].name} "
                          f"({size / 2**20:.2f} MiB on disk): "), msg
    assert "most likely ran out of memory" in msg and "fewer workers= (now 2" in msg and "\n" not in msg
    assert spawned_workers() == []


SCRIPT_WITHOUT_GUARD = """\
import sys
import nbprof
with open(sys.argv[2], "a") as f:  # the script's top level, counted: it must run once
    f.write("ran\\n")
p = nbprof.load_trace(sys.argv[1], workers=2, progress=False)
print("ranks", p.rank_labels, p.summary.events, round(p.summary.self_cpu_us, 3))
"""


@pytest.mark.slow  # fresh Pythons spawning workers: ~10-20 s
@pytest.mark.parametrize("how", ["python", "nbprof cli"])
def test_a_script_without_a_main_guard_loads_a_folder_in_workers(tmp_path, how):
    """``python script.py`` (and ``python -m nbprof cprofile script.py``) where the script loads a
    folder at its top level, with no ``if __name__ == "__main__":``: the workers never run it."""
    import subprocess
    import sys

    folder = cpu_only_folder(tmp_path / "cpu")
    script = tmp_path / "load_ranks.py"
    script.write_text(SCRIPT_WITHOUT_GUARD)
    marker = tmp_path / "runs.txt"
    cmd = [str(script)] if how == "python" else ["-m", "nbprof", "cprofile", "-q", "--no-html", str(script)]
    r = subprocess.run([sys.executable, *cmd, str(folder), str(marker)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert marker.read_text() == "ran\n"  # once: not again in each worker
    # what the raw JSON says: three ranks of two ops each, mm 100/130/100 µs + relu 10 µs
    assert r.stdout.strip().splitlines()[-1] == "ranks [0, 1, 2] 6 360.0"


def spawned_workers() -> list[str]:
    """This process's children running multiprocessing's spawn_main (workers; not its resource
    tracker, which lives as long as this process), from /proc, not from multiprocessing's list."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"spawn_main" in cmd:
            out.append(pid)
    return out


def test_bad_arguments_are_one_line(tmp_path):
    folder = cpu_only_folder(tmp_path / "cpu")
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(OptionError, match="workers must be a number of processes"):
            nbprof.load_trace(folder, workers=bad)


def test_summary_is_small_and_picklable(tmp_path):
    import pickle

    folder = write(tmp_path / "h100", perturbed_docs())
    s = rank_summary(str(folder / "host_0.pt.trace.json"))
    assert isinstance(s, RankSummary)
    blob = pickle.dumps(s)
    assert len(blob) < os.path.getsize(folder / "host_0.pt.trace.json") / 4
    assert pickle.loads(blob).events == s.events


def test_rank_ranges_text():
    assert _ranges([0, 1, 2, 3, 5]) == "0-3, 5"
    assert _ranges([7]) == "7"
    assert _ranges(["a", "b"]) == "a, b"


ALLOCATE_TWICE = """\
import resource, sys
import numpy as np
if sys.argv[1] == "kept":  # (nbprof imported only then: what a process did before moves glibc's thresholds)
    from nbprof.cluster.workers import _keep_freed_memory
    _keep_freed_memory()
arrays = [np.ones(5 << 20) for _ in range(4)]  # 4 x 40 MiB, touched
del arrays
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
arrays = [np.ones(5 << 20) for _ in range(4)]  # the same again
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_load_worker_keeps_the_memory_it_frees():
    """The load's workers allocate and free a rank's ~1 GB again and again: their allocator keeps
    freed memory instead of handing it back to the kernel. Measured as the kernel sees it: 160 MiB
    of arrays allocated again after being freed are mapped afresh by default (glibc maps every
    block above 32 MiB, whatever happened before in the process: smaller blocks depend on its
    history), each page faulted in again: 5,320 faults here, at least 80 wherever the kernel backs
    them with 2 MiB pages; and none when kept. Each case runs in a fresh Python: the test's own
    process keeps its allocator as it is."""
    import subprocess

    def faults(how: str) -> int:
        r = subprocess.run([sys.executable, "-c", ALLOCATE_TWICE, how], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        return int(r.stdout.split()[-1])

    assert faults("default") >= 80
    assert faults("kept") < 10


HTA_SAMPLES = ("amd_mi250_rocm6.json.gz", "meta_format_control.json.gz", "mtia_inference_rank_0.json.gz",
               "nccl_data.json.gz")


def test_ranks_on_clocks_years_apart_each_keep_their_own(tmp_path):
    """HTA's sample traces as one folder (tests/data/wild: four machines, a steady clock since boot
    on some, the Unix epoch on another): on one clock they spanned 52 years, and the header said
    "span 1660501657.990 s". Ranks whose first events are more than a day apart were not recorded
    on one clock: each keeps its own, from its first event; the folder spans as long as its
    longest rank, and a note says why. Oracle: each rank's span from its raw JSON."""
    for name in HTA_SAMPLES:
        shutil.copy(DATA / "wild" / name, tmp_path / name)
    p = nbprof.load_trace(tmp_path, workers=0, progress=False)
    spans = []
    for name in HTA_SAMPLES:
        events = [e for e in read(tmp_path / name)["traceEvents"]
                  if e.get("ph") in ("X", "i") and e.get("cat") not in (None, "Trace") and "ts" in e]
        spans.append((max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in events) - min(ns(e["ts"]) for e in events)) / 1000)
    assert p.summary.span_us == pytest.approx(max(spans), abs=1e-3)
    header = p.report()._repr_mimebundle_()["text/plain"].splitlines()[0]
    assert f"span {max(spans) / 1e3:.2f} ms" in header, header  # 136.77 ms (the nccl rank)
    assert any("not recorded on one clock" in n and "years apart" in n for n in p.meta.notes), p.meta.notes
    # every view on the folder's clock: each rank's steps and its timeline lanes start at its first event
    full = p.timeline_view().data
    assert full.t0_us >= 0 and full.t1_us - full.t0_us <= max(spans) + 1e-3
    for _, s, shift in p._ranked():
        assert s.start_us + shift == 0.0


@pytest.mark.parametrize("apart_us, one_clock", [(86_400e6 - 1, True), (86_400e6, True), (86_400e6 + 1, False)])
def test_ranks_a_day_apart_share_a_clock_and_further_ones_do_not(tmp_path, apart_us, one_clock):
    """The bound of the rule above (``cluster.profile.CLOCKS_APART_US``, a day), just below, at and
    above it: two ranks of one op each, the second's first event ``apart_us`` after the first's."""
    for r, start in enumerate((1000.0, 1000.0 + apart_us)):
        t = Trace(rank=r)
        t.op("aten::mm", start, 10.0)
        t.write(tmp_path / f"r{r}.json")
    p = nbprof.load_trace(tmp_path, workers=0, progress=False)
    assert p.summary.span_us == pytest.approx(apart_us + 10.0 if one_clock else 10.0)
    assert any("not recorded on one clock" in n for n in p.meta.notes) is not one_clock


def test_ranks_on_clocks_apart_keep_them_in_the_events_and_the_saved_file(tmp_path):
    """The events of a folder (``p.events``, what ``save()`` writes) are on the folder's clock, as
    its views: ranks recorded on clocks two days apart each from its first event. They were put
    two days apart instead, so the saved file read back left the smaller rank out ("more than a
    day away from the others") and ``p.events`` disagreed with ``p.timeline()``. Oracle: the ops
    written here (rank 0: three, from 1,000 µs; rank 1: one, two days later)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    two_days_us = 2 * 86_400e6
    for r, starts in enumerate(([1000.0, 1020.0, 1040.0], [1000.0 + two_days_us + 5.0])):
        t = Trace(rank=r)
        for start in starts:
            t.op("aten::mm", start, 10.0)
        t.write(folder / f"r{r}.json")
    p = nbprof.load_trace(folder, workers=0, progress=False)
    ev = p.events
    firsts = ev.groupby("rank")["start_us"].min()
    assert firsts.tolist() == [0.0, 0.0]  # each rank from its first event, as the folder's views
    assert sorted(ev.loc[ev["rank"] == 0, "start_us"]) == [0.0, 20.0, 40.0]
    q = nbprof.load_trace(p.save(tmp_path / "merged.json"), progress=False)
    assert len(q.events) == 4 and sorted(q.events["rank"].unique()) == [0, 1]
    assert q.summary.span_us == pytest.approx(50.0)
    assert not any("day away" in n for n in q.meta.notes), q.meta.notes


def test_the_headline_names_the_rank_of_each_devices_peak(tmp_path):
    """Every rank has its own "cuda:0": the headline's "peak cuda:0 3.00 KiB" (the highest over
    the ranks) did not say whose, and gave the reserved of another rank. It names the rank and
    gives that rank's numbers, on the folder and on its merged save read back. Oracle: the
    allocator totals written here (rank 0 peaks at 2,048 B, 8,192 reserved; rank 1 at 3,072 B,
    4,096 reserved); a lone rank's headline is as before."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r, (peak, reserved) in enumerate([(2048, 8192), (3072, 4096)]):
        t = Trace(rank=r)
        t.op("aten::empty", 10.0, 5.0)
        t.memory(11.0, peak, peak, reserved)
        t.memory(12.0, -peak, 0, reserved)
        t.write(folder / f"r{r}.json")
    p = nbprof.load_trace(folder, workers=0, progress=False)
    q = nbprof.load_trace(p.save(tmp_path / "merged.json"), progress=False)
    for profile in (p, q):
        header = profile.report()._repr_mimebundle_()["text/plain"].splitlines()[0]
        assert "peak rank 1 cuda:0 3.00 KiB (reserved 4.00 KiB)" in header, header
        assert "peak cuda:0" not in header, header
    lone = nbprof.load_trace(folder / "r0.json", progress=False)
    assert "peak cuda:0 2.00 KiB (reserved 8.00 KiB)" in lone.report()._repr_mimebundle_()["text/plain"]


LINE_CELL = "<ipython-input-1-abc>"


def lines_rank(path: Path, rank: int, function_line: list) -> Path:
    """A rank saved with a line table (``nbprofLines``, as ``save()`` writes it): two ``aten::mm``
    on line 2 of cell "In [1]" (5 µs each), an ``aten::add`` on line 3 (2 µs)."""
    t = Trace(rank=rank)
    t.op("aten::mm", 10.0, 5.0)
    t.op("aten::mm", 20.0, 5.0)
    t.op("aten::add", 30.0, 2.0)
    doc = t.doc()
    doc["nbprofLines"] = {
        "line_data": {"version": 1, "method": "tracer", "cells": {LINE_CELL: "In [1]"},
                      "frames": {"file": [LINE_CELL, LINE_CELL], "line": [2, 3], "function": ["<module>", "<module>"],
                                 "function_line": function_line},
                      "stacks": [[], [0], [1]], "ops": {"external_id": [1, 2, 3], "stack": [1, 1, 2]},
                      "allocs": {"stack": [], "bytes": []}, "notes": []},
        "sources": {LINE_CELL: "x = 1\ny = torch.mm(x, x)\nz = y + 1\n"}}
    path.write_text(json.dumps(doc))
    return path


def test_a_rank_whose_lines_fail_leaves_out_its_lines_only(tmp_path):
    """A rank whose line table raises in ``lines()`` (a saved file whose frames' ``function_line``
    is text: ValueError) failed the whole folder. Now its lines are left out with a note naming the
    rank and the error; the other rank's lines (hand-counted) and every other table of both ranks
    are there."""
    lines_rank(tmp_path / "r0.json", 0, [1, 1])
    lines_rank(tmp_path / "r1.json", 1, ["a", "b"])
    p = nbprof.load_trace(tmp_path, workers=0, progress=False)
    lines = p.lines().set_index("line")
    assert lines.loc[2, "ops"] == 2 and lines.loc[2, "self_cpu_us"] == pytest.approx(10.0)  # rank 0's only
    assert lines.loc[3, "ops"] == 1 and lines.loc[3, "self_cpu_us"] == pytest.approx(2.0)
    assert list(p.lines(per_rank=True)["rank"].unique()) == [0]
    note = [n for n in p.meta.notes if "r1.json" in n]
    assert len(note) == 1 and "lines" in note[0] and "ValueError" in note[0] and "\n" not in note[0], p.meta.notes
    ka = p.key_averages().set_index("name")
    assert ka.loc["aten::mm", "count"] == 4 and ka.loc["aten::add", "count"] == 2  # both ranks' ops
    assert "Source" in p.report().html(include_library=False)
