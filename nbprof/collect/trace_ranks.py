"""A folder's ranks merged into one chrome trace (``ClusterProfile.save``) and read back with its
ranks: the trace's ``nbprofRanks`` key.

The ranks' processes may share their ids (one OS pid on two machines, GPU 0 of each, the
profiler's -1), so the writer gives every (rank, process) a ``pid`` of its own in the file (its
own id where no rank before it took that id, an unused number otherwise) and names it
(``process_name`` "rank 1 · pid 1000", "rank 1 · cuda:0"; ``process_sort_index`` in rank order):
Perfetto and chrome://tracing show the ranks apart. The key says, for each ``pid`` of the file,
the rank and the id the rank's own trace gave that process; and what each rank's trace said of
itself (``parts``: the :class:`TraceMeta` fields of :data:`PART_FIELDS`, in the merged order;
:func:`labels_of` of them are the ranks)::

    "nbprofRanks": {"processes": {"1000": [0, 1000], "1001": [1, 1000], ...}, "parts": [{...}, ...]}

The reader (``collect/chrome_trace``) rebuilds the events' ``rank`` column, their own process ids
and ``meta.parts`` from it, only where the file has it: a file without it is read as before, at
the same cost. A key that does not fit the file (not an object, a rank that is no rank, a ``pid``
that is no event's, an event whose ``pid`` it does not name, parts that are not the ranks) is
one note, and the file is read as one trace.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
import numpy as np
import pandas as pd

from ..events import DEVICE_KINDS, category_mask
from ..meta import TraceMeta
from .trace_schema import INT64_MAX, INT64_MIN, device_properties

__all__ = ["labels_of", "RANKS_KEY", "PART_FIELDS", "WrittenRanks", "written_ranks", "ReadRanks", "read_ranks"]

RANKS_KEY = "nbprofRanks"
# what each rank's trace said of itself, kept in the merged file (the rest of a rank's metadata is
# not: see docs/clusters.md)
PART_FIELDS = ("source", "rank", "world_size", "origin_ns", "base_time_ns", "span_us", "trace_name", "main_thread",
               "thread_names", "device_properties", "record_shapes", "profile_memory", "with_stack", "with_flops",
               "with_modules")

_Rank = Annotated[int, msgspec.Meta(ge=0, lt=1 << 31)]  # as the reader reads distributedInfo's
_Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
_INTEGER = re.compile(r"-?[0-9]{1,19}")


class _Part(msgspec.Struct, gc=False):
    source: str = ""
    rank: _Rank | None = None
    world_size: _Rank | None = None
    origin_ns: _Int64 = 0
    base_time_ns: Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)] = 0
    span_us: Annotated[float, msgspec.Meta(ge=0)] | None = None
    trace_name: str | None = None
    main_thread: _Int64 | None = None
    thread_names: dict[str, str] = {}
    device_properties: list[Any] = []
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False


class _Ranks(msgspec.Struct, gc=False):
    processes: dict[str, tuple[_Rank, _Int64]]
    parts: list[_Part] = []


def labels_of(metas: list[TraceMeta]) -> list[Any]:
    """Each file's rank as its trace says; 0, 1, ... when some trace has none or two say the same."""
    ranks = [m.rank for m in metas]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        return list(range(len(metas)))
    return ranks


# -- written -------------------------------------------------------------------------------------


@dataclass
class WrittenRanks:
    """What the writer writes of a merged profile's ranks."""

    pids: np.ndarray  # each row's pid in the file
    key: dict[str, Any]  # the nbprofRanks key
    metadata: list[dict[str, Any]]  # process_name, process_sort_index, thread_name events


