"""Lightning's actions in a profile the user started around ``trainer.fit()``, without changing
the trainer.

Lightning names everything its Trainer does and hands each name to ``trainer.profiler``:
``with self.profile(name)`` around every hook (``trainer/call.py``: "[LightningModule]Model.
training_step"'s neighbours, "[Callback]...", "[Strategy]..."), ``start(name)`` / ``stop(name)``
around fetching a batch and a manual optimizer step, "run_training_epoch" and
"run_training_batch" in the loops. ``profile()`` is the base class's context manager that calls
``start`` and ``stop``, so those two see every action. The default profiler,
``PassThroughProfiler``, does nothing in them.

While a run is active (``%%torchprof`` / ``%%cprofile``), ``mark_actions(collector)`` points
``PassThroughProfiler.start`` / ``stop`` of each Lightning package the user imported
(``pytorch_lightning`` and ``lightning.pytorch`` are two copies of the same code) at the run's
collector, which records each action its way (torch: a ``record_function`` range; cProfile: a
profile per action), and the undo it returns puts the class's own methods back; the runner
calls it when the run stops, whatever the code did. Two methods of one class, for the run only:
a Trainer made before the cell uses it too (its profiler is an instance of that class), a
Trainer with another profiler (``"simple"``, ``"advanced"``, ``"pytorch"``) is left alone, and
nothing is imported: a package the user has not imported cannot have made a Trainer.

``setup(stage)`` (at the start of ``fit`` / ``validate`` / ``test`` / ``predict``) and
``describe()`` (at its end) mark the whole stage as one more action, "[Trainer].fit": the root
the hooks nest under, whose time is the fit's (the Ranges view's share of the parent is then the
share of the fit). A fit that raises never calls ``describe``: the action ends with the run.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from ..analysis.ranges import TRAINER_STAGE
from ..collect.collector import Collector

__all__ = ["PACKAGES", "imported_packages", "mark_actions", "stage_action"]

# The Lightning packages, as the user imports them; each has its own profilers module.
PACKAGES = ("pytorch_lightning", "lightning.pytorch")


def imported_packages() -> list[str]:
    """The Lightning packages the user has imported (never imports one)."""
    return [name for name in PACKAGES if f"{name}.profilers" in sys.modules]


def stage_action(stage: Any) -> str:
    """The action that spans a Trainer stage: "[Trainer].fit" for ``TrainerFn.FITTING``."""
    value = getattr(stage, "_value_", stage)  # an attribute, not Enum's .value: no call in a profile
    return f"{TRAINER_STAGE}.{value}" if value else TRAINER_STAGE


def mark_actions(collector: Collector) -> Callable[[], None]:
    """Make every imported package's ``PassThroughProfiler`` report its actions to ``collector``;
    returns the undo (restores each class as it was; safe to call twice)."""
    saved: list[tuple[type, dict[str, Any]]] = []
    for name in imported_packages():
        cls = getattr(sys.modules[f"{name}.profilers"], "PassThroughProfiler", None)
        if cls is None or "_nbprof_marks" in cls.__dict__:
            continue
        saved.append((cls, {m: cls.__dict__[m] for m in ("start", "stop", "setup", "describe") if m in cls.__dict__}))
        _patch(cls, collector)

    def undo() -> None:
        while saved:
            cls, methods = saved.pop()
            for m in ("start", "stop", "setup", "describe", "_nbprof_marks"):
                if m in cls.__dict__:
                    delattr(cls, m)
            for m, f in methods.items():
                setattr(cls, m, f)

    return undo


def _patch(cls: type, collector: Collector) -> None:
    base_setup = getattr(cls, "setup")  # Lightning's Profiler's
    base_describe = getattr(cls, "describe")

    def start(self: Any, action_name: str) -> None:
        collector.begin_action(action_name)

    def stop(self: Any, action_name: str) -> None:
        collector.end_action(action_name)

    def setup(self: Any, stage: str, local_rank: Any = None, log_dir: Any = None) -> None:
        base_setup(self, stage, local_rank=local_rank, log_dir=log_dir)
        if type(self).start is start:  # not a subclass with start / stop of its own
            self._nbprof_stage = stage_action(stage)
            collector.begin_action(self._nbprof_stage)

    def describe(self: Any) -> None:
        stage = self.__dict__.pop("_nbprof_stage", None)
        if stage is not None:
            collector.end_action(stage)
        base_describe(self)

    cls.start = start  # type: ignore[attr-defined]
    cls.stop = stop  # type: ignore[attr-defined]
    cls.setup = setup  # type: ignore[attr-defined]
    cls.describe = describe  # type: ignore[attr-defined]
    cls._nbprof_marks = True  # type: ignore[attr-defined]
