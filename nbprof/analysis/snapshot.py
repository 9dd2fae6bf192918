"""A CUDA memory snapshot's analyses (``collect.snapshot.SnapshotData`` -> tables): the segments,
reserved vs allocated; the history replayed into active memory over time; each allocation's life
and the line of the user's code that made it; what is alive at the peak; the chart's points.

The replay is memory_viz's (``process_alloc_data`` in torch's ``MemoryViz.js``, its "Active Memory
Timeline"), vectorized: an ``alloc`` adds its size, the ``free_completed`` at the same address
takes the allocation away (a ``free_requested`` does not: the block stays in use until the
stream that uses it is done); allocations and frees are paired by address in order (a sort by
device, address, entry), so an address reused a thousand times is a thousand allocations. What
was allocated before the history began is there from the start: a block freed in the history
whose allocation is not in it, and a block the segments hold at the end that no allocation of
the history accounts for. Reserved memory follows the segment actions (``segment_alloc`` /
``segment_map`` add, ``segment_free`` / ``segment_unmap`` take away) back from the segments held
at the end. Sizes are what the allocations asked for (``TraceEntry.size`` is the request, as the
blocks' ``requested_size``), so the replay ends at the segments' requested bytes, segsum's
"allocated".

Segments are summed from their blocks, as ``_memory_viz.segsum`` sums them: a segment's total is
its requested bytes, the rounding of its allocated blocks (``rounding_bytes``: segsum's "internal"
free), and the rest, free (``free_bytes``: reserved, allocated to no tensor; segsum's "external").

Who allocated: each allocation's stack (innermost frame first) and the first frame of it in the
user's code (``collect.user_code.UserCode``: the notebook's cells, the user's own files; a file
named by a snapshot from another machine, by its path). Stacks are resolved only for the rows
asked (a table's, the chart's groups), each distinct frame once.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from ..collect.snapshot import ACTIONS, SnapshotData
from ..format import short_path
from .memory import _kept

__all__ = ["segments_table", "Replay", "replay", "SEGMENT_COLUMNS", "MEMORY_COLUMNS", "BLOCK_COLUMNS",
           "device_label", "user_lines", "stack_frames", "blocks_at", "Peak", "peaks", "oom_table",
           "DrawnDevice", "drawn", "BEFORE_HISTORY", "NO_STACK", "OTHER_LINES"]

_CODE = {a: i for i, a in enumerate(ACTIONS)}
BEFORE_HISTORY = "(allocated before the history began)"
NO_STACK = "(no Python stack recorded)"
OTHER_LINES = "(other lines)"

SEGMENT_COLUMNS = ("device", "address", "total_size_bytes", "allocated_bytes", "requested_bytes", "rounding_bytes",
                   "free_bytes", "largest_free_bytes", "active_bytes", "blocks", "stream", "segment_type", "pool_id",
                   "is_expandable")
MEMORY_COLUMNS = ("device", "entry", "time_us", "action", "address", "size_bytes", "active_bytes", "reserved_bytes")
BLOCK_COLUMNS = ("device", "address", "requested_bytes", "size_bytes", "state", "alloc_us", "free_us", "cell",
                 "file", "line", "function", "frames")


def device_label(device: Any) -> Any:
    """CUDA device indexes -> "cuda:N" (one or an array)."""
    if np.ndim(device) == 0:
        return f"cuda:{int(device)}"
    codes, uniques = pd.factorize(np.asarray(device))
    return np.asarray([f"cuda:{int(u)}" for u in uniques], dtype=object)[codes]


def _per_segment(values: np.ndarray, segment: np.ndarray, n: int) -> np.ndarray:
    """Sums of whole numbers per segment, exact (an int64 add, not a float bincount)."""
    out = np.zeros(n, np.int64)
    np.add.at(out, segment, values)
    return out


def segments_table(data: SnapshotData) -> pd.DataFrame:
    """One row per segment (see :data:`SEGMENT_COLUMNS`), largest first: reserved memory
    (``total_size_bytes``) split into what tensors asked for (``requested_bytes``), what the
    allocator's rounding adds to their blocks (``rounding_bytes``) and what no tensor holds
    (``free_bytes``, in ``largest_free_bytes`` at most in one piece: fragmentation). ``allocated_bytes``
    and ``active_bytes`` are torch's ``allocated_size`` and ``active_size`` (blocks in use; and
    those waiting for another stream before they are free)."""
    seg, blk = data.segments, data.blocks
    n = len(seg)
    where = blk["segment"].to_numpy()
    size = blk["size_bytes"].to_numpy()
    state = blk["state"].astype(str).to_numpy() if len(blk) else np.zeros(0, object)
    allocated = state == "active_allocated"
    active = allocated | (state == "active_pending_free")
    inactive = state == "inactive"
    alloc_b = _per_segment(np.where(allocated, size, 0), where, n)
    requested = _per_segment(np.where(allocated, blk["requested_bytes"].to_numpy(), 0), where, n)
    largest = np.zeros(n, np.int64)
    np.maximum.at(largest, where, np.where(inactive, size, 0))
    total = seg["total_size_bytes"].to_numpy()
    out = pd.DataFrame({
        "device": device_label(seg["device"].to_numpy()) if n else np.zeros(0, object),
        "address": seg["address"].to_numpy(),
        "total_size_bytes": total,
        "allocated_bytes": alloc_b,
        "requested_bytes": requested,
        "rounding_bytes": alloc_b - requested,
        "free_bytes": total - alloc_b,
        "largest_free_bytes": largest,
        "active_bytes": _per_segment(np.where(active, size, 0), where, n),
        "blocks": np.bincount(where, minlength=n).astype(np.int64),
        "stream": seg["stream"].to_numpy(),
        "segment_type": seg["segment_type"].astype(str).to_numpy() if n else np.zeros(0, object),
        "pool_id": seg["pool_id"].astype(str).to_numpy() if n else np.zeros(0, object),
        "is_expandable": seg["is_expandable"].to_numpy(),
    })
    out["device"] = out["device"].astype(str)
    for c in ("segment_type", "pool_id"):
        out[c] = out[c].astype(str)
    order = np.lexsort((out["address"].to_numpy(), -total))
    return out.iloc[order].reset_index(drop=True)


# ----------------------------------------------------------------------------------- the replay


@dataclass(frozen=True)
class Replay:
    """The history replayed.

    ``memory``: one row per history entry (``active_memory()``): :data:`MEMORY_COLUMNS`, the active
    and reserved bytes right after the entry; ``device`` as an index here (``device_label`` names
    it). ``allocations``: one row per allocation the chart stacks: ``device``, ``address``,
    ``requested_bytes``, ``alloc_entry`` / ``free_entry`` (-1: before the history / never freed),
    ``alloc_row`` / ``free_row`` (their rows of ``memory``; -1), ``stack`` (the allocation's; -1:
    none), ``before`` (allocated before the history began), ``size_bytes`` (the block's, where the
    snapshot still holds it; else -1), ``state`` (the block's at the end; "" where freed).
    ``row_alloc``: for each row of ``memory``, the allocation it adds or takes away (-1: none)."""

    memory: pd.DataFrame
    allocations: pd.DataFrame
    row_alloc: np.ndarray
    initial: dict[int, int]
    """Per device, the active bytes before the first entry (allocations from before the history)."""


def _within_device_cumsum(values: np.ndarray, device: np.ndarray) -> np.ndarray:
    """A running sum that starts again on each device (rows sorted by device)."""
    total = np.cumsum(values)
    if len(values) == 0:
        return total
    starts = np.flatnonzero(np.r_[True, device[1:] != device[:-1]])
    before = np.repeat(total[starts] - values[starts], np.diff(np.r_[starts, len(values)]))
    return total - before


def replay(data: SnapshotData) -> Replay:
    """The history of ``data`` replayed (see the module docstring)."""
    tr = data.trace
    n = len(tr)
    dev = tr["device"].to_numpy()
    act = tr["action"].cat.codes.to_numpy() if n else np.zeros(0, np.int8)
    addr = tr["address"].to_numpy()
    size = tr["size_bytes"].to_numpy()
    entry = tr["entry"].to_numpy()
    times = tr["time_us"].to_numpy()
    is_alloc = act == _CODE["alloc"]
    is_free = act == _CODE["free_completed"]

    # pair each alloc with the free_completed that follows it at its address (device, address, then order)
    rows = np.flatnonzero(is_alloc | is_free)
    o = rows[np.lexsort((rows, addr[rows], dev[rows]))]
    free_of = np.full(n, -1, np.int64)
    alloc_of = np.full(n, -1, np.int64)
    if len(o) > 1:
        pair = is_alloc[o[:-1]] & is_free[o[1:]] & (dev[o[1:]] == dev[o[:-1]]) & (addr[o[1:]] == addr[o[:-1]])
        free_of[o[:-1][pair]] = o[1:][pair]
        alloc_of[o[1:][pair]] = o[:-1][pair]

    # a paired free takes away what its allocation added (memory_viz: the element's size)
    delta = np.zeros(n, np.int64)
    delta[is_alloc] = size[is_alloc]
    paired_free = is_free & (alloc_of >= 0)
    delta[paired_free] = -size[alloc_of[paired_free]]
    early_free = is_free & (alloc_of < 0)  # freed in the history, allocated before it
    delta[early_free] = -size[early_free]

    # the blocks held at the end that no allocation of the history still holding its address made
    blk = data.blocks
    bstate = blk["state"].astype(str).to_numpy() if len(blk) else np.zeros(0, object)
    held = np.flatnonzero(bstate == "active_allocated")
    open_alloc = np.flatnonzero(is_alloc & (free_of < 0))
    bdev, baddr = blk["device"].to_numpy(), blk["address"].to_numpy()
    from_before = np.zeros(len(blk), bool)
    for d in np.unique(bdev[held]).tolist():
        mine = held[bdev[held] == d]
        from_before[mine] = ~np.isin(baddr[mine], addr[open_alloc[dev[open_alloc] == d]])
    before_blocks = np.flatnonzero(from_before)

    devices = sorted(set(dev.tolist()) | set(bdev[held].tolist()) | set(data.segments["device"].tolist()))
    initial = {d: int(size[early_free & (dev == d)].sum()) + int(blk["requested_bytes"].to_numpy()[before_blocks][
        bdev[before_blocks] == d].sum()) for d in devices}
    where = np.searchsorted(devices, dev) if n else np.zeros(0, np.int64)  # each row's device, as a position
    start = np.array([initial[d] for d in devices], np.int64)[where] if n else np.zeros(0, np.int64)
    active = start + _within_device_cumsum(delta, dev)

    # reserved: back from the segments held at the end
    plus = (act == _CODE["segment_alloc"]) | (act == _CODE["segment_map"])
    minus = (act == _CODE["segment_free"]) | (act == _CODE["segment_unmap"])
    rdelta = np.where(plus, size, 0) - np.where(minus, size, 0)
    seg = data.segments
    at_end = {d: int(seg["total_size_bytes"].to_numpy()[seg["device"].to_numpy() == d].sum()) for d in devices}
    rsum = {d: int(rdelta[dev == d].sum()) for d in devices}
    rstart = np.array([at_end[d] - rsum[d] for d in devices], np.int64)[where] if n else np.zeros(0, np.int64)
    reserved = rstart + _within_device_cumsum(rdelta, dev)

    memory = pd.DataFrame({"device": dev, "entry": entry, "time_us": times, "action": tr["action"],
                           "address": addr, "size_bytes": size, "active_bytes": active, "reserved_bytes": reserved})

    # the allocations: the history's, those freed in it from before it, those held from before it
    a_rows = np.flatnonzero(is_alloc)
    e_rows = np.flatnonzero(early_free)
    f_rows = free_of[a_rows]
    stack = tr["stack"].to_numpy()
    k_a, k_e, k_b = len(a_rows), len(e_rows), len(before_blocks)
    allocs = pd.DataFrame({
        "device": np.r_[dev[a_rows], dev[e_rows], bdev[before_blocks]].astype(np.int64),
        "address": np.r_[addr[a_rows], addr[e_rows], baddr[before_blocks]].astype(np.int64),
        "requested_bytes": np.r_[size[a_rows], size[e_rows],
                                 blk["requested_bytes"].to_numpy()[before_blocks]].astype(np.int64),
        "alloc_entry": np.r_[entry[a_rows], np.full(k_e + k_b, -1, np.int64)],
        "free_entry": np.r_[np.where(f_rows >= 0, entry[np.maximum(f_rows, 0)], -1), entry[e_rows],
                            np.full(k_b, -1, np.int64)],
        "alloc_row": np.r_[a_rows, np.full(k_e + k_b, -1, np.int64)],
        "free_row": np.r_[f_rows, e_rows, np.full(k_b, -1, np.int64)],
        "stack": np.r_[stack[a_rows], np.full(k_e, -1, np.int64), blk["stack"].to_numpy()[before_blocks]].astype(np.int64),
        "before": np.r_[np.zeros(k_a, bool), np.ones(k_e + k_b, bool)],
    })
    # the block each still-held allocation is (its rounded size, its state at the end)
    bsize = np.full(len(allocs), -1, np.int64)
    bst = np.full(len(allocs), "", dtype=object)
    still = np.flatnonzero(allocs["free_row"].to_numpy() < 0)
    if len(still) and len(blk):
        live = np.flatnonzero(bstate != "inactive")
        key_b = pd.MultiIndex.from_arrays([bdev[live], baddr[live]])
        key_a = pd.MultiIndex.from_arrays([allocs["device"].to_numpy()[still], allocs["address"].to_numpy()[still]])
        pos = key_b.get_indexer(key_a) if key_b.is_unique else np.full(len(still), -1)
        hit = pos >= 0
        bsize[still[hit]] = blk["size_bytes"].to_numpy()[live[pos[hit]]]
        bst[still[hit]] = bstate[live[pos[hit]]]
    allocs["size_bytes"] = bsize
    allocs["state"] = pd.Series(bst, dtype=str)

    row_alloc = np.full(n, -1, np.int64)
    row_alloc[a_rows] = np.arange(k_a)
    row_alloc[f_rows[f_rows >= 0]] = np.flatnonzero(f_rows >= 0)
    row_alloc[e_rows] = k_a + np.arange(k_e)
    return Replay(memory, allocs, row_alloc, initial)


@dataclass(frozen=True)
class Peak:
    """One device's most active memory: after which entry (``entry`` -1: before the first, the
    history holding no more), when, and what was reserved then."""

    device: int
    active_bytes: int
    entry: int
    row: int
    time_us: float
    reserved_bytes: int


def peaks(r: Replay, data: SnapshotData) -> list[Peak]:
    """Each device's peak of active memory (the first entry at its highest)."""
    mem = r.memory
    out = []
    dev = mem["device"].to_numpy()
    for d in sorted(r.initial):
        rows = np.flatnonzero(dev == d)
        if not len(rows):
            seg = data.segments
            reserved = int(seg["total_size_bytes"].to_numpy()[seg["device"].to_numpy() == d].sum())
            out.append(Peak(d, r.initial[d], -1, -1, float("nan"), reserved))
            continue
        act = mem["active_bytes"].to_numpy()[rows]
        i = int(np.argmax(act))
        if r.initial[d] > act[i]:  # the history only freed: the start was the most
            out.append(Peak(d, r.initial[d], -1, -1, float(mem["time_us"].to_numpy()[rows[0]]),
                            int(mem["reserved_bytes"].to_numpy()[rows[0]])))
            continue
        row = int(rows[i])
        out.append(Peak(d, int(act[i]), int(mem["entry"].to_numpy()[row]), row, float(mem["time_us"].to_numpy()[row]),
                        int(mem["reserved_bytes"].to_numpy()[row])))
    return out


