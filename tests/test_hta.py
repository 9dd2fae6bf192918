"""nbprof's ``hta_*`` numbers equal HTA's (HolisticTraceAnalysis 0.5.0) where users compare: its idle
time breakdown per stream (``ranks().hta_idle``, summed per rank in ``ranks().table``), its temporal
breakdown and comm-comp overlap (``hta_breakdown_*``, ``hta_overlap_pct``), on HTA's sample traces,
the recorded H100 traces and a trace made to exercise HTA's rules (``tests/data/hta_cases``).

The oracle, tests/data/hta_oracle.json, is HTA's own output on those files, written by
``scripts/hta_oracle.py`` in a Python with HTA installed (its docstring: the command; HTA is too
heavy a dependency for the tests). HTA rounds its idle times to 2 decimals and computes on float
µs near 1e12 (errors of ~1 ns): equal within 0.011 µs. nbprof's own definitions keep their tests
(tests/test_cluster_analyses.py) and differ where they should (the device's idle time, not the
streams' sum; a 2 µs kernel-wait threshold; stream waits are not work)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import nbprof

from .conftest import DATA

ORACLE = json.loads((DATA / "hta_oracle.json").read_text())
TRACES = sorted(ORACLE["traces"])
TOL = 0.011


@pytest.mark.parametrize("name", TRACES)
def test_idle_time_breakdown_per_stream_equals_htas(name):
    hta = pd.DataFrame(ORACLE["traces"][name]["idle_time_breakdown"])
    p = nbprof.load_trace(DATA / name)
    mine = p.ranks().hta_idle.set_index(["stream", "idle_category"])["idle_time_us"]
    theirs = hta.set_index(["stream", "idle_category"])["idle_time"]
    assert set(mine.index.get_level_values(0)) == set(theirs.index.get_level_values(0))  # the same streams
    for key in sorted(set(mine.index) | set(theirs.index)):
        assert mine.get(key, 0.0) == pytest.approx(theirs.get(key, 0.0), abs=TOL), key
    # the rank's row: the sums over its streams, beside nbprof's own device-level split
    row = p.ranks().table.iloc[0]
    for cat in ("host_wait", "kernel_wait", "other"):
        total = float(theirs[theirs.index.get_level_values(1) == cat].sum())
        assert row[f"hta_idle_{cat}_us"] == pytest.approx(total, abs=TOL * len(theirs))
    assert {"idle_host_wait_us", "idle_kernel_wait_us", "idle_other_us"} <= set(row.index)


@pytest.mark.parametrize("name", TRACES)
def test_temporal_breakdown_and_overlap_equal_htas(name):
    temporal = ORACLE["traces"][name]["temporal_breakdown"][0]
    overlap = ORACLE["traces"][name]["comm_comp_overlap"][0]["comp_comm_overlap_pctg"]
    row = nbprof.load_trace(DATA / name).ranks().table.iloc[0]
    assert row["hta_breakdown_idle_us"] == pytest.approx(temporal["idle_time(us)"], abs=TOL)
    assert row["hta_breakdown_compute_us"] == pytest.approx(temporal["compute_time(us)"], abs=TOL)
    assert row["hta_breakdown_non_compute_us"] == pytest.approx(temporal["non_compute_time(us)"], abs=TOL)
    if overlap is None:  # no communication: NaN both
        assert pd.isna(row["hta_overlap_pct"])
    else:
        assert row["hta_overlap_pct"] == pytest.approx(overlap, abs=0.006)


def test_where_htas_definitions_differ_from_nbprofs():
    """On the made trace: HTA counts a stream wait as compute and a kernel launched twice twice;
    its idle split sums the streams and calls a 50 µs gap of queued work "other" but a 10 µs one
    "kernel wait" (nbprof: 2 µs); nbprof's device-level split adds up to the device's idle time."""
    p = nbprof.load_trace(DATA / "hta_cases.trace.json.gz")
    row = p.ranks().table.iloc[0]
    assert row["hta_breakdown_idle_us"] < row["breakdown_idle_us"]  # the stream waits fill HTA's gaps
    assert row["idle_host_wait_us"] + row["idle_kernel_wait_us"] + row["idle_other_us"] == \
        pytest.approx(row["breakdown_idle_us"])
    hta_total = row["hta_idle_host_wait_us"] + row["hta_idle_kernel_wait_us"] + row["hta_idle_other_us"]
    assert hta_total > row["breakdown_idle_us"]  # two streams idle at once count twice
    assert row["idle_kernel_wait_us"] == 0.0 and row["hta_idle_kernel_wait_us"] == pytest.approx(30.0 - 20.0)


def test_a_folder_of_ranks_has_htas_numbers_per_rank(tmp_path):
    import shutil

    for r, name in enumerate(("cnn_train_cuda.trace.json.gz", "two_streams.trace.json.gz")):
        doc = json.loads(__import__("gzip").open(DATA / name).read())
        doc["distributedInfo"] = {"rank": r, "world_size": 2}
        (tmp_path / f"rank{r}.json").write_text(json.dumps(doc))
    p = nbprof.load_trace(tmp_path, workers=0, progress=False)
    assert "_merged" not in p.__dict__
    idle = p.ranks().hta_idle
    for r, name in enumerate(("cnn_train_cuda.trace.json.gz", "two_streams.trace.json.gz")):
        theirs = pd.DataFrame(ORACLE["traces"][name]["idle_time_breakdown"]).set_index(["stream", "idle_category"])
        mine = idle[idle["rank"] == r].set_index(["stream", "idle_category"])["idle_time_us"]
        for key, value in theirs["idle_time"].items():
            assert mine[key] == pytest.approx(value, abs=TOL)
    shutil.rmtree(tmp_path)
