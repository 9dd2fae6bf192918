"""What seed 67's sample of mutants (docs/testing.md) showed no test held in ``nbprof.analysis``,
each against an answer of its own: the workers table's columns as documented, SM efficiency by
hand beside a kernel whose "blocks per SM" is -1e400 (which it fixed: the -inf spoiled every later
device), more than 16 equally hot functions and equally long small-grid kernels (numpy's default
sort keeps ties in order only up to 16 elements), a line record written by hand without cells."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from .synthetic import Trace
from .test_boundaries import found, span_markers
from .test_data_loading_findings import loop_record, profile_of


def test_the_workers_table_has_its_documented_columns_and_nothing_else():
    """Two workers, four batches: the workers table (the Data loading tab's) has one row per
    worker, and exactly the columns ``WORKER_DTYPES`` documents (the empty table's), in that
    order: no leftover column of the rows' order before sorting."""
    rec = loop_record([300.0, 100.0, 200.0, 50.0])
    w = profile_of(rec)._data_loading.workers
    assert list(w.columns) == ["loader", "worker", "pid", "epoch", "started_us", "batches", "samples", "make_us",
                               "make_mean_us", "functions"]
    assert w["worker"].tolist() == [0, 1] and w.index.tolist() == [0, 1]


def test_a_negative_infinite_blocks_per_sm_spoils_no_devices_sm_efficiency(tmp_path):
    """Two GPUs, one kernel each: cuda:0's from 5 to 25 µs with "blocks per SM" written -1e400
    (JSON reads it as -inf; no real writer says it), cuda:1's from 40 to 100 µs with 0.5. The span
    is 0 to 100 µs, so cuda:1's est. SM efficiency is 0.5 x 60 / 100 = 0.3 by hand, and cuda:0's
    kernel, with a negative estimate, occupies no SM: 0. Before the fix the -inf made the running
    sum NaN from there on: cuda:1 read NaN, with a RuntimeWarning."""
    t = Trace()
    t.device_properties.append({"id": 1, "name": "Fake GPU", "totalGlobalMem": 80 * 2**30})
    ext = t.op("aten::mm", 0, 10)
    t.launch("gemm", ext, 1, 2, 5, 20, blocks_per_sm=0.75)
    ext = t.op("aten::add", 30, 10)
    t.launch("add_kernel", ext, 31, 2, 40, 60, device=1, blocks_per_sm=0.5)
    path = tmp_path / "trace.json"
    text = json.dumps(t.doc())
    assert text.count('"blocks per SM": 0.75') == 1
    path.write_text(text.replace('"blocks per SM": 0.75', '"blocks per SM": -1e400'))
    import nbprof

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = nbprof.load_trace(path)
        assert p.events["blocks_per_sm"].min() == -np.inf  # the estimate as read
        d = p.device_stats.devices.set_index("device")
    assert d.loc["cuda:1", "span_us"] == pytest.approx(100.0)
    assert d.loc["cuda:1", "sm_efficiency"] == pytest.approx(0.3)
    assert d.loc["cuda:0", "sm_efficiency"] == 0.0


def _hot_profile():
    """17 functions each called 20,000 times from ``<module>``: the first 6 for 0.15 s of a 1 s
    run, the other 11 for 0.25 s (a chain's cumulative times can all be that large)."""
    from nbprof.model import PythonProfile

    main = ("main.py", 1, "<module>")
    shares = [0.15] * 6 + [0.25] * 11
    raw = {main: (1, 1, 1.0 - 0.001 * len(shares), 1.0, {})}
    for i, ct in enumerate(shares):
        raw[("main.py", 10 * (i + 1), f"f{i:02d}")] = (20_000, 20_000, 0.001, ct, {main: (20_000, 20_000, 0.001, ct)})
    return PythonProfile(raw)


def test_equally_hot_functions_are_reported_in_the_tables_order():
    """Of 17 hot functions (more than numpy's default sort keeps ties in order for), the 11 with
    25 % of the time tie; the three reported are the first three of them in the stats table:
    f06, f07, f08, each "medium" (25 % < 30 %)."""
    p = _hot_profile()
    assert p.stats["function"].tolist()[7:10] == ["f06", "f07", "f08"]  # the table's order, as written
    got = found(p, "hot_function")
    assert [ev["function"] for _, ev in got] == ["f06", "f07", "f08"]
    assert [sev for sev, _ in got] == ["medium"] * 3
    assert [ev["share"] for _, ev in got] == [pytest.approx(0.25)] * 3


def test_small_grid_names_the_first_launched_of_equally_long_kernels(tmp_path):
    """17 kernels of 0.5 blocks per SM, one after another (more than numpy's default sort keeps
    ties in order for): kernel_00 to kernel_05 run 10 µs, kernel_06 to kernel_16 run 20 µs. The
    three named are the biggest, equal times by first launch: kernel_06, kernel_07, kernel_08."""
    t = Trace()
    span_markers(t, 1000)
    gpu = 10.0
    for i in range(17):
        dur = 10.0 if i < 6 else 20.0
        ext = t.op("aten::relu", gpu - 5, 2)
        t.launch(f"kernel_{i:02d}", ext, gpu - 4, 1, gpu, dur, blocks_per_sm=0.5)
        gpu += dur + 5
    [(_, ev)] = found(t.load(tmp_path), "small_grid")
    assert [k["kernel"] for k in ev["top_kernels"]] == ["kernel_06", "kernel_07", "kernel_08"]
    assert [k["kernel_us"] for k in ev["top_kernels"]] == [pytest.approx(20.0)] * 3
    assert ev["small_grid_us"] == pytest.approx(6 * 10 + 11 * 20)


def test_a_line_record_without_cells_has_none():
    """A line record written by hand, as ``read_lines`` writes it but without its optional
    ``cells`` and ``calls``: one op (external id 7) and one 4,096-byte allocation on the stack of
    model.py line 12 (in ``forward``, whose code spans lines 11 to 14), nothing for the tracer to
    join. The saved form keeps them as they are, with no cells and no notes."""
    from nbprof.analysis.lines import finish_line_data
    from nbprof.collect.lines import LINE_DATA_VERSION

    none = np.zeros(0, np.int64)
    raw = {"version": LINE_DATA_VERSION, "method": "tracer",
           "frames": [["/work/model.py", 12, "forward"]], "stacks": [[], [0]],
           "ops": {"external_id": [7], "stack": [1], "join": [-1], "since": [0], "start": [100], "bound": [100],
                   "orphan": [False]},
           "allocs": {"stack": [1], "join": [-1], "since": [0], "start": [150], "bound": [150], "bytes": [4096],
                      "orphan": [False]},
           "tracer": {"time": none, "code": none, "line": none},
           "codes": {10: ("/work/model.py", "forward", 11)}, "code_spans": {10: (11, 14)}}
    data = finish_line_data(raw)
    assert data["cells"] == {}
    assert data["frames"] == {"file": ["/work/model.py"], "line": [12], "function": ["forward"], "function_line": [11]}
    assert data["stacks"] == [[], [0]]
    assert data["ops"] == {"external_id": [7], "stack": [1]}
    assert data["allocs"] == {"stack": [1], "bytes": [4096]}
    assert data["notes"] == [] and data["loops"] == []
