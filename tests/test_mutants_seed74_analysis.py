"""Tests pinned where the seed 74 mutation sample (analysis part) found the suite loose: the line a
CUDA memory snapshot's block is put on when its first stack's innermost frame is the user's, and
which events the trace reader reads each raw-JSON column for.

Oracles: snapshots built by hand here (tests/snapshots helpers), whose frames say the answer; the
events schema's own column declarations (``events.ARG_COLUMNS``: each column's kinds)."""

from __future__ import annotations

import numpy as np

import nbprof

from .snapshots import CELL, KiB, frame, one_block_snapshot, write


def test_a_snapshot_block_whose_innermost_frame_is_the_users_is_put_on_that_line(tmp_path):
    # kills nbprof.analysis.snapshot.x_user_lines__mutmut_128
    # one block, one stack (the snapshot's first, laid out at position 0): the cell's line 3 is its innermost frame,
    # called from the cell's line 9; the block belongs to line 3, the first of the user's frames
    stack = [frame(CELL, 3, "<module>"), frame(CELL, 9, "<module>")]
    snap = one_block_snapshot(stack)
    blocks = nbprof.load_snapshot(write(snap, tmp_path / "s.pickle")).blocks()
    assert len(blocks) == 1
    row = blocks.iloc[0]
    assert (row["file"], int(row["line"]), row["function"], int(row["requested_bytes"])) == (
        CELL, 3, "<module>", 500 * KiB)


def test_raw_json_columns_are_read_for_the_event_kinds_their_column_declares():
    # kills nbprof.collect.trace_schema.x__column_field__mutmut_14 (the field list is built at import, before mutmut
    # switches a mutant on: this builds each raw field again)
    from nbprof.collect.trace_schema import _column_field
    from nbprof.events import ARG_COLUMNS

    raw = [c for c in ARG_COLUMNS if c.json_list or c.categorical]
    assert {c.name for c in raw} >= {"input_types", "grid", "block", "collective"}
    # torch writes "Input type" on ops, a kernel's "grid" and "block" on kernels
    kinds = {c.name: _column_field(c).kinds for c in raw}
    assert (kinds["input_types"], kinds["grid"], kinds["block"]) == (("op",), ("kernel",), ("kernel",))
    for c in raw:
        f = _column_field(c)
        assert (f.attr, f.arg, f.raw, f.kinds, np.dtype(f.dtype)) == (c.name, c.arg, True, c.kinds, np.int32), c.name
