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
from .reference import Model, read
from .synthetic import Trace

BEFORE, AFTER = "cnn_train_cuda", "cnn_cuda_toggled"


@pytest.fixture(scope="module")
def pair():
    return nbprof.load_trace(trace_path(BEFORE)), nbprof.load_trace(trace_path(AFTER))


def test_every_row_carries_both_profiles_numbers(pair):
    """Each row's before and after numbers are the rows of the two files, rebuilt in plain Python
    from their JSON (tests/reference.py), not from nbprof's own key averages."""
    b, a = pair
    c = nbprof.compare(b, a)
    assert isinstance(c, Comparison)
    t = c.table
    kb = Model(read(trace_path(BEFORE))).key_averages()
    ka = Model(read(trace_path(AFTER))).key_averages()
    keys = set(kb) | set(ka)
    assert len(t) == len(keys)
    assert set(zip(t["name"], t["kind"])) == keys
    for _, row in t.iterrows():
        key = (row["name"], row["kind"])
        for m in ("count", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "self_device_mem_bytes"):
            vb = kb[key][m] if key in kb else 0
            va = ka[key][m] if key in ka else 0
            assert row[f"{m}_before"] == pytest.approx(vb, abs=1e-6) and row[f"{m}_after"] == pytest.approx(va, abs=1e-6)
            assert row[f"{m}_change"] == pytest.approx(va - vb, abs=1e-6)
        status = "both" if key in kb and key in ka else "removed" if key in kb else "added"
        assert row["status"] == status


def _two_runs(tmp_path):
    """Before: aten::mm 3 calls (kernels 100 µs each), aten::relu 2 (10 µs each), aten::old 1
    (5 µs). After: aten::mm 2 calls (50 µs each), aten::relu 2 (10 µs each), aten::new 1 (30 µs)."""
    def trace(calls: dict[str, tuple[int, float]]) -> Trace:
        t = Trace()
        at = 0.0
        for name, (n, kernel_us) in calls.items():
            for _ in range(n):
                ext = t.op(name, at, 20)
                t.launch(f"{name[6:]}_kernel", ext, at + 1, 5, at + 10, kernel_us)
                at += 200
        return t

    before = trace({"aten::mm": (3, 100), "aten::relu": (2, 10), "aten::old": (1, 5)}).load(tmp_path, "before.json")
    after = trace({"aten::mm": (2, 50), "aten::relu": (2, 10), "aten::new": (1, 30)}).load(tmp_path, "after.json")
    return before, after


def test_changes_worked_out_by_hand(tmp_path):
    before, after = _two_runs(tmp_path)
    c = nbprof.compare(before, after)
    assert c.metric == "self_device_us"
    t = c.table[c.table["kind"] == "op"].set_index("name")
    assert t.loc["aten::mm", ["count_before", "count_after", "count_change"]].tolist() == [3, 2, -1]
    assert t.loc["aten::mm", ["self_device_us_before", "self_device_us_after", "self_device_us_change"]].tolist() == \
        pytest.approx([300, 100, -200])
    assert t.loc["aten::mm", "speedup"] == pytest.approx(3.0)
    assert t.loc["aten::relu", "self_device_us_change"] == 0 and t.loc["aten::relu", "speedup"] == pytest.approx(1.0)
    assert (t.loc["aten::old", "status"], t.loc["aten::new", "status"], t.loc["aten::mm", "status"]) == \
        ("removed", "added", "both")
    assert np.isinf(t.loc["aten::old", "speedup"]) and t.loc["aten::new", "self_device_us_after"] == 30
    assert t.loc["aten::mm", "cpu_total_us_before"] == 60 and t.loc["aten::mm", "cpu_total_us_after"] == 40
    # sorted by the size of the change: mm (-200), old (-5) and new (+30) between, relu (0) last
    assert c.table["self_device_us_change"].abs().tolist() == sorted(c.table["self_device_us_change"].abs(),
                                                                     reverse=True)
    s = c.summary
    assert s.total_before == pytest.approx(300 + 20 + 5) and s.total_after == pytest.approx(100 + 20 + 30)
    assert s.speedup == pytest.approx(325 / 150)
    assert (s.biggest_win, s.biggest_regression) == ("aten::mm", "aten::new")
    assert (s.added, s.removed) == (2, 2)  # the op and its kernel each


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
    # totals and averages include their children: the totals said are the self times'
    for metric, self_metric in (("cpu_total_us", "self_cpu_us"), ("cpu_avg_us", "self_cpu_us"),
                                ("device_total_us", "self_device_us"), ("device_avg_us", "self_device_us")):
        s = nbprof.compare(b, a, metric=metric).summary
        assert (s.total_before, s.total_after) == (getattr(b.summary, self_metric), getattr(a.summary, self_metric))
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


# ------------------------------------------------------------------------- by kernel, by range


def raw_trace(name: str) -> dict:
    import gzip
    import json

    with gzip.open(trace_path(name), "rt") as f:
        return json.load(f)


def raw_device_work(name: str) -> dict[tuple[str, str], list[float]]:
    """(name, kind) -> the durations of its kernels / copies / fills in the raw JSON."""
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    out: dict[tuple[str, str], list[float]] = {}
    for e in raw_trace(name)["traceEvents"]:
        if e.get("cat") in kinds and e.get("ph") == "X":
            out.setdefault((e["name"], kinds[e["cat"]]), []).append(float(e["dur"]))
    return out


