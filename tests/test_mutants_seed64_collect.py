"""What seed 64's sample of mutants (docs/testing.md) showed no test held in ``nbprof.collect``,
each against an answer of its own: a hand-made trace's left-out counts of the wrong shape, two
lambdas on one line (one whose code starts on the next), a DataLoader's two workers each naming
the batches it made, a tracer a cell sets, a kernel on device 1 written back, and the display
unit torch's own traces name."""

from __future__ import annotations

import json
import sys

import pytest

from .conftest import DATA, needs_torch
from .synthetic import Trace

# ------------------------------------------------------------------------------ the trace's header


def test_left_out_counts_of_another_shape_are_a_note_that_says_so(tmp_path):
    """A trace whose ``nbprofLeftOutWork`` names a reason nbprof does not write ({"other": 1}):
    not used, and the note quotes the value as compact JSON and says what it is not."""
    t = Trace()
    ext = t.op("aten::mm", 0, 20)
    t.launch("gemm", ext, 5, 5, 30, 10)
    doc = t.doc()
    doc["nbprofLeftOutWork"] = {"other": 1}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    import nbprof

    p = nbprof.load_trace(path)
    assert p.meta.left_out_work == {}
    assert 'nbprofLeftOutWork {"other":1} is not counts of device records: not used' in p.meta.notes


# ------------------------------------------------------------------------------ cProfile's rows


def test_two_lambdas_on_one_line_one_without_a_column_there_are_numbered():
    """``fs = [lambda: 2, lambda: (`` / ``    1)]`` in /u/m.py: both lambdas start on line 1 (pstats
    gives both the key /u/m.py:1(<lambda>)); the first's code has a position on line 1 past column
    0 (its ``2``, col 15 counted from 1), the second's code is all on line 2 but for column 0. With
    no column to tell the second by, both are numbered in the order they ran: "#1", "#2" (before
    the fix: "<lambda> at col 15" and "<lambda> ", a name ending in a blank that no form names)."""
    import cProfile

    from nbprof.collect.cprofile import raw_stats

    ns: dict = {}
    exec(compile("fs = [lambda: 2, lambda: (\n    1)]\n", "/u/m.py", "exec"), ns)
    p = cProfile.Profile()
    p.enable()
    for f in ns["fs"]:
        f()
    p.disable()
    assert sorted(k for k in raw_stats(p) if k[0] == "/u/m.py") == [("/u/m.py", 1, "<lambda> #1"),
                                                                    ("/u/m.py", 1, "<lambda> #2")]


# ------------------------------------------------------------------------------ DataLoader workers


DATASET_WORKER_IDS = """
import torch
from torch.utils.data import Dataset, get_worker_info


class WorkerIds(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([i, get_worker_info().id])
"""


@needs_torch
def test_each_wait_of_a_two_worker_loader_names_the_worker_that_made_its_batch(tmp_path, monkeypatch):
    """8 samples, 2 a batch, 2 forked workers: the main process's record of each wait names the
    worker that made the batch it waited for, as torch's ``get_worker_info().id`` inside each
    sample's ``__getitem__`` says (the batches come back in order: batch i, then the end)."""
    from torch.utils.data import DataLoader

    from nbprof.collect.data_loading import DataLoaderWatch

    (tmp_path / "seed64_worker_ids.py").write_text(DATASET_WORKER_IDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    from seed64_worker_ids import WorkerIds  # type: ignore[import-not-found]

    watch = DataLoaderWatch()
    watch.install()
    try:
        batches = list(DataLoader(WorkerIds(), batch_size=2, num_workers=2, multiprocessing_context="fork"))
    finally:
        watch.remove()
        record = watch.collect()
    made_by = [int(b[0, 1]) for b in batches]
    assert [b[:, 0].tolist() for b in batches] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert sorted(set(made_by)) == [0, 1]
    assert [(w[2], w[3], w[6]) for w in record.waits] == [(i, made_by[i], "ok") for i in range(4)] + [(-1, -1, "stop")]


# ------------------------------------------------------------------------------ --lines


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: sys.settrace runs beside sys.monitoring's tools")
def test_a_tracer_set_while_lines_are_followed_is_the_cells_in_the_tables_note():
    """The recorder follows this test's lines; the code then sets a trace function of its own: the
    line table's note (``table().attrs["notes"]``, the cell's word when nothing names the code)
    says the cell set it."""
    from nbprof.collect.python_line_recorder import PythonLineRecorder
    from nbprof.collect.user_code import UserCode

    def other(frame, event, arg):
        return None

    r = PythonLineRecorder(UserCode(None))
    r.start()
    try:
        sys.settrace(other)
    finally:
        r.stop()
        sys.settrace(None)
    assert r.replaced
    assert r.table().attrs["notes"] == ["the cell set a tracer of its own (sys.settrace: a debugger?), which "
                                        "replaced nbprof's line tracer: the lines stop where it took over"]


# ------------------------------------------------------------------------------ the file nbprof writes


def test_a_kernel_on_device_1_is_written_under_process_1(tmp_path):
    """A hand-made trace whose one kernel ran on cuda:1 (``"pid": 1``, ``"device": 1``, as torch
    writes a device's events): saved again, the kernel's event is under process 1 with device 1,
    and its launch under the CPU's process 1000."""
    t = Trace()
    ext = t.op("aten::mm", 0, 20)
    t.launch("gemm", ext, 5, 5, 30, 10, device=1)
    p = t.load(tmp_path)
    p.save(tmp_path / "saved.json")
    events = json.loads((tmp_path / "saved.json").read_text())["traceEvents"]
    [kernel] = [e for e in events if e.get("cat") == "kernel"]
    [launch] = [e for e in events if e.get("name") == "cudaLaunchKernel"]
    assert (kernel["pid"], kernel["args"]["device"]) == (1, 1)
    assert launch["pid"] == 1000


def test_a_saved_trace_names_the_display_unit_torchs_own_trace_names(tmp_path):
    """tests/data/two_streams was written by torch (kineto), with ``"displayTimeUnit": "ms"``:
    read and saved again, nbprof's file names the same unit under the same key."""
    import gzip

    import nbprof

    path = DATA / "two_streams.trace.json.gz"
    with gzip.open(path) as f:
        torch_doc = json.load(f)
    assert torch_doc["displayTimeUnit"] == "ms"
    nbprof.load_trace(path).save(tmp_path / "saved.json")
    assert json.loads((tmp_path / "saved.json").read_text())["displayTimeUnit"] == torch_doc["displayTimeUnit"]
