"""The DataLoaders a profiled run iterates: each batch, who made it, how long the loop waited.

torch.profiler and cProfile record the main process only, and with ``num_workers > 0`` the
input pipeline (``__getitem__``, the transforms, ``collate_fn``) runs in worker processes
(pytorch/pytorch#6313). While a run is active (``%%torchprof``, ``%%cprofile``, ``nbprof torch``
/ ``cprofile``), :class:`DataLoaderWatch` wraps five methods of torch's two iterator classes,
put back when the run stops (whatever the code did):

- ``_MultiProcessingDataLoaderIter.__init__``: while it starts the workers, their target is a
  :class:`~nbprof.collect.data_worker.WorkerLoop` (that module's docstring says why this hook),
  which records in each worker and writes to a folder this run owns;
- ``_MultiProcessingDataLoaderIter._reset``: a persistent iterator's next epoch;
- ``_next_data`` of both iterator classes: when the loop asked for a batch, which one it got
  (``_rcvd_idx``), and for how long it waited (with ``num_workers=0`` the batch is made right
  there, in the main process: that time is its making and its wait);
- ``_SingleProcessDataLoaderIter.__init__``: a new pass of a loader without workers.

Iterators created before the run are left alone (their workers were not started by it). The
wrappers are nbprof's frames: cProfile's stats splice them out (``cprofile.without_own_frames``),
and an exception that passes through one (``__getitem__`` raising, in a worker or in the main
process) leaves without it: the wrapper drops its own entry from the traceback before re-raising
(a bare ``raise`` adds none again from Python 3.11), and the run drops any left at its end
(:func:`without_wrapper_frames`: Python 3.10), so the traceback is the one the cell gives without
the magic, line for line (IPython's "[... skipping hidden 1 frame]" included). Nothing is imported: when the code imports torch's DataLoader only
during the run (a script under ``nbprof cprofile``), an import hook wraps it as it is loaded.

At the end (:meth:`DataLoaderWatch.collect`), the workers still alive (persistent workers, an
iterator still held, one busy when the loop timed out) are sent ``StopRecording`` and given
``FLUSH_WAIT_S`` to write their functions; then the files are read, the folder removed, and each
worker whose functions never came is named, with why (its exit status, or still busy). The
:class:`DataLoadingRecord` is raw: ``time.time_ns()`` stamps; ``analysis.data_loading`` turns it
into tables.
"""

from __future__ import annotations

import glob
import importlib.abc
import importlib.machinery
import marshal
import os
import shutil
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from . import data_worker
from .cprofile import without_own_frames
from .data_worker import RECORD, STATUS, StopRecording, WorkerLoop, stats_path

__all__ = ["DataLoaderWatch", "DataLoadingRecord", "WorkerRecord", "LoaderInfo", "FLUSH_WAIT_S",
           "without_wrapper_frames", "record_to_json", "record_from_json"]

# how long the end of a run waits for a live worker's functions (it first finishes the batches
# already asked of it)
FLUSH_WAIT_S = 2.0
_DATALOADER_MODULE = "torch.utils.data.dataloader"
_WRAPPER_CODES: set[Any] = set()  # the code objects of the wrappers below (their tracebacks' entries)


def _reraise_without(e: BaseException, code: Any) -> None:
    """Before a bare ``raise`` in a wrapper: its own entry out of the traceback (the head)."""
    tb = e.__traceback__
    if tb is not None and tb.tb_frame.f_code is code:
        e.__traceback__ = tb.tb_next


def without_wrapper_frames(error: BaseException | None) -> None:
    """Take the DataLoader wrappers' entries out of ``error``'s traceback, and out of the exceptions
    chained to it (``__cause__``, ``__context__``), in place: where a wrapper could not drop its own
    (Python 3.10 adds a re-raising frame again)."""
    if not _WRAPPER_CODES:
        return
    todo, seen = [error], set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code in _WRAPPER_CODES:
            tb = tb.tb_next
        if tb is not e.__traceback__:
            e.__traceback__ = tb
        while tb is not None and tb.tb_next is not None:
            if tb.tb_next.tb_frame.f_code in _WRAPPER_CODES:
                tb.tb_next = tb.tb_next.tb_next
            else:
                tb = tb.tb_next
        todo += [e.__cause__, e.__context__]


