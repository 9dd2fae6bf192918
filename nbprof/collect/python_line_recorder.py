"""What ``%%cprofile --lines`` records while the cell runs, beside cProfile: every line event and
return of the user's code (``collect.python_lines`` makes the table of hits and time from it).

What it measures is what line_profiler measures: a line's hits are its line events (Python's
own: a loop's header counts once per iteration), and its time is the wall time from its line
event to the next event of the same frame (the next line, or the return): the time of what the
line calls included. Unlike line_profiler, no function needs naming: every function of the
user's code that runs is followed (``collect.user_code``: the cell, functions from other cells,
the user's own files), and nothing else is; comprehensions, generator expressions and lambdas
count in the line around them, as line_profiler counts them.

The hook (install and removal, the tool id, the frames already running, which code, what happens
when another tracer is there) is ``collect.line_hook.LineHook``, shared with ``%%torchprof
--lines``; what this recorder adds is its callbacks:

- 3.12+ (``sys.monitoring``, beside cProfile's tool 2): ``PY_START`` (and ``PY_RESUME`` /
  ``PY_THROW``) is armed for every code object and answers ``DISABLE`` for code that is not
  followed, so after its first call library code costs nothing; the user's code objects get
  ``LINE``, ``PY_RETURN`` and ``PY_YIELD`` armed locally. ``PY_UNWIND`` (a frame left by an
  exception) cannot be armed per code object: it costs a call per unwinding frame anywhere.
  Only the thread that started the profile is recorded (cProfile's own limit before 3.12).
- 3.10-3.11 (``sys.settrace``): the global function (called once per Python call) returns a local
  tracer, one per activation, only for the user's code objects, so library code has no line
  events at all.

Either way each event costs one Python call that appends ``(activation, line, time_ns)`` to a
list (``line`` is -1 for a return or a yield), with a stack of the user's activations running;
everything else happens after the run (``collect.python_lines.line_table``, on numpy arrays).
Standard library only, as the hook (tests/test_line_tracer.py runs both in bare interpreters).
"""

from __future__ import annotations

import sys
import threading
import time
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, Callable

from .line_hook import MONITORING, LineHook
from .user_code import UserCode

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PythonLineRecorder"]


