"""What seed 66's sample of mutants (docs/testing.md) showed no test of nbprof/collect held: invalid
UTF-8 that only a raw JSON value holds, a zero ``dur`` written as -0.0 among exact duplicates, the
profiler's overhead events of a saved folder of ranks read back onto each rank's main thread, the
notes a saved line table carries, and a DataLoader worker on Windows leaving SIGTERM alone. Every
expected value is written out by hand from the input the test made."""

from __future__ import annotations

import json
import signal
import sys

import pytest

from .conftest import needs_torch
from .test_mutants_collectors import lines_doc, load_doc
from .test_mutants_data_worker import Numbers, run_worker, worker_state  # noqa: F401  # the fixture, by name

BASE = 4484342762862.144  # µs: a recorded H100 trace's clock


def op(name: str, ts: float, dur: float, **fields) -> dict:
    e = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
         "args": {"External id": 1}}
    e.update(fields)
    return e


def load(tmp_path, doc: dict, name: str = "t.json", replace: tuple[bytes, bytes] | None = None):
    import nbprof

    raw = json.dumps(doc).encode()
    if replace:
        raw = raw.replace(*replace)
    path = tmp_path / name
    path.write_bytes(raw)
    return nbprof.load_trace(path, progress=False)


def test_invalid_utf8_only_in_an_input_dims_value_is_replaced_and_counted(tmp_path):
    """The names are valid UTF-8, so the document decodes as it is; the two bytes \\xff\\xfe sit
    only inside "Input Dims", a value read raw (msgspec does not check its UTF-8). They read as two
    U+FFFD (Python's own count for b"\\xff\\xfe": 2) and are said in one note, not an exception."""
    events = [op("aten::add", BASE, 5.0, args={"External id": 1, "Input Dims": [["BAD"], [2, 3]]}),
              op("aten::mul", BASE + 10, 5.0, args={"External id": 2, "Input Dims": [[4]]})]
    p = load(tmp_path, {"record_shapes": 1, "traceEvents": events}, replace=(b"BAD", b"\xff\xfe"))
    assert p.events["name"].astype(str).tolist() == ["aten::add", "aten::mul"]
    assert p.events["input_shapes"].astype(str).tolist() == ['[["\ufffd\ufffd"], [2, 3]]', "[[4]]"]
    assert p.meta.notes == ["2 invalid UTF-8 sequences in names or args: read as \ufffd"]


def test_a_dur_of_minus_zero_is_a_zero_duration_and_its_event_a_duplicate(tmp_path):
    """aten::add written twice at the same ts, once with "dur": 0.0 and once with "dur": -0.0: the
    same zero-length event (-0.0 == 0.0), so the second is an exact duplicate, counted once; what
    is left is aten::add (0 µs) and aten::mul (2 µs, 1 µs later)."""
    events = [op("aten::add", BASE, 0.0), op("aten::add", BASE, -0.0), op("aten::mul", BASE + 1, 2.0)]
    p = load(tmp_path, {"traceEvents": events})
    assert b'"dur": -0.0' in (tmp_path / "t.json").read_bytes()  # the file says -0.0
    ev = p.events
    assert ev["name"].astype(str).tolist() == ["aten::add", "aten::mul"]
    assert ev["start_us"].tolist() == [0.0, 1.0] and ev["dur_us"].tolist() == [0.0, 2.0]
    assert p.meta.notes == ["1 exact duplicate (an event repeated, every field nbprof reads equal): counted once"]


def test_a_saved_folders_overhead_events_go_to_each_ranks_main_thread(tmp_path):
    """Two ranks, each with its profiler overhead (pid -1, tid 0, as torch writes it) and ops on
    its main thread (pid == tid: 1000 for rank 0, 2000 for rank 1) and on a side thread (pid + 7).
    The folder saved as one trace and read back: each rank's "Buffer Flush" is on its own rank's
    main thread and process (torch files overhead under the main thread's open op), not another's."""
    import nbprof

    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank, main in ((0, 1000), (1, 2000)):
        events = [op("aten::side", 0.0, 5.0, pid=main, tid=main + 7), op("aten::mm", 10.0, 100.0, pid=main, tid=main),
                  op("Buffer Flush", 50.0, 4.0, cat="overhead", pid=-1, tid=0)]
        (folder / f"r{rank}.json").write_text(json.dumps({"distributedInfo": {"rank": rank, "world_size": 2},
                                                          "traceEvents": events}))
    saved = nbprof.load_trace(folder, workers=0, progress=False).save(tmp_path / "merged.json")
    p = nbprof.load_trace(saved, progress=False)
    assert p.meta.notes == []
    overhead = p.events[p.events["kind"].astype(str) == "overhead"]
    assert overhead[["rank", "pid", "thread"]].values.tolist() == [[0, 1000, 1000], [1, 2000, 2000]]
    assert overhead["start_us"].tolist() == [50.0, 50.0]


def test_a_saved_line_tables_notes_are_read_back(tmp_path):
    """A saved line table's ``notes`` (why lines are as they are: here the code's own tracer) come
    back as p.lines().attrs["notes"], word for word as the file has them."""
    said = ["--lines: the code set a tracer of its own (sys.settrace: a debugger?), which replaced nbprof's"]
    doc, _, _ = lines_doc(notes=said)
    p = load_doc(tmp_path, doc)
    assert p.meta.line_data is not None
    assert p.lines().attrs["notes"] == said


@needs_torch
@pytest.mark.skipif(sys.platform == "win32", reason="the in-process worker needs fork; this simulates Windows")
def test_a_worker_on_windows_leaves_sigterm_alone(tmp_path, worker_state, monkeypatch):  # noqa: F811
    """Windows ends a process without a signal (TerminateProcess), so a worker there sets no SIGTERM
    handler: with ``sys.platform`` "win32" (set by the user's worker_init_fn, before the loop's first
    task; tests/test_platforms.py simulates Windows the same way), the dataset, called in a batch,
    still sees SIGTERM's default action (what worker_state set), not a handler of nbprof's."""
    seen = {}

    def init(worker_id):
        monkeypatch.setattr(sys, "platform", "win32")

    def during(i):
        seen["handler"] = signal.getsignal(signal.SIGTERM)

    answers = run_worker(tmp_path, Numbers(3, during=during), [("task", 0, [1])], init_fn=init)
    assert answers == [(0, [10])]
    assert seen["handler"] is signal.SIG_DFL
