"""What seed 76's whole-module run of ``collect.trace_cycles.read_cycles`` showed no test held: a saved
``--schedule`` trace's ``nbprofCycles`` key read back. Each trace is written here by hand (tests/synthetic.py
Trace plus the key), so the answer is known without the reader: which cycle starts where (the file's ns, the
events' ``ts`` times 1000), hence each event's cycle (the last one starting at or before it, the first cycle
for an event before them all), and the note a key that does not fit gets, as the reader words it."""

from __future__ import annotations

import json

import nbprof

from .synthetic import Trace

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NOT_A_LIST = "nbprofCycles is not a list of the cycles' starts (integer ns): the cycles are left out"
NO_RISE = "nbprofCycles' starts do not rise: the cycles are left out"


def _with_cycles(tmp_path, key, ts_us):
    """A trace of one short op at each of ``ts_us`` (µs), named op0, op1, ... in that order, with the key."""
    t = Trace()
    for i, ts in enumerate(ts_us):
        t.op(f"op{i}", ts, 0.5)
    doc = t.doc()
    doc["nbprofCycles"] = key
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return nbprof.load_trace(path)


def _cycles(p):
    return dict(zip(p.events["name"].astype(str), p.events["cycle"].tolist()))


def test_a_start_at_int64_min_is_a_start(tmp_path):
    """Starts at -2**63 ns and -1 ns (both int64): an op at -2 ns is of cycle 0, one at 0 ns of cycle 1,
    and no note."""
    # kills nbprof.collect.trace_cycles.x_read_cycles__mutmut_16
    p = _with_cycles(tmp_path, {"starts_ns": [INT64_MIN, -1]}, [-0.002, 0.0])
    assert _cycles(p) == {"op0": 0, "op1": 1}
    assert p.meta.reader_notes == []


def test_a_start_at_int64_max_is_a_start(tmp_path):
    """Starts at 0 ns and 2**63 - 1 ns (both int64): ops at 0 and 10 µs are both before the second
    cycle, so of cycle 0, and no note."""
    # kills nbprof.collect.trace_cycles.x_read_cycles__mutmut_17
    p = _with_cycles(tmp_path, {"starts_ns": [0, INT64_MAX]}, [0, 10])
    assert _cycles(p) == {"op0": 0, "op1": 0}
    assert p.meta.reader_notes == []


def test_starts_one_ns_apart_rise(tmp_path):
    """Cycles starting at 0 ns and 1 ns rise: the op at 0.000 µs is of cycle 0, the one at 0.001 µs
    (1 ns) of cycle 1."""
    # kills nbprof.collect.trace_cycles.x_read_cycles__mutmut_28
    p = _with_cycles(tmp_path, {"starts_ns": [0, 1]}, [0.0, 0.001])
    assert _cycles(p) == {"op0": 0, "op1": 1}
    assert p.meta.reader_notes == []


def test_an_event_before_the_first_start_is_of_the_first_cycle(tmp_path):
    """Cycles starting at 5,000 and 10,000 ns; ops at 0, 5 and 10 µs: the one at 0 (before every start)
    is of the first cycle, 0 (no cycle -1, which was never recorded), then 0 and 1."""
    # kills nbprof.collect.trace_cycles.x_read_cycles__mutmut_33
    p = _with_cycles(tmp_path, {"starts_ns": [5000, 10000]}, [0, 5, 10])
    assert _cycles(p) == {"op0": 0, "op1": 0, "op2": 1}
    assert p.events["cycle"].min() == 0


def test_a_key_that_is_no_list_of_starts_gets_its_note_word_for_word(tmp_path):
    """A key that is a bare list (no ``starts_ns``): the one note, as the reader words it."""
    # kills nbprof.collect.trace_cycles.x_read_cycles__mutmut_18
    p = _with_cycles(tmp_path, [0, 5], [0])
    assert "cycle" not in p.events.columns
    assert p.meta.reader_notes == [NOT_A_LIST]


def test_starts_that_do_not_rise_get_their_note_word_for_word(tmp_path):
    """Starts 3 and 3 ns do not rise: the one note, as the reader words it."""
    # kills nbprof.collect.trace_cycles.x_read_cycles__mutmut_29
    p = _with_cycles(tmp_path, {"starts_ns": [3, 3]}, [0])
    assert "cycle" not in p.events.columns
    assert p.meta.reader_notes == [NO_RISE]


def test_starts_2_to_the_63_ns_apart_still_rise(tmp_path):
    """Two cycles whose starts are 2**63 ns or more apart (int64 both, the rest of the int64 range
    between them) rise: read back without a note, each op in the cycle its start says. Found by the
    helper reading mutmut_28: the check subtracted neighbouring starts (np.diff), which overflows
    there and read the starts as falling; the writer (cycle_starts) had the same check."""
    from nbprof.collect.trace_cycles import cycle_starts

    import numpy as np
    import pandas as pd

    p = _with_cycles(tmp_path, {"starts_ns": [-1, INT64_MAX]}, [0, 10])
    assert _cycles(p) == {"op0": 0, "op1": 0}
    assert p.meta.reader_notes == []
    p = _with_cycles(tmp_path, {"starts_ns": [INT64_MIN, 0]}, [-0.001, 0.0])
    assert _cycles(p) == {"op0": 0, "op1": 1}
    assert p.meta.reader_notes == []
    starts = np.array([-(2**62), -(2**62) + 5, 2**62, 2**62 + 7], dtype=np.int64)
    assert cycle_starts(pd.Series([0, 0, 1, 1]), starts) == [-(2**62), 2**62]
