"""DataLoader workers recorded in a profiled cell (issue 41), in a real IPython shell.

The oracles are the data itself and the standard library, never nbprof: each sample carries the
index the sampler gave it and the pid of the process that made it (``os.getpid()`` inside
``__getitem__``), so the batches the loop received say which worker made which batch and how many
``__getitem__`` calls each one made; a transform that sleeps a known time bounds the time per call
from below; ``pstats`` on the same loader with ``num_workers=0`` in this process gives the
function table; torch's own ``enumerate(DataLoader)#...__next__`` ranges bound the loop's waits;
psutil says whether a worker process was left behind.

Worker processes are slow to start (a fork of this process, hundreds of ms on a busy machine;
spawn imports torch again: seconds), so the fork cases share one cell run each (module fixtures)
and the spawn / forkserver / timeout / command-line cases are marked slow.
"""

from __future__ import annotations

import gc
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from . import htmltext
from .conftest import needs_torch, run

pytestmark = needs_torch

DATASETS = textwrap.dedent('''
    """Datasets for tests/test_data_loading.py: each sample is (index, pid of the process that made it)."""
    import os
    import signal
    import time

    import torch
    from torch.utils.data import Dataset, IterableDataset, get_worker_info


    class Tagged(Dataset):
        def __init__(self, n=24, nap=0.0, fail_at=None, kill_at=None):
            self.n, self.nap, self.fail_at, self.kill_at = n, nap, fail_at, kill_at

        def __len__(self):
            return self.n

        def transform(self, i):
            if self.nap:
                time.sleep(self.nap)
            return i

        def __getitem__(self, i):
            if i == self.fail_at:
                raise ValueError(f"bad sample {i}")
            if i == self.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return torch.tensor([self.transform(i), os.getpid()], dtype=torch.int64)


    class Stream(IterableDataset):
        """n samples, split among the workers (or all made by worker 0 when not ``split``)."""

        def __init__(self, n=24, split=True):
            self.n, self.split = n, split

        def __iter__(self):
            info = get_worker_info()
            if info is None:
                ids = range(self.n)
            elif self.split:
                ids = range(info.id, self.n, info.num_workers)
            else:
                ids = range(self.n) if info.id == 0 else range(0)
            for i in ids:
                yield torch.tensor([i, os.getpid()], dtype=torch.int64)
''')

COLLECT = "seen = [(b[:, 0].tolist(), int(b[0, 1])) for b in loader]"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """The datasets module, importable by the workers (spawn imports it again)."""
    folder = tmp_path_factory.mktemp("datasets")
    (folder / "nbprof_test_datasets.py").write_text(DATASETS)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    sys.modules.pop("nbprof_test_datasets", None)


def _folders() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), f"nbprof-data-{os.getpid()}-*")))


_children_before_the_test: set[int] = set()


@pytest.fixture(autouse=True)
def _note_the_children_before_the_test():
    """This process's children when the test starts: not the test's (under pytest-xdist, the
    tutorials' JupyterLab and Chromium run from this worker while tests between them run)."""
    import psutil

    _children_before_the_test.clear()
    _children_before_the_test.update(p.pid for p in psutil.Process().children(recursive=True))
    yield


