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
from .collector import Collector

__all__ = ["CProfileSession", "raw_stats", "stats_tables", "stats_table", "edges_table", "STATS_COLUMNS", "EDGE_COLUMNS", "another_profiler_active"]

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


class CProfileSession(Collector):
    """``begin()``, run the code, ``end()``; then ``result()`` (and ``raw``) is cProfile's stats
    dict, without nbprof's own frames."""

    def __init__(self) -> None:
        self.profiler: cProfile.Profile | None = None
        self.raw: dict[Any, Any] = {}
        self._running = False

    def begin(self) -> None:
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

    def step(self) -> None:
        """cProfile records every call, with no notion of steps: nothing to do (so a loop that
        calls ``nbprof.step()`` can be profiled with ``%%cprofile`` too)."""

    def toggle_cuda(self, on: bool) -> None:
        """cProfile records no CUDA activity: nothing to pause or resume."""

    def end(self) -> None:
        if not self._running or self.profiler is None:
            return
        self._running = False
        self.profiler.disable()
        self.profiler.create_stats()  # the live profiler stays what pstats.Stats(result.profiler) reads
        self.raw = _without_own_frames(raw_stats(self.profiler))

    def result(self) -> dict[Any, Any]:
        return self.raw


def raw_stats(profiler: cProfile.Profile) -> dict[Any, Any]:
    """cProfile's raw stats, as ``create_stats`` makes them, but one row per code object.

    pstats keys a function by ``(file, first line, name)``: two code objects with the same key
    (two list comprehensions, generator expressions or lambdas on one line; a function defined
    again in a re-run cell) share one row, and ``create_stats`` does not even add them up: the
    last one read overwrites the others while the edges of their callees still name the key, so
    a comprehension with 60 % of a cell's time disappears from the table, the flame view and the
    callers (measured on Python 3.11). nbprof holds the live profiler, whose ``getstats()`` gives
    every code object apart: those that would share a key are told apart by the column they start
    at ("<listcomp> at col 5"), every other key is pstats' own."""
    entries = profiler.getstats()
    codes: dict[tuple[str, int, str], list[Any]] = {}
    for entry in entries:
        code = entry.code
        if not isinstance(code, str):
            same = codes.setdefault((code.co_filename, code.co_firstlineno, code.co_name), [])
            if not any(c is code for c in same):
                same.append(code)
    names: dict[int, tuple[str, int, str]] = {}
    for (filename, line, name), same in codes.items():
        if len(same) == 1:
            continue
        where = [_where_on_the_line(code) for code in same]
        if len(set(where)) < len(same):  # no positions, or the same column: their order
            where = [f"#{i + 1}" for i in range(len(same))]
        for code, at in zip(same, where):
            names[id(code)] = (filename, line, f"{name} {at}")

    def label(code: Any) -> tuple[str, int, str]:
        if isinstance(code, str):  # a builtin
            return ("~", 0, code)
        return names.get(id(code)) or (code.co_filename, code.co_firstlineno, code.co_name)

    # cProfile.Profile.snapshot_stats, keyed by these labels
    stats: dict[Any, Any] = {}
    callers_of: dict[int, dict[Any, Any]] = {}
    for entry in entries:
        callers: dict[Any, Any] = {}
        callers_of[id(entry.code)] = callers
        nc = entry.callcount
        stats[label(entry.code)] = (nc - entry.reccallcount, nc, entry.inlinetime, entry.totaltime, callers)
    for entry in entries:
        caller = label(entry.code)
        for sub in entry.calls or ():
            of_callee = callers_of.get(id(sub.code))
            if of_callee is None:
                continue
            nc, cc, tt, ct = sub.callcount, sub.callcount - sub.reccallcount, sub.inlinetime, sub.totaltime
            if caller in of_callee:
                p_nc, p_cc, p_tt, p_ct = of_callee[caller]
                nc, cc, tt, ct = nc + p_nc, cc + p_cc, tt + p_tt, ct + p_ct
            of_callee[caller] = (nc, cc, tt, ct)
    return stats


def _where_on_the_line(code: Any) -> str:
    """Where a code object starts on its first line ("at col 5", 1-based as editors count): the
    first position there past column 0 (its first instruction, RESUME, is at column 0), from its
    positions (Python 3.11+); "" where there are none."""
    positions = getattr(code, "co_positions", None)
    for line, _, col, _ in positions() if positions is not None else ():
        if line == code.co_firstlineno and col:
            return f"at col {col + 1}"
    return ""


def _is_own(key: tuple[str, int, str], own_files: dict[str, bool]) -> bool:
    filename, _, func = key
    if filename == "~":
        return func in _OWN_BUILTINS
    own = own_files.get(filename)
    if own is None:  # once per file: abspath is most of this function's cost
        own = own_files[filename] = os.path.abspath(filename).startswith(_NBPROF_DIR + os.sep)
    return own


