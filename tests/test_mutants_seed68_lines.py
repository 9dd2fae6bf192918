"""What seed 68's sample of mutants (docs/testing.md) showed no test held in ``nbprof.analysis.lines``
and ``nbprof.analysis.overview``, each against an answer of its own: an operator with no Python call
above it joined to the only line the line tracer recorded before it (a record written by hand), the
format version of the line data read from torch's own ``with_stack`` trace, and a step's breakdown in
exact nanoseconds 152 days into a hand-made profile (past 2**53 ns, where a float64 nanosecond is 2 ns)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"


def test_an_orphan_op_joins_the_only_line_recorded_before_it():
    """A line record written by hand, as ``read_lines`` writes it: one operator (external id 7) with
    no Python call above it (``orphan`` True: a TorchScript fork's thread) that started at 1,000 ns,
    while the cell's thread (id 3) was in the call ``run(x)`` made from cell line 5 (500 to 2,000 ns).
    The line tracer recorded one line before the op: ``run``'s line 12 (model.py, its code spans 11
    to 12) at 600 ns, inside that call. By the module doc's rule the op goes on that line under the
    cell's: a new frame (model.py, 12, run), stack [cell line 5, model.py line 12]."""
    from nbprof.analysis.lines import finish_line_data
    from nbprof.collect.lines import LINE_DATA_VERSION

    none: list[int] = []
    raw = {"version": LINE_DATA_VERSION, "method": "tracer",
           "frames": [["<ipython-input-1>", 5, "<module>"]], "stacks": [[], [0]],
           "ops": {"external_id": [7], "stack": [0], "join": [-1], "since": [0], "start": [1000], "bound": [1000],
                   "orphan": [True]},
           "allocs": {"stack": none, "join": none, "since": none, "start": none, "bound": none, "bytes": none,
                      "orphan": none},
           "calls": {"start": [500], "end": [2000], "stack": [1], "parent": [-1], "thread": [3]},
           "tracer": {"time": np.array([600], np.int64), "code": np.array([10], np.int64),
                      "line": np.array([12], np.int64)},
           "codes": {10: ("/work/model.py", "run", 11)}, "code_spans": {10: (11, 12)}}
    data = finish_line_data(raw)
    assert data["frames"] == {"file": ["<ipython-input-1>", "/work/model.py"], "line": [5, 12],
                              "function": ["<module>", "run"], "function_line": [None, 11]}
    assert data["stacks"] == [[], [0], [0, 1]]
    assert data["ops"] == {"external_id": [7], "stack": [2]}


def test_lines_from_torchs_frames_are_in_the_recorded_format():
    """``line_data_from_frames`` on torch's own ``with_stack`` trace (tests/data's transformer
    inference) gives line data in the form ``--lines`` saves (``meta.line_data``): its format
    version is the one the recorder writes, ``collect.lines.LINE_DATA_VERSION`` (1), and the
    saved-trace checker takes it as it is."""
    import nbprof
    from nbprof.analysis.lines import line_data_from_frames
    from nbprof.collect.lines import LINE_DATA_VERSION, checked_lines

    p = nbprof.load_trace(DATA / "transformer_infer_stack.trace.json.gz")
    data = line_data_from_frames(p.events, p.meta.code_names)
    assert LINE_DATA_VERSION == 1 and data["version"] == 1 and data["method"] == "function_entries"
    checked, _, problem = checked_lines({"line_data": data, "sources": {}})
    assert problem is None and checked["version"] == 1


def test_a_step_152_days_in_keeps_exact_nanoseconds(tmp_path):
    """A hand-made trace in the plugin's bare-list form: step 1 at 0 (300 us, an op of 100 us
    in it) and step 2 at 13,194,139,533,312.5 us (2**43 + 2**42 us and a half: 152 days later,
    past 2**53 ns) lasting 300.805 us, with an op from 20.5 us into it running past its end.
    By hand: step 2's CPU time is its end minus the op's start, 300.805 - 20.5 = 280.305 us, and
    the rest, 20.5 us, is other; step 2 ends on an odd nanosecond, which a float64 cannot hold
    there, so this holds only if the breakdown stays on int64 nanoseconds."""
    from .test_tb_plugin import load_events, op

    t = 13194139533312.5
    p = load_events(tmp_path, [op("ProfilerStep#1", 0, 300, 2), op("aten::mm", 50, 100, 3),
                               op("ProfilerStep#2", t, 300.805, 4), op("aten::add", t + 20.5, 400, 5)])
    o = p.overview().set_index("step")
    assert o.loc[2, "duration_us"] == 300.805
    assert o.loc[2, "cpu_exec_us"] == 280.305 and o.loc[2, "other_us"] == 20.5
    assert o.loc[1, "cpu_exec_us"] == 100.0 and o.loc[1, "other_us"] == 200.0
    assert o.loc["all", "cpu_exec_us"] == 380.305