@dataclass
class LoaderInfo:
    """One DataLoader the run iterated, as it was set up."""

    number: int  # in order of first use in the run
    name: str  # the user's name for it ("train_loader"), else "DataLoader 1"
    dataset: str  # the dataset's class name
    iterable: bool  # an IterableDataset
    num_workers: int
    batch_size: int | None
    prefetch_factor: int | None
    persistent_workers: bool
    pin_memory: bool
    start_method: str  # "fork", "spawn", "forkserver"; "" without workers


@dataclass
class WorkerRecord:
    """One worker process: who it was, what it made, its functions (or why they are missing)."""

    loader: int
    iterator: int
    worker: int  # torch's worker_id
    pid: int
    started_ns: int  # when its loop began (after the process started and imported what it needs)
    epoch: int  # the loader's pass when it started
    batches: Any  # int64 array (n, 6): status, epoch, idx, start_ns, end_ns, samples
    stats: dict[Any, Any] | None  # cProfile's raw stats of the batches it made; None: missing
    why: str  # how its functions came: "exit", "stopped", "terminated"; "" when missing
    missing: str = ""  # why its functions are missing (a sentence), "" when they came


@dataclass
class DataLoadingRecord:
    """What the watch recorded in one run (all times ``time.time_ns()``)."""

    began_ns: int
    ended_ns: int
    loaders: list[LoaderInfo] = field(default_factory=list)
    # each pass over a loader: (loader, epoch, iterator, kind, start_ns, end_ns), kind "start"
    # (workers started), "resume" (persistent workers resumed), "single" (no workers)
    passes: list[tuple[int, int, int, str, int, int]] = field(default_factory=list)
    # each ``_next_data`` call: (loader, epoch, batch idx, worker expected, start_ns, end_ns, outcome),
    # outcome "ok", "stop" (the epoch's end), or the exception's type and first line
    waits: list[tuple[int, int, int, int, int, int, str]] = field(default_factory=list)
    # each batch made in the main process (no workers) whose samples were counted in it
    # (``data_worker.samples_in_batch``): (loader, epoch, batch idx, samples); the others count the
    # loader's batch size
    main_samples: list[tuple[int, int, int, int]] = field(default_factory=list)
    workers: list[WorkerRecord] = field(default_factory=list)
    # the loaders the run iterated whose workers it did not start (persistent workers started
    # before it): by name, what they made is not recorded
    unwatched: list[str] = field(default_factory=list)
    pid: int = field(default_factory=os.getpid)  # the main process
    call_cost_ns: float = 0.0  # cProfile's cost per Python call on this machine (0: not measured)

    @property
    def empty(self) -> bool:
        return not self.loaders and not self.unwatched


class _Iterator:
    """The watch's state for one iterator the run created."""

    __slots__ = ("number", "loader", "epoch", "processes", "index_queues", "single", "yielded", "iterator")

    def __init__(self, number: int, loader: int, epoch: int, single: bool, iterator: Any) -> None:
        self.iterator = weakref.ref(iterator)  # which object the id stands for (ids are reused)
        self.number = number
        self.loader = loader
        self.epoch = epoch
        self.single = single
        self.processes: list[Any] = []
        self.index_queues: list[Any] = []
        self.yielded = 0