def _without_own_frames(raw: dict[Any, Any]) -> dict[Any, Any]:
    """Take nbprof's own work out of cProfile's raw stats.

    nbprof's functions go; so do builtins that only nbprof called (``sys.exc_info`` in
    ``end()``). A builtin the cell also called keeps the cell's calls: the numbers on the edges
    from nbprof's frames are subtracted from its totals. A Python function nbprof called is the
    user's code that nbprof ran (the statement of ``%cprofile stmt``): it keeps its numbers and
    loses only the edge from nbprof, so it becomes a top-level function of the profile.
    """
    own_files: dict[str, bool] = {}
    own = {k for k in raw if _is_own(k, own_files)}
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
            if caller not in own:
                kept[caller] = edge
            elif key[0] == "~":  # a builtin nbprof called: take nbprof's calls out
                e_nc, e_cc, e_tt, e_ct = edge
                cc, nc, tt, ct = cc - e_cc, nc - e_nc, tt - e_tt, ct - e_ct
        out[key] = (cc, nc, tt, ct, kept)
    return out


def stats_tables(raw: dict[Any, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """cProfile's raw stats -> (stats table, edges table)."""
    return stats_table(raw), edges_table(raw)


def stats_table(raw: dict[Any, Any]) -> pd.DataFrame:
    """cProfile's raw stats -> the stats table (what pstats prints).

    One pass over the raw dict, columns built as lists / numpy arrays and handed to pandas once
    (no row tuples, no ``astype`` afterwards): well under a millisecond for a small cell, a few
    ms for thousands of functions, less than pstats takes to sort and print the same."""
    keys = list(raw)
    n = len(keys)
    values = list(raw.values())
    if n:
        filenames, linenos, functions = map(list, zip(*keys))
        primitive_l, ncalls_l, tottime_l, cumtime_l, _ = zip(*values)
    else:
        filenames, linenos, functions = [], [], []
        primitive_l = ncalls_l = tottime_l = cumtime_l = ()
    primitive = np.fromiter(primitive_l, dtype=np.int64, count=n)
    ncalls = np.fromiter(ncalls_l, dtype=np.int64, count=n)
    tottime = np.fromiter(tottime_l, dtype=np.float64, count=n)
    cumtime = np.fromiter(cumtime_l, dtype=np.float64, count=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        # pstats divides tottime by ncalls and cumtime by primitive calls
        tt_per = np.where(ncalls > 0, tottime / np.maximum(ncalls, 1), 0.0)
        ct_per = np.where(primitive > 0, cumtime / np.maximum(primitive, 1), 0.0)
    return pd.DataFrame(
        {
            "function": functions,
            "filename": filenames,
            "lineno": np.fromiter(linenos, dtype=np.int64, count=n),
            "ncalls": ncalls,
            "primitive_calls": primitive,
            "tottime_s": tottime,
            "cumtime_s": cumtime,
            "tottime_per_call_s": tt_per,
            "cumtime_per_call_s": ct_per,
        },
        columns=list(STATS_COLUMNS),
    )


def edges_table(raw: dict[Any, Any]) -> pd.DataFrame:
    """cProfile's raw stats -> every caller -> callee edge with its own numbers (what
    ``pstats.print_callers/print_callees`` print)."""
    caller_fn: list[str] = []
    caller_file: list[str] = []
    caller_line: list[int] = []
    callee_fn: list[str] = []
    callee_file: list[str] = []
    callee_line: list[int] = []
    e_nc: list[int] = []
    e_cc: list[int] = []
    e_tt: list[float] = []
    e_ct: list[float] = []
    for callee, value in raw.items():
        callers = value[4]
        if not callers:
            continue
        k = len(callers)
        callee_fn += [callee[2]] * k
        callee_file += [callee[0]] * k
        callee_line += [callee[1]] * k
        for caller, edge in callers.items():
            caller_file.append(caller[0])
            caller_line.append(caller[1])
            caller_fn.append(caller[2])
            # an edge is (ncalls, primitive_calls, tottime, cumtime): note the order differs
            # from the stats row's (primitive_calls, ncalls, ...); old profile.py stores a count
            if isinstance(edge, tuple):
                nc, cc, tt, ct = edge
            else:
                nc, cc, tt, ct = edge, edge, 0.0, 0.0
            e_nc.append(nc)
            e_cc.append(cc)
            e_tt.append(tt)
            e_ct.append(ct)
    m = len(e_nc)
    if m == 0:  # no edges: object columns, as pandas makes them from no rows
        caller_fn = caller_file = callee_fn = callee_file = np.zeros(0, dtype=object)  # type: ignore[assignment]
    return pd.DataFrame(
        {
            "caller_function": caller_fn,
            "caller_filename": caller_file,
            "caller_lineno": np.fromiter(caller_line, dtype=np.int64, count=m),
            "callee_function": callee_fn,
            "callee_filename": callee_file,
            "callee_lineno": np.fromiter(callee_line, dtype=np.int64, count=m),
            "ncalls": np.fromiter(e_nc, dtype=np.int64, count=m),
            "primitive_calls": np.fromiter(e_cc, dtype=np.int64, count=m),
            "tottime_s": np.fromiter(e_tt, dtype=np.float64, count=m),
            "cumtime_s": np.fromiter(e_ct, dtype=np.float64, count=m),
        },
        columns=list(EDGE_COLUMNS),
    )
