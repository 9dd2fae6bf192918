"""Behaviour seed 57's mutation sample found untested (docs/testing.md), each against an answer
worked out by hand: a trace whose thread id is 0 keeps its Python lane."""

from __future__ import annotations

import nbprof


def test_python_events_on_thread_0_are_drawn_in_their_python_lane(tmp_path):
    """A trace whose events carry tid 0 (written so by some tools): with python=True the Python
    function is drawn in the thread's Python lane, above its operator, as on any other thread."""
    from nbprof.views.timeline import prepare_timeline

    from .synthetic import Trace

    t = Trace()
    t.op("aten::mm", 0, 50, tid=0)
    t.op("train.py(12): step", 0, 60, tid=0, cat="python_function")
    p = nbprof.load_trace(t.write(tmp_path / "tid0.json"))
    r = prepare_timeline(p, python=True).rects
    assert r[["row", "name", "family"]].values.tolist() == [[0, "train.py(12): step", "python"], [1, "aten::mm", "op"]]
