"""A folder of ranks (one trace per rank, as torchrun + ``tensorboard_trace_handler`` write it),
summarized where each rank is read: :class:`ClusterProfile`, what ``nbprof.load_trace(folder)``
returns for two or more trace files.

Why not merge every event into one table, as before: 8 ranks x 1.07 M events took 76 s (13.7x
one rank's 5.6 s) and peaked at 5.3 GB in the notebook process, and 64 ranks did not fit a 24 GB
machine. Each rank is now read by :func:`rank_summary` in a worker (a process of this machine, or
a Dask worker), which sends back a :class:`RankSummary`: the numbers the merged report shows,
summed so that they add up across ranks (key averages per operator, the kernel table's parts,
per-name counts and times, steps, device stats, findings), never the events. The notebook process
holds one summary per rank (tens of kB), whatever the number of ranks.

- ``workers``: ``None`` (default): one process per core, except a folder under
  :data:`IN_PROCESS_BYTES`, read in this process (a spawned worker takes ~1.5 s to start:
  importing pandas and nbprof, measured, more than such a folder takes to read); ``0``: in this
  process, one rank at a time (its events freed before the next), e.g. to debug; ``n``: ``n``
  processes. Workers are spawned, never forked: the notebook may hold torch / CUDA threads, which a
  forked child inherits in whatever state they were.
- ``client``: a ``dask.distributed.Client``; without one, the client already active in the
  session (``distributed.get_client()``) if dask is imported and one exists. Dask is imported only
  then (``pip install "dask[distributed]"``, or nbprof's ``dask`` extra).

Workers never run the caller's ``__main__`` (:class:`_WorkerProcess`): a script without an
``if __name__ == "__main__":`` guard loads a folder as a notebook does.

Errors: a rank file that cannot be read is a one-line TraceError naming it, and so is running out
of memory on it (MemoryError); a worker that dies (the OOM killer's SIGKILL) a one-line
TraceError saying how it ended and which rank it was reading, with its size; either, or an
interrupt, ends every worker before the error goes on (nothing is left running).

Every per-rank table comes from the one function :func:`rank_summary`; a new per-rank analysis is
a field there and its merge here. The report has every tab a rank has (docs/clusters.md): key
averages by operator, input shape and stack, ranges, modules, lines of the user's code summed over
the ranks; memory per rank
(each rank's chart points, peaks and blocks held at them: ``analysis.memory.MemorySummary``).
``p.rank(r)`` loads one rank's full profile (every view works on it; the last one is kept). The
timeline is drawn from each rank's view computed in its worker and zooms ask the workers again
(``nbprof.cluster_timeline``): no events here either. What needs every event (``p.events``,
allocations, launches, exports) merges all ranks on first use, as ``load_trace`` did before, and
says so.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import functools
import multiprocessing
import os
import sys
import time
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generator

import numpy as np
import pandas as pd

from .analysis.breakdown import hta_idle_rows
from .analysis.device_stats import DeviceStats, process_codes
from .analysis._tables import empty_table
from .analysis.findings import FINDING_COLUMNS, FINDING_DTYPES, SEVERITIES, collective_wait, straggler
from .analysis.steps import STEP_DTYPES
from .analysis.key_averages import GROUP_BY, KEY_AVERAGE_COLUMNS
from .analysis.kernels import kernel_parts, kernels_from_parts
from .analysis.memory import MemorySummary
from .analysis.modules import merge_modules, module_parts
from .analysis.ranges import merge_range_ops, merge_ranges, range_parts
from .analysis.ranks import RankReport, differences_from_times, name_times, report_of
from .analysis.summary import TorchSummary, default_sort, top_row
from .cluster_timeline import (ClusterTimeline, ClusterTimelineView, RankPool, RankTimeline, new_cache_dir,
                               rank_timeline, remove_cache)
from .errors import OptionError, TraceError
from .format import fmt_bytes, plural
from .system import describe_exit, max_workers, out_of_memory_exit, usable_cpus
from .meta import TorchMeta, TraceMeta
from .model import TorchProfile

__all__ = ["ClusterProfile", "RankSummary", "rank_summary", "summarize_ranks", "IN_PROCESS_BYTES"]

# Below this many bytes of trace files in all, a folder is read in this process by default: a
# spawned worker's start (~1.5 s) costs more than reading such a folder (~10 MB/s of gzip'd trace).
IN_PROCESS_BYTES = 16 << 20

# The evidence key that names what a finding is about, in the order looked for: the findings of
# several ranks about the same subject (kind and subject) are one line.
_SUBJECT_KEYS = ("op", "kernel", "name", "device", "direction", "label")


@dataclass
class RankSummary:
    """What one rank's worker sends back: the rank's tables, not its events (see the module doc).

    Times are the rank's own clock (µs since its first event); ``meta.origin_ns`` puts them on a
    common clock."""

    file: str
    meta: TraceMeta
    events: int
    start_us: float
    end_us: float
    rank_row: pd.DataFrame
    """Its row of ``ranks().table`` (the rank label is set when all ranks are back)."""
    hta_idle: pd.DataFrame
    """``ranks().hta_idle``: HTA's idle time breakdown, per stream and category."""
    key_averages: pd.DataFrame
    """``key_averages("op")``: sums and counts, which add up across ranks."""
    kernel_parts: pd.DataFrame
    device_times: pd.DataFrame
    """``name_times`` of its kernels (device time), for ``ranks().differences``."""
    cpu_times: pd.DataFrame
    """``name_times`` of its ops and labels (self CPU time), for ranks without device work."""
    steps: pd.DataFrame
    step_breakdown: pd.DataFrame
    """``step_breakdown()`` (self CPU time per op and step): the Steps tab's side-by-side table."""
    device_stats: DeviceStats
    summary: TorchSummary
    findings: pd.DataFrame
    overview: pd.DataFrame
    """``overview()``: its steps' time by category, and their sum (``step == "all"``)."""
    collectives: pd.DataFrame
    """``collectives()``: per collective and process group (the Ranks tab's Cluster section)."""
    queue_length: pd.DataFrame
    """``queue_length()``: per device and stream."""
    timeline: RankTimeline
    """Its collective calls and where its events' cache is, for the timeline (its view is drawn from
    the cache when first shown: ``nbprof.cluster_timeline``)."""
    seconds: float
    """Time to read and summarize it."""
    shape_averages: pd.DataFrame | None = None
    """``key_averages("shape")``, where the rank recorded input shapes (None: its rows are its
    operators', every shape ``[]``)."""
    stack_averages: pd.DataFrame | None = None
    """``key_averages("stack")``, where the rank recorded Python stacks (None: every stack "")."""
    ranges: pd.DataFrame | None = None
    """``analysis.ranges.range_parts``: its Ranges table with each path's first start."""
    range_span_us: float = 0.0
    """The span its ranges' shares divide by."""
    range_ops: pd.DataFrame | None = None
    """``range_ops()``: the operators under each range."""
    modules: pd.DataFrame | None = None
    """``analysis.modules.module_parts``: its module tree with each module's first call."""
    lines: pd.DataFrame | None = None
    """``lines()``, where the rank has line data (``--lines``, or torch's ``with_stack`` frames);
    None where it has none. Its ``meta`` keeps the sources, not the per-op ``line_data``."""
    memory: MemorySummary | None = None
    """What its Memory tab draws (``analysis.memory.MemorySummary``: the chart's points, peaks,
    blocks held at each peak); None where it recorded no memory."""


