"""CUDA memory snapshots: the caching allocator's state and history, read as data, never run.

Two ways in, one table set out (:class:`SnapshotData`):

- a file ``torch.cuda.memory._dump_snapshot`` wrote (what pytorch.org/memory_viz opens): a pickle
  of plain dicts, lists, strings and numbers (``torch/cuda/memory.py``'s ``Snapshot``, ``Segment``,
  ``Block``, ``TraceEntry`` and ``Frame`` TypedDicts), read by :func:`read_snapshot_file`;
- ``%%torchprof --snapshot``: :class:`CudaHistory` turns the allocator's history on around the
  cell (``_record_memory_history``) and takes ``torch.cuda.memory._snapshot()`` at its end, the
  same dict in memory.

A snapshot is data, never code. A pickle can name any Python callable and call it while it is
read (``__reduce__``: ``os.system`` and friends), so the file is read by an unpickler whose
``find_class`` refuses every global: dicts, lists, tuples, strings, bytes, numbers, bools and
None are built by opcodes of their own and are all it can make. A crafted file fails in one line
(``TraceError``) before anything it names is imported, let alone called. What torch writes never
needs a global: ``_dump_snapshot`` is ``pickle.dump`` of the dict ``_C._cuda_memorySnapshot``
builds from ``py::dict``, ``py::list``, ``py::str``, Python ints, bools, floats and one tuple
(``segment_pool_id``), in every torch from 2.1 (when ``time_us`` came) to 2.13 (read in
``torch/csrc/cuda/Module.cpp`` of each; the C++ API's ``_memory_snapshot_pickled`` writes the same
values with TorchScript's pickler, untagged: no globals either). Sizes are bounded as for traces:
at most ``max_bytes`` of pickle from one file (``collect.trace_limits.max_trace_bytes``: 4 GiB by
default, ``$NBPROF_MAX_TRACE_BYTES``), a ``.gz`` decompressed as it is read and held to the same
limit.

Reading is columnar: one comprehension per field over the entries (no per-entry Python object is
kept but the frames lists torch shares), strings as pandas categories. Stacks are interned by the
identity of their frames list: torch symbolizes each traceback once and hands the same list to
the trace entry and the block of one allocation, and pickle keeps that sharing; frames themselves
stay as read until a view asks for one (``analysis.snapshot``): a million entries' frames are
never walked to draw a chart.
"""

from __future__ import annotations

import gc
import gzip
import inspect
import io
import os
import pickle
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter, methodcaller
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..format import plural
from .trace_limits import TraceLimit, max_trace_bytes

__all__ = ["SnapshotData", "read_snapshot_file", "parse_snapshot", "load_data_only", "is_pickle_head",
           "snapshot_dict", "CudaHistory", "ACTIONS", "SNAPSHOT_SUFFIXES", "HISTORY_MAX_ENTRIES"]

_REQUIRED: Any = object()

# every action the allocator writes (torch 2.1-2.13); another one is kept as "other" and counted
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot", "other")
BLOCK_STATES = ("active_allocated", "active_pending_free", "inactive", "other")
SNAPSHOT_SUFFIXES = (".pickle", ".pkl", ".pickle.gz", ".pkl.gz")

# --snapshot's ring buffer: torch keeps the last this many alloc/free entries (each holds its
# Python stack: several KB, torch's docs say, so a million is some GB at most, as a bound should)
HISTORY_MAX_ENTRIES = 1_000_000


