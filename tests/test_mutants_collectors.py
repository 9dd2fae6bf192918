"""Contracts of the collectors and readers that seed 52's mutation sample (issue 38) found unpinned:
a saved line table's checks edge by edge, a zoom of a timeline with DataLoader lanes, a DataLoader
worker's recording as the main process finds it, a live trace's file name as the stale-file
cleanup reads it, a torch profiler whose session another one ended. Every expected value is
written out by hand (or read from what the test itself made), never taken from the code under test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from .conftest import needs_torch, run
from .synthetic import Trace
from .test_platforms import leftovers, windows_files  # noqa: F401  # the fixture, used by name

# ------------------------------------------------------------------------------ saved line tables

CELL = "<ipython-input-1-abc>"


def lines_doc(**change) -> tuple[dict, int, int]:
    """A trace saved with a line table (``nbprofLines``, as ``save()`` writes it): aten::mm (5 µs)
    on line 2 of "In [1]" (stack 1), aten::add (2 µs) from no line of the user's (stack 0, the
    empty stack), a 64-byte allocation from no line either. ``change``: line_data's keys replaced."""
    t = Trace()
    mm = t.op("aten::mm", 10.0, 5.0)
    add = t.op("aten::add", 30.0, 2.0)
    data = {"version": 1, "method": "tracer", "cells": {CELL: "In [1]"},
            "frames": {"file": [CELL], "line": [2], "function": ["<module>"], "function_line": [1]},
            "stacks": [[], [0]], "ops": {"external_id": [mm, add], "stack": [1, 0]},
            "allocs": {"stack": [0], "bytes": [64]}, "notes": []}
    data.update(change)
    doc = t.doc()
    doc["nbprofLines"] = {"line_data": data, "sources": {CELL: "x = 1\ny = x @ x\n"}}
    return doc, mm, add


def load_doc(tmp_path, doc):
    import nbprof

    path = tmp_path / "lines.json"
    path.write_text(json.dumps(doc))
    return nbprof.load_trace(path, progress=False)


def test_ops_and_allocations_on_the_empty_stack_keep_the_line_table(tmp_path):
    """Stack 0 is the empty stack (an op or allocation no line of the user's made): a valid index,
    whose time goes to the "outside your code" row; the last stack is valid too."""
    doc, _, _ = lines_doc()
    p = load_doc(tmp_path, doc)
    assert p.meta.line_data is not None and not [n for n in p.meta.notes if "nbprofLines" in n]
    lines = p.lines()
    assert lines["line"].tolist()[:1] == [2] and lines["source"].iloc[0] == "y = x @ x"
    assert lines["ops"].tolist() == [1, 1]  # mm on its line, add outside
    assert lines["self_cpu_us"].tolist() == [5.0, 2.0]
    assert lines["alloc_bytes"].tolist() == [0, 64]


@pytest.mark.parametrize("change, said", [
    ({"frames": {"file": [CELL], "line": [2, 3], "function": ["<module>"], "function_line": [1]}},
     "frames of unequal lengths"),
    ({"frames": {"file": [CELL], "line": [0], "function": ["<module>"], "function_line": [1]}},
     "a frame's file or line is not one"),  # lines count from 1
    ({"frames": {"file": [7], "line": [2], "function": ["<module>"], "function_line": [1]}},
     "a frame's file or line is not one"),
    ({"stacks": [[0]]}, "a stack names a frame that is not there"),  # stack 0 must be the empty one
    ({"stacks": []}, "a stack names a frame that is not there"),
    ({"stacks": [[], [1]]}, "a stack names a frame that is not there"),  # one frame: index 0 only
    ({"stacks": [[], [-1]]}, "a stack names a frame that is not there"),
    ({"ops": {"external_id": [1, 2], "stack": [1]}}, "ops of unequal lengths or not integers"),
    ({"ops": {"external_id": [1, 2], "stack": [1, 2]}}, "ops name a stack that is not there"),  # 2 stacks
    ({"ops": {"external_id": [1, 2], "stack": [1, -1]}}, "ops name a stack that is not there"),
    ({"allocs": {"stack": [2], "bytes": [64]}}, "allocs name a stack that is not there"),
    ({"allocs": {"stack": [-1], "bytes": [64]}}, "allocs name a stack that is not there"),
    ({"allocs": {"stack": [0], "bytes": [64.5]}}, "allocs of unequal lengths or not integers"),
    ({"cells": {CELL: 3}}, "cells are not a table of text"),
    ({"frames": "x"}, "not the shape nbprof writes"),
])
def test_a_line_table_that_points_nowhere_is_left_out_and_said(tmp_path, change, said):
    doc, _, _ = lines_doc(**change)
    p = load_doc(tmp_path, doc)
    assert p.meta.line_data is None
    assert f"nbprofLines: {said}: the line table is left out" in p.meta.notes, p.meta.notes