def alive_after(r: Replay, device: int, entry: int) -> np.ndarray:
    """The allocations of ``device`` alive right after its entry ``entry`` (-1: before the first)."""
    a = r.allocations
    ae, fe = a["alloc_entry"].to_numpy(), a["free_entry"].to_numpy()
    return np.flatnonzero((a["device"].to_numpy() == device) & (ae <= entry) & ((fe < 0) | (fe > entry)))


def oom_table(r: Replay, data: SnapshotData) -> pd.DataFrame:
    """The out-of-memory errors the history recorded: ``device, entry, time_us, requested_bytes``
    (what the failed allocation asked for), ``device_free_bytes`` (what CUDA still had free),
    ``active_bytes``, ``reserved_bytes`` (the allocator's then)."""
    mem = r.memory
    rows = np.flatnonzero(mem["action"].astype(str).to_numpy() == "oom") if len(mem) else np.zeros(0, np.int64)
    return pd.DataFrame({
        "device": device_label(mem["device"].to_numpy()[rows]) if len(rows) else np.zeros(0, object),
        "entry": mem["entry"].to_numpy()[rows],
        "time_us": mem["time_us"].to_numpy()[rows],
        "requested_bytes": mem["size_bytes"].to_numpy()[rows],
        "device_free_bytes": data.trace["device_free_bytes"].to_numpy()[rows],
        "active_bytes": mem["active_bytes"].to_numpy()[rows],
        "reserved_bytes": mem["reserved_bytes"].to_numpy()[rows],
    }).astype({"device": str})


