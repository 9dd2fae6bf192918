"""A folder of ranks (one trace per rank, as torchrun + ``tensorboard_trace_handler`` write it):
:class:`ClusterProfile`, what ``nbprof.load_trace(folder)`` returns for two or more trace files,
its tables merged from the ranks' summaries.

Why not merge every event into one table, as before: 8 ranks x 1.07 M events took 76 s (13.7x
one rank's 5.6 s) and peaked at 5.3 GB in the notebook process, and 64 ranks did not fit a 24 GB
machine. Each rank is read by ``cluster.summary.rank_summary`` in a worker (a process of this
machine, or a Dask worker: ``cluster.loading``, ``cluster.workers``), which sends back a
``RankSummary``: the numbers the merged report shows, summed so that they add up across ranks
(key averages per operator, the kernel table's parts, per-name counts and times, steps, device
stats, findings), never the events. The notebook process holds one summary per rank (tens of
kB), whatever the number of ranks.

Every per-rank table comes from the one function ``rank_summary``; a new per-rank analysis is a
field there and its merge here. The report has every tab a rank has (docs/clusters.md): key
averages by operator, input shape and stack, ranges, modules, lines of the user's code summed over
the ranks; memory per rank (each rank's chart points, peaks and blocks held at them:
``analysis.memory.MemorySummary``). ``p.rank(r)`` loads one rank's full profile (every view works
on it; the last one is kept). The timeline is drawn from each rank's view computed in its worker
and zooms ask the workers again (``nbprof.cluster.timeline``): no events here either. What needs
every event (``p.events``, allocations, launches, exports) merges all ranks on first use, as
``load_trace`` did before, and says so.

Times: each rank's own clock, moved onto the common one by the difference of the ranks' time
origins (as ``events.concat_traces`` moves the events of a merge); ranks that were not recorded on
one clock (their first events days, or decades, apart) each keep their own (:func:`rank_clocks`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import weakref
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..analysis._tables import empty_table
from ..analysis.device_stats import DeviceStats
from ..analysis.findings import FINDING_COLUMNS, FINDING_DTYPES, SEVERITIES, collective_wait, straggler
from ..analysis.key_averages import GROUP_BY, KEY_AVERAGE_COLUMNS
from ..analysis.kernels import kernels_from_parts
from ..analysis.memory import MemorySummary
from ..analysis.modules import merge_modules
from ..analysis.ranges import merge_range_ops, merge_ranges
from ..analysis.ranks import RankReport, differences_from_times, report_of
from ..analysis.steps import STEP_DTYPES
from ..analysis.summary import TorchSummary, default_sort, top_row
from ..collect.trace_ranks import labels_of  # each file's rank: the rule a saved merged trace is read back by
from ..errors import OptionError
from ..format import fmt_long_span, plural
from ..meta import TorchMeta
from ..model import TorchProfile
from .summary import RankSummary
from .timeline import ClusterTimeline, ClusterTimelineView, remove_cache
from .workers import RankPool

__all__ = ["ClusterProfile", "labels_of", "rank_clocks", "CLOCKS_APART_US"]

# Ranks whose first events are further apart than this on their traces' clocks were not recorded on
# one clock (``rank_clocks``): as the reader's rule for events a day away from all the others.
CLOCKS_APART_US = 86_400e6

# The evidence key that names what a finding is about, in the order looked for: the findings of
# several ranks about the same subject (kind and subject) are one line.
_SUBJECT_KEYS = ("op", "kernel", "name", "device", "direction", "label")


# -- the profile ----------------------------------------------------------------------------------


def rank_clocks(summaries: list[RankSummary], origin_ns: int) -> tuple[list[float], str | None]:
    """How far each rank's times move onto the folder's clock (µs), and the note that says how.

    The ranks of one run are recorded on one clock (the traces' own: a steady clock, or the Unix
    epoch), as ``events.concat_traces`` puts them: each moved by its time origin's distance from the
    earliest, their first events seconds apart at most. Ranks whose first events are more than
    :data:`CLOCKS_APART_US` apart on it were not (traces of other machines, other runs: clocks
    since boot beside the epoch put decades between them, and a folder "spanning" 52 years says
    nothing): each keeps its own clock, from its first event, with a note."""
    recorded = [(s.meta.origin_ns - origin_ns) / 1000.0 for s in summaries]
    firsts = [s.start_us + shift for s, shift in zip(summaries, recorded) if s.events]
    if not firsts or max(firsts) - min(firsts) <= CLOCKS_APART_US:
        return recorded, None
    note = (f"the ranks were not recorded on one clock (their first events are {fmt_long_span(max(firsts) - min(firsts))} "
            "apart): each rank's times are its own, from its first event")
    return [-s.start_us for s in summaries], note


class ClusterProfile(TorchProfile):
    """A folder of ranks, summarized apart (see the module doc): the merged report's tables
    (``ranks()``, ``key_averages(group_by)``, ``kernels()``, ``steps()``, ``overview()``,
    ``ranges()``, ``range_ops()``, ``modules()``, ``lines()``, ``rank_memory()``, ``memory_curve()``,
    ``alive_at_end()``, ``memory_growth()``,
    ``collectives()``, ``collective_calls()``, ``queue_length()``, ``device_stats``, ``findings``,
    ``summary``) from the ranks' summaries; ``timeline()`` / ``timeline_view()``: every rank's lanes
    on one clock, drawn from the views the workers computed, zooms read by the workers
    (``nbprof.cluster.timeline``); ``rank(r)``: one rank's full profile; what needs every event
    (``events``, ``allocations()``, ``launches()`` (a row per launch), exports) merges all ranks on
    first use.

    ``workers`` / ``client``: where the timeline's zooms run (as the ranks were read: ``plan``);
    ``limit``: ``read_trace_file``'s ``max_bytes``, for the ranks read again."""

    def __init__(self, folder: str, summaries: list[RankSummary], *, workers: int = 0, client: Any = None,
                 limit: Any = None) -> None:
        self._summaries = summaries
        self._limit = limit  # read_trace_file's max_bytes, for the ranks read again here
        self._labels = labels_of([s.meta for s in summaries])
        metas = [s.meta for s in summaries]
        origin = min(m.origin_ns for m in metas)
        self._shift_us, clock_note = rank_clocks(summaries, origin)
        first = metas[0]
        trace = dataclasses.replace(
            first, origin_ns=origin, source=folder, files=[s.file for s in summaries],
            record_shapes=any(m.record_shapes for m in metas), profile_memory=any(m.profile_memory for m in metas),
            with_stack=any(m.with_stack for m in metas), with_flops=any(m.with_flops for m in metas),
            parts=metas, line_data=None,  # lines(): the ranks' tables summed
            sources={f: text for m in reversed(metas) for f, text in m.sources.items()},  # the first rank's text wins
            reader_notes=[f"{os.path.basename(m.source)}: {note}" for m in metas for note in m.reader_notes],
        )
        notes = [f"{os.path.basename(s.file)}: {note}" for s in summaries for note in s.notes]
        self.meta = TorchMeta.of(trace, notes=([clock_note] if clock_note else []) + notes)
        self.profiler = None
        self._averages: dict[str, pd.DataFrame] = {}
        self._one: tuple[Any, TorchProfile] | None = None
        self._pool = RankPool(workers, client)  # the timeline's views and zooms
        self._views: dict[Any, ClusterTimelineView] = {}
        roots = {os.path.dirname(s.timeline.cache) for s in summaries if s.timeline.cache}
        # the caches and the zoom workers go with the profile (or at exit)
        self._finalizer = weakref.finalize(self, _release, self._pool, sorted(roots), client)

    @classmethod
    def from_trace(cls, trace: Any, *, profiler: Any = None, **run: Any) -> TorchProfile:
        """One trace is one rank's profile: a plain :class:`TorchProfile`."""
        return TorchProfile.from_trace(trace, profiler=profiler, **run)

    @property
    def rank_labels(self) -> list[Any]:
        """The ranks, in the folder's file order (what ``rank(r)`` takes)."""
        return list(self._labels)

    @property
    def rank_summaries(self) -> list[RankSummary]:
        """Each rank's summary (what its worker sent back), in the order of ``rank_labels``."""
        return list(self._summaries)

    def rank(self, r: Any) -> TorchProfile:
        """Rank ``r``'s full profile, read from its file (the last one asked for is kept)."""
        if r not in self._labels:
            raise OptionError(f"no rank {r!r} in this profile; its ranks: {_ranges(self._labels)}")
        if self._one is None or self._one[0] != r:
            from ..collect.chrome_trace import read_trace_file

            self._one = None  # the previous rank's events go before the next one's are read
            self._one = (r, TorchProfile.from_trace(read_trace_file(self._summaries[self._labels.index(r)].file,
                                                                    max_bytes=self._limit)))
        return self._one[1]

    # -- every event, merged on demand ------------------------------------------------------------

    @functools.cached_property
    def _merged(self) -> TorchProfile:
        from ..collect.chrome_trace import read_trace_file
        from ..events import concat_traces

        n = sum(s.events for s in self._summaries)
        print(f"nbprof: merging all {len(self._summaries)} ranks' events ({n:,}) into this process, as asked "
              "(p.rank(r) reads one rank)", file=sys.stderr)
        traces = [read_trace_file(s.file, max_bytes=self._limit) for s in self._summaries]
        # on the folder's clock: where its views put each rank (its own clock when they were not on one)
        merged = concat_traces(traces, labels=self._labels, label_column="rank", shifts_us=self._shift_us)
        merged.meta.source = self.meta.source
        merged.meta.files = list(self.meta.files)
        # no one rank's events: no rank (each rank's own is in meta.parts), the world's size where they agree
        sizes = {t.meta.world_size for t in traces}
        merged.meta.rank, merged.meta.world_size = None, (sizes.pop() if len(sizes) == 1 else None)
        return TorchProfile.from_trace(merged)

    @functools.cached_property
    def _events(self) -> pd.DataFrame:  # read on first use, not given
        return self._merged._events

    def to_chrome_trace(self, path: str | os.PathLike) -> str:
        return self._merged.to_chrome_trace(path)

    # -- tables from the summaries ----------------------------------------------------------------

    def key_averages(self, group_by: str = "op", *, per_rank: bool = False) -> pd.DataFrame:
        """Totals over the ranks (counts and times summed, averages recomputed), one row per
        operator (``"op"``), operator and input shape (``"shape"``) or operator and Python stack
        (``"stack"``), from the ranks' summaries; ``per_rank=True``: one row per rank and key (a
        ``rank`` column first)."""
        if group_by not in GROUP_BY:
            raise OptionError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
        if per_rank:
            frames = [_rank_averages(s, group_by) for _, s, _ in self._ranked()]
            out = pd.concat([f.assign(rank=r)[["rank", *f.columns]] for (r, _, _), f in zip(self._ranked(), frames)],
                            ignore_index=True)
            out["rank"] = out["rank"].astype(object)
            return out
        if group_by not in self._averages:
            self._averages[group_by] = _sum_averages([_rank_averages(s, group_by) for s in self._summaries])
        return self._averages[group_by].copy(deep=False)

    # -- the views every rank has, summed (or each rank's: memory) --------------------------------

    @functools.cached_property
    def _ranges(self) -> pd.DataFrame:
        return merge_ranges([(s.ranges, s.range_span_us, shift) for s, shift in zip(self._summaries, self._shift_us)
                             if s.ranges is not None])

    @functools.cached_property
    def _range_ops(self) -> pd.DataFrame:
        return merge_range_ops([s.range_ops for s in self._summaries if s.range_ops is not None],
                               self._ranges["path"])

    @functools.cached_property
    def _modules(self) -> pd.DataFrame:
        return merge_modules([(s.modules, shift) for s, shift in zip(self._summaries, self._shift_us)
                              if s.modules is not None])

    def ranges(self, *, per_rank: bool = False) -> pd.DataFrame:
        """The ``record_function`` ranges summed over the ranks (counts, times, device work; min and
        max over every instance; shares of the ranks' spans summed), from the summaries;
        ``per_rank=True``: each rank's own table, a ``rank`` column first."""
        if per_rank:
            return self._per_rank_table(lambda s: None if s.ranges is None else s.ranges.drop(columns="first_us"),
                                        self._ranges)
        return self._ranges.copy(deep=False)

    def modules(self, *, per_rank: bool = False) -> pd.DataFrame:
        """The ``nn.Module`` tree summed over the ranks (calls and times per module path), from the
        summaries; ``per_rank=True``: each rank's own tree, a ``rank`` column first."""
        if per_rank:
            return self._per_rank_table(lambda s: None if s.modules is None else s.modules.drop(columns="first_us"),
                                        self._modules)
        return self._modules.copy(deep=False)

    @functools.cached_property
    def _lines(self) -> pd.DataFrame:
        from ..analysis.lines import merge_lines

        tables = [s.lines for s in self._summaries if s.lines is not None]
        if not tables:
            raise OptionError("no rank of this folder has lines: record them with %%torchprof --lines "
                              "(or with_stack=True)")
        table = merge_lines(tables)
        methods = {t.attrs.get("method") for t in tables}
        table.attrs = {"method": methods.pop() if len(methods) == 1 else "mixed",
                       "notes": list(dict.fromkeys(n for t in tables for n in t.attrs.get("notes", [])))}
        return table

    def lines(self, *, per_rank: bool = False) -> pd.DataFrame:
        """The lines of your code summed over the ranks that have line data (ops, times and bytes
        per ``cell, file, line, function, function_line, source``; the "(outside your code)" rows
        into one), the columns of ``TorchProfile.lines()``, from the summaries; ``per_rank=True``:
        each rank's own table, a ``rank`` column first."""
        table = self._lines
        if per_rank:
            return self._per_rank_table(lambda s: s.lines, table)
        out = table.copy(deep=False)
        out.attrs = dict(table.attrs)
        return out

    def _per_rank_table(self, part: Callable[[RankSummary], pd.DataFrame | None], empty: pd.DataFrame) -> pd.DataFrame:
        frames = [f.assign(rank=r) for r, s, _ in self._ranked() if (f := part(s)) is not None and len(f)]
        if not frames:
            out = empty.iloc[0:0].assign(rank=pd.Series(dtype=object))
        else:
            out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        return out[["rank", *[c for c in out.columns if c != "rank"]]]

    def rank_memory(self) -> pd.DataFrame:
        """Each rank's memory peaks, one row per rank and device: ``rank, device,
        peak_allocated_bytes, peak_time_us`` (on the common clock), ``peak_op,
        peak_reserved_bytes, start_allocated_bytes``; ranks that recorded no memory have none.
        The Memory tab draws every rank's curve and each rank's own tab; ``p.rank(r)`` has every
        block."""
        rows = [(r, pk.device, pk.peak_allocated_bytes, pk.peak_time_us + shift, pk.peak_op, pk.peak_reserved_bytes,
                 pk.start_allocated_bytes)
                for r, s, shift in self._ranked() if s.memory is not None for pk in s.memory.peaks]
        out = pd.DataFrame(rows, columns=["rank", "device", "peak_allocated_bytes", "peak_time_us", "peak_op",
                                          "peak_reserved_bytes", "start_allocated_bytes"])
        out["rank"] = out["rank"].astype(object)
        for c in ("peak_allocated_bytes", "peak_reserved_bytes", "start_allocated_bytes"):
            out[c] = out[c].astype(np.int64)
        out["peak_time_us"] = out["peak_time_us"].astype(np.float64)
        return out

    def alive_at_end(self, by: str | None = None) -> pd.DataFrame:
        """Each rank's blocks left allocated at its end (``TorchProfile.alive_at_end``'s columns, a
        ``rank`` column first, times on the common clock), from the summaries; ``by="line"`` /
        ``"op"``: summed per rank and line or operator."""
        from ..analysis.memory import ALIVE_BY, group_alive

        if by is not None and by not in ALIVE_BY:
            raise OptionError(f"by must be one of {', '.join(ALIVE_BY)} (or None: one row per block); got {by!r}")
        out = self._alive_at_end
        if by is None:
            return out.copy(deep=False)
        if by == "line" and "line" not in out.columns:
            raise OptionError("no rank of this folder has lines: record them with %%torchprof --lines")
        return group_alive(out, by)

    @functools.cached_property
    def _alive_at_end(self) -> pd.DataFrame:
        from ..analysis.memory import ALLOCATION_DTYPES
        from ..analysis._tables import empty_table

        frames = [m.alive.assign(rank=r, alloc_us=m.alive["alloc_us"] + shift)
                  for r, m, shift in self._memory_by_rank() if m is not None and len(m.alive)]
        if not frames:
            return empty_table(ALLOCATION_DTYPES)
        out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        out = out[["rank", *[c for c in out.columns if c not in ("rank", "row")]]]
        return out.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)

    @functools.cached_property
    def _growth(self) -> pd.DataFrame:
        """Each rank's ``memory_growth()`` (a ``rank`` column after ``step``; times on the common
        clock), from the summaries."""
        from ..analysis._tables import empty_table
        from ..analysis.growth import GROWTH_COLUMNS, GROWTH_DTYPES

        frames, sources = [], []
        for r, m, shift in self._memory_by_rank():
            if m is not None and len(m.growth):
                frames.append(m.growth.assign(rank=r, start_us=m.growth["start_us"] + shift,
                                              end_us=m.growth["end_us"] + shift))
                sources.append(m.steps_from)
        columns = ["step", "rank", *GROWTH_COLUMNS[1:]]
        if not frames:
            out = empty_table(GROWTH_DTYPES, columns)
        else:
            out = pd.concat(frames, ignore_index=True)
            out["rank"] = out["rank"].astype(object)
            out = out[columns].sort_values(["rank", "start_us", "device"], kind="stable").reset_index(drop=True)
        kinds = list(dict.fromkeys(x for x in sources if x))
        out.attrs = {"steps": kinds[0] if len(kinds) == 1 else ("; ".join(kinds) or None)}
        return out

    def _memory_by_rank(self) -> list[tuple[Any, MemorySummary | None, float]]:
        """(rank, its ``MemorySummary`` or None, the shift of its clock in µs), in rank order: what
        the Memory tab draws."""
        return [(r, s.memory, shift) for r, s, shift in self._ranked()]

    @functools.cached_property
    def _every_rank_memory(self) -> MemorySummary:
        """Every rank's chart points and peaks on the common clock, one "device" per rank and
        device ("rank 1 · cpu"): the Memory tab's chart of every rank, ``memory_curve()``."""
        curves, peaks = [], []
        end = 0.0
        for r, m, shift in self._memory_by_rank():
            if m is None:
                continue
            end = max(end, m.end_us + shift)
            curves.append(m.curve.assign(device=[f"rank {r} · {d}" for d in m.curve["device"]],
                                         time_us=m.curve["time_us"] + shift))
            peaks += [dataclasses.replace(pk, device=f"rank {r} · {pk.device}", peak_time_us=pk.peak_time_us + shift)
                      for pk in m.peaks]
        curve = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(
            columns=["device", "time_us", "allocated_bytes", "reserved_bytes", "delta_bytes", "op"])
        return MemorySummary(curve, peaks, end, [])

    def memory_curve(self) -> Any:
        """Every rank's allocated (and reserved) memory over time, one curve per rank and device on
        the common clock: a plotly ``Figure``, drawn from the points the ranks' workers sent (the
        chart's resolution; ``p.rank(r).memory_curve()`` has every memory event)."""
        from ..views.memory import memory_curve_figure

        m = self._every_rank_memory
        return memory_curve_figure(m.curve, m.end_us, peaks=m.peaks)

    @functools.cached_property
    def _summary(self) -> TorchSummary:
        ss = [s.summary for s in self._summaries]
        averages = self.key_averages("op")
        has_device = any(s.has_device for s in ss)
        self_cpu = float(averages["self_cpu_us"].sum()) if len(averages) else 0.0
        self_device = float(sum(s.self_device_us for s in ss))
        sort = self.meta.sort or default_sort(has_device)
        top = top_row(averages, sort, self_cpu, self_device)
        starts = [s.start_us + d for s, d in zip(self._summaries, self._shift_us) if s.events]
        ends = [s.end_us + d for s, d in zip(self._summaries, self._shift_us) if s.events]
        alloc: dict[str, int] = {}
        reserved: dict[str, int] = {}
        for s in ss:
            for dev, v in s.peak_allocated_bytes.items():
                alloc[dev] = max(alloc.get(dev, v), v)
            for dev, v in s.peak_reserved_bytes.items():
                reserved[dev] = max(reserved.get(dev, v), v)
        return TorchSummary(
            events=sum(s.events for s in ss), span_us=(max(ends) - min(starts)) if starts else 0.0,
            self_cpu_us=self_cpu, self_device_us=self_device, has_device=has_device,
            has_memory=any(s.has_memory for s in ss), sort=sort, top_name=top[0], top_value=top[1],
            top_share=top[2], peak_allocated_bytes=alloc, peak_reserved_bytes=reserved)

    @functools.cached_property
    def _kernels(self) -> pd.DataFrame:
        return kernels_from_parts(pd.concat([s.kernel_parts for s in self._summaries], ignore_index=True))

    @functools.cached_property
    def _steps(self) -> pd.DataFrame:
        frames = []
        for r, s, shift in self._ranked():
            if len(s.steps):
                f = s.steps.assign(start_us=s.steps["start_us"] + shift)
                f.insert(1, "rank", r)
                frames.append(f)
        if not frames:
            columns = list(self._summaries[0].steps.columns)
            columns.insert(1, "rank")
            return empty_table(STEP_DTYPES, columns)
        out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        return out.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)

    def step_breakdown(self, by: str = "op", metric: str | None = None) -> pd.DataFrame:
        """The steps side by side, one column per (rank, step); by op and self CPU time (what the
        Steps tab shows) from the summaries, other choices from every event (merged on first use)."""
        if by != "op" or metric not in (None, "self_cpu_us"):
            return super().step_breakdown(by, metric)
        parts = {r: s.step_breakdown for r, s, _ in self._ranked() if len(s.step_breakdown.columns)}
        if not parts:  # no steps: the empty table, with the (rank, step) columns of several ranks
            table = self._summaries[0].step_breakdown.copy()
            none = np.zeros(0, dtype=np.int64)
            table.columns = pd.MultiIndex.from_arrays([none, none], names=["rank", "step"])
            return table
        table = pd.concat(parts, axis=1, names=["rank", "step"]).fillna(0.0).sort_index(axis=1)
        total = table.sum(axis=1)
        table = table.iloc[np.lexsort((table.index.to_numpy().astype(str), -total.to_numpy()))]
        table.index.name = "name"
        return table

    @functools.cached_property
    def _device_stats(self) -> DeviceStats:
        def joined(part: Callable[[RankSummary], pd.DataFrame]) -> pd.DataFrame:
            frames = [part(s).assign(rank=r) for r, s, _ in self._ranked()]
            out = pd.concat(frames, ignore_index=True)
            out["rank"] = out["rank"].astype(object)
            return out[["rank", *[c for c in out.columns if c != "rank"]]]

        return DeviceStats(devices=joined(lambda s: s.device_stats.devices),
                           streams=joined(lambda s: s.device_stats.streams))

    @functools.cached_property
    def _ranks(self) -> RankReport:
        table = pd.concat([s.rank_row.assign(rank=[r]) for r, s, _ in self._ranked()], ignore_index=True)
        table["rank"] = table["rank"].astype(object)
        codes = {r: i for i, r in enumerate(self._order())}
        # the kernels when some rank ran device work (as the merged events would say), else the ops
        device = any(s.summary.has_device for s in self._summaries)
        times = pd.concat([(s.device_times if device else s.cpu_times).assign(rank=codes[r])
                           for r, s, _ in self._ranked()], ignore_index=True)
        hta_idle = self._per_rank(lambda s: s.hta_idle)
        return report_of(table, differences_from_times(times, np.asarray(self._order(), dtype=object)), hta_idle)

    @functools.cached_property
    def _overview(self) -> pd.DataFrame:
        """The ranks' step rows (rank by rank, on the common clock), then their "all" rows, as the
        merged events' overview orders them."""
        frames = []
        for r, s, shift in self._ranked():
            f = s.overview.assign(start_us=s.overview["start_us"] + shift)
            f.insert(1, "rank", r)
            frames.append(f)
        out = pd.concat(frames, ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        is_all = (out["step"] == "all").to_numpy()
        return pd.concat([out[~is_all], out[is_all]], ignore_index=True)

    @functools.cached_property
    def _collectives(self) -> pd.DataFrame:
        return self._per_rank(lambda s: s.collectives)

    @functools.cached_property
    def _queue_length(self) -> pd.DataFrame:
        return self._per_rank(lambda s: s.queue_length)

    def _per_rank(self, part: Callable[[RankSummary], pd.DataFrame]) -> pd.DataFrame:
        """A per-rank table whose ``rank`` column (None in one rank's profile) is set to its label."""
        out = pd.concat([part(s).assign(rank=r) for r, s, _ in self._ranked()], ignore_index=True)
        out["rank"] = out["rank"].astype(object)
        return out

    @functools.cached_property
    def _findings(self) -> pd.DataFrame:
        rows: list[tuple[str, str, str, dict[str, Any]]] = [
            ("straggler", f.severity, f.message.strip(), f.evidence)
            for f in straggler.from_ranks(self.ranks(), has_device=self.summary.has_device)]
        # the kinds that compare ranks: from the merged tables (a rank alone never has them)
        rows += [("collective_wait", f.severity, f.message.strip(), f.evidence)
                 for f in collective_wait.from_tables(self.collectives(), self.ranks().table, self._order())]
        rows += _aggregate_findings([(r, s.findings, s.finding_scores) for r, s, _ in self._ranked()])
        order = {s: i for i, s in enumerate(SEVERITIES)}
        rows.sort(key=lambda row: order[row[1]])  # stable: the straggler first among equals
        return pd.DataFrame(rows, columns=list(FINDING_COLUMNS)) if rows else empty_table(FINDING_DTYPES)

    def _order(self) -> list[Any]:
        """The rank labels sorted (the order of the merged tables' rank rows)."""
        return sorted(self._labels)

    def _ranked(self) -> list[tuple[Any, RankSummary, float]]:
        """(label, summary, shift of its clock in µs) in rank order."""
        return sorted(zip(self._labels, self._summaries, self._shift_us), key=lambda x: x[0])

    # -- the timeline ---------------------------------------------------------------------------

    def _timeline(self, align: str | None = None) -> ClusterTimeline:
        ranks = [(r, s.timeline, shift) for r, s, shift in self._ranked()]
        return ClusterTimeline(ranks, self._pool, align=align, owner=self)

    def timeline_view(self, align: str | None = None) -> Any:
        """The timeline for display (the report's overview, the figure, the live widget), every
        rank's lanes on one clock: as recorded, or aligned on an event on every rank (``align``:
        ``"collective"``, the first collective call; or a name, e.g. ``"ProfilerStep#3"``)."""
        if align not in self._views:
            self._views[align] = ClusterTimelineView(self._timeline(align))
        return self._views[align]

    def timeline(self, *, python: bool = False, window_us: tuple[float, float] | None = None,
                 window: tuple[float, float] | None = None, max_rects: int | None = None,
                 height: int | None = None, align: str | None = None) -> Any:
        """Every rank's lanes (threads, streams) on one clock, a plotly ``Figure`` as a profile's
        ``timeline()``: each rank's view computed by its worker, ``window_us=(start_us, end_us)``
        (µs on the view's clock) read from each rank by the workers, in full detail. A
        collective's calls on every rank are joined, the rank that arrived last marked. ``align``:
        see :meth:`timeline_view`."""
        if python:
            raise OptionError("timeline(python=True) draws one rank's Python frames: p.rank(r).timeline(python=True)")
        if window is not None:
            if window_us is not None:
                raise OptionError("timeline: pass window_us=(start_us, end_us), not window= as well")
            window_us = (float(window[0]) * 1000.0, float(window[1]) * 1000.0)
        tl = self._timeline(align)
        if max_rects is not None:
            tl.max_rects = int(max_rects)
        view = ClusterTimelineView(tl, window_us=window_us, height=height)
        return view.figure

    def collective_calls(self) -> pd.DataFrame:
        """One row per collective call of every rank (from the summaries), joined per collective:
        ``rank, process_group, seq, name, start_us, dur_us`` (on the common clock, as recorded),
        ``ranks`` (ranks that made that call), ``last`` (this rank's call started last: the
        others waited for it), ``wait_us`` (how long before the last one it started), ``names``
        (``nbprof.analysis.collectives.match_calls``)."""
        return self._timeline().calls()

    def close(self) -> None:
        """End the timeline's zoom workers now (they end by themselves after a while idle; the next
        zoom starts them again)."""
        self._pool.close()

    # -- display ----------------------------------------------------------------------------------

    def report(self, **view: Any) -> Any:
        from ..views.report import ClusterReport

        return ClusterReport(self, **view)

    def _ipython_display_(self) -> None:
        """The report, then the timeline as an output of its own (live in a kernel), as a
        profile's; neither merges the ranks' events."""
        from IPython.display import display

        display(self.report())
        if self.summary.events:
            display(self.timeline_view().display_object())

    def __repr__(self) -> str:
        s = self.summary
        parts = [f"{len(self._summaries)} ranks", plural(s.events, "event"), f"self CPU {s.self_cpu_us / 1e3:.3f} ms"]
        if s.has_device:
            parts.append(f"self CUDA {s.self_device_us / 1e3:.3f} ms")
        return f"<ClusterProfile {', '.join(parts)}>"


def _release(pool: RankPool, roots: list[str], client: Any) -> None:
    pool.close()
    for root in roots:
        remove_cache(root, client)


def _rank_averages(s: RankSummary, group_by: str) -> pd.DataFrame:
    """A rank's key averages by ``group_by``: a rank that recorded no shapes (stacks) has its
    operators' rows with every shape ``[]`` (stack ""), as its events would group."""
    if group_by == "op":
        return s.key_averages
    column = "input_shapes" if group_by == "shape" else "stack"
    table = s.shape_averages if group_by == "shape" else s.stack_averages
    if table is not None:
        return table
    out = s.key_averages.copy()
    out.insert(1, column, pd.Series(np.full(len(out), "[]" if group_by == "shape" else "", dtype=object),
                                    index=out.index))
    return out


def _sum_averages(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Key averages of several ranks as one: counts and sums added per (name, [shape | stack],
    kind), in the order the rows first appear (rank by rank, as in the merged events), averages
    recomputed."""
    frame = pd.concat(frames, ignore_index=True)
    extra = [c for c in ("input_shapes", "stack") if c in frame.columns]
    columns = list(KEY_AVERAGE_COLUMNS)
    columns[1:1] = extra
    summed = [c for c in KEY_AVERAGE_COLUMNS if c not in ("name", "kind", "cpu_avg_us", "device_avg_us")]
    out = frame.groupby(["name", *extra, "kind"], sort=False, dropna=False)[summed].sum().reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["cpu_avg_us"] = out["cpu_total_us"] / out["count"]
        out["device_avg_us"] = out["device_total_us"] / out["count"]
    out["name"] = out["name"].astype(object)
    for c in extra:  # the dtype pandas gives a rank's own table (str where pandas infers strings)
        out[c] = pd.Series(out[c].to_numpy(dtype=object), index=out.index)
    return out[columns]


def _aggregate_findings(per_rank: list[tuple[Any, pd.DataFrame, list[float]]],
                        ) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The ranks' findings (each rank's table and its rows' scores), one line per kind and subject
    (the op, the device, ...) naming the ranks it holds for: the message and evidence of the rank
    where it is most severe and, among those, covers the most (the first such rank on a tie), with
    ``ranks`` and ``by_rank`` (each rank's evidence) in the evidence."""
    groups: dict[tuple[str, str], list[tuple[Any, pd.Series, float]]] = {}
    for r, frame, scores in per_rank:
        for (_, row), score in zip(frame.iterrows(), scores, strict=True):
            ev = row["evidence"] if isinstance(row["evidence"], dict) else {}
            subject = next((str(ev[k]) for k in _SUBJECT_KEYS if k in ev), "")
            groups.setdefault((str(row["kind"]), subject), []).append((r, row, score))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    out = []
    for (kind, _), rows in groups.items():
        # min keeps the first of equals: on a tie of severity and score, the first rank in the folder's order
        r0, worst, _ = min(rows, key=lambda x: (order[str(x[1]["severity"])], -x[2]))
        ranks = [r for r, _, _ in rows]
        who = f"rank {r0}" if len(ranks) == 1 else f"ranks {_ranges(ranks)} (the numbers of rank {r0})"
        evidence = dict(worst["evidence"]) if isinstance(worst["evidence"], dict) else {}
        evidence.update(rank=r0, ranks=ranks, by_rank={str(r): row["evidence"] for r, row, _ in rows})
        out.append((kind, str(worst["severity"]), f"{who[0].upper()}{who[1:]}: {worst['message']}", evidence))
    # most ranks first among equal severities; then the order found (rank, then its own order)
    out.sort(key=lambda x: (order[x[1]], -len(x[3]["ranks"])))
    return out


def _ranges(labels: list[Any]) -> str:
    """0, 1, 2, 3, 5 -> "0-3, 5" (other labels listed as they are)."""
    if not all(isinstance(x, (int, np.integer)) for x in labels):
        return ", ".join(str(x) for x in labels)
    xs = sorted(int(x) for x in labels)
    parts: list[str] = []
    start = prev = xs[0]
    for x in [*xs[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ", ".join(parts)
