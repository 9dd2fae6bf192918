"""The Ranges view: record_function labels with counts, times and the device time under them.

The device time per label is checked against an independent computation on the raw trace
file: every kernel whose launch call (matched by correlation id) starts while an instance of the
label is open in the same process, each kernel once per label.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import nbprof
from nbprof.analysis.ranges import PATH_SEP, RANGE_COLUMNS

from .conftest import needs_torch, oracle, run, trace_path
from .synthetic import Trace


def raw(name):
    with gzip.open(trace_path(name)) as f:
        return json.load(f)["traceEvents"]


def test_ranges_of_the_training_run_form_a_tree():
    r = nbprof.load_trace(trace_path("cnn_train_cuda")).ranges()
    assert list(r.columns) == list(RANGE_COLUMNS)
    assert r["path"].tolist() == [
        "train_step",
        "train_step › forward",
        "train_step › backward",
        "train_step › optimizer",
        "train_step › optimizer › Optimizer.step#SGD.step",
        "train_step › optimizer › Optimizer.zero_grad#SGD.zero_grad",
    ]
    assert r["depth"].tolist() == [0, 1, 1, 1, 2, 2]
    assert r["label"].tolist() == [p.split(PATH_SEP)[-1] for p in r["path"]]


def test_counts_and_times_equal_the_raw_file_and_torch():
    name = "cnn_train_cuda"
    p = nbprof.load_trace(trace_path(name))
    r = p.ranges().set_index("label")
    ann = [e for e in raw(name) if e.get("cat") == "user_annotation"]
    theirs = {row["key"]: row for row in oracle(name)["rows"] if row["device_type"].endswith("CPU")}
    for label, row in r.iterrows():
        durs = [e["dur"] for e in ann if e["name"] == label]
        assert row["count"] == len(durs) == theirs[label]["count"]
        assert row["total_us"] == pytest.approx(sum(durs), abs=1e-6)
        assert row["total_us"] == pytest.approx(theirs[label]["cpu_time_total"], abs=0.01)
        assert row["mean_us"] == pytest.approx(np.mean(durs))
        assert row["min_us"] == pytest.approx(min(durs)) and row["max_us"] == pytest.approx(max(durs))
        assert row["share_of_span"] == pytest.approx(sum(durs) / p.summary.span_us)


def test_device_time_under_each_label_is_each_kernel_once():
    name = "cnn_train_cuda"
    ev = raw(name)
    launch_at = {e["args"]["correlation"]: (e["ts"], e["pid"]) for e in ev
                 if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation")}
    work = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ann = [e for e in ev if e.get("cat") == "user_annotation"]
    r = nbprof.load_trace(trace_path(name)).ranges().set_index("label")
    for label, row in r.iterrows():
        instances = [(a["ts"], a["ts"] + a["dur"], a["pid"]) for a in ann if a["name"] == label]
        under = []
        for k in work:
            t, pid = launch_at[k["args"]["correlation"]]
            if any(s <= t < e and p == pid for s, e, p in instances):
                under.append(k)
        assert row["kernels"] == len(under), label
        assert row["device_us"] == pytest.approx(sum(k["dur"] for k in under), abs=1e-6), label
    total = sum(k["dur"] for k in work)
    # every kernel ran inside a train_step; no label exceeds the kernel time that exists
    assert r.loc["train_step", "device_us"] == pytest.approx(total)
    assert (r["device_us"] <= total + 1e-9).all()
    # backward's kernels come from autograd's own thread: torch's table (own-thread descendants
    # only) has 3 µs for it, we have the real work
    assert r.loc["backward", "device_us"] > 100 * 3.04


def test_label_on_one_thread_equals_torchs_device_total_counted_once():
    """forward launches its kernels itself: our number is the tree's device total, which is
    torch's minus the kernels torch counts twice under profiler-overhead events."""
    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    ev = p.events
    fwd = ev[(ev["kind"] == "annotation") & (ev["name"] == "forward")]
    r = p.ranges().set_index("label")
    assert r.loc["forward", "device_us"] == pytest.approx(fwd["device_total_us"].sum(), abs=1e-6)
    theirs = [row for row in oracle("cnn_train_cuda")["rows"]
              if row["key"] == "forward" and row["device_type"].endswith("CPU")][0]
    assert r.loc["forward", "device_us"] <= theirs["device_time_total"] + 1e-6
    opt = [row for row in oracle("cnn_train_cuda")["rows"]
           if row["key"] == "Optimizer.step#SGD.step" and row["device_type"].endswith("CPU")][0]
    assert r.loc["Optimizer.step#SGD.step", "device_us"] == pytest.approx(opt["device_time_total"], abs=0.01)


