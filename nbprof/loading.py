"""nbprof.load_trace: one chrome trace file as a TorchProfile, or a folder of them (one per rank) as a
ClusterProfile (``nbprof.cluster``)."""

from __future__ import annotations

import os
import re
from typing import Any

from .collect.chrome_trace import max_trace_bytes, read_trace_file
from .errors import TraceError

__all__ = ["load_trace", "trace_files"]

_TRACE_FILE = re.compile(r"\.json(\.gz)?$")


def trace_files(folder: str) -> list[str]:
    """The chrome traces in a folder (as tensorboard_trace_handler writes them), sorted."""
    files = sorted(
        os.path.join(folder, f) for f in os.listdir(folder) if _TRACE_FILE.search(f) and not f.startswith(".")
    )
    if not files:
        raise TraceError(f"{folder}: no trace files (.json or .json.gz) in this folder")
    return files


def load_trace(path: Any, *, workers: int | None = None, client: Any = None, progress: bool = True,
               max_bytes: int | str | None = None) -> Any:
    """One trace file: a TorchProfile; a folder of two or more: a ClusterProfile, each rank
    summarized in a worker (``nbprof.cluster``: ``workers``, ``client``; ``progress``: the bar).

    ``max_bytes``: the most JSON read from one file (decompressed), 4 GiB by default or
    ``$NBPROF_MAX_TRACE_BYTES``; bytes, or text such as "16G" (``collect.chrome_trace``)."""
    from .model import TorchProfile

    path = os.fspath(path)
    limit = max_trace_bytes(max_bytes)  # a bad value: an error before anything is read
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        files = trace_files(path)
        if len(files) == 1:
            return TorchProfile.from_trace(read_trace_file(files[0], max_bytes=limit))
        from .cluster import ClusterProfile, plan, summarize_ranks

        n, dask = plan(files, workers, client)
        summaries = summarize_ranks(files, workers=n, client=dask, progress=progress, limit=limit)
        return ClusterProfile(path, summaries, workers=n, client=dask, limit=limit)
    return TorchProfile.from_trace(read_trace_file(path, max_bytes=limit))