def _children_after(shell, seconds: float = 10.0) -> list:
    """This process's children once the cell's iterators are gone (a traceback IPython keeps holds
    the failed one, with its workers, as it does without nbprof)."""
    import psutil

    for name in ("last_traceback", "last_value", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    if getattr(shell.InteractiveTB, "tb", None) is not None:  # kept for %debug
        shell.InteractiveTB.tb = None
    shell.last_execution_result = None  # its error_in_exec
    shell.user_ns.pop("loader", None)
    shell.user_ns.pop("_", None)
    deadline = time.time() + seconds
    while True:
        gc.collect()
        kids = [p for p in psutil.Process().children(recursive=True)
                if p.status() != psutil.STATUS_ZOMBIE and p.pid not in _children_before_the_test]
        kids = [p for p in kids if "forkserver" not in " ".join(p.cmdline()) and "resource_tracker" not in
                " ".join(p.cmdline())]
        if not kids or time.time() > deadline:
            return kids
        time.sleep(0.1)


def _traceback_text(ip, e) -> str:
    """What IPython shows for ``e``, without colors and the cells' numbers."""
    import re

    text = "\n".join(ip.InteractiveTB.structured_traceback(type(e), e, e.__traceback__))
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return re.sub(r"In ?\[\d+\]|ipython-input-\d+-[0-9a-f]+", "In[N]", text)


def _torch_originals():
    from torch.utils.data import dataloader
    from torch.utils.data._utils import worker

    return (dataloader._MultiProcessingDataLoaderIter.__dict__["__init__"],
            dataloader._MultiProcessingDataLoaderIter.__dict__["_reset"],
            dataloader._MultiProcessingDataLoaderIter.__dict__["_next_data"],
            dataloader._SingleProcessDataLoaderIter.__dict__["__init__"],
            dataloader._SingleProcessDataLoaderIter.__dict__["_next_data"],
            worker._worker_loop)


def _profiled(ip, magic, loader_code, body=COLLECT, flags="-q"):
    """Run ``loader_code`` (unprofiled), then ``body`` under ``%%magic``; the profile and the
    shell's ``seen``."""
    before = _folders()
    result, _ = run(ip, loader_code)
    assert result.error_in_exec is None, result.error_in_exec
    result, captured = run(ip, f"%%{magic} {flags} -o p\n{body}")
    assert not (_folders() - before), "the cell's folder was left behind"
    return result, ip.user_ns["p"], ip.user_ns.get("seen")


def _by_pid(seen):
    """The oracle: how many samples each process made, from the samples themselves."""
    counts: dict[int, int] = {}
    for indices, pid in seen:
        counts[pid] = counts.get(pid, 0) + len(indices)
    return counts


LOADER = ("from torch.utils.data import DataLoader\nfrom nbprof_test_datasets import Tagged, Stream\n"
          "loader = DataLoader(Tagged(24, nap={nap}), batch_size=4, num_workers=2, "
          "multiprocessing_context='{method}'{extra})")


@pytest.fixture(scope="module")
def forked(ip, datasets):
    """One %%cprofile cell iterating a fork loader of 24 samples, 4 a batch, 2 workers, each sample
    sleeping 2 ms; the torch classes as they were before."""
    originals = _torch_originals()
    result, p, seen = _profiled(ip, "cprofile", LOADER.format(nap=0.002, method="fork", extra=""))
    assert result.error_in_exec is None, result.error_in_exec
    return p, seen, originals


@pytest.fixture(scope="module")
def forked_torch(ip, datasets):
    result, p, seen = _profiled(ip, "torchprof", LOADER.format(nap=0.002, method="fork", extra=""),
                                flags="-q --no-cuda")
    assert result.error_in_exec is None, result.error_in_exec
    return p, seen


# ----------------------------------------------------------------------------- what each worker made


def test_each_batch_is_the_workers_that_the_samples_say_made_it(forked):
    p, seen, _ = forked
    b = p.data_loading()
    assert len(seen) == 6 and list(b["batch"]) == list(range(6))
    assert list(b["pid"]) == [pid for _, pid in seen]  # the pid inside each batch's samples
    assert list(b["samples"]) == [len(indices) for indices, _ in seen] == [4] * 6
    assert (b["status"] == "ok").all() and b["wait_us"].notna().all()
    assert set(b["worker"]) == {0, 1} and b.groupby("worker")["pid"].nunique().tolist() == [1, 1]
    assert (b["loader"] == "loader").all() and (b["epoch"] == 0).all()


def test_getitem_calls_per_worker_are_the_samples_it_made(forked):
    p, seen, _ = forked
    made = _by_pid(seen)
    assert sum(made.values()) == 24
    ws = p.worker_stats()
    getitem = ws[ws["function"] == "__getitem__"].set_index("worker")["ncalls"]
    pid_of = p.data_loading().groupby("worker")["pid"].first()
    assert {int(pid_of[w]): int(n) for w, n in getitem.items()} == made


def test_a_transform_sleeping_2_ms_takes_2_ms_a_call(forked):
    p, _, _ = forked
    ws = p.worker_stats()
    sleep = ws[ws["function"].str.contains("time.sleep")]
    assert sleep["ncalls"].sum() == 24
    per_call = sleep["tottime_s"].sum() / 24
    assert 0.002 <= per_call < 0.002 * 5, per_call  # never shorter than asked; a busy machine adds some
    b = p.data_loading()
    assert (b["make_us"] >= 4 * 2000).all()  # four samples a batch


def test_the_workers_function_table_is_pstats_of_the_same_loader_in_one_process(forked, datasets):
    """The same loader with num_workers=0 under cProfile in this process: every function of the
    batches' making is there with the same calls (times differ: other processes, other runs)."""
    import cProfile
    import pstats

    from torch.utils.data import DataLoader

    from nbprof_test_datasets import Tagged

    p, _, _ = forked
    profile = cProfile.Profile()
    profile.enable()
    for _ in DataLoader(Tagged(24, nap=0.002), batch_size=4, num_workers=0):
        pass
    profile.disable()
    oracle = {(os.path.basename(f), fn): v[1] for (f, _, fn), v in pstats.Stats(profile).stats.items()}
    ws = p.worker_stats()
    ws = ws.assign(base=ws["filename"].map(os.path.basename)).groupby(["base", "function"])["ncalls"].sum()
    for key in [("nbprof_test_datasets.py", "__getitem__"), ("nbprof_test_datasets.py", "transform"),
                ("fetch.py", "fetch"), ("collate.py", "default_collate"), ("collate.py", "collate"),
                ("collate.py", "collate_tensor_fn")]:
        assert ws[key] == oracle[key], key
    # nothing of nbprof's own recording is among them
    assert not ws.index.get_level_values("base").str.startswith("data_worker").any()


def test_times_are_on_one_clock(forked):
    """A batch is taken by the loop after its worker made it (the same clock in every process)."""
    p, _, _ = forked
    b = p.data_loading()
    got = b["wait_start_us"] + b["wait_us"]
    assert (got >= b["end_us"]).all()
    assert (b["start_us"] < b["end_us"]).all()
    w = p._data_loading.workers
    first = b.groupby("pid")["start_us"].min()
    assert all(first[pid] >= started for pid, started in zip(w["pid"], w["started_us"]))


def test_torchs_own_ranges_hold_the_loops_waits(forked_torch):
    """Each ``enumerate(DataLoader)#..__next__`` range torch recorded holds the wait nbprof
    measured inside it, on the events' axis (Kineto's clock is time.time_ns)."""
    p, seen = forked_torch
    ev = p.events
    nexts = ev[ev["name"].astype(str) == "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"]
    nexts = nexts.sort_values("start_us")
    b = p.data_loading().sort_values("wait_start_us")
    assert len(nexts) == len(b) + 1 == len(seen) + 1  # and the call that ended the loop
    for (_, r), (_, w) in zip(nexts.iterrows(), b.iterrows()):
        assert r["start_us"] <= w["wait_start_us"] and w["wait_start_us"] + w["wait_us"] <= r["start_us"] + r["dur_us"]
    assert list(b["pid"]) == [pid for _, pid in seen]


def test_the_timeline_has_the_waits_and_a_lane_per_worker(forked_torch):
    p, seen = forked_torch
    data = p.timeline_view().data
    lanes = data.lanes[data.lanes["kind"] == "data"]
    assert list(lanes["label"]) == ["loader: main process", "loader: worker 0", "loader: worker 1"]
    r = data.rects
    waits = r[r["family"] == "data_wait"]
    assert sorted(waits["name"]) == sorted(f"waiting for batch {i}" for i in range(len(seen)))
    made = r[r["family"] == "batch"]
    assert len(made) == len(seen) and set(made["lane"]) == set(lanes["lane"][1:])
    # a zoom keeps the lanes and draws the window's rectangles only
    from nbprof.analysis.timeline import timeline_rects

    b = p.data_loading()
    w0, w1 = float(b["start_us"].iloc[2]), float(b["end_us"].iloc[2])
    zoom = timeline_rects(p.events, p.meta, window=(w0, w1), layout=data)
    assert list(zoom.lanes["label"]) == list(data.lanes["label"])
    zr = zoom.rects[zoom.rects["family"] == "batch"]
    assert "batch 2" in set(zr["name"]) and (zr["x0_us"] >= w0).all() and (zr["x1_us"] <= w1).all()


def test_save_and_load_keep_the_workers(forked_torch, tmp_path):
    """p.save() writes the records beside the events (nbprofDataLoading); load_trace gives the same
    tables back, on the same axis."""
    import nbprof

    p, _ = forked_torch
    path = p.save(tmp_path / "loader.json.gz")
    q = nbprof.load_trace(path, progress=False)
    a, b = p.data_loading(), q.data_loading()
    assert list(a.columns) == list(b.columns) and len(a) == len(b) == 6
    for c in a.columns:
        if a[c].dtype.kind == "f":
            assert (a[c] - b[c]).abs().max() < 0.002, c  # the events' axis, read back from µs with 3 decimals
        else:
            assert a[c].tolist() == b[c].tolist(), c
    assert p.worker_stats().equals(q.worker_stats())
    assert "Data loading" in q.report()._repr_mimebundle_()["text/html"]
    # the saved stats hold none of nbprof's frames: an nbprof installed elsewhere (another machine,
    # another environment) loading this file would not know them as its own and would show them
    with gzip.open(path, "rt") as f:
        saved = json.load(f)["nbprofDataLoading"]
    files = {row[0] for w in saved["workers"] for row in (w["stats"] or [])}
    package = os.path.dirname(os.path.abspath(nbprof.__file__)) + os.sep
    assert files and not [f for f in files if os.path.abspath(f).startswith(package)]


@pytest.mark.parametrize("saved,problem", [
    ({"version": 2}, "not version 1"),
    ({"version": 1, "loaders": "x"}, "a list expected"),
    ({"version": 1, "began_ns": 0, "ended_ns": 0, "pid": 1, "call_cost_ns": 0, "unwatched": [], "passes": [],
      "workers": [], "waits": [[9, 0, 0, 0, 0, 0, "ok"]], "loaders": []}, "its batches name a DataLoader"),
    ({"version": 1, "began_ns": 0, "ended_ns": 0, "pid": 1, "call_cost_ns": 0, "unwatched": [], "passes": [],
      "waits": [], "loaders": [], "workers": [{"batches": [["<script>", 0, 0, 0, 0, 0]]}]}, "is no integer"),
    ({"version": 1, "began_ns": 0, "ended_ns": 0, "pid": 1, "call_cost_ns": 0, "unwatched": [], "passes": [],
      "workers": [], "waits": [], "main_samples": [[9, 0, 0, 4]], "loaders": []}, "its batches name a DataLoader"),
    ({"version": 1, "began_ns": 0, "ended_ns": 0, "pid": 1, "call_cost_ns": 0, "unwatched": [], "passes": [],
      "workers": [], "waits": [], "main_samples": [[1, 0, 0]], "loaders": []}, "a list of 4 expected"),
])
def test_a_hostile_saved_record_is_left_out_and_said(tmp_path, saved, problem):
    import json

    import nbprof

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
                                                  "ts": 10, "dur": 5}], "nbprofDataLoading": saved}))
    p = nbprof.load_trace(path, progress=False)
    assert p.meta.data_loading is None and len(p.data_loading()) == 0
    [note] = [n for n in p.meta.notes if n.startswith("nbprofDataLoading: ")]
    assert problem in note and note.endswith("the DataLoaders' records are left out")


