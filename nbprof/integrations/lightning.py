"""nbprof's profiler for PyTorch Lightning: ``Trainer(profiler=nbprof.lightning.Profiler())``.

What a Lightning user expects of a profiler passed to the Trainer (as ``"simple"`` or
``PyTorchProfiler()``): it profiles the fit by itself and reports at the end of it. This one marks
every action Lightning names (each hook, "run_training_batch", fetching a batch) as a
``record_function`` range and, at the end of the stage (``fit``, ``validate``, ``test``,
``predict``), shows nbprof's report: the Ranges tab is Lightning's simple profiler (action,
calls, mean, total, share of the fit) with the operators and the device time under each action,
and every other tab of a ``%%torchprof`` report besides. Where it runs decides what it does:

- nothing profiling yet: it profiles the stage itself (torch.profiler, with the options given
  here, as ``%%torchprof``'s flags), from its first action to ``describe`` (or, with
  ``schedule``, a window of its batches, each batch a step, as Lightning's ``PyTorchProfiler``);
  in IPython the report is displayed, elsewhere its text is Lightning's summary (logged, or
  written to ``filename``); ``result`` holds the :class:`~nbprof.TorchProfile` either way. In
  a run of several processes, only the first (local rank 0) profiles;
- inside ``%%torchprof`` or ``%%cprofile``: it starts no profiler of its own, its actions go to
  the cell's (ranges in the cell's torch report, a profile per action in its cProfile report);
- inside a torch profiler the user started (``with torch.profiler.profile() as prof``): the
  actions become ranges in that profile (``nbprof.from_profiler(prof)`` shows it).

So it never starts a second profiler. A stage that raises never calls ``describe``: in IPython
the report is shown after the cell anyway (with the error in its notes), and the profiler is
stopped; elsewhere the next stage or the profiler's teardown stops it.

The class is made for the Lightning packages the user imported (``pytorch_lightning``,
``lightning.pytorch`` or both): a real subclass of their ``Profiler``, so ``isinstance`` checks
pass, and importing this module imports no Lightning.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import types
from typing import Any

from ..run import runner
from .lightning_actions import PACKAGES, imported_packages, stage_action
from ..errors import MissingDependencyError

__all__ = ["Profiler"]

INSTALL_HINT = "nbprof.lightning.Profiler needs PyTorch Lightning: pip install lightning (or pytorch-lightning)"


class Profiler:
    """A Lightning profiler that marks every action as a named range and shows nbprof's report
    at the end of each stage (see the module doc).

    The options are ``%%torchprof``'s flags (``cuda``, ``memory``, ``shapes``, ``stack``,
    ``flops``, ``modules``, ``sort``, ``limit``, ``group_by``, ``export``, ``tensorboard``),
    used when it profiles by itself; ``quiet``: no report shown (``result`` still holds it).
    ``schedule``: ``(wait, warmup, active[, repeat])`` (or ``"1,1,3"``) records only some batches
    of a long stage, as ``--schedule``: each batch is a step (it ends with the LightningModule's
    ``on_train_batch_end``; ``on_validation_batch_end`` ... in the other stages).
    ``dirpath`` / ``filename``: Lightning's, where the report's text is written.

    ``result``: the latest stage's :class:`~nbprof.TorchProfile` (None until a stage ends, or
    when the actions went to an enclosing profile); ``results``: every stage's, in order.
    """

    result: Any
    results: list[Any]
    dirpath: Any  # Lightning's Profiler sets these two
    filename: str | None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        concrete = cls if cls is not Profiler else _profiler_class(_bases())
        return super().__new__(concrete)

    def __init__(
        self,
        dirpath: Any = None,
        filename: str | None = None,
        *,
        cuda: bool | None = None,
        memory: bool | None = None,
        shapes: bool | None = None,
        stack: bool | None = None,
        flops: bool | None = None,
        modules: bool | None = None,
        sort: str | None = None,
        limit: int | None = None,
        group_by: str = "op",
        schedule: Any = None,
        export: str | None = None,
        tensorboard: str | None = None,
        quiet: bool = False,
    ) -> None:
        super().__init__(dirpath=dirpath, filename=filename)  # type: ignore[call-arg]  # Lightning's Profiler
        self._flags = argparse.Namespace(
            cuda=cuda, memory=memory, shapes=shapes, stack=stack, flops=flops, modules=modules, sort=sort,
            limit=limit, group_by=group_by, schedule=_schedule_text(schedule), export=export, tensorboard=tensorboard,
            output=None, quiet=quiet,
        )
        _options(self._flags)  # bad options: a one-line OptionError now, not at the end of a fit
        self.quiet = quiet
        self.result = None
        self.results = []
        self._run: Any = None  # the run this profiler started (profiling by itself)
        self._ranges: Any = None  # OpenRanges, inside a torch profiler the user started
        self._stage_action: str | None = None
        self._summary_text = ""
        self._watching_cell = False
        self._set_up = False  # between setup() and describe()
        self._unprofiled = False  # this stage could not start a profile (said once)
        self._batch_end = ".on_train_batch_end"

    # -- where the actions go ------------------------------------------------------------------

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        if self._set_up and self._run is not None:  # a stage that raised and was never described
            self._finish(note=f"the {self._stage_name()} did not finish (it raised, or was interrupted)")
        super().setup(stage, local_rank=local_rank, log_dir=log_dir)  # type: ignore[misc]
        self._set_up = True
        self._summary_text = ""
        # the hook that ends each batch of the stage (its LightningModule's: always called)
        self._batch_end = f".on_{_BATCH_END.get(str(getattr(stage, '_value_', stage)), 'train')}_batch_end"
        self._begin(local_rank)
        if self._run is not None:
            self._run.what = self._stage_name()
        self._stage_action = stage_action(stage)
        self.start(self._stage_action)

    def start(self, action_name: str) -> None:
        if self._run is None:
            # Lightning names an action or two before setup() (configure_callbacks): its rank
            # then is the one Lightning's rank_zero_only knows
            local_rank = self._local_rank if self._set_up else _process_rank()  # type: ignore[attr-defined]
            self._begin(local_rank)
        active = runner.active()
        if active is not None:
            active.collector.begin_action(action_name)
        elif self._ranges is not None:
            self._ranges.enter(action_name)

    def stop(self, action_name: str) -> None:
        active = runner.active()
        if active is not None:
            active.collector.end_action(action_name)
            if active is self._run and self._flags.schedule and action_name.endswith(self._batch_end):
                active.collector.step()  # a batch ended: a step of the schedule
        elif self._ranges is not None:
            self._ranges.exit(action_name)

    def _begin(self, local_rank: int | None) -> None:
        """Where this stage's actions go: an enclosing run's collector (nothing to start), a
        torch profiler the user started (ranges), or a run of its own."""
        if self._run is not None or runner.active() is not None:
            return
        if _torch_profiling():
            if self._ranges is None:
                from ..collect.torch_live import OpenRanges

                self._ranges = OpenRanges()
            return
        self._ranges = None
        if local_rank in (None, 0) and not self._unprofiled:
            self._start_run()

    # -- the end of a stage --------------------------------------------------------------------

    def describe(self) -> None:
        """The stage ended: stop profiling, show the report, then Lightning's own describe
        (``summary()``: the report's text where no report was shown, or to ``filename``)."""
        self._set_up = self._unprofiled = False
        if self._stage_action is not None:
            self.stop(self._stage_action)
            self._stage_action = None
        if self._ranges is not None:
            self._ranges.close_all()
            self._ranges = None
        if self._run is not None:
            self._finish()
        super().describe()  # type: ignore[misc]

    def summary(self) -> str:
        return self._summary_text

    def teardown(self, stage: str | None) -> None:
        """Lightning's teardown (also from ``__del__``): a profile still running is stopped."""
        run = getattr(self, "_run", None)
        if run is not None:
            self._run = None
            run.stop()
        super().teardown(stage)  # type: ignore[misc]

    def __reduce__(self) -> Any:
        """Copies (Lightning deep-copies or pickles a profiler for spawned processes) are new
        profilers with the same options."""
        kwargs = {k: v for k, v in vars(self._flags).items() if k != "output"}
        return (_rebuild, (self.dirpath, self.filename, kwargs))

    # -- profiling by itself -------------------------------------------------------------------

    def _stage_name(self) -> str:
        stage = getattr(self, "_stage", None)  # Lightning's: set by setup()
        value = getattr(stage, "_value_", stage)
        return str(value) if value else "stage"

    def _start_run(self) -> None:
        from IPython import get_ipython

        shell = get_ipython()
        run = runner.new_run("torchprof", _options(self._flags), shell, what=self._stage_name())
        try:
            run.begin()
        except Exception as e:  # another profiler holds torch's: the fit runs unprofiled, and says so
            runner.warn(f"nbprof.lightning.Profiler: not profiling this {self._stage_name()}: {e}")
            self._unprofiled = True
            return
        self._run = run
        if shell is not None and not self._watching_cell:
            shell.events.register("post_run_cell", self._after_cell)
            self._watching_cell = True

    def _finish(self, error: BaseException | None = None, note: str | None = None) -> None:
        run, self._run = self._run, None
        if run is None:
            return
        run.stop()
        result = run.finish_or_warn(error)
        if result is None:
            return
        if note:
            result.meta.notes.append(note)
        self.result = result
        self.results.append(result)
        from IPython import get_ipython

        shown = False
        if not self.quiet and get_ipython() is not None:
            from IPython.display import display

            run.progress.stage("drawing the report")
            try:
                display(result)
                shown = True
            finally:
                run.progress.done()
        else:
            run.progress.done()
        if not shown or self.filename:
            from ..views.tabs.ranges import ranges_text

            # for Lightning's log or its file: the report's text, then the hooks' table
            self._summary_text = result.report().text() + "\n" + ranges_text(result)

    def _after_cell(self, info: Any = None) -> None:
        """After a cell (IPython's post_run_cell): a stage that raised left its profile running
        (Lightning calls no ``describe`` then): stop it and show what it recorded."""
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and self._watching_cell:
            try:
                shell.events.unregister("post_run_cell", self._after_cell)
            except ValueError:
                pass
            self._watching_cell = False
        self._ranges = None
        if self._run is not None:
            error = getattr(info, "error_in_exec", None) if info is not None else None
            self._stage_action = None
            self._set_up = False
            self._finish(error if isinstance(error, BaseException) else None)


# the batches of each stage: the LightningModule hook "on_<this>_batch_end" ends each one
_BATCH_END = {"fit": "train", "validate": "validation", "test": "test", "predict": "predict"}


def _schedule_text(schedule: Any) -> str | None:
    """``(1, 1, 3)`` or ``"1,1,3"`` -> ``"1,1,3"`` (checked with the flag's rules)."""
    if schedule is None:
        return None
    if isinstance(schedule, str):
        return schedule
    return ",".join(str(n) for n in schedule)


def _rebuild(dirpath: Any, filename: Any, kwargs: dict[str, Any]) -> Any:
    return Profiler(dirpath, filename, **kwargs)


def _options(flags: argparse.Namespace) -> Any:
    """The profiler's options -> ``%%torchprof``'s run options, checked and resolved as the flags
    are (the controls panel's defaults, CUDA where there is one)."""
    from ..run.flags import run_options

    return run_options("torchprof", flags)


def _process_rank() -> int:
    """This process's rank as Lightning set it (``rank_zero_only.rank``, shared by both packages
    through lightning_utilities); 0 where it was not set."""
    module = sys.modules.get("lightning_utilities.core.rank_zero")
    return int(getattr(getattr(module, "rank_zero_only", None), "rank", 0) or 0)


def _torch_profiling() -> bool:
    """Whether a torch profiler (not nbprof's) is running in this process."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.autograd._profiler_enabled())


def _bases() -> tuple[type, ...]:
    """Lightning's ``Profiler`` class of each Lightning package the user imported; none imported
    yet: the installed one, imported (the user is about to make a Trainer)."""
    names = imported_packages()
    if not names:
        for name in reversed(PACKAGES):  # lightning.pytorch first: the package Lightning names today
            try:
                importlib.import_module(f"{name}.profilers")
            except ImportError:
                continue
            names = [name]
            break
        else:
            raise MissingDependencyError(INSTALL_HINT)
    return tuple(sys.modules[f"{name}.profilers"].Profiler for name in names)


@functools.lru_cache(maxsize=None)
def _profiler_class(bases: tuple[type, ...]) -> type:
    """nbprof's profiler as a subclass of these Lightning ``Profiler`` classes (made once each)."""
    def body(ns: dict[str, Any]) -> None:
        ns.update(__module__=__name__, __qualname__="Profiler", __doc__=Profiler.__doc__)

    return types.new_class("Profiler", (Profiler, *bases), exec_body=body)
