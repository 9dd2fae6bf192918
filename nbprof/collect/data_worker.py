"""Inside a DataLoader worker process: record every batch it makes and its Python functions.

This module runs in the workers (``collect/data_loading.py`` is the main process's side). It
imports only the standard library: with spawn and forkserver each worker imports it afresh, and
pandas or nbprof's analyses would cost every worker a second or more.

**The hook, and why this one.** torch starts each worker as ``Process(target=_utils.worker.
_worker_loop, args=(dataset_kind, dataset, index_queue, data_queue, done_event, ..., worker_id,
...))``, reading the module attribute when the iterator is created (the same code from torch 2.4
to 2.13). While a profiled cell creates an iterator, the main process puts a
:class:`WorkerLoop` there: a picklable object (its state is a folder name and three numbers), so
the target survives spawn and forkserver, which pickle it by value, and fork, which copies it.
In the worker it calls torch's own ``_worker_loop`` with two of its arguments wrapped:

- the index queue's ``get`` (:class:`_IndexQueue`): a task ``(idx, index)`` starts a batch, a
  ``_ResumeIteration`` starts the next epoch of a persistent worker, :class:`StopRecording`
  (sent by the main process when the cell ends) ends the recording;
- the data queue's ``put`` (:class:`_DataQueue`): ``(idx, data)`` ends it, ``data`` saying how
  (a batch, an ``ExceptionWrapper``: ``__getitem__`` raised, ``_IterableDatasetStopIteration``:
  an iterable dataset ran out).

cProfile is enabled between the two, so the functions are exactly those that made batches
(``fetch``, ``__getitem__``, each transform, ``collate_fn``), not the worker's waits for work.
Nothing of torch is patched in the worker, and the user's dataset, sampler and worker_init_fn
run as they would. The alternatives weighed: a ``worker_init_fn`` runs before the loop but sees
neither the batches nor the worker's end; wrapping the dataset or the collate_fn changes objects
the user holds (and ``__getitems__``, ``isinstance`` checks, pickling of user classes);
patching ``_DatasetKind.create_fetcher`` gives the fetch but not the batch's index.

**How records come back**: files in a folder the profiled cell owns (and removes). Each batch
is one fixed-size record appended to the worker's ``.batches`` file as it ends (one ``write``,
a few µs), so a worker killed mid-epoch loses nothing it finished. The functions are cProfile's
stats, written (marshal, then an atomic rename) when the worker's loop ends, when it is
terminated (SIGTERM), and when the main process sends :class:`StopRecording` to a worker still
alive at the end of the cell (persistent workers, an iterator still held). A file per worker
needs nothing that must be set up before the workers start, and works the same for every start
method; a queue would need the main process to drain it while the cell runs.

Times are ``time.time_ns()``: the clock torch's profiler stamps its events with (see
docs/lines.md), the same in every process of the machine.
"""

from __future__ import annotations

import cProfile
import inspect
import marshal
import os
import signal
import struct
import sys
import time
from typing import Any

from ..system import replace_file  # stdlib only, as this module

__all__ = ["WorkerLoop", "StopRecording", "RECORD", "STATUS", "HEADER", "batches_path", "stats_path", "samples_in_batch"]

# One record: (kind, a, b, c, d, e), little-endian int64s. The first record of a file is its
# header: (HEADER, loader, epoch the worker started in, started_ns, worker_id, pid); each batch:
# (status, epoch, idx, start_ns, end_ns, samples).
RECORD = struct.Struct("<6q")
HEADER = 0
STATUS = {1: "ok", 2: "error", 3: "end"}  # end: an iterable dataset's worker ran out of data
_OK, _ERROR, _END = 1, 2, 3


def batches_path(folder: str, loader: int, iterator: int, worker_id: int, pid: int) -> str:
    return os.path.join(folder, f"w{loader}-{iterator}-{worker_id}-{pid}.batches")


def stats_path(batches: str) -> str:
    return batches[: -len(".batches")] + ".prof"


class StopRecording:
    """Put on a worker's index queue by the main process when the profiled cell ends: the worker
    writes its functions and records nothing more (it goes on making batches for the loop)."""


_original_loop: Any = None  # torch's _worker_loop, kept by the main process while it is replaced (fork copies it)


