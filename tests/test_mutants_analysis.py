"""Seed 52's survivors in nbprof/analysis and events.py (issue 38): the behaviour each revealed as
weakly tested, pinned on hand-written traces (tests/synthetic.py). Every expected number is worked
out here from the numbers put into the trace (the working is in the comments), never read from
nbprof's own helpers. Times in a loaded profile start at the trace's first event.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nbprof

from .synthetic import TID, Trace


def _python_frame(t: Trace, name: str, ts: float, dur: float, py_id: int, py_parent: int | None) -> None:
    """A python_function event with the tracer's ids (its caller by ``Python parent id``)."""
    t.op(name, ts, dur, cat="python_function")
    t.events[-1]["args"].update({"Python id": py_id, "Python parent id": py_parent})


# ------------------------------------------------------------------ breakdown._idle_split


def test_idle_split_of_two_devices_keeps_each_gap_on_its_own_device(tmp_path):
    """Two GPUs of one process; the idle split of each gap is decided by the launch of the work
    that ends it, on the gap's own device.

    cuda:0: K_A 100-110 (launched at 1), K_B 200-210 launched at 150, after the gap began at
    110: 90 µs of host wait. cuda:1: K_C at 100.001-110.001 (launched at 2, no gap of its own),
    K_D 110.501-120.501 launched at 3: a 0.5 µs gap with its work queued: kernel wait.
    The work's first start is 100 µs and K_B starts 100 µs (100,000 ns) after it, K_C 1 ns
    after it: a key of (device, start) that mixed devices (stride 99,999 ns instead of 100,001)
    found K_C's early launch for K_B's gap and called it "other".
    Windows: cuda:0 100 -> 210 = 110 µs, cuda:1 100.001 -> 120.501 = 20.5 µs; busy 20 + 20."""
    t = Trace()
    t.device_properties.append({"id": 1, "name": "Fake GPU", "totalGlobalMem": 80 * 2**30})
    for kernel, cpu, gpu, device in (("K_A", 1, 100, 0), ("K_C", 2, 100.001, 1), ("K_D", 3, 110.501, 1),
                                     ("K_B", 150, 200, 0)):
        ext = t.op("aten::mm", cpu - 0.5, 2)
        t.launch(kernel, ext, cpu, 1, gpu, 10, device=device)
    row = t.load(tmp_path).ranks().table.iloc[0]
    assert row["breakdown_window_us"] == pytest.approx(130.5, abs=1e-9)
    assert row["breakdown_idle_us"] == pytest.approx(90.5, abs=1e-9)
    assert row["idle_host_wait_us"] == pytest.approx(90.0, abs=1e-9)
    assert row["idle_kernel_wait_us"] == pytest.approx(0.5, abs=1e-9)
    assert row["idle_other_us"] == 0.0


# -------------------------------------------------------------- compilation.compile_units


def test_compile_units_that_start_together_keep_the_files_order(tmp_path):
    """Two threads compile at the same µs, twelve times each (24 units: more than numpy's quicksort
    sorts by insertion, where it stays stable by luck): the units come by start, and units starting
    together in the order of their rows (thread 1000's, written first, before thread 2000's).
    Thread 1000's units last 10 µs, thread 2000's 20 µs."""
    from nbprof.analysis.compilation import compile_units

    t = Trace()
    for tid, dur in ((TID, 10.0), (2000, 20.0)):
        for i in range(12):
            t.annotation("_compile.compile_inner (dynamo_timed)", 100.0 * i, dur, tid=tid)
    events = t.load(tmp_path).events
    u = compile_units(events)
    assert u["start_us"].tolist() == [100.0 * i for i in range(12) for _ in (0, 1)]
    assert u["dur_us"].tolist() == [10.0, 20.0] * 12
    assert events["thread"].to_numpy()[u["row"].to_numpy()].tolist() == [TID, 2000] * 12
    assert u["row"].tolist() == [r for i in range(12) for r in (i, 12 + i)]  # the file's rows, as written