# ------------------------------------------------------------------------------- who allocated


def _frame_parts(frame: Any) -> tuple[str, int, str]:
    """A frame as read -> (filename, line, name); what a frame should be and is not -> ("?", 0, "?")."""
    if not isinstance(frame, dict):
        return ("?", 0, "?")
    filename, line, name = frame.get("filename", "?"), frame.get("line", 0), frame.get("name", "?")
    return (filename if isinstance(filename, str) else str(filename)[:200],
            line if type(line) is int else 0,
            name if isinstance(name, str) else str(name)[:200])


def stack_frames(stacks: list[Any], ids: np.ndarray) -> list[tuple[tuple[str, int, str], ...]]:
    """Each stack id's frames as ``(filename, line, name)`` tuples, innermost first (() for -1)."""
    cache: dict[int, tuple[tuple[str, int, str], ...]] = {}
    out = []
    for i in np.asarray(ids).tolist():
        if i not in cache:
            cache[i] = tuple(_frame_parts(f) for f in stacks[i]) if i >= 0 else ()
        out.append(cache[i])
    return out


def user_lines(stacks: list[Any], ids: np.ndarray, user: Any) -> pd.DataFrame:
    """For each stack id, the first frame (innermost first) in the user's code (``user``: a
    ``collect.user_code.UserCode``): ``cell`` ("In [4]"; None for a file), ``file``, ``line``,
    ``function``, ``label`` (the chart's name for it); a stack without one: its innermost frame,
    ``user`` False; none at all: :data:`NO_STACK`. Each distinct frame is judged once."""
    ids = np.asarray(ids, np.int64)
    uniq, back = np.unique(ids, return_inverse=True)
    lists = [stacks[i] if i >= 0 else [] for i in uniq.tolist()]
    lens = np.fromiter(map(len, lists), np.int64, len(lists))
    flat = list(chain.from_iterable(lists))
    fcode, first = _distinct(flat)
    parts = [_frame_parts(flat[i]) for i in first.tolist()]
    files = [p[0] for p in parts]
    file_user: dict[str, bool] = {}
    for f in set(files):
        file_user[f] = bool(user.is_recorded_user_file(f))
    is_user = np.fromiter((file_user[f] for f in files), bool, len(parts))
    is_py = np.fromiter((f.endswith(".py") for f in files), bool, len(parts))
    offsets = np.cumsum(lens) - lens
    found, first_user = _first_in_stack(is_user[fcode] if len(flat) else np.zeros(0, bool), offsets, lens)
    # no frame of the user's: the innermost Python frame (stacks="all" puts C++ frames first), else the innermost
    py_found, first_py = _first_in_stack(is_py[fcode] if len(flat) else np.zeros(0, bool), offsets, lens)
    chosen = np.where(found, first_user, np.where(py_found, first_py, np.where(lens > 0, offsets, -1)))
    frame = np.where(chosen >= 0, fcode[np.maximum(chosen, 0)] if len(flat) else -1, -1)
    # one row per distinct (frame, the user's?) pair, then each stack's, then each id's
    pair = frame * 2 + found  # -2 / -1: no frame
    kinds, per_stack = np.unique(pair, return_inverse=True)
    rows = []
    for k in kinds.tolist():
        f, ok = k // 2, bool(k % 2)
        if f < 0:
            rows.append((None, None, None, None, NO_STACK, False))
            continue
        filename, line, name = parts[f]
        cell = user.cell_name(filename) if ok else None
        where = f"{cell} line {line}" if cell else f"{short_path(filename)}:{line}"
        rows.append((cell, filename, line, name, where if ok else f"{where} ({name})", ok))
    cols = list(zip(*rows)) if rows else [()] * 6
    table = pd.DataFrame({
        "cell": pd.Series(cols[0], dtype=object), "file": pd.Series(cols[1], dtype=object),
        "line": pd.Series([pd.NA if v is None else v for v in cols[2]], dtype="Int64"),
        "function": pd.Series(cols[3], dtype=object), "label": pd.Series(cols[4], dtype=object),
        "user": np.asarray(cols[5], dtype=bool)})
    return table.iloc[np.asarray(per_stack).ravel()[back]].reset_index(drop=True)