class DataLoaderWatch:
    """Watches the DataLoaders a run iterates (see the module doc): ``install()`` before the
    profiler starts, ``remove()`` after it stops, then ``collect()``."""

    def __init__(self, shell: Any = None) -> None:
        self.shell = shell
        self.began_ns = 0
        self._saved: list[tuple[type, str, Any]] = []
        self._finder: _ImportHook | None = None
        self._folder: str | None = None
        # While the code runs, the wrappers call no Python function but the one they wrap: what
        # they do is among the profiled code's calls otherwise (cProfile's stats can take out
        # nbprof's frames and what they call, not a property read inside a builtin getattr): the
        # watch's state is in plain dicts, the loaders are described at the end.
        self._iterators: dict[int, _Iterator] = {}  # id(iterator) -> its state
        self._all: list[_Iterator] = []
        self._loaders: dict[int, int] = {}  # id(loader) -> its number
        self._loader_refs: dict[int, Any] = {}  # number -> the loader (kept for the run: ids stay unique)
        self._passes: dict[int, int] = {}  # loader number -> passes so far
        self._unwatched: list[Any] = []  # loaders whose persistent workers the run did not start
        self.record = DataLoadingRecord(0, 0)

    # -- install / remove ----------------------------------------------------------------------

    def install(self) -> None:
        """Wrap torch's iterators if torch's DataLoader is imported, else wrap them when it is."""
        self.began_ns = time.time_ns()
        if _DATALOADER_MODULE in sys.modules:
            self._wrap(sys.modules[_DATALOADER_MODULE])
        else:
            self._finder = _ImportHook(_DATALOADER_MODULE, self._wrap)
            sys.meta_path.insert(0, self._finder)

    def remove(self) -> None:
        """Put back what ``install`` wrapped (safe to call twice)."""
        if self._finder is not None:
            try:
                sys.meta_path.remove(self._finder)
            except ValueError:
                pass
            self._finder = None
        while self._saved:
            cls, name, original = self._saved.pop()
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)

    def _wrap(self, module: Any) -> None:
        multi = getattr(module, "_MultiProcessingDataLoaderIter", None)
        single = getattr(module, "_SingleProcessDataLoaderIter", None)
        if multi is None or single is None or "_nbprof_watch" in multi.__dict__:
            return  # another torch layout, or a watch already there (not ours to stack on)
        wrappers = {
            (multi, "__init__"): self._multi_init,
            (multi, "_reset"): self._multi_reset,
            (multi, "_next_data"): self._multi_next,
            (single, "__init__"): self._single_init,
            (single, "_next_data"): self._single_next,
        }
        from .cprofile import note_wrapped

        for (cls, name), make in wrappers.items():
            original = getattr(cls, name)
            note_wrapped(original)  # its calls through the wrapper are the profiled code's
            self._saved.append((cls, name, cls.__dict__.get(name)))
            wrapper = make(original)
            _WRAPPER_CODES.add(wrapper.__code__)
            setattr(cls, name, wrapper)
        self._saved.append((multi, "_nbprof_watch", None))
        multi._nbprof_watch = True

    # -- the wrappers --------------------------------------------------------------------------

    def _loader(self, loader: Any) -> int:
        key = id(loader)
        number = self._loaders.get(key)
        if number is None:
            number = self._loaders[key] = len(self._loaders) + 1
            self._loader_refs[number] = loader
        return number

    def _state(self, it: Any) -> _Iterator | None:
        state = self._iterators.get(id(it))
        return state if state is not None and state.iterator() is it else None

    def _next_pass(self, loader: int) -> int:
        epoch = self._passes.get(loader, 0)
        self._passes[loader] = epoch + 1
        return epoch

    def _multi_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def __init__(it: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
            __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
            from torch.utils.data._utils import worker

            number = watch._loader(loader)
            state = _Iterator(len(watch._all) + 1, number, watch._passes.get(number, 0), single=False, iterator=it)
            watch._all.append(state)
            watch._iterators[id(it)] = state
            saved = worker._worker_loop
            data_worker._original_loop = saved
            worker._worker_loop = WorkerLoop(watch._ensure_folder(), number, state.number, state.epoch)
            start = time.time_ns()
            try:
                original(it, loader, *args, **kwargs)  # starts the workers, then _reset(first_iter=True)
            except BaseException as e:
                _reraise_without(e, __init__.__code__)
                raise
            finally:
                worker._worker_loop = saved
                state.processes = list(getattr(it, "_workers", ()))
                state.index_queues = list(getattr(it, "_index_queues", ()))
            watch.record.passes.append((number, state.epoch, state.number, "start", start, time.time_ns()))

        return __init__

    def _multi_reset(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def _reset(it: Any, loader: Any, first_iter: bool = False) -> None:
            __tracebackhide__ = True  # noqa: F841
            state = watch._state(it)
            if state is None:
                if not first_iter:  # persistent workers started before the run: not recorded
                    watch._unwatched.append(loader)
                return original(it, loader, first_iter)
            if first_iter:
                watch._next_pass(state.loader)  # the pass __init__ numbered
                return original(it, loader, first_iter)
            state.epoch = watch._next_pass(state.loader)
            start = time.time_ns()
            try:
                original(it, loader, first_iter)  # the workers acknowledge the new epoch
            except BaseException as e:
                _reraise_without(e, _reset.__code__)
                raise
            watch.record.passes.append((state.loader, state.epoch, state.number, "resume", start, time.time_ns()))

        return _reset

    def _multi_next(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def _next_data(it: Any) -> Any:
            __tracebackhide__ = True  # noqa: F841
            state = watch._state(it)
            if state is None:
                return original(it)
            in_order = getattr(it, "_in_order", True)  # torch 2.6+: in_order=False returns batches as they come
            expected = it._rcvd_idx
            info = it._task_info.get(expected)
            worker = int(info[0]) if info else -1
            before = None if in_order else set(it._task_info)
            start = time.time_ns()
            try:
                data = original(it)
            except StopIteration as e:
                watch.record.waits.append((state.loader, state.epoch, -1, -1, start, time.time_ns(), "stop"))
                _reraise_without(e, _next_data.__code__)
                raise
            except BaseException as e:
                # a worker's exception is raised once the batch counts as received; a timeout or a
                # dead worker before: the batch it waited for
                failed = it._rcvd_idx - 1 if in_order and it._rcvd_idx > expected else expected
                watch.record.waits.append((state.loader, state.epoch, failed, worker, start, time.time_ns(),
                                           _outcome(e)))
                _reraise_without(e, _next_data.__code__)
                raise
            end = time.time_ns()
            if in_order:
                idx = it._rcvd_idx - 1
            else:
                gone = before - set(it._task_info) if before is not None else set()
                idx = max(gone) if gone else expected
            if idx != expected:
                worker = -1  # not the batch it first waited for (an iterable worker ran out): from the worker's record
            watch.record.waits.append((state.loader, state.epoch, idx, worker, start, end, "ok"))
            return data

        return _next_data

    def _single_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def __init__(it: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
            __tracebackhide__ = True  # noqa: F841
            try:
                original(it, loader, *args, **kwargs)
            except BaseException as e:
                _reraise_without(e, __init__.__code__)
                raise
            number = watch._loader(loader)
            state = _Iterator(len(watch._all) + 1, number, watch._next_pass(number), single=True, iterator=it)
            watch._all.append(state)
            watch._iterators[id(it)] = state
            now = time.time_ns()
            watch.record.passes.append((number, state.epoch, state.number, "single", now, now))

        return __init__

    def _single_next(self, original: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        def _next_data(it: Any) -> Any:
            __tracebackhide__ = True  # noqa: F841
            state = watch._state(it)
            if state is None:
                return original(it)
            idx = state.yielded
            start = time.time_ns()
            try:
                data = original(it)
            except StopIteration as e:
                watch.record.waits.append((state.loader, state.epoch, -1, -1, start, time.time_ns(), "stop"))
                _reraise_without(e, _next_data.__code__)
                raise
            except BaseException as e:
                watch.record.waits.append((state.loader, state.epoch, idx, -1, start, time.time_ns(), _outcome(e)))
                _reraise_without(e, _next_data.__code__)
                raise
            end = time.time_ns()
            state.yielded = idx + 1
            watch.record.waits.append((state.loader, state.epoch, idx, -1, start, end, "ok"))
            if getattr(it, "_auto_collation", False):
                counted = data_worker.samples_in_batch(data, getattr(it, "_collate_fn", None))
                if counted is not None:
                    watch.record.main_samples.append((state.loader, state.epoch, idx, counted))
            return data

        return _next_data

    def _ensure_folder(self) -> str:
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix=f"nbprof-data-{os.getpid()}-")
        return self._folder

    # -- the end -------------------------------------------------------------------------------

    def collect(self) -> DataLoadingRecord:
        """Stop the workers' recording, read what they wrote, remove the folder. Call once, after
        ``remove()``; never raises for a worker's sake (a missing record is a note)."""
        record = self.record
        record.began_ns = self.began_ns
        record.ended_ns = time.time_ns()
        record.loaders = [_loader_info(self._loader_refs[n], n) for n in sorted(self._loader_refs)]
        if self.shell is not None:
            _name_loaders(record.loaders, self._loader_refs, self.shell)
        for loader in self._unwatched:
            info = _loader_info(loader, 0)
            if self.shell is not None:
                _name_loaders([info], {0: loader}, self.shell)
            if info.name not in record.unwatched:
                record.unwatched.append(info.name if info.number or info.name != "DataLoader 0" else "a DataLoader")
        self._unwatched.clear()
        self._loader_refs.clear()
        if self._folder is None:
            return record
        try:
            self._stop_live_workers()
            record.workers = self._read_workers()
            if any(w.stats for w in record.workers):
                record.call_cost_ns = cprofile_call_cost_ns()
        finally:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        return record

    def _stop_live_workers(self) -> None:
        """Ask every worker still alive to write its functions; wait up to ``FLUSH_WAIT_S``."""
        waiting = []
        for state in self._all:
            for worker_id, (process, queue) in enumerate(zip(state.processes, state.index_queues)):
                if _alive(process):
                    try:
                        queue.put(StopRecording())
                    except Exception:  # a queue torch already closed: its worker is on its way out
                        continue
                    waiting.append((state, worker_id, process))
        deadline = time.monotonic() + FLUSH_WAIT_S
        while waiting and time.monotonic() < deadline:
            waiting = [w for w in waiting if _alive(w[2]) and not self._stats_file(w[0], w[1], w[2]) ]
            if waiting:
                time.sleep(0.005)

    def _stats_file(self, state: _Iterator, worker_id: int, process: Any) -> str | None:
        assert self._folder is not None
        path = stats_path(data_worker.batches_path(self._folder, state.loader, state.number, worker_id,
                                                   int(process.pid or 0)))
        return path if os.path.exists(path) else None

    def _read_workers(self) -> list[WorkerRecord]:
        import numpy as np

        assert self._folder is not None
        processes = {int(p.pid): p for s in self._all for p in s.processes if p.pid}
        out = []
        for path in sorted(glob.glob(os.path.join(self._folder, "*.batches"))):
            with open(path, "rb") as f:
                raw = f.read()
            whole = len(raw) // RECORD.size * RECORD.size  # a record cut short by a kill is left out
            rows = np.frombuffer(raw[:whole], dtype="<i8").reshape(-1, 6) if whole else np.zeros((0, 6), np.int64)
            if len(rows) == 0 or rows[0, 0] != 0:
                continue
            _, loader, epoch, started_ns, worker_id, pid = (int(v) for v in rows[0])
            iterator = int(os.path.basename(path).split("-")[1])
            stats, why, missing = None, "", ""
            try:
                with open(stats_path(path), "rb") as f:
                    payload = marshal.load(f)
                # nbprof's frames out now, while this install (its folder, its wrappers) is the one
                # that ran: a saved trace loaded by nbprof elsewhere would not know them as its own
                stats, why = without_own_frames(payload["stats"]), str(payload["why"])
            except (OSError, EOFError, ValueError, TypeError, KeyError):
                missing = _missing_reason(processes.get(pid))
            out.append(WorkerRecord(loader=loader, iterator=iterator, worker=worker_id, pid=pid, started_ns=started_ns,
                                    epoch=epoch, batches=np.array(rows[1:], dtype=np.int64), stats=stats, why=why,
                                    missing=missing))
        return out


_call_cost_ns: float | None = None


def cprofile_call_cost_ns() -> float:
    """What cProfile adds to one Python call here (ns), measured once per process: the same
    10 000 calls with and without a profile, best of three. 0 when another profiler holds the hook
    (enabling one would take its place) or the difference drowns in noise."""
    global _call_cost_ns
    if _call_cost_ns is not None:
        return _call_cost_ns
    import cProfile

    monitoring = getattr(sys, "monitoring", None)
    if sys.getprofile() is not None or (monitoring is not None and monitoring.get_tool(monitoring.PROFILER_ID)):
        return 0.0
    n = 10_000

    def leaf() -> None:
        pass

    def calls() -> None:
        for _ in range(n):
            leaf()

    plain, profiled = [], []
    for _ in range(3):
        t = time.perf_counter_ns()
        calls()
        plain.append(time.perf_counter_ns() - t)
        profile = cProfile.Profile()
        t = time.perf_counter_ns()
        profile.enable()
        calls()
        profile.disable()
        profiled.append(time.perf_counter_ns() - t)
    _call_cost_ns = max((min(profiled) - min(plain)) / n, 0.0)
    return _call_cost_ns


def _alive(process: Any) -> bool:
    try:
        return bool(process.is_alive())
    except Exception:  # a process object of another process (not ours to ask) or already closed
        return False


def _missing_reason(process: Any) -> str:
    """Why a worker's functions never came, in a few words."""
    if process is None:
        return "its process ended without writing them"
    try:
        code = process.exitcode
    except Exception:
        code = None
    if code is None:
        return (f"it was still busy when the run ended and did not stop within {FLUSH_WAIT_S:g} s "
                "(a batch still being made, e.g. after the DataLoader timed out)")
    from ..system import describe_exit

    return f"its process {describe_exit(code)} before writing them"


def _outcome(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def _loader_info(loader: Any, number: int) -> LoaderInfo:
    workers = int(getattr(loader, "num_workers", 0) or 0)
    context = getattr(loader, "multiprocessing_context", None)
    method = ""
    if workers:
        if context is None:
            import multiprocessing

            method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_start_method()
        else:
            method = str(context.get_start_method())
    dataset = getattr(loader, "dataset", None)
    kind = getattr(loader, "_dataset_kind", 0)
    return LoaderInfo(number=number, name=f"DataLoader {number}", dataset=type(dataset).__name__,
                      iterable=bool(kind == 1), num_workers=workers,
                      batch_size=getattr(loader, "batch_size", None),
                      prefetch_factor=getattr(loader, "prefetch_factor", None) if workers else None,
                      persistent_workers=bool(getattr(loader, "persistent_workers", False)),
                      pin_memory=bool(getattr(loader, "pin_memory", False)), start_method=method)


def _name_loaders(loaders: list[LoaderInfo], refs: dict[int, Any], shell: Any) -> None:
    """The user's own name for each loader ("train_loader"): a global of the notebook bound to it."""
    if not loaders:  # most runs: a long session's namespace holds thousands of names, ~0.3 µs each
        return
    number_of = {id(loader): number for number, loader in refs.items()}
    named: dict[int, str] = {}
    for name, value in list((getattr(shell, "user_ns", None) or {}).items()):
        number = number_of.get(id(value))
        if number is not None and not name.startswith("_") and number not in named:
            named[number] = name
    for info in loaders:
        info.name = named.get(info.number, info.name)


class _ImportHook(importlib.abc.MetaPathFinder):
    """Runs ``then(module)`` right after ``name`` is imported (the other finders find it)."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _ThenLoader(spec.loader, self.then)
                return spec
            if spec is not None:
                return spec
        return None


class _ThenLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, then: Callable[[Any], None]) -> None:
        self.loader = loader
        self.then = then

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.then(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


# ------------------------------------------------------------------------- saved with a trace

_LOADER_FIELDS: dict[str, Any] = {"number": int, "name": str, "dataset": str, "iterable": bool, "num_workers": int,
                  "batch_size": (int, type(None)), "prefetch_factor": (int, type(None)),
                  "persistent_workers": bool, "pin_memory": bool, "start_method": str}


def record_to_json(record: DataLoadingRecord) -> dict[str, Any]:
    """The record as JSON values (``TorchProfile.save`` writes it as ``nbprofDataLoading``):
    cProfile's stats as rows ``[file, line, function, cc, nc, tt, ct, [[file, line, function, nc,
    cc, tt, ct], ...]]``, the batches as lists of six integers."""
    from dataclasses import asdict

    def stats(raw: dict[Any, Any] | None) -> Any:
        if raw is None:
            return None
        return [[k[0], k[1], k[2], v[0], v[1], v[2], v[3],
                 [[c[0], c[1], c[2], *e] for c, e in v[4].items() if isinstance(e, tuple)]] for k, v in raw.items()]

    return {"version": 1, "began_ns": record.began_ns, "ended_ns": record.ended_ns, "pid": record.pid,
            "call_cost_ns": record.call_cost_ns, "loaders": [asdict(x) for x in record.loaders],
            "passes": [list(p) for p in record.passes], "waits": [list(w) for w in record.waits],
            "main_samples": [list(m) for m in record.main_samples],
            "unwatched": list(record.unwatched),
            "workers": [{"loader": w.loader, "iterator": w.iterator, "worker": w.worker, "pid": w.pid,
                         "started_ns": w.started_ns, "epoch": w.epoch, "why": w.why, "missing": w.missing,
                         "batches": w.batches.tolist(), "stats": stats(w.stats)} for w in record.workers]}


class _Bad(ValueError):
    pass


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(f"{v!r} is no integer")
    return v


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise _Bad(f"{v!r} is no number")
    return float(v)


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise _Bad(f"{v!r} is no text")
    return v


def _list(v: Any, n: int | None = None) -> list[Any]:
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise _Bad("a list" + (f" of {n}" if n is not None else "") + " expected")
    return v


def record_from_json(obj: Any) -> tuple[DataLoadingRecord | None, str | None]:
    """A saved record read back, every value checked (a trace is data: whoever wrote it); (None,
    what is wrong) when anything is."""
    import numpy as np

    try:
        if not isinstance(obj, dict) or obj.get("version") != 1:
            raise _Bad("not version 1 of nbprof's record")
        loaders = []
        for x in _list(obj.get("loaders")):
            if not isinstance(x, dict) or set(x) != set(_LOADER_FIELDS):
                raise _Bad("a loader with other fields")
            for key, typ in _LOADER_FIELDS.items():
                if not isinstance(x[key], typ) or (typ is int and isinstance(x[key], bool)):
                    raise _Bad(f"a loader's {key}")
            loaders.append(LoaderInfo(**x))
        passes = [(_int(a), _int(b), _int(c), _str(d), _int(e), _int(f))
                  for a, b, c, d, e, f in (_list(p, 6) for p in _list(obj.get("passes")))]
        waits = [(_int(a), _int(b), _int(c), _int(d), _int(e), _int(f), _str(g))
                 for a, b, c, d, e, f, g in (_list(w, 7) for w in _list(obj.get("waits")))]
        main_samples = [(_int(a), _int(b), _int(c), _int(d))  # absent from older saved records: []
                        for a, b, c, d in (_list(m, 4) for m in _list(obj.get("main_samples", [])))]
        workers = []
        for w in _list(obj.get("workers")):
            if not isinstance(w, dict):
                raise _Bad("a worker")
            rows = [[_int(v) for v in _list(r, 6)] for r in _list(w.get("batches"))]
            stats = None
            if w.get("stats") is not None:
                stats = {}
                for row in _list(w["stats"]):
                    f, line, fn, cc, nc, tt, ct, callers = _list(row, 8)
                    edges = {}
                    for e in _list(callers):
                        cf, cl, cfn, enc, ecc, ett, ect = _list(e, 7)
                        edges[(_str(cf), _int(cl), _str(cfn))] = (_int(enc), _int(ecc), _num(ett), _num(ect))
                    stats[(_str(f), _int(line), _str(fn))] = (_int(cc), _int(nc), _num(tt), _num(ct), edges)
            workers.append(WorkerRecord(loader=_int(w.get("loader")), iterator=_int(w.get("iterator")),
                                        worker=_int(w.get("worker")), pid=_int(w.get("pid")),
                                        started_ns=_int(w.get("started_ns")), epoch=_int(w.get("epoch")),
                                        batches=np.array(rows, dtype=np.int64).reshape(-1, 6), stats=stats,
                                        why=_str(w.get("why")), missing=_str(w.get("missing"))))
        record = DataLoadingRecord(began_ns=_int(obj.get("began_ns")), ended_ns=_int(obj.get("ended_ns")),
                                   loaders=loaders, passes=passes, waits=waits, main_samples=main_samples,
                                   workers=workers,
                                   unwatched=[_str(u) for u in _list(obj.get("unwatched"))],
                                   pid=_int(obj.get("pid")), call_cost_ns=_num(obj.get("call_cost_ns")))
    except (_Bad, TypeError, ValueError, OverflowError) as e:
        return None, f"unreadable ({e})"[:200]
    numbers = {x.number for x in loaders}
    if len(numbers) != len(loaders) or any(p[0] not in numbers for p in passes) or \
            any(w[0] not in numbers for w in waits) or any(m[0] not in numbers for m in main_samples) or \
            any(w.loader not in numbers for w in workers):
        return None, "its batches name a DataLoader it does not have"
    return record, None
