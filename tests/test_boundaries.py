"""Boundaries (issue 26): events exactly at an op's start and end, zero-length ops, nested
same-name ranges; every finding kind just below and just above each of its thresholds, on each
path that can fire it, with its severity.

Every trace here is written by hand (tests/synthetic.py) and every expected number is worked out
in the test from the numbers put into the trace: none comes from nbprof. The thresholds are
written here as numbers, not read from the modules, so that a threshold moved in the code (a
planted 0.10 -> 0.30) fails a test instead of moving the test along with it;
``test_thresholds_are_the_documented_numbers`` ties the two together.
"""

from __future__ import annotations

import pytest
from pathlib import Path

import nbprof
import numpy as np
import pandas as pd
from nbprof.analysis import findings as F

from .synthetic import PID, TID, Trace

# -------------------------------------------------------------------------------- the op tree


def _op_row(profile, name: str):
    ev = profile.events
    rows = ev[(ev["name"] == name) & ~ev["merged"]]
    assert len(rows) == 1, (name, len(rows))
    return rows.iloc[0]


def _key_row(profile, name: str, kind: str = "op"):
    k = profile.key_averages()
    rows = k[(k["name"] == name) & (k["kind"] == kind)]
    assert len(rows) == 1, (name, kind, k[["name", "kind"]].to_dict("records"))
    return rows.iloc[0]


@pytest.mark.parametrize("at_us", [100, 150, 200], ids=["at_start", "inside", "at_end"])
def test_memory_event_at_an_ops_start_or_end_is_that_ops(tmp_path, at_us):
    """torch counts a memory event whose time falls in [start, end] of an op, both ends included:
    4,096 B allocated exactly when the op ends are the op's (not lost between it and the rest)."""
    t = Trace()
    t.op("aten::empty", 100, 100)  # [100, 200] µs
    t.memory(at_us, 4096, total_allocated=4096, total_reserved=2 << 20)
    t.op("aten::relu", 500, 10)  # the span goes on after the op
    p = t.load(tmp_path)
    row = _op_row(p, "aten::empty")
    assert row["device_mem_bytes"] == 4096 and row["self_device_mem_bytes"] == 4096
    assert row["cpu_mem_bytes"] == 0
    k = _key_row(p, "aten::empty")
    assert k["self_device_mem_bytes"] == 4096 and k["device_mem_bytes"] == 4096
    assert _key_row(p, "aten::relu")["device_mem_bytes"] == 0
    # conserved: no loose "[memory]" row, the bytes are the op's
    kinds = p.key_averages()["kind"].astype(str).tolist()
    assert "memory" not in kinds
    # the memory event hangs from the op in the tree
    ev = p.events
    mem = ev[ev["kind"] == "memory"].iloc[0]
    assert ev.loc[mem["parent"], "name"] == "aten::empty"


@pytest.mark.parametrize("at_us", [99.999, 200.001], ids=["just_before", "just_after"])
def test_memory_event_just_outside_an_op_is_a_loose_row(tmp_path, at_us):
    """1 ns outside the op: not its bytes; a "[memory]" row of its own, as torch shows it."""
    t = Trace()
    t.op("aten::empty", 100, 100)
    t.memory(at_us, 4096, total_allocated=4096, total_reserved=2 << 20)
    t.op("aten::relu", 500, 10)
    p = t.load(tmp_path)
    assert _op_row(p, "aten::empty")["device_mem_bytes"] == 0
    loose = _key_row(p, "[memory]", kind="memory")
    assert loose["count"] == 1 and loose["device_mem_bytes"] == 4096 and loose["self_device_mem_bytes"] == 4096


def test_memory_event_where_one_op_ends_and_the_next_starts_is_in_both(tmp_path):
    """Back to back ops [100, 200] and [200, 300]: an allocation at 200 µs falls in both closed
    intervals, so torch counts it in both; and in their parent once."""
    t = Trace()
    t.annotation("step", 0, 1000)
    t.op("aten::a", 100, 100)
    t.op("aten::b", 200, 100)
    t.memory(200, 4096, total_allocated=4096, total_reserved=2 << 20)
    t.memory(250, -1024, total_allocated=3072, total_reserved=2 << 20, device=-1)  # a CPU free inside b
    p = t.load(tmp_path)
    a, b, step = _op_row(p, "aten::a"), _op_row(p, "aten::b"), _op_row(p, "step")
    assert (a["device_mem_bytes"], b["device_mem_bytes"]) == (4096, 4096)
    assert (a["cpu_mem_bytes"], b["cpu_mem_bytes"]) == (0, -1024)
    assert (step["device_mem_bytes"], step["cpu_mem_bytes"]) == (4096, -1024)
    # self: the parent's own bytes are its total less its children's (torch's definition)
    assert step["self_device_mem_bytes"] == 4096 - 4096 - 4096
    assert step["self_cpu_mem_bytes"] == 0


def test_zero_length_ops_at_a_parents_start_inside_and_at_its_end(tmp_path):
    """A zero-length op nests in the op that contains it, except at that op's end, where torch's
    stack has already popped the op (``start >= end`` pops): it is then a sibling."""
    t = Trace()
    t.op("aten::outer", 100, 100)  # [100, 200]
    t.op("aten::at_start", 100, 0)
    t.op("aten::inside", 150, 0)
    t.op("aten::at_end", 200, 0)
    t.memory(150, 512, total_allocated=512, total_reserved=2 << 20)
    t.op("aten::tail", 400, 10)
    p = t.load(tmp_path)
    ev = p.events
    outer = ev.index[ev["name"] == "aten::outer"][0]
    parents = {n: ev.loc[ev["name"] == n, "parent"].iloc[0] for n in ("aten::at_start", "aten::inside", "aten::at_end")}
    assert parents == {"aten::at_start": outer, "aten::inside": outer, "aten::at_end": -1}
    depth = dict(zip(ev["name"].astype(str), ev["depth"]))
    assert (depth["aten::outer"], depth["aten::at_start"], depth["aten::inside"], depth["aten::at_end"]) == (0, 1, 1, 0)
    # zero-length children take no time from their parent; a zero-length op holds the memory
    # event at its one instant (its [start, end] is that instant)
    assert _op_row(p, "aten::outer")["self_cpu_us"] == 100
    inside = _op_row(p, "aten::inside")
    assert inside["self_cpu_us"] == 0 and inside["device_mem_bytes"] == 512
    assert _op_row(p, "aten::outer")["self_device_mem_bytes"] == 0  # 512 in it, 512 in its child
    k = p.key_averages().set_index("name")
    assert k.loc["aten::at_end", "count"] == 1 and k.loc["aten::at_end", "cpu_total_us"] == 0


def test_nested_same_name_ranges(tmp_path):
    """torch's same-name collapse: an only child with its parent's name is the parent (one call);
    two same-name children are calls of their own; a grandchild of the merged child hangs from
    the survivor. Self times are what is left of each survivor."""
    t = Trace()
    # (1) block > block (only child) > aten::mm: one call of "block", 100 µs, self 100 - 30
    t.annotation("block", 0, 100)
    t.annotation("block", 10, 80)
    t.op("aten::mm", 20, 30)
    # (2) loop > loop, loop (two children): three calls
    t.annotation("loop", 200, 100)
    t.annotation("loop", 210, 20)
    t.annotation("loop", 250, 40)
    p = t.load(tmp_path)
    ev = p.events
    k = p.key_averages().set_index("name")
    assert k.loc["block", "count"] == 1
    assert k.loc["block", "cpu_total_us"] == 100 and k.loc["block", "self_cpu_us"] == 100 - 30
    assert k.loc["aten::mm", "count"] == 1 and k.loc["aten::mm", "self_cpu_us"] == 30
    mm = ev[ev["name"] == "aten::mm"].iloc[0]
    blocks = ev[ev["name"] == "block"]
    survivor = blocks.index[~blocks["merged"]][0]
    assert blocks["merged"].tolist() == [False, True]
    assert mm["parent"] == survivor
    assert k.loc["loop", "count"] == 3
    assert k.loc["loop", "cpu_total_us"] == 100 + 20 + 40
    assert k.loc["loop", "self_cpu_us"] == (100 - 20 - 40) + 20 + 40
    # self times of the thread add up to the time it was busy: [0, 100] and [200, 300]
    live = ev[ev["thread"].ge(0) & ~ev["merged"] & ev["kind"].isin(["op", "annotation"])]
    assert live["self_cpu_us"].sum() == 200


def test_same_name_calls_sharing_both_timestamps_are_two_calls(tmp_path):
    """On a whole-µs clock, back-to-back calls of one op can share start and end; they are two
    calls (siblings), not one call with a same-name child that the collapse would merge."""
    t = Trace()
    t.op("aten::result_type", 10, 0)
    t.op("aten::result_type", 10, 0)
    t.op("aten::add", 20, 5)
    p = t.load(tmp_path)
    k = p.key_averages().set_index("name")
    assert k.loc["aten::result_type", "count"] == 2
    assert (p.events.loc[p.events["name"] == "aten::result_type", "parent"] == -1).all()


def test_kernel_of_a_merged_child_is_its_survivors(tmp_path):
    """The merged child's kernel is device time of the op that absorbed it: counted once."""
    t = Trace()
    outer = t.op("aten::linear", 0, 100)
    inner = t.op("aten::linear", 10, 80)
    t.launch("gemm", inner, 20, 5, 30, 40)
    t.op("aten::relu", 200, 10)
    p = t.load(tmp_path)
    assert outer != inner
    row = _key_row(p, "aten::linear")
    assert row["count"] == 1 and row["self_device_us"] == 40 and row["device_total_us"] == 40
    assert _key_row(p, "gemm", kind="kernel")["self_device_us"] == 40
    assert p.summary.self_device_us == 40


