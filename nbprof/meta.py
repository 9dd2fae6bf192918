"""What a profile knows besides its tables: typed metadata, one dataclass per source.

- :class:`TraceMeta`: what the trace itself says (a live profile read through torch's writer, or a
  file): its clock, what was recorded, the devices, threads and rank. The reader fills it; the
  exporter writes it back; analyses read the fields they need (``origin_ns``, ``parts``, ...).
- :class:`TorchMeta`: a :class:`TraceMeta` plus how the run was made and is shown
  (:class:`RunInfo`: sort, limit, notes, the cell's error, wall time, the names of notebook cells).
- :class:`PythonMeta`: a cProfile run: :class:`RunInfo` plus the ``.prof`` file it was read from.

Why dataclasses and not a dict: the same 24 keys were read in 10+ modules with ``.get(key,
default)`` and a different default here and there; a field has one type, one default and one
docstring, and a misspelt name is an AttributeError (and a type-checker error), not a silent
``None``. Times are µs or ns as the field names say, like the tables' columns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TraceMeta", "RunInfo", "MpsRun", "TorchMeta", "PythonMeta", "SnapshotMeta"]


@dataclass
class TraceMeta:
    """What a torch trace says about itself."""

    source: str = ""
    """Where the events came from: "live", a trace file's path, a folder of ranks, "empty"."""
    origin_ns: int = 0
    """The trace clock's time (ns) of ``start_us == 0`` in the events table."""
    base_time_ns: int = 0
    """torch's ``baseTimeNanoseconds``: the wall clock of the trace clock's zero."""
    span_us: float | None = None
    """The profiled span torch recorded (its ``PyTorch Profiler`` event), when the trace has one."""
    trace_name: str | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    """The trace's ``deviceProperties``: one dict per GPU (name, SM count, memory, ...)."""
    thread_names: dict[int, str] = field(default_factory=dict)
    main_thread: int | None = None
    """The thread torch's profiler ran on (the cell's thread), when known."""
    rank: int | None = None
    world_size: int | None = None
    parts: list["TraceMeta"] = field(default_factory=list)
    """A profile merged from several traces (ranks, schedule cycles): each one's own metadata."""
    files: list[str] = field(default_factory=list)
    """A profile loaded from a folder: the trace files, in rank order."""
    compile_log: dict[str, Any] | None = None
    """torch.compile's structured log during the run (``collect.compile_state``): records,
    counters; None when nothing compiled or ran compiled, or the trace was recorded elsewhere."""
    line_data: dict[str, Any] | None = None
    """``--lines``: which line of the user's code ran each operator (``analysis.lines``: frames,
    interned stacks, each op's stack by External id, bytes allocated per stack); None without it.
    ``TorchProfile.lines()`` reads it; saved with the trace (``nbprofLines``)."""
    sources: dict[str, str] = field(default_factory=dict)
    """``--lines``: the full text of every cell and file in ``line_data``, as it was when the profile
    ran, keyed by the ``file`` column of ``lines()``; its lines are numbered as ``lines()``'s
    ``line`` (a cell's magic line is line 1)."""
    reader_notes: list[str] = field(default_factory=list)
    """What the reader could not read or classify, counted ("12 events with an unreadable
    ``args.stream``: left out"); a profile shows them first among its notes."""
    cuda_profile: int | None = None
    """A live CUDA profile: which one it was of the CUDA profiles nbprof read in its process (1:
    the first; ``collect.torch_live.read_results`` counts them), since torch's device times are
    right only in a process's first one (the ``clock_skew`` finding). None: no CUDA was traced, or
    not known (a trace another tool wrote). Saved with the trace (``nbprofCudaProfile``)."""
    left_out_work: dict[str, int] = field(default_factory=dict)
    """Device work (kernels, memcpys, memsets) the reader left out because its time cannot be, by
    why: ``"zero_ts"`` (a ``ts`` of 0, more than a day from the other events), ``"far"`` (another
    ``ts`` more than a day from them), ``"negative_dur"``; only the reasons that occurred. The
    ``clock_skew`` finding reads it. Saved with the trace (``nbprofLeftOutWork``): the rows
    themselves are gone."""
    data_loading: Any = None
    """The DataLoaders the run iterated, their batches and their workers' functions
    (``collect.data_loading.DataLoadingRecord``: ``data_loading()``, ``worker_stats()``, the Data
    loading tab read it); None when no DataLoader ran. Saved with the trace (``nbprofDataLoading``)."""

    def trace_fields(self) -> dict[str, Any]:
        """This metadata's :class:`TraceMeta` fields as keyword arguments (shallow)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(TraceMeta)}


@dataclass
class RunInfo:
    """How a profile was run (a cell, a script) and how its report is shown by default."""

    sort: str | None = None
    """The report's sort column (None: the profile's own default)."""
    limit: int | None = None
    """Rows shown (0 = all; None: the built-in default)."""
    notes: list[str] = field(default_factory=list)
    """One-line notes shown with the report (a failed cell, collection warnings, files written)."""
    wall_s: float | None = None
    """Wall time of the profiled run, profiler start to stop."""
    cell_error: str | None = None
    """The type name of the exception the cell raised (``"KeyboardInterrupt"`` too), if any."""
    script: str | None = None
    """``python -m nbprof``: the script or module profiled."""
    argv: list[str] = field(default_factory=list)
    """``python -m nbprof``: the script's ``sys.argv``."""
    code_names: dict[str, str] = field(default_factory=dict)
    """Notebook cells' compiled file names -> "In [n]", as IPython names them."""
    empty_reason: str | None = None
    """Why the run recorded nothing, where the run knows and it is not that the code ran no
    profiled work (a ``--schedule`` whose active steps never came): the report's empty state."""


