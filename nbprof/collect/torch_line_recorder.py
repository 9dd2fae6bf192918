"""Which line of the user's code is running, and when: the record ``%%torchprof --lines`` joins
operator syntax to.

torch's Python tracer tells, for every Python call, the line that made it (its caller frame), so a
``torch.mm(...)`` or ``model(x)`` lands on its line exactly. Operator syntax (``x @ w``, ``h * 2``,
``t[i]``) makes no Python call: its operator hangs directly under the frame of the function that
ran it, and torch does not say which of that function's lines was running. This recorder keeps
that: every line the user's code starts, with the time (``time.time_ns()``, the clock torch's
event start times are on: measured on torch 2.13, an op starts 0.5-0.9 µs after the ``time_ns()``
read just before its call, never before), so ``analysis.lines`` can join each such operator to
the last line its frame started before the operator did.

The record is three flat arrays, ``(time_ns, code, line)`` per line event, nothing on calls or
returns (docs/lines.md: the cheapest per line; the cProfile recorder's needs returns). The hook
(install, removal, the frames already running, which code, another tracer) is
``collect.line_hook.LineHook``, shared with ``%%cprofile --lines``; this recorder follows a
comprehension's, generator expression's or lambda's own code too (``nested=True``): torch's tree
has their frames, so operator syntax inside them joins to their own lines.

- Python 3.12+: a ``PY_START`` callback arms ``LINE`` on each new code object of the user's once,
  then answers ``DISABLE`` for its code. ``sys.monitoring`` is not per thread: a user function
  another thread runs records its lines too (docs/lines.md, "Threads").
- Python 3.10-3.11: the global function answers once per new frame, with the local tracer for the
  user's code and None for the rest, so library frames cost one call each and no line events.
"""

from __future__ import annotations

import sys
import time
from array import array
from types import FrameType
from typing import Any

from .line_hook import MONITORING, LineHook
from .user_code import UserCode

__all__ = ["TorchLineRecorder"]


class TorchLineRecorder:
    """Records ``(time_ns, code, line)`` for every line the user's code runs, between ``start()``
    and ``stop()`` (``stop`` is safe to call twice and whatever happened in between)."""

    def __init__(self, user: UserCode) -> None:
        self.user = user
        self.hook = LineHook(user, nested=True)
        self.times = array("q")
        self.codes = array("q")  # id() of the code object; ``code_objects`` keeps them alive
        self.lines = array("q")
        self.code_objects: dict[int, Any] = {}
        user.prefixes  # read now (it may import torch's helper), not inside a trace callback or the profile

    @property
    def refused(self) -> str | None:
        """Why no line was recorded (another tool holds the hook: ``LineHook``), or None."""
        return self.hook.refused

    @property
    def replaced(self) -> bool:
        """The code set a tracer of its own while this one ran (3.10-3.11): the record stops there."""
        return self.hook.replaced

    def start(self, frame: FrameType | None = None) -> None:
        """Start on this thread; ``frame``: the innermost frame already running whose user frames
        (out to the profiled cell's) count too, from their next line."""
        if MONITORING:
            self._start_monitoring(frame)
        else:
            self._start_settrace(frame)

    def stop(self) -> None:
        self.hook.stop()

    def _followed(self, code: Any) -> bool:
        """The hook's answer, once per code object: a followed one is kept (its id() stays its own)
        and its file's name as torch gives it learned."""
        if not self.hook.follows(code):
            return False
        self.code_objects[id(code)] = code
        self.user.learn(code.co_filename)
        return True

    # -- Python 3.10-3.11 -------------------------------------------------------------------------

    def _start_settrace(self, frame: FrameType | None) -> None:
        now = time.time_ns
        t_add, c_add, l_add = self.times.append, self.codes.append, self.lines.append
        followed = self._followed
        verdict: dict[Any, bool] = {}

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                t_add(now())
                c_add(id(frame.f_code))
                l_add(frame.f_lineno)
            return local

        def call(frame: Any, event: str, arg: Any) -> Any:
            code = frame.f_code
            mine = verdict.get(code)
            if mine is None:
                mine = verdict[code] = followed(code)
            return local if mine else None

        def running(f: FrameType) -> Any:
            verdict[f.f_code] = followed(f.f_code)
            return local

        self.hook.start_settrace(call, running, frame)

    # -- Python 3.12+ ------------------------------------------------------------------------------

    def _start_monitoring(self, frame: FrameType | None) -> None:  # pragma: no cover - Python 3.12+
        hook = self.hook
        if hook.claim_tool() is None:
            return
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        now = time.time_ns
        t_add, c_add, l_add = self.times.append, self.codes.append, self.lines.append
        E = mon.events
        LINE, disable, arm, followed = E.LINE, mon.DISABLE, hook.arm, self._followed
        seen: set[Any] = set()

        def on_line(code: Any, line: int) -> Any:
            t_add(now())
            c_add(id(code))
            l_add(line)

        def on_start(code: Any, offset: int) -> Any:
            if code not in seen:
                seen.add(code)
                if followed(code):
                    arm(code, LINE)
            return disable  # this code's PY_START: not again

        def running(f: FrameType) -> None:
            seen.add(f.f_code)
            if followed(f.f_code):
                arm(f.f_code, LINE)

        hook.start_monitoring({E.LINE: on_line, E.PY_START: on_start}, E.PY_START, running, frame)