def _first_in_stack(mask: np.ndarray, offsets: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For stacks laid end to end (``offsets``, ``lens``), whether each has a frame where ``mask``
    is set, and the position of its first."""
    pos = np.flatnonzero(mask)
    if not len(pos):
        return np.zeros(len(offsets), bool), np.zeros(len(offsets), np.int64)
    first = pos[np.minimum(np.searchsorted(pos, offsets), len(pos) - 1)]
    return (lens > 0) & (first >= offsets) & (first < offsets + lens), first


def _distinct(objs: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Codes by object identity (torch shares each frame dict) and each code's first position."""
    n = len(objs)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    codes, uniques = pd.factorize(np.fromiter(map(id, objs), np.int64, n), sort=False)
    first = np.full(len(uniques), -1, np.int64)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)
    return codes.astype(np.int64), first


def blocks_at(r: Replay, data: SnapshotData, which: np.ndarray, user: Any, *, at_end: bool) -> pd.DataFrame:
    """The table ``SnapshotProfile.blocks`` shows for allocations ``which`` of ``r`` (or, ``at_end``,
    rows of ``data.blocks``): :data:`BLOCK_COLUMNS`, biggest first."""
    tr = data.trace
    times = tr["time_us"].to_numpy()
    if at_end:
        blk = data.blocks.iloc[which]
        a = r.allocations
        open_ = np.flatnonzero((a["free_row"].to_numpy() < 0) & (a["alloc_row"].to_numpy() >= 0))
        key_a = pd.MultiIndex.from_arrays([a["device"].to_numpy()[open_], a["address"].to_numpy()[open_]])
        key_b = pd.MultiIndex.from_arrays([blk["device"].to_numpy(), blk["address"].to_numpy()])
        last = ~key_a.duplicated(keep="last")  # an address allocated twice and never freed: the last
        pos = key_a[last].get_indexer(key_b)
        open_rows = a["alloc_row"].to_numpy()[open_[last]]
        rows = np.where(pos >= 0, open_rows[np.maximum(pos, 0)] if len(open_rows) else -1, -1)
        table = pd.DataFrame({
            "device": device_label(blk["device"].to_numpy()) if len(blk) else np.zeros(0, object),
            "address": blk["address"].to_numpy(),
            "requested_bytes": blk["requested_bytes"].to_numpy(),
            "size_bytes": blk["size_bytes"].to_numpy(),
            "state": blk["state"].astype(str).to_numpy(),
            "alloc_us": np.where(rows >= 0, times[np.maximum(rows, 0)] if len(times) else np.nan, np.nan),
            "free_us": np.full(len(blk), np.nan),
        })
        stacks = blk["stack"].to_numpy()
    else:
        a = r.allocations.iloc[which]
        ar, fr = a["alloc_row"].to_numpy(), a["free_row"].to_numpy()
        table = pd.DataFrame({
            "device": device_label(a["device"].to_numpy()) if len(a) else np.zeros(0, object),
            "address": a["address"].to_numpy(),
            "requested_bytes": a["requested_bytes"].to_numpy(),
            "size_bytes": a["size_bytes"].to_numpy(),
            "state": np.full(len(a), "active_allocated", dtype=object),
            "alloc_us": np.where(ar >= 0, times[np.maximum(ar, 0)] if len(times) else np.nan, np.nan),
            "free_us": np.where(fr >= 0, times[np.maximum(fr, 0)] if len(times) else np.nan, np.nan),
        })
        stacks = a["stack"].to_numpy()
    who = user_lines(data.stacks, stacks, user)
    for c in ("cell", "file", "function"):
        table[c] = pd.Series(who[c].to_numpy(), dtype=object)
    table["line"] = who["line"].to_numpy()
    table["frames"] = pd.Series(stack_frames(data.stacks, stacks), dtype=object)
    for c in ("device", "state"):
        table[c] = table[c].astype(str)
    table["line"] = table["line"].astype("Int64")
    order = np.argsort(-table["requested_bytes"].to_numpy(), kind="stable")
    return table.iloc[order].reset_index(drop=True)[list(BLOCK_COLUMNS)]