@dataclass
class MpsRun:
    """What a live run on Apple's MPS device measured around the cell, where torch.profiler
    records no device activity (``collect.torch_live.MpsWatch``)."""

    device_time_us: float | None = None
    """From an MPS event recorded as the cell started to one recorded as it ended, as the device
    reached them (``torch.mps.Event(enable_timing=True)``): the cell's device work with the
    device's idle gaps inside it. None: not measured (the cell was the process's first MPS use)."""
    allocated_before_bytes: int = 0
    """``torch.mps.current_allocated_memory()`` before the cell: the MPS tensors' bytes."""
    allocated_after_bytes: int = 0
    driver_before_bytes: int = 0
    """``torch.mps.driver_allocated_memory()`` before the cell: the Metal driver's pools for this
    process (cached blocks included), as CUDA's reserved memory."""
    driver_after_bytes: int = 0


@dataclass
class TorchMeta(RunInfo, TraceMeta):
    """A :class:`~nbprof.model.TorchProfile`'s metadata: the trace's, then the run's."""

    group_by: str | None = None
    """The report's default grouping ("op", "shape", "stack"; None: "op")."""
    with_cuda: bool | None = None
    """Whether CUDA was collected (None: a trace file, where kernels in it say so)."""
    mps: MpsRun | None = None
    """A live run whose cell used Apple's MPS device: its device time and memory (None otherwise)."""
    cuda_without_cupti: bool = False
    """A live run asked for CUDA from a torch built without CUPTI (torch 2.4-2.6 on Windows):
    torch timed the ops' CUDA work with CUDA events (its own table has it), the trace no kernels."""
    snapshot: Any = None
    """``--snapshot``: the CUDA allocator's state and history around the run
    (``collect.snapshot.SnapshotData``; ``TorchProfile.snapshot()`` is its ``SnapshotProfile``)."""

    @classmethod
    def of(cls, trace: TraceMeta, **run: Any) -> "TorchMeta":
        """A trace's metadata with the run's fields added (a run's field wins over the trace's:
        a live run knows what it asked to record). The reader's notes come first among the notes."""
        fields = {**trace.trace_fields(), **run}
        fields["notes"] = list(trace.reader_notes) + list(run.get("notes") or [])
        return cls(**fields)


@dataclass
class PythonMeta(RunInfo):
    """A :class:`~nbprof.model.PythonProfile`'s metadata."""

    source: str = ""
    """A profile read from a file (``.prof``): its path (several: joined by ", "); "" for a run."""
    files: list[str] = field(default_factory=list)
    """``load_prof``: the files read, added up."""
    with_lines: bool = False
    """Lines were followed (``--lines``): ``lines()`` holds them."""
    sources: dict[str, str] = field(default_factory=dict)
    """``--lines``: the full text of each file ``lines()`` names (a cell as typed), by file name."""
    data_loading: Any = None
    """The DataLoaders the run iterated (as :attr:`TraceMeta.data_loading`)."""


@dataclass
class SnapshotMeta:
    """A :class:`~nbprof.snapshot.SnapshotProfile`'s metadata (a CUDA memory snapshot)."""

    source: str = ""
    """The file it was read from; "--snapshot" for one recorded around a run."""
    notes: list[str] = field(default_factory=list)
    """One-line notes shown with the report (entries the reader left out, a history cut short)."""
    max_entries: int | None = None
    """The history's bound when nbprof recorded it (``--snapshot``); None for a file."""
    allocator_settings: dict[str, Any] = field(default_factory=dict)
    """torch's ``allocator_settings`` (``PYTORCH_CUDA_ALLOC_CONF``, ``expandable_segments``, ...), as
    the snapshot has them (torch 2.6+)."""
