"""What seed 73's sample of mutants (docs/testing.md) showed no test held in the trace writer: the
profiler's own span event ("cat": "Trace") in a saved trace is written as torch writes it, on the
"PyTorch Profiler" thread of the "Spans" process. The expected event is the one in torch's own
recorded trace (tests/data/two_streams.trace.json.gz), the file the test loads and saves."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
SPAN_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")


# ------------------------------------------------------------------------------ trace_writer._document


def test_a_saved_traces_profiler_span_is_the_event_torch_recorded_with_its_thread(tmp_path):
    """torch's trace loaded and saved: the saved file's one "Trace" event has every key and value of
    the span torch recorded ("pid": "Spans", "tid": "PyTorch Profiler", its ts and dur), so
    Perfetto and chrome://tracing show it on the same named track as in torch's own file."""
    import nbprof

    src = DATA / "two_streams.trace.json.gz"
    [torch_span] = [e for e in json.load(gzip.open(src))["traceEvents"] if e.get("cat") == "Trace"]
    assert (torch_span["pid"], torch_span["tid"]) == ("Spans", "PyTorch Profiler")

    saved = nbprof.load_trace(src, progress=False).save(tmp_path / "out.json")
    [span] = [e for e in json.loads(open(saved, "rb").read())["traceEvents"] if e.get("cat") == "Trace"]
    assert {k: span.get(k) for k in SPAN_KEYS} == {k: torch_span[k] for k in SPAN_KEYS}
