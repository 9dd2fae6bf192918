"""Run cProfile around a piece of code and turn its raw stats into tables.

cProfile's raw result is ``{(file, line, func): (primitive_calls, ncalls, tottime, cumtime,
callers)}`` where ``callers`` maps each caller to the same four numbers for that edge. The stats
table is that dict as rows (what ``pstats`` prints); the edges table is every caller -> callee
edge with its own numbers (what ``pstats.print_callers/print_callees`` print).

What cProfile sees: only the thread that runs the cell (Python < 3.12: ``sys.setprofile`` is
per thread; 3.12+: cProfile's ``sys.monitoring`` hooks also see other threads' calls, but time
them as if on one stack, which is wrong). Work in other threads or processes (DataLoader workers)
is not attributed to its functions; use ``%%torchprof`` for those.
"""

from __future__ import annotations

import cProfile
import os
import sys
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ProfilerBusyError

__all__ = ["CProfileSession", "stats_tables", "STATS_COLUMNS", "EDGE_COLUMNS", "another_profiler_active"]

STATS_COLUMNS = (
    "function",
    "filename",
    "lineno",
    "ncalls",
    "primitive_calls",
    "tottime_s",
    "cumtime_s",
    "tottime_per_call_s",
    "cumtime_per_call_s",
)
EDGE_COLUMNS = (
    "caller_function",
    "caller_filename",
    "caller_lineno",
    "callee_function",
    "callee_filename",
    "callee_lineno",
    "ncalls",
    "primitive_calls",
    "tottime_s",
    "cumtime_s",
)

_NBPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Calls nbprof itself makes while the profiler runs (starting/stopping it).
_OWN_BUILTINS = ("<method 'disable' of '_lsprof.Profiler' objects>",)


def another_profiler_active() -> str | None:
    """Describe the profiler or tracer that holds the profiling hook, or None if it is free."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:  # Python 3.12+: cProfile claims sys.monitoring's PROFILER_ID
        tool = monitoring.get_tool(monitoring.PROFILER_ID)
        if tool is not None:
            return f"another profiling tool ({tool}) is already active"
    hook = sys.getprofile()
    if hook is not None:
        owner = getattr(hook, "__self__", hook)
        return f"another profiler is already active ({type(owner).__name__})"
    return None


class CProfileSession:
    """``start()``, run the code, ``stop()``; then ``raw`` holds cProfile's stats dict."""

    def __init__(self) -> None:
        self.profiler: cProfile.Profile | None = None
        self.raw: dict[Any, Any] = {}
        self._running = False

    def start(self) -> None:
        busy = another_profiler_active()
        if busy:
            raise ProfilerBusyError(f"cannot start cProfile: {busy}; stop it first (e.g. its .disable())")
        # recorded before enable(): an interrupt right after enable() must still find it to stop
        self.profiler = cProfile.Profile()
        self._running = True
        try:
            self.profiler.enable()
        except ValueError as e:  # Python 3.12+: "Another profiling tool is already active"
            self.profiler, self._running = None, False
            raise ProfilerBusyError(f"cannot start cProfile: {e}") from None

    def stop(self) -> dict[Any, Any]:
        if not self._running or self.profiler is None:
            return {}
        self._running = False
        self.profiler.disable()
        self.profiler.create_stats()
        self.raw = _without_own_frames(self.profiler.stats)  # type: ignore[attr-defined]
        return self.raw


def _is_own(key: tuple[str, int, str]) -> bool:
    filename, _, func = key
    if filename == "~":
        return func in _OWN_BUILTINS
    return os.path.abspath(filename).startswith(_NBPROF_DIR + os.sep)


def _without_own_frames(raw: dict[Any, Any]) -> dict[Any, Any]:
    """Take nbprof's own work out of cProfile's raw stats.

    nbprof's functions go; so do builtins that only nbprof called (``sys.exc_info`` in
    ``end()``). A builtin the cell also called keeps the cell's calls: the numbers on the edges
    from nbprof's frames are subtracted from its totals.
    """
    own = {k for k in raw if _is_own(k)}
    changed = True
    while changed:
        changed = False
        for key, (_, _, _, _, callers) in raw.items():
            if key not in own and key[0] == "~" and callers and all(c in own for c in callers):
                own.add(key)
                changed = True
    if not own:
        return dict(raw)
    out = {}
    for key, (cc, nc, tt, ct, callers) in raw.items():
        if key in own:
            continue
        kept = {}
        for caller, edge in callers.items():
            if caller in own:
                e_nc, e_cc, e_tt, e_ct = edge
                cc, nc, tt, ct = cc - e_cc, nc - e_nc, tt - e_tt, ct - e_ct
            else:
                kept[caller] = edge
        out[key] = (cc, nc, tt, ct, kept)
    return out


def stats_tables(raw: dict[Any, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """cProfile's raw stats -> (stats table, edges table)."""
    keys = list(raw)
    n = len(keys)
    values = [raw[k] for k in keys]
    primitive = np.fromiter((v[0] for v in values), dtype=np.int64, count=n)
    ncalls = np.fromiter((v[1] for v in values), dtype=np.int64, count=n)
    tottime = np.fromiter((v[2] for v in values), dtype=np.float64, count=n)
    cumtime = np.fromiter((v[3] for v in values), dtype=np.float64, count=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        # pstats divides tottime by ncalls and cumtime by primitive calls
        tt_per = np.where(ncalls > 0, tottime / np.maximum(ncalls, 1), 0.0)
        ct_per = np.where(primitive > 0, cumtime / np.maximum(primitive, 1), 0.0)
    stats = pd.DataFrame(
        {
            "function": [k[2] for k in keys],
            "filename": [k[0] for k in keys],
            "lineno": np.fromiter((k[1] for k in keys), dtype=np.int64, count=n),
            "ncalls": ncalls,
            "primitive_calls": primitive,
            "tottime_s": tottime,
            "cumtime_s": cumtime,
            "tottime_per_call_s": tt_per,
            "cumtime_per_call_s": ct_per,
        },
        columns=list(STATS_COLUMNS),
    )
    rows = []
    for callee, v in zip(keys, values):
        for caller, edge in v[4].items():
            # an edge is (ncalls, primitive_calls, tottime, cumtime): note the order differs
            # from the stats row's (primitive_calls, ncalls, ...); old profile.py stores a count
            nc, cc, tt, ct = edge if isinstance(edge, tuple) else (edge, edge, 0.0, 0.0)
            rows.append((caller[2], caller[0], caller[1], callee[2], callee[0], callee[1], nc, cc, tt, ct))
    edges = pd.DataFrame(rows, columns=list(EDGE_COLUMNS))
    edges = edges.astype({"caller_lineno": np.int64, "callee_lineno": np.int64, "ncalls": np.int64,
                          "primitive_calls": np.int64, "tottime_s": np.float64, "cumtime_s": np.float64})
    return stats, edges
