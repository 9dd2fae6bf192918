"""The loops of the user's code and their iterations (``analysis.loops``), and which loop makes a
profile's steps (``analysis.growth.step_windows``), on line records written by hand: each test
states the lines a frame ran and when, as the line tracer records them, and the iterations that
follow from the rule (an iteration runs from one hit of the loop's first line to the next, in
one run of the loop)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from nbprof.analysis.growth import LOOP_CLOCK_NS, LOOP_MIN_ITERATIONS, step_windows
from nbprof.analysis.loops import loop_headers, loop_iterations

CELL = "<ipython-input-3-abc>"
CELL_TEXT = """\
%%torchprof --lines --memory
outputs = []
for i in range(3):
    x = i * 2
    for j in range(2):
        outputs.append(x)
print(len(outputs))
"""


def _raw(records: list[tuple[int, int, int]], codes: dict[int, tuple[str, str, int]], sources: dict[str, str]):
    """A line record: (time_ns, code id, line) in time order."""
    t, c, ln = (np.asarray(v, dtype=np.int64) for v in zip(*records)) if records else (np.zeros(0, np.int64),) * 3
    return {"tracer": {"time": t, "code": c, "line": ln}, "codes": codes, "sources": sources}


def test_loop_headers_are_for_and_while_statements_with_ipythons_own_lines_blanked():
    assert loop_headers(CELL_TEXT) == [(3, 6), (5, 6)]
    assert loop_headers("while x:\n    x -= 1\n!ls\nfor a in b: pass\n") == [(1, 2), (4, 4)]
    assert loop_headers("def f(:\n") == []  # not Python: no loops, no error


def test_nested_loops_iterations_in_one_frame():
    """The cell above, as the tracer sees it: line 3 is hit 3 + 1 times (the last: the iterator is
    done), line 5 2 + 1 times in each outer iteration."""
    recs: list[tuple[int, int, int]] = [(0, 1, 2)]
    t = 10
    outer = []
    inner = []
    for _ in range(3):
        outer.append(t)
        recs += [(t, 1, 3), (t + 1, 1, 4)]
        t += 2
        for _ in range(2):
            inner.append(t)
            recs += [(t, 1, 5), (t + 1, 1, 6)]
            t += 2
        recs.append((t, 1, 5))  # the inner iterator is done
        inner.append(None)
        t += 1
    recs += [(t, 1, 3), (t + 1, 1, 7)]
    loops = loop_iterations(_raw(recs, {1: (CELL, "<module>", 1)}, {CELL: CELL_TEXT}))
    assert [(lp["line"], lp["end_line"], lp["function"]) for lp in loops] == [(3, 6, "<module>"), (5, 6, "<module>")]
    out, inn = loops
    assert out["start_ns"] == outer and out["end_ns"] == outer[1:] + [t]
    # inner: two iterations per outer one; the hit that ends a run starts no iteration
    starts = [x for x in inner if x is not None]
    assert len(inn["start_ns"]) == 6 and inn["start_ns"] == starts
    assert all(e - s == 2 for s, e in zip(inn["start_ns"], inn["end_ns"]))


def test_a_loop_in_a_function_called_twice_is_two_runs():
    """A function's loop run by two calls: the line after the loop (and the def's first line of
    the next call) in between, so the gap between the calls is no iteration."""
    src = "def f():\n    for k in range(2):\n        pass\n    return 1\n"
    recs = []
    t = 0
    for _ in range(2):
        recs += [(t, 7, 2), (t + 1, 7, 3), (t + 2, 7, 2), (t + 3, 7, 3), (t + 4, 7, 2), (t + 5, 7, 4)]
        t += 100
    [loop] = loop_iterations(_raw(recs, {7: ("f.py", "f", 1)}, {"f.py": src}))
    assert loop["start_ns"] == [0, 2, 100, 102] and loop["end_ns"] == [2, 4, 102, 104]


def test_a_loop_left_by_break_loses_its_last_iteration_and_nothing_else():
    src = "for k in range(9):\n    if k == 2:\n        break\nz = 1\n"
    recs = [(0, 1, 1), (1, 1, 2), (2, 1, 1), (3, 1, 2), (4, 1, 1), (5, 1, 2), (6, 1, 3), (7, 1, 4)]
    [loop] = loop_iterations(_raw(recs, {1: ("s.py", "<module>", 1)}, {"s.py": src}))
    assert loop["start_ns"] == [0, 2] and loop["end_ns"] == [2, 4]


def test_code_without_a_source_or_a_loop_gives_none():
    recs = [(0, 1, 1), (1, 1, 1), (2, 1, 1)]
    assert loop_iterations(_raw(recs, {1: ("nowhere.py", "<module>", 1)}, {})) == []
    assert loop_iterations(_raw(recs, {1: ("s.py", "<module>", 1)}, {"s.py": "x = 1\n"})) == []
    assert loop_iterations(_raw([], {}, {})) == []


def _events() -> pd.DataFrame:
    """A profile's events table with one op: what step_windows needs besides the loops."""
    from nbprof.events import make_events_frame

    frame = make_events_frame(name=np.array(["aten::relu"], dtype=object), kind=np.array(["op"], dtype=object),
                              start_us=np.array([0.0]), dur_us=np.array([1.0]), thread=np.array([1]))
    from nbprof.analysis.tree import build_tree

    return build_tree(frame)


