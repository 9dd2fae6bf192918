"""Vectorized interval arithmetic shared by the device, range, step and rank analyses.

All functions take int64 nanoseconds and small integer group codes (device, stream, rank,
label path ...). Groups are handled in one pass by moving each group to its own stretch of the
time axis (``group * stride + t``), so a single sort and a single running maximum serve all
groups at once; no Python loop runs over events.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, kind_mask, time_ns

__all__ = [
    "union_segments",
    "measure_within",
    "measure_each",
    "gaps",
    "launch_points",
    "assign_points",
    "sum_in_intervals",
    "points_in_intervals",
]


def _stride(start: np.ndarray, end: np.ndarray) -> tuple[int, int]:
    if len(start) == 0:
        return 0, 1
    base = int(min(start.min(), end.min()))
    return base, int(max(start.max(), end.max()) - base) + 2


def union_segments(
    start: np.ndarray, end: np.ndarray, group: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge intervals per group into disjoint segments: ``(seg_group, seg_start, seg_end)``,
    sorted by group then time. Touching intervals merge."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if group is None:
        group = np.zeros(len(start), dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    if len(start) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy(), z.copy()
    end = np.maximum(end, start)
    if group[0] == group.min() == group.max():
        # one group (a rank's process, one device): no second sort key, no offsets (five fewer
        # passes over the intervals; union_segments runs some 20 times for a rank's summary)
        order = np.argsort(start, kind="stable")
        s = start[order]
        run_max = np.maximum.accumulate(end[order])
        first = _segment_starts(s, run_max)
        last = np.r_[first[1:] - 1, len(s) - 1]
        return np.full(len(first), group[0], dtype=np.int64), s[first], run_max[last]
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    base, stride = _stride(s, e)
    off = g * stride - base
    so, eo = s + off, e + off
    run_max = np.maximum.accumulate(eo)
    first = _segment_starts(so, run_max)
    last = np.r_[first[1:] - 1, len(s) - 1]
    seg_g = g[first]
    seg_start = s[first]
    seg_end = run_max[last] - off[first]
    return seg_g, seg_start, seg_end


def _segment_starts(start: np.ndarray, run_max: np.ndarray) -> np.ndarray:
    """Where a new segment begins: the first interval, and each one starting after every earlier
    one ended (``run_max``: the running maximum of the ends, in start order)."""
    new = np.empty(len(start), dtype=bool)
    new[0] = True
    new[1:] = start[1:] > run_max[:-1]
    return np.flatnonzero(new)


def measure_within(
    seg_group: np.ndarray,
    seg_start: np.ndarray,
    seg_end: np.ndarray,
    win_group: np.ndarray,
    win_start: np.ndarray,
    win_end: np.ndarray,
    n_groups: int,
) -> np.ndarray:
    """Per group: the length of (segments ∩ windows). Segments and windows must each be disjoint
    within a group (``union_segments`` output)."""
    out = np.zeros(n_groups, dtype=np.float64)
    inside = measure_each(seg_group, seg_start, seg_end, win_group, win_start, win_end)
    np.add.at(out, np.asarray(win_group, dtype=np.int64), inside)
    return out


def measure_each(
    seg_group: np.ndarray,
    seg_start: np.ndarray,
    seg_end: np.ndarray,
    win_group: np.ndarray,
    win_start: np.ndarray,
    win_end: np.ndarray,
) -> np.ndarray:
    """Per window: the length of (segments of its group ∩ the window). Segments must be disjoint
    within a group (``union_segments`` output); windows may overlap."""
    if len(seg_start) == 0 or len(win_start) == 0:
        return np.zeros(len(win_start), dtype=np.float64)
    base, stride = _stride(np.r_[seg_start, win_start], np.r_[seg_end, win_end])
    s = seg_group * stride + (seg_start - base)
    e = seg_group * stride + (seg_end - base)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    cum = np.r_[0, np.cumsum(e - s)]

    def covered(t: np.ndarray) -> np.ndarray:
        # length of the segments' part that lies before t
        i = np.searchsorted(s, t, side="right")  # segments starting at or before t
        j = np.maximum(i - 1, 0)  # the last of them: maybe partly before t; all earlier ones fully
        part = np.clip(t - s[j], 0, e[j] - s[j])
        return np.where(i > 0, cum[j] + part, 0)

    ws = win_group * stride + (win_start - base)
    we = win_group * stride + (win_end - base)
    return (covered(we) - covered(ws)).astype(np.float64)


def gaps(seg_group: np.ndarray, seg_start: np.ndarray, seg_end: np.ndarray) -> pd.DataFrame:
    """The idle gaps between consecutive segments of each group: ``group, start, end`` (ns)."""
    if len(seg_start) < 2:
        return pd.DataFrame({"group": np.zeros(0, np.int64), "start": np.zeros(0, np.int64),
                             "end": np.zeros(0, np.int64)})
    same = seg_group[1:] == seg_group[:-1]
    return pd.DataFrame({"group": seg_group[1:][same], "start": seg_end[:-1][same], "end": seg_start[1:][same]})


def launch_points(events: pd.DataFrame, process: np.ndarray) -> pd.DataFrame:
    """Every device work event (kernel, memcpy, memset) with the time and process of its launch.

    The launch is the runtime call with the same correlation id (``cudaLaunchKernel``,
    ``cudaMemcpyAsync``, ...); where none was recorded, the start of the op that launched it
    (its ``parent``). Columns: ``row, launch_ns, process, dur_ns, runtime_row, runtime_dur_ns``;
    device work with neither is left out.
    """
    kind = events["kind"].cat.codes.to_numpy()
    work = np.flatnonzero(kind_mask(kind, DEVICE_WORK_CODES))
    start_us = events["start_us"].to_numpy()
    dur_us = events["dur_us"].to_numpy()
    if len(work) == 0:
        z = np.zeros(0, dtype=np.int64)
        return pd.DataFrame({"row": z, "launch_ns": z, "process": z, "dur_ns": z, "runtime_row": z,
                             "runtime_dur_ns": z})
    corr = events["correlation"].to_numpy()
    runtime = np.flatnonzero((kind == KIND_CODE["runtime"]) & (corr > 0))
    rt_row = np.full(len(work), -1, dtype=np.int64)
    if len(runtime):
        order = np.argsort(corr[runtime], kind="stable")
        keys = corr[runtime][order]
        want = corr[work]
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        hit = (keys[at] == want) & (want > 0)
        rt_row[hit] = runtime[order][at[hit]]
    parent = events["parent"].to_numpy() if "parent" in events.columns else np.full(len(events), -1)
    op_row = parent[work]
    launch_row = np.where(rt_row >= 0, rt_row, op_row)
    ok = launch_row >= 0
    lr = launch_row[ok]
    rt = rt_row[ok]
    # times in ns of these rows only (not of every event: a few ms a call at 1 M events)
    return pd.DataFrame(
        {
            "row": work[ok],
            "launch_ns": time_ns(start_us[lr]),
            "process": process[lr],
            "dur_ns": time_ns(dur_us[work[ok]]),
            "runtime_row": rt,
            "runtime_dur_ns": np.where(rt >= 0, time_ns(dur_us[np.maximum(rt, 0)]), 0),
        }
    )


def assign_points(
    point_group: np.ndarray, point_t: np.ndarray, iv_group: np.ndarray, iv_start: np.ndarray, iv_end: np.ndarray
) -> np.ndarray:
    """For each point: the index of the interval of its group with ``start <= t < end``, or -1.

    Intervals must be disjoint within a group (e.g. ProfilerStep#N on one process)."""
    out = np.full(len(point_t), -1, dtype=np.int64)
    if len(point_t) == 0 or len(iv_start) == 0:
        return out
    base, stride = _stride(np.r_[point_t, iv_start], np.r_[point_t, iv_end])
    ks = iv_group * stride + (iv_start - base)
    ke = iv_group * stride + (iv_end - base)
    order = np.argsort(ks, kind="stable")
    ks, ke = ks[order], ke[order]
    kp = point_group * stride + (point_t - base)
    i = np.searchsorted(ks, kp, side="right") - 1
    ok = (i >= 0) & (kp < ke[np.maximum(i, 0)])
    out[ok] = order[i[ok]]
    return out


def sum_in_intervals(
    point_group: np.ndarray,
    point_t: np.ndarray,
    weight: np.ndarray,
    iv_group: np.ndarray,
    iv_start: np.ndarray,
    iv_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For each interval: (sum of weights, number) of the points of its group with
    ``start <= t < end``. Intervals may overlap or nest; points are counted per interval."""
    n = len(iv_start)
    if n == 0 or len(point_t) == 0:
        return np.zeros(n), np.zeros(n, dtype=np.int64)
    base, stride = _stride(np.r_[point_t, iv_start], np.r_[point_t, iv_end])
    kp = point_group * stride + (point_t - base)
    order = np.argsort(kp, kind="stable")
    kp = kp[order]
    cum = np.r_[0.0, np.cumsum(np.asarray(weight, dtype=np.float64)[order])]
    a = np.searchsorted(kp, iv_group * stride + (iv_start - base), side="left")
    b = np.searchsorted(kp, iv_group * stride + (iv_end - base), side="left")
    return cum[b] - cum[a], (b - a).astype(np.int64)


def points_in_intervals(
    point_group: np.ndarray,
    point_t: np.ndarray,
    iv_group: np.ndarray,
    iv_start: np.ndarray,
    iv_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Every (interval, point) pair of one group with ``start <= t < end``, as two index arrays
    (intervals in order; points of an interval by time). Intervals may overlap or nest: a point
    is paired with each interval holding it."""
    z = np.zeros(0, dtype=np.int64)
    if len(iv_start) == 0 or len(point_t) == 0:
        return z, z.copy()
    base, stride = _stride(np.r_[point_t, iv_start], np.r_[point_t, iv_end])
    kp = np.asarray(point_group, dtype=np.int64) * stride + (np.asarray(point_t, dtype=np.int64) - base)
    order = np.argsort(kp, kind="stable")
    kp = kp[order]
    g = np.asarray(iv_group, dtype=np.int64) * stride
    lo = np.searchsorted(kp, g + (np.asarray(iv_start, dtype=np.int64) - base), side="left")
    hi = np.searchsorted(kp, g + (np.asarray(iv_end, dtype=np.int64) - base), side="left")
    n = np.maximum(hi - lo, 0)
    total = int(n.sum())
    iv_index = np.repeat(np.arange(len(n), dtype=np.int64), n)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return iv_index, order[np.repeat(lo, n) + within]