@pytest.mark.parametrize("tid,thread", [(-549452224, 3745515072), ("MainThread", None)])
def test_ops_on_a_thread_whose_id_reads_negative_are_in_the_tree(tmp_path, tid, thread):
    """kineto writes thread ids as signed 32-bit numbers: HTA's NCCL trace has runtime calls on
    thread -549452224 (3,745,515,072 unsigned); hand-made traces name threads. Their ops are ops
    like any other: in the tree, in key averages, in the self CPU total (they were dropped)."""
    t = Trace()
    t.op("aten::linear", 0, 100, tid=tid)
    t.op("aten::mm", 10, 60, tid=tid)
    t.op("aten::relu", 200, 10)
    p = t.load(tmp_path)
    k = p.key_averages().set_index("name")
    assert k.loc["aten::linear", "count"] == 1 and k.loc["aten::linear", "self_cpu_us"] == 40
    assert k.loc["aten::mm", "self_cpu_us"] == 60
    assert p.summary.self_cpu_us == 100 + 10
    ev = p.events
    linear = ev[ev["name"] == "aten::linear"].iloc[0]
    assert ev.loc[ev["name"] == "aten::mm", "parent"].iloc[0] == linear.name and linear["depth"] == 0
    assert linear["thread"] >= 0 and linear["thread"] != TID
    if thread is not None:
        assert linear["thread"] == thread


def test_byte_counts_beyond_floats_exact_range_stay_exact(tmp_path):
    """2**53 + 1 bytes (a float64 would read 2**53): an op's bytes, its parent's, the parent's
    self bytes (total less the child's: 0) and the key averages' sums stay exact integers."""
    big = 2**53 + 1
    t = Trace()
    t.op("aten::outer", 0, 100)
    t.op("aten::inner", 10, 10)
    t.memory(15, big, total_allocated=big, total_reserved=big, device=-1)
    t.memory(50, big, total_allocated=2 * big, total_reserved=2 * big, device=-1, addr=2)
    t.op("aten::relu", 200, 10)
    p = t.load(tmp_path)
    inner, outer = _op_row(p, "aten::inner"), _op_row(p, "aten::outer")
    assert int(inner["cpu_mem_bytes"]) == big and int(inner["self_cpu_mem_bytes"]) == big
    assert int(outer["cpu_mem_bytes"]) == 2 * big and int(outer["self_cpu_mem_bytes"]) == big
    k = p.key_averages().set_index("name")
    assert int(k.loc["aten::outer", "cpu_mem_bytes"]) == 2 * big and int(k.loc["aten::outer", "self_cpu_mem_bytes"]) == big


def test_times_decades_apart_nest_on_every_thread(tmp_path):
    """Two threads and events 2.4e15 µs (76 years) apart: the nesting order falls back from one
    packed integer key to a three-key sort; the tree is the same. (Half the events at each end:
    with a majority at one end the reader leaves the others out, as more than a day away.)"""
    t = Trace()
    t.op("aten::a", 0, 100)
    t.op("aten::b", 10, 10)
    t.op("aten::c", 5, 45, tid=TID + 1)
    t.op("aten::d", 6, 4, tid=TID + 1)
    t.op("aten::late", 2.4e15, 10)
    t.op("aten::later", 2.4e15, 5)  # the same start: the longer one first
    t.op("aten::e", 2.4e15, 30, tid=TID + 1)
    t.op("aten::f", 2.4e15 + 1, 3, tid=TID + 1)
    p = t.load(tmp_path)
    assert any("more than a profile runs" in n for n in p.meta.notes)
    ev = p.events.set_index("name")
    assert ev.loc["aten::b", "parent"] == p.events.index[p.events["name"] == "aten::a"][0]
    assert ev.loc["aten::d", "parent"] == p.events.index[p.events["name"] == "aten::c"][0]
    assert ev.loc["aten::later", "parent"] == p.events.index[p.events["name"] == "aten::late"][0]
    assert ev.loc["aten::f", "parent"] == p.events.index[p.events["name"] == "aten::e"][0]
    k = p.key_averages().set_index("name")["self_cpu_us"].to_dict()
    assert k == {"aten::a": 90, "aten::b": 10, "aten::c": 41, "aten::d": 4, "aten::late": 5, "aten::later": 5,
                 "aten::e": 27, "aten::f": 3}


# -------------------------------------------------------------------------------- the thresholds


def test_thresholds_are_the_documented_numbers():
    """The numbers the tests below are built around; a threshold changed on purpose changes its
    docs/findings.md row and this list (and the boundary tests with it)."""
    assert {F.kind_name(m): F.thresholds(m) for m in F.TORCH_CHECKS + F.PYTHON_CHECKS} == {
        "top_op": {"TOP_OP_MEDIUM_SHARE": 0.5, "MPS_WAIT_NOTE_SHARE": 0.01},  # MPS's: tests/test_platforms.py
        "sync": {"SYNC_MIN_SHARE": 0.05, "SYNC_HIGH_SHARE": 0.20},
        "copy": {"COPY_MIN_SHARE": 0.10, "COPY_HIGH_SHARE": 0.30},
        "gpu_idle": {"GPU_IDLE_MIN_SHARE": 0.30, "GPU_IDLE_HIGH_SHARE": 0.60, "GPU_IDLE_GAPS_SHOWN": 3},
        "launch_bound": {"TINY_KERNEL_US": 10.0, "LAUNCH_MIN_KERNELS": 20, "LAUNCH_MIN_SHARE": 0.05,
                         "LAUNCH_HIGH_SHARE": 0.30},
        "small_grid": {"SMALL_GRID_MIN_SHARE": 0.30, "SMALL_GRID_BUSY_SHARE": 0.50, "SMALL_GRID_SHOWN": 3},
        "tensor_cores": {"TENSOR_CORE_MIN_CC": 7.0, "TF32_MIN_CC": 8.0, "ELIGIBLE_MIN_SHARE": 0.20,
                         "TENSOR_CORE_LOW_SHARE": 0.50, "TENSOR_CORE_MEDIUM_SHARE": 0.30},
        # measured from the DataLoaders' records: tests/test_data_loading_findings.py
        "data_bound": {"DATA_BOUND_MIN_SHARE": 0.10, "DATA_BOUND_HIGH_SHARE": 0.30, "MIN_STEADY_BATCHES": 3,
                       "READY_MIN_SHARE": 0.5, "STARTUP_MIN_SHARE": 0.20},
        "comm_exposed": {"COMM_EXPOSED_MIN_SHARE": 0.10, "COMM_EXPOSED_HIGH_SHARE": 0.30},
        "collective_wait": {"COLLECTIVE_WAIT_MIN_RATIO": 2.0, "COLLECTIVE_WAIT_MIN_SHARE": 0.05},
        "launch_delay": {"LAUNCH_STALL_MIN_US": 100.0, "LAUNCH_STALL_MIN_SHARE": 0.05,
                         "LAUNCH_STALL_HIGH_SHARE": 0.20},
        "memory_growth": {"GROWTH_MIN_STEPS": 4, "GROWTH_STEADY_SHARE": 0.75, "GROWTH_MIN_STEP_BYTES": 4096,
                          "GROWTH_HELD_SHARE": 0.5, "GROWTH_MEDIUM_SHARE": 0.25, "CAUSE_GRAD_SHARE": 0.9,
                          "CAUSE_MIN_OPS_PER_STEP": 2},
        "memory_peak": {"MEMORY_MEDIUM_SHARE": 0.80, "MEMORY_HIGH_SHARE": 0.95, "MEMORY_TOP_OPS": 3},
        "straggler": {"STRAGGLER_MIN_IMBALANCE": 0.10, "STRAGGLER_MIN_WAIT_SHARE": 0.10},
        "top_function": {"TOP_FUNCTION_MEDIUM_SHARE": 0.5},
        "hot_function": {"HOT_MIN_CALLS": 10_000, "HOT_MAX_PER_CALL_S": 100e-6, "HOT_MIN_SHARE": 0.10,
                         "HOT_HIGH_SHARE": 0.30, "HOT_MAX_REPORTED": 3},
        "compile_time": {"COMPILE_MIN_SHARE": 0.1, "COMPILE_MIN_US": 1e6, "COMPILE_HIGH_SHARE": 0.5},
        "graph_break": {"GRAPH_BREAK_MAX_FINDINGS": 3},  # the live breaks: tests/test_compile.py
        "recompile": {"RECOMPILE_HIGH_COUNT": 3},  # the live recompiles: tests/test_compile.py
        # the line findings (--lines): tests/test_source_tab.py, tests/test_lines_*.py
        "sync_line": {"SYNC_LINE_MIN_SHARE": 0.05, "SYNC_LINE_HIGH_SHARE": 0.20},
        "device_line": {"DEVICE_LINE_MEDIUM_SHARE": 0.50},
        "hot_line": {"HOT_LINE_MEDIUM_SHARE": 0.30},
        # each at its boundaries on hand-made and recorded traces: tests/test_clock_skew.py
        "clock_skew": {"IMPOSSIBLE_MIN_RECORDS": 1, "EARLY_MIN_US": 100.0, "IDLE_MIN_US": 50.0, "SHIFT_MIN_US": 1000.0,
                       "SHIFT_MIN_LAUNCHES": 3, "CONSTANT_SPREAD_SHARE": 0.10},
    }


def found(profile, kind: str) -> list[tuple[str, dict]]:
    f = profile.findings
    rows = f[f["kind"] == kind]
    return list(zip(rows["severity"], rows["evidence"]))


def scores(profile, kind: str) -> list[float]:
    """The ordering scores the kind's check gave its findings (they order findings of one
    severity, larger first: docs/findings.md)."""
    from nbprof.analysis import findings
    from nbprof.analysis.findings._common import TorchContext

    [check] = [c for c in findings.TORCH_CHECKS if findings.kind_name(c) == kind]
    return [f.score for f in check.find(TorchContext(profile))]


def severity(profile, kind: str) -> str | None:
    """The kind's one finding's severity, None when it did not fire."""
    rows = found(profile, kind)
    assert len(rows) <= 1, rows
    return rows[0][0] if rows else None


def span_markers(t: Trace, span_us: float, tid: int = TID) -> None:
    """Two 1 µs ops at the span's ends: the profile spans [0, span_us] (its first event's start
    to its last event's end), whatever else the trace holds."""
    t.op("aten::empty", 0, 1, tid=tid)
    t.op("aten::empty", span_us - 1, 1, tid=tid)


# ---------------------------------------------------------------------------------- compile_time