@dataclass
class SnapshotData:
    """One snapshot as tables (bytes and µs in the column names; devices as CUDA indexes).

    ``segments``: one row per segment (``cudaMalloc``'d memory) at the snapshot: ``device``,
    ``address``, ``total_size_bytes``, ``stream``, ``segment_type``, ``pool_id``, ``is_expandable``,
    and what torch itself counted in it (``torch_allocated_bytes``, ``torch_active_bytes``,
    ``torch_requested_bytes``; -1 where the file has none), ``stack`` (its allocation's stack).
    ``blocks``: one row per block of those segments, in address order: ``device``, ``segment`` (its
    row in ``segments``), ``address``, ``size_bytes``, ``requested_bytes``, ``state``, ``stack``.
    ``trace``: one row per history entry, per device in the order recorded: ``device``, ``entry``
    (its position in that device's trace), ``action``, ``address``, ``size_bytes``, ``stream``,
    ``time_us`` (the wall clock's µs since the epoch; NaN before torch 2.1), ``device_free_bytes``
    (an OOM's: what CUDA still had free; -1 elsewhere), ``stack``.
    ``stacks``: the frames of each ``stack`` id as read (a list of ``{"filename", "line",
    "name"}`` dicts, innermost first); -1: none recorded."""

    source: str
    segments: pd.DataFrame
    blocks: pd.DataFrame
    trace: pd.DataFrame
    stacks: list[Any]
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    max_entries: int | None = None
    """The history's bound when nbprof recorded it (--snapshot); None for a file."""


# ------------------------------------------------------------------------------- reading a file


class _RefusedGlobal(Exception):
    """The pickle named a global (a class or a function): a snapshot never does."""


class _DataOnly(pickle.Unpickler):
    """An unpickler that builds plain data only: every global a pickle names is refused, so no
    class is imported and no callable runs (``__reduce__``, ``INST``, ``OBJ``, extensions: each
    goes through ``find_class``)."""

    def find_class(self, module: str, name: str) -> Any:
        raise _RefusedGlobal(f"{module}.{name}"[:120])

    def persistent_load(self, pid: Any) -> Any:
        raise _RefusedGlobal("a persistent id")


class _Bounded(io.RawIOBase):
    """``read`` over a (decompressing) file that fails past ``limit`` bytes: a gzip'd pickle is
    held to the same bound as a plain one, however far it expands."""

    def __init__(self, f: Any, path: str, limit: TraceLimit) -> None:
        self.f, self.path, self.limit, self.n = f, path, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.f.read(len(b))
        self.n += len(data)
        if self.n > self.limit.bytes:
            raise TraceError(_too_big(self.path, self.n, self.limit, "decompressed"))
        b[: len(data)] = data
        return len(data)


def _too_big(path: str, n: int, limit: TraceLimit, what: str = "") -> str:
    from .trace_limits import size_text

    more = size_text(max(2 * limit.bytes, 8 << 30), unit="")
    return (f"{path}: more than {size_text(limit.bytes)} of pickle{' ' + what if what else ''}, the most nbprof "
            f"reads from one file; if it is a memory snapshot, read it with load_snapshot(path, "
            f'max_bytes="{more}")')


def is_pickle_head(head: bytes) -> bool:
    """A pickle of protocol 2 or later (what ``pickle.dump`` and TorchScript's pickler write)."""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: a million entries are some ten million new containers,
    and each collection walks them all again (unpickling a 1 M-entry snapshot: 5.9 s with it, 1.4 s
    without, measured). Nothing made here is garbage before it is read."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_data_only(f: Any, source: str) -> Any:
    """Unpickle ``f`` building plain data only; whatever is wrong: a one-line TraceError."""
    try:
        with _no_gc():
            return _DataOnly(f).load()
    except _RefusedGlobal as e:
        raise TraceError(f"{source}: not a memory snapshot: the pickle names {e} (code, which a snapshot never "
                         "holds); nothing in it was run") from None
    except TraceError:
        raise
    except EOFError:
        raise TraceError(f"{source}: the pickle ends too early (truncated?): not a whole memory snapshot") from None
    except MemoryError:
        raise TraceError(f"{source}: not enough memory to read it") from None
    except Exception as e:  # UnpicklingError, ValueError, struct.error, ...: a damaged or foreign file
        text = str(e).splitlines()[0][:120] if str(e).strip() else type(e).__name__
        raise TraceError(f"{source}: not a readable pickle ({text})") from None