def rank_summary(path: str, cache_root: str | None = None, limit: Any = None) -> RankSummary:
    """Read one rank's trace and summarize it (runs in a worker; a bad file: TraceError naming it,
    and so is running out of memory on it). ``cache_root``: where to write its events' cache for
    the timeline (None: none; the timeline then reads the file again); ``limit``:
    ``read_trace_file``'s ``max_bytes``."""
    try:
        return _summarize(path, cache_root, limit)
    except MemoryError:
        raise TraceError(f"{path}: out of memory reading this rank ({_file_size(path)}); try fewer workers= "
                         "(0 reads one rank at a time in this process)") from None


def _summarize(path: str, cache_root: str | None, limit: Any = None) -> RankSummary:
    t0 = time.perf_counter()
    p = TorchProfile.from_trace(_read(path, limit))
    ev = p._events
    start = float(ev["start_us"].min()) if len(ev) else 0.0
    end = float((ev["start_us"] + ev["dur_us"]).max()) if len(ev) else 0.0
    lines = _rank_lines(p)
    # the line table stands for the per-op line data (an entry per op): that stays here
    trace_meta = TraceMeta(**{**p.meta.trace_fields(), "line_data": None})
    device_times = name_times(ev, device_work=True)
    # the ops' times stand in for the kernels' only where no rank ran device work: not this one's
    cpu_times = name_times(ev, device_work=False) if len(device_times) == 0 else device_times.iloc[0:0]
    # the rank's row of ``ranks().table`` and its HTA idle rows; not ``p.ranks()``, whose differences
    # between ranks (name_times again) one rank has none of: the folder's are from every rank's times
    rank_row, idle = p._rank_parts
    _, labels = process_codes(ev)
    collected = p.collected
    ranges, range_span_us = range_parts(ev, p.meta)
    return RankSummary(
        file=path, meta=trace_meta, events=len(ev), start_us=start, end_us=end,
        rank_row=rank_row, hta_idle=hta_idle_rows(idle, labels), key_averages=p.key_averages("op"),
        kernel_parts=kernel_parts(ev), device_times=device_times,
        cpu_times=cpu_times, steps=p.steps(), step_breakdown=p.step_breakdown(),
        device_stats=p.device_stats, summary=p.summary, findings=p.findings, overview=p.overview(),
        collectives=p.collectives(), queue_length=p.queue_length(),
        timeline=rank_timeline(ev, p.meta, path, cache_root=cache_root),
        shape_averages=p.key_averages("shape") if collected["shapes"] else None,
        stack_averages=p.key_averages("stack") if collected["stack"] else None,
        ranges=ranges, range_span_us=range_span_us, range_ops=p.range_ops(), modules=module_parts(ev),
        lines=lines, memory=p._memory_summary if collected["memory"] else None,
        seconds=time.perf_counter() - t0,
    )


def _rank_lines(p: TorchProfile) -> pd.DataFrame | None:
    """The rank's ``lines()`` with its ``attrs`` (method, notes); None without line data."""
    if p.meta.line_data is None and not p.collected["stack"]:
        return None  # neither --lines nor Python frames: nothing to look for
    try:
        return p.lines()
    except OptionError:  # with_stack, but no frame of the user's code
        return None


def _read(path: str, limit: Any = None) -> Any:
    from .collect.chrome_trace import read_trace_file

    try:
        return read_trace_file(path, max_bytes=limit)
    except (TraceError, MemoryError):
        raise
    except Exception as e:  # a reader bug on an odd file: still one line naming the file
        raise TraceError(f"{path}: could not be read ({type(e).__name__}: {e})") from None


# -- running the summaries -------------------------------------------------------------------------