@pytest.mark.parametrize("compile_us,span_us,expected", [
    (99_000, 1_000_000, None),  # 9.9 % of the span and under 1 s
    (100_000, 1_000_000, "medium"),  # exactly 10 %
    (990_000, 20_000_000, None),  # 4.95 %, 0.99 s
    (1_000_000, 20_000_000, "medium"),  # 5 %, exactly 1 s
    (499_000, 1_000_000, "medium"),  # 49.9 %
    (500_000, 1_000_000, "high"),  # exactly 50 %
])
def test_compile_time_share_and_seconds(tmp_path, compile_us, span_us, expected):
    """A Dynamo compile range (`compile_inner (dynamo_timed)`, as torch records it) of the given
    length in a profile of the given span; no structured log (a trace loaded from a file)."""
    t = Trace()
    span_markers(t, span_us)
    t.op("compile_inner (dynamo_timed)", 10, compile_us, cat="user_annotation")
    p = t.load(tmp_path)
    got = found(p, "compile_time")
    if expected is None:
        assert got == []
        return
    [(sev, ev)] = got
    assert sev == expected
    assert ev["compile_us"] == compile_us and ev["compilations"] == 1
    assert ev["share"] == pytest.approx(compile_us / span_us)


def compile_log_trace(records: list[dict]) -> Trace:
    """A trace holding one compile range and the structured log nbprof saves beside it
    (``nbprofCompileLog``: Dynamo's records, as the live cell collects them)."""
    t = Trace()
    span_markers(t, 100_000)
    t.op("compile_inner (dynamo_timed)", 10, 1_000, cat="user_annotation")
    doc = t.doc
    t.doc = lambda: {**doc(), "nbprofCompileLog": {"records": records}}  # type: ignore[method-assign]
    return t


def metrics(frame_compile_id: int, reason: str = "", name: str = "forward", line: int = 7) -> dict:
    return {"event": "compilation_metrics", "frame_id": 0, "frame_compile_id": frame_compile_id,
            "metrics": {"compile_id": f"0/{frame_compile_id}", "co_name": name, "co_filename": "/home/u/model.py",
                        "co_firstlineno": line, "recompile_reason": reason}}


@pytest.mark.parametrize("recompiles,expected", [(1, "medium"), (2, "medium"), (3, "high"), (4, "high")])
def test_recompile_count(tmp_path, recompiles, expected):
    """One function compiled, then recompiled n times (a size guard failing each time)."""
    reason = "tensor 'x' size mismatch at index 0. expected 8, actual 16"
    records = [metrics(0)] + [metrics(i, reason) for i in range(1, recompiles + 1)]
    p = compile_log_trace(records).load(tmp_path)
    [(sev, ev)] = found(p, "recompile")
    assert sev == expected
    assert ev == {"frame": ev["frame"], "source": "…/u/model.py:7", "recompiles": recompiles, "reason": reason}
    assert "forward" in ev["frame"]
    [row] = p.compilation().per_frame.to_dict("records")  # one function: compiled 1 + n times
    assert (row["source"], row["compiles"], row["recompiles"]) == ("…/u/model.py:7", recompiles + 1, recompiles)


def test_a_compilation_with_a_recompile_reason_is_a_recompile_without_a_compile_id(tmp_path):
    """Two frame compilations in the trace and two metrics records (joined in order) that name no
    compile id: the one with a recompile reason is the recompile."""
    t = Trace()
    span_markers(t, 100_000)
    t.op("_compile.compile_inner (dynamo_timed)", 10, 1_000, cat="user_annotation")
    t.op("_compile.compile_inner (dynamo_timed)", 5_000, 1_000, cat="user_annotation")
    reason = "tensor 'x' size mismatch at index 0. expected 8, actual 16"
    records = [{"event": "compilation_metrics", "metrics": {"co_name": "forward", "co_filename": "/home/u/model.py",
                                                            "co_firstlineno": 7, **({"recompile_reason": r} if r else {})}}
               for r in ("", reason)]
    doc = t.doc
    t.doc = lambda: {**doc(), "nbprofCompileLog": {"records": records}}  # type: ignore[method-assign]
    frames = t.load(tmp_path).compilation().frames
    assert frames[["compile_id", "frame", "kind", "recompile_reason"]].values.tolist() == [
        ["", "forward", "frame", ""], ["", "forward", "recompile", reason]]


def test_graph_breaks_name_the_three_places_with_most_breaks(tmp_path):
    """Four places break the graph 4, 3, 2 and 1 times: the first three get a finding each, with
    their counts out of the 10 breaks; always medium."""
    def brk(line: int) -> dict:
        return {"event": "dynamo_graph_break_reason", "frame_id": 0, "frame_compile_id": 0,
                "payload": ("Graph Break Reason: Unsupported: builtin: print\nUser code traceback:\n"
                            f'  File "/home/u/model.py", line {line}, in forward\n    print(x)\n')}
    records = [metrics(0)] + [brk(line) for line, n in ((10, 4), (20, 3), (30, 2), (40, 1)) for _ in range(n)]
    p = compile_log_trace(records).load(tmp_path)
    got = found(p, "graph_break")
    assert [sev for sev, _ in got] == ["medium"] * 3
    assert [(ev["source"], ev["count"], ev["graph_breaks"]) for _, ev in got] == [
        ("…/u/model.py:10", 4, 10), ("…/u/model.py:20", 3, 10), ("…/u/model.py:30", 2, 10)]
    messages = p.findings.loc[p.findings["kind"] == "graph_break", "message"].tolist()
    assert [m.split(" at ")[0] for m in messages] == ["4 graph breaks", "3 graph breaks", "2 graph breaks"]


# ---------------------------------------------------------------------------------------- top_op


@pytest.mark.parametrize("self_us,expected", [
    ((490, 255, 255), "low"),  # 49 %
    ((500, 250, 250), "medium"),  # exactly 50 %
    ((510, 490, 0), "medium"),
])
def test_top_op_cpu_share(tmp_path, self_us, expected):
    t = Trace()
    at = 0.0
    for name, us in zip(("aten::a", "aten::b", "aten::c"), self_us):
        if us:
            t.op(name, at, us)
            at += us + 10
    p = t.load(tmp_path)
    [(sev, ev)] = found(p, "top_op")
    assert sev == expected
    assert ev["op"] == "aten::a" and ev["metric"] == "self_cpu_us"
    assert ev["share"] == pytest.approx(self_us[0] / sum(self_us))


@pytest.mark.parametrize("kernel_us,expected", [((490, 255, 255), "low"), ((500, 250, 250), "medium"),
                                                ((510, 490, 0), "medium")])
def test_top_op_device_share_is_by_kernel_time_not_cpu_time(tmp_path, kernel_us, expected):
    """With device work the share is of self device time: aten::b has most CPU time, aten::a most
    kernel time."""
    t = Trace()
    gpu = 1000.0
    for i, (name, us) in enumerate(zip(("aten::a", "aten::b", "aten::c"), kernel_us)):
        cpu = 900 if name == "aten::b" else 10
        ext = t.op(name, i * 1000.0, cpu)
        if us:
            t.launch(f"kernel_{name[-1]}", ext, i * 1000.0 + 1, 5, gpu, us)
            gpu += us + 1
    p = t.load(tmp_path)
    [(sev, ev)] = found(p, "top_op")
    assert sev == expected
    assert ev["op"] == "aten::a" and ev["metric"] == "self_device_us"
    assert ev["time_us"] == pytest.approx(kernel_us[0])
    assert ev["share"] == pytest.approx(kernel_us[0] / sum(kernel_us))


# ------------------------------------------------------------------------------------------ sync


def _sync_trace(blocked_us: float, call: str = "cudaStreamSynchronize", launch_after: bool = True) -> Trace:
    """A 10,000 µs span; aten::item blocks ``blocked_us`` in ``call`` at 100 µs; a kernel is
    launched at 9,000 µs (after the wait, so it cost overlap) unless ``launch_after`` is False."""
    t = Trace()
    span_markers(t, 10_000)
    ext = t.op("aten::mm", 10, 20)
    t.launch("gemm", ext, 12, 5, 20, 50)
    item = t.op("aten::item", 100, blocked_us + 2)
    t.runtime(call, 101, blocked_us, ext=item)
    if launch_after:
        ext = t.op("aten::mm", 9000, 20)
        t.launch("gemm", ext, 9001, 5, 9010, 50)
    return t


@pytest.mark.parametrize("blocked_us,expected", [(490, None), (500, "medium"), (1990, "medium"), (2000, "high")])
def test_sync_share_of_the_span(tmp_path, blocked_us, expected):
    p = _sync_trace(blocked_us).load(tmp_path)
    assert severity(p, "sync") == expected
    if expected:
        [(_, ev)] = found(p, "sync")
        assert ev["calls"] == 1 and ev["blocked_us"] == pytest.approx(blocked_us)
        assert ev["share_of_span"] == pytest.approx(blocked_us / 10_000)
        assert ev["by_op"] == {"aten::item": {"count": 1, "us": pytest.approx(blocked_us)}}


def test_sync_after_the_last_launch_costs_nothing(tmp_path):
    assert severity(_sync_trace(3000, launch_after=False).load(tmp_path), "sync") is None


def test_sync_that_ends_when_the_last_launch_starts_counts(tmp_path):
    """The wait [101, 101 + 8899] ends at 9,000 µs, where the next launch call starts."""
    t = Trace()
    span_markers(t, 10_000)
    ext = t.op("aten::mm", 10, 20)
    t.launch("gemm", ext, 12, 5, 20, 50)
    item = t.op("aten::item", 100, 8901)
    t.runtime("cudaDeviceSynchronize", 101, 8899, ext=item)
    ext = t.op("aten::mm", 9001.5, 20)
    t.launch("gemm", ext, 9000, 5, 9010, 50)  # (the call starts before its op: only its start matters)
    p = t.load(tmp_path)
    assert severity(p, "sync") == "high"
    t.events[-2]["ts"] = 9000.001  # the launch 1 ns after the wait ended: still counts
    assert severity(t.load(tmp_path, "later.json"), "sync") == "high"
    t.events[-2]["ts"] = 8999.999  # the last launch starts before the wait ends: the wait is after it
    assert severity(t.load(tmp_path, "earlier.json"), "sync") is None


