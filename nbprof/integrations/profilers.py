"""Torch profilers the user runs: ``nbprof.from_profiler(prof)`` and ``nbprof.trace_handler()``.

Not every profile starts in a ``%%torchprof`` cell: a script or a training framework runs
``torch.profiler.profile`` itself (``with accelerator.profile() as prof``, Lightning's
``PyTorchProfiler``), and long runs profile a window of steps with a ``schedule`` whose
``on_trace_ready`` gets each finished cycle. Both become the same :class:`TorchProfile` that
``%%torchprof`` makes, read the one way every live profile is read
(``collect.torch_live.read_results``: torch's trace writer, then the chrome trace reader) and
built by the same function (``runner.torch_profile``): the same tables, report and numbers.

torch's ``save`` is one-shot. nbprof's read leaves a stand-in on the profiler (``SavedResults``)
so torch's own ``export_chrome_trace`` still works afterwards and ``from_profiler`` can be called
again; but a trace torch already saved itself (``export_chrome_trace``,
``tensorboard_trace_handler``) cannot be read again from the profiler: ``load_trace`` reads the
file it wrote.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from ..collect.native_output import NativeStderrFilter, summarize_native_warnings
from ..collect.torch_live import import_torch, lost_session, read_results
from ..errors import OptionError, ProfilerBusyError, TraceError
from ..run.runner import torch_profile
from ..settings import TorchOptions

__all__ = ["from_profiler", "trace_handler", "TraceHandler"]


def from_profiler(prof: Any) -> Any:
    """A finished ``torch.profiler.profile`` (or ``torch.autograd.profiler.profile``) as a
    :class:`TorchProfile`, as ``%%torchprof`` would show the same run."""
    ap, trace, notes = _read_profiler(prof)
    if _is_scheduled(prof):
        notes.append("torch keeps only the last cycle of a schedule: this report is the cycle that ended at step "
                     f"{getattr(prof, 'step_num', '?')}; on_trace_ready=nbprof.trace_handler() shows each cycle")
    return _build(ap, trace, prof, notes)


def _read_profiler(prof: Any) -> tuple[Any, Any, list[str]]:
    """(the stopped autograd profiler, the events table read from its results, notes); or a
    one-line error."""
    ap = _autograd_profiler(prof)
    results = getattr(ap, "kineto_results", None)  # torch sets neither it nor `entered` with enabled=False
    if results is None:
        torch = import_torch()
        if getattr(ap, "entered", False) and torch.autograd._profiler_enabled():
            raise ProfilerBusyError("this torch profiler is still running: call nbprof.from_profiler(prof) after "
                                    "its `with` block ends (or after prof.stop())")
        if getattr(ap, "entered", False):
            raise TraceError("this torch profiler's session was ended by another profiler before it stopped "
                             "(torch runs one at a time): torch kept nothing of it")
        raise OptionError("this torch profiler has not run yet: nothing to show")
    if lost_session(results):
        raise TraceError("this torch profiler's session was ended by another profiler before it stopped "
                         "(torch runs one at a time): torch kept nothing of it")
    stderr = NativeStderrFilter()  # torch's writer logs at the save (torch 2.4's CUDA builds)
    stderr.start()
    try:
        trace = read_results(ap, flops=bool(getattr(ap, "with_flops", False)))
    except RuntimeError as e:
        if "already saved" in str(e):
            raise TraceError("torch already wrote this profiler's trace (export_chrome_trace or "
                             "tensorboard_trace_handler: torch writes it once only): nbprof.load_trace(that file) "
                             "reads it") from None
        raise
    finally:
        stderr.stop()
    return ap, trace, [f"torch: {w}" for w in summarize_native_warnings(stderr.captured)]


def _build(ap: Any, trace: Any, prof: Any, notes: list[str]) -> Any:
    options = _options_of(ap)
    stats = getattr(ap, "_stats", None)
    wall_s = getattr(stats, "profiling_window_duration_sec", 0.0) or None
    return torch_profile(trace, profiler=prof, options=options, notes=notes, wall_s=wall_s, shell=_shell())


def _autograd_profiler(prof: Any) -> Any:
    """The ``torch.autograd.profiler.profile`` holding the results: ``prof`` itself, or the one
    a ``torch.profiler.profile`` ran (its last cycle's)."""
    torch = import_torch()
    if isinstance(prof, torch.autograd.profiler.profile):
        return prof
    if isinstance(prof, torch.profiler.profiler._KinetoProfile):
        if prof.profiler is None:
            raise OptionError("this torch profiler has not run yet (or its schedule has not reached an active step): "
                              "nothing to show")
        return prof.profiler
    raise OptionError(f"from_profiler needs a torch.profiler.profile or torch.autograd.profiler.profile; "
                      f"got {type(prof).__module__}.{type(prof).__qualname__}")


def _options_of(ap: Any) -> TorchOptions:
    """What the profiler was asked to record, as ``%%torchprof``'s options say it."""
    from torch.profiler import ProfilerActivity

    return TorchOptions(
        cuda=ProfilerActivity.CUDA in (getattr(ap, "kineto_activities", None) or ()),
        memory=bool(getattr(ap, "profile_memory", False)),
        shapes=bool(getattr(ap, "record_shapes", False)),
        stack=bool(getattr(ap, "with_stack", False)),
        flops=bool(getattr(ap, "with_flops", False)),
        modules=bool(getattr(ap, "with_modules", False)),
    )


def _is_scheduled(prof: Any) -> bool:
    import torch.profiler.profiler as tp

    schedule = getattr(prof, "schedule", None)
    return schedule is not None and schedule is not getattr(tp, "_default_schedule_fn", None)


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return None
    return get_ipython()


# --------------------------------------------------------------------------------- trace_handler


def trace_handler(dir_name: str | os.PathLike | None = None, *, worker_name: str | None = None,
                  use_gzip: bool = False, show: bool = True, keep: int | None = 1) -> "TraceHandler":
    """``on_trace_ready=`` for a scheduled ``torch.profiler.profile``: each finished cycle becomes
    a :class:`TorchProfile` (``handler.profiles``, the last ``keep`` of them; None: all) shown in
    the notebook (``show``: one report per cell, updated as each cycle ends) and, with
    ``dir_name``, written as torch's ``tensorboard_trace_handler`` writes it
    (``<dir_name>/<worker_name>.<time_ns>.pt.trace.json[.gz]``, which ``nbprof.load_trace``
    and TensorBoard read)."""
    if keep is not None and (not isinstance(keep, int) or keep < 0):
        raise OptionError(f"trace_handler: keep must be a count of cycles (or None: all); got {keep!r}")
    return TraceHandler(None if dir_name is None else os.fspath(dir_name), worker_name=worker_name,
                        use_gzip=use_gzip, show=show, keep=keep)


class TraceHandler:
    """The callable :func:`trace_handler` returns; torch calls it with the profiler at the end of
    each cycle. ``profiles``: the last ``keep`` cycles' profiles; ``latest``: the last one;
    ``files``: the traces written; ``cycles``: how many cycles ended."""

    def __init__(self, dir_name: str | None, *, worker_name: str | None, use_gzip: bool, show: bool,
                 keep: int | None) -> None:
        self.dir_name = dir_name
        self.worker_name = worker_name
        self.use_gzip = use_gzip
        self.show = show
        self.keep = keep
        self.profiles: list[Any] = []
        self.files: list[str] = []
        self.cycles = 0
        self._handle: Any = None
        self._handle_cell: Any = None
        self._library = ""  # the tables' library, when the current output carries it

    @property
    def latest(self) -> Any:
        return self.profiles[-1] if self.profiles else None

    def __call__(self, prof: Any) -> None:
        self.cycles += 1
        ap, trace, notes = _read_profiler(prof)
        steps = int(getattr(prof, "step_num", 0) or 0)
        notes.insert(0, f"cycle {self.cycles} of the schedule, ended at step {steps} (nbprof.trace_handler)")
        if self.dir_name is not None:
            path = self._trace_path()
            prof.export_chrome_trace(path)  # the trace nbprof read (torch's save was used up by it)
            self.files.append(path)
            notes.append(f"trace written to {path}")
        profile = _build(ap, trace, prof, notes)
        if self.keep != 0:
            self.profiles.append(profile)
            if self.keep is not None:
                del self.profiles[:-self.keep]
        if self.show:
            self._show(profile)

    def _trace_path(self) -> str:
        assert self.dir_name is not None
        os.makedirs(self.dir_name, exist_ok=True)
        worker = self.worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if self.use_gzip else "")
        return os.path.join(self.dir_name, name)

    def _show(self, profile: Any) -> None:
        """The cycle's report: one output per cell, replaced by each later cycle's (a display
        handle); a new cell gets an output of its own. An output that carries the tables'
        library (the session's first report) keeps it through its updates: the saved notebook
        has only the last one."""
        report = profile.report()
        shell = _shell()
        if shell is None:
            print(report.text())
            return
        from IPython.display import display

        from ..views.report import library

        cell = getattr(shell, "execution_count", None)
        if self._handle is None or self._handle_cell != cell:
            self._library = library(None)
        bundle = {"text/plain": report.text(), "text/html": self._library + report.html(include_library=False)}
        if self._handle is not None and self._handle_cell == cell:
            self._handle.update(bundle, raw=True)
        else:
            self._handle, self._handle_cell = display(bundle, raw=True, display_id=True), cell

    def __repr__(self) -> str:
        where = f", writing to {self.dir_name}" if self.dir_name else ""
        return f"<nbprof.trace_handler: {self.cycles} cycles{where}>"