def test_the_report_has_the_tab(forked, forked_torch):
    for p in (forked[0], forked_torch[0]):
        html = p.report()._repr_mimebundle_()["text/html"]
        assert ">Data loading<" in html and "loader: worker 1" in html and "Inside the workers" in html
        # the workers' lanes drawn, and the line a notebook shows where the drawing is sanitized away
        assert ("The DataLoaders' lanes is a drawing that shows once the notebook is trusted"
                in htmltext.text(html)), htmltext.text(html)[:2000]


def test_cprofile_splices_nbprofs_wrapper_out_of_the_call_graph(forked):
    """__next__ calls _next_data (nbprof's wrapper between them is left out, not the edge)."""
    p, _, _ = forked
    callers = p.callers("_next_data")
    assert list(callers["function"]) == ["__next__"]
    import nbprof

    assert not p.stats["filename"].str.startswith(os.path.dirname(nbprof.__file__)).any()


def test_the_cells_functions_are_those_it_calls_without_nbprof(forked, ip):
    """What nbprof's wrappers do for their own record (a dict of iterators, a temporary folder, a
    loader's description) is not among the cell's calls: every function of the main process's
    profile is one a plain cProfile of the same loop (a fresh loader, no nbprof) also records."""
    import pstats

    forked  # noqa: B018  (run once before: imports and isinstance caches warm for both runs below)
    _, p, _ = _profiled(ip, "cprofile", LOADER.format(nap=0.002, method="fork", extra=""))
    # the same cell without the magic, under a cProfile of its own (the same shell, the same capture)
    cell = LOADER.format(nap=0.002, method="fork", extra="") + (
        f"\nimport cProfile\nplain = cProfile.Profile()\nplain.enable()\ntry:\n    {COLLECT}\nfinally:\n    plain.disable()")
    result, _ = run(ip, cell)
    assert result.error_in_exec is None, result.error_in_exec
    plain = ip.user_ns.pop("plain")
    theirs = {(os.path.basename(f), name) for f, _, name in pstats.Stats(plain).stats}
    ours = {(os.path.basename(f), name) for f, name in zip(p.stats["filename"], p.stats["function"])}
    # the cell's own line, and the list comprehension's code in it, exist only in nbprof's run
    extra = {k for k in ours - theirs if not k[0].startswith("<ipython-input") and k[1] != "<listcomp>"
             and not k[0].startswith("<cell")}
    edges = p.edges
    assert not extra, "\n".join(
        f"{k} called by {sorted(set(edges.loc[edges['callee_function'] == k[1], 'caller_function']))}" for k in sorted(extra))