@pytest.mark.parametrize("device_side,expected", [("Event Sync", "medium"), ("Stream Wait Event", None)])
def test_sync_from_the_device_side_of_a_call(tmp_path, device_side, expected):
    """A runtime call whose correlation id names a device-side synchronization blocks the CPU
    (whatever the call's name); a stream waiting for another does not."""
    t = _sync_trace(600, call="cudaMemcpyAsync")
    call = t.events[-4]  # the runtime call (before the last op and its launch)
    assert call["name"] == "cudaMemcpyAsync"
    call["args"]["correlation"] = 777
    t.events.append({"ph": "X", "cat": "cuda_sync", "name": device_side, "pid": 0, "tid": 7, "ts": 101,
                     "dur": 600, "args": {"correlation": 777, "device": 0, "stream": 7}})
    p = t.load(tmp_path)
    assert severity(p, "sync") == expected


# ------------------------------------------------------------------------------------------ copy


def _copy_trace(copy_us: float, kernel_us: float, name: str = "Memcpy HtoD (Pageable -> Device)") -> Trace:
    t = Trace()
    ext = t.op("aten::copy_", 0, 20)
    t.launch(name, ext, 1, 5, 10, copy_us, runtime="cudaMemcpyAsync", cat="gpu_memcpy", nbytes=1 << 20)
    ext = t.op("aten::mm", 30, 20)
    t.launch("gemm", ext, 31, 5, 20 + copy_us, kernel_us)
    return t


@pytest.mark.parametrize("copy_us,expected", [(99, None), (100, "medium"), (299, "medium"), (300, "high")])
def test_copy_share_of_device_work(tmp_path, copy_us, expected):
    p = _copy_trace(copy_us, 1000 - copy_us).load(tmp_path)
    assert severity(p, "copy") == expected
    if expected:
        [(_, ev)] = found(p, "copy")
        assert ev["share_of_device_time"] == pytest.approx(copy_us / 1000)
        assert ev["copies"] == 1 and ev["pageable"] == 1 and ev["bytes"] == 1 << 20
        # 1 MiB in copy_us: bytes / µs / 1e3 = GB/s
        assert ev["by_direction"]["HtoD"]["bandwidth_gbps"] == pytest.approx((1 << 20) / copy_us / 1e3)


@pytest.mark.parametrize("name,expected", [("Memcpy DtoH (Device -> Pinned)", "high"),
                                           ("Memcpy DtoD (Device -> Device)", None)])
def test_copy_counts_host_copies_only(tmp_path, name, expected):
    p = _copy_trace(500, 500, name=name).load(tmp_path)
    assert severity(p, "copy") == expected


# -------------------------------------------------------------------------------------- gpu_idle


def _busy_trace(busy_us: float, pieces: int = 1) -> Trace:
    """A 10,000 µs span whose GPU runs ``busy_us`` of kernels, in ``pieces`` kernels spread over
    the span (the gaps between them shrink from the first to the last)."""
    t = Trace()
    span_markers(t, 10_000)
    each = busy_us / pieces
    idle = 10_000 - busy_us
    gaps = [idle * (pieces + 1 - i) / sum(range(1, pieces + 2)) for i in range(pieces + 1)]  # decreasing
    gpu = gaps[0]
    for i in range(pieces):
        ext = t.op("aten::mm", 2 + i, 0.5)
        t.launch("gemm", ext, 2 + i, 0.2, gpu, each)
        gpu += each + gaps[i + 1]
    return t


@pytest.mark.parametrize("busy_us,expected", [(7010, None), (6990, "medium"), (4100, "medium"), (3900, "high")])
def test_gpu_idle_share_of_the_span(tmp_path, busy_us, expected):
    p = _busy_trace(busy_us).load(tmp_path)
    assert severity(p, "gpu_idle") == expected
    if expected:
        [(_, ev)] = found(p, "gpu_idle")
        assert ev["busy_us"] == pytest.approx(busy_us) and ev["span_us"] == pytest.approx(10_000)
        assert ev["busy_fraction"] == pytest.approx(busy_us / 10_000)
        assert ev["idle_us"] == pytest.approx(10_000 - busy_us) and ev["device"] == "cuda:0"
        # one kernel: the idle time is before and after it, no gap between kernels
        assert (ev["gaps"], ev["gaps_over_100us"], ev["largest_gaps"]) == (0, 0, [])
        assert sorted(ev) == ["busy_fraction", "busy_us", "device", "gaps", "gaps_over_100us", "idle_us",
                              "largest_gaps", "span_us"]


def test_gpu_idle_of_merged_ranks_names_the_most_idle_rank_and_each_ranks_busy_share(tmp_path):
    """Two ranks' events in one profile (a cluster's, merged on demand): rank 0's GPU busy 50 %,
    rank 1's 20 %: one finding for cuda:0, about rank 1, with both ranks' shares."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    traces = []
    for rank, busy_us in ((0, 5000), (1, 2000)):
        t = _busy_trace(busy_us)
        t.rank = rank
        traces.append(read_trace_file(t.write(tmp_path / f"host_{rank}.pt.trace.json")))
    p = TorchProfile.from_trace(concat_traces(traces, labels=[0, 1], label_column="rank"))
    [(sev, ev)] = found(p, "gpu_idle")
    assert sev == "high"  # 80 % idle
    assert (ev["device"], ev["rank"], ev["busy_fraction"], ev["idle_us"]) == ("cuda:0", 1, pytest.approx(0.2),
                                                                              pytest.approx(8000))
    assert ev["busy_fraction_by_rank"] == {"0": pytest.approx(0.5), "1": pytest.approx(0.2)}
    [msg] = p.findings.loc[p.findings["kind"] == "gpu_idle", "message"]
    assert msg.startswith("rank 1 cuda:0 was idle 80% of the profiled span (8.00 ms of 10.00 ms; busy 2.00 ms; "
                          "the ranks were 20% to 50% busy). ")


def test_gpu_idle_shows_the_three_longest_gaps_longest_first(tmp_path):
    """Five kernels of 400 µs: the idle 8,000 µs is 8000 * (6, 5, 4, 3, 2, 1) / 21 before, between
    and after them; the four between them are gaps."""
    p = _busy_trace(2000, pieces=5).load(tmp_path)
    [(_, ev)] = found(p, "gpu_idle")
    assert ev["gaps"] == 4 and ev["gaps_over_100us"] == 4  # 8000 * 2 / 21 = 762 µs the shortest
    assert [g["dur_us"] for g in ev["largest_gaps"]] == pytest.approx([8000 * k / 21 for k in (5, 4, 3)])
    assert ev["largest_gaps"][0]["start_us"] == pytest.approx(8000 * 6 / 21 + 400)
    assert ev["largest_gaps"][0]["cpu"] == "nothing torch records (Python code, I/O or waiting)"


# ---------------------------------------------------------------------------------- launch_bound


def _tiny_kernels(n: int, kernel_us: float, launch_us: float, span_us: float) -> Trace:
    """``n`` kernels of ``kernel_us`` every 25 µs from 100 µs (their stretch is 19 * 25 + kernel_us
    wide for 20), each launched by a ``launch_us`` call; the span is [0, span_us]."""
    t = Trace()
    span_markers(t, span_us)
    for i in range(n):
        ext = t.op("aten::add", 50 + i * 25, launch_us + 2)
        t.launch("elementwise_kernel", ext, 51 + i * 25, launch_us, 100 + i * 25, kernel_us)
    return t


@pytest.mark.parametrize("n,kernel_us,launch_us,span_us,expected", [
    (20, 5, 5, 9_600, "medium"),  # stretch 480 µs: exactly 5 % of the span
    (20, 5, 5, 9_700, None),  # 4.95 %
    (19, 5, 5, 1_000, None),  # 19 kernels: not a stretch
    (20, 5, 4.99, 1_000, None),  # launching took less than running
    (20, 10, 10, 1_000, None),  # 10 µs is not tiny
    (20, 9.99, 9.99, 1_000, "high"),  # 9.99 µs is tiny; the stretch is 484.99 / 1,000 of the span
    (20, 5, 5, 1_600, "high"),  # 480 / 1,600 = 30 %
    (20, 5, 5, 1_610, "medium"),  # 29.8 %
])
def test_launch_bound_thresholds(tmp_path, n, kernel_us, launch_us, span_us, expected):
    p = _tiny_kernels(n, kernel_us, launch_us, span_us).load(tmp_path)
    wall = 19 * 25 + kernel_us
    assert severity(p, "launch_bound") == expected
    if expected:
        [(_, ev)] = found(p, "launch_bound")
        assert ev["kernels"] == n and ev["stretches"] == 1
        assert ev["wall_us"] == pytest.approx(wall) and ev["share_of_span"] == pytest.approx(wall / span_us)
        assert ev["kernel_us"] == pytest.approx(n * kernel_us) and ev["launch_us"] == pytest.approx(n * launch_us)
        assert scores(p, "launch_bound") == [pytest.approx(wall / span_us)]


# ------------------------------------------------------------------------------------ small_grid


def _grid_trace(small_us: float, small_bps: float, span_us: float, kernel: str = "small_kernel") -> Trace:
    """1,000 µs of kernels: ``small_us`` with ``small_bps`` blocks per SM, the rest with 4."""
    t = Trace()
    span_markers(t, span_us)
    ext = t.op("aten::sum", 2, 5)
    t.launch(kernel, ext, 3, 1, 10, small_us, blocks_per_sm=small_bps)
    ext = t.op("aten::mm", 10, 5)
    t.launch("big_kernel", ext, 11, 1, 10 + small_us, 1000 - small_us, blocks_per_sm=4.0)
    return t


@pytest.mark.parametrize("small_us,bps,span_us,expected", [
    (299, 0.5, 2000, None),  # 29.9 % of the kernel time
    (300, 0.5, 2000, "medium"),  # 30 %, the GPU busy 50 % of the span
    (300, 0.5, 2010, "low"),  # busy 49.75 %
    (600, 1.0, 2000, None),  # one block per SM is not fewer blocks than SMs
    (600, 0.99, 2000, "medium"),
])
def test_small_grid_thresholds(tmp_path, small_us, bps, span_us, expected):
    p = _grid_trace(small_us, bps, span_us).load(tmp_path)
    assert severity(p, "small_grid") == expected
    if expected:
        [(_, ev)] = found(p, "small_grid")
        assert ev["share_of_kernel_time"] == pytest.approx(small_us / 1000)
        assert ev["busy_fraction"] == pytest.approx(1000 / span_us)
        assert ev["top_kernels"][0]["kernel"] == "small_kernel"
        assert ev["top_kernels"][0]["launched_by"] == "aten::sum"
        assert scores(p, "small_grid") == [pytest.approx(small_us / 1000 * 1000 / span_us)]  # share x busy


def test_small_grid_severity_of_each_rank_is_by_its_own_devices_busy_time(tmp_path):
    """Two ranks' events in one profile (as a cluster's events are merged on demand) with the
    same small kernels: rank 0's GPU busy 50 % of its span (medium), rank 1's 49.75 % (low):
    each rank's finding reads its own device's busy time."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    traces = []
    for rank, span_us in ((0, 2000), (1, 2010)):
        t = _grid_trace(300, 0.5, span_us)
        t.rank = rank
        traces.append(read_trace_file(t.write(tmp_path / f"host_{rank}.pt.trace.json")))
    p = TorchProfile.from_trace(concat_traces(traces, labels=[0, 1], label_column="rank"))
    got = found(p, "small_grid")
    assert sorted((ev["device"], sev, ev["busy_fraction"]) for sev, ev in got) == [
        ("rank 0 cuda:0", "medium", pytest.approx(1000 / 2000)), ("rank 1 cuda:0", "low", pytest.approx(1000 / 2010))]


