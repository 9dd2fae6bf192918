"""The result objects: a torch profile and a Python (cProfile) profile.

They hold DataFrames and typed metadata (``nbprof.meta``); they never format (views do) and
never profile (collectors do).

One caching style: each derived table is computed on first use by a ``functools.cached_property``
named ``_<table>`` (a keyed table, like ``key_averages(group_by)``, by a dict filled once per
key), and the public accessor hands out a shallow copy, so a user editing a table cannot change
what the report shows. Properties vs methods, one rule: a property is what every profile has and
takes no options (``events``, ``summary``, ``findings``, ``device_stats``, ``stats``); a method
takes options or answers a question of some profiles only (``key_averages(group_by)``,
``kernels()``, ``ranges()``, ``steps()``, ``overview()``, ``modules()``, ``ranks()``, ``collectives()``,
``launches()``, ``queue_length()``, ``allocations()``, ``alive_at_end()``, ``memory_growth()``,
``timeline()``, ``compilation()``).
Times are µs (``_us``), or seconds where cProfile counts in seconds (``_s``).
"""

from __future__ import annotations

import functools
import marshal
import os
import pstats
from typing import Any

import numpy as np
import pandas as pd

from .analysis.key_averages import GROUP_BY, averaged_rows, key_averages
from .analysis.summary import TorchSummary, summarize_torch
from .analysis.tree import build_tree
from .collect.cprofile import edges_table, stats_table
from .errors import OptionError
from .format import plural
from .events import TraceData
from .meta import PythonMeta, TorchMeta

__all__ = ["TorchProfile", "PythonProfile"]


class _DataLoaders:
    """What both profiles say about the DataLoaders the run iterated (``meta.data_loading``,
    recorded in their worker processes: ``collect.data_loading``; ``analysis.data_loading``)."""

    meta: Any

    def data_loading(self) -> pd.DataFrame:
        """One row per batch a DataLoader made during the run: ``loader`` (your name for it, else
        "DataLoader 1"), ``epoch`` (the pass over it, from 0), ``worker`` (torch's worker id; -1: made
        in the main process, ``num_workers=0``), ``pid``, ``batch`` (its index in the epoch),
        ``samples``, ``start_us`` / ``end_us`` / ``make_us`` (when the worker made it), ``wait_start_us``
        / ``wait_us`` (the main process asking for it and waiting until it had it; NaN: the loop never
        took it), ``status`` ("ok"; "error": ``__getitem__`` or ``collate_fn`` raised; "lost": the loop
        waited for it and it never came). Times on the profile's axis (µs since its start). Empty
        when no DataLoader ran. See docs/data-loading.md."""
        return self._data_loading.batches.copy(deep=False)

    def worker_stats(self, loader: str | None = None) -> pd.DataFrame:
        """The DataLoader workers' Python functions while they made batches (cProfile in each worker):
        ``worker``, then the columns of ``PythonProfile.stats``, one row per worker id and function,
        summed over the worker's processes (each epoch's, without persistent workers). ``loader``:
        that DataLoader's workers only (its name in ``data_loading()``)."""
        known = list(dict.fromkeys(self._data_loading.batches["loader"]))
        if loader is not None and loader not in known:
            raise OptionError(f"no DataLoader {loader!r} in this profile; "
                              + (f"its loaders: {', '.join(known)}" if known else "it iterated none with workers"))
        return self._data_loading.worker_stats(loader)

    @functools.cached_property
    def _data_loading(self) -> Any:
        from .analysis.data_loading import data_loading

        return data_loading(self, main_calls=self._main_calls())

    def _main_calls(self) -> int | None:
        """The main process's Python calls, where the profile counted them (its overhead)."""
        return None

    @functools.cached_property
    def _workers_profile(self) -> "PythonProfile":
        """The workers' functions, all workers added up, as a profile of their own (the Data
        loading tab shows its table and flame as ``%%cprofile`` does)."""
        names = dict(getattr(self.meta, "code_names", {}) or {})
        return PythonProfile(self._data_loading.merged_raw(), PythonMeta(code_names=names))