def test_nothing_is_left_patched_and_no_folder_or_process_is_left(forked, ip):
    _, _, originals = forked
    assert _torch_originals() == originals
    assert not _children_after(ip)


# ----------------------------------------------------------------------------- persistent workers


def test_persistent_workers_across_two_epochs_in_one_cell(ip, datasets):
    originals = _torch_originals()
    result, p, _ = _profiled(ip, "cprofile", LOADER.format(nap=0, method="fork", extra=", persistent_workers=True"),
                             body="seen = [[(b[:, 0].tolist(), int(b[0, 1])) for b in loader] for epoch in range(2)]")
    assert result.error_in_exec is None, result.error_in_exec
    seen = ip.user_ns["seen"]
    b = p.data_loading()
    assert b.groupby("epoch").size().tolist() == [6, 6]
    for epoch in (0, 1):
        assert list(b[b["epoch"] == epoch]["pid"]) == [pid for _, pid in seen[epoch]]
    ws = p.worker_stats()
    assert ws[ws["function"] == "__getitem__"]["ncalls"].sum() == 48
    record = p.meta.data_loading
    assert [k for _, _, _, k, _, _ in record.passes] == ["start", "resume"]
    assert {w.why for w in record.workers} == {"stopped"}  # alive at the end: asked to hand back
    assert _torch_originals() == originals
    # the workers live on: an unprofiled epoch runs as without nbprof; a profiled one says why
    # it has nothing of theirs
    result, _ = run(ip, "again = sum(len(b) for b in loader)")
    assert result.error_in_exec is None and ip.user_ns["again"] == 24
    result, _ = run(ip, "%%cprofile -q -o p2\nagain = sum(len(b) for b in loader)")
    assert result.error_in_exec is None
    p2 = ip.user_ns["p2"]
    assert len(p2.data_loading()) == 0
    assert any("loader's persistent workers were started before this cell" in n for n in p2.meta.notes)
    assert not _children_after(ip)


