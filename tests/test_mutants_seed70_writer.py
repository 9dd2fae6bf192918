"""What seed 70's sample of mutants (docs/testing.md) showed no test held in the trace writer and the
DataLoader tables: a saved trace's flow arrows ending on a kernel written as torch writes them (bound
to the enclosing slice, ``"bp": "e"``), its threads' names written as metadata events (``"ph": "M"``)
that a reader reads back, and the batches table of a loader whose workers made batches the loop never
asked for (no wait recorded). Every expected value is the one the test wrote into its hand-made
input, or what torch's own recorded trace (tests/data/two_streams.trace.json.gz) writes."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

from .test_data_loading_findings import loop_record, profile_of

DATA = Path(__file__).parent / "data"


def _launch_and_kernel(**extra) -> list[dict]:
    """A CPU op launching one kernel (correlation 5) on device 0, stream 7."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 50.0,
         "args": {"External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20.0, "dur": 8.0,
         "args": {"correlation": 5, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 30.0, "dur": 12.0,
         "args": {"device": 0, "stream": 7, "correlation": 5, "External id": 1}},
        *extra.get("more", []),
    ]


# ------------------------------------------------------------------------------ trace_writer._document


def test_a_saved_flow_arrow_ends_on_the_kernel_bound_to_its_slice_as_torch_writes_it(tmp_path):
    """The launch (correlation 5) and its kernel saved: the arrow's end ("ph": "f", id 5) sits on the
    kernel (pid 0 = device 0, tid 7 = stream 7, ts 30) and binds to the enclosing slice,
    ``"bp": "e"`` -- with the keys and the "bp" of every ac2g arrow end in torch's own recorded trace
    (without "bp", chrome://tracing binds the end to the next slice instead)."""
    import nbprof

    recorded = json.load(gzip.open(DATA / "two_streams.trace.json.gz"))["traceEvents"]
    torch_ends = [e for e in recorded if e.get("ph") == "f" and e.get("cat") == "ac2g"]
    assert torch_ends and {e["bp"] for e in torch_ends} == {"e"}

    src = tmp_path / "in.json"
    src.write_text(json.dumps({"traceEvents": _launch_and_kernel()}))
    saved = nbprof.load_trace(src, progress=False).save(tmp_path / "out.json")
    [end] = [e for e in json.loads(open(saved, "rb").read())["traceEvents"] if e.get("ph") == "f"]
    assert (end["id"], end["pid"], end["tid"], end["ts"]) == (5, 0, 7, 30.0)
    assert end["bp"] == "e"
    assert set(end) == set(torch_ends[0])


def test_thread_names_are_saved_as_metadata_events_and_read_back(tmp_path):
    """A trace naming its threads 1 "MainThread" and 2 "pt_autograd_0" (``thread_name`` metadata
    events, "ph": "M", as torch writes them) saved: the file names both with "ph": "M" events, and
    the saved file read back names the same two threads."""
    import nbprof

    names = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": label}}
             for tid, label in ((1, "MainThread"), (2, "pt_autograd_0"))]
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"traceEvents": _launch_and_kernel(more=names)}))
    saved = nbprof.load_trace(src, progress=False).save(tmp_path / "out.json")
    written = [e for e in json.loads(open(saved, "rb").read())["traceEvents"] if e.get("name") == "thread_name"]
    assert sorted((e["ph"], e["tid"], e["args"]["name"]) for e in written) == [("M", 1, "MainThread"),
                                                                              ("M", 2, "pt_autograd_0")]
    assert nbprof.load_trace(saved, progress=False).meta.thread_names == {1: "MainThread", 2: "pt_autograd_0"}


# ------------------------------------------------------------------------------ data_loading._wait_rows


def test_batches_the_workers_made_that_the_loop_never_asked_for_are_listed_without_a_wait():
    """Two workers each made one batch (the prefetch) and the loop asked for none: no wait at all
    in the record. The batches table lists both, as the workers recorded them (batch 0 by worker 0,
    pid 1000, ending at 800 µs; batch 1 by worker 1, pid 1001, ending at 1900 µs; 10 ms each, 4
    samples), made ("ok"), with no wait (NaN)."""
    rec = loop_record([300.0, 100.0], step_us=1000.0, start_us=500.0, stop=False)
    rec.waits.clear()
    b = profile_of(rec).data_loading()
    assert b["batch"].tolist() == [0, 1] and b["worker"].tolist() == [0, 1] and b["pid"].tolist() == [1000, 1001]
    assert b["end_us"].tolist() == [800.0, 1900.0] and b["make_us"].tolist() == [10_000.0, 10_000.0]
    assert b["samples"].tolist() == [4, 4] and b["status"].tolist() == ["ok", "ok"]
    assert all(math.isnan(w) for w in b["wait_us"].tolist() + b["wait_start_us"].tolist())