def read_snapshot_file(path: str | os.PathLike, *, max_bytes: int | str | TraceLimit | None = None) -> SnapshotData:
    """A file ``torch.cuda.memory._dump_snapshot`` wrote (or its ``.gz``) -> :class:`SnapshotData`,
    nothing in it run; at most ``max_bytes`` of pickle. Whatever is wrong: a one-line TraceError."""
    path = os.fspath(path)
    limit = max_bytes if isinstance(max_bytes, TraceLimit) else max_trace_bytes(max_bytes)
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TraceError(f"{path}: is a folder; pass a memory snapshot (.pickle, as _dump_snapshot writes it)")
    try:
        size = os.path.getsize(path)
        if size == 0:
            raise TraceError(f"{path}: the file is empty, not a memory snapshot")
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            if head == b"\x1f\x8b":
                with gzip.GzipFile(fileobj=f) as z:
                    obj = load_data_only(io.BufferedReader(_Bounded(z, path, limit)), path)
            else:
                if size > limit.bytes:
                    raise TraceError(_too_big(path, size, limit))
                if not is_pickle_head(head):
                    raise TraceError(f"{path}: not a memory snapshot (a pickle, as torch.cuda.memory._dump_snapshot "
                                     f"writes it, starts with 0x80; this file starts with {head!r})")
                obj = load_data_only(f, path)
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None
    return parse_snapshot(obj, path)


# --------------------------------------------------------------------------------- its tables


def _field(items: list[dict], key: str, default: Any = _REQUIRED) -> list[Any]:
    """One field of every dict (C-speed ``map``; a missing required field: a KeyError)."""
    if default is _REQUIRED:
        return list(map(itemgetter(key), items))
    return list(map(methodcaller("get", key, default), items))


def _ints(values: list[Any], what: str) -> np.ndarray:
    """Whole numbers (bools too) -> int64. numpy's own inference over the column says whether
    they all are: a float, a string, None or a number past 64 bits makes it another kind."""
    if not values:
        return np.zeros(0, np.int64)
    try:
        out = np.array(values)
    except (ValueError, TypeError, OverflowError):  # ragged (lists among them)
        out = np.array(values, dtype=object)
    if out.dtype.kind in "biu" and out.ndim == 1:
        if out.dtype.kind == "u" and out.max() > np.iinfo(np.int64).max:
            raise _Bad(what, "a number out of the 64-bit range")
        return out.astype(np.int64)
    bad = next((v for v in values if type(v) is not int and type(v) is not bool), None)
    if bad is None:
        raise _Bad(what, "a number out of the 64-bit range")
    raise _Bad(what, f"{type(bad).__name__} {str(bad)[:40]!r} where a whole number belongs")


class _Bad(Exception):
    def __init__(self, what: str, why: Any) -> None:
        super().__init__(f"{what}: {why if isinstance(why, str) else type(why).__name__ + ' ' + str(why)[:60]}")


def _texts(values: list[Any], what: str) -> pd.Categorical:
    if not all(type(v) is str for v in values):
        bad = next(v for v in values if type(v) is not str)
        raise _Bad(what, f"{type(bad).__name__} where text belongs")
    return pd.Categorical(values)


def _choices(values: list[Any], what: str, categories: tuple[str, ...]) -> pd.Categorical:
    """Text from a known set (actions, states) as categories; another text (or value) is the last
    category ("other"), counted in the notes."""
    code = {c: i for i, c in enumerate(categories)}
    try:
        codes = np.fromiter(map(code.get, values, repeat(len(categories) - 1)), np.int64, len(values))
    except TypeError as e:  # an unhashable value (a list) where text belongs
        raise _Bad(what, e) from None
    return pd.Categorical.from_codes(codes, categories=list(categories))


def parse_snapshot(obj: Any, source: str = "<snapshot>") -> SnapshotData:
    """A snapshot as ``torch.cuda.memory._snapshot()`` returns it (or a list of segments, as
    memory_viz also takes) -> :class:`SnapshotData`. Whatever is not a snapshot: a one-line TraceError."""
    try:
        with _no_gc():
            return _parse(obj, source)
    except _Bad as e:
        raise TraceError(f"{source}: not a CUDA memory snapshot: {e}") from None
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as e:
        raise TraceError(f"{source}: not a CUDA memory snapshot ({type(e).__name__}: {str(e)[:80]})") from None