def test_workers_alive_at_the_end_are_waited_for_until_they_write_not_longer(ip, datasets, monkeypatch):
    """Persistent workers outlive the cell: nbprof asks each to write its functions and waits for
    each one's file, not for FLUSH_WAIT_S: set to 60 s here, so waiting past the files would
    take the whole minute (the cell itself, two forked workers and 24 samples, takes about 1 s)."""
    from nbprof.collect import data_loading

    monkeypatch.setattr(data_loading, "FLUSH_WAIT_S", 60.0)
    result, _ = run(ip, LOADER.format(nap=0, method="fork", extra=", persistent_workers=True"))
    assert result.error_in_exec is None, result.error_in_exec
    t0 = time.monotonic()
    result, _ = run(ip, "%%cprofile -q -o p\nseen = sum(len(b) for b in loader)")
    took = time.monotonic() - t0
    assert result.error_in_exec is None, result.error_in_exec
    record = ip.user_ns["p"].meta.data_loading
    assert ip.user_ns["seen"] == 24 and len(record.workers) == 2
    assert {w.why for w in record.workers} == {"stopped"}  # alive at the end: asked, and they wrote
    assert took < 30, took
    assert not _children_after(ip)


# ------------------------------------------------------------------------------------------ faults


@pytest.mark.slow  # torch takes 5 s a worker to shut down an iterator whose worker raised (without nbprof too)
def test_an_exception_in_getitem(ip, datasets):
    """The user's exception as without nbprof (no nbprof frame shown), the batches before it in the
    report, the failed one marked, and no worker process left behind."""
    originals = _torch_originals()
    # one worker: batches come in order, so the failed one is always taken from the queue (with
    # two, it may have come before the batch ahead of it and be taken from torch's buffer: another
    # line of _next_data in both tracebacks, but not the same line in both runs)
    code = (LOADER.format(nap=0, method="fork", extra="").replace("Tagged(24, nap=0)", "Tagged(24, fail_at=9)")
            .replace("num_workers=2", "num_workers=1"))
    run(ip, code)
    plain, _ = run(ip, "for b in loader:\n    pass")
    result, p, _ = _profiled(ip, "cprofile", code, body="for b in loader:\n    pass")
    for r in (plain, result):
        assert type(r.error_in_exec) is ValueError and "bad sample 9" in str(r.error_in_exec)
    # below the cell's own frame (its lines differ: the magic's line), the same frames and lines
    texts = [_traceback_text(ip, r.error_in_exec).split("\nFile ", 1)[1] for r in (plain, result)]
    assert texts[0] == texts[1] and "bad sample 9" in texts[1] and "dataloader.py" in texts[1]
    b = p.data_loading()
    # batch 2 (samples 8-11) raised in its worker; the loop got batches 0 and 1 first
    assert b.set_index("batch").loc[2, "status"] == "error"
    assert (b[b["batch"] < 2]["status"] == "ok").all()
    assert p.meta.cell_error == "ValueError"
    assert _torch_originals() == originals
    del plain, result, r  # the exceptions hold the iterators (their frames), with their workers
    assert not _children_after(ip)


@pytest.mark.slow  # as above
def test_a_worker_killed_mid_epoch(ip, datasets):
    """Worker 1 kills itself making batch 3: the report says its functions are missing and why;
    its batch before, and everything of worker 0, are there."""
    code = LOADER.format(nap=0, method="fork", extra="").replace("Tagged(24, nap=0)", "Tagged(24, kill_at=13)")
    result, p, _ = _profiled(ip, "cprofile", code, body="for b in loader:\n    pass")
    # torch says it one of three ways, depending on which of its checks sees the dead worker first
    # (or a batch still being received from it: its resource sharer is gone)
    e = result.error_in_exec
    assert isinstance(e, ConnectionError) or (isinstance(e, RuntimeError) and (
        "killed by signal" in str(e) or "exited unexpectedly" in str(e))), e
    del e
    b = p.data_loading()
    assert (b.set_index("batch").loc[[0, 1, 2], "status"] == "ok").all()
    record = p.meta.data_loading
    by_worker = {w.worker: w for w in record.workers}
    assert by_worker[1].stats is None and "was killed by SIGKILL" in by_worker[1].missing
    assert by_worker[0].stats is not None
    [note] = [n for n in p.meta.notes if "did not hand back its functions" in n]
    assert f"worker 1 (pid {by_worker[1].pid})" in note and "killed by SIGKILL" in note
    ws = p.worker_stats()
    assert set(ws["worker"]) == {0}
    del result  # its exception holds the iterator (its frames), with the other worker
    assert not _children_after(ip)