def test_gpu_span_is_the_gpu_annotation_time_not_kernel_time():
    name = "cnn_train_cuda"
    gpu = [e for e in raw(name) if e.get("cat") == "gpu_user_annotation"]
    r = nbprof.load_trace(trace_path(name)).ranges().set_index("label")
    for label in ("forward", "backward", "Optimizer.step#SGD.step"):
        assert r.loc[label, "gpu_span_us"] == pytest.approx(sum(e["dur"] for e in gpu if e["name"] == label))
    # torch's GPU "forward" row: the span as self CUDA time
    theirs = [row for row in oracle(name)["rows"] if row["key"] == "forward" and row["device_type"].endswith("CUDA")][0]
    assert r.loc["forward", "gpu_span_us"] == pytest.approx(theirs["self_device_time_total"], abs=0.01)
    assert r.loc["train_step", "gpu_span_us"] == 0


def test_same_label_under_different_parents_are_different_rows(tmp_path):
    t = Trace()
    for i, outer in enumerate(["train", "eval", "train"]):
        base = i * 100.0
        t.annotation(outer, base, 50)
        t.annotation("forward", base + 10, 20)
        t.op("aten::mm", base + 12, 5)
    t.annotation("forward", 400, 10)  # at the top
    r = t.load(tmp_path).ranges()
    assert r["path"].tolist() == ["train", "train › forward", "eval", "eval › forward", "forward"]
    assert r["count"].tolist() == [2, 2, 1, 1, 1]
    assert r["total_us"].tolist() == [100.0, 40.0, 50.0, 20.0, 10.0]
    assert r["device_us"].tolist() == [0.0] * 5


def test_profile_without_labels_has_an_empty_table():
    r = nbprof.load_trace(trace_path("two_streams")).ranges()
    assert list(r.columns) == list(RANGE_COLUMNS) and len(r) == 0


@needs_torch
def test_live_nested_labels_equal_torch(shell):
    code = """%%torchprof -q --no-cuda -o p
import torch
from torch.profiler import record_function
x = torch.randn(64, 64)
with record_function("outer"):
    for i in range(3):
        with record_function("inner"):
            y = torch.mm(x, x)
with record_function("other"):
    z = x.relu()
"""
    result, _ = run(shell, code)
    assert result.error_in_exec is None
    p = shell.user_ns["p"]
    r = p.ranges()
    assert r["path"].tolist() == ["outer", "outer › inner", "other"]
    theirs = {a.key: a for a in p.profiler.key_averages()}
    for label in ("outer", "inner", "other"):
        row = r[r["label"] == label].iloc[0]
        assert row["count"] == theirs[label].count
        assert row["total_us"] == pytest.approx(theirs[label].cpu_time_total, abs=0.01)
    assert (r["device_us"] == 0).all()


def test_share_of_parent_and_of_the_outermost_range_from_the_raw_file():
    name = "cnn_train_cuda"
    ann = [e for e in raw(name) if e.get("cat") == "user_annotation"]
    total = {}
    for e in ann:
        total[e["name"]] = total.get(e["name"], 0.0) + e["dur"]
    r = nbprof.load_trace(trace_path(name)).ranges().set_index("label")
    parent_of = {"forward": "train_step", "backward": "train_step", "optimizer": "train_step",
                 "Optimizer.step#SGD.step": "optimizer", "Optimizer.zero_grad#SGD.zero_grad": "optimizer"}
    for label, row in r.iterrows():
        if label == "train_step":
            assert np.isnan(row["share_of_parent"]) and row["share_of_root"] == 1.0
            continue
        assert row["share_of_parent"] == pytest.approx(total[label] / total[parent_of[label]])
        assert row["share_of_root"] == pytest.approx(total[label] / total["train_step"])


