"""What seed 59's sample of mutants (docs/testing.md) showed no test held, each against an answer
of its own: a hand-built record, a trace written by hand, the file torch wrote."""

from __future__ import annotations

import numpy as np
import pytest

from .test_data_loading_findings import loop_record, profile_of


def test_an_epoch_that_started_its_workers_and_took_nothing_adds_no_start_up():
    """Epoch 0: the iterator took 500 µs, the first batch came 300 µs later (start-up 800 µs).
    Epoch 1: an iterator made and dropped in the same nanosecond (no batch asked for): its
    start-up is 0, not a nanosecond more, so the loader's start-up is epoch 0's 800 µs exactly."""
    rec = loop_record([300.0, 100.0, 200.0], start_us=500.0)
    rec.passes.append((1, 1, 2, "start", rec.ended_ns, rec.ended_ns))
    [s] = profile_of(rec)._data_loading.loaders
    assert s.epochs == 2
    assert s.startup_us == 800.0


def test_a_device_side_sync_without_a_correlation_id_names_no_call(tmp_path):
    """An "Event Sync" on the device with no correlation id (a trace that wrote none) cannot say
    which runtime call it blocked: the cudaMemcpyAsync without one either stays a call that does
    not block (no sync finding); given the same id on both, it blocks (the finding comes)."""
    from .test_boundaries import _sync_trace, severity

    t = _sync_trace(600, call="cudaMemcpyAsync")
    call = t.events[-4]
    assert call["name"] == "cudaMemcpyAsync" and "correlation" not in call["args"]
    t.events.append({"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 101,
                     "dur": 600, "args": {"device": 0, "stream": 7}})
    assert severity(t.load(tmp_path, "none.json"), "sync") is None
    call["args"]["correlation"] = t.events[-1]["args"]["correlation"] = 777
    assert severity(t.load(tmp_path, "linked.json"), "sync") == "medium"


def test_the_call_running_at_a_time_is_found_the_first_one_too():
    """``analysis.lines._running_then`` on two calls of the cell's thread, the first (index 0, from
    100 to 500) holding the second (200 to 300), and one call of another thread: at each time, the
    innermost call running then (its stack and start), none before the first or after the last."""
    from nbprof.analysis.lines import _running_then

    calls = {"start": [100, 200, 120], "end": [500, 300, 480], "stack": [7, 8, 9], "parent": [-1, 0, -1],
             "thread": [1, 1, 2]}
    stack, began = _running_then(np.array([150, 250, 400, 600, 50]), calls)
    assert stack.tolist() == [7, 8, 7, 0, 0]
    assert began.tolist() == [100, 200, 100, 0, 0]


def test_a_snapshot_frames_line_that_is_no_integer_reads_0(tmp_path):
    """A snapshot is data from whoever wrote it: a frame's line given as text, as a bool or as a
    float is no line number: those frames read line 0 (as a frame without one does), the others
    keep theirs."""
    import nbprof

    from .snapshots import hand_snapshot, write

    snap = hand_snapshot()
    a2 = snap["segments"][0]["blocks"][2]  # a2: 1 MiB, held to the end, the end's first row
    frames = [dict(f) for f in a2["frames"]]
    frames[0]["line"], frames[1]["line"], frames[2]["line"] = "2150", True, 4.0
    a2["frames"] = frames
    p = nbprof.load_snapshot(write(snap, tmp_path / "lines.pickle"))
    first = p.blocks("end").iloc[0]
    assert first["requested_bytes"] == 1 << 20
    assert [line for _, line, _ in first["frames"]] == [0, 0, 0]
    assert all(type(line) is int for _, line, _ in first["frames"])


def test_a_part_of_many_labels_names_the_first_five(tmp_path):
    """``range_ops("step")`` where seven labels contain "step": the error says how many and names
    the first five, in the order the trace has them."""
    from nbprof.errors import OptionError

    from .synthetic import Trace

    t = Trace()
    for i in range(7):
        t.annotation(f"step_{i}", 100 * i, 50)
        t.op("aten::add", 100 * i + 10, 20)
    p = t.load(tmp_path)
    with pytest.raises(OptionError) as e:
        p.range_ops("step")
    assert str(e.value) == "no single range 'step'; 7 labels contain it: step_0, step_1, step_2, step_3, step_4"
