"""Which line of the user's code is running, and when: for ``--lines``.

torch's Python tracer tells, for every Python call, the line that made it (its caller frame), so a
``torch.mm(...)`` or ``model(x)`` lands on its line exactly. Operator syntax (``x @ w``, ``h * 2``,
``t[i]``) makes no Python call: its operator hangs directly under the frame of the function that
ran it, and torch does not say which of that function's lines was running. This module records
that: every line the user's code executes, with the time (``time.time_ns()``, the clock torch's
event start times are on: measured on torch 2.13, an op starts 0.5-0.9 µs after the ``time_ns()``
read just before its call, never before), so ``analysis.lines`` can join each such operator to
the last line its frame started before the operator did.

- Python 3.12+: ``sys.monitoring`` LINE events, armed only on the user's code objects (a PY_START
  callback arms each new one once, then returns DISABLE for its code), under a tool id of nbprof's
  own (``TOOL_ID`` = 4; cProfile and line_profiler take 2, debuggers 0, coverage 1).
- Python 3.10-3.11: ``sys.settrace``. The global function is called once per new frame and returns
  a local tracer only for the user's code, so library frames cost one call each and no line
  events. The frames already running when it starts (the cell's own, in a ``%%torchprof`` cell)
  get the local tracer directly (``frame.f_trace``), as pdb does.

Another tracer already installed (a debugger, coverage) is left alone: nbprof does not install its
own (``LineTracer.refused`` says why) and operator syntax then lands on the calling line. One that
is installed while nbprof's runs (a breakpoint in the cell) is kept: nbprof's removal only removes
its own. The tracer runs on the thread that started the profile (the cell's).

"User code": ``collect.user_code.UserCode``, the one classification both ``--lines`` paths use
(cells from IPython's own table of compiled cells, files outside the standard library, installed
packages, torch, IPython and nbprof). Unlike ``%%cprofile --lines``, this tracer also follows a
comprehension's, generator expression's or lambda's own code in those files: torch's tree has
their frames, so operator syntax inside them joins to their own lines.
"""

from __future__ import annotations

import sys
import time
from array import array
from typing import Any

from .user_code import UserCode

__all__ = ["LineTracer", "TOOL_ID"]

TOOL_ID = 4  # sys.monitoring: 0 debugger, 1 coverage, 2 profilers (cProfile, line_profiler), 5 optimizer


