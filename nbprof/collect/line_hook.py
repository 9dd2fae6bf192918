"""The one line-tracing hook of both ``--lines`` paths: which code it follows, how it is installed
and removed, the frames already running when it starts, and what it does when another tracer is
already there. What each path records is its own (its recorder's callbacks, chosen at start so that
no option is tested per event): ``collect.torch_line_recorder.TorchLineRecorder`` for
``%%torchprof --lines``, ``collect.python_line_recorder.PythonLineRecorder`` for ``%%cprofile --lines``
(docs/lines.md measures why their record formats differ).

How, per Python:

- 3.12+: ``sys.monitoring`` under a tool id of nbprof's own, the first free of ``TOOL_IDS`` (3, 4:
  never the named ones, 0 debugger, 1 coverage, 2 profiler (cProfile, line_profiler), 5
  optimizer). A recorder arms ``LINE`` (and whatever else it needs) only on the code it follows
  (``arm``), so library code costs nothing after its first call.
- 3.10-3.11: ``sys.settrace``. The recorder's global function is called once per Python call and
  hands a local tracer only to the code it follows; the frames already running get theirs directly
  (``frame.f_trace``), as pdb does.

**The frames already running** (``running_frames``): a ``%%torchprof`` or ``%%cprofile`` cell starts
the profile from inside itself, so its frame (and the user's frames between it and nbprof's call)
is followed from its next line on. The search goes out from the frame that started the profile to
the innermost cell; frames around that cell (the kernel, a test or script driving IPython, a cell
that ran this one) are not the profiled code, and where no cell is running (a script run by
nbprof's command line) none are followed: the code runs after the hook starts.

**Which code** (``follows``): the user's (``collect.user_code.UserCode``: the cells, the user's own
files). ``nested=True`` also follows a comprehension's, generator expression's or lambda's own code
(the torch path: torch's tree has their frames); ``nested=False`` leaves them to the line around
them, as line_profiler counts them (the cProfile path).

**Another tracer, one policy for both paths: nbprof never changes another tool's hook.**

- 3.10-3.11: Python has one trace function per thread. When one is set as the profile starts (a
  debugger: pdb, the JupyterLab / VS Code debugger; coverage; line_profiler), nbprof leaves it
  running and installs nothing; ``refused`` says why, the cell runs as without the flag and the
  report says what is missing. (Pausing it would silently take the cell's lines from coverage or
  line_profiler and the breakpoints from the debugger; chaining both would make each tool's
  ``sys.gettrace()`` checks lie.)
- 3.12+: both run: the others keep their hooks (``sys.settrace``, which is apart from the tool ids,
  or their own tool id), nbprof uses its own. Only when 3 and 4 are both taken is nbprof refused,
  the same way.
- A tracer the code sets while nbprof's runs (``breakpoint()`` in the cell, on 3.10-3.11) takes over:
  nbprof's removal removes only its own and leaves that one in place; ``replaced`` says so (the
  lines stop where it took over).

Whatever the code does (an exception, KeyboardInterrupt), ``stop`` removes what ``start`` installed,
and only that. Standard library only (tests/test_line_tracer.py runs it in interpreters without
numpy).
"""

from __future__ import annotations

import sys
from types import CodeType, FrameType
from typing import Any, Callable

from .user_code import UserCode

__all__ = ["LineHook", "TOOL_IDS", "MONITORING", "tracer_name"]

# sys.monitoring's free ids, never the named ones: 0 debugger, 1 coverage, 2 profiler (cProfile,
# line_profiler), 5 optimizer
TOOL_IDS = (3, 4)

MONITORING = sys.version_info >= (3, 12)


