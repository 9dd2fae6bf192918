"""nbprof.compare: two profiles of one kind, row by row, against each profile's own tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.comparison import Comparison
from nbprof.errors import OptionError

from .conftest import needs_torch, run, trace_path

BEFORE, AFTER = "cnn_train_cuda", "cnn_cuda_toggled"


@pytest.fixture(scope="module")
def pair():
    return nbprof.load_trace(trace_path(BEFORE)), nbprof.load_trace(trace_path(AFTER))


def test_every_row_carries_both_profiles_numbers(pair):
    b, a = pair
    c = nbprof.compare(b, a)
    assert isinstance(c, Comparison)
    t = c.table
    kb = b.key_averages().set_index(["name", "kind"])
    ka = a.key_averages().set_index(["name", "kind"])
    keys = set(kb.index) | set(ka.index)
    assert len(t) == len(keys)
    assert set(zip(t["name"], t["kind"])) == keys
    for _, row in t.iterrows():
        key = (row["name"], row["kind"])
        for m in ("count", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "self_device_mem_bytes"):
            vb = kb.loc[key, m] if key in kb.index else 0
            va = ka.loc[key, m] if key in ka.index else 0
            assert row[f"{m}_before"] == pytest.approx(vb) and row[f"{m}_after"] == pytest.approx(va)
            assert row[f"{m}_change"] == pytest.approx(va - vb)
        status = "both" if key in kb.index and key in ka.index else "removed" if key in kb.index else "added"
        assert row["status"] == status


def test_main_metric_sorting_speedup_and_summary(pair):
    b, a = pair
    c = nbprof.compare(b, a)
    assert c.metric == "self_device_us"  # both profiles have kernels
    t = c.table
    change = t["self_device_us_change"].abs().to_numpy()
    assert (np.diff(change) <= 1e-9).all()
    both = t[(t["self_device_us_before"] > 0) & (t["self_device_us_after"] > 0)]
    assert np.allclose(both["speedup"], both["self_device_us_before"] / both["self_device_us_after"])
    gone = t[(t["self_device_us_before"] > 0) & (t["self_device_us_after"] == 0)]
    assert np.isinf(gone["speedup"]).all()
    s = c.summary
    assert s.total_before == pytest.approx(b.summary.self_device_us)
    assert s.total_after == pytest.approx(a.summary.self_device_us)
    assert s.speedup == pytest.approx(b.summary.self_device_us / a.summary.self_device_us)
    ops = t[t["kind"] == "op"]
    assert s.biggest_win == ops.loc[ops["self_device_us_change"].idxmin(), "name"]
    assert s.biggest_regression == ops.loc[ops["self_device_us_change"].idxmax(), "name"]
    assert s.added == (t["status"] == "added").sum() and s.removed == (t["status"] == "removed").sum()
    text = s.text()
    assert text.startswith("total self CUDA ") and "→" in text and f"{s.speedup:.2f}x" in text
    assert f"biggest win {s.biggest_win}" in text


def test_cpu_metric_and_torch_names(pair):
    b, a = pair
    c = nbprof.compare(b, a, metric="self_cpu_time_total")  # torch's name for self_cpu_us
    assert c.metric == "self_cpu_us"
    assert c.summary.total_before == pytest.approx(b.summary.self_cpu_us)
    assert c.summary.text().startswith("total self CPU ")
    c = nbprof.compare(b, a, metric="count")
    assert c.table["count_change"].abs().is_monotonic_decreasing
    with pytest.raises(OptionError):
        nbprof.compare(b, a, metric="nonsense")


def test_a_profile_against_itself_changes_nothing(pair):
    b, _ = pair
    c = nbprof.compare(b, b)
    t = c.table
    assert (t["status"] == "both").all()
    changes = [col for col in t.columns if col.endswith("_change")]
    assert (t[changes] == 0).all().all()
    nonzero = t["self_device_us_before"] > 0
    assert (t.loc[nonzero, "speedup"] == 1).all() and t.loc[~nonzero, "speedup"].isna().all()
    assert c.summary.speedup == 1 and c.summary.biggest_win is None and c.summary.biggest_regression is None


def test_group_by_shape(tmp_path):
    p = nbprof.load_trace(trace_path("two_streams"))
    c = nbprof.compare(p, p, group_by="shape")
    shapes = p.key_averages("shape")
    assert len(c.table) == len(shapes)
    assert set(zip(c.table["name"], c.table["input_shapes"].astype(str))) == set(
        zip(shapes["name"], shapes["input_shapes"].astype(str)))
    assert "Input shapes" in c.text()
    with pytest.raises(OptionError, match="--shapes"):
        nbprof.compare(p, nbprof.load_trace(trace_path("cnn_cuda_toggled")), group_by="shape")


def test_mixed_kinds_are_a_one_line_error(pair, shell):
    run(shell, "%%cprofile -q -o cp\nx = sum(range(10))")
    with pytest.raises(OptionError) as info:
        nbprof.compare(pair[0], shell.user_ns["cp"])
    msg = str(info.value)
    assert "same kind" in msg and "torch profile" in msg and "cProfile" in msg and "\n" not in msg
    with pytest.raises(OptionError, match="pass a TorchProfile"):
        nbprof.compare(pair[0], 42)


def test_paths_work_as_profiles(pair, tmp_path):
    b, a = pair
    c = nbprof.compare(trace_path(BEFORE), str(trace_path(AFTER)))
    pd.testing.assert_frame_equal(c.table, nbprof.compare(b, a).table)


def test_rendering(pair):
    c = nbprof.compare(*pair)
    bundle = c._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    text = bundle["text/plain"]
    assert text.splitlines()[0] == "compare torch profiles: " + c.summary.text()
    assert "Speed-up" in text and f"20 of {len(c.table)} rows" in text
    assert "<table" in bundle["text/html"] and "biggest win" in bundle["text/html"]
    assert len(c.text(limit=0).splitlines()) > len(c.table)


def test_nbprof_compare_stays_a_function(pair):
    """The module is nbprof.comparison, so importing it cannot shadow the function."""
    import types

    import nbprof.comparison  # noqa: F401

    assert isinstance(nbprof.compare, types.FunctionType)
    for _ in range(2):
        assert isinstance(nbprof.compare(*pair), Comparison)


# ---------------------------------------------------------------------------------------- cProfile


CELL_BEFORE = """%%cprofile -q -o before
def work(n):
    return sorted([str(i) for i in range(n)])
