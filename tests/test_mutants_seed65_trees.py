"""What seed 65's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: the note of a tracer a ``%%torchprof --lines`` cell sets (the only test of it is left out of
mutmut's runs, for a line assertion of its own), a timeline of a table whose clock zero was moved
(events before it: negative starts), and a bare list of events (the JSON Array Format) that is cut
short or no JSON, named by its file."""

from __future__ import annotations

import sys

import pytest

from .conftest import needs_torch, run
from .synthetic import Trace

# ------------------------------------------------------------------------------ --lines' notes


@needs_torch
@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: sys.settrace runs beside sys.monitoring's tools")
def test_a_tracer_the_torchprof_cell_sets_is_the_line_tables_note_word_for_word(shell):
    """A ``%%torchprof --lines`` cell that sets a trace function of its own replaces nbprof's line
    tracer: the line table's one note says so, word for word (lower case, as every note). Only the
    note is asserted: test_lines_torch.py's test of the same cell also places its operators, which
    mutmut's mapping run cannot (pyproject.toml deselects it there)."""
    run(shell, "import torch\nxq = torch.randn(4, 4)")
    sys.settrace(None)  # a tracer left set by an earlier test would make nbprof step aside ("refused")
    try:
        result, _ = run(shell, "%%torchprof --lines -q -o rq\nimport sys\nxq.sum()\nsys.settrace(lambda *a: None)\n"
                               "xq.sum()\n")
        assert sys.gettrace() is not None  # the cell's own tracer stays
    finally:
        sys.settrace(None)
    assert result.error_in_exec is None
    notes = shell.user_ns["rq"].lines().attrs["notes"]
    assert notes == ["--lines: the code set a tracer of its own (sys.settrace: a debugger?), which replaced "
                     "nbprof's line tracer: from there on, operator syntax counts on the line that called its "
                     "function"]


# ------------------------------------------------------------------------------ the timeline


def test_a_timeline_of_events_before_the_clock_zero_draws_each_event_on_its_row(tmp_path):
    """A hand-made trace of two threads, two 1 µs ops each (a at 0, b at 4 on one; c at 2, d at 6
    on the other), whose table's zero is moved to 10 µs (every start negative, as a table shifted to
    a mark of its own): the timeline, unmerged, draws the four ops, each on its thread's row at its
    own times, -10, -6 on the first row and -8, -4 on the second. (Sorted by a key built from the
    starts plus their minimum instead of minus it, c's rectangle was lost under d.)"""
    from nbprof.analysis.timeline import timeline_rects

    t = Trace()
    t.op("a", 0, 1, tid=1)
    t.op("b", 4, 1, tid=1)
    t.op("c", 2, 1, tid=2)
    t.op("d", 6, 1, tid=2)
    p = t.load(tmp_path)
    events = p.events.copy()
    events["start_us"] = events["start_us"] - 10.0
    rects = timeline_rects(events, p.meta, merge=False).rects
    got = sorted(zip(rects["name"], rects["row"], rects["x0_us"], rects["x1_us"]))
    assert got == [("a", 0, -10.0, -9.0), ("b", 0, -6.0, -5.0), ("c", 1, -8.0, -7.0), ("d", 1, -4.0, -3.0)]


# ------------------------------------------------------------------------------ reading a trace


@pytest.mark.parametrize("content,message", [
    (b'[{"ph": "X", "name": "a", "ts": 1.0, "dur"', "the JSON is truncated (was the file fully written?)"),
    (b"[nope]", "not a chrome trace ("),
])
def test_a_bad_bare_list_of_events_is_a_trace_error_naming_the_file(tmp_path, content, message):
    """A file in the JSON Array Format (a bare list of events) cut short, or not JSON after its
    ``[``: ``load_trace`` raises nbprof's TraceError, which names the file and says what is wrong
    (the object layout's twin: test_traces_io.py)."""
    import nbprof
    from nbprof.errors import TraceError

    path = tmp_path / "bad_list.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        nbprof.load_trace(path)
    assert str(info.value).startswith(f"{path}: {message}")
