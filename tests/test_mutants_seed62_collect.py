"""What seed 62's sample of mutants (docs/testing.md) showed no test held in the collectors: a
DataLoader worker's batches file cut short before the others are read, the file descriptors of
the fd-2 filter given back, a merged folder's thread names as Perfetto reads them, and the events
table's error for unknown columns. Each against an answer of its own: files and bytes the test
wrote by hand, the process's own table of open descriptors, the chrome trace format's metadata
events, names the test chose."""

from __future__ import annotations

import json
import os
import re
import struct

import pytest

from .synthetic import Trace

# ------------------------------------------------------------------------------ DataLoader workers


def test_a_cut_short_batches_file_leaves_the_next_workers_files_read(tmp_path):
    """Loader 1, iterator 2: worker 0 was killed while writing its header (10 bytes of the 48 of a
    record, its file first in name order), worker 1 wrote its header and one batch (six int64s a
    record, packed here by hand: header kind 0, loader, epoch, start, worker, pid; then status 1,
    epoch, idx, start, end, samples) and no functions. Worker 0 is left out; worker 1 is read."""
    from nbprof.collect.data_loading import DataLoaderWatch

    pid0, pid1 = 4242, 4343
    (tmp_path / f"w1-2-0-{pid0}.batches").write_bytes(b"\0" * 10)
    record = struct.Struct("<6q")
    (tmp_path / f"w1-2-1-{pid1}.batches").write_bytes(record.pack(0, 1, 0, 5_000, 1, pid1)
                                                      + record.pack(1, 0, 0, 6_000, 7_000, 3))
    watch = DataLoaderWatch()
    watch._folder = str(tmp_path)
    [w] = watch._read_workers()
    assert (w.loader, w.iterator, w.worker, w.pid, w.started_ns, w.epoch) == (1, 2, 1, pid1, 5_000, 0)
    assert w.batches.tolist() == [[1, 0, 0, 6_000, 7_000, 3]]
    assert w.stats is None and w.missing == "its process ended without writing them"


# ------------------------------------------------------------------------------ native stderr filter


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads the process's table of open descriptors")
def test_the_stderr_filter_closes_every_descriptor_it_opened(capfd):
    """The filter opens a pipe and copies of fd 2 while it runs; once it has stopped (its reader
    thread ended: it saw the pipe's end), the process's open descriptors (``/proc/self/fd``) are
    those it had before, and the cell's own line went through."""
    from nbprof.collect.native_output import NativeStderrFilter

    capfd.readouterr()
    before = set(os.listdir("/proc/self/fd"))
    f = NativeStderrFilter()
    f.start()
    thread = f._thread
    os.write(2, b"own line\n")
    f.stop()
    assert thread is not None
    thread.join()  # what it does last is to close its descriptors
    assert set(os.listdir("/proc/self/fd")) == before
    assert capfd.readouterr().err == "own line\n"


# ------------------------------------------------------------------------------ a merged folder's file


def ranks_naming_their_threads(tmp_path):
    """A folder of two ranks, both pid 1000, threads 1000 and 2000 named by thread_name metadata
    events in each rank's file (names chosen here); the folder and {rank: {tid: name}}."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    names = {0: {1000: "main of rank 0", 2000: "loader of rank 0"}, 1: {1000: "main of rank 1", 2000: "rank 1 bw"}}
    for r in (0, 1):
        t = Trace(rank=r)
        t.op("aten::mm", 10.0, 5.0, tid=1000)
        t.op("aten::add", 20.0, 2.0, tid=2000)
        t.events += [{"ph": "M", "name": "thread_name", "pid": 1000, "tid": tid, "args": {"name": name}}
                     for tid, name in names[r].items()]
        t.write(folder / f"rank{r}.json")
    return folder, names


def test_a_saved_folder_names_each_ranks_threads_in_metadata_events(tmp_path):
    """Two ranks, both pid 1000 (threads 1000 and 2000, each named by a thread_name metadata event
    in its rank's file, names chosen here). The merged file names them again for its own pids:
    for each rank's process (its process_name "rank r · pid 1000"), metadata events (``"ph": "M"``,
    as the chrome trace format spells them) naming the threads its rank's file named."""
    import nbprof

    folder, names = ranks_naming_their_threads(tmp_path)
    p = nbprof.load_trace(folder, workers=0, progress=False)
    out = p.save(tmp_path / "merged.json")
    with open(out) as f:
        doc = json.load(f)
    process = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            m = re.fullmatch(r"rank (\d) · pid 1000", e["args"]["name"])
            if m:
                process[int(m.group(1))] = e["pid"]
    assert sorted(process) == [0, 1] and process[0] != process[1]
    for r, pid in process.items():
        threads = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
                   if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}
        assert threads == names[r]


# ------------------------------------------------------------------------------ the events table


def test_unknown_columns_of_the_events_table_are_named_in_one_line():
    """Two names that are no column of the events table: the error names both, sorted, comma
    separated."""
    from nbprof.events import make_events_frame

    with pytest.raises(ValueError) as e:
        make_events_frame(name=["aten::mm"], zeta=[1], alpha=[2])
    assert str(e.value) == "not columns of the events table: alpha, zeta"