def test_operators_under_each_range_from_the_raw_file():
    """Every op of the process that starts while an instance of the label is open, by name: count
    and self CPU time (its duration minus its direct child ops', from the file's nesting)."""
    name = "cnn_train_cuda"
    ev = raw(name)
    p = nbprof.load_trace(trace_path(name))
    # self CPU time from the file: an event's duration minus its direct children's on its thread
    # (ops, ranges and runtime calls nest, as in torch's tree; the profiler's overhead events,
    # "pid -1, tid 0" in the file, come out of the main thread's op, as torch does)
    main = next(e["pid"] for e in ev if e.get("cat") == "cpu_op")
    cpu = [dict(e, pid=main, tid=main) if e.get("cat") == "overhead" else e for e in ev
           if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "overhead")
           and e.get("ph") == "X"]
    cpu.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    parent = {}
    stack = []
    for e in cpu:
        while stack and not (stack[-1]["pid"] == e["pid"] and stack[-1]["tid"] == e["tid"]
                             and e["ts"] < stack[-1]["ts"] + stack[-1]["dur"]):
            stack.pop()
        parent[id(e)] = stack[-1] if stack else None
        stack.append(e)
    # torch's rule: an only child with its parent's name is merged into it (counted once)
    merged = set()
    while True:
        children = {}
        for e in cpu:
            if id(e) not in merged and parent[id(e)] is not None:
                children.setdefault(id(parent[id(e)]), []).append(e)
        new = [e for e in cpu if id(e) not in merged and parent[id(e)] is not None
               and parent[id(e)]["name"] == e["name"] and len(children[id(parent[id(e)])]) == 1]
        if not new:
            break
        for e in new:
            merged.add(id(e))
            for c in children.get(id(e), []):
                parent[id(c)] = parent[id(e)]
    self_us = {id(e): e["dur"] - sum(c["dur"] for c in children.get(id(e), [])) for e in cpu}
    ops = [e for e in cpu if e["cat"] == "cpu_op" and id(e) not in merged]
    ann = [e for e in ev if e.get("cat") == "user_annotation"]
    table = p.range_ops()
    assert list(table.columns) == ["path", "label", "name", "count", "self_cpu_us", "self_device_us"]
    for label in ("train_step", "forward", "backward", "Optimizer.step#SGD.step"):
        instances = [(a["ts"], a["ts"] + a["dur"], a["pid"]) for a in ann if a["name"] == label]
        expected: dict[str, list] = {}
        for e in ops:
            if any(s <= e["ts"] < t and pid == e["pid"] for s, t, pid in instances):
                expected.setdefault(e["name"], []).append(self_us[id(e)])
        ours = p.range_ops(label).set_index("name")
        assert set(ours.index) == set(expected), label
        for op, selfs in expected.items():
            assert ours.loc[op, "count"] == len(selfs), (label, op)
            assert ours.loc[op, "self_cpu_us"] == pytest.approx(sum(selfs), abs=1e-3), (label, op)
        assert ours["self_cpu_us"].is_monotonic_decreasing
    # every op ran in a train_step: its operators' self times are torch's own
    theirs = {row["key"]: row for row in oracle(name)["rows"] if row["device_type"].endswith("CPU")}
    step = p.range_ops("train_step").set_index("name")
    for op, row in step.iterrows():
        assert row["count"] == theirs[op]["count"], op
        assert row["self_cpu_us"] == pytest.approx(theirs[op]["self_cpu_time_total"], abs=0.01), op
    # backward's ops run on autograd's thread: they are under backward all the same
    assert len(p.range_ops("backward")) > 5
    with pytest.raises(nbprof.OptionError, match="no single range 'Optimizer'"):
        p.range_ops("Optimizer")  # two labels contain it
    assert len(p.range_ops("zero_grad")) == 0  # a range with no operator under it (set_to_none)
    assert p.range_ops("SGD.step").equals(p.range_ops("train_step › optimizer › Optimizer.step#SGD.step"))


def test_the_ranges_tab_reads_as_the_table():
    """The report's Ranges tab on the training run: its headers (the outermost-range share because
    labels nest, the GPU column because kernels ran under them), one row per path, indented by
    depth, each share as the table's."""
    from .test_mutants_views3 import dt_tables, panels

    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    [table] = dt_tables(panels(p.report(limit=0).html(include_library=False))["Ranges"])
    assert table["headers"][:7] == ["Range", "Calls", "Total", "Mean", "Share of span", "Share of outermost range",
                                    "GPU time (kernels)"]
    r = p.ranges()
    assert [row[0] for row in table["rows"]] == ["\u2003" * d + lab for d, lab in zip(r["depth"], r["label"])]
    assert [row[4] for row in table["rows"]] == pytest.approx(r["share_of_span"].tolist())
    # the last column: each range's operators by self CPU time, the first its biggest (range_ops')
    ops = p.range_ops()
    for row, path in zip(table["rows"], r["path"]):
        top = ops[ops["path"] == path]
        if len(top):
            assert str(row[7]).startswith(top["name"].iat[0] + " "), (path, row[7])
