"""Run torch.profiler around a piece of code and read what it recorded.

The profile is read from the live profiler's kineto results (``prof.profiler.kineto_results``):
torch's C++ trace writer puts them into a file in memory (``/dev/shm`` where it has room), and
``chrome_trace`` reads that into the events table. We never call ``prof.events()`` or
``key_averages()`` (~100 µs per event), except to read FLOPs when ``--flops`` asks for them: the
trace format has no FLOPs field.

Whatever happens between ``begin`` and ``end`` (an exception, KeyboardInterrupt), ``end`` disables
the profiler; ``_force_disable`` is the last resort when torch's own ``__exit__`` is interrupted.

torch runs one profiler session at a time. Another one starting while nbprof's runs (a ``with
torch.profiler.profile()`` in the cell, Accelerate's or Lightning's profiler) ends nbprof's
session inside torch without a word: torch 2.13 then hands nbprof's profiler empty results whose
``save`` crashed the process (a segmentation fault in ``ActivityTraceWrapper::save``), torch 2.4
raises at its ``__exit__``. So while nbprof's session runs, :class:`ForeignStartWatch` sees every
other profiler start (torch's module-level ``_prepare_profiler`` / ``_enable_profiler`` /
``_enable_profiler_legacy``, through which every torch profiler starts): nbprof stops its own
session there, reads what it recorded, and lets the other one start, as it would have without
nbprof (``Takeover`` says when and who). At the end, results torch emptied are never saved
(``lost_session``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
import weakref
from typing import Any, BinaryIO, Callable

import numpy as np

from ..errors import MissingDependencyError, ProfilerBusyError
from ..format import fmt_bytes
from ..events import TraceData
from ..settings import TorchOptions
from .. import system
from .chrome_trace import NO_EVENT_READ, NO_LIMIT, read_trace_file
from .collector import Collector, Takeover, code_sites
from .compile_state import CompileWatch
from .snapshot import CudaHistory
from .native_output import NativeStderrFilter, summarize_native_warnings

__all__ = ["TorchSession", "OpenRanges", "SavedResults", "ForeignStartWatch", "read_results", "lost_session",
           "import_torch", "check_torch_version", "cuda_available", "MIN_TORCH", "SHM_MIN_FREE_BYTES",
           "cuda_profiles_read", "traced_cuda"]

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

    def __init__(self, options: TorchOptions, progress: Any = None, shell: Any = None) -> None:
        self.options = options
        self.shell = shell  # IPython's: names the cells (--lines)
        self._tracer: Any = None  # --lines: collect.torch_line_recorder.TorchLineRecorder
        self._entered_ns = 0
        self._lines_error = ""
        self.lines: dict[str, Any] | None = None  # --lines: collect.lines.read_lines's data
        self.progress = progress  # views.progress.Progress, told how big the trace is
        self.profiler: Any = None  # the live torch.profiler.profile
        self._stderr: NativeStderrFilter | None = None
        self._started = False
        self._stopped = False  # nbprof's session is over (ended, or yielded to another profiler)
        self._began_at = 0.0
        self._torch: Any = None
        self._recording: tuple[Any, ...] = ()  # the schedule's actions in which torch's session runs
        self._recorded: TraceData | None = None
        self._watch = ForeignStartWatch(self._yield_to_other)
        self.cycles: list[TraceData] = []  # one per completed --schedule cycle
        self.compile = CompileWatch()  # torch.compile's structured log and kernel profiling, for the cell
        self.actions = OpenRanges()  # a framework's actions (Lightning's hooks) as ranges
        self.mps = MpsWatch()  # Apple's MPS device: measured around the cell (torch records nothing there)
        # --snapshot: the CUDA allocator's history around the cell (collect.snapshot)
        self.history = CudaHistory() if options.snapshot else None
        self.cuda_without_cupti = False  # CUDA asked for, but this torch cannot trace kernels

    # -- lifecycle -----------------------------------------------------------------------------

    def begin(self) -> None:
        torch = import_torch()
        if torch.autograd._profiler_enabled():
            raise ProfilerBusyError(
                "a torch profiler is already running in this process; "
                "stop it (or let its `with` block end) before profiling this cell"
            )
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        self._torch = torch
        self._recording = (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        activities = [ProfilerActivity.CPU]
        if self.options.cuda:
            activities.append(ProfilerActivity.CUDA)
            self.cuda_without_cupti = _cuda_without_cupti(torch)
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
        if self.options.lines:  # built now: its reading of the library folders is not in the profile
            from .torch_line_recorder import TorchLineRecorder
            from .user_code import UserCode

            self._tracer = TorchLineRecorder(UserCode(self.shell))
        self._stderr = NativeStderrFilter()
        self._stderr.start()
        _skip_inductor_import(True)
        try:
            self.profiler = profile(**kwargs)
            self.mps.begin(torch)  # before the profiler: none of it is in the profile
            if self.history is not None:
                self.history.begin(torch)  # before the profiler too: the history covers the whole cell
            with self._watch.own_calls():
                self._watch.install()
                self.profiler.__enter__()
        except BaseException:
            self._watch.remove()
            _skip_inductor_import(False)
            if self.history is not None:
                self.history.discard()
            self._force_disable()
            self._stderr.stop()
            raise
        self.compile.begin()
        self._started = True
        self._began_at = time.perf_counter()
        if self.options.lines:
            self._start_line_tracer()

    def _start_line_tracer(self) -> None:
        """--lines: the user's lines as they run (``collect.torch_line_recorder``), from now on;
        the frames already running (the cell's) count from their next line."""
        import sys

        self._entered_ns = time.time_ns()
        self._tracer.start(sys._getframe(1))

    def _stop_line_tracer(self) -> None:
        if self._tracer is not None:
            self._tracer.stop()

    def end(self) -> None:
        """Stop the profiler (always), then read what it recorded."""
        if not self._started:
            return
        self._started = False
        try:
            self._stop_line_tracer()  # first: whatever else fails, no tracer is left on the thread
            if self.takeover is not None:
                self.takeover.still_running = bool(self._torch.autograd._profiler_enabled())
            # still under the stderr filter: torch's trace writer logs too (torch 2.4's CUDA
            # builds print Kineto's "gpuGetDeviceCount failed" on a machine without a GPU when
            # the trace is saved)
            self._stop_and_read()
        finally:
            self._watch.remove()
            try:
                self._end_history()  # after the profiler stopped: the snapshot is not in the profile
            finally:
                self.mps.end()  # the device's work done (it waits for it), after the profiler stopped
                self.compile.end()  # the cell's compile log, also after another profiler took over
                if self._stderr is not None:
                    self._stderr.stop()

    def _end_history(self) -> None:
        """--snapshot: take the snapshot and switch the history off (``CudaHistory.end``); a snapshot
        that cannot be read is a note, the profile stands."""
        if self.history is None:
            return
        try:
            self.history.end()
        except Exception as e:
            self.history.notes.append(f"--snapshot: could not read the snapshot ({type(e).__name__}: {e})"[:300])

    def result(self) -> TraceData | None:
        return self._recorded

    def native_warnings(self) -> list[str]:
        return summarize_native_warnings(self._stderr.captured if self._stderr else [])

    def step(self) -> None:
        """Once nbprof's session is over (another profiler took over), a no-op: a step of the
        stopped profiler's schedule would start a session again, on top of the other one."""
        if self._started and not self._stopped and self.profiler is not None:
            with warnings.catch_warnings(), self._watch.own_calls():
                # torch warns that a repeating schedule drops each cycle's events unless
                # acc_events=True; we read every cycle as it ends (on_trace_ready), none is lost
                warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
                self.profiler.step()

    def begin_action(self, name: str) -> None:
        """The action becomes a ``record_function`` range named as the framework names it (in the
        profiler that runs: another one, once it took over)."""
        if self._started:
            self.actions.enter(name)

    def end_action(self, name: str) -> None:
        self.actions.exit(name)

    def toggle_cuda(self, on: bool) -> None:
        """Pause / resume CUDA collection (a no-op when this run does not record CUDA)."""
        if not self._started or self._stopped or self.profiler is None or not self.options.cuda:
            return
        from torch.profiler import ProfilerActivity

        self.profiler.toggle_collection_dynamic(on, [ProfilerActivity.CUDA])

    def _stop_and_read(self) -> None:
        """Stop nbprof's session and read it, once: at the end of the run, or when another
        profiler starts (``_yield_to_other``)."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_line_tracer()
        self.mps.mark_end()  # as the cell's work ends, before torch's stop (which takes a while)
        lost = False
        try:
            # nothing imported before __exit__: with --stack, torch's Python tracer would record it
            lost = self._session_lost()
            if lost:
                # ended by code nbprof did not see: torch holds nothing for it (its __exit__
                # raises on torch 2.4, returns results that crash at save on 2.13)
                if self.takeover is None:
                    self.takeover = Takeover(by="", at_s=None)
                self._torch.autograd.profiler._run_on_profiler_stop()
            else:
                try:
                    self.actions.close_all()  # an action still open (the code raised) ends with the profile
                    self.profiler.__exit__(None, None, None)
                except BaseException:
                    self._force_disable()
                    raise
        finally:
            _skip_inductor_import(False)
        if self.options.schedule is not None:
            self._recorded = self._merge_cycles()  # the cycles that ended before
        elif not lost:
            self._recorded = self._read(self.profiler)

    def _session_lost(self) -> bool:
        """nbprof's profiler should hold torch's session now (it is in a recording part of its
        schedule: always, without one), but torch has none: other code ended it."""
        return self.profiler.current_action in self._recording and not self._torch.autograd._profiler_enabled()

    def _yield_to_other(self, entry: str) -> None:
        """Another profiler is starting (``entry``: the torch function it called): stop nbprof's
        session first and read it, then let the other one start, as it would without nbprof."""
        if not self._started or self._stopped:
            return
        takeover = self.takeover = Takeover(by="a torch profiler", at_s=time.perf_counter() - self._began_at)
        try:
            self._stop_and_read()  # first: with --stack, torch would record what follows as the cell's frames
        except Exception as e:  # nbprof's own stop must not break the other profiler's start
            takeover.read_error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        by, other = _starting_profiler()
        takeover.by, takeover.sites = by, code_sites(_package_dirs())
        takeover.other = weakref.ref(other) if other is not None else None
        if entry == "_enable_profiler":
            # emit_itt / emit_nvtx set torch's Python-side "a profiler runs" flag before they enable;
            # stopping nbprof's cleared it
            self._torch.autograd.profiler._run_on_profiler_start()

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
        if prof.profiler is None:
            return None
        if lost_session(prof.profiler.kineto_results):  # ended by code the watch did not see
            if self.takeover is None:
                self.takeover = Takeover(by="", at_s=None)
            return None
        # what was asked to be recorded becomes metadata in one place, the runner (TorchMeta)
        if self._tracer is not None:
            self.lines = self._read_lines(prof.profiler.kineto_results)
        trace = read_results(prof.profiler, progress=self.progress, flops=self.options.flops)
        if self._tracer is not None and self.lines is None:
            trace.meta.reader_notes.append(f"--lines: could not read the lines ({self._lines_error})")
        return trace

    def _read_lines(self, results: Any) -> dict[str, Any] | None:
        """--lines: torch's event tree, read before the results are saved (``collect.lines``);
        the runner joins it to the line tracer's record (``analysis.lines.finish_line_data``)."""
        from .lines import read_lines

        try:
            if self.progress is not None:
                self.progress.stage("reading the lines of your code")
            return read_lines(results, self._tracer, self._tracer.user, self._entered_ns)
        except Exception as e:  # the profile itself stands; the report says the lines are missing
            self._lines_error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
            return None


def _cuda_without_cupti(torch: Any) -> bool:
    """A torch built without CUPTI (torch 2.4-2.6 on Windows): asked for CUDA, its profiler falls
    back to timing each op with CUDA events (``KINETO_GPU_FALLBACK``), so torch's own table has CUDA
    times while the trace, which nbprof reads, has no kernels."""
    from torch.profiler import ProfilerActivity

    try:
        return ProfilerActivity.CUDA not in torch.autograd._supported_activities()
    except Exception:
        return False


class MpsWatch:
    """Apple's MPS device, around a profiled cell: torch.profiler records no MPS activity (there
    is no ``ProfilerActivity.MPS``: Kineto has no MPS backend), only the ops' host side, so the
    device's work shows up as the time of whichever op waits for it (``.item()``, a copy to the
    CPU). What can be measured without a profiler is measured here: the cell's device time (an
    MPS event as the cell starts, one as it ends, their elapsed time once the device has reached
    both) and the MPS memory before and after (tensors; the driver's pools).

    Only where MPS is available and torch was imported (this collector runs torch anyway), and
    the events only where this process already uses MPS (its driver holds memory): nbprof never
    starts Metal in a process that does not use it. ``result`` is None unless the cell used MPS:
    MPS tensors exist at its end, or its MPS memory changed (why not the trace: its ops carry no
    device; why not the change alone: a training step frees what it allocates)."""

    def __init__(self) -> None:
        self._mps: Any = None
        self._start: Any = None
        self._end: Any = None
        self._before: tuple[int, int] = (0, 0)
        self.result: Any = None  # meta.MpsRun

    def begin(self, torch: Any) -> None:
        self._mps = _mps_of(torch)
        if self._mps is None:
            return
        try:
            self._before = self._memory()
            if self._before[1] > 0:
                self._start = self._mps.Event(enable_timing=True)
                self._start.record()
        except Exception:  # an MPS that fails to answer: the profile goes on without it
            self._mps = None

    def mark_end(self) -> None:
        if self._start is not None and self._end is None:
            try:
                self._end = self._mps.Event(enable_timing=True)
                self._end.record()
            except Exception:
                self._start = None

    def end(self) -> None:
        from ..meta import MpsRun

        mps, self._mps = self._mps, None
        if mps is None:
            return
        self.mark_end()
        try:
            mps.synchronize()  # both events reached (and the cell's work done) before reading them
            after = self._memory(mps)
            device_us = None
            if self._start is not None and self._end is not None:
                device_us = float(self._start.elapsed_time(self._end)) * 1000.0  # ms -> µs
        except Exception:
            return
        finally:
            self._start = self._end = None
        if after[0] > 0 or after != self._before:
            self.result = MpsRun(device_time_us=device_us, allocated_before_bytes=self._before[0],
                                 allocated_after_bytes=after[0], driver_before_bytes=self._before[1],
                                 driver_after_bytes=after[1])

    def _memory(self, mps: Any = None) -> tuple[int, int]:
        mps = mps or self._mps
        return int(mps.current_allocated_memory()), int(mps.driver_allocated_memory())


def _mps_of(torch: Any) -> Any:
    """``torch.mps`` where this machine has an MPS device, else None."""
    try:
        if not torch.backends.mps.is_available():
            return None
        return torch.mps
    except Exception:  # a torch without MPS support
        return None


def _package_dirs() -> tuple[str, ...]:
    """torch's and nbprof's folders: frames there are not the code that started a profiler."""
    import torch

    return (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _starting_profiler() -> tuple[str, Any]:
    """Which profiler is starting, read from the calling frames: its public name, and the object
    the user holds when ``nbprof.from_profiler`` can read it (a ``torch.profiler.profile`` or
    ``torch.autograd.profiler.profile``; not emit_itt or the legacy profiler)."""
    import sys

    import torch

    kineto = torch.profiler.profiler._KinetoProfile
    found: Any = None
    frame: Any = sys._getframe(1)
    for _ in range(16):
        if frame is None:
            break
        obj = frame.f_locals.get("self")
        if isinstance(obj, kineto):
            found = obj
            break
        if found is None and obj is not None and type(obj).__module__.startswith("torch.autograd.profiler"):
            found = obj
        frame = frame.f_back
    if found is None:
        return "a torch profiler", None
    cls = type(found)
    module = cls.__module__
    if module == "torch.profiler.profiler":
        module = "torch.profiler"
    readable = isinstance(found, (kineto, torch.autograd.profiler.profile))
    return f"{module}.{cls.__qualname__}", found if readable else None


class ForeignStartWatch:
    """While installed, every torch profiler that starts calls ``on_start(entry)`` first, unless
    nbprof itself is starting or stepping its own (``own_calls``).

    Every torch profiler starts through one of torch's module-level functions: ``_prepare_profiler``
    (then ``_enable_profiler``) for ``torch.profiler.profile`` and ``torch.autograd.profiler.profile``
    (whatever wraps them: Accelerate, Lightning, a schedule's warmup), ``_enable_profiler`` alone
    for ``emit_itt`` / ``emit_nvtx``, ``_enable_profiler_legacy`` for the legacy profiler; torch
    looks each up in its module at every call, so a wrapper there sees them all. Installed only
    while nbprof's session runs; ``record_function`` and everything else is untouched.
    """

    _ENTRIES = (("torch.autograd.profiler", "_prepare_profiler"), ("torch.autograd.profiler", "_enable_profiler"),
                ("torch.autograd.profiler_legacy", "_enable_profiler_legacy"))

    def __init__(self, on_start: Callable[[str], None]) -> None:
        self._on_start = on_start
        self._saved: list[tuple[Any, str, Any, Any]] = []  # (module, name, torch's function, our wrapper)
        self._own = threading.local()

    def install(self) -> None:
        import importlib

        if self._saved:
            return
        for module_name, name in self._ENTRIES:
            try:
                module = importlib.import_module(module_name)
                original = getattr(module, name)
            except (ImportError, AttributeError):  # not in this torch: nothing starts through it
                continue
            wrapper = self._wrap(original, name)
            setattr(module, name, wrapper)
            self._saved.append((module, name, original, wrapper))

    def remove(self) -> None:
        while self._saved:
            module, name, original, wrapper = self._saved.pop()
            if getattr(module, name, None) is wrapper:
                setattr(module, name, original)

    def own_calls(self) -> "_OwnCalls":
        """``with watch.own_calls():`` nbprof's own profiler starts or steps: not another one."""
        return _OwnCalls(self._own)

    def _wrap(self, original: Any, name: str) -> Any:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not getattr(self._own, "on", False):
                self._on_start(name)
            return original(*args, **kwargs)

        return wrapper


class _OwnCalls:
    def __init__(self, state: threading.local) -> None:
        self._state = state
        self._was = False

    def __enter__(self) -> None:
        self._was = getattr(self._state, "on", False)
        self._state.on = True

    def __exit__(self, *exc: object) -> None:
        self._state.on = self._was


def lost_session(results: Any) -> bool:
    """torch's results of a session another profiler ended: empty, with no start time, and their
    ``save`` crashes the process (torch 2.13: a segmentation fault in ``ActivityTraceWrapper::save``).
    Never saved."""
    if results is None or isinstance(results, SavedResults):
        return False
    try:
        return int(results.trace_start_ns()) == 0
    except Exception:
        return False


# The CUDA profiles this process has taken, as far as nbprof saw them. torch's device times can be
# trusted in a process's first CUDA profile only: Kineto registers CUPTI's timestamp callback again
# for each session, and from the second one on, device records can come back on another clock
# (pytorch/pytorch#175790: the device timeline shifted later in each new profile; #192021: one
# more corrupted kernel record per session, which torch then drops). Each trace says which one it
# was (TraceMeta.cuda_profile), so the clock_skew finding can tell a later profile's skew from a
# first one's. Counted where nbprof reads a live session (read_results: %%torchprof, nbprof torch,
# from_profiler, trace_handler; each --schedule cycle is a session of its own); a CUDA profile the
# code ran that nbprof never read is not counted: the true number is at least this one.
_cuda_profiles = 0
_cuda_profiles_lock = threading.Lock()


def _count_cuda_profile() -> int:
    global _cuda_profiles
    with _cuda_profiles_lock:
        _cuda_profiles += 1
        return _cuda_profiles


def cuda_profiles_read() -> int:
    """How many CUDA profiles nbprof has read in this process."""
    return _cuda_profiles


def traced_cuda(profiler: Any) -> bool:
    """Whether a ``torch.autograd.profiler.profile``'s session traced CUDA through CUPTI (what
    torch asked Kineto for: ``kineto_activities``; a torch without CUPTI times ops with CUDA
    events instead, and its trace has no device records)."""
    from torch.profiler import ProfilerActivity

    import torch

    activities = getattr(profiler, "kineto_activities", None) or ()
    return ProfilerActivity.CUDA in activities and not _cuda_without_cupti(torch)


def read_results(profiler: Any, *, progress: Any = None, flops: bool = False) -> TraceData:
    """A stopped ``torch.autograd.profiler.profile``'s kineto results -> the events table, through
    torch's trace writer (``_save_and_read``): the one way every live profile is read, nbprof's
    own and one the user ran (``nbprof.from_profiler``).

    torch's ``save`` is one-shot: the results are replaced on the profiler by :class:`SavedResults`,
    so torch's own API on it (``export_chrome_trace``) keeps working, and reading them again reads
    the same trace. A CUDA session is counted (:func:`cuda_profiles_read`) as it is first read: its
    number goes with the trace (``TraceMeta.cuda_profile``), the same when it is read again."""
    results = profiler.kineto_results
    if isinstance(results, SavedResults):
        number = results.cuda_profile
    else:  # counted before the save: a session whose save fails was one all the same
        number = _count_cuda_profile() if traced_cuda(profiler) else None
    trace, saved = _save_and_read(results, progress)
    trace.meta.cuda_profile = number
    base = results._results if isinstance(results, SavedResults) else results
    profiler.kineto_results = SavedResults(base, saved, number)
    if flops:
        _add_flops(trace, base)
    return trace


class OpenRanges:
    """``record_function`` ranges opened and closed by name, as a framework reports its actions
    (``begin_action`` / ``end_action``): torch records one range per action, in whatever torch
    profiler is running (nbprof's, or one the user started). Ranges of the same name nest; one
    closed out of order (Lightning's fetch of the next batch can end after the batch) ends as
    torch allows, by its handle."""

    def __init__(self) -> None:
        self._open: list[tuple[str, Any]] = []  # in the order they opened

    def enter(self, name: str) -> None:
        from torch.autograd.profiler import record_function

        rf = record_function(name)
        rf.__enter__()
        self._open.append((name, rf))

    def exit(self, name: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == name:
                _, rf = self._open.pop(i)
                rf.__exit__(None, None, None)
                return

    def close_all(self) -> None:
        """End every range still open, innermost first (before the profiler stops: their end is
        the profile's end)."""
        while self._open:
            _, rf = self._open.pop()
            try:
                rf.__exit__(None, None, None)
            except Exception:
                pass

    def __len__(self) -> int:
        return len(self._open)


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


def _save_and_read(results: Any, progress: Any = None) -> tuple[TraceData, "_TraceFile"]:
    """torch's C++ writer -> a file in memory -> the events table.

    Returns the table and the file, open: it is the only copy of torch's trace there will be
    (torch's save is one-shot), kept for :class:`SavedResults`. Where the system removes an open
    file (Linux, macOS) it is unlinked at once: it takes no name in the folder and goes when its
    last handle closes, the process's end included. Windows refuses to remove an open file
    (``PermissionError``): there it is removed when closed (:class:`_TraceFile`), with the profiler
    or at the interpreter's exit, never left in ``%TEMP%``.
    """
    first_error: Exception | None = None
    for folder in _scratch_dirs():
        _remove_stale(folder)
        fd, path = tempfile.mkstemp(prefix=f"nbprof-{os.getpid()}-", suffix=".json", dir=folder)
        os.close(fd)
        file: BinaryIO | None = None
        try:
            results.save(path)
            file = open(path, "rb")  # opened after the save: torch's writer replaces the file
            if progress is not None:
                size = os.path.getsize(path)
                progress.start_if_big(size)
                progress.stage(f"reading the profile ({fmt_bytes(size)} of trace)")
            trace = read_trace_file(path, max_bytes=NO_LIMIT)  # nbprof's own: no size limit
            trace.meta.source = "live"
            # torch's file of a run that recorded nothing still holds a few entries (process
            # names): that the cell ran no torch operator is the whole story, not this file
            trace.meta.reader_notes = [n for n in trace.meta.reader_notes if not n.endswith(NO_EVENT_READ)]
            saved = _TraceFile(file, path)
            file = None  # the _TraceFile owns it now (and removes the path: unlinked now, or at close)
            return trace, saved
        except Exception as e:  # a full /dev/shm truncates the file: try the next folder
            # the first failure is the one to tell: where torch marks its results saved even so,
            # the next try only says "Trace is already saved"
            first_error = first_error or e
        finally:
            if file is not None:
                file.close()  # closed before it is removed (Windows removes no open file)
                _remove(path)
    assert first_error is not None
    raise first_error


def _remove_stale(folder: str) -> None:
    """On Windows, remove the traces of processes that are gone: a process that ended without
    closing its file (a kernel killed) leaves one there, where the file is removed at close.
    Elsewhere the name is gone as soon as it is read, and a shared /tmp may hold the files of
    processes another container (pid namespace) is writing: left alone."""
    import glob

    if not system.on_windows():
        return
    for path in glob.glob(os.path.join(glob.escape(folder), "nbprof-*-*.json")):
        pid = os.path.basename(path).split("-")[1]
        if pid.isdigit() and int(pid) != os.getpid() and not system.process_alive(int(pid)):
            _remove(path)


def _remove(path: str) -> bool:
    """Remove a file; False where the system refuses (Windows, while a handle is open)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class _TraceFile:
    """The saved trace, open for reading, removed from its folder as early as the system allows:
    at once where an open file can be unlinked (POSIX), else when it is closed."""

    def __init__(self, file: BinaryIO, path: str) -> None:
        self.file = file
        self._leftover: str | None = None if _remove(path) else path
        # closed (and removed) with its owner, or at the interpreter's exit
        self._finalizer = weakref.finalize(self, _TraceFile._close, file, self._leftover)

    @staticmethod
    def _close(file: BinaryIO, leftover: str | None) -> None:
        file.close()
        if leftover is not None:
            _remove(leftover)

    def close(self) -> None:
        self._finalizer()

    @property
    def on_disk(self) -> str | None:
        """The file's path while it still has one (Windows), else None."""
        return self._leftover if self._finalizer.alive else None


class SavedResults:
    """torch's kineto results (``prof.profiler.kineto_results``) after nbprof has saved them.

    torch's ``save`` is one-shot ("RuntimeError: Trace is already saved."), and nbprof used it up,
    so ``p.profiler.export_chrome_trace(path)`` (course material calls it) failed after every
    ``%%torchprof -o p``. This stands in for the results on the profiler: ``save`` writes the
    trace torch wrote for nbprof (the same bytes), anything else (``events()``,
    ``experimental_event_tree()`` for the memory timeline, ...) is the results' own. The trace
    file stays open (unlinked; on Windows removed when closed) as long as the profiler keeps this
    object: as many bytes as the trace, in /dev/shm where nbprof read it, else on disk.
    """

    def __init__(self, results: Any, trace_file: "_TraceFile", cuda_profile: int | None = None) -> None:
        self._results = results
        self._trace_file = trace_file  # closed with the profiler (its finalizer), no ResourceWarning
        self.cuda_profile = cuda_profile  # the number read_results gave the session (TraceMeta's)

    def save(self, path: str) -> None:
        file = self._trace_file.file
        file.seek(0)
        with open(path, "wb") as out:
            shutil.copyfileobj(file, out, 16 << 20)

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