def written_ranks(events: pd.DataFrame, meta: TraceMeta, pids: np.ndarray) -> WrittenRanks | None:
    """The file's pid of each row (``pids``: the id the row's own trace gives its process: its
    pid, a device event's device index, -1 for the profiler's overhead) and the key, for events
    with a ``rank`` column; None where the ranks are not ranks (the file is one trace then)."""
    values = events["rank"].to_numpy()
    try:
        rank = values.astype(np.int64)
    except (TypeError, ValueError, OverflowError):
        return None
    if len(rank) == 0 or not (rank == values).all() or rank.min() < 0 or rank.max() >= 1 << 31:
        return None
    codes, firsts = pd.factorize(pd.MultiIndex.from_arrays([rank, pids]))  # (rank, id) pairs, as they come
    pairs = [(int(r), int(p)) for r, p in firsts]
    # the first rank to hold an id keeps it; the next ones get unused numbers, above every id
    taken: set[int] = set()
    top = int(pids.max())
    fresh = top + 1 if 0 <= top < INT64_MAX - len(pairs) else 0
    written = []
    for _, p in pairs:
        if p in taken:
            while fresh in taken:
                fresh += 1
            p = fresh
        taken.add(p)
        written.append(p)
    # each process named for its rank and what it is (its devices, or its pid), in rank order
    on_device = category_mask(events["kind"], set(DEVICE_KINDS).__contains__)
    device_rows = np.bincount(codes, weights=on_device, minlength=len(pairs))
    is_device = device_rows == np.bincount(codes, minlength=len(pairs))
    seen = pd.DataFrame({"code": codes, "device": events["device"].cat.codes.to_numpy()}).drop_duplicates()
    device_names = np.asarray(events["device"].cat.categories.astype(str), dtype=object)
    devices_of = {c: ", ".join(sorted(device_names[d])) for c, d in seen.groupby("code")["device"]}
    order = sorted(range(len(pairs)), key=lambda i: (pairs[i][0], bool(is_device[i]), pairs[i][1]))
    metadata: list[dict[str, Any]] = []
    processes: dict[str, list[int]] = {}
    for sort_index, i in enumerate(order):
        (r, p), pid = pairs[i], written[i]
        processes[str(pid)] = [r, p]
        what = devices_of[i] if is_device[i] else ("profiler overhead" if p == -1 else f"pid {p}")
        metadata.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                         "args": {"name": f"rank {r} · {what}"}})
        metadata.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                         "args": {"sort_index": sort_index}})
    # what each rank's trace said of itself, where the metadata lists the table's ranks
    parts = meta.parts
    labels = labels_of(parts)
    if not set(rank.tolist()) <= set(labels):
        parts, labels = [], []
    for label, part in zip(labels, parts):  # its threads' names, on its processes
        metadata += [{"ph": "M", "name": "thread_name", "pid": written[i], "tid": int(tid), "args": {"name": name}}
                     for i in order if pairs[i][0] == label and not is_device[i] and pairs[i][1] != -1
                     for tid, name in part.thread_names.items()]
    key = {"processes": processes, "parts": [_part_json(p) for p in parts]}
    return WrittenRanks(pids=np.asarray(written, dtype=np.int64)[codes], key=key, metadata=metadata)


def _part_json(meta: TraceMeta) -> dict[str, Any]:
    out = {name: getattr(meta, name) for name in PART_FIELDS}
    out["thread_names"] = {str(tid): name for tid, name in meta.thread_names.items()}
    return out


# -- read ----------------------------------------------------------------------------------------


@dataclass
class ReadRanks:
    """Each row's rank and its process's id in its rank's trace; each rank's metadata."""

    rank: np.ndarray
    pid: np.ndarray
    parts: list[TraceMeta]


def read_ranks(value: Any, file_pids: np.ndarray, pid: np.ndarray) -> tuple[ReadRanks | None, str | None]:
    """The ranks the key ``value`` gives the rows whose pids are ``pid`` (``file_pids``: the pids of
    every event the file holds, before the reader left any out); or None and the note that says
    why not."""
    try:
        ranks = msgspec.convert(value, _Ranks)
    except msgspec.ValidationError as e:
        return None, _note(str(e))
    problem = _problem(ranks)
    if problem:
        return None, _note(problem)
    keys = np.array(sorted(int(k) for k in ranks.processes), dtype=np.int64)
    present = np.unique(file_pids)
    missing = present[~np.isin(present, keys)]
    if len(missing):
        more = f" (and {len(missing) - 1:,} more)" if len(missing) > 1 else ""
        return None, _note(f"it names no rank for the events of pid {int(missing[0])}{more}")
    unused = keys[~np.isin(keys, present)]
    if len(unused):
        return None, _note(f"it names pid {int(unused[0])}, which no event of the trace has")
    target = [ranks.processes[str(k)] for k in keys.tolist()]
    rank_of = np.array([r for r, _ in target], dtype=np.int64)
    pid_of = np.array([p for _, p in target], dtype=np.int64)
    parts = [TraceMeta(**_part_fields(p)) for p in ranks.parts]
    if parts:
        outside = sorted(set(rank_of.tolist()) - set(labels_of(parts)))
        if outside:
            return None, _note(f"rank {outside[0]} is none of its {len(parts)} parts' ranks")
    at = np.searchsorted(keys, pid)
    return ReadRanks(rank=rank_of[at], pid=pid_of[at], parts=parts), None


def _problem(ranks: _Ranks) -> str:
    """What is wrong with a key of the right types, or ""."""
    if not ranks.processes:
        return "it names no process"
    for key in ranks.processes:  # the writer writes each pid as its decimal digits
        if not _INTEGER.fullmatch(key) or not INT64_MIN <= int(key) <= INT64_MAX or str(int(key)) != key:
            return f"its pid {key[:24]!r} is not an integer"
    for i, part in enumerate(ranks.parts):
        if part.span_us is not None and not math.isfinite(part.span_us):
            return f"part {i}'s span_us is not a time"
        bad = next((t for t in part.thread_names if not _INTEGER.fullmatch(t)), None)
        if bad is not None:
            return f"part {i}'s thread id {bad[:24]!r} is not an integer"
        if device_properties(part.device_properties)[1]:
            return f"part {i}'s device_properties holds values of the wrong type"
    return ""


def _part_fields(part: _Part) -> dict[str, Any]:
    fields = {name: getattr(part, name) for name in PART_FIELDS}
    fields["thread_names"] = {int(t): name for t, name in part.thread_names.items()}
    fields["device_properties"] = device_properties(part.device_properties)[0]
    return fields


def _note(problem: str) -> str:
    return f"{RANKS_KEY}: {problem}: the events' ranks are not read (read as one trace)"
