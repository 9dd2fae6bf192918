"""Hits and time per line of the user's code (``%%cprofile --lines``), beside cProfile.

What it measures is what line_profiler measures: a line's hits are its line events (Python's
own: a loop's header counts once per iteration), and its time is the wall time from its line
event to the next event of the same frame (the next line, or the return): the time of what the
line calls included. Unlike line_profiler, no function needs naming: every function of the
user's code that runs is followed (``collect.user_code``: the cell, functions from other cells,
the user's own files), and nothing else is.

How, per Python:

- 3.12+: ``sys.monitoring`` with a tool id of nbprof's own (3 or 4: cProfile takes 2, the
  profiler's id, so both run together). ``PY_START`` (and ``PY_RESUME`` / ``PY_THROW``) is armed
  for every code object and answers ``DISABLE`` for code that is not the user's, so after its
  first call library code costs nothing; the user's code objects get ``LINE``, ``PY_RETURN`` and
  ``PY_YIELD`` armed locally. ``PY_UNWIND`` (a frame left by an exception) cannot be armed per
  code object: it costs a call per unwinding frame anywhere.
- 3.10-3.11: ``sys.settrace``, whose global function (called once per Python call) returns a
  local tracer only for the user's code objects, so library code has no line events at all.

Either way each event costs one Python call that appends ``(activation, line, time_ns)`` to a
list (``line`` is -1 for a return or a yield); everything else happens after the run, on numpy
arrays: each line event's time is the next event's time of the same activation (a stable sort
by activation), then hits and time are summed per (code object, line) with ``bincount``. Only the
thread that started the profile is followed (cProfile's own limit before 3.12).

The cell itself is already running when the profile starts (it calls ``begin``), so its frame is
found up the stack (a frame compiled from a cell, named in IPython's table) and followed from
there. The tracer is removed at the end whatever the code did; a tracer the code set itself (a
debugger's ``sys.settrace``) is left in place, and the lines stop where it took over.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from types import CodeType, FrameType
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import ProfilerBusyError
from .user_code import UserCode

__all__ = ["LineTracer", "LINE_COLUMNS", "NBPROF_TOOL_IDS", "line_table", "empty_line_table"]

LINE_COLUMNS = ("cell", "file", "line", "function", "function_line", "source", "hits", "time_us", "per_hit_us",
                "self_time_us")

# sys.monitoring's free ids, never the named ones: 0 debugger, 1 coverage, 2 profiler (cProfile,
# line_profiler), 5 optimizer
NBPROF_TOOL_IDS = (3, 4)

_MONITORING = sys.version_info >= (3, 12)


class LineTracer:
    """``start()``, the code runs, ``stop()``; then ``table()`` is one row per line that ran.

    ``user``: which code to follow. ``replaced``: set by ``stop`` when another tracer had taken
    the hook (3.10-3.11), so the lines end where it did."""

    def __init__(self, user: UserCode) -> None:
        self.user = user
        self.events: list[tuple[int, int, int]] = []  # (activation, line or -1, time_ns)
        self.activation_code: list[int] = []  # activation -> index in codes
        self.activation_parent: list[int] = []  # activation -> the user activation that was running, or -1
        self.stack: list[int] = []  # the user's activations running now, innermost last
        self.codes: list[CodeType] = []
        self._index: dict[int, int] = {}  # id(code) -> index in codes, -1: not the user's
        self._keep: list[CodeType] = []  # every code object looked at: its id() stays its own
        self.stop_ns = 0
        self.running = False
        self.replaced = False
        self._impl: _Settrace | _Monitoring | None = None

    # -- what both implementations share -----------------------------------------------------------

    def code_index(self, code: CodeType) -> int:
        """The code object's index in ``codes``, or -1 when it is not the user's (cached)."""
        i = self._index.get(id(code))
        if i is None:
            self._keep.append(code)
            if self.user.is_user_code(code):
                i = len(self.codes)
                self.codes.append(code)
            else:
                i = -1
            self._index[id(code)] = i
        return i

    def new_activation(self, code_index: int) -> int:
        """A frame of the user's code starts (or resumes): its activation, now the innermost."""
        stack = self.stack
        self.activation_parent.append(stack[-1] if stack else -1)
        self.activation_code.append(code_index)
        a = len(self.activation_code) - 1
        stack.append(a)
        return a

    def running_cells(self) -> list[FrameType]:
        """The frames of cells that are running now (the profiled cell and any cell that ran it),
        outermost first: they started before the profile, so they are followed from here on."""
        frames = []
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if self.user.is_cell(frame.f_code.co_filename) and self.code_index(frame.f_code) >= 0:
                frames.append(frame)
            frame = frame.f_back
        return frames[::-1]

    # -- start / stop ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start following the user's code on this thread. Raises ``ProfilerBusyError`` (and
        follows nothing) when Python has no monitoring tool id left for nbprof (3.12+)."""
        self._impl = _Monitoring(self) if _MONITORING else _Settrace(self)
        self._impl.start()
        self.running = True

    def stop(self) -> None:
        """Stop following (safe to call twice, or before ``start``)."""
        if not self.running or self._impl is None:
            return
        self.running = False
        self.stop_ns = time.perf_counter_ns()
        self._impl.stop()
        self._keep = []

    def table(self) -> pd.DataFrame:
        return line_table(self)

    def sources(self, files: Any) -> dict[str, str]:
        """The full text of each file (a cell: as typed) in ``files``."""
        return {f: self.user.source(f) for f in files}


class _Settrace:
    """Python 3.10-3.11: ``sys.settrace`` with a global function that follows only user code."""

    def __init__(self, tracer: LineTracer) -> None:
        self.t = tracer
        self.previous: Any = None
        self.installed: Any = None
        self.frames: list[tuple[FrameType, Any]] = []  # cells followed from the start: (frame, old f_trace)

    def local_tracer(self, activation: int) -> Callable[..., Any]:
        append = self.t.events.append
        now = time.perf_counter_ns
        stack = self.t.stack

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                append((activation, frame.f_lineno, now()))
            elif event == "return":  # a return, a yield, or the frame left by an exception
                append((activation, -1, now()))
                if stack and stack[-1] == activation:
                    stack.pop()
            return local

        return local

    def start(self) -> None:
        t = self.t
        code_index, new_activation, local_tracer = t.code_index, t.new_activation, self.local_tracer

        def call(frame: FrameType, event: str, arg: Any) -> Any:
            i = code_index(frame.f_code)
            if i < 0:
                return None
            return local_tracer(new_activation(i))

        cells = t.running_cells()
        self.previous = sys.gettrace()  # a debugger or coverage: paused while the profile runs
        self.installed = call
        sys.settrace(call)
        for frame in cells:
            self.frames.append((frame, frame.f_trace))
            frame.f_trace = local_tracer(new_activation(code_index(frame.f_code)))

    def stop(self) -> None:
        if sys.gettrace() is self.installed:
            sys.settrace(self.previous)
        else:  # the code set a tracer of its own (a debugger): leave it
            self.t.replaced = True
        for frame, before in self.frames:
            frame.f_trace = before
        self.frames = []
        self.installed = self.previous = None


class _Monitoring:
    """Python 3.12+: ``sys.monitoring`` under a tool id of nbprof's own (see the module doc)."""

    def __init__(self, tracer: LineTracer) -> None:
        self.t = tracer
        self.tool = -1
        self.armed: dict[int, CodeType] = {}  # id(code) -> code, LINE/PY_RETURN/PY_YIELD armed

    def start(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        tool = next((i for i in NBPROF_TOOL_IDS if mon.get_tool(i) is None), None)
        if tool is None:
            names = ", ".join(str(mon.get_tool(i)) for i in NBPROF_TOOL_IDS)
            raise ProfilerBusyError(f"cannot follow lines: sys.monitoring's free tool ids are taken ({names})")
        mon.use_tool_id(tool, "nbprof")
        self.tool = tool
        E = mon.events
        t = self.t
        stack, armed = t.stack, self.armed
        append, now, thread, get_ident = t.events.append, time.perf_counter_ns, threading.get_ident(), threading.get_ident
        code_index, new_activation = t.code_index, t.new_activation
        DISABLE, set_local, local_events = mon.DISABLE, mon.set_local_events, E.LINE | E.PY_RETURN | E.PY_YIELD

        def arm(code: CodeType) -> None:
            if id(code) not in armed:
                armed[id(code)] = code
                set_local(tool, code, local_events)

        def started(code: CodeType, offset: int, *_: Any) -> Any:
            i = code_index(code)
            if i < 0:
                return DISABLE
            if get_ident() != thread:
                return None
            arm(code)
            new_activation(i)
            return None

        def thrown(code: CodeType, offset: int, exc: Any) -> Any:
            # an exception thrown into a generator resumes it; PY_THROW is global: no DISABLE
            if id(code) in armed and get_ident() == thread:
                new_activation(code_index(code))
            return None

        def line(code: CodeType, lineno: int) -> Any:
            if get_ident() == thread and stack:
                append((stack[-1], lineno, now()))
            return None

        def left(code: CodeType, offset: int, *_: Any) -> Any:
            if get_ident() == thread and stack and t.codes[t.activation_code[stack[-1]]] is code:
                append((stack.pop(), -1, now()))
            return None

        def unwound(code: CodeType, offset: int, exc: Any) -> Any:
            if id(code) in armed:  # PY_UNWIND is global: every frame any exception leaves
                left(code, offset)
            return None

        for frame in t.running_cells():
            arm(frame.f_code)
            new_activation(code_index(frame.f_code))
        for event, callback in ((E.PY_START, started), (E.PY_RESUME, started), (E.PY_THROW, thrown),
                                (E.LINE, line), (E.PY_RETURN, left), (E.PY_YIELD, left), (E.PY_UNWIND, unwound)):
            mon.register_callback(tool, event, callback)
        mon.set_events(tool, E.PY_START | E.PY_RESUME | E.PY_THROW | E.PY_UNWIND)

    def stop(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        tool = self.tool
        if tool < 0:
            return
        self.tool = -1
        try:
            mon.set_events(tool, 0)
            for code in self.armed.values():
                mon.set_local_events(tool, code, 0)
            E = mon.events
            for event in (E.PY_START, E.PY_RESUME, E.PY_THROW, E.LINE, E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND):
                mon.register_callback(tool, event, None)
        finally:
            mon.free_tool_id(tool)
            self.armed = {}
            self.t.stack = []


# ------------------------------------------------------------------------------------- the table


def line_table(t: LineTracer) -> pd.DataFrame:
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


def _own_times(t: LineTracer, act: np.ndarray, line: np.ndarray, at: np.ndarray, dur: np.ndarray) -> np.ndarray:
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