def test_sources_that_are_not_text_leave_the_line_table_out(tmp_path):
    doc, _, _ = lines_doc()
    doc["nbprofLines"]["sources"] = {CELL: 12}
    p = load_doc(tmp_path, doc)
    assert p.meta.line_data is None and "nbprofLines: sources are not text: the line table is left out" in p.meta.notes


# ------------------------------------------------------------------------------ DataLoader lanes

BASE_NS = 1_790_000_000_000_000_000  # the trace's baseTimeNanoseconds (time.time_ns() of ts 0)


def loading_profile(tmp_path):
    """A torch trace (aten::mm at 10 µs, aten::add at 30 µs) saved with a DataLoader record
    (``nbprofDataLoading``, as ``save()`` writes it): "train_loader" without workers, its pass
    started at 900 µs, batches 0 and 1 made in the main process at 1000 and 1200 µs (100 µs each),
    all on the trace's clock (baseTimeNanoseconds + µs)."""
    import nbprof

    t = Trace()
    t.op("aten::mm", 10.0, 5.0)
    t.op("aten::add", 30.0, 2.0)
    doc = t.doc()
    doc["baseTimeNanoseconds"] = BASE_NS

    def ns(us):
        return BASE_NS + us * 1000

    loader = {"number": 1, "name": "train_loader", "dataset": "TensorDataset", "iterable": False, "num_workers": 0,
              "batch_size": 4, "prefetch_factor": None, "persistent_workers": False, "pin_memory": False,
              "start_method": ""}
    doc["nbprofDataLoading"] = {
        "version": 1, "began_ns": ns(0), "ended_ns": ns(5000), "pid": 1, "call_cost_ns": 0.0, "loaders": [loader],
        "passes": [[1, 0, 1, "single", ns(900), ns(910)]],
        "waits": [[1, 0, 0, -1, ns(1000), ns(1100), "ok"], [1, 0, 1, -1, ns(1200), ns(1300), "ok"]],
        "unwatched": [], "workers": []}
    path = tmp_path / "loading.json"
    path.write_text(json.dumps(doc))
    return nbprof.load_trace(path, progress=False)


def test_a_zoom_without_the_loaders_batches_keeps_their_lane_and_its_row(tmp_path):
    """A window over the ops only (0-50 µs, the batches are at 1000-1300 µs): the DataLoader's lane
    is still there, with its row (one level), so the figure still names it; its rectangles are the
    window's (none). The whole timeline has the two batches on that lane."""
    from nbprof.analysis.timeline import timeline_rects

    p = loading_profile(tmp_path)
    assert p.data_loading()["wait_start_us"].tolist() == [1000.0 - 10.0, 1200.0 - 10.0]  # the first event is 0
    zoom = timeline_rects(p.events, p.meta, window=(0.0, 50.0))
    assert zoom.lanes["label"].tolist() == ["CPU thread 1000 (main)", "train_loader: main process"]
    data_lane = int(zoom.lanes["lane"].iloc[1])
    assert sorted(zip(zoom.rows["lane"], zoom.rows["level"])) == [(0, 0), (data_lane, 0)]
    assert int(zoom.lanes["first_row"].iloc[1]) in set(zoom.rows["row"])
    assert sorted(zoom.rects["name"]) == ["aten::add", "aten::mm"]
    fig = p.timeline(window_us=(0.0, 50.0))
    assert list(fig.layout.yaxis.ticktext) == ["CPU thread 1000 (main)", "train_loader: main process"]

    whole = timeline_rects(p.events, p.meta)
    assert whole.lanes["label"].tolist() == zoom.lanes["label"].tolist()
    assert sorted(zip(whole.rows["lane"], whole.rows["level"])) == [(0, 0), (data_lane, 0)]
    waits = whole.rects[whole.rects["lane"] == data_lane]
    assert sorted(waits["name"]) == ["making batch 0", "making batch 1"]
    assert sorted(zip(waits["x0_us"], waits["x1_us"])) == [(990.0, 1090.0), (1190.0, 1290.0)]


# ------------------------------------------------------------------------------ a DataLoader worker


class ExceptionWrapper:
    """Named as torch's: what a worker puts on its data queue when ``__getitem__`` raised."""


def _made_here(n):
    return sorted(range(n), reverse=True)


