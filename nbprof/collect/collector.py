"""What the runner asks of a profiler: ``begin``, ``step``, ``end``, ``result`` (and ``toggle_cuda``,
``begin_action`` / ``end_action``).

The runner (``nbprof.runner``) drives every profile the same way, whoever started it (a cell, a
line magic, the command line): ``begin()``, the code runs (calling ``step()`` once per loop
iteration through ``nbprof.step()``), ``end()`` as the first thing after the code, then
``result()``. Each profiler is one class behind this interface: ``TorchSession``
(``collect/torch_live.py``) and ``CProfileSession`` (``collect/cprofile.py``). A call that means
nothing to a profiler is a documented no-op in that class, never a probe with ``hasattr``: so
``nbprof.step()`` and ``nbprof.cuda_collection()`` can stay in code that is profiled either way.

Actions are what a training framework names while it runs (Lightning's hooks, "run_training_batch",
"[LightningModule]Model.training_step"): ``collect/lightning.py`` and ``nbprof.lightning`` report
them here, begin and end by name, nested or (rarely) overlapping. Each profiler shows them its own
way: torch as ``record_function`` ranges, cProfile as one profile per action.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["Collector"]


class Collector(ABC):
    """One profiled region of code, recorded by one profiler."""

    #: the live profiler object (``torch.profiler.profile`` / ``cProfile.Profile``), kept on the
    #: result so the profiler's own API still works on it (``-o NAME``); None before ``begin``
    profiler: Any = None

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
