"""What seed 70's sample of mutants (docs/testing.md) showed no test held in the tables of a
profile: ``range_ops(label)``'s frame is the documented four columns on a fresh 0..n-1 index,
checked against torch's own ``key_averages()`` of the recorded training run."""

from __future__ import annotations

import nbprof

from .conftest import oracle, trace_path

# ------------------------------------------------------------------- model.TorchProfile.range_ops


def test_range_ops_of_a_label_is_its_four_columns_on_a_fresh_index_by_torch_s_self_cpu_time():
    """``range_ops("train_step")`` on the recorded CNN training run is ``name, count,
    self_cpu_us, self_device_us`` (the columns its doc names, no left-over index column) on the
    index 0..n-1, its rows by self CPU time: every operator ran in a train_step, so its first
    five are torch's ``key_averages()`` CPU rows with the most self CPU time (aten::fill_ 2257 µs,
    then 625, 563, 507, 503 µs: no ties)."""
    name = "cnn_train_cuda"
    ops = nbprof.load_trace(trace_path(name)).range_ops("train_step")
    assert list(ops.columns) == ["name", "count", "self_cpu_us", "self_device_us"]
    assert ops.index.tolist() == list(range(len(ops)))
    theirs = {row["key"]: row["self_cpu_time_total"] for row in oracle(name)["rows"]
              if row["device_type"].endswith("CPU")}
    expected = sorted(ops["name"], key=lambda n: -theirs[n])[:5]
    assert expected[0] == "aten::fill_"
    assert ops["name"].tolist()[:5] == expected