# --------------------------------------------------------------------------------- the chart


@dataclass(frozen=True)
class DrawnDevice:
    """What the chart draws of one device: its points (``x``: µs since the history's first entry,
    or the entry's position where the file has no times), the active and reserved bytes there,
    one layer per line of code that allocated (the top ones; the rest summed as
    :data:`OTHER_LINES`), stacked largest at the bottom, their sum the active bytes; its peak
    and its OOMs."""

    device: str
    x: np.ndarray
    active: np.ndarray
    reserved: np.ndarray
    layers: list[tuple[str, np.ndarray]]
    peak_x: float
    peak_bytes: int
    peak_label: str
    ooms: pd.DataFrame  # x, requested_bytes, device_free_bytes
    x_is_time: bool
    points: int
    """Entries in the window drawn (``len(x)`` of them are drawn)."""


def x_axis(data: SnapshotData, memory: pd.DataFrame) -> tuple[np.ndarray, bool, float]:
    """Each row's x: µs since the first entry when every entry has a time and they run forward;
    else the entry's position. And its origin (the first entry's time_us; 0)."""
    t = memory["time_us"].to_numpy()
    if len(t) and not np.isnan(t).any():
        dev = memory["device"].to_numpy()
        ordered = all(bool(np.all(np.diff(t[dev == d]) >= 0)) for d in np.unique(dev).tolist())
        if ordered:
            t0 = float(t.min())
            return t - t0, True, t0
    return memory["entry"].to_numpy().astype(np.float64), False, 0.0


