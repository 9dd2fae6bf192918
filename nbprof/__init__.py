"""nbprof: profile notebook cells with torch.profiler or cProfile and read the report in place.

    %load_ext nbprof
    %%torchprof --cuda --memory        # or %%cprofile
    ...

Public API (everything else is internal):

    nbprof.load_trace(path)            chrome trace file(s) -> TorchProfile
    nbprof.load_prof(path)             a .prof file (python -m cProfile -o) -> PythonProfile
    nbprof.load_snapshot(path)         a CUDA memory snapshot (_dump_snapshot's pickle, read as data) -> SnapshotProfile
    nbprof.from_profiler(prof)         a finished torch.profiler.profile -> TorchProfile
    nbprof.trace_handler(dir_name)     on_trace_ready= for a scheduled profiler: a report per cycle
    nbprof.compare(a, b)               two profiles -> Comparison
    nbprof.controls()                  the panel that sets defaults for the next runs
    nbprof.step()                      mark a step of a profiled loop (for --schedule)
    nbprof.cuda_collection(on)         pause / resume CUDA collection inside a profiled cell
    nbprof.lightning.Profiler()        Trainer(profiler=...): Lightning's actions as ranges, and the report
    TorchProfile, PythonProfile, SnapshotProfile, Comparison   the result types
    ClusterProfile                            a folder of ranks (a TorchProfile)
    NbprofError and subclasses         the errors nbprof raises (nbprof.errors)

Importing nbprof (and ``%load_ext nbprof``) imports neither torch, plotly nor pandas; they load
when first needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import MissingDependencyError, NbprofError, OptionError, ProfilerBusyError, TraceError

__version__ = "0.1.0"

__all__ = [
    "load_ipython_extension",
    "unload_ipython_extension",
    "load_trace",
    "load_prof",
    "load_snapshot",
    "from_profiler",
    "trace_handler",
    "compare",
    "controls",
    "step",
    "cuda_collection",
    "lightning",
    "TorchProfile",
    "ClusterProfile",
    "PythonProfile",
    "SnapshotProfile",
    "Comparison",
    "NbprofError",
    "OptionError",
    "TraceError",
    "ProfilerBusyError",
    "MissingDependencyError",
    "__version__",
]

if TYPE_CHECKING:  # pragma: no cover
    from . import lightning
    from .comparison import Comparison
    from .cluster.profile import ClusterProfile
    from .model import PythonProfile, TorchProfile
    from .snapshot import SnapshotProfile


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbprof``: register %%torchprof and %%cprofile (``magics``), the cell
    transformers that let IPython run a ``%%torchprof`` cell as any cell and the hook that shows its
    report after it ran (``_cell``). Loading again replaces nothing twice."""
    from ._cell import CellWrapper, rewrite_cell, show_pending
    from .magics import ProfileMagics

    ipython.register_magics(ProfileMagics)
    cleanup = ipython.input_transformers_cleanup
    if rewrite_cell not in cleanup:
        cleanup.append(rewrite_cell)
    if not any(isinstance(t, CellWrapper) for t in ipython.ast_transformers):
        ipython.ast_transformers.append(CellWrapper(ipython))
    try:
        ipython.events.unregister("post_run_cell", show_pending)
    except ValueError:
        pass
    ipython.events.register("post_run_cell", show_pending)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbprof``: remove the magics, the transformers and the hook."""
    from ._cell import NAMESPACE_NAME, CellWrapper, rewrite_cell, show_pending

    for kind in ("line", "cell"):
        table = ipython.magics_manager.magics[kind]
        for name in ("torchprof", "cprofile"):
            table.pop(name, None)
    cleanup = ipython.input_transformers_cleanup
    while rewrite_cell in cleanup:
        cleanup.remove(rewrite_cell)
    ipython.ast_transformers[:] = [t for t in ipython.ast_transformers if not isinstance(t, CellWrapper)]
    ipython.user_ns.pop(NAMESPACE_NAME, None)
    ipython.user_ns_hidden.pop(NAMESPACE_NAME, None)
    try:
        ipython.events.unregister("post_run_cell", show_pending)
    except ValueError:
        pass


def load_trace(path: Any, *, workers: int | None = None, client: Any = None,
               progress: bool = True, max_bytes: int | str | None = None) -> "TorchProfile":
    """Read a chrome trace (``.json`` / ``.json.gz``, as ``export_chrome_trace`` and
    ``tensorboard_trace_handler`` write them) into a :class:`TorchProfile`; or a folder of them
    (one per rank) into a ``ClusterProfile`` (a TorchProfile), each rank read and summarized in a
    worker: ``workers`` processes (default: the cores; 0: in this process), or the Dask cluster of
    ``client`` (default: the session's client, if any); ``progress=False``: no progress bar.
    ``max_bytes``: the most JSON read from one file, decompressed (default 4 GiB, or the
    environment variable NBPROF_MAX_TRACE_BYTES; bytes or text such as "16G"): a trace is data
    from anywhere, and reading it is bounded. Needs no torch."""
    from .loading import load_trace as _load

    return _load(path, workers=workers, client=client, progress=progress, max_bytes=max_bytes)


def load_prof(path: Any) -> "PythonProfile":
    """Read a ``.prof`` file (``python -m cProfile -o run.prof script.py``, ``pstats``'
    ``dump_stats``, ``%%cprofile --dump``, ``%prun -D``: what snakeviz opens) into a
    :class:`PythonProfile` with every ``%%cprofile`` view: the stats table (pstats' numbers),
    callers and callees, the flame view, findings, the report. A list of files: added up, as
    ``pstats.Stats(a, b)`` adds them. A file that is not one: a one-line ``TraceError``."""
    from .loading import load_prof as _load_prof

    return _load_prof(path)


def load_snapshot(path: Any, *, max_bytes: int | str | None = None) -> "SnapshotProfile":
    """Read a CUDA memory snapshot (the pickle ``torch.cuda.memory._dump_snapshot`` writes, what
    pytorch.org/memory_viz opens; a ``.gz`` of it too) into a :class:`SnapshotProfile`:
    ``segments()`` (reserved vs allocated per segment), ``blocks(at="end" | "peak" | time_us)``
    (with the line of your code that allocated each), ``active_memory()`` (the history replayed),
    its report. The file is read as data: a pickle that names any code (``__reduce__``) runs
    nothing and fails in one line (``TraceError``), as does a truncated one. ``max_bytes``: the
    most pickle read from one file (default 4 GiB, or ``$NBPROF_MAX_TRACE_BYTES``). Needs no torch
    and no GPU."""
    from .loading import load_snapshot as _load_snapshot

    return _load_snapshot(path, max_bytes=max_bytes)


def from_profiler(prof: Any) -> "TorchProfile":
    """A finished ``torch.profiler.profile`` (or ``torch.autograd.profiler.profile``) as a
    :class:`TorchProfile`: the report and tables ``%%torchprof`` gives for the same run (a
    profiler you ran yourself, ``with accelerator.profile() as prof``, Lightning's). A scheduled
    profiler: its last cycle (torch keeps no other); use ``on_trace_ready=nbprof.trace_handler()``
    for each. A one-line error for a profiler still running, never run, or whose trace torch
    already wrote (``export_chrome_trace``: then ``load_trace`` that file)."""
    from .integrations.profilers import from_profiler as _from_profiler

    return _from_profiler(prof)


def trace_handler(dir_name: Any = None, *, worker_name: str | None = None, use_gzip: bool = False,
                  show: bool = True, keep: int | None = 1) -> Any:
    """``torch.profiler.profile(schedule=..., on_trace_ready=nbprof.trace_handler())``: each
    finished cycle becomes a :class:`TorchProfile` shown in the notebook (one report per cell,
    updated as each cycle ends; ``show=False``: none) and kept (``handler.profiles``, the last
    ``keep``; None: all; ``handler.latest``); with ``dir_name``, also written as torch's
    ``tensorboard_trace_handler(dir_name, worker_name, use_gzip)`` writes it (``load_trace`` and
    TensorBoard read the folder)."""
    from .integrations.profilers import trace_handler as _trace_handler

    return _trace_handler(dir_name, worker_name=worker_name, use_gzip=use_gzip, show=show, keep=keep)


def compare(before: Any, after: Any, **kwargs: Any) -> "Comparison":
    """Compare two profiles of the same kind (two torch profiles or two cProfile profiles)."""
    from .comparison import compare as _compare

    return _compare(before, after, **kwargs)


def controls() -> Any:
    """The controls panel: toggles for CUDA, memory, shapes and stacks that set the defaults of
    the next ``%%torchprof`` runs (flags still win)."""
    from .widgets import controls as _controls

    return _controls()


def step() -> None:
    """Mark the end of one step of a profiled loop (drives ``--schedule``). A no-op when no
    profile is running, so it can stay in the loop (and in ``%%cprofile``, which has no steps)."""
    from .run import runner

    run = runner.active()
    if run is not None:
        run.collector.step()


def cuda_collection(on: bool) -> None:
    """Inside a ``%%torchprof`` cell: pause (False) or resume (True) recording CUDA activity.
    A no-op outside a profile, in a run that does not record CUDA, and under ``%%cprofile``."""
    from .run import runner

    run = runner.active()
    if run is not None:
        run.collector.toggle_cuda(bool(on))


def __getattr__(name: str) -> Any:
    if name in ("TorchProfile", "PythonProfile"):
        from . import model

        return getattr(model, name)
    if name == "SnapshotProfile":
        from .snapshot import SnapshotProfile

        return SnapshotProfile
    if name == "ClusterProfile":
        from .cluster.profile import ClusterProfile

        return ClusterProfile
    if name == "lightning":  # the module; it imports no Lightning itself
        import importlib

        return importlib.import_module(".lightning", __name__)
    if name == "Comparison":
        from .comparison import Comparison

        return Comparison
    raise AttributeError(f"module 'nbprof' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names only (not ``Any``, ``TYPE_CHECKING`` or ``annotations``): what tab
    completion and ``dir(nbprof)`` show is the API, locked by tests/test_api.py."""
    return sorted(__all__)
