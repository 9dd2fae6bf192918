"""What seed 71's sample of mutants of ``nbprof.analysis.lines`` (docs/testing.md) showed no test held,
each against an answer counted by hand from a record written by hand: a line record with no code spans
(each function's own lines then known only by its first line), and an operator joined to a function
whose code the line tracer recorded no line of, numbered above every code it did record."""

from __future__ import annotations

import numpy as np


def test_a_record_without_code_spans_knows_a_function_by_its_first_line():
    """A line record written by hand, as ``read_lines`` writes it but without ``code_spans`` (which
    ``finish_line_data`` reads as optional): two operators under the call ``run(x)`` made from cell
    line 5, joined to ``run``'s code (model.py, first line 11). The line tracer recorded line 11 at
    600 ns and line 12 at 800 ns; the ops started at 700 and 900 ns, so they go on lines 11 and 12
    (new frames 1 and 2, stacks [0, 1] and [0, 2]). With no span, ``run``'s lines are known only as
    its first line: the frame on line 11 has function_line 11, the one on line 12 none."""
    from nbprof.analysis.lines import finish_line_data
    from nbprof.collect.lines import LINE_DATA_VERSION

    none: list[int] = []
    raw = {"version": LINE_DATA_VERSION, "method": "tracer",
           "frames": [["<ipython-input-1>", 5, "<module>"]], "stacks": [[], [0]],
           "ops": {"external_id": [7, 8], "stack": [1, 1], "join": [10, 10], "since": [500, 500],
                   "start": [700, 900], "bound": [700, 900], "orphan": [False, False]},
           "allocs": {"stack": none, "join": none, "since": none, "start": none, "bound": none, "bytes": none,
                      "orphan": none},
           "calls": {"start": [500], "end": [2000], "stack": [1], "parent": [-1], "thread": [3]},
           "tracer": {"time": np.array([600, 800], np.int64), "code": np.array([10, 10], np.int64),
                      "line": np.array([11, 12], np.int64)},
           "codes": {10: ("/work/model.py", "run", 11)}}
    data = finish_line_data(raw)
    assert data["frames"] == {"file": ["<ipython-input-1>", "/work/model.py", "/work/model.py"],
                              "line": [5, 11, 12], "function": ["<module>", "run", "run"],
                              "function_line": [None, 11, None]}
    assert data["stacks"] == [[], [0], [0, 1], [0, 2]]
    assert data["ops"] == {"external_id": [7, 8], "stack": [2, 3]}


def test_an_op_of_a_function_numbered_above_every_recorded_code_gets_no_line():
    """``_join_lines`` on hand-made records: the line tracer recorded only code 7 (line 2 at 10 ns,
    line 3 at 20 ns). An op joined to code 7 at 25 ns gets line 3; ops joined to code 9 (above every
    recorded code) and code 5 (below them), whose functions ran no recorded line, get none (-1)."""
    from nbprof.analysis.lines import _join_lines

    t_code = np.array([7, 7])
    t_time = np.array([10, 20])
    t_line = np.array([2, 3])
    join = np.array([7, 9, 5])
    start = np.array([25, 25, 25])
    since = np.array([0, 0, 0])
    assert _join_lines(join, start, since, t_code, t_time, t_line).tolist() == [3, -1, -1]