def test_an_interrupted_loop_leaves_nothing_patched(ip, datasets):
    """KeyboardInterrupt in the middle of the loop: the batches until then are in the report, the
    wrappers are gone, the folder too, the next profiled cell works."""
    originals = _torch_originals()
    result, p, _ = _profiled(ip, "cprofile", LOADER.format(nap=0, method="fork", extra=""),
                             body="for i, b in enumerate(loader):\n    if i == 2:\n        raise KeyboardInterrupt")
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    b = p.data_loading()
    assert b["wait_us"].notna().sum() == 3 and (b["status"] == "ok").all()
    assert _torch_originals() == originals
    del result
    result, p2, _ = _profiled(ip, "cprofile", "x = 1", body="y = sum(range(10))")
    assert result.error_in_exec is None and p2.meta.data_loading is None
    assert not _children_after(ip)


def _worker_under_a_profiled_parent(folder, q):
    from nbprof.collect.data_worker import WorkerLoop, _Recorder

    recorder = _Recorder(WorkerLoop(folder, 1, 1, 0), worker_id=0)
    recorder.begin(0, [0])
    sorted(range(100))
    recorder.end(0, "a batch")
    recorder.finish("exit")
    q.put(recorder.batches)


def test_a_forked_worker_records_under_its_parents_cprofile(tmp_path):
    """%%cprofile's profile is on in the main process when it forks a worker: the worker's own
    profile takes over (from Python 3.12 the inherited sys.monitoring tool refused a second one:
    "Another profiling tool is already active")."""
    import cProfile
    import marshal
    import multiprocessing

    from nbprof.collect.data_worker import batches_path, stats_path

    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    parent = cProfile.Profile()
    parent.enable()
    try:
        process = ctx.Process(target=_worker_under_a_profiled_parent, args=(str(tmp_path), q))
        process.start()
    finally:
        parent.disable()
    assert q.get(timeout=60) == 1
    process.join(30)
    assert process.exitcode == 0
    with open(stats_path(batches_path(str(tmp_path), 1, 1, 0, process.pid)), "rb") as f:
        stats = marshal.load(f)["stats"]
    assert any("sorted" in fn for _, _, fn in stats)


# --------------------------------------------------------------------- other loaders, other modes


def test_an_iterable_dataset_split_among_workers(ip, datasets):
    """22 samples, 11 a worker: each worker's last batch holds 3, though its indices (an iterable
    dataset's are ``[None] * batch_size``) say 4."""
    code = ("from torch.utils.data import DataLoader\nfrom nbprof_test_datasets import Stream\n"
            "loader = DataLoader(Stream(22), batch_size=4, num_workers=2, multiprocessing_context='fork')")
    result, p, seen = _profiled(ip, "cprofile", code)
    assert result.error_in_exec is None, result.error_in_exec
    b = p.data_loading()
    assert list(b["pid"]) == [pid for _, pid in seen]
    assert list(b["samples"]) == [len(indices) for indices, _ in seen] == [4, 4, 4, 4, 3, 3]
    assert (b["status"] == "ok").all()  # the workers' "ran out" is no batch
    made = _by_pid(seen)
    assert b.groupby("pid")["samples"].sum().to_dict() == made


@pytest.mark.parametrize("dataset", ["Tagged(22)", "Stream(22)"])
def test_without_workers_a_short_last_batch_holds_what_it_holds(ip, datasets, dataset):
    """In the main process the indices are never seen: the samples are counted in the batch
    (default_collate's), for a map-style and an iterable dataset alike."""
    code = ("from torch.utils.data import DataLoader\nfrom nbprof_test_datasets import Tagged, Stream\n"
            f"loader = DataLoader({dataset}, batch_size=4)")
    result, p, seen = _profiled(ip, "cprofile", code)
    assert result.error_in_exec is None, result.error_in_exec
    b = p.data_loading()
    assert list(b["samples"]) == [len(indices) for indices, _ in seen] == [4, 4, 4, 4, 4, 2]


def test_a_short_last_batch_is_kept_by_save_and_load(ip, datasets, tmp_path):
    import nbprof

    code = ("from torch.utils.data import DataLoader\nfrom nbprof_test_datasets import Stream\n"
            "loader = DataLoader(Stream(10), batch_size=4)")
    result, p, seen = _profiled(ip, "torchprof", code, flags="-q --no-cuda")
    q = nbprof.load_trace(p.save(tmp_path / "short.json.gz"), progress=False)
    assert list(p.data_loading()["samples"]) == list(q.data_loading()["samples"]) == [4, 4, 2]


def test_samples_are_counted_in_what_default_collate_makes():
    """default_collate's batches of each kind of sample: tensors, numbers, strings, bytes, dicts,
    tuples, namedtuples, nested; each holds 3 samples. Another collate_fn: not counted."""
    from collections import namedtuple

    import numpy as np
    import torch
    from torch.utils.data import default_collate

    from nbprof.collect.data_worker import samples_in_batch

    Pair = namedtuple("Pair", "a b")
    kinds = [torch.zeros(2, 5), 1.5, 7, "text", b"raw", np.zeros(4), {"x": torch.ones(3), "y": "label"},
             ("name", torch.ones(2)), [torch.ones(1), 2], Pair(a=[1, 2], b={"c": "d"}), {"nested": {"deep": ["s", 1]}}]
    for sample in kinds:
        batch = default_collate([sample] * 3)
        assert samples_in_batch(batch, default_collate) == 3, sample
        assert samples_in_batch(batch, lambda samples: samples) is None
    assert samples_in_batch({}, default_collate) is None and samples_in_batch([], default_collate) is None
    assert samples_in_batch(torch.tensor(1.0), default_collate) is None  # no first dimension


