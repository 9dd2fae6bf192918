"""What seed 70's sample of mutants (docs/testing.md) showed no test held in the live timeline, the
MPS waits and load_prof, each against an answer of its own: a DataLoader record and an MPS trace
written by hand with their times chosen, the error load_prof documents for no files."""

from __future__ import annotations

import dataclasses

import pytest

import nbprof

from .synthetic import Trace, training_loop
from .test_data_loading_findings import T0, loop_record

# ------------------------------------------------------- views.live_timeline.LiveTimelineState


def test_a_zoom_of_the_live_timeline_draws_the_dataloader_s_rects_in_its_window(tmp_path):
    """A zoom of the live timeline of a profile with DataLoader records draws the loader's
    rectangles of the window, not only its empty lanes. The record (written by hand, on the events'
    axis: it starts at 0 µs): the workers start in [0, 500] µs, batch i waits
    [500 + 1200 i, 700 + 1200 i] µs and is made by worker i % 2 in the 300 µs before its wait ends.
    The window [2800, 3200] µs holds batch 2's wait [2900, 3100] in the main process's lane and
    batch 2's making [2800, 3100] in worker 0's lane, nothing else of the loader."""
    from nbprof.model import TorchProfile
    from nbprof.views.live_timeline import LiveTimelineState
    from nbprof.views.timeline import prepare_timeline

    q = nbprof.load_trace(training_loop(6).write(tmp_path / "loop.trace.json"))
    record = loop_record([200.0] * 4, step_us=1000.0, start_us=500.0, make_us=300.0, workers=2)
    meta = dataclasses.replace(q.meta, data_loading=record, base_time_ns=T0 - int(q.meta.origin_ns))
    p = TorchProfile(q.events, meta)
    full = prepare_timeline(p)
    state = LiveTimelineState(p, full, python=False, max_rects=20_000, height=None)
    zoom = state.window(2800.0, 3200.0, 800)
    assert (zoom.t0_us, zoom.t1_us) == (2800.0, 3200.0)
    lanes = zoom.lanes.set_index("lane")["label"]
    r = zoom.rects[zoom.rects["family"].isin(["data_wait", "batch", "data_start"])]
    got = sorted((lanes[int(lane)], str(n), round(float(a), 3), round(float(b), 3))
                 for lane, n, a, b in zip(r["lane"], r["name"], r["x0_us"], r["x1_us"]))
    assert got == [("train_loader: main process", "waiting for batch 2", 2900.0, 3100.0),
                   ("train_loader: worker 0", "batch 2", 2800.0, 3100.0)], got


# --------------------------------------------------------------- analysis.findings.sync._mps_waits


def test_an_mps_wait_op_of_under_a_microsecond_of_self_time_is_counted(tmp_path):
    """On MPS, every wait op with any self CPU time counts, however short. Hand-made: 1000 µs of
    ``aten::addmm``, then ``aten::item`` [1000, 1100.5] µs holding ``aten::_local_scalar_dense``
    [1000.25, 1100.25]: item's own time is 0.5 µs. The waits: 100 µs + 0.5 µs = 100.5 µs of the
    1100.5 µs span (9.1 %: medium), in 2 calls; by_op lists both ops."""
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.meta import MpsRun
    from nbprof.model import TorchProfile

    t = Trace()
    t.op("aten::addmm", 0.0, 1000.0)
    t.op("aten::item", 1000.0, 100.5)
    t.op("aten::_local_scalar_dense", 1000.25, 100.0)
    p = TorchProfile.from_trace(read_trace_file(str(t.write(tmp_path / "mps.json"))), mps=MpsRun())
    f = p.findings
    sync = f[f["kind"] == "sync"].iloc[0]
    ev = sync["evidence"]
    assert sync["severity"] == "medium"
    assert ev["calls"] == 2 and "in 2 calls of ops that wait for it" in sync["message"], sync["message"]
    assert ev["blocked_us"] == pytest.approx(100.5)
    assert ev["share_of_span"] == pytest.approx(100.5 / 1100.5)
    assert ev["by_op"] == {"aten::_local_scalar_dense": {"count": 1, "us": pytest.approx(100.0)},
                           "aten::item": {"count": 1, "us": pytest.approx(0.5)}}


# ----------------------------------------------------------------------------- loading.load_prof


def test_load_prof_of_an_empty_list_says_no_files_were_given():
    """``nbprof.load_prof([])``: an OptionError that says, in the words load_prof uses, that no
    files were given (not an IndexError from adding up no files)."""
    with pytest.raises(nbprof.OptionError) as info:
        nbprof.load_prof([])
    assert str(info.value) == "load_prof: no files given"