def drawn(r: Replay, data: SnapshotData, labels: pd.Series, buckets: int, *, window: tuple[float, float] | None = None,
          top: int = 8) -> list[DrawnDevice]:
    """The chart's points per device: at most ~2 per bucket of ``buckets`` across ``window`` (x
    units; None: all), each bucket's first and highest kept (``analysis.memory``'s downsampling:
    the peak survives any zoom), exact at every point kept; a window of fewer entries than that is
    drawn whole. ``labels``: each allocation's line (``r.allocations``' rows), the stacks' layers;
    the ``top`` lines by bytes held at the device's peak get a layer each."""
    mem = r.memory
    x_all, is_time, _ = x_axis(data, mem)
    dev = mem["device"].to_numpy()
    act_all = mem["active_bytes"].to_numpy()
    res_all = mem["reserved_bytes"].to_numpy()
    row_alloc = r.row_alloc
    allocs = r.allocations
    lab_codes, lab_names = pd.factorize(labels.to_numpy(), sort=False)
    a_dev = allocs["device"].to_numpy()
    a_req = allocs["requested_bytes"].to_numpy()
    a_before_start = allocs["alloc_row"].to_numpy() < 0  # alive at the start (then freed, or never)
    free_left = data.trace["device_free_bytes"].to_numpy()
    out = []
    for pk in peaks(r, data):
        d = pk.device
        rows = np.flatnonzero(dev == d)
        held = alive_after(r, d, pk.entry)
        at_peak = np.bincount(lab_codes[held], weights=a_req[held], minlength=len(lab_names))
        most = _most_held(r, rows, lab_codes, len(lab_names), a_dev == d, a_before_start)
        # the lines that make up the peak first, then those that held the most at another time
        rank = np.lexsort((-most, -at_peak))
        chosen = [int(c) for c in rank[:top] if most[c] > 0 or at_peak[c] > 0]
        x = x_all[rows]
        if window is not None:
            lo, hi = sorted(window)
            # the entries inside, and the last one before (the level the window starts at)
            first = max(int(np.searchsorted(x, lo, side="left")) - 1, 0)
            last = int(np.searchsorted(x, hi, side="right"))
            sub = np.arange(first, max(last, first + 1))
        else:
            sub = np.arange(len(rows))
        keep = _kept(x[sub], act_all[rows][sub], buckets) if len(sub) else None
        pick = sub if keep is None else sub[keep]
        layers = []
        # each chosen line's bytes held after each kept row: its start, plus its rows' changes summed
        delta = np.where(mem["action"].cat.codes.to_numpy()[rows] == _CODE["alloc"], 1, -1) * _row_bytes(r, rows)
        owner = row_alloc[rows]
        for c in chosen:
            mine = (lab_codes == c) & (a_dev == d)
            start = int(a_req[mine & a_before_start].sum())
            own = np.flatnonzero((owner >= 0) & mine[np.maximum(owner, 0)])
            cum = np.cumsum(delta[own])
            at = np.searchsorted(own, pick, side="right") - 1
            layers.append((str(lab_names[c]), start + np.where(at >= 0, cum[np.maximum(at, 0)] if len(cum) else 0, 0)))
        total = act_all[rows][pick] if len(rows) else np.array([r.initial[d]], np.int64)
        rest = total - (np.sum([v for _, v in layers], axis=0) if layers else 0)
        if np.any(rest != 0):
            layers.append((OTHER_LINES, rest))
        oom = np.flatnonzero(mem["action"].cat.codes.to_numpy()[rows] == _CODE["oom"]) if len(rows) else np.zeros(0, int)
        ooms = pd.DataFrame({"x": x[oom], "requested_bytes": mem["size_bytes"].to_numpy()[rows][oom],
                             "device_free_bytes": free_left[rows[oom]]})
        peak_label = ""
        if len(held):
            top_held = held[np.argmax(a_req[held])]
            peak_label = str(lab_names[lab_codes[top_held]])
        out.append(DrawnDevice(
            device=device_label(d), x=x[pick] if len(rows) else np.zeros(1), active=total,
            reserved=res_all[rows][pick] if len(rows) else np.array([pk.reserved_bytes], np.int64),
            layers=layers, peak_x=float(x_all[pk.row]) if pk.row >= 0 else 0.0, peak_bytes=pk.active_bytes,
            peak_label=peak_label, ooms=ooms, x_is_time=is_time, points=len(sub)))
    return out