def _loop(line: int, starts: list[int], ends: list[int]) -> dict:
    return {"file": CELL, "line": line, "end_line": line + 1, "function": "<module>", "start_ns": starts,
            "end_ns": ends}


def test_the_steps_are_the_outermost_loop_or_the_one_inside_a_short_one():
    """Epochs (3 iterations, fewer than LOOP_MIN_ITERATIONS) around batches (4 a epoch) around a
    model's loop over its layers: the steps are the batches."""
    assert LOOP_MIN_ITERATIONS == 4
    epochs = _loop(3, [0, 1000, 2000], [1000, 2000, 3000])
    batch_starts = [e + 10 + 200 * b for e in (0, 1000, 2000) for b in range(4)]
    batches = _loop(5, batch_starts, [s + 200 for s in batch_starts])
    layer_starts = [s + 20 + 30 * i for s in batch_starts for i in range(5)]
    layers = _loop(9, layer_starts, [s + 30 for s in layer_starts])
    meta = SimpleNamespace(line_data={"loops": [epochs, batches, layers]}, base_time_ns=0, origin_ns=0)
    steps = step_windows(_events(), meta, {CELL: "In [3]"})
    assert steps is not None and steps.source == "the loop at In [3] line 5"
    # each boundary LOOP_CLOCK_NS after the header's hit (the two clocks' room: growth's comment)
    assert steps.start_ns.tolist() == [s + LOOP_CLOCK_NS for s in batch_starts] and steps.number.tolist() == list(range(12))
    # four epochs are enough: they are the steps
    epochs4 = _loop(3, [0, 1000, 2000, 3000], [1000, 2000, 3000, 4000])
    meta = SimpleNamespace(line_data={"loops": [epochs4, batches, layers]}, base_time_ns=0, origin_ns=0)
    assert step_windows(_events(), meta, {CELL: "In [3]"}).source == "the loop at In [3] line 3"
    # the loops' clock (the tree's, time.time_ns) moves onto the events' by base_time_ns + origin_ns
    meta = SimpleNamespace(line_data={"loops": [batches]}, base_time_ns=500, origin_ns=7)
    assert step_windows(_events(), meta, {}).start_ns.tolist() == [s - 507 + LOOP_CLOCK_NS for s in batch_starts]


def test_of_two_loops_one_after_the_other_the_steps_are_the_longer():
    train = _loop(3, [0, 100, 200, 300], [100, 200, 300, 400])
    evaluate = _loop(8, [500, 510, 520, 530, 540], [510, 520, 530, 540, 550])
    meta = SimpleNamespace(line_data={"loops": [train, evaluate]}, base_time_ns=0, origin_ns=0)
    assert step_windows(_events(), meta, {CELL: "In [3]"}).source == "the loop at In [3] line 3"