def plan(files: list[str], workers: int | None = None, client: Any = None) -> tuple[int, Any]:
    """Where the ranks are read: (worker processes, 0 for this process; the Dask client or None)."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
        raise OptionError(f"workers must be a number of processes (0: in this process); got {workers!r}")
    if client is None and workers is None:
        client = _active_dask_client()
    if client is not None:
        return 0, client
    if workers is None:
        small = sum(os.path.getsize(f) for f in files) < IN_PROCESS_BYTES
        workers = 0 if small else min(usable_cpus(), len(files))
    return max_workers(min(workers, len(files))), None


def summarize_ranks(files: list[str], *, workers: int | None = None, client: Any = None,
                    progress: bool = True, limit: Any = None) -> list[RankSummary]:
    """:func:`rank_summary` of each file (in ``files``' order), where the module doc says; their
    timelines' caches in a new folder (``cluster_timeline.new_cache_dir``: the profile removes it).
    ``limit``: ``read_trace_file``'s ``max_bytes``."""
    workers, client = plan(files, workers, client)
    cache = new_cache_dir()
    work = functools.partial(rank_summary, cache_root=cache, limit=limit)
    try:
        if client is not None:
            return _run(files, _dask_runner(client, work), progress, "Dask")
        if workers == 0:
            return _run(files, functools.partial(_in_process, work=work), progress, "")
        return _run(files, functools.partial(_in_workers, workers=workers, cache_root=cache, limit=limit), progress,
                    f"{workers} worker process{'es' if workers > 1 else ''}")
    except BaseException:
        remove_cache(cache, client)
        raise


Runner = Callable[[list[str]], Generator[tuple[int, RankSummary], None, None]]
Work = Callable[[str], RankSummary]


def _run(files: list[str], runner: Runner, progress: bool, how: str) -> list[RankSummary]:
    from .views.progress import RankProgress

    bar = RankProgress(len(files), enabled=progress, how=how)
    out: list[RankSummary | None] = [None] * len(files)
    results = runner(files)
    try:
        for i, summary in results:
            out[i] = summary
            bar.advance()
    finally:
        results.close()  # an error or an interrupt here stops the workers now, not when collected
        bar.close()
    return [s for s in out if s is not None]


def _in_process(files: list[str], work: Work = rank_summary) -> Generator[tuple[int, RankSummary], None, None]:
    for i, f in enumerate(files):
        yield i, work(f)


def _in_workers(files: list[str], workers: int, cache_root: str | None = None, limit: Any = None
                ) -> Generator[tuple[int, RankSummary], None, None]:
    """Spawned worker processes that never run the caller's ``__main__`` (:class:`_WorkerContext`);
    on an error or an interrupt (KeyboardInterrupt) every worker is stopped before the error goes
    on: nothing is left running. A worker that dies is a one-line TraceError saying how, and which
    rank it was reading (:func:`_death`)."""
    context = _WorkerContext()
    started = context.SimpleQueue()  # (pid, rank index) as each worker starts a rank: who read what
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_tell_starts_to,
                                  initargs=(started,))
    futures: dict[cf.Future, int] = {}
    processes: list[Any] = []
    try:
        try:
            for i, f in enumerate(files):
                futures[pool.submit(_summary_in_worker, i, f, cache_root, limit)] = i
                # the workers are started by submit(): kept here to read how one ended (the pool
                # drops them)
                processes = list((getattr(pool, "_processes", None) or {}).values()) or processes
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()
        except cf.process.BrokenProcessPool:
            # a worker died (as early as while the ranks were being handed out: submit() then
            # raises); the pool does not say which, nor how
            read = sum(f.done() and not f.cancelled() and f.exception() is None for f in futures)
            raise TraceError(_death(files, processes, started, len(files) - read)) from None
    except BaseException:
        _stop(pool)
        started.close()
        raise
    pool.shutdown(wait=True)
    started.close()


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that does not run the caller's ``__main__`` module.

    multiprocessing's spawn sends a new process the main module's ``__spec__`` name or
    ``__file__`` (``spawn.get_preparation_data``), and the process runs that module again, as
    ``__mp_main__``, before it does its work (``spawn._fixup_main_from_path``): a script that loads
    a folder without an ``if __name__ == "__main__":`` guard would load it again in every worker
    (which multiprocessing then refuses: the workers died, and the folder was never read). The
    workers run nbprof's functions on file names and send back nbprof's classes: nothing of the
    caller's main. So the main module is left out of what a worker is sent: while a worker starts
    (the milliseconds of ``Popen``, in this thread), ``sys.modules["__main__"]`` is an empty module,
    and the worker keeps its own main. Any script, ``python -c``, notebook or ``python -m nbprof``
    then loads a folder the same way."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")  # no __spec__ name, no __file__
        try:
            return multiprocessing.context.SpawnProcess._Popen(process_obj)
        finally:
            if main is not None:
                sys.modules["__main__"] = main


class _WorkerContext(multiprocessing.context.SpawnContext):
    """The spawn start method, with :class:`_WorkerProcess` (never forked: the notebook may hold
    torch / CUDA threads, which a forked child inherits in whatever state they were)."""

    Process = _WorkerProcess


_starts: Any = None  # in a worker: the queue it tells its starts to


