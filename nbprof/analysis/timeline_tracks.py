"""What the timeline draws besides rectangles: counter tracks and flows (pure numbers).

Counter tracks sit above the lanes, one line per device:

- GPU busy: the share of each time bin during which the device ran a kernel, memcpy or memset on
  any stream. Streams overlap: an instant when two kernels run counts once (the union of the
  intervals), so the line never passes 100 %, as Perfetto's and HTA's "GPU utilization" read.
- allocated memory (with ``--memory``): the allocator's total after each memory event. Binned to
  at most ``bins`` points by keeping the highest value in each bin (the peaks are what a user
  looks for, and an average would hide them), the bin's last value where it holds less.

Flows: a CPU launch (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...) and the device work it
queued share a CUPTI ``correlation`` id; the pairs are what the timeline's hover arrows join.
Correlation ids are unique per process only, so in a merged multi-rank profile they pair within
a rank (a kernel's ``pid`` is its device, not its process: ranks are the key, not pids).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, kind_mask, values_at

__all__ = ["gpu_busy_track", "memory_track", "flows", "union_busy_us"]


def _bin_edges(t0_us: float, t1_us: float, bins: int) -> np.ndarray:
    return np.linspace(float(t0_us), float(max(t1_us, t0_us + 1e-9)), max(int(bins), 1) + 1)


def union_busy_us(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time covered by the union of the intervals [start, end) within each bin of ``edges``.

    The union is built once (sort by start, a running maximum of ends opens a new interval where
    a start passes every earlier end); then covered(t), the covered time before t, is read at
    each edge by a binary search, and a bin's busy time is the difference at its two edges."""
    if len(start) == 0:
        return np.zeros(len(edges) - 1)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    run_end = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > run_end[:-1]]
    u0 = s[new]
    u1 = np.maximum.reduceat(e, np.flatnonzero(new))
    before = np.r_[0.0, np.cumsum(u1 - u0)]  # covered time before each union interval

    def covered(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(u0, t, side="right") - 1  # the last interval starting at or before t
        inside = np.where(i >= 0, np.clip(t - u0[np.maximum(i, 0)], 0, (u1 - u0)[np.maximum(i, 0)]), 0.0)
        return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0.0)

    return np.diff(covered(edges))


def gpu_busy_track(events: pd.DataFrame, t0_us: float, t1_us: float, bins: int = 400) -> pd.DataFrame:
    """``device, t0_us, t1_us, busy_us, busy_pct``: one row per device and time bin (``bins``
    equal bins over [t0_us, t1_us]); ``busy_pct`` = the union of the device's kernels, memcpys and
    memsets over the bin, in % of the bin."""
    codes = events["kind"].cat.codes.to_numpy()
    rows = np.flatnonzero(kind_mask(codes, DEVICE_WORK_CODES))
    cols = ["device", "t0_us", "t1_us", "busy_us", "busy_pct"]
    if len(rows) == 0:
        return pd.DataFrame(columns=cols)
    edges = _bin_edges(t0_us, t1_us, bins)
    start = events["start_us"].to_numpy()[rows]
    end = start + events["dur_us"].to_numpy()[rows]
    # the device strings of the work rows only, one conversion per category (not per event)
    device = values_at(events["device"], rows)
    # far from zero a window of a few µs can have bins narrower than a float's step (edges
    # equal): no time there, so nothing busy
    width = np.diff(edges)
    out = []
    for d in sorted(set(device.tolist())):
        sel = device == d
        busy = union_busy_us(start[sel], end[sel], edges)
        pct = np.divide(100.0 * busy, width, out=np.zeros_like(busy), where=width > 0)
        out.append(pd.DataFrame({"device": d, "t0_us": edges[:-1], "t1_us": edges[1:], "busy_us": busy,
                                 "busy_pct": pct}))
    return pd.concat(out, ignore_index=True)[cols]


def memory_track(curve: pd.DataFrame, t0_us: float, t1_us: float, bins: int = 400) -> pd.DataFrame:
    """``device, time_us, allocated_bytes``: the allocated-memory line of ``curve`` (the profile's
    memory curve, ``analysis.memory.memory_curve``) within [t0_us, t1_us], at most about ``bins``
    points a device: in a bin with several events, the highest total (at its time) and the last
    one, so peaks and the level the bin ends at both show. The value held at ``t0_us`` starts it."""
    cols = ["device", "time_us", "allocated_bytes"]
    if len(curve) == 0:
        return pd.DataFrame(columns=cols)
    edges = _bin_edges(t0_us, t1_us, bins)
    out = []
    for d, g in curve.groupby("device", sort=True):
        t = g["time_us"].to_numpy()
        a = g["allocated_bytes"].to_numpy()
        before = np.searchsorted(t, t0_us, side="left") - 1
        start = [(float(t0_us), int(a[before]))] if before >= 0 else []
        sel = np.flatnonzero((t >= t0_us) & (t <= t1_us))
        if len(sel) == 0:
            if start:
                out.append(pd.DataFrame({"device": d, "time_us": [t0_us, t1_us], "allocated_bytes": [start[0][1]] * 2}))
            continue
        tb, ab = t[sel], a[sel]
        b = np.clip(np.searchsorted(edges, tb, side="right") - 1, 0, len(edges) - 2)
        lasts = np.flatnonzero(np.r_[b[1:] != b[:-1], True])
        # each bin's highest value, the earliest if it repeats: the first of its bin in this order
        order = np.lexsort((np.arange(len(b)), -ab, b))
        peaks = order[np.r_[True, b[order][1:] != b[order][:-1]]]
        keep = np.unique(np.r_[peaks, lasts])
        times = np.r_[[s[0] for s in start], tb[keep]]
        values = np.r_[[s[1] for s in start], ab[keep]].astype(np.int64)
        out.append(pd.DataFrame({"device": d, "time_us": times, "allocated_bytes": values}))
    if not out:
        return pd.DataFrame(columns=cols)
    return pd.concat(out, ignore_index=True)[cols]


def flows(events: pd.DataFrame) -> pd.DataFrame:
    """``launch, work, correlation``: positions in the events table of each CPU runtime call and
    the device work (kernel, memcpy, memset) with its correlation id, paired within a rank.

    A correlation id that several runtime events share (a runtime call and a driver call under
    it) pairs with the innermost, latest-starting one: the call that queued the work."""
    codes = events["kind"].cat.codes.to_numpy()
    corr = events["correlation"].to_numpy()
    rank = (pd.factorize(events["rank"])[0].astype(np.int64) if "rank" in events.columns
            else np.zeros(len(events), dtype=np.int64))
    launch = np.flatnonzero((codes == KIND_CODE["runtime"]) & (corr > 0))
    work = np.flatnonzero(kind_mask(codes, DEVICE_WORK_CODES) & (corr > 0))
    cols = ["launch", "work", "correlation"]
    if len(launch) == 0 or len(work) == 0:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in cols})
    start = events["start_us"].to_numpy()
    lf = pd.DataFrame({"rank": rank[launch], "correlation": corr[launch], "launch": launch, "start": start[launch]})
    lf = lf.sort_values("start", kind="stable").drop_duplicates(["rank", "correlation"], keep="last")
    wf = pd.DataFrame({"rank": rank[work], "correlation": corr[work], "work": work})
    pairs = wf.merge(lf, on=["rank", "correlation"], how="inner")
    return pairs.sort_values("work", kind="stable").reset_index(drop=True)[cols].astype(np.int64)