def _parse(obj: Any, source: str) -> SnapshotData:
    if isinstance(obj, list):  # segments only (memory_viz reads this form too)
        obj = {"segments": obj, "device_traces": []}
    if not isinstance(obj, dict) or "segments" not in obj:
        raise _Bad("the file", f"holds a {type(obj).__name__}, not the dict of segments and device_traces "
                               "torch.cuda.memory._snapshot() returns")
    segs = obj["segments"]
    traces = obj.get("device_traces", [])
    if not isinstance(segs, list) or not all(isinstance(s, dict) for s in segs):
        raise _Bad("segments", "not a list of dicts")
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise _Bad("device_traces", "not a list of lists")
    notes: list[str] = []
    frames_of: list[Any] = []  # every frames list met, in order: segments, blocks, entries

    # -- segments
    n_seg = len(segs)
    get = dict.get
    seg_frames = [get(s, "frames") for s in segs]
    segments = pd.DataFrame({
        "device": _ints(_field(segs, "device", 0), "a segment's device"),
        "address": _ints(_field(segs, "address"), "a segment's address"),
        "total_size_bytes": _ints(_field(segs, "total_size"), "a segment's total_size"),
        "stream": _ints(_field(segs, "stream", 0), "a segment's stream"),
        "segment_type": _texts([str(get(s, "segment_type", "")) for s in segs], "segment_type"),
        "pool_id": _texts([_pool_text(get(s, "segment_pool_id")) for s in segs], "segment_pool_id"),
        "is_expandable": np.fromiter((bool(get(s, "is_expandable", False)) for s in segs), bool, n_seg),
        "torch_allocated_bytes": _ints(_field(segs, "allocated_size", -1), "allocated_size"),
        "torch_active_bytes": _ints(_field(segs, "active_size", -1), "active_size"),
        "torch_requested_bytes": _ints(_field(segs, "requested_size", -1), "requested_size"),
    })
    frames_of += seg_frames

    # -- blocks, in each segment's address order
    block_lists = [s["blocks"] if "blocks" in s else [] for s in segs]
    if not all(isinstance(b, list) for b in block_lists):
        raise _Bad("a segment's blocks", "not a list")
    counts = np.fromiter(map(len, block_lists), np.int64, n_seg)
    flat = list(chain.from_iterable(block_lists))
    if not all(isinstance(b, dict) for b in flat):
        raise _Bad("a block", "not a dict")
    n_blk = len(flat)
    seg_of = np.repeat(np.arange(n_seg, dtype=np.int64), counts)
    size = _ints(_field(flat, "size"), "a block's size")
    if n_blk and all("address" in b for b in flat):
        addr = _ints(_field(flat, "address"), "a block's address")
    else:  # before torch 2.1 (and memory_viz's own CPU snapshots): the segment's, then each block after the last
        first = np.r_[0, np.cumsum(counts)[:-1]] if n_seg else np.zeros(0, np.int64)
        before = np.cumsum(size) - size
        addr = segments["address"].to_numpy()[seg_of] + before - before[first[seg_of]] if n_blk else size
    # legacy blocks (torch <= 2.0) carry their request in "history"; memory_viz reads it the same way
    requested = _ints([_requested(b) for b in flat], "a block's requested_size")
    blocks = pd.DataFrame({
        "device": segments["device"].to_numpy()[seg_of],
        "segment": seg_of,
        "address": addr,
        "size_bytes": size,
        "requested_bytes": requested,
        "state": _choices(_field(flat, "state", ""), "a block's state", BLOCK_STATES),
    })
    frames_of += [_block_frames(b) for b in flat]  # few: the blocks at the end

    # -- the history, per device
    parts = []
    for device, entries in enumerate(traces):
        if not all(isinstance(e, dict) for e in entries):
            raise _Bad(f"device_traces[{device}]", "an entry that is not a dict")
        n = len(entries)
        action = _choices(_field(entries, "action", ""), "an entry's action", ACTIONS)
        parts.append(pd.DataFrame({
            "device": np.full(n, device, np.int64),
            "entry": np.arange(n, dtype=np.int64),
            "action": action,
            "address": _ints(_field(entries, "addr", 0), "an entry's addr"),
            "size_bytes": _ints(_field(entries, "size", 0), "an entry's size"),
            "stream": _ints(_field(entries, "stream", 0), "an entry's stream"),
            "time_us": _times(_field(entries, "time_us", None)),
            "device_free_bytes": _ints(_field(entries, "device_free", -1), "an OOM's device_free"),
        }))
        frames_of += _field(entries, "frames", None)
    trace = (pd.concat(parts, ignore_index=True) if parts else
             pd.DataFrame({"device": np.zeros(0, np.int64), "entry": np.zeros(0, np.int64),
                           "action": pd.Categorical([], categories=list(ACTIONS)),
                           "address": np.zeros(0, np.int64), "size_bytes": np.zeros(0, np.int64),
                           "stream": np.zeros(0, np.int64), "time_us": np.zeros(0, np.float64),
                           "device_free_bytes": np.zeros(0, np.int64)}))
    # the replay and the segments sum these sizes (active, reserved, a segment's blocks) in int64:
    # past 2**62 bytes in all (4 EiB, no device's) a sum could wrap; counted in floats, which do not
    total = sum(float(np.abs(c.astype(np.float64)).sum()) for c in (
        trace["size_bytes"].to_numpy(), size, requested, segments["total_size_bytes"].to_numpy()))
    if total >= 2.0 ** 62:
        raise _Bad("the sizes", f"{total:.3g} bytes in all, past what 64 bits can sum")
    other = int((trace["action"] == "other").sum()) if len(trace) else 0
    if other:
        notes.append(f"{plural(other, 'history entry', 'history entries')} of an action nbprof does not know: "
                     "left out of the replay")

    # -- stacks: one id per distinct frames list (by identity: torch shares one list per traceback)
    codes, stacks = _intern(frames_of)
    segments["stack"] = codes[:n_seg]
    blocks["stack"] = codes[n_seg:n_seg + n_blk]
    trace["stack"] = codes[n_seg + n_blk:]
    settings = obj.get("allocator_settings")
    return SnapshotData(source=source, segments=segments, blocks=blocks, trace=trace, stacks=stacks,
                        settings=dict(settings) if isinstance(settings, dict) else {}, notes=notes)


