"""Which lines of a line table (``p.lines()``, ``--lines``) are hot, and by which measure.

A cProfile line table (``hits``, ``time_us``, ``self_time_us``) ranks lines by their own time (the
line's wall time without the lines of the user's code it called, so that the slow line is the one
doing the work, not the cell line that called it); a torch one (``ops``,
``self_cpu_us``, ``self_device_us``, ...) by self device time when the profile ran device work,
else by self CPU time: the self columns put each operator on exactly one line, so they add up to
the profile's totals and a line's share of them means something. (A cProfile line's own times add
up to the run's wall time, but for nbprof's start and end: a share is of that wall time.)

The Source tab, the text report and the findings read the same measure from here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["lines_of", "event_line_rows", "climbed_line_rows", "is_python_lines", "line_metric", "metric_columns", "top_lines",
           "line_where", "line_quote"]

# (column, header, unit): the numbers of a line, in the order they are shown
PYTHON_METRICS = (("hits", "Hits", "count"), ("self_time_us", "Own time", "time_us"), ("time_us", "Time", "time_us"),
                  ("per_hit_us", "Per hit", "time_us"))
TORCH_METRICS = (("ops", "Ops", "count"), ("self_cpu_us", "Self CPU", "time_us"),
                 ("cpu_total_us", "CPU total", "time_us"), ("self_device_us", "Self device", "time_us"),
                 ("device_total_us", "Device total", "time_us"), ("alloc_bytes", "Allocated", "bytes"),
                 ("alive_at_end_bytes", "Left alive", "bytes"))


def lines_of(profile: Any) -> pd.DataFrame:
    """The profile's line table (``p.lines()``), or an empty one where it has none (recorded
    without ``--lines``: a profile may say so by raising ``NbprofError``)."""
    from ..errors import NbprofError

    get = getattr(profile, "lines", None)
    try:
        lines = get() if callable(get) else None
    except NbprofError:
        lines = None
    return lines if isinstance(lines, pd.DataFrame) else pd.DataFrame()


def event_line_rows(profile: Any) -> np.ndarray | None:
    """For each row of ``profile.events``, the row (position) of ``profile.lines()`` whose self
    columns hold it, as the profile's ``_event_lines()`` gives it (``analysis.lines.line_join``);
    an event it gives none (-1) takes its nearest ancestor's (a runtime call: the line of the
    operator that made it). None when the profile cannot tell (no ``_event_lines``, or no lines)."""
    from ..errors import NbprofError

    get = getattr(profile, "_event_lines", None)
    if not callable(get):
        return None
    try:
        own = np.asarray(get(), dtype=np.int64)
    except NbprofError:  # recorded without --lines
        return None
    return climbed_line_rows(own, profile.events["parent"].to_numpy())


def climbed_line_rows(own: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """``own`` (each event's line position, -1 for none) with each -1 replaced by its nearest
    ancestor's position (``parent``: the events' parent rows): :func:`event_line_rows`'s rule."""
    parent = parent.astype(np.int64)
    out, up = own.copy(), parent.copy()
    while True:  # one step up the tree per round, for every event still without a line
        need = np.flatnonzero((out < 0) & (up >= 0))
        if len(need) == 0:
            return out
        out[need] = own[up[need]]
        up[need] = parent[up[need]]


def is_python_lines(lines: pd.DataFrame) -> bool:
    """A cProfile line table (hits and time), not a torch one."""
    return "hits" in lines.columns


def line_metric(lines: pd.DataFrame) -> str:
    """The column lines are ranked by: ``self_time_us`` (cProfile), ``self_device_us`` (torch
    with device time), else ``self_cpu_us``."""
    if is_python_lines(lines):
        return "self_time_us"
    if "self_device_us" in lines.columns and float(np.nansum(lines["self_device_us"].to_numpy(dtype=float))) > 0:
        return "self_device_us"
    return "self_cpu_us"


def metric_columns(lines: pd.DataFrame) -> list[tuple[str, str, str]]:
    """The numeric columns worth showing: every cProfile one; torch's without the device and
    memory columns where they are all zero (a CPU profile, no ``--memory``)."""
    if is_python_lines(lines):
        return list(PYTHON_METRICS)
    out = []
    for key, header, unit in TORCH_METRICS:
        if key not in lines.columns:
            continue
        if key in ("self_device_us", "device_total_us", "alloc_bytes", "alive_at_end_bytes") \
                and not (lines[key].to_numpy() > 0).any():
            continue
        out.append((key, header, unit))
    return out


def top_lines(lines: pd.DataFrame, n: int | None = None) -> pd.DataFrame:
    """The lines of the user's code (a file and a line: not torch's row for what ran outside it)
    by ``line_metric``, largest first; the first ``n`` (None: all)."""
    metric = line_metric(lines)
    rows = lines[_in_code(lines) & (lines[metric].to_numpy() > 0)]
    rows = rows.sort_values(metric, ascending=False, kind="stable")
    return rows if n is None else rows.head(n)


def _in_code(lines: pd.DataFrame) -> np.ndarray:
    """Rows with a file and a line (torch's outside row has neither: None, and a missing Int64)."""
    file = lines["file"]
    line = pd.to_numeric(lines["line"], errors="coerce").fillna(0).to_numpy(dtype=np.float64)
    return (file.notna() & (file.astype(str) != "")).to_numpy() & (line > 0)


def line_where(cell: object, file: object, line: int) -> str:
    """How the user names a line: "In [4] line 3", or "model.py:12" (the file's last two parts)."""
    from ..format import short_path

    if isinstance(cell, str) and cell:
        return f"{cell} line {int(line)}"
    if file is None or file != file or not str(file):
        return "outside your code"
    return f"{short_path(str(file)).removeprefix('…/')}:{int(line)}"


def line_quote(source: object) -> str:
    """A message's quote of a line: ": `x = f(y)`", or nothing where its text could not be read
    (a trace whose script is not on this machine)."""
    text = source.strip() if isinstance(source, str) else ""
    return f": `{text}`" if text else ""
