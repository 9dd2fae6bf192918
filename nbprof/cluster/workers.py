"""Where a folder's per-rank work runs: :class:`RankPool`, one mechanism for loading the ranks
(``cluster.loading``: each rank read and summarized) and for the timeline's views and zooms
(``cluster.timeline``: each rank's part drawn from its cache).

A pool runs ``fn(*job)`` for a list of jobs (one per rank, as a rule) in one of three places:

- ``workers`` spawned processes (``workers >= 1``). Spawned, never forked: the notebook may hold
  torch / CUDA threads, which a forked child inherits in whatever state they were. They never run
  the caller's ``__main__`` (:class:`_WorkerProcess`): a script without an ``if __name__ ==
  "__main__":`` guard loads a folder as a notebook does. Started on the first call, kept while
  calls come (``idle_s`` idle ends them; ``None``: kept until :meth:`RankPool.close`), ended with
  their owner or at exit;
- a Dask ``client`` (each job on the worker named for it, where one is: the rank's cache is there);
- this process (``workers=0``), one job at a time.

What can go wrong, the same for every use: a job's error goes on as it is, and the jobs not
started are cancelled (the workers stay, for the next call); an interrupt (``KeyboardInterrupt``),
or the caller dropping the results half-way, ends the workers at once (a rank takes seconds:
waiting for the running ones would keep an interrupted notebook busy); a worker that dies (the
out-of-memory killer's SIGKILL, a crash) ends the others and is one ``TraceError`` line, worded
by the caller from a :class:`Death`: how it ended (``system.describe_exit``) and which job it had
started (each worker says so as it starts one).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import multiprocessing
import os
import sys
import threading
import time
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generator

from ..errors import TraceError
from ..system import describe_exit, out_of_memory_exit

__all__ = ["RankPool", "Death", "death_of", "active_dask_client", "IDLE_S"]

IDLE_S = 600.0  # a kept pool's workers idle this long are ended (the next call starts them again, ~1.5 s)


@dataclass(frozen=True)
class Death:
    """A worker process that died: how (``system.describe_exit``: "was killed by SIGKILL"), its exit
    code, whether that says it ran out of memory, the job it had started (None: it died as it
    started, before any), and how many workers the pool had."""

    how: str
    code: int
    out_of_memory: bool
    job: int | None
    workers: int


Died = Callable[[Death | None, int], str]  # (the death, if one was found; jobs left) -> the error's line


class RankPool:
    """``fn(*job)`` for each job, in worker processes, on Dask or in this process (see the module
    doc). ``keep_freed_memory``: the workers' C allocator keeps what it frees (for workers that read
    ranks and end: :func:`_keep_freed_memory`); ``idle_s``: idle workers end after this long (None:
    at :meth:`close`)."""

    def __init__(self, workers: int, client: Any = None, *, keep_freed_memory: bool = False,
                 idle_s: float | None = IDLE_S) -> None:
        self.workers = workers
        self.client = client
        self.keep_freed_memory = keep_freed_memory
        self.idle_s = idle_s
        self._pool: cf.ProcessPoolExecutor | None = None
        self._starts: Any = None  # the queue the workers tell each job they start to: (pid, job)
        self._processes: list[Any] = []  # the workers, kept to read how one ended (the pool drops them)
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.started = 0  # how many times processes were started (the benchmark and tests read it)
        _POOLS.add(self)

    @property
    def kind(self) -> str:
        return "dask" if self.client is not None else ("processes" if self.workers else "this process")

    @property
    def running(self) -> bool:
        return self._pool is not None

    def map(self, fn: Callable[..., Any], jobs: list[tuple], where: list[str] | None = None) -> list[Any]:
        """``fn(*job)`` for each job, the results in the jobs' order; ``where``: the Dask worker of
        each job ("": any)."""
        out: list[Any] = [None] * len(jobs)
        for i, result in self.as_completed(fn, jobs, where, died=_view_death):
            out[i] = result
        return out

    def as_completed(self, fn: Callable[..., Any], jobs: list[tuple], where: list[str] | None = None, *,
                     died: Died | None = None) -> Generator[tuple[int, Any], None, None]:
        """``(index, fn(*jobs[index]))`` as each job finishes; ``died`` words the error of a worker
        that died (default: the views'). Closing the generator before its end ends the workers."""
        if not jobs:
            return
        if self.client is not None:
            yield from self._on_dask(fn, jobs, where)
        elif not self.workers:
            for i, job in enumerate(jobs):
                yield i, fn(*job)
        else:
            yield from self._in_processes(fn, jobs, died or _view_death)

    def _on_dask(self, fn: Callable[..., Any], jobs: list[tuple], where: list[str] | None
                 ) -> Generator[tuple[int, Any], None, None]:
        from distributed import as_completed

        # a job named for a worker runs there (its rank's cache is there), others anywhere
        futures = [self.client.submit(fn, *job, pure=False, **({"workers": [w]} if w else {}))
                   for job, w in zip(jobs, where or [""] * len(jobs))]
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for fut in as_completed(futures):
                yield index[fut.key], fut.result()
        except BaseException:
            self.client.cancel(futures)
            raise

    def _in_processes(self, fn: Callable[..., Any], jobs: list[tuple], died: Died
                      ) -> Generator[tuple[int, Any], None, None]:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            pool = self._start()
            futures: dict[cf.Future, int] = {}
            try:
                try:
                    for i, job in enumerate(jobs):
                        try:
                            fut = pool.submit(_job, i, fn, job)
                        except (OSError, ValueError):
                            # a worker died while submit() started the next one: the pool's manager
                            # thread marks it broken and closes its queues under submit(), which then
                            # fails to send them to the new process ("handle is closed") where it
                            # would raise BrokenProcessPool a moment later (CPython 3.11-3.13)
                            broken = getattr(pool, "_broken", False)
                            if not broken:
                                raise
                            raise cf.process.BrokenProcessPool(broken) from None
                        futures[fut] = i
                        # submit() starts the workers: kept here to read how one ended
                        self._processes = list((getattr(pool, "_processes", None) or {}).values()) or self._processes
                    for fut in cf.as_completed(futures):
                        yield futures[fut], fut.result()
                except cf.process.BrokenProcessPool:
                    # a worker died (as early as while the jobs were handed out: submit() then
                    # raises); the pool does not say which, nor how
                    done = sum(f.done() and not f.cancelled() and f.exception() is None for f in futures)
                    death = death_of(self._processes, self._starts)
                    self._shutdown()
                    raise TraceError(died(death, len(jobs) - done)) from None
                except Exception:  # a job's error: the others not started are let go, the workers stay
                    for f in futures:
                        f.cancel()
                    raise
            except BaseException as e:  # an interrupt, or the results dropped half-way: end the workers now
                if not isinstance(e, Exception):
                    self._shutdown()
                raise
            finally:
                self._arm()

    def _start(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            context = _WorkerContext()
            self._starts = context.SimpleQueue()
            self._processes = []
            self._pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=context,
                                                initializer=_start_worker, initargs=(self._starts,
                                                                                     self.keep_freed_memory))
            self.started += 1
        return self._pool

    def _arm(self) -> None:
        if self._pool is not None and self.idle_s is not None:
            self._timer = threading.Timer(self.idle_s, self.close)
            self._timer.daemon = True
            self._timer.start()

    def _shutdown(self) -> None:
        """End the workers now: what has not started is cancelled, the running ones are ended.
        Python 3.14 has ``terminate_workers()``; before it, the pool's processes are only reachable
        as ``_processes``."""
        pool, self._pool = self._pool, None
        starts, self._starts = self._starts, None
        terminate = getattr(pool, "terminate_workers", None)
        if terminate is not None:
            terminate()
        elif pool is not None:
            procs = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() drops it
            pool.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                p.terminate()
            for p in procs:
                p.join()
        if starts is not None:
            starts.close()

    def close(self) -> None:
        """End the worker processes now (a later call starts new ones)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._shutdown()


_POOLS: "weakref.WeakSet[RankPool]" = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    for pool in list(_POOLS):
        pool.close()


def _view_death(death: Death | None, left: int) -> str:
    """A worker that died drawing a view: the next view starts new ones."""
    how = "ended unexpectedly" if death is None else death.how + (" (out of memory)" if death.out_of_memory else "")
    return f"a timeline worker process {how}; the next view starts new ones"


def death_of(processes: list[Any], starts: Any) -> Death | None:
    """The worker that died, among ``processes`` (its exit code; SIGKILL is what Linux's
    out-of-memory killer sends; Windows has no signals: ``system.describe_exit``), and the job it
    had started last (read from ``starts``, the queue each worker tells its jobs to); None when no
    worker ended abnormally."""
    import signal

    started: dict[int, int] = {}  # pid -> the job it started last
    try:
        while starts is not None and not starts.empty():
            pid, i = starts.get()
            started[pid] = i
    except (OSError, EOFError, ValueError):  # a message cut short by the death: what came before
        pass
    time.sleep(0.05)  # the pool's thread ends the other workers (SIGTERM): let their exit codes land
    # (multiprocessing reports a worker it terminated as -SIGTERM on Windows too)
    dead = [p for p in processes if p.exitcode not in (None, 0, -signal.SIGTERM)] or \
        [p for p in processes if p.exitcode not in (None, 0)]
    if not dead:
        return None
    proc = dead[0]
    return Death(how=describe_exit(proc.exitcode), code=proc.exitcode, out_of_memory=out_of_memory_exit(proc.exitcode),
                 job=started.get(proc.pid), workers=len(processes))


def active_dask_client() -> Any:
    """The Dask client of this session, if dask.distributed is imported and one exists."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_client

    try:
        return get_client()
    except ValueError:  # no client in this session
        return None


# -- in a worker process ---------------------------------------------------------------------------


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
    def _Popen(process_obj: Any) -> Any:  # pragma: no mutate block (in a worker)
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")  # no __spec__ name, no __file__
        try:
            return multiprocessing.context.SpawnProcess._Popen(process_obj)
        finally:
            if main is not None:
                sys.modules["__main__"] = main


class _WorkerContext(multiprocessing.context.SpawnContext):
    """The spawn start method, with :class:`_WorkerProcess`."""

    Process = _WorkerProcess


_starts: Any = None  # in a worker: the queue it tells the jobs it starts to


def _start_worker(queue: Any, keep_freed_memory: bool) -> None:  # pragma: no mutate block (in a worker)
    global _starts
    _starts = queue
    if keep_freed_memory:
        _keep_freed_memory()


def _job(index: int, fn: Callable[..., Any], job: tuple) -> Any:  # pragma: no mutate block (in a worker)
    if _starts is not None:
        _starts.put((os.getpid(), index))
    return fn(*job)


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _keep_freed_memory() -> None:  # pragma: no mutate block (in a worker)
    """Have the C allocator of this worker keep the memory it frees, to be used again.

    Reading a rank allocates and frees ~1.2 GB over and over (the JSON text, each column, each
    table's temporaries). glibc by default maps every block above a threshold (adapting up to
    32 MB) fresh from the kernel and unmaps it when freed, and trims its heap's top: each reuse
    then costs page faults, the kernel zeroing each page again. Measured on one rank of 1 M events
    read three times in a process: ~380,000 page faults and ~1.1 s of system time per rank; with
    every block from the heap and the heap never trimmed, ~217,000 (pymalloc's own arenas, left
    as they are) and ~0.55 s, the rank 0.4-0.6 s faster (5.4 -> 4.8 s); the worker's peak
    1.22 -> 1.40 GB. Only in the load's own workers, which end when the folder is read (what they
    kept goes with them); never in the notebook's process, whose allocator is the user's, nor in
    the timeline's workers, which are kept. Not glibc (macOS, musl): nothing to do."""
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