class PythonLineRecorder:
    """``start()``, the code runs, ``stop()``; then ``table()`` is one row per line that ran, and
    ``notes(what)`` what the report says about it (another tracer kept it from running, or took
    over).

    ``user``: which code to follow."""

    def __init__(self, user: UserCode) -> None:
        self.user = user
        self.hook = LineHook(user, nested=False)
        self.events: list[tuple[int, int, int]] = []  # (activation, line or -1, time_ns)
        self.activation_code: list[int] = []  # activation -> index in codes
        self.activation_parent: list[int] = []  # activation -> the user activation that was running, or -1
        self.stack: list[int] = []  # the user's activations running now, innermost last
        self.codes: list[CodeType] = []
        self._index: dict[int, int] = {}  # id(code) -> index in codes, -1: not the user's
        self._keep: list[CodeType] = []  # every code object looked at: its id() stays its own
        self.stop_ns = 0
        self.running = False

    @property
    def refused(self) -> str | None:
        """Why no line was followed (another tool holds the hook: ``LineHook``), or None."""
        return self.hook.refused

    @property
    def replaced(self) -> bool:
        """The code set a tracer of its own while this one ran (3.10-3.11): the lines stop there."""
        return self.hook.replaced

    # -- what both callbacks share ---------------------------------------------------------------

    def code_index(self, code: CodeType) -> int:
        """The code object's index in ``codes``, or -1 when it is not followed (cached)."""
        i = self._index.get(id(code))
        if i is None:
            self._keep.append(code)
            if self.hook.follows(code):
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

    # -- start / stop ----------------------------------------------------------------------------

    def start(self, frame: FrameType | None = None) -> None:
        """Start following the user's code on this thread; ``frame``: where the frames already
        running are looked for (default: the caller's). Another tool holding the hook: nothing
        is followed, ``refused`` says why."""
        frame = frame if frame is not None else sys._getframe(1)
        if MONITORING:
            self._start_monitoring(frame)
        else:
            self._start_settrace(frame)
        self.running = self.hook.running

    def stop(self) -> None:
        """Stop following (safe to call twice, or before ``start``)."""
        if not self.running:
            return
        self.running = False
        self.stop_ns = time.perf_counter_ns()
        self.hook.stop()
        self.stack = []
        self._keep = []

    def table(self) -> pd.DataFrame:
        """One row per line that ran (``collect.python_lines.line_table``), with ``notes`` in its attrs."""
        from .python_lines import line_table

        frame = line_table(self)
        frame.attrs["notes"] = self.notes()
        return frame

    def notes(self, what: str = "cell") -> list[str]:
        """What the report says about the lines: none followed, or followed until the code took over."""
        if self.refused:
            return [f"--lines: no line followed: {self.refused}. nbprof leaves another tool's tracer alone; "
                    "stop it (a debugger: turn it off) for hits and time per line, or use Python 3.12+, where "
                    "both run"]
        if self.replaced:
            return [f"the {what} set a tracer of its own (sys.settrace: a debugger?), which replaced nbprof's "
                    "line tracer: the lines stop where it took over"]
        return []

    def sources(self, files: Any) -> dict[str, str]:
        """The full text of each file (a cell: as typed) in ``files``."""
        return {f: self.user.source(f) for f in files}

    # -- Python 3.10-3.11 -------------------------------------------------------------------------

    def _local_tracer(self, activation: int) -> Callable[..., Any]:
        append = self.events.append
        now = time.perf_counter_ns
        stack = self.stack

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                append((activation, frame.f_lineno, now()))
            elif event == "return":  # a return, a yield, or the frame left by an exception
                append((activation, -1, now()))
                if stack and stack[-1] == activation:
                    stack.pop()
            return local

        return local

    def _start_settrace(self, frame: FrameType) -> None:
        code_index, new_activation, local_tracer = self.code_index, self.new_activation, self._local_tracer

        def call(frame: FrameType, event: str, arg: Any) -> Any:
            i = code_index(frame.f_code)
            if i < 0:
                return None
            return local_tracer(new_activation(i))

        def running(f: FrameType) -> Any:
            return local_tracer(new_activation(code_index(f.f_code)))

        self.hook.start_settrace(call, running, frame)

    # -- Python 3.12+ ------------------------------------------------------------------------------

    def _start_monitoring(self, frame: FrameType) -> None:  # pragma: no cover - Python 3.12+
        hook = self.hook
        if hook.claim_tool() is None:
            return
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        E = mon.events
        stack, armed, arm = self.stack, hook.armed, hook.arm
        append, now, thread, get_ident = self.events.append, time.perf_counter_ns, threading.get_ident(), threading.get_ident
        code_index, new_activation, codes, activation_code = self.code_index, self.new_activation, self.codes, self.activation_code
        DISABLE, local_events = mon.DISABLE, E.LINE | E.PY_RETURN | E.PY_YIELD

        def started(code: CodeType, offset: int, *_: Any) -> Any:
            i = code_index(code)
            if i < 0:
                return DISABLE
            if get_ident() != thread:
                return None
            arm(code, local_events)
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
            if get_ident() == thread and stack and codes[activation_code[stack[-1]]] is code:
                append((stack.pop(), -1, now()))
            return None

        def unwound(code: CodeType, offset: int, exc: Any) -> Any:
            if id(code) in armed:  # PY_UNWIND is global: every frame any exception leaves
                left(code, offset)
            return None

        def running(f: FrameType) -> None:
            arm(f.f_code, local_events)
            new_activation(code_index(f.f_code))

        hook.start_monitoring({E.PY_START: started, E.PY_RESUME: started, E.PY_THROW: thrown, E.LINE: line,
                               E.PY_RETURN: left, E.PY_YIELD: left, E.PY_UNWIND: unwound},
                              E.PY_START | E.PY_RESUME | E.PY_THROW | E.PY_UNWIND, running, frame)
