"""What seed 67's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: a trace written by hand, each rank's file loaded alone."""

from __future__ import annotations

import pandas as pd

import nbprof

from .synthetic import Trace
from .test_mutants_views import _frame


def _module(t: Trace, name: str, ts: float, dur: float, tid: int) -> None:
    t.events.append({"ph": "X", "cat": "python_function", "name": "nn.Module: " + name, "pid": 1000, "tid": tid,
                     "ts": ts, "dur": dur, "args": {}})


def test_modules_first_called_together_keep_their_order_in_a_folder_of_ranks(tmp_path):
    """Two ranks, each with two top-level modules first called at the same µs on two threads
    (Zeta_0 on the file's first thread, Alpha_1 on its second). Siblings are ordered by first call,
    so the tie keeps the order each rank's own file gives (Zeta_0, Alpha_1, one call a rank): the
    folder's summed modules come in that order, as its merged events' do (docs/clusters.md), not
    sorted by name. (This found a bug: ties came out reversed at each ordering, so a rank alone
    and the folder gave opposite orders.)"""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in (0, 1):
        t = Trace(rank=r)
        _module(t, "Zeta_0", 10, 100, 1000)
        _module(t, "Alpha_1", 10, 50, 2000)
        t.op("aten::mm", 20, 5)
        t.write(folder / f"r{r}.json")
    want = [["Zeta_0", 1], ["Alpha_1", 1]]
    for r in (0, 1):
        alone = nbprof.load_trace(folder / f"r{r}.json").modules()
        assert alone[["module", "calls"]].values.tolist() == want
    p = nbprof.load_trace(folder, workers=0, progress=False)
    assert p.modules()[["module", "calls"]].values.tolist() == [["Zeta_0", 2], ["Alpha_1", 2]]
    assert p._merged.modules()[["module", "calls"]].values.tolist() == [["Zeta_0", 2], ["Alpha_1", 2]]


def test_op_stacks_come_on_the_events_own_index(tmp_path):
    """An events table labelled 100.. (not 0..n-1): each op's stack, assigned back as a column
    (pandas aligns on the labels), lands on that op's own row: aten::x inside g inside f, aten::y
    in f only (the frames by hand)."""
    from nbprof.analysis.stacks import op_stacks

    t = Trace()
    _frame(t, "/home/u/a.py(1): f", 0, 100, 1, None)
    _frame(t, "/home/u/a.py(5): g", 10, 30, 2, 1)
    t.op("aten::x", 20, 5)
    t.op("aten::y", 60, 5)
    ev = t.load(tmp_path).events
    ev.index = ev.index + 100
    stacks = op_stacks(ev)
    assert stacks.index.equals(ev.index)
    ev["stack"] = stacks
    got = dict(zip(ev["name"].astype(str), ev["stack"]))
    assert got["aten::x"] == "/home/u/a.py(5): g ← /home/u/a.py(1): f"
    assert got["aten::y"] == "/home/u/a.py(1): f"


def test_a_folder_of_ranks_events_have_one_label_per_row(tmp_path):
    """A folder of two ranks (rank 0: aten::mm, aten::relu; rank 1: aten::linear around aten::mm):
    ``p.events`` labels its four rows 0..3, so a row's ``parent`` (the row of the event around it)
    picks one row with ``.loc``: rank 1's aten::mm is inside rank 1's aten::linear."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    t = Trace(rank=0)
    t.op("aten::mm", 0, 100)
    t.op("aten::relu", 200, 10)
    t.write(folder / "r0.json")
    t = Trace(rank=1)
    t.op("aten::linear", 0, 100)
    t.op("aten::mm", 10, 50)
    t.write(folder / "r1.json")
    ev = nbprof.load_trace(folder, workers=0, progress=False).events
    assert ev.index.equals(pd.RangeIndex(4))
    [child] = ev.index[(ev["rank"] == 1) & (ev["name"] == "aten::mm")]
    parent = ev.loc[ev.loc[child, "parent"]]
    assert (parent["name"], parent["rank"]) == ("aten::linear", 1)
    assert [ev.loc[i, "parent"] for i in ev.index[ev["rank"] == 0]] == [-1, -1]