def _pool_text(pool: Any) -> str:
    if isinstance(pool, (tuple, list)):
        return ",".join(str(p) for p in pool)
    return "" if pool is None else str(pool)


def _requested(block: dict) -> Any:
    if "requested_size" in block:
        return block["requested_size"]
    history = block.get("history")
    if isinstance(history, list) and history and isinstance(history[0], dict) and "real_size" in history[0]:
        return history[0]["real_size"]
    return block.get("size", 0)


def _block_frames(block: dict) -> Any:
    if "frames" in block:
        return block["frames"]
    history = block.get("history")
    if isinstance(history, list) and history and isinstance(history[0], dict):
        return history[0].get("frames")
    return None


def _times(values: list[Any]) -> np.ndarray:
    """``time_us`` (torch 2.1+), as float µs; NaN where an entry has none."""
    if not values:
        return np.zeros(0, np.float64)
    try:
        out = np.array(values, dtype=np.float64)  # None -> NaN
    except (TypeError, ValueError):
        raise _Bad("an entry's time_us", "not a number") from None
    if out.ndim != 1:
        raise _Bad("an entry's time_us", "not a number")
    return out


def _nonempty_list(f: Any) -> bool:
    return type(f) is list and len(f) > 0


def _intern(frames_of: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Each frames list -> a stack id (-1: none, or empty), one id per distinct list object."""
    n = len(frames_of)
    if not n:
        return np.zeros(0, np.int64), []
    ids = np.fromiter(map(id, frames_of), np.int64, n)
    codes, uniques = pd.factorize(ids, sort=False)
    first = np.full(len(uniques), -1, np.int64)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)  # the first position of each distinct list
    reps = [frames_of[i] for i in first.tolist()]
    usable = np.fromiter(map(_nonempty_list, reps), bool, len(reps))
    renum = np.full(len(reps), -1, np.int64)
    renum[usable] = np.arange(int(usable.sum()))
    return renum[codes], [f for f, ok in zip(reps, usable.tolist()) if ok]


# ---------------------------------------------------------------------------- writing one back


def snapshot_dict(data: SnapshotData) -> dict[str, Any]:
    """:class:`SnapshotData` as ``torch.cuda.memory._snapshot()`` returns it (what
    ``_dump_snapshot`` pickles and memory_viz opens): the segments with their blocks, each
    device's history, the allocator's settings; each stack the frames list it was read as (one
    list shared by an allocation and its block, as torch shares it, so the pickle stays small)."""
    stacks = data.stacks

    def frames(i: int) -> list[Any]:
        return stacks[i] if i >= 0 else []

    blk = data.blocks
    block_rows = zip(blk["segment"].tolist(), blk["address"].tolist(), blk["size_bytes"].tolist(),
                     blk["requested_bytes"].tolist(), blk["state"].astype(str).tolist(), blk["stack"].tolist())
    per_segment: list[list[dict[str, Any]]] = [[] for _ in range(len(data.segments))]
    for seg, address, size, requested, state, stack in block_rows:
        per_segment[seg].append({"address": address, "size": size, "requested_size": requested, "state": state,
                                 "frames": frames(stack)})
    seg = data.segments
    segments = []
    for i, row in enumerate(seg.itertuples(index=False)):
        blocks = per_segment[i]
        allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        active = sum(b["size"] for b in blocks if b["state"] in ("active_allocated", "active_pending_free"))
        requested = sum(b["requested_size"] for b in blocks if b["state"] in ("active_allocated", "active_pending_free"))
        segments.append({
            "device": int(row.device), "address": int(row.address), "total_size": int(row.total_size_bytes),
            "allocated_size": int(row.torch_allocated_bytes) if row.torch_allocated_bytes >= 0 else allocated,
            "active_size": int(row.torch_active_bytes) if row.torch_active_bytes >= 0 else active,
            "requested_size": int(row.torch_requested_bytes) if row.torch_requested_bytes >= 0 else requested,
            "stream": int(row.stream), "segment_type": str(row.segment_type), "segment_pool_id": _pool(str(row.pool_id)),
            "is_expandable": bool(row.is_expandable), "frames": frames(int(row.stack)), "blocks": blocks})
    tr = data.trace
    devices = int(max(tr["device"].max() + 1 if len(tr) else 0, seg["device"].max() + 1 if len(seg) else 0))
    traces: list[list[dict[str, Any]]] = [[] for _ in range(devices)]
    rows = zip(tr["device"].tolist(), tr["action"].astype(str).tolist(), tr["address"].tolist(),
               tr["size_bytes"].tolist(), tr["stream"].tolist(), tr["time_us"].tolist(),
               tr["device_free_bytes"].tolist(), tr["stack"].tolist())
    for device, action, address, size, stream, t, free, stack in rows:
        e: dict[str, Any] = {"action": action}
        if action == "oom":
            e["device_free"] = free
        else:
            e["addr"] = address
        e["size"] = size
        e["stream"] = stream
        if t == t:  # not NaN
            e["time_us"] = int(t) if float(t).is_integer() else t
        if stack >= 0:
            e["frames"] = stacks[stack]
        traces[device].append(e)
    out: dict[str, Any] = {"segments": segments, "device_traces": traces}
    if data.settings:
        out["allocator_settings"] = dict(data.settings)
    return out


def _pool(text: str) -> Any:
    parts = text.split(",")
    try:
        return tuple(int(p) for p in parts) if text else (0, 0)
    except ValueError:
        return text


# ------------------------------------------------------------------------- recording a history


class CudaHistory:
    """``%%torchprof --snapshot``: the CUDA caching allocator's history around the cell.

    ``begin``: unless the user already records one (``_record_memory_history`` of their own, which
    stays as they set it), turn on torch's history of every allocation and free, each with its
    Python stack (``stacks="python"``, ``context="all"``), the last :data:`HISTORY_MAX_ENTRIES`
    kept. ``end``: ``torch.cuda.memory._snapshot()``, then the history is switched off again, in a
    ``finally`` (an exception, a KeyboardInterrupt in the cell or in the snapshot itself): nothing
    nbprof turned on stays on. A history the user had on is cut to the cell (its entries since
    ``begin``, by their ``time_us``) and left running. Without CUDA: nothing, and a note."""

    def __init__(self, max_entries: int = HISTORY_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.result: SnapshotData | None = None
        self.notes: list[str] = []
        self._torch: Any = None
        self._ours = False  # nbprof turned the history on (and turns it off)
        self._users = False  # the user's own history was on
        self._since_us = 0.0

    def begin(self, torch: Any) -> None:
        if not _cuda_here(torch):
            self.notes.append("--snapshot: CUDA is not available here, so there is no CUDA allocator history to "
                              "record (the rest of the report is there)")
            return
        self._torch = torch
        self._users = _history_on(torch)
        self._since_us = time.time() * 1e6
        if self._users:
            return
        record = torch.cuda.memory._record_memory_history
        kwargs: dict[str, Any] = dict(context="all", stacks="python", max_entries=self.max_entries)
        if "clear_history" in _parameters(record):  # torch 2.6+: a history nbprof left is not this cell's
            kwargs["clear_history"] = True
        try:
            record("all", **kwargs)
        except Exception as e:  # an allocator without a history (cudaMallocAsync's): the cell runs anyway
            self._torch = None
            self.notes.append(f"--snapshot: torch could not record the CUDA allocator's history "
                              f"({type(e).__name__}: {e})"[:300])
            return
        self._ours = True

    def end(self) -> None:
        """Take the snapshot (once) and switch off what ``begin`` switched on, whatever happens."""
        torch, self._torch = self._torch, None
        if torch is None:
            return
        raw = None
        try:
            raw = torch.cuda.memory._snapshot()
        except Exception as e:
            self.notes.append(f"--snapshot: torch could not take the snapshot ({type(e).__name__}: {e})"[:300])
        finally:
            if self._ours:
                self._ours = False
                torch.cuda.memory._record_memory_history(None)
        if raw is None:
            return
        data = parse_snapshot(raw, "--snapshot")
        data.max_entries = None if self._users else self.max_entries
        if self._users:
            data = _since(data, self._since_us)
            self.notes.append("--snapshot: your own _record_memory_history was on; the snapshot holds its entries "
                              "from this run on, and it stays on as you set it")
        counts = data.trace.groupby("device").size() if len(data.trace) else pd.Series(dtype=np.int64)
        if not self._users and len(counts) and int(counts.max()) >= self.max_entries:
            self.notes.append(f"--snapshot: the history kept the last {self.max_entries:,} allocations and frees of "
                              "the run (torch's ring buffer); what came before is counted as allocated before it")
        self.result = data

    def discard(self) -> None:
        """The run did not start: switch off what ``begin`` switched on, take nothing."""
        torch, self._torch = self._torch, None
        if torch is not None and self._ours:
            self._ours = False
            torch.cuda.memory._record_memory_history(None)


def _cuda_here(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _history_on(torch: Any) -> bool:
    """Whether the allocator records a history now (the user's own ``_record_memory_history``)."""
    enabled = getattr(torch._C, "_cuda_isHistoryEnabled", None)
    try:
        return bool(enabled()) if enabled is not None else False
    except Exception:
        return False


def _parameters(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _since(data: SnapshotData, since_us: float) -> SnapshotData:
    """The history entries from ``since_us`` on (the wall clock torch stamps them with)."""
    t = data.trace["time_us"].to_numpy()
    keep = ~(t < since_us)  # entries without a time are kept
    trace = data.trace[keep].reset_index(drop=True)
    if len(trace):
        trace["entry"] = trace.groupby("device").cumcount().to_numpy()
    data.trace = trace
    return data
