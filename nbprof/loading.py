"""nbprof.load_trace: one chrome trace file as a TorchProfile, or a folder of them (one per rank) as a
ClusterProfile (``nbprof.cluster``). nbprof.load_prof: cProfile's ``.prof`` files as a PythonProfile.
nbprof.load_snapshot: a CUDA memory snapshot (``_dump_snapshot``'s pickle, read as data) as a SnapshotProfile."""

from __future__ import annotations

import os
from typing import Any

from .collect.chrome_trace import read_trace_file
from .collect.trace_limits import max_trace_bytes
from .errors import OptionError, TraceError

__all__ = ["load_trace", "load_prof", "is_prof_file", "load_snapshot", "is_snapshot_file"]

def load_trace(path: Any, *, workers: int | None = None, client: Any = None, progress: bool = True,
               max_bytes: int | str | None = None) -> Any:
    """One trace file: a TorchProfile; a folder of two or more: a ClusterProfile, each rank
    summarized in a worker (``nbprof.cluster.loading``: ``workers``, ``client``; ``progress``: the bar).

    ``max_bytes``: the most JSON read from one file (decompressed), 4 GiB by default or
    ``$NBPROF_MAX_TRACE_BYTES``; bytes, or text such as "16G" (``collect.trace_limits``)."""
    from .model import TorchProfile

    path = os.fspath(path)
    limit = max_trace_bytes(max_bytes)  # a bad value: an error before anything is read
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        from .cluster.loading import load_folder, trace_files

        files = trace_files(path)
        if len(files) == 1:
            return TorchProfile.from_trace(read_trace_file(files[0], max_bytes=limit))
        return load_folder(path, files, workers=workers, client=client, progress=progress, limit=limit)
    return TorchProfile.from_trace(read_trace_file(path, max_bytes=limit))


def load_prof(path: Any) -> Any:
    """A ``.prof`` file (``python -m cProfile -o``, ``pstats.Stats.dump_stats``, ``%%cprofile
    --dump``, ``%prun -D``) as a :class:`~nbprof.model.PythonProfile`; a list of them added up as
    ``pstats.Stats(a, b, ...)`` adds them (each function's calls and times, each caller's)."""
    from .collect.cprofile import merge_raw, read_prof_file
    from .meta import PythonMeta
    from .model import PythonProfile

    given = [path] if isinstance(path, (str, os.PathLike)) else path
    try:
        paths: list[str] = [str(os.fspath(p)) for p in given]
    except TypeError:
        raise OptionError(f"load_prof takes a .prof file's path or a list of them, not {type(path).__name__}") from None
    if not paths:
        raise OptionError("load_prof: no files given")
    raws = [read_prof_file(p) for p in paths]
    raw = raws[0] if len(raws) == 1 else merge_raw(raws)
    return PythonProfile(raw, PythonMeta(source=", ".join(paths), files=paths))


def is_prof_file(path: str) -> bool:
    """``path`` names a cProfile file: by its suffix, or (a file of any name) by its first bytes."""
    from .collect.cprofile import PROF_SUFFIXES, is_pstats_head

    if path.lower().endswith(PROF_SUFFIXES):
        return True
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            return is_pstats_head(f.read(2))
    except OSError:
        return False


def load_snapshot(path: Any, *, max_bytes: int | str | None = None) -> Any:
    """A CUDA memory snapshot file (``torch.cuda.memory._dump_snapshot``; ``.gz`` too) as a
    :class:`~nbprof.snapshot.SnapshotProfile`, read as data: nothing in the file runs
    (``collect.snapshot``); at most ``max_bytes`` of pickle (as ``load_trace``'s)."""
    from .collect.snapshot import read_snapshot_file
    from .snapshot import SnapshotProfile

    try:
        path = os.fspath(path)
    except TypeError:
        raise OptionError(f"load_snapshot takes a snapshot file's path, not {type(path).__name__}") from None
    return SnapshotProfile(read_snapshot_file(path, max_bytes=max_trace_bytes(max_bytes)))


def is_snapshot_file(path: str) -> bool:
    """``path`` names a memory snapshot: by its suffix, or by its first bytes (a pickle; a gzip'd
    file named as one)."""
    from .collect.snapshot import SNAPSHOT_SUFFIXES, is_pickle_head

    if path.lower().endswith(SNAPSHOT_SUFFIXES):
        return True
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            return is_pickle_head(f.read(2))
    except OSError:
        return False