def test_a_workers_recording_is_where_the_main_process_looks_for_it(tmp_path):
    """This process plays worker 0 of iterator 2 of loader 1 (what runs in a DataLoader worker,
    called here): two batches (samples 3, 4, 5 then 6, the second raising), its functions written
    when told to stop. The main process's side finds the functions under the name it waits for
    (``_stats_file``: the flush at the run's end stops waiting) and reads back who made what."""
    from nbprof.collect.data_loading import DataLoaderWatch, _Iterator
    from nbprof.collect.data_worker import WorkerLoop, _Recorder

    class Process:  # the main process's handle on the worker: this process
        pid = os.getpid()

    watch = DataLoaderWatch()
    watch._folder = str(tmp_path)
    state = _Iterator(number=2, loader=1, epoch=0, single=False, iterator=watch)
    state.processes = [Process()]
    watch._all = [state]
    handler = signal.getsignal(signal.SIGTERM)
    try:
        recorder = _Recorder(WorkerLoop(str(tmp_path), 1, 2, 0), worker_id=0)
        assert watch._stats_file(state, 0, Process()) is None  # nothing written yet
        recorder.begin(0, [3, 4, 5])
        _made_here(10)
        recorder.end(0, "a batch")
        recorder.begin(1, [6])
        recorder.end(1, ExceptionWrapper())
        recorder.finish("stopped")
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert watch._stats_file(state, 0, Process()) is not None
    [w] = watch._read_workers()
    assert (w.loader, w.iterator, w.worker, w.pid, w.epoch, w.why, w.missing) == (1, 2, 0, os.getpid(), 0, "stopped", "")
    # status (1 ok, 2 error), epoch, idx, samples; the times are this test's clock
    assert w.batches[:, [0, 1, 2, 5]].tolist() == [[1, 0, 0, 3], [2, 0, 1, 1]]
    assert (w.batches[:, 3] <= w.batches[:, 4]).all() and w.batches[0, 4] <= w.batches[1, 3]
    made = [fn for (_, _, fn), v in w.stats.items() if v[1] == 1]
    assert "_made_here" in made


@needs_torch
def test_a_loaders_setup_is_read_from_the_loader():
    """What LoaderInfo says of real DataLoaders (nothing iterated: no worker starts)."""
    import torch
    from torch.utils.data import DataLoader, IterableDataset, TensorDataset

    from nbprof.collect.data_loading import _loader_info

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    plain = _loader_info(DataLoader(TensorDataset(torch.zeros(8)), batch_size=4), 3)
    assert (plain.number, plain.name, plain.dataset, plain.iterable, plain.num_workers, plain.batch_size,
            plain.prefetch_factor, plain.persistent_workers, plain.pin_memory, plain.start_method) == \
        (3, "DataLoader 3", "TensorDataset", False, 0, 4, None, False, False, "")
    workers = _loader_info(DataLoader(Stream(), batch_size=None, num_workers=2, prefetch_factor=3,
                                      persistent_workers=True, pin_memory=True, multiprocessing_context="spawn"), 1)
    assert (workers.dataset, workers.iterable, workers.num_workers, workers.batch_size, workers.prefetch_factor,
            workers.persistent_workers, workers.pin_memory, workers.start_method) == \
        ("Stream", True, 2, None, 3, True, True, "spawn")


# ------------------------------------------------------------------------------ live torch profiles


@needs_torch
def test_a_trace_left_by_a_process_that_is_gone_is_found_by_its_name(shell, windows_files, monkeypatch):
    """Windows keeps a live profile's trace file while the profile lives. The name this version gives
    that file, left by a process that is gone (the same name, another pid), is removed by the next
    profile; this process's own file stays until its profile goes. nbprof asks "is this Windows" and
    Windows' answer about a process: both simulated, the latter from the real process table."""
    import gc

    import psutil

    from nbprof import system

    monkeypatch.setattr(system, "on_windows", lambda: True)
    monkeypatch.setattr(system, "_windows_process_alive", psutil.pid_exists)
    run(shell, "import torch\nx = torch.randn(8, 8)")
    result, _ = run(shell, "%%torchprof -q -o p_left\ny = x @ x")
    assert result.error_in_exec is None, result.error_in_exec
    [mine] = leftovers(windows_files)
    assert mine.startswith(f"nbprof-{os.getpid()}-")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    theirs = mine.replace(f"nbprof-{os.getpid()}-", f"nbprof-{int(gone.stdout)}-", 1)
    (windows_files / theirs).write_bytes((windows_files / mine).read_bytes())
    result, _ = run(shell, "%%torchprof -q\ny = x @ x")
    assert result.error_in_exec is None, result.error_in_exec
    gc.collect()
    assert leftovers(windows_files) == [mine]
    shell.user_ns.pop("p_left")
    gc.collect()
    assert leftovers(windows_files) == []


@needs_torch
def test_a_profiler_whose_session_another_ended_says_so_before_it_stops():
    """torch.profiler.profile started, then another profiler run to its end inside it (torch runs
    one at a time: the inner one ended the outer's session). Read before the outer one stops, it
    holds nothing: one line saying what happened, in the words of the error tree."""
    import torch
    from torch.profiler import profile

    import nbprof

    outer = profile()
    outer.start()
    try:
        with profile():
            torch.ones(3).sum()
        assert outer.profiler.kineto_results is None and not torch.autograd._profiler_enabled()
        with pytest.raises(nbprof.TraceError) as caught:
            nbprof.from_profiler(outer)
        message = str(caught.value)
        assert message.startswith("this torch profiler's session was ended by another profiler before it stopped")
        assert "torch kept nothing of it" in message and "\n" not in message
    finally:
        try:
            outer.stop()
        except RuntimeError:
            pass  # torch 2.4: "Can't disable Kineto profiler when it's not running"
        del outer  # its results (a lost session) are never saved: saving them crashes torch 2.13