def test_small_grid_leaves_out_communication_kernels(tmp_path):
    p = _grid_trace(600, 0.5, 2000, kernel="ncclDevKernel_AllReduce_Sum_f32_RING_LL").load(tmp_path)
    assert severity(p, "small_grid") is None


def test_small_grid_names_three_kernels_biggest_first(tmp_path):
    t = Trace()
    span_markers(t, 2000)
    gpu = 10.0
    for name, us in (("k_a", 100), ("k_b", 400), ("k_c", 300), ("k_d", 200)):
        ext = t.op("aten::sum", gpu, 1)
        t.launch(name, ext, gpu, 1, gpu, us, blocks_per_sm=0.25)
        gpu += us
    [(_, ev)] = found(t.load(tmp_path), "small_grid")
    assert [k["kernel"] for k in ev["top_kernels"]] == ["k_b", "k_c", "k_d"]
    assert ev["top_kernels"][0]["blocks_per_sm"] == pytest.approx(0.25)


# ---------------------------------------------------------------------------------- tensor_cores

TF32_GEMM = "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4"  # runs on the Tensor Cores
SGEMM = "ampere_sgemm_128x64_nn"  # does not


def _tc_trace(off_us: float, tc_us: float, other_us: float, cc: tuple[int, int] = (8, 0),
              dtypes: list[str] | None = None) -> Trace:
    """aten::mm launches ``off_us`` of SGEMM and ``tc_us`` of a TF32 gemm; aten::relu ``other_us``
    of an elementwise kernel."""
    t = Trace()
    t.device_properties = [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 80 * 2**30, "computeMajor": cc[0],
                            "computeMinor": cc[1], "numSms": 132}]
    gpu = 100.0
    for name, kernel, us in (("aten::mm", SGEMM, off_us), ("aten::mm", TF32_GEMM, tc_us),
                             ("aten::relu", "elementwise_kernel", other_us)):
        if not us:
            continue
        ext = t.op(name, gpu - 90, 10)
        if dtypes is not None and name == "aten::mm":
            t.events[-1]["args"]["Input type"] = dtypes
        t.launch(kernel, ext, gpu - 89, 5, gpu, us)
        gpu += us
    return t


@pytest.mark.parametrize("off,tc,other,cc,expected", [
    (500, 0, 500, (6, 1), None),  # Pascal: no Tensor Cores
    (500, 0, 500, (6, 9), None),  # (no such GPU: the threshold is 7.0)
    (500, 0, 500, (7, 0), "medium"),  # Volta: 50 % of the kernel time off them
    (199, 0, 801, (8, 0), None),  # matmuls are 19.9 % of the kernel time
    (200, 0, 800, (8, 0), "low"),  # 20 %, all off the Tensor Cores
    (200, 200, 600, (8, 0), None),  # half the matmul time on the Tensor Cores
    (201, 200, 599, (8, 0), "low"),  # 49.9 % on them
    (300, 0, 700, (8, 0), "medium"),  # 30 % of the kernel time off them
    (299, 0, 701, (8, 0), "low"),
])
def test_tensor_cores_thresholds(tmp_path, off, tc, other, cc, expected):
    p = _tc_trace(off, tc, other, cc, dtypes=["float", "float"]).load(tmp_path)
    assert severity(p, "tensor_cores") == expected
    if expected:
        [(_, ev)] = found(p, "tensor_cores")
        assert ev["eligible_us"] == pytest.approx(off + tc) and ev["tensor_core_us"] == pytest.approx(tc)
        assert ev["share_of_kernel_time"] == pytest.approx(off / 1000)
        assert ev["compute_capability"] == pytest.approx(cc[0] + cc[1] / 10)
        assert ev["input_dtypes"] == ["float"] and ev["ops"] == {"aten::mm": pytest.approx(off)}


@pytest.mark.parametrize("cc,advice", [((8, 0), "TF32 keeps float32 tensors"), ((7, 5), "torch.float16"),
                                       ((7, 9), "torch.float16")])  # (no such GPU: TF32 from 8.0)
def test_tensor_cores_advice_follows_the_compute_capability(tmp_path, cc, advice):
    p = _tc_trace(500, 0, 500, cc, dtypes=["float", "float"]).load(tmp_path)
    msg = p.findings.set_index("kind").loc["tensor_cores", "message"]
    assert advice in msg and ", on float32 inputs. " in msg
    assert ("TF32" in msg) == (cc >= (8, 0))


@pytest.mark.parametrize("dtypes,expected", [(["c10::Half", "c10::Half"], None), (["double", "double"], None),
                                             (None, "medium")])
def test_tensor_cores_only_for_float32_or_unknown_inputs(tmp_path, dtypes, expected):
    p = _tc_trace(500, 0, 500, dtypes=dtypes).load(tmp_path)
    assert severity(p, "tensor_cores") == expected
    if expected:
        assert "The input dtypes were not recorded" in p.findings.set_index("kind").loc["tensor_cores", "message"]


# ------------------------------------------------------------- data_bound, from a trace alone

NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@pytest.mark.parametrize("load_us,expected", [(990, None), (1000, "medium"), (2990, "medium"), (3000, "high")])
def test_data_bound_from_a_trace_share_of_the_span(tmp_path, load_us, expected):
    t = Trace()
    span_markers(t, 10_000)
    t.annotation(NEXT, 10, load_us / 2)
    t.annotation(NEXT, 5000, load_us / 2)
    p = t.load(tmp_path)
    assert severity(p, "data_bound") == expected
    if expected:
        [(_, ev)] = found(p, "data_bound")
        assert ev["batches"] == 2 and ev["total_us"] == pytest.approx(load_us)
        assert ev["mean_us"] == pytest.approx(load_us / 2) and ev["share_of_span"] == pytest.approx(load_us / 10_000)
        assert ev["loaders"] == ["_SingleProcessDataLoaderIter"] and ev["multiprocess"] is False


def test_data_bound_from_a_trace_counts_the_busiest_thread_once(tmp_path):
    """Loader time on two threads is not added up (600 + 600 µs: 6 % on each), and a range
    nested in another on one thread counts once."""
    t = Trace()
    span_markers(t, 10_000)
    t.annotation(NEXT, 10, 600)
    t.annotation(NEXT, 10, 600, tid=TID + 1)
    t.annotation("DataLoader.load", 20, 500, tid=TID + 1)  # nested: no extra time
    assert severity(t.load(tmp_path), "data_bound") is None
    t.annotation(NEXT.replace("_Single", "_MultiProcessing"), 2000, 400)  # 1,000 µs on the first thread: 10 %
    p = t.load(tmp_path, "more.json")
    assert severity(p, "data_bound") == "medium"
    [(_, ev)] = found(p, "data_bound")
    assert ev["multiprocess"] is True and ev["batches"] == 2


# ---------------------------------------------------------------------------------- comm_exposed


@pytest.mark.parametrize("compute_end,comm_start,exposed,expected", [
    (910, 910, 100, "medium"),  # 100 µs of 1,000 alone: exactly 10 %
    (910, 911, 99, None),
    (710, 710, 300, "high"),  # 30 %
    (710, 711, 299, "medium"),
    (910, 300, 100, "medium"),  # 710 µs of all-reduce, 610 of them beside the gemm
    (1010, 300, 0, None),  # all of it beside the gemm
])
def test_comm_exposed_share_of_the_gpu_window(tmp_path, compute_end, comm_start, exposed, expected):
    """The GPU's window is [10, 1010] µs: a gemm from 10 µs to ``compute_end``, an all-reduce from
    ``comm_start`` to 1010 on another stream; exposed is the all-reduce's time without the gemm."""
    t = Trace()
    ext = t.op("aten::mm", 0, 5)
    t.launch("gemm", ext, 1, 2, 10, compute_end - 10)
    ext = t.op("c10d::allreduce_", 6, 5)
    t.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 7, 2, comm_start, 1010 - comm_start, stream=20)
    p = t.load(tmp_path)
    assert severity(p, "comm_exposed") == expected
    if expected:
        [(_, ev)] = found(p, "comm_exposed")
        assert ev["exposed_comm_us"] == pytest.approx(exposed) and ev["share"] == pytest.approx(exposed / 1000)
        assert ev["comm_us"] == pytest.approx(1010 - comm_start)
        assert ev["overlap_pct"] == pytest.approx(100 * (1 - exposed / (1010 - comm_start)))
        assert ev["ranks_over"] == 1
        assert scores(p, "comm_exposed") == [pytest.approx(exposed / 1000)]


# ------------------------------------------------------------------------------- collective_wait


def _ranks_folder(folder, comm_us: list[float], compute_us: list[float] | None = None, span_us: float = 10_000):
    """One file per rank: a gemm of ``compute_us[r]`` and an NCCL all-reduce of ``comm_us[r]``
    on the GPU, in a span of ``span_us`` on every rank."""
    folder.mkdir(exist_ok=True)
    for r, comm in enumerate(comm_us):
        t = Trace(rank=r)
        span_markers(t, span_us)
        compute = compute_us[r] if compute_us else 100.0
        ext = t.op("aten::mm", 10, 10)
        t.launch("gemm", ext, 11, 2, 20, compute)
        ext = t.op("c10d::allreduce_", 30, 10)
        t.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 31, 2, 20 + compute, comm, stream=20)
        t.write(folder / f"rank{r}.json")
    return folder


