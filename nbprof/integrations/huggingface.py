"""Hugging Face ``transformers.Trainer``: a callback that profiles a window of training steps.

    from nbprof.huggingface import ProfilerCallback
    trainer = Trainer(model, args, train_dataset=..., callbacks=[ProfilerCallback(wait=1, warmup=1, active=3)])
    trainer.train()          # the report of steps 2-4 shows when step 4 ends; callback.profile holds it

The window is torch's ``schedule`` (``wait`` steps not recorded, ``warmup`` steps recorded and
thrown away, ``active`` steps recorded, ``repeat`` such cycles), run by the same machinery as
``%%torchprof --schedule`` (``runner.TorchRun``): each optimizer step ends with a step of the
schedule (``on_step_end``), each recorded step is a ``ProfilerStep#N`` range (the report's Steps
tab: each step's time, ops and top operator), and the report is the one ``%%torchprof`` shows.
The profile stops as soon as the window ends, so the rest of the training runs unprofiled.

Importing this module imports ``transformers`` (its callbacks must be ``TrainerCallback``s);
``import nbprof`` never does. A training that ends or fails before the window is over still
shows what was recorded (at the end of the training, or of the notebook cell it ran in), and no
profiler is left running.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..run import runner
from ..errors import MissingDependencyError, NbprofError

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "nbprof.huggingface needs Hugging Face transformers: pip install transformers (or nbprof[transformers])"
    ) from None

__all__ = ["ProfilerCallback"]


class ProfilerCallback(TrainerCallback):
    """``Trainer(callbacks=[ProfilerCallback(wait=1, warmup=1, active=3)])``: profile optimizer
    steps ``wait + warmup + 1`` to ``wait + warmup + active`` (1-based) with torch.profiler and show
    the report when they end.

    The recording options are ``%%torchprof``'s flags (``None``: the controls panel's choice,
    then the default): ``cuda``, ``memory``, ``shapes``, ``stack``, ``flops``, ``modules``;
    ``export`` / ``tensorboard`` also write the trace; ``show=False``: no report displayed (the
    profile is still ``callback.profile``). In a run of several processes each profiles its own
    steps, and only the main one shows its report."""

    def __init__(self, wait: int = 1, warmup: int = 1, active: int = 3, repeat: int = 1, *,
                 cuda: bool | None = None, memory: bool | None = None, shapes: bool | None = None,
                 stack: bool | None = None, flops: bool = False, modules: bool = False,
                 export: str | None = None, tensorboard: str | None = None, show: bool = True) -> None:
        from ..errors import OptionError
        from ..run.flags import check_schedule

        if repeat < 1:
            raise OptionError("ProfilerCallback: repeat must be 1 or more (the profile ends with the window)")
        try:
            self.schedule: tuple[int, int, int, int] = check_schedule(f"{wait},{warmup},{active},{repeat}")  # type: ignore[assignment]
        except OptionError as e:
            raise OptionError(f"ProfilerCallback: {e}") from None
        self._switches = dict(cuda=cuda, memory=memory, shapes=shapes, stack=stack, flops=flops or None,
                              modules=modules or None)
        self._files = dict(export=export, tensorboard=tensorboard)
        self.show = show
        self.profile: Any = None
        """The :class:`~nbprof.TorchProfile` of the window, once it ended (None before)."""
        self._run: runner.Run | None = None
        self._steps = 0
        self._main_process = True
        self._hooked_shell: Any = None
        self._options()  # a bad option is an error now, not when the training starts

    @property
    def window_steps(self) -> int:
        wait, warmup, active, repeat = self.schedule
        return (wait + warmup + active) * repeat

    # -- TrainerCallback events ------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._main_process = bool(getattr(state, "is_world_process_zero", True))
        self._start()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        run = self._run
        if run is None or runner.active() is not run:
            return
        run.collector.step()
        self._steps += 1
        if self._steps >= self.window_steps:
            self._finish(None)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._finish(None)

    # -- the run ---------------------------------------------------------------------------------

    def _options(self) -> Any:
        """The run's options: ``%%torchprof``'s flags, parsed and checked as the magic's are (its
        flags' definitions, ``run.flags``)."""
        from ..errors import OptionError
        from ..run import flags

        parts = ["--schedule", ",".join(map(str, self.schedule))]
        for name, value in self._switches.items():
            if value is not None:
                parts.append(f"--{name}" if value else f"--no-{name}")
        for name, path in self._files.items():
            if path:
                parts += [f"--{name}", os.fspath(path)]
        if not (self.show and self._main_process):
            parts.append("-q")
        parser = argparse.ArgumentParser(prog="ProfilerCallback", add_help=False)
        flags.add_flags(parser, flags.magic_flags("torchprof"))
        try:
            return flags.run_options("torchprof", parser.parse_args(parts))
        except OptionError as e:
            raise OptionError(f"ProfilerCallback: {e}") from None

    def _start(self) -> None:
        self._finish(None)  # a run of an earlier train() that never ended
        self.profile, self._steps = None, 0
        busy = runner.active()
        if busy is not None:
            runner.warn("ProfilerCallback: this training runs under %%torchprof or %%cprofile already, which "
                        "profiles it; the callback records nothing")
            return
        shell = _shell()
        run = runner.new_run("torchprof", self._options(), shell, what="training")
        try:
            run.begin()
        except NbprofError as e:  # another torch profiler runs (the training's own): stand aside, say why
            runner.warn(f"ProfilerCallback: {e}")
            return
        self._run = run
        if shell is not None:  # a training that raises never calls on_train_end: end with its cell
            shell.events.register("post_run_cell", self._cell_ended)
            self._hooked_shell = shell

    def _cell_ended(self, result: Any = None) -> None:
        self._finish(getattr(result, "error_in_exec", None) if result is not None else None)

    def _finish(self, error: BaseException | None) -> None:
        """Stop the profile and show its report (once: the window's end, the training's end, or
        the end of the cell it ran in, whichever comes first)."""
        run, self._run = self._run, None
        if self._hooked_shell is not None:
            try:
                self._hooked_shell.events.unregister("post_run_cell", self._cell_ended)
            except ValueError:
                pass
            self._hooked_shell = None
        if run is None:
            return
        run.stop()
        result = run.finish_or_warn(error)
        run.progress.done()
        if result is None:
            return
        if self._steps < self.window_steps:
            result.meta.notes.append(f"the training ended after {self._steps} of the window's "
                                     f"{self.window_steps} steps (ProfilerCallback{self.schedule[:3]})")
        self.profile = result
        if run.options.quiet:
            return
        if run.shell is None:
            print(result.report().text(), file=sys.stdout)
            return
        from IPython.display import display

        display(result)

    def __repr__(self) -> str:
        wait, warmup, active, repeat = self.schedule
        return f"ProfilerCallback(wait={wait}, warmup={warmup}, active={active}, repeat={repeat})"


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    return get_ipython()
