"""The allocator's memory over time, from the memory events (``--memory``).

Every memory event carries the allocator's total allocated and reserved bytes right after it, so
the curve is those totals in time order, per device. The peak is the largest total allocated;
the op behind it is the CPU event that was open when that allocation happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..events import KIND_CODE, category_codes, values_at
from ._tables import LABEL, TEXT, empty_table

__all__ = ["memory_curve", "MemoryPeak", "memory_peaks", "downsample_max", "allocations", "alive_at",
           "alive_at_end", "group_alive", "outermost_op_rows", "ALIVE_BY", "ALIVE_LINE_COLUMNS",
           "ALLOCATION_COLUMNS", "HeldAtPeak", "held_at_peaks", "MemorySummary", "summarize_memory", "drawn_curve"]

ALLOCATION_DTYPES = {"rank": LABEL, "device": TEXT, "addr": np.int64, "bytes": np.int64, "alloc_us": np.float64,
                     "free_us": np.float64, "lifetime_us": np.float64, "op": TEXT, "top_op": TEXT}
ALLOCATION_COLUMNS = tuple(c for c in ALLOCATION_DTYPES if c != "rank")


def allocated_totals(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """The allocator's total allocated after each memory event at ``rows``, per device.

    torch 1.8-1.9 wrote no totals (-1): there it is the running sum of the sizes on each device,
    from 0 at the profile's start, in time order (what the TensorBoard plugin's memory view
    shows). One definition for the memory curve, the summary's peaks and the device stats."""
    totals = events["total_allocated_bytes"].to_numpy()[rows]
    missing = totals < 0
    if not missing.any():
        return totals
    start = events["start_us"].to_numpy()[rows]
    device = events["device"].cat.codes.to_numpy()[rows]
    order = np.lexsort((start, device))  # by device, then time (stable for ties)
    sizes = events["bytes"].to_numpy()[rows][order]
    running = np.cumsum(sizes)
    first = np.r_[0, np.flatnonzero(np.diff(device[order])) + 1]  # each device starts from 0
    running -= np.repeat(running[first] - sizes[first], np.diff(np.r_[first, len(order)]))
    out = totals.copy()
    by_row = np.empty_like(running)
    by_row[order] = running
    out[missing] = by_row[missing]
    return out


def memory_curve(events: pd.DataFrame) -> pd.DataFrame:
    """``device, time_us, allocated_bytes, reserved_bytes, delta_bytes, op`` per memory event, by
    device (in the devices' text order), then time."""
    is_mem = (events["kind"].cat.codes.to_numpy() == KIND_CODE["memory"])
    rows = np.flatnonzero(is_mem)
    if len(rows) == 0:
        return pd.DataFrame(columns=["device", "time_us", "allocated_bytes", "reserved_bytes", "delta_bytes", "op"])
    # the few columns it needs at the memory rows (not a copy of every column: events.iloc[rows]),
    # ordered by the device's code among the sorted device labels (no per-row string compared)
    device, device_labels = category_codes(events["device"], rows)
    time_us = events["start_us"].to_numpy()[rows]
    order = np.lexsort((time_us, device))  # stable: ties keep the file's order, as a stable sort_values
    rows = rows[order]
    parent = events["parent"].to_numpy()[rows]
    op = np.where(parent >= 0, values_at(events["name"], np.maximum(parent, 0)), "")
    return pd.DataFrame(
        {
            "device": device_labels[device[order]],
            "time_us": time_us[order],
            "allocated_bytes": allocated_totals(events, rows),
            "reserved_bytes": events["total_reserved_bytes"].to_numpy()[rows],
            "delta_bytes": events["bytes"].to_numpy()[rows],
            "op": op,
        }
    )


@dataclass(frozen=True)
class MemoryPeak:
    device: str
    peak_allocated_bytes: int
    peak_time_us: float
    peak_op: str  # the op open when the peak was reached ("" if none)
    peak_reserved_bytes: int
    start_allocated_bytes: int  # allocated when the profile started (before its first event)


def memory_peaks(curve: pd.DataFrame) -> list[MemoryPeak]:
    out = []
    for device, d in curve.groupby("device", sort=True):
        alloc = d["allocated_bytes"].to_numpy()
        i = int(np.argmax(alloc))
        first = int(alloc[0] - d["delta_bytes"].to_numpy()[0])
        out.append(
            MemoryPeak(
                device=str(device),
                peak_allocated_bytes=int(alloc[i]),
                peak_time_us=float(d["time_us"].to_numpy()[i]),
                peak_op=str(d["op"].to_numpy()[i]),
                peak_reserved_bytes=int(d["reserved_bytes"].max()),
                start_allocated_bytes=first,
            )
        )
    return out


