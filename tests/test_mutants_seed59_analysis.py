"""What seed 59's sample of mutants (docs/testing.md) showed no test held in the analyses, the
folder loader, the reader and the events table, each against an answer of its own: the trace's
own numbers, the file's events counted by hand, the reader's own table."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

import nbprof
from nbprof.errors import TraceError

from .conftest import trace_path
from .synthetic import Trace, collectives_folder
from .test_mutants_findings import finding


def test_a_device_to_host_copy_says_it_went_to_host_memory(tmp_path):
    """The copy finding on a profile whose copies are all DtoH, into pinned memory: 1 MiB in 50 µs
    (the trace's bytes over its duration, 20.97 GB/s) is said to go *to* pinned memory, as a
    DtoH copy does, not *from* it."""
    t = Trace()
    ext = t.op("aten::mm", 0, 10)
    t.launch("gemm", ext, 1, 2, 10, 100)
    ext = t.op("aten::to", 20, 10)
    t.launch("Memcpy DtoH (Device -> Pinned)", ext, 21, 2, 120, 50, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             nbytes=1 << 20)
    sev, msg, ev = finding(t.load(tmp_path), "copy")
    gbps = (1 << 20) / 50e-6 / 1e9
    assert ev["links"] == [{"direction": "DtoH", "host_memory": "pinned", "count": 1,
                            "bandwidth_gbps": pytest.approx(gbps), "typical_gbps": 25.0}]
    assert f"Achieved {gbps:.1f} GB/s DtoH to pinned memory (a PCIe 4.0 x16 link" in msg
    assert "from pinned memory" not in msg


def test_a_folder_whose_rank_fails_leaves_no_cache_folder(tmp_path, monkeypatch):
    """Two good ranks and a truncated one, read in this process: the load fails naming the bad file,
    and the folder of rank caches it made (under $NBPROF_CACHE_DIR) is gone with it; the same folder
    without the bad file makes one (the good ranks' caches are written while the folder loads)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("NBPROF_CACHE_DIR", str(cache))
    folder = collectives_folder(tmp_path / "coll")
    bad = folder / "c.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 2, "pid": 1, "tid": 1')  # cut short
    with pytest.raises(TraceError) as e:
        nbprof.load_trace(folder, workers=0, progress=False)
    assert str(e.value).startswith(str(bad))
    assert os.listdir(cache) == []
    bad.unlink()
    p = nbprof.load_trace(folder, workers=0, progress=False)
    made = os.listdir(cache)
    assert len(made) == 1 and len(os.listdir(cache / made[0])) > 0
    del p


def _trace_text(events: list[dict]) -> str:
    """A trace laid out as torch writes it (one event a line, ``},\\n  {`` between them)."""
    body = ",\n  ".join(json.dumps(e) for e in events)
    return '{\n  "schemaVersion": 1,\n  "traceEvents": [\n  ' + body + "\n  ]\n}\n"


def test_an_event_repeated_across_slices_before_and_after_the_first_shapes_is_counted_once(tmp_path):
    """An op written twice word for word (no "Input Dims"): first, then after 1,500 padded ops (1.4 MB:
    the reader cuts it into 256 KiB slices) and the file's first op with shapes. The slice before the
    shapes reads no shapes, the one after reads them, "" for the op without: both copies are the same
    event, counted once with the reader's note, as when the two sit side by side."""
    from nbprof.collect.chrome_trace import _SLICE_BYTES

    def op(name, ts, ext, **args):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1,
                "args": {"External id": ext, **args}}

    dup = op("aten::dup", 5, 1)
    filler = [op(f"aten::f{i}", 10 + 3 * i, 10 + i, Note="x" * 900) for i in range(1500)]
    shaped = op("aten::mm", 5000, 9999, **{"Input Dims": [[2, 2], [2, 2]]})
    for layout, events in (("apart", [dup, *filler, shaped, dup]), ("together", [dup, dup, *filler, shaped])):
        path = tmp_path / f"{layout}.json"
        path.write_text(_trace_text(events))
        assert path.stat().st_size > 4 * _SLICE_BYTES
        p = nbprof.load_trace(path)
        distinct = {json.dumps(e, sort_keys=True) for e in events}
        assert len(p.events) == len(distinct) == len(events) - 1, layout
        assert (p.events["name"] == "aten::dup").sum() == 1, layout
        assert p.events.loc[p.events["name"] == "aten::mm", "input_shapes"].astype(str).tolist() == ["[[2, 2], [2, 2]]"]
        notes = [n for n in p.meta.notes if "duplicate" in n]
        assert notes == ["1 exact duplicate (an event repeated, every field nbprof reads equal): counted once"], layout


def test_a_name_column_given_as_text_is_the_readers_column():
    """make_events_frame takes a categorical column as an array of strings: the recorded trace's
    names given so make the reader's own column (its categories, in order of first appearance, of
    the same dtype), and a table so built joins a read one with its names still categorical."""
    from nbprof.events import make_events_frame

    ev = nbprof.load_trace(trace_path("cnn_train_cuda")).events
    names = ev["name"].astype(str).to_numpy(dtype=object)
    built = make_events_frame(name=names, kind=ev["kind"].cat.codes.to_numpy(), start_us=ev["start_us"].to_numpy(),
                              dur_us=ev["dur_us"].to_numpy())
    pd.testing.assert_series_equal(built["name"], ev["name"].reset_index(drop=True))
    assert built["name"].cat.categories.dtype == ev["name"].cat.categories.dtype
    joined = pd.concat([ev["name"], built["name"]], ignore_index=True)
    assert isinstance(joined.dtype, pd.CategoricalDtype) and len(joined) == 2 * len(ev)
    assert (joined.astype(str).to_numpy() == np.concatenate([names, names])).all()