@pytest.mark.parametrize("comm,expected", [
    ([1000, 500], "medium"),  # twice the other rank's, 500 µs more: 5 % of the span
    ([1998, 1000], None),  # 1.998 times (998 µs more: 10 % of the span)
    ([2000, 1000], "medium"),  # twice
    ([590, 100], None),  # 490 µs more: 4.9 %
    ([600, 100], "medium"),
    ([1590, 100], "medium"),  # 14.9 %
    ([1610, 100], "high"),  # 15.1 %
    ([1000, 400, 600], "medium"),  # the median of the others is 500
    ([1000, 100, 550, 560], None),  # median of the others 550 (their mean, 403, would be less than half)
])
def test_collective_wait_thresholds(tmp_path, comm, expected):
    p = nbprof.load_trace(_ranks_folder(tmp_path / "ranks", comm), workers=0, progress=False)
    assert severity(p, "collective_wait") == expected
    if expected:
        [(_, ev)] = found(p, "collective_wait")
        others = sorted(comm[1:])
        median = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
        assert ev["collective"] == "all_reduce" and ev["waiting_rank"] == 0
        assert ev["late_rank"] == comm.index(min(comm))
        assert ev["extra_us"] == pytest.approx(comm[0] - median)
        assert ev["share"] == pytest.approx((comm[0] - median) / 10_000)
        assert ev["total_us"] == {str(r): pytest.approx(c) for r, c in enumerate(comm)}


# ---------------------------------------------------------------------------------- launch_delay


def _stall_trace(waits_us: list[float], other_stream: tuple[float, float] | None = None) -> Trace:
    """A 10,000 µs span; one launch per wait: its call [c, c + 5] µs, its kernel (10 µs) ``wait``
    after the call returned, on a stream with nothing before it; ``other_stream``: a kernel
    (start, dur) on another stream."""
    t = Trace()
    span_markers(t, 10_000)
    c = 100.0
    for wait in waits_us:
        ext = t.op("aten::add", c - 1, 7)
        t.launch("add_kernel", ext, c, 5, c + 5 + wait, 10)
        c += 5 + wait + 10 + 50
    if other_stream:
        ext = t.op("aten::mm", 20, 5)
        t.launch("gemm", ext, 21, 2, other_stream[0], other_stream[1], stream=9)
    return t


@pytest.mark.parametrize("waits,expected", [
    ([99.9] * 6, None),  # 599 µs of waits, none of them 100 µs
    ([100] * 6, "medium"),  # 600 µs: 6 %
    ([490], None),  # 4.9 %
    ([500], "medium"),
    ([1990], "medium"),
    ([2000], "high"),  # 20 %
])
def test_launch_delay_thresholds(tmp_path, waits, expected):
    p = _stall_trace(waits).load(tmp_path)
    assert severity(p, "launch_delay") == expected
    if expected:
        [(_, ev)] = found(p, "launch_delay")
        assert ev["launches"] == len(waits) and ev["idle_us"] == pytest.approx(sum(waits))
        assert ev["share"] == pytest.approx(sum(waits) / 10_000) and ev["kernels"] == ["add_kernel"]


def test_launch_delay_counts_only_the_time_the_device_ran_nothing(tmp_path):
    """A 2,000 µs wait [105, 2105] with another stream's kernel over [105, 1605]: the device idled
    500 µs of it (5 %); over [105, 1606], 499 µs."""
    assert severity(_stall_trace([2000], other_stream=(105, 1500)).load(tmp_path), "launch_delay") == "medium"
    assert severity(_stall_trace([2000], other_stream=(105, 1501)).load(tmp_path, "b.json"), "launch_delay") is None


# ----------------------------------------------------------------------------------- memory_peak

GIB = 2**30


