"""A ``--schedule`` profile's cycles kept in its saved trace: the ``nbprofCycles`` key.

A scheduled run merges its cycles (``events.concat_traces(..., label_column="cycle")``): each event
says which cycle it is of, so the time between cycles, which nothing recorded, is not counted as
the device's idle time (``analysis.device_stats.profiled_windows``). A chrome trace has no place
for that column; the writer keeps where each cycle starts (its first event's ``ts``, ns), and the
reader gives every event the last cycle that starts at or before it::

    "nbprofCycles": {"starts_ns": [1732000000000000000, 1732000000250000000]}

Cycles follow each other, so that rule gives back every event's cycle; the writer checks it does
(a cycle's event before the next cycle's first would be read as the next one's) and otherwise
writes no key, and the file reads as one window, as any other trace. A key that does not fit (not
an object, starts that are no rising integers) is one note, and the file is read without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .trace_schema import INT64_MAX, INT64_MIN

__all__ = ["CYCLES_KEY", "cycle_starts", "read_cycles"]

CYCLES_KEY = "nbprofCycles"


def cycle_starts(cycle: pd.Series, start_ns: np.ndarray) -> list[int] | None:
    """Each cycle's first start (the file's ns) when the cycles are ``0, 1, ...`` in time order and
    those starts give back every event's cycle; else None (nothing to write)."""
    if not len(cycle):
        return None
    labels = cycle.to_numpy()
    try:
        codes = labels.astype(np.int64)
    except (TypeError, ValueError):  # labels that are no cycle numbers: not a scheduled run's
        return None
    if (codes != labels).any() or codes.min() != 0:
        return None
    n = int(codes.max()) + 1
    firsts = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(firsts, codes, start_ns)
    if (firsts == np.iinfo(np.int64).max).any() or (firsts[1:] <= firsts[:-1]).any():
        return None  # a cycle without events, or cycles not in time order
    if not np.array_equal(np.searchsorted(firsts, start_ns, side="right") - 1, codes):
        return None
    return firsts.tolist()


def read_cycles(key: Any, start_ns: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    """Every event's cycle from the key and the events' starts (the file's ns), or (None, what is
    wrong with the key)."""
    starts = key.get("starts_ns") if isinstance(key, dict) else None
    if (not isinstance(starts, list) or not starts
            or not all(type(s) is int and INT64_MIN <= s <= INT64_MAX for s in starts)):
        return None, "nbprofCycles is not a list of the cycles' starts (integer ns): the cycles are left out"
    firsts = np.array(starts, dtype=np.int64)
    if (firsts[1:] <= firsts[:-1]).any():  # compared, not subtracted: a difference of 2**63 ns or more overflows
        return None, "nbprofCycles' starts do not rise: the cycles are left out"
    return np.clip(np.searchsorted(firsts, start_ns, side="right") - 1, 0, None), None
