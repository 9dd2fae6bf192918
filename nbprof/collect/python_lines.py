"""The table of ``%%cprofile --lines``: the events ``collect.python_line_recorder.PythonLineRecorder``
recorded -> one row per line of the user's code that ran (``p.lines()``), hits and time as
line_profiler counts them.

Everything happens after the run, on numpy arrays: each line event's time is the next event's
time of the same activation (a stable sort by activation), then hits and time are summed per
(code object, line) with ``bincount``; a line's own time leaves out the user's frames it called.
"""

from __future__ import annotations

import itertools
from types import CodeType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .python_line_recorder import PythonLineRecorder

__all__ = ["LINE_COLUMNS", "line_table", "empty_line_table"]

LINE_COLUMNS = ("cell", "file", "line", "function", "function_line", "source", "hits", "time_us", "per_hit_us",
                "self_time_us")


def line_table(t: PythonLineRecorder) -> pd.DataFrame:
    """The recorded events -> one row per line that ran: ``cell, file, line, function,
    function_line, source, hits, time_us, per_hit_us`` (see ``LINE_COLUMNS``), in the order of
    the code (cells by number, then files; lines in order).

    Vectorized over the events; the loop is over the rows (lines that ran), never the events."""
    if not t.events:
        return empty_line_table()
    # fromiter over the flattened tuples: a third of np.array's time on a list of tuples (measured)
    ev = np.fromiter(itertools.chain.from_iterable(t.events), dtype=np.int64, count=3 * len(t.events)).reshape(-1, 3)
    act, line, at = ev[:, 0], ev[:, 1], ev[:, 2]
    order = np.argsort(act, kind="stable")  # each activation's events, in the order they came
    act, line, at = act[order], line[order], at[order]
    same = np.r_[act[1:] == act[:-1], False]  # the next event is of the same activation
    # a line ends at its activation's next event; one still running at the end, at the end
    ends = np.where(same, np.r_[at[1:], 0], max(t.stop_ns, int(at.max())))
    dur = ends - at
    own = _own_times(t, act, line, at, dur)
    is_line = line > 0  # -1: a return; 0: no line (the top of an empty module)
    code = np.asarray(t.activation_code, dtype=np.int64)[act[is_line]]
    lines, dur, own = line[is_line], dur[is_line], own[is_line]
    key = code * (1 << 31) + lines
    keys, inverse = np.unique(key, return_inverse=True)
    hits = np.bincount(inverse, minlength=len(keys))
    time_ns = np.bincount(inverse, weights=dur, minlength=len(keys))
    self_ns = np.bincount(inverse, weights=own, minlength=len(keys))
    code_of, line_of = keys // (1 << 31), keys % (1 << 31)
    user = t.user
    files = [t.codes[c].co_filename for c in range(len(t.codes))]
    sources = {f: user.source(f).splitlines() for f in set(files[c] for c in np.unique(code_of).tolist())}
    rows = {
        "cell": [user.cell_name(files[c]) for c in code_of.tolist()],
        "file": [files[c] for c in code_of.tolist()],
        "line": line_of,
        "function": [_function_name(t.codes[c]) for c in code_of.tolist()],
        "function_line": np.asarray([t.codes[c].co_firstlineno for c in code_of.tolist()], dtype=np.int64),
        "source": [_line_text(sources[files[c]], n) for c, n in zip(code_of.tolist(), line_of.tolist())],
        "hits": hits.astype(np.int64),
        "time_us": time_ns / 1000.0,
        "self_time_us": self_ns / 1000.0,
    }
    frame = pd.DataFrame(rows)
    # code objects with the same file, function and first line (a function redefined in a loop):
    # one row per line of the user's view
    frame = (frame.groupby(["file", "function_line", "function", "line"], sort=False, dropna=False)
             .agg(cell=("cell", "first"), source=("source", "first"), hits=("hits", "sum"), time_us=("time_us", "sum"),
                  self_time_us=("self_time_us", "sum"))
             .reset_index())
    frame["per_hit_us"] = frame["time_us"] / frame["hits"]
    number = [user.cell_number(f) for f in frame["file"]]
    frame["_order"] = [-1 if n is None else n for n in number]
    frame["_is_file"] = [n is None for n in number]
    frame = frame.sort_values(["_is_file", "_order", "file", "line", "function_line"], kind="stable")
    return frame[list(LINE_COLUMNS)].reset_index(drop=True)


def _own_times(t: PythonLineRecorder, act: np.ndarray, line: np.ndarray, at: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each event's duration without the time of the user's frames it called: a frame's lifetime
    (its first event to its last) is taken from the line of its caller (the user's frame that
    was running when it started) open at that moment. The events are sorted by activation, then
    time; the caller's open line is found for every frame at once (one sort of the events and
    the frames' starts together, and a running maximum of event positions)."""
    n = len(act)
    starts = np.flatnonzero(np.r_[True, act[1:] != act[:-1]])
    last = np.r_[starts[1:] - 1, n - 1]
    child = act[starts]
    parent = np.asarray(t.activation_parent, dtype=np.int64)[child]
    end = np.where(line[last] < 0, at[last], max(t.stop_ns, int(at.max())))
    lifetime = end - at[starts]
    keep = parent >= 0
    own = dur.astype(np.float64)
    if not keep.any():
        return own
    q_act, q_t, q_life = parent[keep], at[starts][keep], lifetime[keep]
    # events and queries in one order: by activation, time, events before a query at the same time
    all_act = np.r_[act, q_act]
    all_t = np.r_[at, q_t]
    is_query = np.r_[np.zeros(n, dtype=bool), np.ones(len(q_act), dtype=bool)]
    order = np.lexsort((is_query, all_t, all_act))
    position = np.where(is_query[order], -1, order)  # an event's own index (events come first in ``order``'s ids)
    latest = np.maximum.accumulate(position)  # the latest event at or before each place
    at_query = latest[is_query[order]]
    query_id = order[is_query[order]] - n
    found = (at_query >= 0)
    found[found] &= (act[at_query[found]] == q_act[query_id[found]]) & (line[at_query[found]] >= 0)
    np.subtract.at(own, at_query[found], q_life[query_id[found]])
    return np.maximum(own, 0.0)


def _function_name(code: CodeType) -> str:
    """The function's qualified name (``Model.forward``); ``<module>`` for a cell's or file's top level."""
    return getattr(code, "co_qualname", None) or code.co_name


def _line_text(lines: list[str], n: int) -> str:
    return lines[n - 1] if 0 < n <= len(lines) else ""


def empty_line_table() -> pd.DataFrame:
    """No line ran: the columns, with the dtypes rows give them (text as strings give it)."""
    return pd.DataFrame({
        "cell": pd.Series([], dtype=object), "file": pd.Series([], dtype=str), "line": pd.Series([], dtype=np.int64),
        "function": pd.Series([], dtype=str), "function_line": pd.Series([], dtype=np.int64),
        "source": pd.Series([], dtype=str), "hits": pd.Series([], dtype=np.int64),
        "time_us": pd.Series([], dtype=np.float64), "per_hit_us": pd.Series([], dtype=np.float64),
        "self_time_us": pd.Series([], dtype=np.float64),
    })