def test_by_kernel_equals_each_traces_raw_sums(pair):
    b, a = pair
    c = nbprof.compare(b, a, by="kernel")
    assert c.metric == "device_total_us" and c.by == "kernel"
    rb, ra = raw_device_work(BEFORE), raw_device_work(AFTER)
    t = c.table
    assert set(zip(t["name"], t["kind"])) == set(rb) | set(ra) and len(t) == len(set(rb) | set(ra))
    total_b = sum(sum(v) for v in rb.values())
    total_a = sum(sum(v) for v in ra.values())
    for _, row in t.iterrows():
        key = (row["name"], row["kind"])
        db, da = rb.get(key, []), ra.get(key, [])
        assert row["count_before"] == len(db) and row["count_after"] == len(da)
        assert row["device_total_us_before"] == pytest.approx(sum(db), abs=0.01)
        assert row["device_total_us_after"] == pytest.approx(sum(da), abs=0.01)
        assert row["device_total_us_change"] == pytest.approx(sum(da) - sum(db), abs=0.01)
        assert row["device_avg_us_before"] == pytest.approx(sum(db) / len(db) if db else 0, abs=0.01)
        assert row["share_before"] == pytest.approx(sum(db) / total_b)
        assert row["share_after"] == pytest.approx(sum(da) / total_a)
        assert row["status"] == ("both" if db and da else "removed" if db else "added")
        if db and da:
            assert row["speedup"] == pytest.approx(sum(db) / sum(da), rel=1e-6)
    change = t["device_total_us_change"].abs().to_numpy()
    assert (np.diff(change) <= 1e-9).all()  # the biggest changes first
    s = c.summary
    assert s.total_before == pytest.approx(total_b, abs=0.01) and s.total_after == pytest.approx(total_a, abs=0.01)
    win = t.loc[t["device_total_us_change"].idxmin()]
    assert s.biggest_win == win["name"] and s.biggest_win_change == pytest.approx(win["device_total_us_change"])
    text = c.text()
    assert text.splitlines()[0] == "compare torch profiles by kernel: " + s.text()
    assert "total device time" in text and "Kernel" in text and "GPU time % before" in text
    assert "<table" in c.html() and "by kernel" in c.html()


def renamed_trace(tmp_path, old: str, new: str):
    """The CNN trace with every ``old`` range named ``new``: its rows go, new ones come."""
    import json

    doc = raw_trace(BEFORE)
    for e in doc["traceEvents"]:
        if e.get("name") == old and e.get("cat") in ("user_annotation", "gpu_user_annotation"):
            e["name"] = new
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(doc))
    return path


def test_by_range_equals_each_traces_raw_ranges(tmp_path):
    """The CNN trace against itself with its "optimizer" ranges renamed: the raw JSON's user
    annotations give each label's count and total time."""
    b = nbprof.load_trace(trace_path(BEFORE))
    a = nbprof.load_trace(renamed_trace(tmp_path, "optimizer", "optimizer_v2"))
    c = nbprof.compare(b, a, by="range")
    assert c.metric == "total_us"
    raw: dict[str, list[float]] = {}
    for e in raw_trace(BEFORE)["traceEvents"]:
        if e.get("cat") == "user_annotation":
            raw.setdefault(e["name"], []).append(float(e["dur"]))
    t = c.table.set_index("path")
    sep = " › "
    for label in ("train_step", "forward", "backward", "optimizer"):
        path = label if label == "train_step" else f"train_step{sep}{label}"
        row = t.loc[path]
        assert row["count_before"] == len(raw[label])
        assert row["total_us_before"] == pytest.approx(sum(raw[label]), abs=0.01)
        if label == "optimizer":
            assert row["status"] == "removed" and row["count_after"] == 0 and row["speedup"] == math.inf
            new = t.loc[f"train_step{sep}optimizer_v2"]
            assert new["status"] == "added" and new["count_after"] == len(raw[label]) and new["speedup"] == 0
            assert new["total_us_after"] == pytest.approx(sum(raw[label]), abs=0.01)
        else:
            assert row["status"] == "both" and row["count_after"] == row["count_before"]
            assert row["total_us_change"] == pytest.approx(0, abs=1e-9)
    nested = [p for p in t.index if p.startswith(f"train_step{sep}optimizer{sep}")]
    assert nested and (t.loc[nested, "status"] == "removed").all()  # what ran under it moves with it
    # the totals add the outermost ranges: train_step, the same in both
    assert c.summary.total_before == pytest.approx(sum(raw["train_step"]), abs=0.01)
    assert c.summary.total_after == pytest.approx(c.summary.total_before)
    assert c.text().splitlines()[0].startswith("compare torch profiles by range: total range time")


def test_by_default_is_the_key_averages(pair):
    pd.testing.assert_frame_equal(nbprof.compare(*pair).table, nbprof.compare(*pair, by="op").table)
    assert nbprof.compare(*pair).by == "op"


@pytest.mark.parametrize("kwargs, match", [
    ({"by": "module"}, "by must be one of op, kernel, range"),
    ({"by": "kernel", "group_by": "shape"}, "group_by='shape' groups the key averages"),
    ({"by": "kernel", "metric": "self_cpu_us"}, "metric for by='kernel' must be one of"),
    ({"by": "range", "metric": "share_of_span"}, "metric for by='range' must be one of"),
])
def test_by_errors_are_one_line(pair, kwargs, match):
    with pytest.raises(OptionError, match=match) as info:
        nbprof.compare(*pair, **kwargs)
    assert "\n" not in str(info.value)


def test_by_kernel_is_for_torch_profiles(shell):
    run(shell, "%%cprofile -q -o cp\nx = sum(range(10))")
    cp = shell.user_ns["cp"]
    with pytest.raises(OptionError, match="by='kernel' is for torch profiles"):
        nbprof.compare(cp, cp, by="kernel")


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
