"""What seed 63's sample of mutants (docs/testing.md) showed no test held in the collectors: a
compact trace whose first event holds a list right after ``"traceEvents": [`` still read in
slices, the takeover by another ``cProfile.Profile`` named as such, a DataLoader watch never
installed beginning at 0, the error for a snapshot missing a field naming the field, a snapshot
without history written back, whether torch can profile CUDA asked of a torch not imported yet,
and the category written for an event of a kind nbprof does not know. Each against an answer of
its own: events and fields the test wrote by hand, the events schema's documented defaults, a
stand-in torch package that answers "yes"."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

# ------------------------------------------------------------------------------ chrome trace reader


def test_a_compact_trace_whose_first_event_holds_a_list_is_read_in_slices(monkeypatch):
    """A trace written compactly (``},{"ph":`` between events) whose first event's args hold a
    list within the first bytes after ``"traceEvents":[`` (``"Input Dims":[[2,3]]``): the events'
    ``[`` is the first one after the key, so the file is still cut into slices (not read whole),
    and the slices give the three events written here, with their shapes."""
    from nbprof.collect import chrome_trace as ct

    events = [{"ph": "X", "args": {"Input Dims": [[2, 3]], "External id": i + 1}, "cat": "cpu_op",
               "name": name, "pid": 1, "tid": 7, "ts": 10.0 * i, "dur": 5.0}
              for i, name in enumerate(["aten::mm", "aten::add", "aten::relu"])]
    raw = json.dumps({"traceEvents": events, "schemaVersion": 1}, separators=(",", ":")).encode()
    key = raw.find(b'"traceEvents"')
    assert raw.find(b"[", raw.find(b"[", key) + 1) < key + 64  # a second "[" in sight of the key
    monkeypatch.setattr(ct, "_SLICE_BYTES", 64)
    sliced = ct._read_sliced(io.BytesIO(raw).read, "compact.json")
    assert sliced is not None, "a compact trace was not cut into slices"
    ev = sliced.events
    assert ev["name"].astype(str).tolist() == ["aten::mm", "aten::add", "aten::relu"]
    assert ev["input_shapes"].astype(str).tolist() == ["[[2, 3]]"] * 3
    assert ev["start_us"].tolist() == [0.0, 10.0, 20.0]


# ------------------------------------------------------------------------------ %%cprofile takeover


def test_a_cprofile_enabled_in_the_sessions_thread_is_named_the_taker():
    """Another ``cProfile.Profile`` enabled in the thread of nbprof's %%cprofile session ends it:
    the takeover names what took it, ``cProfile.Profile.enable`` (the wrapper nbprof put on it
    sees it first), and the other profile is no longer running at the session's end."""
    import cProfile

    from nbprof.collect.cprofile import CProfileSession

    s = CProfileSession()
    s.begin()
    try:
        inner = cProfile.Profile()
        inner.enable()
        inner.disable()
    finally:
        s.end()
    assert s.takeover is not None
    assert s.takeover.by == "cProfile.Profile.enable"
    assert s.takeover.still_running is False


# ------------------------------------------------------------------------------ DataLoader watch


def test_a_dataloader_watch_never_installed_began_at_zero():
    """A watch collected without ever being installed (no run watched): its record's start is 0,
    an int (the record's ``began_ns: int``), and the record writes and reads back with it."""
    from nbprof.collect.data_loading import DataLoaderWatch, DataLoadingRecord

    record = DataLoaderWatch().collect()
    assert type(record.began_ns) is int and record.began_ns == 0
    assert isinstance(record, DataLoadingRecord)


# ------------------------------------------------------------------------------ CUDA memory snapshots


def test_a_snapshot_missing_a_segments_field_names_it_in_the_error():
    """A segment without its ``address`` (a field every segment torch writes has): the one-line
    error says what Python said, the missing key's name."""
    from nbprof.collect.snapshot import parse_snapshot
    from nbprof.errors import TraceError

    seg = {"device": 0, "total_size": 2 << 20, "stream": 0, "blocks": []}
    with pytest.raises(TraceError) as info:
        parse_snapshot({"segments": [seg], "device_traces": []}, "no_address.pickle")
    assert str(info.value) == "no_address.pickle: not a CUDA memory snapshot (KeyError: 'address')"


def test_a_snapshot_without_history_writes_back_one_empty_history_per_device():
    """Segments on devices 0 and 1, no history at all (``device_traces`` empty, as a snapshot
    taken without recording history): written back, it has two segments and two empty
    histories, one per device (as torch's own snapshot has one per device)."""
    from nbprof.collect.snapshot import parse_snapshot, snapshot_dict

    from .snapshots import SEG_A, SEG_B, MiB, block, segment

    segs = [segment(SEG_A, 2 * MiB, [block(SEG_A, 2 * MiB, 0, "inactive")], device=0),
            segment(SEG_B, 2 * MiB, [block(SEG_B, 2 * MiB, 0, "inactive")], device=1)]
    out = snapshot_dict(parse_snapshot({"segments": segs, "device_traces": []}))
    assert [(s["device"], s["address"]) for s in out["segments"]] == [(0, SEG_A), (1, SEG_B)]
    assert out["device_traces"] == [[], []]
    # nothing at all: no segment, no history
    assert snapshot_dict(parse_snapshot({"segments": [], "device_traces": []}))["device_traces"] == []


# ------------------------------------------------------------------------------ torch, live


def test_cuda_is_asked_of_a_torch_installed_but_not_imported_yet(tmp_path):
    """In a fresh process where ``torch`` is installed but not imported, whether torch can profile
    CUDA is torch's own answer: a stand-in ``torch`` package (its version 2.5, its
    ``cuda.is_available()`` yes) first on the path makes it yes."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(textwrap.dedent("""\
        __version__ = "2.5.0"

        class cuda:
            @staticmethod
            def is_available():
                return True
    """))
    code = ("import sys\n"
            "from nbprof.collect.torch_live import cuda_available\n"
            "assert 'torch' not in sys.modules\n"
            "print(cuda_available())\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), root]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


# ------------------------------------------------------------------------------ chrome trace writer


def test_an_event_of_a_kind_nbprof_does_not_know_is_written_as_other(tmp_path):
    """An events table built by hand whose second event's kind is none of nbprof's (``kind``
    missing in the table): the trace written files it under "other" (the kind column's own
    "does not apply" value, events.COLUMNS), and the known one under torch's "cpu_op"."""
    from nbprof.events import make_events_frame
    from nbprof.model import TorchProfile

    ev = make_events_frame(name=["aten::mm", "mystery"], kind=["op", "a kind of its own"],
                           start_us=np.array([0.0, 10.0]), dur_us=np.array([5.0, 3.0]),
                           pid=np.array([1, 1]), thread=np.array([7, 7]))
    assert ev["kind"].isna().tolist() == [False, True]
    path = TorchProfile(ev).to_chrome_trace(tmp_path / "t.json")
    with open(path, encoding="utf-8") as f:
        written = {e["name"]: e["cat"] for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
    assert written["aten::mm"] == "cpu_op" and written["mystery"] == "other"