def downsample_max(x: np.ndarray, y: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Reduce a step curve to at most ~2 points per bucket keeping each bucket's first and max
    points, so the peak survives any zoom-out."""
    keep = _kept(x, y, buckets)
    return (x, y) if keep is None else (x[keep], y[keep])


def _kept(x: np.ndarray, y: np.ndarray, buckets: int) -> np.ndarray | None:
    """The positions :func:`downsample_max` keeps (None: all of them). Keeping them again keeps
    them all: a curve reduced once draws as the whole curve does."""
    n = len(x)
    if n <= 2 * buckets or n == 0:
        return None
    span = x[-1] - x[0]
    if span <= 0:
        return np.array([0, int(np.argmax(y))])
    bucket = np.minimum(((x - x[0]) / span * buckets).astype(np.int64), buckets - 1)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    # the position of each bucket's max: sort by (bucket, -y) and take each bucket's first
    order = np.lexsort((-y, bucket))
    sorted_bucket = bucket[order]
    maxpos = order[np.r_[True, sorted_bucket[1:] != sorted_bucket[:-1]]]
    return np.unique(np.concatenate([starts, maxpos, [n - 1]]))


def drawn_curve(curve: pd.DataFrame, buckets: int) -> pd.DataFrame:
    """The points of ``curve`` (:func:`memory_curve`'s frame) that a chart ``buckets`` wide draws
    (:func:`downsample_max` of each device's allocated bytes): what a rank's worker sends for its
    chart instead of every memory event. Its peaks are not all in it (the most reserved):
    :func:`memory_peaks` of the whole curve go with it."""
    parts = []
    for _, d in curve.groupby("device", sort=True):
        keep = _kept(d["time_us"].to_numpy(), d["allocated_bytes"].to_numpy(), buckets)
        parts.append(d if keep is None else d.iloc[keep])
    return pd.concat(parts, ignore_index=True) if parts else curve.iloc[0:0].reset_index(drop=True)


def allocations(events: pd.DataFrame, with_rows: bool = False) -> pd.DataFrame:
    """Each block the allocator handed out, paired with its free by address (what the TensorBoard
    plugin's memory events table showed): ``device, addr, bytes, alloc_us, free_us, lifetime_us,
    op, top_op`` (and ``rank`` for merged ranks), in allocation order.

    An address is allocated and freed in turn (the caching allocator reuses addresses), so each
    allocation pairs with the next event at its address when that is a free. ``free_us`` is NaN
    for a block still held when the profile ended; a free with no allocation before it is a block
    allocated before the profile started (``alloc_us`` NaN, ``op`` ""). ``op`` is the operator
    the allocation happened in (often ``aten::empty``), ``top_op`` the outermost operator around
    it (``aten::conv2d``). ``with_rows=True`` adds ``row``: the position in ``events`` of the memory event
    of the allocation (of the free, for a block from before the profile)."""
    kind = events["kind"].cat.codes.to_numpy()
    rows = np.flatnonzero((kind == KIND_CODE["memory"]) & (events["addr"].to_numpy() != 0))
    has_rank = "rank" in events.columns
    columns = (["rank"] if has_rank else []) + list(ALLOCATION_COLUMNS)
    if len(rows) == 0:
        return empty_table({**ALLOCATION_DTYPES, "row": np.int64}, columns + (["row"] if with_rows else []))
    # devices by their category codes (not 160 k strings factorized), one key with the rank's
    dev_code, device_labels = category_codes(events["device"], rows)
    rank_code = pd.factorize(events["rank"].to_numpy()[rows])[0] if has_rank else np.zeros(len(rows), np.int64)
    place = rank_code * len(device_labels) + dev_code
    addr = events["addr"].to_numpy()[rows]
    t = events["start_us"].to_numpy()[rows]
    nbytes = events["bytes"].to_numpy()[rows]
    # by (rank, device, address), then time; rows keep their file order at equal times (a stable sort)
    order = np.lexsort((t, addr, place))
    same = np.zeros(len(rows), dtype=bool)
    k_place, k_addr = place[order], addr[order]
    same[:-1] = (k_place[1:] == k_place[:-1]) & (k_addr[1:] == k_addr[:-1])
    b = nbytes[order]
    is_alloc = b > 0
    is_free = b < 0
    freed_next = np.zeros(len(rows), dtype=bool)
    freed_next[:-1] = same[:-1] & is_free[1:]
    alloc_pos = np.flatnonzero(is_alloc)
    nxt = np.minimum(alloc_pos + 1, len(rows) - 1)
    t_sorted = t[order]
    free_us = np.where(freed_next[alloc_pos], t_sorted[nxt], np.nan)
    # frees that no allocation in the profile precedes: blocks from before the profile
    paired_free = np.zeros(len(rows), dtype=bool)
    paired_free[alloc_pos[freed_next[alloc_pos]] + 1] = True
    early = np.flatnonzero(is_free & ~paired_free)
    src = np.concatenate([order[alloc_pos], order[early]])
    alloc_t = np.concatenate([t_sorted[alloc_pos], np.full(len(early), np.nan)])
    free_t = np.concatenate([free_us, t_sorted[early]])
    size = np.concatenate([b[alloc_pos], -b[early]])
    # allocation order, blocks from before the profile first (file order among equals): the arrays
    # sorted before the table is made (sorting the table moved its text columns too: 0.1 s at 1 M)
    final = np.lexsort((rows[src], np.where(np.isnan(alloc_t), -np.inf, alloc_t)))
    src, alloc_t, free_t, size = src[final], alloc_t[final], free_t[final], size[final]
    ev_rows = rows[src]
    parent = events["parent"].to_numpy()
    p = parent[ev_rows]
    during = ~np.isnan(alloc_t)
    top = _outermost_op(events, kind, parent, p)
    out = pd.DataFrame({
        "device": device_labels[dev_code[src]],
        "addr": addr[src],
        "bytes": size.astype(np.int64),
        "alloc_us": alloc_t,
        "free_us": free_t,
        "lifetime_us": free_t - alloc_t,
        "op": _names_at(events["name"], np.where((p >= 0) & during, p, -1)),
        "top_op": _names_at(events["name"], np.where((top >= 0) & during, top, -1)),
    })
    if has_rank:
        # a label, as every per-rank table's (and this table's without rows): object, not int64
        out.insert(0, "rank", pd.Series(events["rank"].to_numpy()[ev_rows], dtype=object))
    if with_rows:
        out["row"] = ev_rows
    return out


def _names_at(names: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The categorical ``names`` at ``rows`` as ``str`` objects, "" where a row is -1: one string
    per category, looked up by code (``np.where`` over 1 M strings cost 45 ms)."""
    lookup = np.append(np.asarray(names.cat.categories.astype(str), dtype=object), "")
    codes = names.cat.codes.to_numpy()[np.maximum(rows, 0)].astype(np.int64)
    codes[(rows < 0) | (codes < 0)] = len(lookup) - 1
    return lookup[codes]


ALIVE_LINE_COLUMNS = ("cell", "file", "line", "source")
ALIVE_BY = ("line", "op")


def alive_at_end(allocs: pd.DataFrame, line_of_row: np.ndarray | None = None,
                 lines: pd.DataFrame | None = None) -> pd.DataFrame:
    """The blocks allocated during the profile and not freed by its end, biggest first (allocation
    order among equals): :func:`allocations`' rows (``with_rows=True``, so the ``row`` column is
    kept) with an allocation and no free. With ``line_of_row`` (each event's position in
    ``lines``, -1 for none: ``hot_lines.climbed_line_rows``) and ``lines`` (``p.lines()``), also
    ``cell, file, line, source``: the user's line that ran the operator that allocated the block
    (None, NA, "" for a block no line of the user's code allocated)."""
    alive = allocs[allocs["alloc_us"].notna().to_numpy() & allocs["free_us"].isna().to_numpy()]
    alive = alive.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)
    if line_of_row is None or lines is None:
        return alive
    pos = line_of_row[alive["row"].to_numpy()] if len(alive) else np.zeros(0, dtype=np.int64)
    has = pos >= 0
    at = np.maximum(pos, 0)
    for c in ALIVE_LINE_COLUMNS:
        values: Any = lines[c].to_numpy(dtype=object)[at] if len(lines) else np.full(len(pos), None, dtype=object)
        if c == "line":
            alive[c] = pd.Series(values, dtype="Int64").where(has, pd.NA)
        else:
            alive[c] = pd.Series(np.where(has, values, "" if c == "source" else None), dtype=object)
    return alive


def group_alive(alive: pd.DataFrame, by: str) -> pd.DataFrame:
    """:func:`alive_at_end`'s blocks summed per line of the user's code (``by="line"``: ``device,
    cell, file, line, source``) or per outermost operator (``by="op"``: ``device, top_op``), with
    ``blocks`` and ``bytes``, biggest first; ``rank`` first for merged ranks."""
    keys = (["rank"] if "rank" in alive.columns else []) + ["device"]
    keys += list(ALIVE_LINE_COLUMNS) if by == "line" else ["top_op"]
    out = (alive.groupby(keys, dropna=False, sort=False)["bytes"].agg(blocks="size", bytes="sum").reset_index())
    out["blocks"] = out["blocks"].astype(np.int64)
    out["bytes"] = out["bytes"].astype(np.int64)
    if "rank" in out.columns:  # a label, as every per-rank table's (groupby makes ints of it)
        out["rank"] = pd.Series(out["rank"].to_numpy(dtype=object), dtype=object)
    if by == "line":
        out["line"] = out["line"].astype("Int64")
        for c in ("cell", "file"):
            out[c] = out[c].astype(object).where(out[c].notna(), None)
    return out.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)


def outermost_op_rows(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each event at ``rows`` (memory events), the row of the outermost operator around it
    (``allocations()``' ``top_op``), -1 for none."""
    parent = events["parent"].to_numpy()
    p = parent[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    return _outermost_op(events, events["kind"].cat.codes.to_numpy(), parent, p)


def _outermost_op(events: pd.DataFrame, kind: np.ndarray, parent: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The outermost operator above each starting row (itself if it is one); -1 if none."""
    is_op = kind == KIND_CODE["op"]
    best = np.where((start >= 0) & is_op[np.maximum(start, 0)], start, -1)
    cur = np.where(start >= 0, parent[np.maximum(start, 0)], -1)
    while True:
        live = cur >= 0
        if not live.any():
            return best
        hit = np.zeros(len(cur), dtype=bool)
        hit[live] = is_op[cur[live]]
        best[hit] = cur[hit]
        nxt = cur.copy()
        nxt[live] = parent[cur[live]]
        cur = nxt


def alive_at(allocs: pd.DataFrame, time_us: float, device: str) -> pd.DataFrame:
    """The blocks of ``device`` held at ``time_us`` (allocated at or before it, not yet freed),
    biggest first."""
    a = allocs[allocs["device"] == device]
    held = ((a["alloc_us"] <= time_us) | a["alloc_us"].isna()) & ~(a["free_us"] <= time_us)
    return a[held].sort_values("bytes", ascending=False, kind="stable")


@dataclass(frozen=True)
class HeldAtPeak:
    """What one device held when its allocated memory peaked (the Memory tab's tables)."""

    peak: MemoryPeak
    blocks: pd.DataFrame
    """The blocks allocated during the profile and alive at the peak (``allocations()``' columns
    and ``age_us``: how long before the peak each was allocated), biggest first."""
    older_bytes: int
    """What the allocator held when the profile started, less what of it was freed by the peak."""


def held_at_peaks(allocs: pd.DataFrame, peaks: list[MemoryPeak]) -> list[HeldAtPeak]:
    """Per device with blocks held at its peak (GPUs first): the blocks held, from
    :func:`allocations` of one profile (merged ranks' are not paired per rank: none)."""
    if not len(allocs) or "rank" in allocs.columns:
        return []
    out = []
    for peak in sorted(peaks, key=lambda pk: (pk.device == "cpu", pk.device)):
        held = alive_at(allocs, peak.peak_time_us, peak.device)
        if not len(held):
            continue
        during = held[held["alloc_us"].notna()].copy()
        freed_early = allocs[(allocs["device"] == peak.device) & allocs["alloc_us"].isna()
                             & (allocs["free_us"] <= peak.peak_time_us)]["bytes"].sum()
        during["age_us"] = peak.peak_time_us - during["alloc_us"]
        out.append(HeldAtPeak(peak, during.reset_index(drop=True),
                              max(peak.start_allocated_bytes - int(freed_early), 0)))
    return out


@dataclass(frozen=True)
class MemorySummary:
    """What the Memory tab draws of one profile, without its events: the points of its chart, the
    peaks (of the whole curve), where the time axis ends, and the blocks held at each peak. A
    rank's worker sends it for the folder's report (``nbprof.cluster``)."""

    curve: pd.DataFrame
    peaks: list[MemoryPeak]
    end_us: float
    held: list[HeldAtPeak]
    alive: pd.DataFrame = field(default_factory=pd.DataFrame)
    """``alive_at_end()``: the blocks left allocated at the end (with their lines, where known)."""
    growth: pd.DataFrame = field(default_factory=pd.DataFrame)
    """``memory_growth()``: memory per step (``analysis.growth``); empty without steps."""
    steps_from: str | None = None
    """What the steps are (``memory_growth().attrs["steps"]``)."""


def summarize_memory(events: pd.DataFrame, curve: pd.DataFrame, allocs: pd.DataFrame, buckets: int,
                     alive: pd.DataFrame | None = None, growth: pd.DataFrame | None = None,
                     steps_from: str | None = None) -> MemorySummary:
    """The :class:`MemorySummary` of a profile's events, its :func:`memory_curve` and its
    :func:`allocations`; the chart ``buckets`` wide; ``alive``, ``growth``, ``steps_from``: its
    :func:`alive_at_end`, ``analysis.growth.growth_table`` and what the steps are."""
    end_us = float((events["start_us"] + events["dur_us"]).max()) if len(events) else 0.0
    peaks = memory_peaks(curve)
    return MemorySummary(drawn_curve(curve, buckets), peaks, end_us, held_at_peaks(allocs, peaks),
                         alive if alive is not None else pd.DataFrame(),
                         growth if growth is not None else pd.DataFrame(), steps_from)