# -------------------------------------------------------------- findings.clock_skew


@pytest.mark.parametrize("lost_at, fires", [(49.999, True), (50.0, False), (50.001, False)])
def test_a_lost_launch_counts_as_missing_only_strictly_before_the_last_found_one(tmp_path, lost_at, fires):
    """Kernel launches whose kernel is not in the trace: one before the last launch (of its rank)
    whose kernel is there is impossible (the finding fires, medium: nothing else is wrong); one at
    or after it may be a trace cut short (quiet alone). The last found launch is at 50 µs on
    thread 1000; the lost one on thread 2000 at ``lost_at`` (1 ns before, at, 1 ns after)."""
    t = Trace()
    for cpu, gpu in ((10.0, 20.0), (50.0, 60.0)):
        ext = t.op("aten::mm", cpu - 1, 5)
        t.launch("gemm", ext, cpu, 2, gpu, 10)
    ext = t.op("aten::add", lost_at - 1, 5, tid=2000)
    t.runtime("cudaLaunchKernel", lost_at, 2, ext=ext, tid=2000, corr=999)
    f = t.load(tmp_path).findings
    rows = f[f["kind"] == "clock_skew"]
    assert len(rows) == int(fires)
    if fires:
        assert rows.iloc[0]["severity"] == "medium"
        ev = rows.iloc[0]["evidence"]
        assert (ev["missing_kernels"], ev["missing_kernels_at_end"]) == (1, 0)


# -------------------------------------------------------------- hot_lines (_in_code, top_lines)


def test_the_hot_lines_are_lines_of_a_named_file(tmp_path):
    """A saved line table (``nbprofLines``) whose frames are train.py:2 (an aten::mm, 30 µs of self
    CPU), a frame with an empty file name at line 5 (aten::add, 50 µs: the most, but no file to
    show) and train.py:3 (aten::relu, 20 µs). The hot lines are the two of train.py, by self CPU
    time; the nameless one and the outside row (nothing ran outside) are not among them."""
    from nbprof.analysis.hot_lines import top_lines

    t = Trace()
    exts = [t.op("aten::mm", 0.0, 30.0), t.op("aten::add", 40.0, 50.0), t.op("aten::relu", 100.0, 20.0)]
    doc = t.doc()
    doc["nbprofLines"] = {
        "line_data": {"version": 1, "method": "tracer", "cells": {},
                      "frames": {"file": ["train.py", "", "train.py"], "line": [2, 5, 3],
                                 "function": ["<module>"] * 3, "function_line": [1, 1, 1]},
                      "stacks": [[], [0], [1], [2]], "ops": {"external_id": exts, "stack": [1, 2, 3]},
                      "allocs": {"stack": [], "bytes": []}, "notes": []},
        "sources": {"train.py": "import torch\ny = x @ w\nz = y.relu()\n"}}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    lines = nbprof.load_trace(path).lines()
    assert sorted(zip(lines["file"].fillna("-"), lines["self_cpu_us"])) == [
        ("", 50.0), ("-", 0.0), ("train.py", 20.0), ("train.py", 30.0)]
    top = top_lines(lines)
    assert list(zip(top["file"], top["line"], top["self_cpu_us"])) == [("train.py", 2, 30.0), ("train.py", 3, 20.0)]
    assert list(top_lines(lines, 1)["line"]) == [2]


# -------------------------------------------------------------- timeline._python_depth


