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