def test_another_collate_fn_counts_the_indices_asked_for(ip, datasets):
    """A collate_fn of the user's makes batches of any shape: a worker counts the indices (a
    map-style dataset's are exact); without workers, the loader's batch size (the last is short)."""
    collate = "lambda samples: {'n': torch.stack(samples)[:, :1].T}"  # a (1, n) tensor: its first dimension is no count
    for workers, expected in ((2, [4, 4, 2]), (0, [4, 4, 4])):
        code = ("import torch\nfrom torch.utils.data import DataLoader\nfrom nbprof_test_datasets import Tagged\n"
                f"loader = DataLoader(Tagged(10), batch_size=4, num_workers={workers}, collate_fn={collate}, "
                f"multiprocessing_context={'fork' if workers else None!r})")
        result, p, seen = _profiled(ip, "cprofile", code, body="seen = [b['n'].shape[1] for b in loader]")
        assert result.error_in_exec is None, result.error_in_exec
        assert seen == [4, 4, 2] and list(p.data_loading()["samples"]) == expected, workers


def test_prefetched_batches_the_loop_never_took(ip, datasets):
    """prefetch_factor=4, the loop stops after 2 batches: the workers made more (at most 2 + 4 x 2),
    which the loop never waited for."""
    code = LOADER.format(nap=0.002, method="fork", extra=", prefetch_factor=4")
    body = "it = iter(loader)\nseen = [next(it) for _ in range(2)]\ntime.sleep(0.3)"
    result, p, _ = _profiled(ip, "cprofile", "import time\n" + code, body=body)
    assert result.error_in_exec is None, result.error_in_exec
    b = p.data_loading()
    assert b["wait_us"].notna().sum() == 2
    assert 2 < len(b) <= 2 + 4 * 2 and (b[b["wait_us"].isna()]["status"] == "ok").all()
    ip.user_ns.pop("it", None)
    assert not _children_after(ip)


def test_without_workers_the_batches_are_the_main_processs(ip, datasets):
    code = "from torch.utils.data import DataLoader\nfrom nbprof_test_datasets import Tagged\n" \
           "loader = DataLoader(Tagged(12, nap=0.001), batch_size=4)"
    result, p, seen = _profiled(ip, "torchprof", code, flags="-q --no-cuda")
    b = p.data_loading()
    assert list(b["worker"]) == [-1, -1, -1] and list(b["pid"]) == [os.getpid()] * 3
    assert (b["make_us"] == b["wait_us"]).all() and (b["make_us"] >= 4 * 1000).all()
    assert len(p.worker_stats()) == 0


def test_a_cell_without_a_dataloader_records_nothing(ip):
    before = _folders()
    result, _ = run(ip, "%%cprofile -q -o p\nx = sum(range(1000))")
    p = ip.user_ns["p"]
    assert p.meta.data_loading is None and len(p.data_loading()) == 0 and not (_folders() - before)
    assert "Data loading" not in p.report()._repr_mimebundle_()["text/html"]


# ------------------------------------------------------------------------- spawn, forkserver (slow)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_other_start_methods(ip, datasets, method):
    """spawn and forkserver pickle the workers' target: the records come back the same way."""
    result, p, seen = _profiled(ip, "cprofile", LOADER.format(nap=0.002, method=method, extra=""))
    assert result.error_in_exec is None, result.error_in_exec
    b = p.data_loading()
    assert list(b["pid"]) == [pid for _, pid in seen]
    ws = p.worker_stats()
    getitem = ws[ws["function"] == "__getitem__"].set_index("worker")["ncalls"]
    pid_of = b.groupby("worker")["pid"].first()
    assert {int(pid_of[w]): int(n) for w, n in getitem.items()} == _by_pid(seen)
    assert p.meta.data_loading.loaders[0].start_method == method
    assert not _children_after(ip)


@pytest.mark.slow
def test_spawn_persistent_workers_two_epochs(ip, datasets):
    result, p, _ = _profiled(ip, "torchprof", LOADER.format(nap=0, method="spawn", extra=", persistent_workers=True"),
                             body="seen = [[(b[:, 0].tolist(), int(b[0, 1])) for b in loader] for epoch in range(2)]",
                             flags="-q --no-cuda")
    assert result.error_in_exec is None, result.error_in_exec
    ws = p.worker_stats()
    assert ws[ws["function"] == "__getitem__"]["ncalls"].sum() == 48
    assert p.data_loading().groupby("epoch").size().tolist() == [6, 6]
    ip.user_ns.pop("loader")
    assert not _children_after(ip)