def samples_in_batch(data: Any, collate: Any) -> int | None:
    """How many samples a batch holds, counted in the batch where torch's ``default_collate`` made
    it: that stacks each field of the samples along a new first dimension (a dict's values, a list's
    or tuple's items, a namedtuple's fields alike) and keeps strings and bytes as a list of them,
    so the first tensor's first dimension, or such a list's length, is the count. None for any
    other ``collate_fn`` (a batch of any shape: the indices asked for are all that is known). An
    iterable dataset's batches need it: their indices are ``[None] * batch_size`` whatever the
    dataset had left, so the last batch may hold fewer; so do the main process's batches (their
    indices are never seen)."""
    module = sys.modules.get("torch.utils.data._utils.collate")  # loaded: the loader runs torch's code
    if module is None or collate is not getattr(module, "default_collate", None):
        return None
    while True:
        shape = getattr(data, "shape", None)
        if shape is not None:
            return int(shape[0]) if len(shape) else None
        # dict, list and tuple (namedtuples too), never the abstract Mapping and Sequence: their
        # isinstance runs Python code (ABCMeta.__instancecheck__), which the main process's
        # cProfile would count among the user's calls
        if isinstance(data, dict):
            data = next(iter(data.values()), None)
        elif isinstance(data, (list, tuple)) and len(data):
            if isinstance(data[0], (str, bytes)):
                return len(data)
            data = data[0]
        else:
            return None


def torch_worker_loop() -> Any:
    """torch's own ``_worker_loop``: the module's attribute, unless that is a :class:`WorkerLoop`
    (a forked worker: the main process had replaced it while creating the iterator)."""
    from torch.utils.data._utils import worker

    loop = worker._worker_loop
    return _original_loop if isinstance(loop, WorkerLoop) else loop


class WorkerLoop:
    """The target of a DataLoader worker process started in a profiled cell (see the module doc)."""

    def __init__(self, folder: str, loader: int, iterator: int, epoch: int) -> None:
        self.folder = folder
        self.loader = loader  # the DataLoader's number in the cell
        self.iterator = iterator  # the iterator's number in the cell
        self.epoch = epoch  # the loader's pass over its data when the iterator was created

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        loop = torch_worker_loop()
        bound = inspect.signature(loop).bind(*args, **kwargs)
        recorder = _Recorder(self, int(bound.arguments["worker_id"]))
        if bound.arguments.get("auto_collation"):  # else each batch is one sample, as its index says
            recorder.collate = bound.arguments.get("collate_fn")
        bound.arguments["index_queue"] = _IndexQueue(bound.arguments["index_queue"], recorder)
        bound.arguments["data_queue"] = _DataQueue(bound.arguments["data_queue"], recorder)
        try:
            loop(*bound.args, **bound.kwargs)
        finally:
            recorder.finish("exit")