class TorchProfile(_DataLoaders):
    """A torch.profiler profile (live or loaded from a trace): tables, views, exports.

    ``events``: one row per event (see ``nbprof.events``); ``key_averages(group_by)``: torch's
    key averages as a DataFrame; ``profiler``: the live ``torch.profiler.profile`` or None.
    """

    kind = "torch"

    def __init__(self, events: pd.DataFrame, meta: TorchMeta | None = None, *, profiler: Any = None):
        self._events = events if "parent" in events.columns else build_tree(events)
        self.meta = meta if meta is not None else TorchMeta()
        self.profiler = profiler
        self._averages: dict[str, pd.DataFrame] = {}

    @classmethod
    def from_trace(cls, trace: TraceData, *, profiler: Any = None, **run: Any) -> "TorchProfile":
        """A profile of ``trace``; ``run``: :class:`~nbprof.meta.TorchMeta` fields of the run
        (sort, notes, what was asked to be recorded, ...)."""
        return cls(trace.events, TorchMeta.of(trace.meta, **run), profiler=profiler)

    # -- data -----------------------------------------------------------------------------------

    @property
    def events(self) -> pd.DataFrame:
        return self._events.copy(deep=False)

    def key_averages(self, group_by: str = "op") -> pd.DataFrame:
        """One row per operator (``"op"``), per operator and input shape (``"shape"``), or per
        operator and Python call stack (``"stack"``)."""
        if group_by not in GROUP_BY:
            raise OptionError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
        if group_by not in self._averages:
            stacks = None
            if group_by == "stack":
                from .analysis.stacks import op_stacks

                stacks = op_stacks(self._events, code_names=self.meta.code_names)
            self._averages[group_by] = key_averages(self._events, group_by, stacks=stacks, rows=self._averaged_rows)
        return self._averages[group_by].copy(deep=False)

    @functools.cached_property
    def _averaged_rows(self) -> Any:
        """The rows key averages count (``analysis.key_averages.averaged_rows``), once for every
        grouping."""
        return np.flatnonzero(averaged_rows(self._events))

    def lines(self) -> pd.DataFrame:
        """Line by line (``%%torchprof --lines``): one row per line of your code with anything in it:
        ``cell`` ("In [4]"; None for a file), ``file``, ``line`` (a cell's magic line is line 1),
        ``function``, ``function_line`` (the first line of that function; 1 for a cell's top
        level), ``source``, ``ops`` (top-level operator calls made on the line), ``self_cpu_us``,
        ``cpu_total_us``, ``self_device_us``, ``device_total_us``, ``alloc_bytes``,
        ``alive_at_end_bytes`` (of those bytes, the blocks still allocated when the profile ended:
        ``alive_at_end()``). ``self_*``:
        operators, kernels and bytes of that line itself; ``*_total_*``: also those of every call
        it made into your code. One last row (``function == "(outside your code)"``, no file)
        holds what ran outside it, so each self column sums to the profile's total. A trace
        torch wrote with ``with_stack`` gives each function's entry line (``attrs["method"] ==
        "function_entries"``, said in ``attrs["notes"]``). See docs/lines.md."""
        table = self._lines.copy(deep=False)
        table.attrs = dict(self._lines.attrs)
        return table

    @functools.cached_property
    def _lines(self) -> pd.DataFrame:
        return self._line_join[0]

    def _event_lines(self) -> Any:
        """For each row of ``events``, the position in ``lines()`` of the user line that ran it, or
        -1 (``analysis.lines.line_join``); what the ``sync_line`` finding reads. Raises
        ``OptionError`` as ``lines()`` does on a profile without lines."""
        return self._line_join[1]

    @functools.cached_property
    def _line_join(self) -> tuple[pd.DataFrame, Any]:
        from .analysis.lines import line_data_from_frames, line_join

        data = self.meta.line_data
        if data is None:
            data = line_data_from_frames(self._events, self.meta.code_names)
        if data is None:
            raise OptionError("this profile has no lines: record it with %%torchprof --lines "
                              "(or nbprof torch --lines)")
        sources = self.meta.sources
        if not sources:  # torch's own trace: the cells and files this kernel still has
            from .collect.lines import collect_sources

            sources = collect_sources(set(data["frames"]["file"]))
        alive = self._alive_blocks
        table, rows = line_join(self._events, data, sources, self.meta.code_names,
                                alive=(alive["row"].to_numpy(), alive["bytes"].to_numpy()))
        table.attrs = {"method": data.get("method", "tracer"), "notes": list(data.get("notes", []))}
        return table, rows

    @property
    def summary(self) -> TorchSummary:
        """Totals of the profile: events, span, self CPU / device time, peaks, default sort."""
        return self._summary

    @functools.cached_property
    def _summary(self) -> TorchSummary:
        return summarize_torch(self._events, self.key_averages("op"), self.meta.sort)

    @property
    def collected(self) -> dict[str, bool]:
        """Which collection options this profile was recorded with."""
        m = self.meta
        return {
            "cuda": m.with_cuda if m.with_cuda is not None else self.summary.has_device,
            "memory": m.profile_memory,
            "shapes": m.record_shapes,
            "stack": m.with_stack,
            "flops": m.with_flops,
            "modules": m.with_modules,
        }

    # -- exports --------------------------------------------------------------------------------

    def to_chrome_trace(self, path: str | os.PathLike) -> str:
        """Write a chrome trace (``.json`` or ``.json.gz``) that Perfetto, chrome://tracing and
        ``nbprof.load_trace`` open."""
        from .collect.trace_writer import write_chrome_trace

        return write_chrome_trace(self, path)

    def save(self, path: str | os.PathLike) -> str:
        """Save the profile; ``nbprof.load_trace(path)`` gives it back."""
        return self.to_chrome_trace(path)

    def to_html(self, path: str | os.PathLike, title: str | None = None) -> str:
        """Write the report as one HTML file that opens offline, tables and timeline working."""
        from .views.page import write_standalone_html

        return write_standalone_html(self, path, title)

    # -- display --------------------------------------------------------------------------------

    def report(self, **view: Any) -> Any:
        """The report with other view settings: ``sort``, ``limit``, ``group_by``."""
        from .views.report import TorchReport

        return TorchReport(self, **view)

    def timeline(self, *, python: bool = False, window_us: tuple[float, float] | None = None,
                 window: tuple[float, float] | None = None, max_rects: int | None = None,
                 height: int | None = None) -> Any:
        """The timeline: a lane per CPU thread and device stream, nested ops as levels, kernels on
        their streams; zoom with a drag, hover for details. A plotly ``Figure`` that renders
        itself (plotly where the front end draws it, a static SVG elsewhere; ``views.figure``).
        ``python=True`` adds the Python frames; ``window_us=(start_us, end_us)`` (µs since the
        profile's start, like every time column) draws a part in full detail. ``window=`` in ms
        is deprecated."""
        from .views.timeline import DEFAULT_MAX_RECTS, timeline_figure

        if window is not None:
            import warnings

            if window_us is not None:
                raise OptionError("timeline: pass window_us=(start_us, end_us), not window= as well")
            warnings.warn("timeline(window=(start_ms, end_ms)) is deprecated: use window_us=(start_us, end_us) "
                          "(µs, like every other time in nbprof)", DeprecationWarning, stacklevel=2)
            window_us = (float(window[0]) * 1000.0, float(window[1]) * 1000.0)
        return timeline_figure(self, python=python, window_us=window_us, height=height,
                               max_rects=DEFAULT_MAX_RECTS if max_rects is None else max_rects)

    def snapshot(self) -> Any:
        """``--snapshot``: the CUDA memory snapshot taken around the run, as a
        :class:`~nbprof.snapshot.SnapshotProfile` (``segments()``, ``blocks()``, ``active_memory()``,
        its report). An ``OptionError`` for a profile recorded without it."""
        if self.meta.snapshot is None:
            raise OptionError("this profile has no memory snapshot: record it with %%torchprof --snapshot (CUDA only)")
        return self._snapshot

    @functools.cached_property
    def _snapshot(self) -> Any:
        from .snapshot import SnapshotProfile

        return SnapshotProfile(self.meta.snapshot)

    def memory_curve(self) -> Any:
        """Allocated (and reserved) memory over time (needs ``--memory``): a plotly ``Figure`` that
        renders itself (its static drawing: the Memory tab's chart)."""
        from .views.memory import memory_curve_figure

        ev = self._events
        end_us = float((ev["start_us"] + ev["dur_us"]).max()) if len(ev) else 0.0
        return memory_curve_figure(self._memory_curve, end_us)

    @functools.cached_property
    def _memory_curve(self) -> pd.DataFrame:
        """The allocator's totals after each memory event, per device (one pass, shared by the
        Memory tab's chart, its held-at-peak tables and ``memory_curve()``)."""
        from .analysis.memory import memory_curve

        return memory_curve(self._events)

    @functools.cached_property
    def _memory_summary(self) -> Any:
        """What the Memory tab draws (``analysis.memory.MemorySummary``): the chart's points, the
        peaks, the blocks held at each, the blocks left at the end, memory per step."""
        from .analysis.memory import summarize_memory
        from .views.memory import CHART_BUCKETS

        return summarize_memory(self._events, self._memory_curve, self._allocations, CHART_BUCKETS,
                                alive=self.alive_at_end(), growth=self._growth, steps_from=self._growth.attrs.get("steps"))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.report()._repr_mimebundle_(include, exclude)

    def timeline_view(self) -> Any:
        """The timeline for display (prepared once, shared by the report's overview and the
        zoomable figure under it)."""
        return self._timeline_view

    @functools.cached_property
    def _timeline_view(self) -> Any:
        from .views.timeline_view import TimelineView

        return TimelineView(self)

    def _ipython_display_(self) -> None:
        """In IPython: the report, then the timeline as an output of its own (live in a kernel; a plotly
        figure cannot live inside the persistent HTML report without megabytes of plotly.js)."""
        from IPython.display import display

        display(self.report())
        if self.summary.events:
            display(self.timeline_view().display_object())

    # -- analyses (issue 7) ------------------------------------------------------------------------

    @property
    def findings(self) -> pd.DataFrame:
        """What the profile says: ``kind, severity, message, evidence`` (see
        ``nbprof.analysis.findings`` for every kind and its thresholds)."""
        return self._findings.copy(deep=False)

    @functools.cached_property
    def _findings(self) -> pd.DataFrame:
        from .analysis.findings import findings_frame

        return findings_frame(self._finding_rows)

    @functools.cached_property
    def _finding_rows(self) -> list[tuple[str, Any]]:
        """``findings``' rows with their scores (a folder of ranks compares a kind's across ranks)."""
        from .analysis.findings import torch_finding_rows

        return torch_finding_rows(self)

    def ranges(self) -> pd.DataFrame:
        """The ``record_function`` labels: count, mean and total time, share of the span, and the
        device time launched under each (``nbprof.analysis.ranges``)."""
        return self._ranges.copy(deep=False)

    @functools.cached_property
    def _ranges(self) -> pd.DataFrame:
        from .analysis.ranges import ranges

        return ranges(self._events, self.meta)

    def range_ops(self, label: str | None = None) -> pd.DataFrame:
        """The operators that ran under each ``record_function`` label (Lightning's actions among
        them): ``path, label, name, count, self_cpu_us, self_device_us``, one row per path and
        operator (``nbprof.analysis.ranges``). ``label``: that label's operators only, over all
        its paths, by self CPU time (``name, count, self_cpu_us, self_device_us``): a label, a
        path, or a part of a label that names one label (``"training_step"``)."""
        frame = self._range_ops
        if label is None:
            return frame.copy(deep=False)
        known = self._ranges
        labels = list(dict.fromkeys(known["label"]))
        if label in set(known["path"]):
            rows = frame[frame["path"] == label]
        else:
            if label not in labels:
                matches = [x for x in labels if label in x]
                if len(matches) != 1:
                    which = f"{len(matches)} labels contain it: {', '.join(matches[:5])}" if matches else \
                        f"the labels are: {', '.join(labels[:8])}{', ...' if len(labels) > 8 else ''}"
                    raise OptionError(f"no single range {label!r}; {which}")
                label = matches[0]
            rows = frame[frame["label"] == label]
        out = rows.groupby("name", sort=False).agg(count=("count", "sum"), self_cpu_us=("self_cpu_us", "sum"),
                                                  self_device_us=("self_device_us", "sum")).reset_index()
        return out.sort_values(["self_cpu_us", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)

    @functools.cached_property
    def _range_ops(self) -> pd.DataFrame:
        from .analysis.ranges import range_ops

        return range_ops(self._events)

    def allocations(self) -> pd.DataFrame:
        """Each memory block allocated (``--memory``), paired with its free by address: ``device,
        addr, bytes, alloc_us, free_us, lifetime_us, op, top_op`` (``nbprof.analysis.memory``).
        ``alive_at(time_us, device)`` gives the blocks held at a moment, e.g. the memory peak."""
        return self._allocations.copy(deep=False)

    @functools.cached_property
    def _allocations(self) -> pd.DataFrame:
        return self._allocation_rows.drop(columns="row")

    @functools.cached_property
    def _allocation_rows(self) -> pd.DataFrame:
        """``allocations()`` with ``row``: each block's memory event in ``events``."""
        from .analysis.memory import allocations

        return allocations(self._events, with_rows=True)

    def alive_at_end(self, by: str | None = None) -> pd.DataFrame:
        """The blocks allocated during the profile and not freed by its end (``--memory``), biggest
        first: ``allocations()``' columns and, with ``--lines``, ``cell, file, line, source``: the
        line of your code that ran the operator that allocated each (as ``lines()`` places
        operators; None / "" where no line of yours did). ``by="line"``: summed per line
        (``device, cell, file, line, source, blocks, bytes``); ``by="op"``: per outermost operator
        (``device, top_op, blocks, bytes``) (``nbprof.analysis.memory``). A block freed where the
        profiler did not record the free (between ``--schedule``'s active steps) counts as alive."""
        from .analysis.memory import ALIVE_BY, group_alive

        if by is not None and by not in ALIVE_BY:
            raise OptionError(f"by must be one of {', '.join(ALIVE_BY)} (or None: one row per block); got {by!r}")
        alive = self._alive_at_end.drop(columns="row")
        if by is None:
            return alive
        if by == "line" and "line" not in alive.columns:
            self._line_join  # raises the reason: recorded without --lines
        return group_alive(alive, by)

    @functools.cached_property
    def _alive_blocks(self) -> pd.DataFrame:
        """The blocks alive at the end with their ``row``, without lines (what ``lines()`` sums)."""
        from .analysis.memory import alive_at_end

        return alive_at_end(self._allocation_rows)

    @functools.cached_property
    def _alive_at_end(self) -> pd.DataFrame:
        """``alive_at_end()``'s blocks with their ``row`` and, where the profile has lines, each one's."""
        from .analysis.hot_lines import climbed_line_rows
        from .analysis.memory import alive_at_end

        try:
            table, own = self._line_join
        except OptionError:
            return self._alive_blocks
        return alive_at_end(self._allocation_rows, climbed_line_rows(own, self._events["parent"].to_numpy()), table)

    def memory_growth(self) -> pd.DataFrame:
        """Memory per step (``--memory``, and steps: ``ProfilerStep#N`` ranges, Lightning's training
        batches, or with ``--lines`` a loop of your code): one row per step and device, ``step,
        device, start_us, end_us, held_bytes, added_bytes, allocated_bytes,
        added_never_freed_bytes, never_freed_blocks`` (``nbprof.analysis.growth``);
        ``attrs["steps"]`` says what the steps are. Empty without steps or memory."""
        table = self._growth.copy(deep=False)
        table.attrs = dict(self._growth.attrs)
        return table

    @functools.cached_property
    def _step_windows(self) -> Any:
        from .analysis.growth import step_windows

        data = self.meta.line_data or {}
        return step_windows(self._events, self.meta, {**data.get("cells", {}), **self.meta.code_names})

    @functools.cached_property
    def _growth(self) -> pd.DataFrame:
        from .analysis.growth import growth_table

        steps = self._step_windows
        table = growth_table(self._events, self._allocation_rows, self._alive_blocks, steps)
        table.attrs = {"steps": steps.source if steps is not None else None}
        return table

    def alive_at(self, time_us: float, device: str = "cpu") -> pd.DataFrame:
        """The blocks of ``device`` held at ``time_us`` (µs since the profile start), biggest first;
        blocks allocated before the profile have no ``alloc_us``."""
        from .analysis.memory import alive_at

        return alive_at(self.allocations(), time_us, device)

    def kernels(self) -> pd.DataFrame:
        """One row per kernel (and memcpy / memset) name: calls, device time (total, mean, min,
        max, share), streams, the op that launched it most, and CUPTI's launch configuration
        (grid, block, registers, shared memory, blocks per SM, est. occupancy;
        ``nbprof.analysis.kernels``). What the Kernels tab shows."""
        return self._kernels.copy(deep=False)

    @functools.cached_property
    def _kernels(self) -> pd.DataFrame:
        from .analysis.kernels import kernel_table

        return kernel_table(self._events)

    def compilation(self) -> Any:
        """What torch.compile did: compile time per compilation and phase, the caches, graph breaks
        and recompiles with their reasons and source lines, the fused kernels that ran with the ATen
        ops and source lines they came from, and time by source line (``nbprof.analysis.compilation``:
        ``.frames``, ``.phases``, ``.graph_breaks``, ``.recompiles``, ``.per_frame``, ``.kernels``,
        ``.lines``). What the Compile tab shows."""
        return self._compilation

    @functools.cached_property
    def _compilation(self) -> Any:
        from .analysis.compilation import compilation

        return compilation(self._events, self.meta.compile_log, self.meta.code_names)

    def steps(self) -> pd.DataFrame:
        """One row per recorded step of a ``--schedule`` loop (``nbprof.analysis.steps``)."""
        return self._steps.copy(deep=False)

    @functools.cached_property
    def _steps(self) -> pd.DataFrame:
        from .analysis.steps import steps

        return steps(self._events, self.meta)

    def overview(self) -> pd.DataFrame:
        """Where each step's time went (the TensorBoard plugin's overview): one row per step and a
        row ``step == "all"``; ``kernel_us, memcpy_us, memset_us, runtime_us, dataloader_us,
        cpu_exec_us, other_us`` add up to ``duration_us`` (``nbprof.analysis.overview``)."""
        return self._overview.copy(deep=False)

    @functools.cached_property
    def _overview(self) -> pd.DataFrame:
        from .analysis.overview import overview

        return overview(self._events)

    def modules(self) -> pd.DataFrame:
        """The ``nn.Module`` hierarchy (``--modules``): one row per module path, in tree order, with
        its calls, CPU and device time, total and self (``nbprof.analysis.modules``)."""
        return self._modules.copy(deep=False)

    @functools.cached_property
    def _modules(self) -> pd.DataFrame:
        from .analysis.modules import module_tree

        return module_tree(self._events)

    def step_breakdown(self, by: str = "op", metric: str | None = None) -> pd.DataFrame:
        """The steps side by side: one row per op (``by="op"``), label (``"range"``) or kernel
        (``"kernel"``), one column per step."""
        from .analysis.steps import step_breakdown

        return step_breakdown(self._events, by=by, metric=metric)

    def ranks(self) -> Any:
        """Per-rank comparison of a profile merged from several ranks (``load_trace(folder)``):
        ``.table``, ``.slowest``, ``.imbalance``, ``.differences`` (``nbprof.analysis.ranks``)."""
        return self._ranks

    @functools.cached_property
    def _ranks(self) -> Any:
        from .analysis.ranks import rank_report

        table, idle = self._rank_parts
        return rank_report(self._events, self.meta, self.device_stats, table=table, idle=idle)

    @functools.cached_property
    def _rank_parts(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The ranks table and its per-stream HTA idle table: what ``ranks()``, the findings and a
        folder's worker share, computed once (device stats too); without ``ranks()``'s differences
        between ranks, which a worker's one rank has none of."""
        from .analysis.breakdown import hta_idle_table
        from .analysis.device_stats import process_codes
        from .analysis.ranks import rank_table

        rank, _ = process_codes(self._events)
        idle = hta_idle_table(self._events, rank)
        return rank_table(self._events, self.meta, self.device_stats, idle, windows=self._windows), idle

    def collectives(self) -> pd.DataFrame:
        """One row per rank, collective and process group: count, total_us, mean_us, max_us, bytes
        (``nbprof.analysis.collectives``). What the Ranks tab's Cluster section shows."""
        return self._collectives.copy(deep=False)

    @functools.cached_property
    def _collectives(self) -> pd.DataFrame:
        from .analysis.collectives import collective_table

        return collective_table(self._events)

    def launches(self) -> pd.DataFrame:
        """One row per kernel (memcpy, memset) launch: its runtime call, cpu_dur_us, gpu_dur_us,
        launch_delay_us (``nbprof.analysis.launches``)."""
        return self._launches.copy(deep=False)

    @functools.cached_property
    def _launches(self) -> pd.DataFrame:
        from .analysis.launches import launch_table

        return launch_table(self._events)

    def queue_length(self) -> pd.DataFrame:
        """Per (rank,) device and stream: the launched work not finished yet, its time-weighted
        mean and its max (``nbprof.analysis.launches``)."""
        return self._queue_length.copy(deep=False)

    @functools.cached_property
    def _queue_length(self) -> pd.DataFrame:
        from .analysis.launches import queue_table

        return queue_table(self._events)

    @property
    def device_stats(self) -> Any:
        """Per device: busy fraction over the profiled span, peak allocated / reserved memory;
        per stream: busy time (``nbprof.analysis.device_stats``)."""
        return self._device_stats

    @functools.cached_property
    def _device_stats(self) -> Any:
        from .analysis.device_stats import device_stats

        return device_stats(self._events, self.meta, windows=self._windows)

    @functools.cached_property
    def _windows(self) -> pd.DataFrame:
        """The recorded stretches of time (``analysis.device_stats.profiled_windows``): what device
        stats, the ranks table and the findings measure spans over, computed once."""
        from .analysis.device_stats import profiled_windows

        return profiled_windows(self._events, self.meta)

    def __repr__(self) -> str:
        s = self.summary
        parts = [plural(s.events, "event"), f"self CPU {s.self_cpu_us / 1e3:.3f} ms"]
        if s.has_device:
            parts.append(f"self CUDA {s.self_device_us / 1e3:.3f} ms")
        return f"<TorchProfile {', '.join(parts)}>"


class _RawStats:
    """What ``pstats.Stats`` accepts as a profile: an object with ``create_stats`` and ``stats``."""

    def __init__(self, raw: dict[Any, Any]) -> None:
        self.stats = raw

    def create_stats(self) -> None:
        pass


class PythonProfile(_DataLoaders):
    """A cProfile profile: the stats table (what pstats prints), its call graph, views, exports."""

    kind = "python"

    def __init__(self, raw: dict[Any, Any], meta: PythonMeta | None = None, *, profiler: Any = None,
                 by_action: dict[str, dict[Any, Any]] | None = None, action_counts: dict[str, int] | None = None,
                 lines: pd.DataFrame | None = None):
        self._raw = raw
        self._lines = lines  # --lines: one row per line of the user's code that ran
        self.meta = meta if meta is not None else PythonMeta()
        self.profiler = profiler
        self._trees: dict[tuple[float, int, tuple[str, int, str] | None], pd.DataFrame] = {}
        # a framework's actions (Lightning's hooks): each one's raw stats, how many times it began
        self._by_action = by_action or {}
        self._action_counts = action_counts or {}

    # The tables are built on first use: a quiet run (``-q -o prof``) keeps cProfile's raw dict
    # and costs nothing more until the tables are looked at.

    @functools.cached_property
    def _stats(self) -> pd.DataFrame:
        return stats_table(self._raw)

    @functools.cached_property
    def _edges(self) -> pd.DataFrame:
        """The caller -> callee edges."""
        return edges_table(self._raw)

    @property
    def stats(self) -> pd.DataFrame:
        """``function, filename, lineno, ncalls, primitive_calls, tottime_s, cumtime_s,
        tottime_per_call_s, cumtime_per_call_s``: equal to pstats for the same run."""
        return self._stats.copy(deep=False)

    @property
    def edges(self) -> pd.DataFrame:
        """Every caller -> callee edge with its calls and times."""
        return self._edges.copy(deep=False)

    @property
    def pstats(self) -> pstats.Stats:
        return pstats.Stats(_RawStats(self._raw))  # type: ignore[arg-type]  # pstats duck-types its input

    def _main_calls(self) -> int | None:
        return int(self._stats["ncalls"].sum()) if len(self._stats) else None

    @property
    def total_s(self) -> float:
        """Total time the profile measured (pstats' "in N seconds")."""
        return float(self._stats["tottime_s"].sum())

    def callers(self, fn: Any) -> pd.DataFrame:
        """Who called ``fn`` (a name, ``"file:line(name)"`` or a function object), with the calls
        and time of each edge."""
        from .analysis.callgraph import callers

        return callers(self._stats, self._edges, fn)

    def callees(self, fn: Any) -> pd.DataFrame:
        """What ``fn`` called, with the calls and time of each edge."""
        from .analysis.callgraph import callees

        return callees(self._stats, self._edges, fn)

    def call_tree(self, *, min_fraction: float = 0.005, max_nodes: int = 2000, root: Any = None) -> pd.DataFrame:
        """The call tree behind the flame view, one row per box (see ``nbprof.analysis.flame``):
        ``id, parent, name, label, filename, lineno, function, value_s, self_s, ncalls, depth,
        recursive, kind, family, package``. The root (``"cell"``, or a file's name) holds the time
        spent inside the functions the cell called; children worth less than ``min_fraction`` of
        it are merged into "other" boxes, and the tree has at most ``max_nodes`` rows. ``root``: a
        function (as ``callers`` takes it): the tree of that function only, its whole cumtime,
        as snakeviz draws a function picked in its table."""
        from .analysis.callgraph import match_function
        from .analysis.flame import call_tree

        focus = None if root is None else match_function(self._stats, root)
        key = (float(min_fraction), int(max_nodes), focus)
        if key not in self._trees:
            # a file's tree is rooted at the file (its top-level calls: python -m cProfile's exec)
            files = self.meta.files
            label = (f"{len(files)} files" if len(files) > 1 else os.path.basename(self.meta.source)) \
                if self.meta.source else "cell"
            self._trees[key] = call_tree(self._stats, self._edges, min_fraction=key[0], max_nodes=key[1],
                                         root_label=label, code_names=self.meta.code_names, focus=focus)
        return self._trees[key].copy(deep=False)

    def flame(self, *, min_fraction: float = 0.005, max_nodes: int = 2000, maxdepth: int = 6,
              height: int | None = None, title: str | None = None, root: Any = None) -> Any:
        """The flame view: a plotly icicle of :meth:`call_tree`, sized by cumulative time; click a
        box to zoom in; its buttons draw the same tree as a sunburst. ``root``: one function's
        tree (see :meth:`call_tree`). A plotly ``Figure`` that renders itself (plotly where the
        front end draws it, a static SVG elsewhere; no plotly renderer setup needed)."""
        from .views.flame import flame_figure

        tree = self.call_tree(min_fraction=min_fraction, max_nodes=max_nodes, root=root)
        return flame_figure(tree, maxdepth=maxdepth, height=height, title=title)

    def actions(self) -> pd.DataFrame:
        """The framework actions the calls ran under (Lightning's hooks, when Lightning ran in the
        profiled code): ``action, count, calls, functions, tottime_s, share_of_total,
        top_function``, one row per action and one for the code outside them; empty when no
        action was reported (``nbprof.analysis.actions``)."""
        return self._actions.copy(deep=False)

    @functools.cached_property
    def _actions(self) -> pd.DataFrame:
        from .analysis.actions import ACTION_COLUMNS, actions_table

        if not self._by_action:
            return pd.DataFrame({c: [] for c in ACTION_COLUMNS})
        return actions_table(self._action_stats, self._action_counts)

    def action_stats(self, action: str | None = None) -> pd.DataFrame:
        """The stats table (as ``stats``) of the calls made under each action, with an ``action``
        column first; ``action``: only that one (its name, or a part of it that names one action,
        such as ``"training_step"``). Summed over the actions, a function's calls are ``stats``'."""
        frame = self._action_stats
        if action is None:
            return frame.copy(deep=False)
        names = list(dict.fromkeys(frame["action"]))
        if action not in names:
            matches = [n for n in names if action in n]
            if len(matches) != 1:
                which = f"{len(matches)} actions contain it: {', '.join(matches[:5])}" if matches else \
                    f"the actions are: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}"
                raise OptionError(f"no single action {action!r}; {which}")
            action = matches[0]
        return frame[frame["action"] == action].reset_index(drop=True)

    @functools.cached_property
    def _action_stats(self) -> pd.DataFrame:
        from .analysis.actions import action_stats

        return action_stats(self._by_action)

    def lines(self) -> pd.DataFrame:
        """Hits and time per line of the user's code (``--lines``): ``cell`` ("In [4]", None for a
        file), ``file``, ``line`` (as the cell shows it: the magic line is 1), ``function``
        (``<module>``: the cell's or file's top level), ``function_line`` (its first line),
        ``source`` (the line's text), ``hits``, ``time_us`` (wall time from the line's start to the
        next line of its frame: what it called included, as line_profiler counts), ``per_hit_us``,
        ``self_time_us`` (``time_us`` without the lines of the user's code it called: the lines'
        own times add up to the run's wall time); one row per line that ran, in the code's order. The files' full texts are in
        ``meta.sources``. Empty when lines were not followed (``nbprof.collect.python_line_recorder``)."""
        if self._lines is None:
            from .collect.python_lines import empty_line_table

            return empty_line_table()
        return self._lines.copy(deep=False)

    def to_html(self, path: str | os.PathLike, title: str | None = None) -> str:
        """Write the report as one HTML file that opens offline."""
        from .views.page import write_standalone_html

        return write_standalone_html(self, path, title)

    def dump(self, path: str | os.PathLike) -> str:
        """Write a ``.prof`` file (``pstats``, snakeviz and gprof2dot open it)."""
        path = os.fspath(path)
        with open(path, "wb") as f:
            marshal.dump(self._raw, f)
        return path

    def report(self, **view: Any) -> Any:
        from .views.report import PythonReport

        return PythonReport(self, **view)

    def _ipython_display_(self) -> None:
        """In IPython: the report, then the zoomable flame view as an output of its own."""
        from IPython.display import display

        display(self.report())
        if len(self._stats):
            display(self.flame())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.report()._repr_mimebundle_(include, exclude)

    # -- analyses (issue 7) ------------------------------------------------------------------------

    @property
    def findings(self) -> pd.DataFrame:
        """What the profile says: ``kind, severity, message, evidence`` (``top_function``,
        ``hot_function``; see ``nbprof.analysis.findings``)."""
        return self._findings.copy(deep=False)

    @functools.cached_property
    def _findings(self) -> pd.DataFrame:
        from .analysis.findings import python_findings

        return python_findings(self)

    def __repr__(self) -> str:
        calls = int(self._stats["ncalls"].sum())
        return f"<PythonProfile {plural(calls, 'call')} in {self.total_s:.3f} s, {plural(len(self._stats), 'function')}>"
