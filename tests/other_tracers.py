"""Other tools' tracers, real ones, running before a ``--lines`` cell starts: the standard library's
debugger (``bdb``, pdb's base) stopped at a breakpoint, and line_profiler counting a function.
Both ``--lines`` magics must leave them running and undisturbed (collect/line_hook.py's policy)."""

from __future__ import annotations

import bdb
import sys
from contextlib import contextmanager
from typing import Any, Iterator


class Breakpoints(bdb.Bdb):
    """pdb without the prompt: a breakpoint's stop is recorded (file, line) and the program
    continues, as a user typing ``c`` at each stop would."""

    def __init__(self) -> None:
        super().__init__()
        self.stops: list[tuple[str, int]] = []

    def user_line(self, frame: Any) -> None:
        # a stop at a breakpoint (the first stop is set_trace's step, at no breakpoint)
        if frame.f_lineno in self.get_file_breaks(self.canonic(frame.f_code.co_filename)):
            self.stops.append((frame.f_code.co_filename, frame.f_lineno))
        self.set_continue()


@contextmanager
def debugger_running(function: Any) -> Iterator[Breakpoints]:
    """A debugger with a breakpoint on ``function``'s first line, running (its trace function set,
    as after pdb's ``b work`` and ``c``) while the block runs."""
    dbg = Breakpoints()
    code = function.__code__
    first = min(line for _, _, line in code.co_lines() if line is not None and line > code.co_firstlineno)
    dbg.set_break(dbg.canonic(code.co_filename), first)
    saved = sys.gettrace()
    dbg.set_trace(sys._getframe(2))  # from the test's frame (the one using this context manager)
    try:
        yield dbg
    finally:
        dbg.clear_all_breaks()
        sys.settrace(saved)
        frame = sys._getframe()
        while frame is not None:  # the frames bdb gave its local tracer
            if getattr(frame.f_trace, "__self__", None) is dbg:
                frame.f_trace = None
            frame = frame.f_back


@contextmanager
def line_profiler_running(*functions: Any) -> Iterator[Any]:
    """line_profiler counting ``functions`` (``enable_by_count``, as ``@profile`` under kernprof),
    while the block runs; yields the LineProfiler (its ``get_stats()``)."""
    from line_profiler import LineProfiler

    lp = LineProfiler()
    for f in functions:
        lp.add_function(f)
    lp.enable_by_count()
    try:
        yield lp
    finally:
        lp.disable_by_count()


def hits_of(lp: Any, name: str) -> dict[int, int]:
    """line_profiler's hits per line of the function ``name``."""
    return {line: hits for (_, _, fn), rows in lp.get_stats().timings.items() if fn == name for line, hits, _ in rows}
