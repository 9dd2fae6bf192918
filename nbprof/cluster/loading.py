"""Loading a folder of ranks: its trace files, where they are read (:func:`plan`), each one read
and summarized in a worker (:func:`summarize_ranks`, ``cluster.summary.rank_summary`` on a
``cluster.workers.RankPool``), then the :class:`~nbprof.cluster.profile.ClusterProfile`.

- ``workers``: ``None`` (default): one process per core, except a folder under
  :data:`IN_PROCESS_BYTES`, read in this process (a spawned worker takes ~1.5 s to start:
  importing pandas and nbprof, measured, more than such a folder takes to read); ``0``: in this
  process, one rank at a time (its events freed before the next), e.g. to debug; ``n``: ``n``
  processes (spawned, never running the caller's ``__main__``: ``cluster.workers``).
- ``client``: a ``dask.distributed.Client``; without one, the client already active in the
  session (``distributed.get_client()``) if dask is imported and one exists. Dask is imported only
  then (``pip install "dask[distributed]"``, or nbprof's ``dask`` extra).

Errors: a rank file that cannot be read is a one-line TraceError naming it, and so is running out
of memory on it (MemoryError); a worker that dies (the OOM killer's SIGKILL) a one-line
TraceError saying how it ended and which rank it was reading, with its size
(:func:`death_message`); either, or an interrupt, ends every worker before the error goes on
(nothing is left running).
"""

from __future__ import annotations

import os
import re
from typing import Any, Generator

from ..errors import OptionError, TraceError
from ..system import max_workers, usable_cpus
from .profile import ClusterProfile
from .summary import RankSummary, file_size, rank_summary
from .timeline import new_cache_dir, remove_cache
from .workers import Death, RankPool, active_dask_client

__all__ = ["load_folder", "trace_files", "plan", "summarize_ranks", "death_message", "IN_PROCESS_BYTES"]

# Below this many bytes of trace files in all, a folder is read in this process by default: a
# spawned worker's start (~1.5 s) costs more than reading such a folder (~10 MB/s of gzip'd trace).
IN_PROCESS_BYTES = 16 << 20

_TRACE_FILE = re.compile(r"\.json(\.gz)?$")


def trace_files(folder: str) -> list[str]:
    """The chrome traces in a folder (as tensorboard_trace_handler writes them), sorted."""
    files = sorted(
        os.path.join(folder, f) for f in os.listdir(folder) if _TRACE_FILE.search(f) and not f.startswith(".")
    )
    if not files:
        raise TraceError(f"{folder}: no trace files (.json or .json.gz) in this folder")
    return files


def load_folder(folder: str, files: list[str], *, workers: int | None = None, client: Any = None,
                progress: bool = True, limit: Any = None) -> ClusterProfile:
    """``files`` (two or more ranks of ``folder``) as a ClusterProfile, each rank read and summarized
    where :func:`plan` says; ``limit``: ``read_trace_file``'s ``max_bytes``."""
    n, dask = plan(files, workers, client)
    summaries = summarize_ranks(files, workers=n, client=dask, progress=progress, limit=limit)
    return ClusterProfile(folder, summaries, workers=n, client=dask, limit=limit)


def plan(files: list[str], workers: int | None = None, client: Any = None) -> tuple[int, Any]:
    """Where the ranks are read: (worker processes, 0 for this process; the Dask client or None)."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
        raise OptionError(f"workers must be a number of processes (0: in this process); got {workers!r}")
    if client is None and workers is None:
        client = active_dask_client()
    if client is not None:
        return 0, client
    if workers is None:
        small = sum(os.path.getsize(f) for f in files) < IN_PROCESS_BYTES
        workers = 0 if small else min(usable_cpus(), len(files))
    return max_workers(min(workers, len(files))), None


def summarize_ranks(files: list[str], *, workers: int | None = None, client: Any = None,
                    progress: bool = True, limit: Any = None) -> list[RankSummary]:
    """``rank_summary`` of each file (in ``files``' order), where :func:`plan` says; their
    timelines' caches in a new folder (``cluster.timeline.new_cache_dir``: the profile removes it).
    The workers are the load's own (they keep the memory they free, and end with the load)."""
    workers, client = plan(files, workers, client)
    cache = new_cache_dir()
    how = "Dask" if client is not None else "" if workers == 0 else \
        f"{workers} worker process{'es' if workers > 1 else ''}"
    pool = RankPool(workers, client, keep_freed_memory=True, idle_s=None)
    try:
        results = pool.as_completed(rank_summary, [(f, cache, limit) for f in files],
                                    died=lambda death, left: death_message(files, death, left))
        return _collect(results, len(files), progress, how)
    except BaseException:
        remove_cache(cache, client)
        raise
    finally:
        pool.close()


def _collect(results: Generator[tuple[int, RankSummary], None, None], n: int, progress: bool,
             how: str) -> list[RankSummary]:
    from ..views.progress import RankProgress

    bar = RankProgress(n, enabled=progress, how=how)
    out: list[RankSummary | None] = [None] * n
    try:
        for i, summary in results:
            out[i] = summary
            bar.advance()
    finally:
        results.close()  # an error or an interrupt here stops the workers now, not when collected
        bar.close()
    return [s for s in out if s is not None]


def death_message(files: list[str], death: Death | None, left: int) -> str:
    """What a dead worker was doing, in one line: how it ended (SIGKILL is what Linux's
    out-of-memory killer sends; Windows has no signals: ``system.describe_exit``) and the rank it
    was reading, with its size; ``left``: how many ranks were not read."""
    folder = os.path.dirname(files[0])
    not_read = f"{left} of {len(files)} ranks not read"
    if death is None:
        return f"{folder}: a worker process ended unexpectedly; {not_read}"
    if death.job is None:
        return f"{folder}: a worker process {death.how} as it started, before reading a rank (its error, if any, " \
               f"is printed above); {not_read}"
    path = files[death.job]
    what = f"while reading {os.path.basename(path)} ({file_size(path)})"
    if death.out_of_memory:
        cause = ("the out-of-memory killer sends SIGKILL, so it most likely ran out of memory" if death.code < 0
                 else "it ran out of memory")
        return (f"{folder}: a worker process {death.how} {what}: {cause}; each worker holds one rank's events while "
                f"it reads it: try fewer workers= (now {death.workers}; 0 reads one rank at a time in this "
                f"process); {not_read}")
    return f"{folder}: a worker process {death.how} {what}; {not_read}"
