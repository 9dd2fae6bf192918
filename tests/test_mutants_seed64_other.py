"""What seed 64's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: the biggest win of a comparison by stack on traces written by hand, the note of a
``--schedule`` run next to torch's own profiler in a real IPython shell, the note on a Python
profiler that replaced nbprof's unseen."""

from __future__ import annotations

from pathlib import Path

import nbprof

from .conftest import needs_torch, run
from .synthetic import Trace
from .test_consistency import SCHEDULED, _notes

# ---------------------------------------------------------------- comparison._distinct_name


def _mm_under_frames(frames: list[tuple[str, float]]) -> Trace:
    """One ``aten::mm`` of the given duration (µs) inside each Python frame, one after another, on
    one thread: a trace torch writes with ``with_stack``."""
    t = Trace()
    ts = 0.0
    for py_id, (frame, dur) in enumerate(frames, start=1):
        t.op(frame, ts, dur + 2, cat="python_function")
        t.events[-1]["args"].update({"Python id": py_id, "Python parent id": None})
        t.op("aten::mm", ts + 1, dur)
        ts += dur + 10
    return t


def test_a_comparison_by_stack_names_the_biggest_win_by_its_stack(tmp_path: Path):
    """Before: aten::mm 10 µs under model.py(1): f and 40 µs under model.py(2): g. After: 10 µs
    under each. Grouped by stack, the two aten::mm rows share a name, so the biggest win (g's,
    40 -> 10 µs: -30) is told apart by its stack, not by its kind ("op", which both have)."""
    before = _mm_under_frames([("model.py(1): f", 10.0), ("model.py(2): g", 40.0)]).load(tmp_path, "b.json")
    after = _mm_under_frames([("model.py(1): f", 10.0), ("model.py(2): g", 10.0)]).load(tmp_path, "a.json")
    s = nbprof.compare(before, after, group_by="stack").summary
    assert s.biggest_win == "aten::mm (stack model.py(2): g)"
    assert s.biggest_win_change == -30.0
    assert (s.total_before, s.total_after) == (50.0, 20.0)


# ---------------------------------------------------------------- run.runner._schedule_notes


@needs_torch
def test_the_note_on_merged_schedule_cycles_says_torchs_profiler_holds_the_last(shell):
    """--schedule 1,1,1,3 over 9 steps: three cycles, one active step each (steps 2, 5, 8), one
    matmul per step. The report holds the three matmuls; torch's own profiler (result.profiler)
    only the last cycle's one, as the note says, word for word."""
    result, captured = run(shell, SCHEDULED.format(schedule="1,1,1,3", n=9))
    assert result.error_in_exec is None
    p = shell.user_ns["sched"]
    assert p.key_averages().set_index("name").loc["aten::mm", "count"] == 3
    assert next(e.count for e in p.profiler.key_averages() if e.key == "aten::mm") == 1
    assert _notes(captured) == ["3 cycles of --schedule merged into this report (result.profiler, torch's own, "
                                "holds only the last one)"]


# ---------------------------------------------------------------- run.runner.takeover_note


def test_a_python_profiler_that_replaced_nbprofs_unseen_is_said_to_cut_the_report():
    """A Python profiler took the hook of nbprof's cProfile and nbprof did not see when
    (``Takeover.at_s`` None, ``by`` "sys.setprofile"): the note says who, that the time is
    unknown and why, and that the report holds only the calls made before it."""
    from nbprof.collect.collector import Takeover
    from nbprof.run.runner import takeover_note

    note = takeover_note(Takeover(by="sys.setprofile", at_s=None), "python", "cell", 1.0)
    assert note == ("another Python profiler (sys.setprofile) replaced nbprof's cProfile during the cell, nbprof "
                    "could not see when (Python runs one profiler per thread): this report covers only the calls "
                    "made before it")
