"""What the runner asks of a profiler: ``begin``, ``step``, ``end``, ``result`` (and ``toggle_cuda``,
``begin_action`` / ``end_action``).

The runner (``nbprof.run.runner``) drives every profile the same way, whoever started it (a cell, a
line magic, the command line): ``begin()``, the code runs (calling ``step()`` once per loop
iteration through ``nbprof.step()``), ``end()`` as the first thing after the code, then
``result()``. Each profiler is one class behind this interface: ``TorchSession``
(``collect/torch_live.py``) and ``CProfileSession`` (``collect/cprofile.py``). A call that means
nothing to a profiler is a documented no-op in that class, never a probe with ``hasattr``: so
``nbprof.step()`` and ``nbprof.cuda_collection()`` can stay in code that is profiled either way.

Actions are what a training framework names while it runs (Lightning's hooks, "run_training_batch",
"[LightningModule]Model.training_step"): ``integrations/lightning_actions.py`` and ``nbprof.lightning`` report
them here, begin and end by name, nested or (rarely) overlapping. Each profiler shows them its own
way: torch as ``record_function`` ranges, cProfile as one profile per action.
"""

from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Collector", "Takeover", "code_sites"]


@dataclass
class Takeover:
    """Another profiler took the hook nbprof's collector held, in the middle of a run.

    torch runs one profiler session at a time, and Python one profile function per thread (one
    ``sys.monitoring`` profiler on 3.12+): when the profiled code starts its own (a ``with
    torch.profiler.profile()`` in the cell, Accelerate's or Lightning's profiler, a
    ``cProfile.Profile().enable()``), nbprof's collector stops and reads what it recorded until
    then, and lets the other one start, as it would have without nbprof. The runner turns this
    into the report's note saying what the report covers."""

    by: str
    """What started: "torch.profiler.profile", "cProfile.Profile.enable", "sys.setprofile"; "" when
    the collector found at the end that its hook was gone without seeing who took it."""
    at_s: float | None
    """When, in seconds after the collector started; None when not seen."""
    sites: list[tuple[str, int, str]] = field(default_factory=list)
    """The code that started it, innermost first: (file, line, function), the profiler's own
    frames (torch's, contextlib's) left out."""
    other: Any = None
    """A weak reference to the other profiler object (a ``torch.profiler.profile``), when known."""
    still_running: bool = False
    """The other profiler was still running when the run ended."""
    read_error: str | None = None
    """Reading what nbprof recorded before the hand-over failed (the error, one line)."""


def code_sites(skip_dirs: tuple[str, ...], limit: int = 8) -> list[tuple[str, int, str]]:
    """The calling code, innermost first, without the frames of files in ``skip_dirs`` (the
    profiler's own package, nbprof's: so however deep in nbprof this is called, the first is the
    code that started the other profiler) and of contextlib (``with`` on a generated context
    manager)."""
    skip = tuple(os.path.join(d, "") for d in skip_dirs) + (os.path.join(os.path.dirname(os.__file__), "contextlib.py"),)
    out: list[tuple[str, int, str]] = []
    frame: Any = sys._getframe(1)
    while frame is not None and len(out) < limit:
        filename = frame.f_code.co_filename
        if not filename.startswith(skip):
            out.append((filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return out


class Collector(ABC):
    """One profiled region of code, recorded by one profiler."""

    #: the live profiler object (``torch.profiler.profile`` / ``cProfile.Profile``), kept on the
    #: result so the profiler's own API still works on it (``-o NAME``); None before ``begin``
    profiler: Any = None
    #: set when another profiler started in the middle of the run and ended this one's recording
    takeover: Takeover | None = None

    @abstractmethod
    def begin(self) -> None:
        """Start recording. Raises ``ProfilerBusyError`` when another profiler holds the hook;
        whatever it raises, no profiler is left running."""

    @abstractmethod
    def step(self) -> None:
        """One iteration of a profiled loop has ended (drives ``--schedule``)."""

    @abstractmethod
    def toggle_cuda(self, on: bool) -> None:
        """Pause (False) or resume (True) recording CUDA activity."""

    @abstractmethod
    def begin_action(self, name: str) -> None:
        """A framework's named action begins (it ends with ``end_action(name)``; actions nest)."""

    @abstractmethod
    def end_action(self, name: str) -> None:
        """The latest action ``name`` that began ends; an action that never began is ignored."""

    @abstractmethod
    def end(self) -> None:
        """Stop recording (always, whatever the code did), then read what was recorded.
        Safe to call more than once, and before ``begin`` (then it does nothing)."""

    @abstractmethod
    def result(self) -> Any:
        """What ``end`` read: the profiler's raw data for the result types in ``nbprof.model``."""
