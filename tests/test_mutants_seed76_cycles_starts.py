"""What seed 76's sample of mutants of ``collect.trace_cycles.cycle_starts`` showed no test held, each
against an answer of its own: cycles written here by hand (each event's cycle label and start, ns), whose
first starts (or that they are no cycle numbers) are known from what was written, and two one-op traces
(tests/synthetic.py) merged as a schedule's cycles 1 ns apart, whose cycles are known from which file
each op was written to."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd

import nbprof
from nbprof.collect.chrome_trace import read_trace_file
from nbprof.collect.trace_cycles import cycle_starts
from nbprof.events import concat_traces
from nbprof.model import TorchProfile

from .synthetic import Trace

# ---------------------------------------------------------------- collect.trace_cycles.cycle_starts


def test_labels_that_are_no_cycle_numbers_give_no_starts():
    """Labels 0, 0.5, 1 (a half cycle) are no scheduled run's cycles, though they round to cycles 0, 0, 1
    whose starts would give every event back: nothing is written for them."""
    # kills nbprof.collect.trace_cycles.x_cycle_starts__mutmut_5
    labels = pd.Series([0.0, 0.5, 1.0])
    assert cycle_starts(labels, np.array([0, 5, 10], dtype=np.int64)) is None
    # the same events labelled 0, 0, 1: cycle 0 starts at 0 ns, cycle 1 at 10 ns
    assert cycle_starts(pd.Series([0, 0, 1]), np.array([0, 5, 10], dtype=np.int64)) == [0, 10]


def test_cycles_one_ns_apart_are_kept():
    """Cycle 0 at 0 ns and cycle 1 at 1 ns: they rise, so both starts are written."""
    # kills nbprof.collect.trace_cycles.x_cycle_starts__mutmut_32
    assert cycle_starts(pd.Series([0, 1]), np.array([0, 1], dtype=np.int64)) == [0, 1]
    # three cycles, each 1 ns after the last, two events in the middle one
    labels = pd.Series([0, 1, 1, 2])
    assert cycle_starts(labels, np.array([7, 8, 8, 9], dtype=np.int64)) == [7, 8, 9]


def test_a_saved_schedule_of_cycles_one_ns_apart_keeps_them(tmp_path):
    """Two cycles, one op each, the second op 1 ns (0.001 µs) after the first: saved and read back,
    each op is of the cycle of the file it was written to, and the key says 0 and 1 ns."""
    # kills nbprof.collect.trace_cycles.x_cycle_starts__mutmut_32
    paths = []
    for i in range(2):
        t = Trace()
        t.op(f"aten::op{i}", 0.001 * i, 0.0005)
        paths.append(t.write(tmp_path / f"c{i}.json"))
    live = TorchProfile.from_trace(concat_traces([read_trace_file(p) for p in paths], label_column="cycle"))
    saved = live.save(tmp_path / "saved.json.gz")
    doc = json.loads(gzip.decompress(open(saved, "rb").read()))
    assert doc["nbprofCycles"] == {"starts_ns": [0, 1]}
    back = nbprof.load_trace(saved)
    assert dict(zip(back.events["name"], back.events["cycle"])) == {"aten::op0": 0, "aten::op1": 1}