@pytest.mark.parametrize("reserved,expected", [
    (80 * GIB * 79 // 100, "low"),  # 79 % of the 80 GiB device
    (64 * GIB, "medium"),  # 80 %
    (80 * GIB * 949 // 1000, "medium"),
    (76 * GIB, "high"),  # 95 %
])
def test_memory_peak_severity_by_reserved_share_of_the_device(tmp_path, reserved, expected):
    t = Trace()
    t.op("aten::empty", 10, 10)
    t.memory(15, 1 << 20, total_allocated=1 << 20, total_reserved=reserved)
    t.op("aten::relu", 100, 10)
    p = t.load(tmp_path)
    assert severity(p, "memory_peak") == expected
    [(_, ev)] = found(p, "memory_peak")
    assert ev["peak_reserved_bytes"] == reserved and ev["device_memory_bytes"] == 80 * GIB
    assert ev["peak_allocated_bytes"] == 1 << 20 and ev["top_ops"] == [{"op": "aten::empty", "bytes": 1 << 20}]


def test_memory_peak_names_three_ops_held_at_the_peak_biggest_first(tmp_path):
    """Four ops allocate 1, 4, 3, 2 MiB (kept); a fifth allocates 8 MiB and frees it before the
    peak; the peak is 10 MiB after the fourth, 2 MiB of which were there before the profile."""
    t = Trace()
    held = 2 * (1 << 20)
    for i, mib in enumerate((1, 4, 3, 2)):
        t.op(f"aten::op{i}", 100 * i, 10)
        held += mib << 20
        t.memory(100 * i + 5, mib << 20, total_allocated=held, total_reserved=64 << 20, addr=1000 + i)
    t.op("aten::scratch", 50, 10)
    t.memory(52, 8 << 20, total_allocated=2 * (1 << 20) + (1 << 20) + (8 << 20), total_reserved=64 << 20, addr=7)
    t.memory(55, -(8 << 20), total_allocated=3 << 20, total_reserved=64 << 20, addr=7)
    t.op("aten::relu", 1000, 10)
    p = t.load(tmp_path)
    [(sev, ev)] = found(p, "memory_peak")
    assert sev == "low"
    assert ev["peak_allocated_bytes"] == 12 << 20 and ev["at_us"] == pytest.approx(305)
    assert ev["allocated_before_profile_bytes"] == 2 << 20
    assert ev["top_ops"] == [{"op": "aten::op1", "bytes": 4 << 20}, {"op": "aten::op2", "bytes": 3 << 20},
                             {"op": "aten::op3", "bytes": 2 << 20}]


def test_memory_peak_of_merged_ranks_names_each_devices_highest_rank(tmp_path):
    """Every rank's events in one table (a folder's ``_merged``): one finding per device, for the
    rank with its highest peak (cuda:0: rank 1's 6 MiB over rank 0's 4 MiB; cuda:1: only rank 0,
    1 MiB), with every rank's peak on that device; a CPU allocation is left out (GPU memory)."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    mib = 1 << 20
    traces = []
    for rank, peaks in ((0, {0: 4, 1: 1}), (1, {0: 6})):
        t = Trace(rank=rank)
        t.op("aten::empty", 10, 100)
        for device, peak in peaks.items():
            t.memory(20 + device, peak * mib, total_allocated=peak * mib, total_reserved=8 * mib, device=device,
                     addr=100 + device)
        t.memory(30, 64 * mib, total_allocated=64 * mib, total_reserved=0, device=-1, addr=9)
        t.op("aten::relu", 200, 10)
        traces.append(read_trace_file(t.write(tmp_path / f"r{rank}.json")))
    p = TorchProfile.from_trace(concat_traces(traces, labels=[0, 1], label_column="rank"))
    got = {ev["device"]: ev for _, ev in found(p, "memory_peak")}
    assert sorted(got) == ["cuda:0", "cuda:1"]
    assert got["cuda:0"]["rank"] == 1 and got["cuda:0"]["peak_allocated_bytes"] == 6 * mib
    assert got["cuda:0"]["peak_allocated_by_rank"] == {"0": 4 * mib, "1": 6 * mib}
    assert got["cuda:1"]["rank"] == 0 and got["cuda:1"]["peak_allocated_by_rank"] == {"0": 1 * mib}


# --------------------------------------------------------------------------------- memory_growth


def _growth_trace(kept: list[int], freed_before: int = 0, base: int = 0, graph: tuple[int, ...] = (),
                  plain: int = 0, backward: bool = False) -> Trace:
    """A loop of ProfilerStep#k ranges, 1,000 µs each. Step k allocates ``kept[k]`` bytes under
    ``aten::relu`` (never freed), ``graph``'s blocks under ops that made an autograd node
    (``aten::linear``, each with the thread's next sequence number) and ``plain`` bytes under an op
    that ran with grad mode on but made no node (its number is the next op's), none of them freed; and frees ``freed_before`` bytes
    of a block from before the profile. ``base``: bytes the allocator held before the profile."""
    t = Trace()
    held, addr, seq = base, 100, 0
    for k, nbytes in enumerate(kept):
        t0 = k * 1000
        t.annotation(f"ProfilerStep#{k}", t0, 1000)
        ops = ([("aten::relu", nbytes, None)] if nbytes else []) + [("aten::linear", b, 0) for b in graph]
        ops += [("aten::add", plain, 1)] if plain else []
        for i, (name, size, numbered) in enumerate(ops):
            t.op(name, t0 + 100 + 50 * i, 40)
            if numbered is not None:  # grad mode on: numbered; 0: it made a node (the number moves on), 1: none
                t.events[-1]["args"]["Sequence number"] = seq
                seq += 1 if numbered == 0 else 0
            held += size
            t.memory(t0 + 120 + 50 * i, size, total_allocated=held, total_reserved=64 << 20, addr=addr)
            addr += 1
        if freed_before:
            t.op("aten::zero_", t0 + 800, 40)
            held -= freed_before
            t.memory(t0 + 820, -freed_before, total_allocated=held, total_reserved=64 << 20, addr=10**6 + k)
    t.op("aten::mul", len(kept) * 1000 + 10, 10)  # the thread's next number: the last step's ops made nodes
    t.events[-1]["args"]["Sequence number"] = seq
    if backward:
        t.op("autograd::engine::evaluate_function: ReluBackward0", len(kept) * 1000 + 50, 10)
        t.events[-1]["args"]["Sequence number"] = 0
    return t


@pytest.mark.parametrize("steps,fires", [(3, False), (4, True)])
def test_memory_growth_needs_four_steps(tmp_path, steps, fires):
    p = _growth_trace([8192] * steps).load(tmp_path)
    assert len(p.memory_growth()) == steps
    assert (severity(p, "memory_growth") is not None) == fires


@pytest.mark.parametrize("nbytes,fires", [(4095, False), (4096, True)])
def test_memory_growth_needs_four_kib_a_step(tmp_path, nbytes, fires):
    p = _growth_trace([nbytes] * 5).load(tmp_path)
    assert (p.memory_growth()["added_never_freed_bytes"] == nbytes).all()
    assert (severity(p, "memory_growth") is not None) == fires


@pytest.mark.parametrize("growing,fires", [(5, False), (6, True)])
def test_memory_growth_needs_three_quarters_of_the_steps_after_the_first(tmp_path, growing, fires):
    """Nine steps: the first keeps nothing (no matter), then 5 or 6 of the other 8 keep 8 KiB
    (62.5 % / 75 %)."""
    kept = [0] + [8192] * growing + [0] * (8 - growing)
    p = _growth_trace(kept).load(tmp_path)
    assert (severity(p, "memory_growth") is not None) == fires
    if fires:
        [(_, ev)] = found(p, "memory_growth")
        assert ev["growing_steps"] == 6 and ev["steps"] == 9


@pytest.mark.parametrize("freed,fires", [(4097, False), (4096, True)])
def test_memory_growth_needs_the_allocator_to_grow_by_half_of_what_the_steps_keep(tmp_path, freed, fires):
    """Each step keeps 8 KiB but frees ``freed`` bytes of an older block: the allocator grows by
    8,192 − freed a step, against half of the 8,192 kept (frees the profiler missed, between
    --schedule's active steps, look like this)."""
    p = _growth_trace([8192] * 5, freed_before=freed).load(tmp_path)
    held = p.memory_growth()["held_bytes"].to_numpy()
    assert held[-1] - held[0] == 4 * (8192 - freed)
    assert (severity(p, "memory_growth") is not None) == fires


@pytest.mark.parametrize("base,expected", [(3 * 4 * 8192, "medium"), (3 * 4 * 8192 + 4, "low")])
def test_memory_growth_is_medium_from_a_quarter_of_what_the_allocator_held(tmp_path, base, expected):
    """Four steps keep 32 KiB in all; the allocator held ``base`` before them: 25 % of the most it
    held is medium, a hair less low."""
    p = _growth_trace([8192] * 4, base=base).load(tmp_path)
    assert severity(p, "memory_growth") == expected
    [(_, ev)] = found(p, "memory_growth")
    assert ev["kept_bytes"] == 4 * 8192 and ev["op"] == "aten::relu" and ev["bytes_per_step"] == 8192


@pytest.mark.parametrize("plain,cause", [(1001, None), (1000, "no_grad")])
def test_memory_growth_names_the_graph_from_nine_tenths_of_the_bytes(tmp_path, plain, cause):
    """Each step keeps two results of ops that made autograd nodes (4,500 B each) and ``plain``
    bytes of one that did not: 9,000 of 10,000 is 90 %, 9,000 of 10,001 less."""
    p = _growth_trace([0] * 5, graph=(4500, 4500), plain=plain).load(tmp_path)
    [(_, ev)] = found(p, "memory_growth")
    assert ev["cause"] == cause and ev["graph_ops_per_step"] == 2
    assert ev["graph_share"] == pytest.approx(9000 / (9000 + plain))


@pytest.mark.parametrize("graph,cause", [((9000,), None), ((4500, 4500), "no_grad")])
def test_memory_growth_names_the_graph_from_two_ops_a_step(tmp_path, graph, cause):
    """One kept result a step is the result; two are a graph that kept what it saved."""
    p = _growth_trace([0] * 5, graph=graph).load(tmp_path)
    [(_, ev)] = found(p, "memory_growth")
    assert ev["cause"] == cause and ev["graph_share"] == 1.0 and ev["graph_ops_per_step"] == len(graph)


@pytest.mark.parametrize("backward,cause,words", [
    (False, "no_grad", "an evaluation loop without torch.no_grad()"),
    (True, "kept_graph", "a tensor that requires grad is kept across steps"),
])
def test_memory_growth_cause_depends_on_whether_a_backward_ran(tmp_path, backward, cause, words):
    p = _growth_trace([0] * 5, graph=(4500, 4500), backward=backward).load(tmp_path)
    [(_, ev)] = found(p, "memory_growth")
    assert ev["cause"] == cause and ev["backward_ran"] == backward
    [message] = p.findings[p.findings["kind"] == "memory_growth"]["message"]
    assert words in message


# ------------------------------------------------------------------------------------- straggler


@pytest.mark.parametrize("compute,expected", [
    ([1000, 1000, 1099], None),  # 9.9 % above the median rank
    ([1000, 1000, 1100], "medium"),  # 10 %
    ([1000, 1000, 1170], "medium"),  # 17 % (issue 26: a tripled threshold lost this one)
    ([1000, 1000, 1290], "medium"),
    ([1000, 1000, 1310], "high"),  # 31 %
    ([1000, 1410], "medium"),  # two ranks: the median is their mean, 1,205: 17 % above it
])
def test_straggler_compute_path(tmp_path, compute, expected):
    """Every rank spends the same 50 µs in the all-reduce (no wait to see); the last one computes
    more. imbalance = (max - median) / median of the ranks' device time outside collectives."""
    folder = _ranks_folder(tmp_path / "ranks", [50] * len(compute), compute_us=compute)
    p = nbprof.load_trace(folder, workers=0, progress=False)
    assert severity(p, "straggler") == expected
    if expected:
        [(_, ev)] = found(p, "straggler")
        ordered = sorted(compute)
        median = ordered[len(ordered) // 2] if len(ordered) % 2 else sum(ordered) / 2
        assert ev["slowest_rank"] == len(compute) - 1
        assert ev["imbalance"] == pytest.approx((compute[-1] - median) / median)
        assert ev["compute_us"] == {str(r): pytest.approx(c) for r, c in enumerate(compute)}
        assert ev["wait_share"] == 0


def _gloo_rank(rank: int, wait_us: float) -> Trace:
    """A CPU rank (gloo): the same 500 µs of compute on every rank, ``wait_us`` in the all-reduce,
    in a 10,000 µs span."""
    t = Trace(rank=rank)
    span_markers(t, 10_000)
    t.op("aten::addmm", 100, 500)
    t.annotation("gloo:all_reduce", 1000, wait_us)
    return t


@pytest.mark.parametrize("waits,expected", [
    ([100, 1090], None),  # the ranks' time in collectives differs by 9.9 % of the span
    ([100, 1100], "medium"),  # 10 %
    ([100, 3090], "medium"),  # 29.9 %
    ([100, 3110], "high"),  # 30.1 %
])
def test_straggler_wait_path(tmp_path, waits, expected):
    """Without device work, waiting shows as time in the collective: the rank that waits least
    is the slowest."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r, w in enumerate(waits):
        _gloo_rank(r, w).write(folder / f"rank{r}.json")
    p = nbprof.load_trace(folder, workers=0, progress=False)
    assert severity(p, "straggler") == expected
    if expected:
        [(_, ev)] = found(p, "straggler")
        assert ev["slowest_rank"] == 0 and ev["imbalance"] == pytest.approx(0, abs=1e-12)
        assert ev["wait_share"] == pytest.approx((waits[1] - waits[0]) / 10_000)
        assert ev["comm_us"] == {"0": pytest.approx(waits[0]), "1": pytest.approx(waits[1])}


# ------------------------------------------------------------------------------- cProfile's kinds


def _pstats(rows: dict[str, tuple[int, float, float]], total_s: float):
    """A PythonProfile from ``{function: (ncalls, tottime_s, cumtime_s)}`` called by <module>,
    whose own time makes the total ``total_s``."""
    from nbprof.model import PythonProfile

    main = ("main.py", 1, "<module>")
    own = total_s - sum(tt for _, tt, _ in rows.values())
    raw = {main: (1, 1, own, total_s, {})}
    for i, (fn, (nc, tt, ct)) in enumerate(rows.items()):
        raw[("main.py", 10 * (i + 1), fn)] = (nc, nc, tt, ct, {main: (nc, nc, tt, ct)})
    return PythonProfile(raw)


@pytest.mark.parametrize("tt,expected", [(0.49, "low"), (0.5, "medium"), (0.51, "medium")])
def test_top_function_share(tt, expected):
    p = _pstats({"work": (3, tt, tt), "other": (2, 0.25, 0.25)}, total_s=1.0)  # <module>'s own: 0.75 - tt
    [(sev, ev)] = found(p, "top_function")
    assert sev == expected and ev["function"] == "work" and ev["share"] == pytest.approx(tt)


@pytest.mark.parametrize("ncalls,cumtime,total,expected", [
    (10_000, 0.5, 1.0, "high"),  # 50 µs a call, half the time
    (9_999, 0.5, 1.0, None),  # fewer than 10,000 calls
    (10_000, 1.0, 2.0, "high"),  # exactly 100 µs a call
    (10_000, 1.0001, 2.0, None),  # 100.01 µs a call
    (20_000, 0.099, 1.0, None),  # 9.9 % of the time
    (20_000, 0.1, 1.0, "medium"),  # 10 %
    (20_000, 0.299, 1.0, "medium"),
    (20_000, 0.3, 1.0, "high"),  # 30 %
])
def test_hot_function_thresholds(ncalls, cumtime, total, expected):
    p = _pstats({"tiny": (ncalls, cumtime, cumtime)}, total_s=total)
    assert severity(p, "hot_function") == expected
    if expected:
        [(_, ev)] = found(p, "hot_function")
        assert ev["ncalls"] == ncalls and ev["per_call_s"] == pytest.approx(cumtime / ncalls)
        assert ev["share"] == pytest.approx(cumtime / total)


def test_hot_function_reports_the_three_biggest():
    p = _pstats({"a": (20_000, 0.11, 0.11), "b": (20_000, 0.2, 0.2), "c": (20_000, 0.15, 0.15),
                 "d": (20_000, 0.12, 0.12)}, total_s=1.0)
    assert [ev["function"] for _, ev in found(p, "hot_function")] == ["b", "c", "d"]


# ------------------------------------------- what the mutation sample found untested (docs/testing.md)


def test_graph_breaks_from_restart_reasons_where_torch_logs_no_break_artifact(tmp_path):
    """torch 2.4 logs no `dynamo_graph_break_reason`: a break is a restart reason of the frame's
    compilation, placed at the line its resume function is named for."""
    def frame(cid: int, name: str, **more) -> dict:
        return {"event": "compilation_metrics", "frame_id": cid, "frame_compile_id": 0,
                "metrics": {"compile_id": f"{cid}/0", "co_name": name, "co_filename": "/home/u/model.py",
                            "co_firstlineno": 3, **more}}
    records = [frame(0, "forward", restart_reasons=["Unsupported: builtin: print\nmore detail"]),
               frame(1, "torch_dynamo_resume_in_forward_at_15", resume_code="print(x)")]
    p = compile_log_trace(records).load(tmp_path)
    breaks = p.compilation().graph_breaks
    assert breaks[["compile_id", "source", "code", "reason", "detail"]].to_dict("records") == [
        {"compile_id": "0/0", "source": "…/u/model.py:15", "code": "print(x)",
         "reason": "Unsupported: builtin: print", "detail": "Unsupported: builtin: print\nmore detail"}]
    assert list(breaks.columns) == ["compile_id", "frame", "source", "code", "reason", "explanation", "detail"]
    assert "forward" in breaks["frame"].iloc[0]
    [(sev, ev)] = found(p, "graph_break")
    assert sev == "medium" and ev["source"] == "…/u/model.py:15" and ev["count"] == 1


def test_a_bounded_call_tree_keeps_the_biggest_functions():
    """Twelve functions of 1..12 ms under <module>, a tree of at most 8 rows (one kept for each
    expanded row's "other"): the root, <module>,
    the four biggest (12, 11, 10, 9 ms, biggest first) and one "other" row for the eight others
    (36 ms)."""
    p = _pstats({f"f{i:02d}": (1, i / 1000, i / 1000) for i in range(1, 13)}, total_s=0.1)
    tree = p.call_tree(min_fraction=0, max_nodes=8)
    assert tree["name"].tolist() == ["cell", "<module>:1", "f12", "f11", "f10", "f09", "other (8 functions)"]
    assert tree["value_s"].tolist() == pytest.approx([0.1, 0.1, 0.012, 0.011, 0.010, 0.009, 0.036])


def test_a_stream_whose_launches_take_no_time_has_no_mean_queue_length(tmp_path):
    """A kernel of 0 µs that starts when its launch call does: the stream's window is 0 µs, its
    mean queue length is not a number (NaN, a float column), not 0 and not None."""
    t = Trace()
    ext = t.op("aten::zero_", 0, 10)
    t.launch("k", ext, 1, 2, 1, 0)
    q = nbprof.load_trace(t.write(tmp_path / "t.json")).queue_length()
    assert q["mean_queue_length"].dtype == np.float64 and np.isnan(q["mean_queue_length"].iloc[0])
    assert q["window_us"].iloc[0] == 0 and q["launches"].iloc[0] == 1


def test_blocks_of_one_size_held_at_a_time_are_in_allocation_order(tmp_path):
    """40 blocks of 4 KiB and one of 8 KiB: the biggest first, then the others in the order they
    were allocated (a stable sort: quicksort mixes equal sizes above 16 of them)."""
    t = Trace()
    t.op("aten::empty", 0, 1000)
    for i in range(40):
        t.memory(10 + i, 4096, total_allocated=4096 * (i + 1), total_reserved=1 << 20, device=-1, addr=100 + i)
    t.memory(60, 8192, total_allocated=4096 * 42, total_reserved=1 << 20, device=-1, addr=999)
    p = t.load(tmp_path)
    held = p.alive_at(500, "cpu")
    assert held["bytes"].tolist() == [8192] + [4096] * 40
    assert held["alloc_us"].tolist()[1:] == [10.0 + i for i in range(40)]


def test_byte_columns_are_integers_without_memory_events(tmp_path):
    """A trace with no memory events: every byte column is an int64 of zeros (not float), in the
    events table and in the key averages."""
    t = Trace()
    t.op("aten::a", 0, 10)
    t.op("aten::b", 2, 5)
    p = t.load(tmp_path)
    cols = ["cpu_mem_bytes", "device_mem_bytes", "self_cpu_mem_bytes", "self_device_mem_bytes"]
    for frame in (p.events, p.key_averages()):
        for c in cols:
            if c in frame.columns:
                assert frame[c].dtype == np.int64 and (frame[c] == 0).all(), c
    assert all(c in p.events.columns for c in cols)


def test_range_ops_are_in_tree_order_then_by_self_time(tmp_path):
    """Paths as the tree reads: a parent before its children, siblings by their first start
    ("later" is written first in the file, runs last); each path's operators by self CPU time."""
    t = Trace()
    t.annotation("later", 200, 100)
    t.op("aten::z", 210, 10)
    t.annotation("outer", 0, 100)
    t.op("aten::x", 10, 5)
    t.op("aten::w", 70, 20)
    t.annotation("inner", 30, 30)
    t.op("aten::y", 35, 10)
    p = t.load(tmp_path)
    got = list(zip(p.range_ops()["path"], p.range_ops()["name"], p.range_ops()["self_cpu_us"]))
    assert got == [("outer", "aten::w", 20.0), ("outer", "aten::y", 10.0), ("outer", "aten::x", 5.0),
                   ("outer › inner", "aten::y", 10.0), ("later", "aten::z", 10.0)]


def test_collective_calls_of_a_trace_without_collectives_have_the_columns():
    from nbprof.analysis.collectives import collective_calls
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.model import TorchProfile

    from .conftest import DATA

    p = TorchProfile.from_trace(read_trace_file(str(DATA / "cnn_train_cuda.trace.json.gz")))
    calls = collective_calls(p._events)
    assert len(calls) == 0
    assert list(calls.columns) == ["rank", "process_group", "seq", "name", "start_us", "dur_us", "event"]


def test_memory_track_holds_an_event_at_the_windows_end():
    """The window [t0, t1] is closed: a change of the allocated total exactly at t1 is drawn."""
    from nbprof.analysis.timeline_tracks import memory_track

    curve = pd.DataFrame({"device": ["cpu"] * 3, "time_us": [0.0, 50.0, 100.0],
                          "allocated_bytes": [1024, 4096, 8192]})
    track = memory_track(curve, 10.0, 100.0)
    assert list(zip(track["time_us"], track["allocated_bytes"])) == [(10.0, 1024), (50.0, 4096), (100.0, 8192)]


def test_code_sites_walks_a_stack_shallower_than_its_limit():
    """Asked for more frames than the stack has: every frame (this test's first), then it stops."""
    import sys

    from nbprof.collect.collector import code_sites

    sites = code_sites((), limit=10_000)
    frames, f = [], sys._getframe()
    while f is not None:  # this test's frame and every caller, but contextlib's (code_sites skips them)
        if not f.f_code.co_filename.endswith("contextlib.py"):
            frames.append((f.f_code.co_filename, f.f_code.co_name))
        f = f.f_back
    # under mutation testing (docs/testing.md) mutmut's trampoline calls code_sites: a frame of its own
    sites = [s for s in sites if "/mutmut/mutation/" not in s[0].replace("\\", "/")]
    assert [(s[0], s[2]) for s in sites] == frames
    assert sites[0][2] == "test_code_sites_walks_a_stack_shallower_than_its_limit"


def test_a_compile_logs_files_include_those_its_graph_breaks_name():
    """The source files a compile log names, from its frames' metrics and its break payloads'
    tracebacks (the report keeps those files' lines)."""
    from nbprof.collect.compile_state import log_files

    payload = ('Graph Break Reason: Unsupported\nUser code traceback:\n  File "/home/u/layers.py", line 12, in forward\n'
               "    print(x)\n")
    log = {"records": [{"event": "compilation_metrics", "metrics": {"co_filename": "/home/u/model.py"}},
                       {"event": "dynamo_graph_break_reason", "payload": payload}]}
    assert log_files(log) >= {"/home/u/model.py", "/home/u/layers.py"}
    assert log_files(None) == set()


def test_merging_rectangles_again_adds_their_event_counts():
    """The cluster view merges rectangles that are merges already (stacked ranks, merged again):
    a group's per-name event counts are the sums of its inputs' counts, not how many inputs it has.
    Three inputs: a (3 events, 1 µs busy) and b (2 events, 2 µs) of one name, c (4 events, 0.5 µs)
    of another, all joined into one rectangle."""
    from nbprof.analysis.timeline import aggregate

    join = np.array([False, True, True])
    x0, x1 = np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 3.5])
    group, out = aggregate(join, x0, x1, count=np.array([3, 2, 4]), busy=np.array([1.0, 2.0, 0.5]),
                           key=np.array([7, 7, 9]))
    assert group.tolist() == [0, 0, 0]
    assert out["count"].tolist() == [9] and out["size"].tolist() == [3] and out["distinct"].tolist() == [2]
    assert out["top_keys"].tolist() == [[7, 9, -1]]  # by busy time: 3 µs, then 0.5 µs
    assert out["top_counts"].tolist() == [[5, 4, 0]]


def test_a_timeline_far_from_zero_draws_its_ticks_and_ends(tmp_path):
    """A view that starts 4.6e15 µs in (the latest start the reader keeps) and spans 1 µs: t + step == t in
    floating point there, and the tick loop once never ended (the fuzz test's OOM). Run in a child
    process with a memory cap and a timeout, so that the bug, back, fails instead of taking the
    machine down."""
    import subprocess
    import sys

    script = tmp_path / "far.py"
    script.write_text(f"""
import dataclasses, resource, sys, re
resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from tests.synthetic import Trace
from nbprof.analysis.timeline import timeline_rects
from nbprof.views.timeline import timeline_svg
from pathlib import Path
t = Trace(); t.op("aten::a", 0, 10); t.op("aten::b", 2, 5)
p = t.load(Path({str(tmp_path)!r}))
data = dataclasses.replace(timeline_rects(p._events, p.meta), t0_us=4.6e15, t1_us=4.6e15 + 1.0)
svg = timeline_svg(data)
print(len(re.findall(r'stroke="#e3e5e9"', svg)))
""")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert 1 <= int(run.stdout.split()[-1]) <= 64