def _tell_starts_to(queue: Any) -> None:
    global _starts
    _starts = queue
    _keep_freed_memory()


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _keep_freed_memory() -> None:
    """Have the C allocator of this worker keep the memory it frees, to be used again.

    Reading a rank allocates and frees ~1.2 GB over and over (the JSON text, each column, each
    table's temporaries). glibc by default maps every block above a threshold (adapting up to
    32 MB) fresh from the kernel and unmaps it when freed, and trims its heap's top: each reuse
    then costs page faults, the kernel zeroing each page again. Measured on one rank of 1 M events
    read three times in a process: ~380,000 page faults and ~1.1 s of system time per rank; with
    every block from the heap and the heap never trimmed, ~217,000 (pymalloc's own arenas, left
    as they are) and ~0.55 s, the rank 0.4-0.6 s faster (5.4 -> 4.8 s); the worker's peak
    1.22 -> 1.40 GB. Only in the load's own workers, which end when the folder is read (what they
    kept goes with them); never in the notebook's process, whose allocator is the user's. Not
    glibc (macOS, musl): nothing to do."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # this process's C library
    except (OSError, AttributeError):
        return
    # fixing the trim threshold also fixes the mapping threshold (glibc stops adapting it): set both
    mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    mallopt(_M_MMAP_THRESHOLD, 2**31 - 1)


def _summary_in_worker(index: int, path: str, cache_root: str | None = None, limit: Any = None) -> RankSummary:
    if _starts is not None:
        _starts.put((os.getpid(), index))
    return rank_summary(path, cache_root, limit)


def _death(files: list[str], processes: list[Any], started: Any, left: int) -> str:
    """What a dead worker was doing, in one line: how it ended (the exit code or signal; SIGKILL is
    what Linux's out-of-memory killer sends; Windows has no signals: ``system.describe_exit``) and
    the rank it was reading, with its size."""
    import signal

    reading: dict[int, int] = {}  # pid -> the rank it started last
    try:
        while not started.empty():
            pid, i = started.get()
            reading[pid] = i
    except (OSError, EOFError, ValueError):  # a message cut short by the death: what came before
        pass
    time.sleep(0.05)  # the pool's thread ends the other workers (SIGTERM): let their exit codes land
    # (multiprocessing reports a worker it terminated as -SIGTERM on Windows too)
    dead = [p for p in processes if p.exitcode not in (None, 0, -signal.SIGTERM)] or \
        [p for p in processes if p.exitcode not in (None, 0)]
    folder = os.path.dirname(files[0])
    not_read = f"{left} of {len(files)} ranks not read"
    if not dead:
        return f"{folder}: a worker process ended unexpectedly; {not_read}"
    proc = dead[0]
    code = proc.exitcode
    how = describe_exit(code)
    i = reading.get(proc.pid)
    if i is None:
        return f"{folder}: a worker process {how} as it started, before reading a rank (its error, if any, " \
               f"is printed above); {not_read}"
    what = f"while reading {os.path.basename(files[i])} ({_file_size(files[i])})"
    if out_of_memory_exit(code):
        cause = ("the out-of-memory killer sends SIGKILL, so it most likely ran out of memory" if code < 0
                 else "it ran out of memory")
        return (f"{folder}: a worker process {how} {what}: {cause}; each worker holds one rank's events while "
                f"it reads it: try fewer workers= (now {len(processes)}; 0 reads one rank at a time in this "
                f"process); {not_read}")
    return f"{folder}: a worker process {how} {what}; {not_read}"


def _file_size(path: str) -> str:
    try:
        size = os.path.getsize(path)
    except OSError:
        return "size unknown"
    return f"{fmt_bytes(size)} on disk" + (", gzip'd" if path.endswith(".gz") else "")


def _stop(pool: cf.ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (a rank takes seconds: waiting for the
    running ones would keep an interrupted notebook busy). Python 3.14 has terminate_workers();
    before it, the pool's processes are only reachable as ``_processes``."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    procs = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() drops it
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    for p in procs:
        p.join()


def _active_dask_client() -> Any:
    """The Dask client of this session, if dask.distributed is imported and one exists."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_client

    try:
        return get_client()
    except ValueError:  # no client in this session
        return None


def _dask_runner(client: Any, work: Work = rank_summary) -> Runner:
    def run(files: list[str]) -> Generator[tuple[int, RankSummary], None, None]:
        from distributed import as_completed

        futures = client.map(work, files, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for fut in as_completed(futures):
                yield index[fut.key], fut.result()
        except BaseException:
            client.cancel(futures)
            raise

    return run


# -- the profile ----------------------------------------------------------------------------------


def labels_of(metas: list[TraceMeta]) -> list[Any]:
    """Each file's rank as its trace says; 0, 1, ... when some trace has none or two say the same."""
    ranks = [m.rank for m in metas]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        return list(range(len(metas)))
    return ranks


class ClusterProfile(TorchProfile):
    """A folder of ranks, summarized apart (see the module doc): the merged report's tables
    (``ranks()``, ``key_averages(group_by)``, ``kernels()``, ``steps()``, ``overview()``,
    ``ranges()``, ``range_ops()``, ``modules()``, ``lines()``, ``rank_memory()``, ``memory_curve()``,
    ``alive_at_end()``, ``memory_growth()``,
    ``collectives()``, ``collective_calls()``, ``queue_length()``, ``device_stats``, ``findings``,
    ``summary``) from the ranks' summaries; ``timeline()`` / ``timeline_view()``: every rank's lanes
    on one clock, drawn from the views the workers computed, zooms read by the workers
    (``nbprof.cluster_timeline``); ``rank(r)``: one rank's full profile; what needs every event
    (``events``, ``allocations()``, ``launches()`` (a row per launch), exports) merges all ranks on
    first use.

    ``workers`` / ``client``: where the timeline's zooms run (as the ranks were read: ``plan``);
    ``limit``: ``read_trace_file``'s ``max_bytes``, for the ranks read again."""

    def __init__(self, folder: str, summaries: list[RankSummary], *, workers: int = 0, client: Any = None,
                 limit: Any = None) -> None:
        self._summaries = summaries
        self._limit = limit  # read_trace_file's max_bytes, for the ranks read again here
        self._labels = labels_of([s.meta for s in summaries])
        metas = [s.meta for s in summaries]
        origin = min(m.origin_ns for m in metas)
        # each rank's times onto the common clock (as concat_traces shifts its events)
        self._shift_us = [(m.origin_ns - origin) / 1000.0 for m in metas]
        first = metas[0]
        trace = dataclasses.replace(
            first, origin_ns=origin, source=folder, files=[s.file for s in summaries],
            record_shapes=any(m.record_shapes for m in metas), profile_memory=any(m.profile_memory for m in metas),
            with_stack=any(m.with_stack for m in metas), with_flops=any(m.with_flops for m in metas),
            parts=metas, line_data=None,  # lines(): the ranks' tables summed
            sources={f: text for m in reversed(metas) for f, text in m.sources.items()},  # the first rank's text wins
            reader_notes=[f"{os.path.basename(m.source)}: {note}" for m in metas for note in m.reader_notes],
        )
        self.meta = TorchMeta.of(trace)
        self.profiler = None
        self._averages: dict[str, pd.DataFrame] = {}
        self._one: tuple[Any, TorchProfile] | None = None
        self._pool = RankPool(workers, client, _WorkerContext())
        self._views: dict[Any, ClusterTimelineView] = {}
        roots = {os.path.dirname(s.timeline.cache) for s in summaries if s.timeline.cache}
        # the caches and the zoom workers go with the profile (or at exit)
        self._finalizer = weakref.finalize(self, _release, self._pool, sorted(roots), client)

    @classmethod
    def from_trace(cls, trace: Any, *, profiler: Any = None, **run: Any) -> TorchProfile:
        """One trace is one rank's profile: a plain :class:`TorchProfile`."""
        return TorchProfile.from_trace(trace, profiler=profiler, **run)

    @property
    def rank_labels(self) -> list[Any]:
        """The ranks, in the folder's file order (what ``rank(r)`` takes)."""
        return list(self._labels)

    @property
    def rank_summaries(self) -> list[RankSummary]:
        """Each rank's summary (what its worker sent back), in the order of ``rank_labels``."""
        return list(self._summaries)

    def rank(self, r: Any) -> TorchProfile:
        """Rank ``r``'s full profile, read from its file (the last one asked for is kept)."""
        if r not in self._labels:
            raise OptionError(f"no rank {r!r} in this profile; its ranks: {_ranges(self._labels)}")
        if self._one is None or self._one[0] != r:
            from .collect.chrome_trace import read_trace_file

            self._one = None  # the previous rank's events go before the next one's are read
            self._one = (r, TorchProfile.from_trace(read_trace_file(self._summaries[self._labels.index(r)].file,
                                                                    max_bytes=self._limit)))
        return self._one[1]

    # -- every event, merged on demand ------------------------------------------------------------

    @functools.cached_property
    def _merged(self) -> TorchProfile:
        from .collect.chrome_trace import read_trace_file
        from .events import concat_traces

        n = sum(s.events for s in self._summaries)
        print(f"nbprof: merging all {len(self._summaries)} ranks' events ({n:,}) into this process, as asked "
              "(p.rank(r) reads one rank)", file=sys.stderr)
        traces = [read_trace_file(s.file, max_bytes=self._limit) for s in self._summaries]
        merged = concat_traces(traces, labels=self._labels, label_column="rank")
        merged.meta.source = self.meta.source
        merged.meta.files = list(self.meta.files)
        return TorchProfile.from_trace(merged)

    @functools.cached_property
    def _events(self) -> pd.DataFrame:  # read on first use, not given
        return self._merged._events

    def to_chrome_trace(self, path: str | os.PathLike) -> str:
        return self._merged.to_chrome_trace(path)

    # -- tables from the summaries ----------------------------------------------------------------

    def key_averages(self, group_by: str = "op", *, per_rank: bool = False) -> pd.DataFrame:
        """Totals over the ranks (counts and times summed, averages recomputed), one row per
        operator (``"op"``), operator and input shape (``"shape"``) or operator and Python stack
        (``"stack"``), from the ranks' summaries; ``per_rank=True``: one row per rank and key (a
        ``rank`` column first)."""
        if group_by not in GROUP_BY:
            raise OptionError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
        if per_rank:
            frames = [_rank_averages(s, group_by) for _, s, _ in self._ranked()]
            out = pd.concat([f.assign(rank=r)[["rank", *f.columns]] for (r, _, _), f in zip(self._ranked(), frames)],
                            ignore_index=True)
            out["rank"] = out["rank"].astype(object)
            return out
        if group_by not in self._averages:
            self._averages[group_by] = _sum_averages([_rank_averages(s, group_by) for s in self._summaries])
        return self._averages[group_by].copy(deep=False)

    # -- the views every rank has, summed (or each rank's: memory) --------------------------------

    @functools.cached_property
    def _ranges(self) -> pd.DataFrame:
        return merge_ranges([(s.ranges, s.range_span_us, shift) for s, shift in zip(self._summaries, self._shift_us)
                             if s.ranges is not None])

    @functools.cached_property
    def _range_ops(self) -> pd.DataFrame:
        return merge_range_ops([s.range_ops for s in self._summaries if s.range_ops is not None],
                               self._ranges["path"])

    @functools.cached_property
    def _modules(self) -> pd.DataFrame:
        return merge_modules([(s.modules, shift) for s, shift in zip(self._summaries, self._shift_us)
                              if s.modules is not None])

    def ranges(self, *, per_rank: bool = False) -> pd.DataFrame:
        """The ``record_function`` ranges summed over the ranks (counts, times, device work; min and
        max over every instance; shares of the ranks' spans summed), from the summaries;
        ``per_rank=True``: each rank's own table, a ``rank`` column first."""
        if per_rank:
            return self._per_rank_table(lambda s: None if s.ranges is None else s.ranges.drop(columns="first_us"),
                                        self._ranges)
        return self._ranges.copy(deep=False)

    def modules(self, *, per_rank: bool = False) -> pd.DataFrame:
        """The ``nn.Module`` tree summed over the ranks (calls and times per module path), from the
        summaries; ``per_rank=True``: each rank's own tree, a ``rank`` column first."""
        if per_rank:
            return self._per_rank_table(lambda s: None if s.modules is None else s.modules.drop(columns="first_us"),
                                        self._modules)
        return self._modules.copy(deep=False)

    @functools.cached_property
    def _lines(self) -> pd.DataFrame:
        from .analysis.lines import merge_lines

        tables = [s.lines for s in self._summaries if s.lines is not None]
        if not tables:
            raise OptionError("no rank of this folder has lines: record them with %%torchprof --lines "
                              "(or with_stack=True)")
        table = merge_lines(tables)
        methods = {t.attrs.get("method") for t in tables}
        table.attrs = {"method": methods.pop() if len(methods) == 1 else "mixed",
                       "notes": list(dict.fromkeys(n for t in tables for n in t.attrs.get("notes", [])))}
        return table

    def lines(self, *, per_rank: bool = False) -> pd.DataFrame:
        """The lines of your code summed over the ranks that have line data (ops, times and bytes
        per ``cell, file, line, function, function_line, source``; the "(outside your code)" rows
        into one), the columns of ``TorchProfile.lines()``, from the summaries; ``per_rank=True``:
        each rank's own table, a ``rank`` column first."""
        table = self._lines
        if per_rank:
            return self._per_rank_table(lambda s: s.lines, table)
        out = table.copy(deep=False)
        out.attrs = dict(table.attrs)
        return out

    def _per_rank_table(self, part: Callable[[RankSummary], pd.DataFrame | None], empty: pd.DataFrame) -> pd.DataFrame:
        frames = [f.assign(rank=r) for r, s, _ in self._ranked() if (f := part(s)) is not None and len(f)]
        if not frames:
            out = empty.iloc[0:0].assign(rank=pd.Series(dtype=object))
        else:
            out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        return out[["rank", *[c for c in out.columns if c != "rank"]]]

    def rank_memory(self) -> pd.DataFrame:
        """Each rank's memory peaks, one row per rank and device: ``rank, device,
        peak_allocated_bytes, peak_time_us`` (on the common clock), ``peak_op,
        peak_reserved_bytes, start_allocated_bytes``; ranks that recorded no memory have none.
        The Memory tab draws every rank's curve and each rank's own tab; ``p.rank(r)`` has every
        block."""
        rows = [(r, pk.device, pk.peak_allocated_bytes, pk.peak_time_us + shift, pk.peak_op, pk.peak_reserved_bytes,
                 pk.start_allocated_bytes)
                for r, s, shift in self._ranked() if s.memory is not None for pk in s.memory.peaks]
        out = pd.DataFrame(rows, columns=["rank", "device", "peak_allocated_bytes", "peak_time_us", "peak_op",
                                          "peak_reserved_bytes", "start_allocated_bytes"])
        out["rank"] = out["rank"].astype(object)
        for c in ("peak_allocated_bytes", "peak_reserved_bytes", "start_allocated_bytes"):
            out[c] = out[c].astype(np.int64)
        out["peak_time_us"] = out["peak_time_us"].astype(np.float64)
        return out

    def alive_at_end(self, by: str | None = None) -> pd.DataFrame:
        """Each rank's blocks left allocated at its end (``TorchProfile.alive_at_end``'s columns, a
        ``rank`` column first, times on the common clock), from the summaries; ``by="line"`` /
        ``"op"``: summed per rank and line or operator."""
        from .analysis.memory import ALIVE_BY, group_alive

        if by is not None and by not in ALIVE_BY:
            raise OptionError(f"by must be one of {', '.join(ALIVE_BY)} (or None: one row per block); got {by!r}")
        out = self._alive_at_end
        if by is None:
            return out.copy(deep=False)
        if by == "line" and "line" not in out.columns:
            raise OptionError("no rank of this folder has lines: record them with %%torchprof --lines")
        return group_alive(out, by)

    @functools.cached_property
    def _alive_at_end(self) -> pd.DataFrame:
        from .analysis.memory import ALLOCATION_DTYPES
        from .analysis._tables import empty_table

        frames = [m.alive.assign(rank=r, alloc_us=m.alive["alloc_us"] + shift)
                  for r, m, shift in self._memory_by_rank() if m is not None and len(m.alive)]
        if not frames:
            return empty_table(ALLOCATION_DTYPES)
        out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        out = out[["rank", *[c for c in out.columns if c not in ("rank", "row")]]]
        return out.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)

    @functools.cached_property
    def _growth(self) -> pd.DataFrame:
        """Each rank's ``memory_growth()`` (a ``rank`` column after ``step``; times on the common
        clock), from the summaries."""
        from .analysis._tables import empty_table
        from .analysis.growth import GROWTH_COLUMNS, GROWTH_DTYPES

        frames, sources = [], []
        for r, m, shift in self._memory_by_rank():
            if m is not None and len(m.growth):
                frames.append(m.growth.assign(rank=r, start_us=m.growth["start_us"] + shift,
                                              end_us=m.growth["end_us"] + shift))
                sources.append(m.steps_from)
        columns = ["step", "rank", *GROWTH_COLUMNS[1:]]
        if not frames:
            out = empty_table(GROWTH_DTYPES, columns)
        else:
            out = pd.concat(frames, ignore_index=True)
            out["rank"] = out["rank"].astype(object)
            out = out[columns].sort_values(["rank", "start_us", "device"], kind="stable").reset_index(drop=True)
        kinds = list(dict.fromkeys(x for x in sources if x))
        out.attrs = {"steps": kinds[0] if len(kinds) == 1 else ("; ".join(kinds) or None)}
        return out

    def _memory_by_rank(self) -> list[tuple[Any, MemorySummary | None, float]]:
        """(rank, its ``MemorySummary`` or None, the shift of its clock in µs), in rank order: what
        the Memory tab draws."""
        return [(r, s.memory, shift) for r, s, shift in self._ranked()]

    @functools.cached_property
    def _every_rank_memory(self) -> MemorySummary:
        """Every rank's chart points and peaks on the common clock, one "device" per rank and
        device ("rank 1 · cpu"): the Memory tab's chart of every rank, ``memory_curve()``."""
        curves, peaks = [], []
        end = 0.0
        for r, m, shift in self._memory_by_rank():
            if m is None:
                continue
            end = max(end, m.end_us + shift)
            curves.append(m.curve.assign(device=[f"rank {r} · {d}" for d in m.curve["device"]],
                                         time_us=m.curve["time_us"] + shift))
            peaks += [dataclasses.replace(pk, device=f"rank {r} · {pk.device}", peak_time_us=pk.peak_time_us + shift)
                      for pk in m.peaks]
        curve = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(
            columns=["device", "time_us", "allocated_bytes", "reserved_bytes", "delta_bytes", "op"])
        return MemorySummary(curve, peaks, end, [])

    def memory_curve(self) -> Any:
        """Every rank's allocated (and reserved) memory over time, one curve per rank and device on
        the common clock: a plotly ``Figure``, drawn from the points the ranks' workers sent (the
        chart's resolution; ``p.rank(r).memory_curve()`` has every memory event)."""
        from .views.memory import memory_curve_figure

        m = self._every_rank_memory
        return memory_curve_figure(m.curve, m.end_us, peaks=m.peaks)

    @functools.cached_property
    def _summary(self) -> TorchSummary:
        ss = [s.summary for s in self._summaries]
        averages = self.key_averages("op")
        has_device = any(s.has_device for s in ss)
        self_cpu = float(averages["self_cpu_us"].sum()) if len(averages) else 0.0
        self_device = float(sum(s.self_device_us for s in ss))
        sort = self.meta.sort or default_sort(has_device)
        top = top_row(averages, sort, self_cpu, self_device)
        starts = [s.start_us + d for s, d in zip(self._summaries, self._shift_us) if s.events]
        ends = [s.end_us + d for s, d in zip(self._summaries, self._shift_us) if s.events]
        alloc: dict[str, int] = {}
        reserved: dict[str, int] = {}
        for s in ss:
            for dev, v in s.peak_allocated_bytes.items():
                alloc[dev] = max(alloc.get(dev, v), v)
            for dev, v in s.peak_reserved_bytes.items():
                reserved[dev] = max(reserved.get(dev, v), v)
        return TorchSummary(
            events=sum(s.events for s in ss), span_us=(max(ends) - min(starts)) if starts else 0.0,
            self_cpu_us=self_cpu, self_device_us=self_device, has_device=has_device,
            has_memory=any(s.has_memory for s in ss), sort=sort, top_name=top[0], top_value=top[1],
            top_share=top[2], peak_allocated_bytes=alloc, peak_reserved_bytes=reserved)

    @functools.cached_property
    def _kernels(self) -> pd.DataFrame:
        return kernels_from_parts(pd.concat([s.kernel_parts for s in self._summaries], ignore_index=True))

    @functools.cached_property
    def _steps(self) -> pd.DataFrame:
        frames = []
        for r, s, shift in self._ranked():
            if len(s.steps):
                f = s.steps.assign(start_us=s.steps["start_us"] + shift)
                f.insert(1, "rank", r)
                frames.append(f)
        if not frames:
            columns = list(self._summaries[0].steps.columns)
            columns.insert(1, "rank")
            return empty_table(STEP_DTYPES, columns)
        out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        return out.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)

    def step_breakdown(self, by: str = "op", metric: str | None = None) -> pd.DataFrame:
        """The steps side by side, one column per (rank, step); by op and self CPU time (what the
        Steps tab shows) from the summaries, other choices from every event (merged on first use)."""
        if by != "op" or metric not in (None, "self_cpu_us"):
            return super().step_breakdown(by, metric)
        parts = {r: s.step_breakdown for r, s, _ in self._ranked() if len(s.step_breakdown.columns)}
        if not parts:  # no steps: the empty table, with the (rank, step) columns of several ranks
            table = self._summaries[0].step_breakdown.copy()
            none = np.zeros(0, dtype=np.int64)
            table.columns = pd.MultiIndex.from_arrays([none, none], names=["rank", "step"])
            return table
        table = pd.concat(parts, axis=1, names=["rank", "step"]).fillna(0.0).sort_index(axis=1)
        total = table.sum(axis=1)
        table = table.iloc[np.lexsort((table.index.to_numpy().astype(str), -total.to_numpy()))]
        table.index.name = "name"
        return table

    @functools.cached_property
    def _device_stats(self) -> DeviceStats:
        def joined(part: Callable[[RankSummary], pd.DataFrame]) -> pd.DataFrame:
            frames = [part(s).assign(rank=r) for r, s, _ in self._ranked()]
            out = pd.concat(frames, ignore_index=True)
            out["rank"] = out["rank"].astype(object)
            return out[["rank", *[c for c in out.columns if c != "rank"]]]

        return DeviceStats(devices=joined(lambda s: s.device_stats.devices),
                           streams=joined(lambda s: s.device_stats.streams))

    @functools.cached_property
    def _ranks(self) -> RankReport:
        table = pd.concat([s.rank_row.assign(rank=[r]) for r, s, _ in self._ranked()], ignore_index=True)
        table["rank"] = table["rank"].astype(object)
        codes = {r: i for i, r in enumerate(self._order())}
        # the kernels when some rank ran device work (as the merged events would say), else the ops
        device = any(s.summary.has_device for s in self._summaries)
        times = pd.concat([(s.device_times if device else s.cpu_times).assign(rank=codes[r])
                           for r, s, _ in self._ranked()], ignore_index=True)
        hta_idle = self._per_rank(lambda s: s.hta_idle)
        return report_of(table, differences_from_times(times, np.asarray(self._order(), dtype=object)), hta_idle)

    @functools.cached_property
    def _overview(self) -> pd.DataFrame:
        """The ranks' step rows (rank by rank, on the common clock), then their "all" rows, as the
        merged events' overview orders them."""
        frames = []
        for r, s, shift in self._ranked():
            f = s.overview.assign(start_us=s.overview["start_us"] + shift)
            f.insert(1, "rank", r)
            frames.append(f)
        out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        is_all = (out["step"] == "all").to_numpy()
        return pd.concat([out[~is_all], out[is_all]], ignore_index=True)

    @functools.cached_property
    def _collectives(self) -> pd.DataFrame:
        return self._per_rank(lambda s: s.collectives)

    @functools.cached_property
    def _queue_length(self) -> pd.DataFrame:
        return self._per_rank(lambda s: s.queue_length)

    def _per_rank(self, part: Callable[[RankSummary], pd.DataFrame]) -> pd.DataFrame:
        """A per-rank table whose ``rank`` column (None in one rank's profile) is set to its label."""
        out = pd.concat([part(s).assign(rank=r) for r, s, _ in self._ranked()], ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        return out

    @functools.cached_property
    def _findings(self) -> pd.DataFrame:
        rows: list[tuple[str, str, str, dict[str, Any]]] = [
            ("straggler", f.severity, f.message.strip(), f.evidence)
            for f in straggler.from_ranks(self.ranks(), has_device=self.summary.has_device)]
        # the kinds that compare ranks: from the merged tables (a rank alone never has them)
        rows += [("collective_wait", f.severity, f.message.strip(), f.evidence)
                 for f in collective_wait.from_tables(self.collectives(), self.ranks().table, self._order())]
        rows += _aggregate_findings([(r, s.findings) for r, s, _ in self._ranked()])
        order = {s: i for i, s in enumerate(SEVERITIES)}
        rows.sort(key=lambda row: order[row[1]])  # stable: the straggler first among equals
        return pd.DataFrame(rows, columns=list(FINDING_COLUMNS)) if rows else empty_table(FINDING_DTYPES)

    def _order(self) -> list[Any]:
        """The rank labels sorted (the order of the merged tables' rank rows)."""
        return sorted(self._labels)

    def _ranked(self) -> list[tuple[Any, RankSummary, float]]:
        """(label, summary, shift of its clock in µs) in rank order."""
        return sorted(zip(self._labels, self._summaries, self._shift_us), key=lambda x: x[0])

    # -- the timeline ---------------------------------------------------------------------------

    def _timeline(self, align: str | None = None) -> ClusterTimeline:
        ranks = [(r, s.timeline, shift) for r, s, shift in self._ranked()]
        return ClusterTimeline(ranks, self._pool, align=align, owner=self)

    def timeline_view(self, align: str | None = None) -> Any:
        """The timeline for display (the report's overview, the figure, the live widget), every
        rank's lanes on one clock: as recorded, or aligned on an event on every rank (``align``:
        ``"collective"``, the first collective call; or a name, e.g. ``"ProfilerStep#3"``)."""
        if align not in self._views:
            self._views[align] = ClusterTimelineView(self._timeline(align))
        return self._views[align]

    def timeline(self, *, python: bool = False, window_us: tuple[float, float] | None = None,
                 window: tuple[float, float] | None = None, max_rects: int | None = None,
                 height: int | None = None, align: str | None = None) -> Any:
        """Every rank's lanes (threads, streams) on one clock, a plotly ``Figure`` as a profile's
        ``timeline()``: each rank's view computed by its worker, ``window_us=(start_us, end_us)``
        (µs on the view's clock) read from each rank by the workers, in full detail. A
        collective's calls on every rank are joined, the rank that arrived last marked. ``align``:
        see :meth:`timeline_view`."""
        if python:
            raise OptionError("timeline(python=True) draws one rank's Python frames: p.rank(r).timeline(python=True)")
        if window is not None:
            if window_us is not None:
                raise OptionError("timeline: pass window_us=(start_us, end_us), not window= as well")
            window_us = (float(window[0]) * 1000.0, float(window[1]) * 1000.0)
        tl = self._timeline(align)
        if max_rects is not None:
            tl.max_rects = int(max_rects)
        view = ClusterTimelineView(tl, window_us=window_us, height=height)
        return view.figure

    def collective_calls(self) -> pd.DataFrame:
        """One row per collective call of every rank (from the summaries), joined per collective:
        ``rank, process_group, seq, name, start_us, dur_us`` (on the common clock, as recorded),
        ``ranks`` (ranks that made that call), ``last`` (this rank's call started last: the
        others waited for it), ``wait_us`` (how long before the last one it started), ``names``
        (``nbprof.analysis.collectives.match_calls``)."""
        return self._timeline().calls()

    def close(self) -> None:
        """End the timeline's zoom workers now (they end by themselves after a while idle; the next
        zoom starts them again)."""
        self._pool.close()

    # -- display ----------------------------------------------------------------------------------

    def report(self, **view: Any) -> Any:
        from .views.report import ClusterReport

        return ClusterReport(self, **view)

    def _ipython_display_(self) -> None:
        """The report, then the timeline as an output of its own (live in a kernel), as a
        profile's; neither merges the ranks' events."""
        from IPython.display import display

        display(self.report())
        if self.summary.events:
            display(self.timeline_view().display_object())

    def __repr__(self) -> str:
        s = self.summary
        parts = [f"{len(self._summaries)} ranks", plural(s.events, "event"), f"self CPU {s.self_cpu_us / 1e3:.3f} ms"]
        if s.has_device:
            parts.append(f"self CUDA {s.self_device_us / 1e3:.3f} ms")
        return f"<ClusterProfile {', '.join(parts)}>"


def _release(pool: RankPool, roots: list[str], client: Any) -> None:
    pool.close()
    for root in roots:
        remove_cache(root, client)


def _rank_averages(s: RankSummary, group_by: str) -> pd.DataFrame:
    """A rank's key averages by ``group_by``: a rank that recorded no shapes (stacks) has its
    operators' rows with every shape ``[]`` (stack ""), as its events would group."""
    if group_by == "op":
        return s.key_averages
    column = "input_shapes" if group_by == "shape" else "stack"
    table = s.shape_averages if group_by == "shape" else s.stack_averages
    if table is not None:
        return table
    out = s.key_averages.copy()
    out.insert(1, column, pd.Series(np.full(len(out), "[]" if group_by == "shape" else "", dtype=object),
                                    index=out.index))
    return out


def _sum_averages(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Key averages of several ranks as one: counts and sums added per (name, [shape | stack],
    kind), in the order the rows first appear (rank by rank, as in the merged events), averages
    recomputed."""
    frame = pd.concat(frames, ignore_index=True)
    extra = [c for c in ("input_shapes", "stack") if c in frame.columns]
    columns = list(KEY_AVERAGE_COLUMNS)
    columns[1:1] = extra
    summed = [c for c in KEY_AVERAGE_COLUMNS if c not in ("name", "kind", "cpu_avg_us", "device_avg_us")]
    out = frame.groupby(["name", *extra, "kind"], sort=False, dropna=False)[summed].sum().reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["cpu_avg_us"] = out["cpu_total_us"] / out["count"]
        out["device_avg_us"] = out["device_total_us"] / out["count"]
    out["name"] = out["name"].astype(object)
    for c in extra:  # the dtype pandas gives a rank's own table (str where pandas infers strings)
        out[c] = pd.Series(out[c].to_numpy(dtype=object), index=out.index)
    return out[columns]


def _aggregate_findings(per_rank: list[tuple[Any, pd.DataFrame]]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The ranks' findings, one line per kind and subject (the op, the device, ...) naming the
    ranks it holds for: the message and evidence of the first rank of the most severe, with
    ``ranks`` and ``by_rank`` (each rank's evidence) in the evidence."""
    groups: dict[tuple[str, str], list[tuple[Any, pd.Series]]] = {}
    for r, frame in per_rank:
        for _, row in frame.iterrows():
            ev = row["evidence"] if isinstance(row["evidence"], dict) else {}
            subject = next((str(ev[k]) for k in _SUBJECT_KEYS if k in ev), "")
            groups.setdefault((str(row["kind"]), subject), []).append((r, row))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    out = []
    for (kind, _), rows in groups.items():
        r0, worst = min(rows, key=lambda x: order[str(x[1]["severity"])])
        ranks = [r for r, _ in rows]
        who = f"rank {r0}" if len(ranks) == 1 else f"ranks {_ranges(ranks)} (the numbers of rank {r0})"
        evidence = dict(worst["evidence"]) if isinstance(worst["evidence"], dict) else {}
        evidence.update(rank=r0, ranks=ranks, by_rank={str(r): row["evidence"] for r, row in rows})
        out.append((kind, str(worst["severity"]), f"{who[0].upper()}{who[1:]}: {worst['message']}", evidence))
    # most ranks first among equal severities; then the order found (rank, then its own order)
    out.sort(key=lambda x: (order[x[1]], -len(x[3]["ranks"])))
    return out


def _ranges(labels: list[Any]) -> str:
    """0, 1, 2, 3, 5 -> "0-3, 5" (other labels listed as they are)."""
    if not all(isinstance(x, (int, np.integer)) for x in labels):
        return ", ".join(str(x) for x in labels)
    xs = sorted(int(x) for x in labels)
    parts: list[str] = []
    start = prev = xs[0]
    for x in [*xs[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ", ".join(parts)
