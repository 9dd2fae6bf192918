"""What seed 69's sample of mutants (docs/testing.md) showed no fast-tier test in the pytest process
held: a profile function set with ``sys.setprofile`` named so in the note (only tests that also
check the note's site, which reads mutmut's trampoline under mutmut, said so), ``/dev/shm`` used as
torch's scratch folder only when it has room *and* can be written, a saved folder of ranks naming
each rank's profiler-overhead process so, and a trace with no name of its own saved as "nbprof".
Every expected value is written out by hand from the input the test made."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from types import SimpleNamespace

import pytest

from .conftest import run

# ------------------------------------------------------------------------------ cprofile.hook_changing


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: cProfile is a sys.monitoring tool beside the hook")
def test_a_hook_set_with_sys_setprofile_is_named_so_in_the_note(shell):
    """Before 3.12 a ``sys.setprofile`` hook the cell sets replaces nbprof's cProfile (one profile
    function per thread). The one note on it names how it was set, "sys.setprofile", as the cell
    spelled the call (what follows, the site, is left out: under mutmut it is a trampoline's)."""
    try:
        result, _ = run(shell, "%%cprofile -q -o sp69\nimport sys\nsys.setprofile(lambda frame, event, arg: None)\n"
                               "sys.setprofile(None)\n'value'")
    finally:
        sys.setprofile(None)
    assert result.error_in_exec is None and result.result == "value"
    [note] = [n for n in shell.user_ns["sp69"].meta.notes if n.startswith("another Python profiler")]
    assert note.startswith("another Python profiler (sys.setprofile")


# ------------------------------------------------------------------------------ torch_live._scratch_dirs

GIB = 1 << 30


@pytest.mark.parametrize("free, writable, shm", [(1 * GIB, True, False), (4 * GIB, False, False),
                                                 (4 * GIB, True, True)])
def test_dev_shm_is_a_scratch_folder_only_with_2_gib_free_and_writable(monkeypatch, free, writable, shm):
    """torch's trace goes to /dev/shm first only where it has at least 2 GiB free and can be
    written: 1 GiB free (writable) and 4 GiB free (not writable) leave only the temporary folder;
    4 GiB free and writable put /dev/shm before it. os.statvfs and os.access answer as the case
    says for /dev/shm (4 KiB blocks), as the machine does for any other path."""
    from nbprof.collect.torch_live import _scratch_dirs

    tmp = tempfile.gettempdir()  # cached now: the fakes below do not change it
    real_statvfs, real_access = os.statvfs, os.access

    def statvfs(path):
        return SimpleNamespace(f_bavail=free // 4096, f_frsize=4096) if path == "/dev/shm" else real_statvfs(path)

    def access(path, mode, **kw):
        return writable if path == "/dev/shm" else real_access(path, mode, **kw)

    monkeypatch.setattr(os, "statvfs", statvfs)
    monkeypatch.setattr(os, "access", access)
    assert _scratch_dirs() == (["/dev/shm", tmp] if shm else [tmp])


# ------------------------------------------------------------------------------ trace_ranks.written_ranks


def _op(name: str, ts: float, dur: float, **fields) -> dict:
    e = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
         "args": {"External id": 1}}
    e.update(fields)
    return e


def test_a_saved_folder_names_each_ranks_overhead_process_profiler_overhead(tmp_path):
    """Two ranks, each with ops on its main thread (pid 1000 for rank 0, 2000 for rank 1) and its
    profiler overhead (pid -1, tid 0, as torch writes it). Saved as one trace, each rank's
    processes are named in rank order, the overhead's (pid -1: first) "profiler overhead", the
    other by its pid: four process_name entries, read from the file."""
    import nbprof

    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank, main in ((0, 1000), (1, 2000)):
        events = [_op("aten::mm", 10.0, 100.0, pid=main, tid=main),
                  _op("Buffer Flush", 50.0, 4.0, cat="overhead", pid=-1, tid=0)]
        (folder / f"r{rank}.json").write_text(json.dumps({"distributedInfo": {"rank": rank, "world_size": 2},
                                                          "traceEvents": events}))
    saved = nbprof.load_trace(folder, workers=0, progress=False).save(tmp_path / "merged.json")
    doc = json.loads(open(saved, "rb").read())
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"]
    assert names == ["rank 0 · profiler overhead", "rank 0 · pid 1000", "rank 1 · profiler overhead",
                     "rank 1 · pid 2000"]


# ------------------------------------------------------------------------------ trace_writer._document


def test_a_trace_without_a_name_is_saved_named_nbprof_and_a_named_one_by_its_file_name(tmp_path):
    """A hand-written trace with no "traceName" saved: the file's traceName is "nbprof"; one whose
    traceName is a path ("/runs/a/step[3].json") keeps only the file's name, "step[3].json"."""
    import nbprof

    for given, written in ((None, "nbprof"), ("/runs/a/step[3].json", "step[3].json")):
        doc = {"traceEvents": [_op("aten::mm", 10.0, 100.0)]}
        if given is not None:
            doc["traceName"] = given
        src = tmp_path / "in.json"
        src.write_text(json.dumps(doc))
        saved = nbprof.load_trace(src, progress=False).save(tmp_path / "out.json")
        assert json.loads(open(saved, "rb").read())["traceName"] == written
