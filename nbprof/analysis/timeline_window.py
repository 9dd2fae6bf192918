"""What a span of the timeline holds, and which events a name search finds (pure numbers).

A span selected on the timeline (Perfetto's area selection) answers: which operators and which
kernels ran in it and for how long. An event counts when it overlaps the span; ``in_window_us``
is the part of its duration inside the span (an op that started before the selection counts
only from the selection's start), so the numbers add up to what the selection shows. ``calls``
counts the events that overlap. Nested ops each count their own inclusive time, as torch's
``key_averages`` totals do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..events import DEVICE_CODES, DEVICE_WORK_CODES, KIND_CODE, TREE_CODES, kind_mask
from .timeline_tracks import union_busy_us

__all__ = ["WindowSummary", "window_summary", "find_events"]

_COLUMNS = ["name", "calls", "in_window_us", "total_us"]


@dataclass
class WindowSummary:
    """``ops``: CPU events (ops, ``record_function`` ranges, runtime calls) by name; ``kernels``:
    device work (kernels, memcpy, memset) by name; both ``name, calls, in_window_us, total_us``
    sorted by ``in_window_us``. ``device_busy_us``: the union of the device work in the span."""

    t0_us: float
    t1_us: float
    ops: pd.DataFrame
    kernels: pd.DataFrame
    device_busy_us: float

    @property
    def span_us(self) -> float:
        return self.t1_us - self.t0_us


def _by_name(events: pd.DataFrame, rows: np.ndarray, t0: float, t1: float) -> pd.DataFrame:
    start = events["start_us"].to_numpy()[rows]
    dur = events["dur_us"].to_numpy()[rows]
    inside = np.clip(start + dur, t0, t1) - np.clip(start, t0, t1)
    frame = pd.DataFrame({"name": events["name"].to_numpy()[rows].astype(str), "in_window_us": inside, "total_us": dur})
    out = frame.groupby("name", sort=False).agg(calls=("total_us", "size"), in_window_us=("in_window_us", "sum"),
                                                total_us=("total_us", "sum")).reset_index()
    return out.sort_values(["in_window_us", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)[_COLUMNS]


def window_summary(events: pd.DataFrame, t0_us: float, t1_us: float) -> WindowSummary:
    """The ops and kernels overlapping [t0_us, t1_us] (µs since the profile's start)."""

    t0, t1 = float(min(t0_us, t1_us)), float(max(t0_us, t1_us))
    codes = events["kind"].cat.codes.to_numpy()
    start = events["start_us"].to_numpy()
    end = start + events["dur_us"].to_numpy()
    overlaps = (end >= t0) & (start <= t1)
    cpu = np.flatnonzero(kind_mask(codes, TREE_CODES) & overlaps & (events["thread"].to_numpy() >= 0))
    work = np.flatnonzero(kind_mask(codes, DEVICE_WORK_CODES) & overlaps)
    busy = float(union_busy_us(start[work], end[work], np.array([t0, t1]))[0]) if len(work) else 0.0
    return WindowSummary(t0, t1, _by_name(events, cpu, t0, t1), _by_name(events, work, t0, t1), busy)


def find_events(events: pd.DataFrame, text: str) -> np.ndarray:
    """Positions of the events whose name contains ``text`` (case-insensitive), among those the
    timeline draws (CPU ops and ranges, runtime calls, device work and annotations, Python
    frames); memory events are instants, not found. Matched per distinct name, not per event."""

    needle = str(text).strip().lower()
    if not needle:
        return np.zeros(0, dtype=np.int64)
    cats = pd.Index(events["name"].cat.categories).astype(str)
    hit = np.asarray(cats.str.lower().str.contains(needle, regex=False), dtype=bool)
    codes = events["kind"].cat.codes.to_numpy()
    drawn = kind_mask(codes, TREE_CODES + DEVICE_CODES + (KIND_CODE["python"],))
    name_codes = events["name"].cat.codes.to_numpy()
    return np.flatnonzero(hit[name_codes] & drawn & (name_codes >= 0))
