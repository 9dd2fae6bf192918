"""nbprof.load_trace: one chrome trace file as a TorchProfile, or a folder of them (one per rank) as a
ClusterProfile (``nbprof.cluster``)."""

from __future__ import annotations

import os
import re
from typing import Any

from .collect.chrome_trace import read_trace_file
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


def load_trace(path: Any, *, workers: int | None = None, client: Any = None, progress: bool = True) -> Any:
    """One trace file: a TorchProfile; a folder of two or more: a ClusterProfile, each rank
    summarized in a worker (``nbprof.cluster``: ``workers``, ``client``; ``progress``: the bar)."""
    from .model import TorchProfile

    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        files = trace_files(path)
        if len(files) == 1:
            return TorchProfile.from_trace(read_trace_file(files[0]))
        from .cluster import ClusterProfile, plan, summarize_ranks

        n, dask = plan(files, workers, client)
        return ClusterProfile(path, summarize_ranks(files, workers=n, client=dask, progress=progress), workers=n,
                              client=dask)
    return TorchProfile.from_trace(read_trace_file(path))