def tracer_name(fn: Any) -> str:
    """A trace function as a reader knows it: "Pdb.trace_dispatch (pdb)", "CTracer (coverage.tracer)"."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type(sys)):
        kind = type(owner)
        return f"{kind.__qualname__}.{getattr(fn, '__name__', '?')} ({kind.__module__})"
    name = getattr(fn, "__qualname__", None)
    if name:
        return f"{name} ({getattr(fn, '__module__', None) or '?'})"
    kind = type(fn)
    return f"{kind.__qualname__} ({kind.__module__})"


class LineHook:
    """Installs one recorder's callbacks on the user's code and removes them (``stop``).

    After ``start_settrace`` / ``start_monitoring``: ``refused`` is None when the hook runs, or why
    it does not (another tool holds it; nothing was installed); ``replaced`` is set by ``stop``
    when the code set a tracer of its own meanwhile (3.10-3.11)."""

    def __init__(self, user: UserCode, *, nested: bool) -> None:
        self.user = user
        self.nested = nested
        self.refused: str | None = None
        self.replaced = False
        self.running = False
        self.tool = -1  # 3.12+: the sys.monitoring tool id held
        self.armed: dict[int, CodeType] = {}  # 3.12+: id(code) -> code, local events set
        self._events: list[int] = []  # 3.12+: the events whose callbacks are registered
        self._installed: Any = None  # 3.10-3.11: the global trace function set
        self._frames: list[tuple[FrameType, Any]] = []  # 3.10-3.11: (frame, the local tracer given it)

    # -- which code ---------------------------------------------------------------------------------

    def follows(self, code: CodeType) -> bool:
        """The code is followed (not cached here: each recorder caches its answer its own way)."""
        if self.nested:
            return self.user.is_user_file(code.co_filename)
        return self.user.is_user_code(code)

    def running_frames(self, frame: FrameType | None) -> list[FrameType]:
        """The followed frames from ``frame`` out to the innermost running cell's, outermost first;
        none when no cell is running (see the module doc)."""
        found = []
        f = frame
        while f is not None:
            code = f.f_code
            if self.follows(code):
                found.append(f)
            if self.user.is_cell(code.co_filename):
                return found[::-1]
            f = f.f_back
        return []

    # -- Python 3.10-3.11: sys.settrace ------------------------------------------------------------

    def start_settrace(self, call: Callable[..., Any], local_for: Callable[[FrameType], Any],
                       frame: FrameType | None) -> bool:
        """Install ``call`` as this thread's global trace function and ``local_for(f)`` as the local
        tracer of each running frame (outermost first) that has none. False, and nothing installed,
        when another trace function is set (``refused`` says which)."""
        existing = sys.gettrace()
        if existing is not None:
            self.refused = f"another tracer runs ({tracer_name(existing)}: a debugger, coverage or line_profiler)"
            return False
        frames = self.running_frames(frame)
        sys.settrace(call)
        self._installed = call
        self.running = True
        for f in frames:
            if f.f_trace is None:  # a frame a debugger traces is the debugger's
                local = local_for(f)
                f.f_trace = local
                self._frames.append((f, local))
        return True

    def _stop_settrace(self) -> None:
        if sys.gettrace() is self._installed:
            sys.settrace(None)
        else:  # the code set (or removed) a tracer of its own: leave it
            self.replaced = True
        for f, local in self._frames:
            if f.f_trace is local:
                f.f_trace = None
        self._frames = []
        self._installed = None

    # -- Python 3.12+: sys.monitoring --------------------------------------------------------------

    def claim_tool(self) -> int | None:
        """Take the first free tool id of ``TOOL_IDS`` (the recorder's callbacks close over it);
        None, and ``refused`` says why, when both are taken."""
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        tool = next((i for i in TOOL_IDS if mon.get_tool(i) is None), None)
        if tool is None:
            names = ", ".join(f"{i}: {mon.get_tool(i)}" for i in TOOL_IDS)
            self.refused = f"sys.monitoring's tool ids for nbprof are taken ({names})"
            return None
        mon.use_tool_id(tool, "nbprof")
        self.tool = tool
        self.running = True
        return tool

    def arm(self, code: CodeType, events: int) -> None:
        """Set the local ``events`` on ``code`` (once per code object)."""
        if id(code) not in self.armed:
            self.armed[id(code)] = code
            sys.monitoring.set_local_events(self.tool, code, events)  # type: ignore[attr-defined,unused-ignore]

    def start_monitoring(self, callbacks: dict[int, Callable[..., Any]], global_events: int,
                         on_running: Callable[[FrameType], None], frame: FrameType | None) -> None:
        """Register ``callbacks`` (event -> function) under the claimed tool, call ``on_running``
        for each running frame (outermost first: it arms their code), then turn on
        ``global_events``."""
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        for event, callback in callbacks.items():
            mon.register_callback(self.tool, event, callback)
            self._events.append(event)
        for f in self.running_frames(frame):
            on_running(f)
        mon.set_events(self.tool, global_events)

    def _stop_monitoring(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        tool, self.tool = self.tool, -1
        try:
            mon.set_events(tool, 0)
            for code in self.armed.values():
                mon.set_local_events(tool, code, 0)
            for event in self._events:
                mon.register_callback(tool, event, None)
            # no restart_events(): it would re-arm what other tools turned off
        finally:
            mon.free_tool_id(tool)
            self.armed = {}
            self._events = []

    # -- both ---------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Remove what ``start_*`` installed (safe to call twice, or after a refusal)."""
        if not self.running:
            return
        self.running = False
        if self.tool >= 0:
            self._stop_monitoring()
        else:
            self._stop_settrace()
