"""nbprof.load_trace: one chrome trace file, or a folder of them (one per rank), as a TorchProfile."""

from __future__ import annotations

import os
import re
from typing import Any

from .collect.chrome_trace import read_trace_file
from .errors import TraceError
from .events import concat_traces

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


def load_trace(path: Any) -> Any:
    from .model import TorchProfile

    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        files = trace_files(path)
        if len(files) == 1:
            return TorchProfile.from_trace(read_trace_file(files[0]))
        traces = [read_trace_file(f) for f in files]
        ranks = [t.meta.rank for t in traces]
        if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
            ranks = list(range(len(traces)))  # no (distinct) ranks in the files: number them
        merged = concat_traces(traces, labels=ranks, label_column="rank")
        merged.meta.source = path
        merged.meta.files = files
        return TorchProfile.from_trace(merged)
    return TorchProfile.from_trace(read_trace_file(path))
