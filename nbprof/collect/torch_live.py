"""Run torch.profiler around a piece of code and read what it recorded.

The profile is read from the live profiler's kineto results (``prof.profiler.kineto_results``):
torch's C++ trace writer puts them into a file in memory (``/dev/shm`` where it has room), and
``chrome_trace`` reads that into the events table. We never call ``prof.events()`` or
``key_averages()`` (~100 µs per event), except to read FLOPs when ``--flops`` asks for them: the
trace format has no FLOPs field.

Whatever happens between ``begin`` and ``end`` (an exception, KeyboardInterrupt), ``end`` disables
the profiler; ``_force_disable`` is the last resort when torch's own ``__exit__`` is interrupted.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import warnings
import weakref
from typing import Any, BinaryIO

import numpy as np

from ..errors import MissingDependencyError, ProfilerBusyError
from ..events import TraceData
from ..settings import TorchOptions
from .chrome_trace import NO_LIMIT, read_trace_file
from .collector import Collector
from .native_output import NativeStderrFilter, summarize_native_warnings

__all__ = ["TorchSession", "SavedResults", "import_torch", "check_torch_version", "cuda_available", "MIN_TORCH",
           "SHM_MIN_FREE_BYTES"]

# Use /dev/shm only with this much room: Docker gives containers 64 MB by default, and a trace
# of a million events is ~400 MB.
SHM_MIN_FREE_BYTES = 2 << 30

TORCH_INSTALL_HINT = (
    "%%torchprof needs PyTorch: pip install torch "
    "(CPU only: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


# The oldest torch nbprof reads right. torch 2.1-2.3 record whole microseconds and write each
# event's dur 1 µs longer than the event (seen with 2.3.1: aten::empty 30337-30374 µs, "dur": 38):
# times would be off by 1 µs, zero-length events tie (counts change), --export would not
# round-trip and steps are numbered differently. Refused rather than shown wrong.
MIN_TORCH = (2, 4)
# torch 2.15 deprecates with_modules (a FutureWarning at every profile: "does nothing in eager
# mode", TorchScript only); --modules's nn.Module events come from the Python tracer anyway
WITH_MODULES_DEPRECATED = (2, 15)


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError(TORCH_INSTALL_HINT) from None
    check_torch_version(torch.__version__)
    return torch


def torch_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_torch_version(version: str) -> None:
    """One line naming the version needed, for a torch nbprof cannot read right."""
    release = torch_release(version)
    if release is not None and release < MIN_TORCH:
        need = ".".join(map(str, MIN_TORCH))
        raise MissingDependencyError(
            f"%%torchprof needs torch {need} or newer; this is torch {version}: pip install -U 'torch>={need}'"
        )


def cuda_available() -> bool:
    """Whether torch can profile CUDA here. Never imports torch when it is not imported yet
    and not installed."""
    import importlib.util
    import sys

    if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
        return False
    try:
        torch = import_torch()
    except MissingDependencyError:  # a torch too old to profile with
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


class TorchSession(Collector):
    """One profiled region: ``begin()``, run the code, ``end()``; ``result()`` -> :class:`TraceData`
    (None if nothing was recorded)."""

    def __init__(self, options: TorchOptions, progress: Any = None) -> None:
        self.options = options
        self.progress = progress  # views.progress.Progress, told how big the trace is
        self.profiler: Any = None  # the live torch.profiler.profile
        self._stderr: NativeStderrFilter | None = None
        self._started = False
        self._recorded: TraceData | None = None
        self.cycles: list[TraceData] = []  # one per completed --schedule cycle

    # -- lifecycle -----------------------------------------------------------------------------

    def begin(self) -> None:
        torch = import_torch()
        if torch.autograd._profiler_enabled():
            raise ProfilerBusyError(
                "a torch profiler is already running in this process; "
                "stop it (or let its `with` block end) before profiling this cell"
            )
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.options.cuda:
            activities.append(ProfilerActivity.CUDA)
        kwargs: dict[str, Any] = dict(
            activities=activities,
            record_shapes=self.options.shapes,
            profile_memory=self.options.memory,
            # torch 2.13 records an eager model's nn.Module calls only with its Python tracer on
            # (with_modules alone records none: its hierarchy is TorchScript's), so --modules turns it on
            with_stack=self.options.stack or self.options.modules,
            with_flops=self.options.flops,
        )
        release = torch_release(torch.__version__)
        if self.options.modules and (release is None or release < WITH_MODULES_DEPRECATED):
            kwargs["with_modules"] = True  # TorchScript models' hierarchy, where torch still records it
        if self.options.schedule is not None:
            from torch.profiler import schedule

            wait, warmup, active, repeat = self.options.schedule
            with warnings.catch_warnings():
                # torch warns (with our file's path) when warmup is 0; the run's notes say it instead
                warnings.filterwarnings("ignore", message=".*Profiler won't be using warmup")
                kwargs["schedule"] = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)
            kwargs["on_trace_ready"] = self._cycle_ready
        _import_before_profiling(torch)
        self._stderr = NativeStderrFilter()
        self._stderr.start()
        _skip_inductor_import(True)
        try:
            self.profiler = profile(**kwargs)
            self.profiler.__enter__()
        except BaseException:
            _skip_inductor_import(False)
            self._force_disable()
            self._stderr.stop()
            raise
        self._started = True

    def end(self) -> None:
        """Stop the profiler (always), then read what it recorded."""
        if not self._started:
            return
        self._started = False
        try:
            try:
                self.profiler.__exit__(None, None, None)
            except BaseException:
                self._force_disable()
                raise
            finally:
                _skip_inductor_import(False)
            # still under the stderr filter: torch's trace writer logs too (torch 2.4's CUDA
            # builds print Kineto's "gpuGetDeviceCount failed" on a machine without a GPU when
            # the trace is saved)
            if self.options.schedule is not None:
                self._recorded = self._merge_cycles()
            else:
                self._recorded = self._read(self.profiler)
        finally:
            if self._stderr is not None:
                self._stderr.stop()

    def result(self) -> TraceData | None:
        return self._recorded

    def native_warnings(self) -> list[str]:
        return summarize_native_warnings(self._stderr.captured if self._stderr else [])

    def step(self) -> None:
        if self._started and self.profiler is not None:
            with warnings.catch_warnings():
                # torch warns that a repeating schedule drops each cycle's events unless
                # acc_events=True; we read every cycle as it ends (on_trace_ready), none is lost
                warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
                self.profiler.step()

    def toggle_cuda(self, on: bool) -> None:
        """Pause / resume CUDA collection (a no-op when this run does not record CUDA)."""
        if not self._started or self.profiler is None or not self.options.cuda:
            return
        from torch.profiler import ProfilerActivity

        self.profiler.toggle_collection_dynamic(on, [ProfilerActivity.CUDA])

    def _force_disable(self) -> None:
        """Make sure no profiler is left enabled in this process."""
        try:
            import torch

            if torch.autograd._profiler_enabled():
                torch.autograd._disable_profiler()
            # torch keeps a Python-side flag too; its own stop hook clears it
            torch.autograd.profiler._run_on_profiler_stop()
        except Exception:
            pass

    # -- reading --------------------------------------------------------------------------------

    def _cycle_ready(self, prof: Any) -> None:
        trace = self._read(prof)
        if trace is not None:
            self.cycles.append(trace)

    def _merge_cycles(self) -> TraceData | None:
        if not self.cycles:
            return None
        from ..events import concat_traces

        return concat_traces(self.cycles, label_column="cycle")

    def _read(self, prof: Any) -> TraceData | None:
        results = getattr(prof.profiler, "kineto_results", None) if prof.profiler else None
        if results is None:
            return None
        trace, saved = _save_and_read(results, self.progress)
        # torch's own API on the profiler keeps working: its later saves read nbprof's file
        prof.profiler.kineto_results = SavedResults(results, saved)
        if self.options.flops:
            _add_flops(trace, results)
        # what was asked to be recorded becomes metadata in one place, the runner (TorchMeta)
        return trace


def _import_before_profiling(torch: Any) -> None:
    """Run now the imports torch would run inside the profiled region.

    torch 2.13's ``record_function`` imports ``torch.profiler._cupti_monitor`` the first time it is
    entered (``torch.autograd.profiler._maybe_cupti_monitor``), so the first profile of a process
    with a ``record_function`` label recorded the import. With ``--stack``, torch's Python tracer
    keeps the names of the frames it saw by reference; the imported module's top-level code is
    freed as soon as the import ends and its memory is reused: torch's ``key_averages()`` then
    raised UnicodeDecodeError (about 1 run in 4) and nbprof's table showed a frame
    ``_cupti_monitor.py(0): python_tracer``. Other versions have no such import (the call is
    absent there); ``_skip_inductor_import`` keeps out the other one torch does around the start.
    """
    import_lazily_loaded = getattr(torch.autograd.profiler, "_maybe_cupti_monitor", None)
    if import_lazily_loaded is not None:
        import_lazily_loaded()


def _skip_inductor_import(on: bool) -> None:
    """Keep torch's profiler from importing inductor and dynamo just to read one setting.

    torch.profiler's ``prepare_trace`` asks ``hasattr(torch, "_inductor")`` to read whether
    compiled code uses CUDA graphs; torch's lazy attribute answers by importing inductor and
    dynamo: 2-10 s on the first profile of a session (measured with torch 2.13), and again
    mid-loop with --schedule. While inductor is not imported nothing was compiled, so the
    answer is "no" without the import. The shadow ``hasattr`` lives only in that module, only
    while nbprof's profile runs, and asks the real one as soon as inductor is imported.
    """
    import builtins
    import sys

    try:
        import torch
        import torch.profiler.profiler as module
    except ImportError:
        return
    if not on:
        module.__dict__.pop("hasattr", None)
        return

    def hasattr_(obj: Any, name: str) -> bool:
        if obj is torch and name == "_inductor" and "torch._inductor" not in sys.modules:
            return False
        return builtins.hasattr(obj, name)

    module.hasattr = hasattr_  # type: ignore[attr-defined]  # a module global shadows the builtin for that module only


def _save_and_read(results: Any, progress: Any = None) -> tuple[TraceData, BinaryIO]:
    """torch's C++ writer -> a file in memory -> the events table.

    Returns the table and the file, open and already unlinked: it is the only copy of torch's
    trace there will be (torch's save is one-shot), kept for :class:`SavedResults`. Unlinked, it
    takes no name in the folder and goes when its last handle closes, the process's end included.
    """
    last_error: Exception | None = None
    for folder in _scratch_dirs():
        fd, path = tempfile.mkstemp(prefix="nbprof-", suffix=".json", dir=folder)
        os.close(fd)
        file: BinaryIO | None = None
        try:
            results.save(path)
            file = open(path, "rb")  # opened after the save: torch's writer replaces the file
            if progress is not None:
                size = os.path.getsize(path)
                progress.start_if_big(size)
                progress.stage(f"reading the profile ({size / 2**20:,.0f} MB of trace)")
            trace = read_trace_file(path, max_bytes=NO_LIMIT)  # nbprof's own: no size limit
            trace.meta.source = "live"
            return trace, file
        except Exception as e:  # a full /dev/shm truncates the file: try the next folder
            if file is not None:
                file.close()
            last_error = e
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
    assert last_error is not None
    raise last_error


class SavedResults:
    """torch's kineto results (``prof.profiler.kineto_results``) after nbprof has saved them.

    torch's ``save`` is one-shot ("RuntimeError: Trace is already saved."), and nbprof used it up,
    so ``p.profiler.export_chrome_trace(path)`` (course material calls it) failed after every
    ``%%torchprof -o p``. This stands in for the results on the profiler: ``save`` writes the
    trace torch wrote for nbprof (the same bytes), anything else (``events()``,
    ``experimental_event_tree()`` for the memory timeline, ...) is the results' own. The trace
    file stays open (unlinked) as long as the profiler keeps this object: as many bytes as the
    trace, in /dev/shm where nbprof read it, else on disk.
    """

    def __init__(self, results: Any, trace_file: BinaryIO) -> None:
        self._results = results
        self._trace_file = trace_file
        weakref.finalize(self, trace_file.close)  # closed with the profiler, no ResourceWarning

    def save(self, path: str) -> None:
        self._trace_file.seek(0)
        with open(path, "wb") as out:
            shutil.copyfileobj(self._trace_file, out, 16 << 20)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._results, name)


def _scratch_dirs() -> list[str]:
    dirs = []
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if st.f_bavail * st.f_frsize >= SHM_MIN_FREE_BYTES and os.access(shm, os.W_OK):
            dirs.append(shm)
    except (OSError, AttributeError):
        pass
    dirs.append(tempfile.gettempdir())
    return dirs


def _add_flops(trace: TraceData, results: Any) -> None:
    """FLOPs per op from the kineto events (the trace file has none), joined on External id."""
    pairs = [(e.correlation_id(), f) for e in results.events() if (f := e.flops())]
    if not pairs:
        return
    ids = np.fromiter((p[0] for p in pairs), dtype=np.int64, count=len(pairs))
    flops = np.fromiter((p[1] for p in pairs), dtype=np.int64, count=len(pairs))
    events = trace.events
    ext = events["external_id"].to_numpy()
    is_op = (events["kind"] == "op").to_numpy()
    order = np.argsort(ids)
    ids, flops = ids[order], flops[order]
    at = np.minimum(np.searchsorted(ids, ext), len(ids) - 1)
    hit = is_op & (ids[at] == ext) & (ext > 0)
    column = np.zeros(len(events), dtype=np.int64)
    column[hit] = flops[at[hit]]
    events["flops"] = column