class LineTracer:
    """Records ``(time_ns, code, line)`` for every line the user's code runs, between ``start()``
    and ``stop()`` (``stop`` is safe to call twice and whatever happened in between)."""

    def __init__(self, user: UserCode) -> None:
        self.user = user
        self.times = array("q")
        self.codes = array("q")  # id() of the code object; ``code_objects`` keeps them alive
        self.lines = array("q")
        self.code_objects: dict[int, Any] = {}
        self.refused: str | None = None  # why no tracer runs (another one was there first)
        self._on = False
        self._frames: list[Any] = []  # frames given our local tracer directly (3.11)
        self._global: Any = None
        self._local: Any = None

    # -- start / stop ---------------------------------------------------------------------------

    def start(self, frame: Any = None) -> None:
        """Start on this thread; ``frame``: the innermost frame already running whose user frames
        (and their callers') lines count too (a ``%%torchprof`` cell's frame)."""
        self.user.prefixes  # read now (it may import torch's helper), not inside a trace callback
        if sys.version_info >= (3, 12):
            self._start_monitoring(frame)
        else:
            self._start_settrace(frame)

    def stop(self) -> None:
        if not self._on:
            return
        self._on = False
        if sys.version_info >= (3, 12):
            self._stop_monitoring()
        else:
            self._stop_settrace()

    # -- Python 3.10-3.11: sys.settrace -----------------------------------------------------------

    def _start_settrace(self, frame: Any) -> None:
        existing = sys.gettrace()
        if existing is not None:
            self.refused = (f"another tracer runs ({getattr(existing, '__qualname__', type(existing).__name__)}: "
                            "a debugger or coverage)")
            return
        now = time.time_ns
        t_add, c_add, l_add = self.times.append, self.codes.append, self.lines.append
        code_objects = self.code_objects
        user = self.user
        verdict: dict[Any, bool] = {}

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                t_add(now())
                c_add(id(frame.f_code))
                l_add(frame.f_lineno)
            return local

        def global_(frame: Any, event: str, arg: Any) -> Any:
            code = frame.f_code
            mine = verdict.get(code)
            if mine is None:
                mine = verdict[code] = self._is_user_code(code)
            return local if mine else None

        self._global, self._local = global_, local
        for f in self._running(frame):
            if f.f_trace is None:
                f.f_trace = local
                f.f_trace_lines = True
                self._frames.append(f)
        sys.settrace(global_)
        self._on = True
        del code_objects, user

    def _stop_settrace(self) -> None:
        # only ours: a debugger started in the cell (breakpoint()) keeps running
        if sys.gettrace() is self._global:
            sys.settrace(None)
        for f in self._frames:
            if f.f_trace is self._local:
                f.f_trace = None
        self._frames.clear()

    # -- Python 3.12+: sys.monitoring -------------------------------------------------------------

    def _start_monitoring(self, frame: Any) -> None:  # pragma: no cover - Python 3.12+
        mon = sys.monitoring  # type: ignore[attr-defined]
        if mon.get_tool(TOOL_ID) is not None:
            self.refused = f"sys.monitoring tool id {TOOL_ID} is taken by {mon.get_tool(TOOL_ID)}"
            return
        mon.use_tool_id(TOOL_ID, "nbprof")
        now = time.time_ns
        t_add, c_add, l_add = self.times.append, self.codes.append, self.lines.append
        events = mon.events
        disable = mon.DISABLE
        seen: set[Any] = set()

        def on_line(code: Any, line: int) -> Any:
            t_add(now())
            c_add(id(code))
            l_add(line)

        def on_start(code: Any, offset: int) -> Any:
            if code not in seen:
                seen.add(code)
                if self._is_user_code(code):
                    mon.set_local_events(TOOL_ID, code, events.LINE)
            return disable  # this code's PY_START: not again

        mon.register_callback(TOOL_ID, events.LINE, on_line)
        mon.register_callback(TOOL_ID, events.PY_START, on_start)
        for f in self._running(frame):
            if f.f_code not in seen:
                seen.add(f.f_code)
                mon.set_local_events(TOOL_ID, f.f_code, events.LINE)
        mon.set_events(TOOL_ID, events.PY_START)
        self._seen = seen
        self._on = True

    def _stop_monitoring(self) -> None:  # pragma: no cover - Python 3.12+
        mon = sys.monitoring  # type: ignore[attr-defined]
        try:
            mon.set_events(TOOL_ID, 0)
            for code in getattr(self, "_seen", ()):
                try:
                    mon.set_local_events(TOOL_ID, code, 0)
                except Exception:
                    pass
            mon.register_callback(TOOL_ID, mon.events.LINE, None)
            mon.register_callback(TOOL_ID, mon.events.PY_START, None)
            # no restart_events(): it would re-arm what other tools turned off; ours are freed
        finally:
            mon.free_tool_id(TOOL_ID)

    # -- both -------------------------------------------------------------------------------------

    def _running(self, frame: Any) -> list[Any]:
        """The user's frames already running from ``frame`` out to the profiled cell's (a
        ``%%torchprof`` cell started the profile from inside itself). Frames around the cell (a
        test or a script driving IPython) are not the profiled code: none when no cell is running."""
        found = []
        f = frame
        while f is not None:
            code = f.f_code
            if code.co_filename in self.user.cells:
                if self._is_user_code(code):
                    found.append(f)
                return found
            if self._is_user_code(code):
                found.append(f)
            f = f.f_back
        return []

    def _is_user_code(self, code: Any) -> bool:
        if not self.user.is_user_file(code.co_filename):
            return False
        self.code_objects[id(code)] = code
        self.user.learn(code.co_filename)
        return True
