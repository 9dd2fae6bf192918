"""The allocator's memory over time, from the memory events (``--memory``).

Every memory event carries the allocator's total allocated and reserved bytes right after it, so
the curve is those totals in time order, per device. The peak is the largest total allocated;
the op behind it is the CPU event that was open when that allocation happened.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..events import KIND_CODE

__all__ = ["memory_curve", "MemoryPeak", "memory_peaks", "downsample_max"]


def memory_curve(events: pd.DataFrame) -> pd.DataFrame:
    """``device, time_us, allocated_bytes, reserved_bytes, delta_bytes, op`` per memory event."""
    is_mem = (events["kind"].cat.codes.to_numpy() == KIND_CODE["memory"])
    rows = np.flatnonzero(is_mem)
    if len(rows) == 0:
        return pd.DataFrame(columns=["device", "time_us", "allocated_bytes", "reserved_bytes", "delta_bytes", "op"])
    sub = events.iloc[rows]
    parent = sub["parent"].to_numpy()
    names = events["name"].astype(str).to_numpy()
    op = np.where(parent >= 0, names[np.maximum(parent, 0)], "")
    out = pd.DataFrame(
        {
            "device": sub["device"].astype(str).to_numpy(),
            "time_us": sub["start_us"].to_numpy(),
            "allocated_bytes": sub["total_allocated_bytes"].to_numpy(),
            "reserved_bytes": sub["total_reserved_bytes"].to_numpy(),
            "delta_bytes": sub["bytes"].to_numpy(),
            "op": op,
        }
    )
    return out.sort_values(["device", "time_us"], kind="stable").reset_index(drop=True)


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
    n = len(x)
    if n <= 2 * buckets or n == 0:
        return x, y
    span = x[-1] - x[0]
    if span <= 0:
        i = int(np.argmax(y))
        return x[[0, i]], y[[0, i]]
    bucket = np.minimum(((x - x[0]) / span * buckets).astype(np.int64), buckets - 1)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    # the position of each bucket's max: sort by (bucket, -y) and take each bucket's first
    order = np.lexsort((-y, bucket))
    sorted_bucket = bucket[order]
    maxpos = order[np.r_[True, sorted_bucket[1:] != sorted_bucket[:-1]]]
    keep = np.unique(np.concatenate([starts, maxpos, [n - 1]]))
    return x[keep], y[keep]
