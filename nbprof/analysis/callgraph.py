"""Drill-down in a cProfile call graph: who called a function, and what it called.

The numbers are cProfile's own per-edge numbers (the ones ``pstats.print_callers`` and
``print_callees`` show): for the edge caller -> callee, the calls made along it and the callee's
own and cumulative time spent on behalf of that caller.
"""

from __future__ import annotations

import re
import types
from typing import Any

import pandas as pd

from ..errors import OptionError

__all__ = ["match_function", "callers", "callees", "function_key", "top_level_time", "other_threads_suspected",
           "EdgeIndex"]

_LOCATION = re.compile(r"^(?P<file>.*):(?P<line>\d+)\((?P<name>.*)\)$")


def function_key(stats: pd.DataFrame, row: int) -> tuple[str, int, str]:
    return (stats["filename"].iloc[row], int(stats["lineno"].iloc[row]), stats["function"].iloc[row])


def match_function(stats: pd.DataFrame, fn: Any) -> tuple[str, int, str]:
    """Find one function of the profile from a function object, ``"file:line(name)"`` or a name."""
    if isinstance(fn, tuple) and len(fn) == 3:
        mask = (stats["filename"] == fn[0]) & (stats["lineno"] == fn[1]) & (stats["function"] == fn[2])
    elif isinstance(fn, (types.FunctionType, types.MethodType, types.CodeType)):
        code = fn if isinstance(fn, types.CodeType) else getattr(fn, "__func__", fn).__code__
        mask = (
            (stats["filename"] == code.co_filename)
            & (stats["lineno"] == code.co_firstlineno)
            & (stats["function"] == code.co_name)
        )
    elif isinstance(fn, str):
        m = _LOCATION.match(fn)
        if m:
            mask = (
                stats["filename"].str.endswith(m["file"])
                & (stats["lineno"] == int(m["line"]))
                & (stats["function"] == m["name"])
            )
        else:
            mask = stats["function"] == fn
            if not mask.any():  # builtins are named "<built-in method time.sleep>": allow "time.sleep"
                mask = stats["function"].str.contains(fn, regex=False)
    else:
        raise OptionError(f"pass a function, its name or 'file:line(name)', not {type(fn).__name__}")
    hits = stats.index[mask.to_numpy()]
    if len(hits) == 0:
        raise OptionError(f"{_describe(fn)} is not in this profile")
    if len(hits) > 1:
        where = ", ".join(
            f"{stats['filename'][i]}:{stats['lineno'][i]}({stats['function'][i]})" for i in hits[:5]
        )
        raise OptionError(f"{_describe(fn)} matches {len(hits)} functions ({where}); pass 'file:line(name)'")
    return function_key(stats, stats.index.get_loc(hits[0]))


def _describe(fn: Any) -> str:
    if isinstance(fn, str):
        return repr(fn)
    return getattr(fn, "__qualname__", getattr(fn, "co_name", repr(fn)))


def _edge_view(edges: pd.DataFrame, mask: pd.Series, side: str) -> pd.DataFrame:
    sub = edges.loc[mask.to_numpy()]
    out = pd.DataFrame(
        {
            # .array keeps the text dtype where no edge matches (to_numpy() of none is object)
            "function": sub[f"{side}_function"].array,
            "filename": sub[f"{side}_filename"].array,
            "lineno": sub[f"{side}_lineno"].to_numpy(),
            "ncalls": sub["ncalls"].to_numpy(),
            "primitive_calls": sub["primitive_calls"].to_numpy(),
            "tottime_s": sub["tottime_s"].to_numpy(),
            "cumtime_s": sub["cumtime_s"].to_numpy(),
        }
    )
    return out.sort_values("cumtime_s", ascending=False, kind="stable").reset_index(drop=True)


class EdgeIndex:
    """Every function's edges, found once: for views that show many functions' edges (a
    DataFrame per function would cost more than the whole profile).

    ``callers(key)`` / ``callees(key)`` give the row numbers of the edges into / out of a
    function, biggest cumulative time first; the columns are plain arrays."""

    def __init__(self, edges: pd.DataFrame) -> None:
        import numpy as np

        self.caller = list(zip(edges["caller_filename"].tolist(), edges["caller_lineno"].tolist(),
                               edges["caller_function"].tolist()))
        self.callee = list(zip(edges["callee_filename"].tolist(), edges["callee_lineno"].tolist(),
                               edges["callee_function"].tolist()))
        self.ncalls = edges["ncalls"].to_numpy()
        self.primitive_calls = edges["primitive_calls"].to_numpy()
        self.tottime_s = edges["tottime_s"].to_numpy()
        self.cumtime_s = edges["cumtime_s"].to_numpy()
        order = np.argsort(-self.cumtime_s, kind="stable")  # so each list below is already sorted
        self._in: dict[tuple, list[int]] = {}
        self._out: dict[tuple, list[int]] = {}
        for row in order.tolist():
            self._in.setdefault(self.callee[row], []).append(row)
            self._out.setdefault(self.caller[row], []).append(row)

    def callers(self, key: tuple[str, int, str]) -> list[int]:
        return self._in.get(key, [])

    def callees(self, key: tuple[str, int, str]) -> list[int]:
        return self._out.get(key, [])


def callers(stats: pd.DataFrame, edges: pd.DataFrame, fn: Any) -> pd.DataFrame:
    f, line, name = match_function(stats, fn)
    mask = (edges["callee_filename"] == f) & (edges["callee_lineno"] == line) & (edges["callee_function"] == name)
    return _edge_view(edges, mask, "caller")


def callees(stats: pd.DataFrame, edges: pd.DataFrame, fn: Any) -> pd.DataFrame:
    f, line, name = match_function(stats, fn)
    mask = (edges["caller_filename"] == f) & (edges["caller_lineno"] == line) & (edges["caller_function"] == name)
    return _edge_view(edges, mask, "callee")


def top_level_time(stats: pd.DataFrame, edges: pd.DataFrame) -> float:
    """Time spent inside the functions the cell called itself (the flame view's root). On one
    thread it equals the sum of tottime (pstats' "in N seconds") up to rounding."""
    import math

    from .flame import _Graph

    return math.fsum(v for _, v, _ in _Graph(stats, edges).top_level())


def other_threads_suspected(stats: pd.DataFrame, edges: pd.DataFrame, wall_s: float | None) -> bool:
    """True when the profile cannot come from one thread's stack.

    Python 3.12+ cProfile hooks ``sys.monitoring``, which reports every thread's calls; cProfile
    puts them all on one stack, so a thread running Python code during the cell (one the cell
    started, or a background one such as ipykernel's output thread when the cell prints) mixes
    into the profile with wrong times. Two signs that never occur on one thread: a function
    with more own time than cumulative time, or more time inside top-level functions than the
    cell took (``wall_s``).
    """
    if not len(stats):
        return False
    tt = stats["tottime_s"].to_numpy()
    ct = stats["cumtime_s"].to_numpy()
    if ((tt - ct) > 1e-6 + 1e-6 * ct).any():
        return True
    if wall_s is not None and wall_s > 0:
        return top_level_time(stats, edges) > 1.02 * wall_s + 1e-4
    return False