def helper():
    return [work(1000) for _ in range(20)]
helper()
"""
CELL_AFTER = """%%cprofile -q -o after
def work(n):
    # edited: a comment moves the lines
    return [str(i) for i in range(n)]
def helper():
    return [work(1000) for _ in range(5)]
helper()
"""


def test_python_profiles_match_functions_across_cells(shell):
    run(shell, CELL_BEFORE)
    run(shell, CELL_AFTER)
    b, a = shell.user_ns["before"], shell.user_ns["after"]
    c = nbprof.compare(b, a)
    assert c.kind == "python" and c.metric == "tottime_s"
    t = c.table.set_index("function")
    # the cell functions matched although their file names and line numbers differ
    assert t.loc["work", "status"] == "both"
    assert (t.loc["work", "ncalls_before"], t.loc["work", "ncalls_after"]) == (20, 5)
    assert t.loc["helper", "ncalls_change"] == 0
    sorted_row = t.loc["<built-in method builtins.sorted>"]
    assert (sorted_row["ncalls_before"], sorted_row["ncalls_after"], sorted_row["status"]) == (20, 0, "removed")
    # numbers are pstats'
    sb = b.stats.set_index("function")
    assert t.loc["work", "tottime_s_before"] == pytest.approx(sb.loc["work", "tottime_s"])
    assert c.summary.total_before == pytest.approx(b.total_s)
    assert c.summary.total_after == pytest.approx(a.total_s)
    assert c.summary.speedup == pytest.approx(b.total_s / a.total_s)
    assert c.summary.totals["ncalls"] == (b.stats["ncalls"].sum(), a.stats["ncalls"].sum())
    text = c.text()
    assert text.startswith("compare cProfile profiles: total tottime ")
    assert "work" in text


def test_prof_files(shell, tmp_path):
    run(shell, CELL_BEFORE)
    b = shell.user_ns["before"]
    path = b.dump(tmp_path / "b.prof")
    c = nbprof.compare(path, b)
    assert (c.table["tottime_s_change"] == 0).all()
    assert math.isclose(c.summary.speedup, 1.0)
    with pytest.raises(OptionError, match="group_by"):
        nbprof.compare(b, b, group_by="shape")


@needs_torch
def test_live_before_and_after(shell):
    """A real optimization: 200 small matmuls become one batched matmul."""
    run(shell, "%%torchprof -q --no-cuda -o slow\nimport torch\nx = torch.randn(200, 16, 16)\n"
               "ys = [x[i] @ x[i] for i in range(200)]")
    run(shell, "%%torchprof -q --no-cuda -o fast\nimport torch\nx = torch.randn(200, 16, 16)\nys = x @ x")
    c = nbprof.compare(shell.user_ns["slow"], shell.user_ns["fast"], metric="count")
    t = c.table.set_index("name")
    assert t.loc["aten::mm", "count_before"] == 200 and t.loc["aten::mm", "status"] == "removed"
    assert t.loc["aten::bmm", "count_after"] == 1
    assert t.loc["aten::select", "count_before"] == 400