def _most_held(r: Replay, rows: np.ndarray, lab_codes: np.ndarray, n_labels: int, on_device: np.ndarray,
               at_start: np.ndarray) -> np.ndarray:
    """Per line, the most bytes its allocations held at once on one device (``rows``: its rows of
    the replay): each line's running sum, by a sort on (line, row), its maximum per line."""
    req = r.allocations["requested_bytes"].to_numpy()
    start = np.bincount(lab_codes[on_device & at_start], weights=req[on_device & at_start], minlength=n_labels)
    owner = r.row_alloc[rows]
    own = owner >= 0
    if not own.any():
        return start
    sign = np.where(r.memory["action"].cat.codes.to_numpy()[rows[own]] == _CODE["alloc"], 1, -1)
    delta = (sign * req[owner[own]]).astype(np.float64)
    label = lab_codes[owner[own]]
    order = np.argsort(label, kind="stable")
    label, delta = label[order], delta[order]
    firsts = np.flatnonzero(np.r_[True, label[1:] != label[:-1]])
    running = _within_device_cumsum(delta, label) + start[label]
    most = start.copy()
    most[label[firsts]] = np.maximum(start[label[firsts]], np.maximum.reduceat(running, firsts))
    return most


def _row_bytes(r: Replay, rows: np.ndarray) -> np.ndarray:
    """The bytes each row adds or takes away (its allocation's size; 0 for other rows)."""
    owner = r.row_alloc[rows]
    req = r.allocations["requested_bytes"].to_numpy()
    return np.where(owner >= 0, req[np.maximum(owner, 0)] if len(req) else 0, 0)