@pytest.mark.slow
def test_a_worker_still_busy_when_the_loop_timed_out(ip, datasets):
    """timeout=0.5 s, a sample sleeping 3 s: the loop raises; the busy worker's functions are
    missing (it was still making the batch), the batch the loop waited for is "lost"."""
    code = LOADER.format(nap=3.0, method="fork", extra=", timeout=0.5").replace("Tagged(24", "Tagged(8")
    result, p, _ = _profiled(ip, "cprofile", code, body="for b in loader:\n    pass")
    assert isinstance(result.error_in_exec, RuntimeError) and "timed out" in str(result.error_in_exec)
    b = p.data_loading()
    assert b.set_index("batch").loc[0, "status"] == "lost"
    assert any("did not hand back its functions: it was still busy" in n for n in p.meta.notes)
    del result
    assert not _children_after(ip, seconds=30)


@pytest.mark.slow
def test_a_script_that_imports_torch_itself(tmp_path, datasets):
    """``nbprof cprofile script.py``: torch's DataLoader is imported by the script, during the run
    (the watch wraps it as it is imported)."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(datasets)!r})
        from torch.utils.data import DataLoader
        from nbprof_test_datasets import Tagged
        if __name__ == "__main__":
            n = sum(len(b) for b in DataLoader(Tagged(16), batch_size=4, num_workers=2,
                                               multiprocessing_context="fork"))
            print("samples", n)
    """))
    out = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "nbprof", "cprofile", "--html", str(out), str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "samples 16" in proc.stdout
    html = out.read_text()
    assert ">Data loading<" in html and "worker 1" in html


# ------------------------------------------------------------------------------------------- cost


@pytest.mark.slow
def test_recording_the_workers_costs_a_batch_little(ip):
    """The small version of benchmarks/bench_data_loading.py (target: at most 1.3x, measured there
    and in benchmarks/RESULTS.md): a worker-bound loop with a realistic numpy transform, its worker's
    CPU time a batch with and without %%cprofile, median of five pairs. The guard's bound leaves
    room for a busy machine; recording every call of the loop, or writing the functions after
    every batch, would pass it by far."""
    import importlib.util
    import pathlib
    import statistics

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_data_loading.py"
    spec = importlib.util.spec_from_file_location("bench_data_loading", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result, _ = run(ip, bench.SETUP.format(samples=30 * 32))
    assert result.error_in_exec is None, result.error_in_exec
    from .guards import within

    bench.measure(ip, None)  # the first fork of this shell

    def measure() -> dict:
        ratios = []
        for rep in range(5):
            order = [None, "cprofile"] if rep % 2 == 0 else ["cprofile", None]
            got = {m: bench.measure(ip, m)[0] for m in order}
            ratios.append(got["cprofile"] / got[None])
        return {"median": statistics.median(ratios), "ratios": [round(r, 3) for r in ratios]}

    within("a worker's batch, %%cprofile / plain", measure, lambda m: ["median"] if m["median"] > 1.5 else [])


# ----------------------------------------------------------------------------- frameworks' loaders


@pytest.mark.slow
def test_lightning_and_accelerates_loaders(ip, datasets):
    """Lightning's fit and Accelerate's prepared DataLoader iterate torch's DataLoader (Lightning's
    fetcher, Accelerate's DataLoaderShard): their workers are recorded the same way."""
    pytest.importorskip("lightning")
    pytest.importorskip("accelerate")
    code = textwrap.dedent("""
        import logging, warnings
        for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
            logging.getLogger(name).setLevel(logging.ERROR)
        warnings.filterwarnings("ignore")
        import torch
        import lightning.pytorch as pl
        from accelerate import Accelerator
        from torch.utils.data import DataLoader
        from nbprof_test_datasets import Tagged

        class Model(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(1, 1)
            def training_step(self, batch, batch_idx):
                return self.net(batch[:, :1].float()).sum()
            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.01)

        def trainer():
            return pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                              enable_model_summary=False, accelerator="cpu")
        accelerator = Accelerator(cpu=True)
        acc_loader = accelerator.prepare(DataLoader(Tagged(16), batch_size=4, num_workers=2,
                                                    multiprocessing_context="fork"))
    """)
    run(ip, code)
    fit_cell = ("trainer().fit(Model(), DataLoader(Tagged(16), batch_size=4, num_workers=2, "
                "multiprocessing_context='fork'))")
    for magic, body in (("cprofile", fit_cell), ("torchprof", fit_cell),
                        ("cprofile", "seen = [int(b[0, 1]) for b in acc_loader]")):
        result, _ = run(ip, f"%%{magic} -q -o p\n{body}")
        assert result.error_in_exec is None, result.error_in_exec
        p = ip.user_ns["p"]
        b = p.data_loading()
        assert len(b) == 4 and (b["status"] == "ok").all() and set(b["worker"]) == {0, 1}, (magic, body)
        ws = p.worker_stats()
        assert ws.loc[ws["function"] == "__getitem__", "ncalls"].sum() == 16
    assert list(b["pid"]) == ip.user_ns["seen"]
    ip.user_ns.pop("acc_loader")
    assert not _children_after(ip)