class _Recorder:
    """One worker's recording: the open batch, the batch file, cProfile."""

    def __init__(self, target: WorkerLoop, worker_id: int) -> None:
        self.pid = os.getpid()
        self.worker_id = worker_id
        self.epoch = target.epoch
        self.path = batches_path(target.folder, target.loader, target.iterator, worker_id, self.pid)
        self.profile = cProfile.Profile()
        self.open_idx: int | None = None
        self.open_start = 0
        self.open_samples = 0
        self.batches = 0
        self.collate: Any = None  # the loader's collate_fn, when it makes batches of several samples
        self.recording = True
        # SIGTERM's Python handler before torch's loop: a forked worker's is its parent's (Lightning's
        # Trainer sets one), which torch's C handler replaces, though signal.getsignal still names it
        self.inherited_sigterm = signal.getsignal(signal.SIGTERM)
        self.fd = -1
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.write(self.fd, RECORD.pack(HEADER, target.loader, target.epoch, time.time_ns(), worker_id, self.pid))
        except OSError:  # the cell's folder is gone (the cell ended before this worker started)
            self.recording = False
        if self.recording:
            _release_inherited_profiler()

    def _on_sigterm(self) -> None:
        """The main process terminates a worker that does not exit when told to (a batch still
        running at shutdown): write the functions first, then die of SIGTERM.

        Called on the loop's first ``get`` of a task, not before the loop: torch's ``_worker_loop``
        first installs its own C handler for SIGTERM (``_set_worker_signal_handlers``), which
        replaces any handler set before and, for its parent's SIGTERM, exits at once (``_exit``): the
        functions were never written. Python's ``signal.getsignal`` does not see that C handler,
        so the check below still sees only what Python code set: a handler set in the worker (the
        user's ``worker_init_fn`` runs before the first ``get``) is left alone; one it inherited (a
        fork of a process with a handler) is as dead as the default one. After the functions, the
        worker dies of SIGTERM (torch's handler would have exited with 0 for its parent's): torch
        stops watching its workers' pids before it terminates them, and nothing reads their exit
        status after that."""
        if not self.recording or sys.platform == "win32":  # Windows terminates a process without a signal
            return
        current = signal.getsignal(signal.SIGTERM)
        if current is not signal.SIG_DFL and current is not self.inherited_sigterm:
            return  # the user's worker_init_fn set its own: leave it

        def terminated(signum: int, frame: Any) -> None:
            self.finish("terminated")
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)

        signal.signal(signal.SIGTERM, terminated)

    def begin(self, idx: int, index: Any) -> None:
        if self.open_idx is not None:  # a task the loop skipped (shutting down): no batch came of it
            self.profile.disable()
        self.open_idx = idx
        self.open_samples = len(index) if isinstance(index, (list, tuple)) else 1
        self.open_start = time.time_ns()
        self.profile.enable()

    def end(self, idx: Any, data: Any) -> None:
        self.profile.disable()
        end = time.time_ns()
        if self.open_idx is None or idx != self.open_idx:
            return
        self.open_idx = None
        name = type(data).__name__
        status = _ERROR if name == "ExceptionWrapper" else _END if name == "_IterableDatasetStopIteration" else _OK
        samples = self.open_samples
        if status == _OK and self.collate is not None:
            counted = samples_in_batch(data, self.collate)
            samples = samples if counted is None else counted
        try:
            os.write(self.fd, RECORD.pack(status, self.epoch, idx, self.open_start, end, samples))
            self.batches += 1
        except OSError:
            self.recording = False

    def finish(self, why: str) -> None:
        """Write the functions (once the recording stops: the loop's end, a stop, SIGTERM)."""
        if not self.recording:
            return
        self.recording = False
        self.profile.disable()
        try:
            self.profile.create_stats()
            payload = {"stats": getattr(self.profile, "stats"), "batches": self.batches, "why": why,
                       "worker": self.worker_id, "pid": self.pid}
            tmp = self.path + ".tmp"
            with open(tmp, "wb") as f:
                marshal.dump(payload, f)
            replace_file(tmp, stats_path(self.path))
        except (OSError, ValueError):  # the folder is gone: the cell's report was already made
            pass
        finally:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


def _release_inherited_profiler() -> None:
    """A forked worker starts with its parent's profile hook (the run's cProfile under ``%%cprofile``):
    before Python 3.12 it would record the worker's own start until this worker's profile takes
    the hook; from 3.12 (``sys.monitoring``) the worker's profile could not start at all ("Another
    profiling tool is already active"). It is the parent's, and nothing in the worker reads it.
    So is nbprof's ``--lines`` tracer, which would only slow the worker's batches down."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        for tool in range(6):  # the tools a program may use (0-5)
            name = monitoring.get_tool(tool)
            if (tool == monitoring.PROFILER_ID and name is not None) or name == "nbprof":
                monitoring.set_events(tool, 0)
                monitoring.free_tool_id(tool)
    else:
        if sys.getprofile() is not None:
            sys.setprofile(None)
        tracer = sys.gettrace()
        if tracer is not None and "nbprof" in (getattr(tracer, "__module__", "") or ""):
            sys.settrace(None)


class _IndexQueue:
    """The worker's index queue, as torch's loop reads it (``get``), seen by the recorder."""

    def __init__(self, queue: Any, recorder: _Recorder) -> None:
        self._queue = queue
        self._recorder = recorder
        self._first = True

    def get(self, *args: Any, **kwargs: Any) -> Any:
        if self._first:  # the loop's signal handlers are set by now: see _Recorder._on_sigterm
            self._first = False
            self._recorder._on_sigterm()
        while True:
            r = self._queue.get(*args, **kwargs)
            recorder = self._recorder
            if isinstance(r, StopRecording):
                recorder.finish("stopped")
                continue
            if recorder.recording:
                if type(r) is tuple and len(r) == 2:
                    recorder.begin(r[0], r[1])
                elif type(r).__name__ == "_ResumeIteration":
                    recorder.epoch += 1
            return r

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


class _DataQueue:
    """The worker's data queue, as torch's loop writes it (``put``), seen by the recorder."""

    def __init__(self, queue: Any, recorder: _Recorder) -> None:
        self._queue = queue
        self._recorder = recorder

    def put(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = self._recorder
        if recorder.recording and recorder.open_idx is not None and type(obj) is tuple and len(obj) == 2:
            recorder.end(obj[0], obj[1])
        return self._queue.put(obj, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)