def test_python_frames_are_drawn_one_level_below_their_caller_whatever_the_files_order(tmp_path):
    """Python frames linked by the tracer's ids, written callee first: B (id 2, called by A) at
    1-6, A (id 1) at 0-10, C (id 3, called by B) at 2-3. A is on level 0 of the Python lane, B on
    1, C on 2: three levels, each frame its own rectangle (a C on B's level hid under it)."""
    from nbprof.analysis.timeline import timeline_rects

    t = Trace()
    _python_frame(t, "b.py(1): B", 1, 5, 2, 1)
    _python_frame(t, "a.py(1): A", 0, 10, 1, None)
    _python_frame(t, "c.py(1): C", 2, 1, 3, 2)
    t.op("aten::mm", 2.2, 0.5)
    p = t.load(tmp_path)
    tl = timeline_rects(p.events, p.meta, python=True, merge=False)
    [py_lane] = tl.lanes.loc[tl.lanes["kind"] == "python", "lane"].tolist()
    rects = tl.rects[tl.rects["lane"] == py_lane]
    assert sorted(zip(rects["name"], rects["level"], rects["x0_us"], rects["x1_us"])) == [
        ("a.py(1): A", 0, 0.0, 10.0), ("b.py(1): B", 1, 1.0, 6.0), ("c.py(1): C", 2, 2.0, 3.0)]
    assert tl.lanes.set_index("lane").at[py_lane, "levels"] == 3


# -------------------------------------------------------------- tree._launchers


def test_a_kernel_is_the_op_s_whose_runtime_call_ran_under_profiler_overhead_at_row_0(tmp_path):
    """A kernel linked to its runtime call by correlation id only (External id 0, as Meta's traces
    have them), the call under a profiler overhead event that is the file's first event (row 0),
    inside aten::mm 10-30: the kernel is aten::mm's (climbing from the overhead to the op around
    it), so aten::mm has its 10 µs of device time, as the kernel's own total."""
    t = Trace()
    t.events.append({"ph": "X", "cat": "overhead", "name": "Instrumentation", "pid": 1000, "tid": TID,
                     "ts": 11, "dur": 5, "args": {}})
    t.op("aten::mm", 10, 20)
    t.runtime("cudaLaunchKernel", 12, 2, ext=0, corr=5)
    t.events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 40, "dur": 10,
                     "args": {"External id": 0, "correlation": 5, "device": 0, "stream": 7}})
    p = t.load(tmp_path)
    ev = p.events
    assert str(ev.at[0, "kind"]) == "overhead"  # the call's parent, at row 0
    ka = p.key_averages().set_index("name")
    assert ka.at["aten::mm", "self_device_us"] == 10.0
    assert ka.at["aten::mm", "device_total_us"] == 10.0


# -------------------------------------------------------------- events.concat_traces


def test_concatenating_one_trace_keeps_its_lines_and_their_source_text(tmp_path):
    """One trace saved with its line table and the text of its file, joined alone (a schedule of
    one cycle, a folder of one rank): its lines and their source text are there (line 2 is
    "y = x @ w", as written in the file); several traces' line tables cannot be joined (their
    External ids collide): none, and no sources, an empty table of them."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    t = Trace()
    ext = t.op("aten::mm", 10.0, 30.0)
    doc = t.doc()
    text = "import torch\ny = x @ w\n"
    doc["nbprofLines"] = {
        "line_data": {"version": 1, "method": "tracer", "cells": {},
                      "frames": {"file": ["/nowhere/train_s52.py"], "line": [2], "function": ["<module>"],
                                 "function_line": [1]},
                      "stacks": [[], [0]], "ops": {"external_id": [ext], "stack": [1]},
                      "allocs": {"stack": [], "bytes": []}, "notes": []},
        "sources": {"/nowhere/train_s52.py": text}}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    one = concat_traces([read_trace_file(path)], labels=[0], label_column="cycle")
    assert one.meta.sources == {"/nowhere/train_s52.py": text}
    lines = TorchProfile.from_trace(one).lines()
    row = lines[lines["line"] == 2].iloc[0]
    assert (row["file"], row["source"], row["self_cpu_us"]) == ("/nowhere/train_s52.py", "y = x @ w", 30.0)
    two = concat_traces([read_trace_file(path), read_trace_file(path)], labels=[0, 1], label_column="rank")
    assert two.meta.line_data is None and two.meta.sources == {}
