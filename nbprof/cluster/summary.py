"""One rank of a folder, summarized where it is read (in a worker, events in hand): its
:class:`RankSummary`, the tables the folder's report merges (``cluster.profile``), never its events.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..analysis.breakdown import hta_idle_rows
from ..analysis.device_stats import DeviceStats, process_codes
from ..analysis.kernels import kernel_parts
from ..analysis.memory import MemorySummary
from ..analysis.modules import module_parts
from ..analysis.ranges import range_parts
from ..analysis.ranks import name_times
from ..analysis.summary import TorchSummary
from ..errors import OptionError, TraceError
from ..format import fmt_bytes
from ..meta import TraceMeta
from ..model import TorchProfile
from .timeline import RankTimeline, rank_timeline

__all__ = ["RankSummary", "rank_summary", "file_size"]


@dataclass
class RankSummary:
    """What one rank's worker sends back: the rank's tables, not its events (see the module doc).

    Times are the rank's own clock (µs since its first event); ``meta.origin_ns`` puts them on a
    common clock."""

    file: str
    meta: TraceMeta
    events: int
    start_us: float
    end_us: float
    rank_row: pd.DataFrame
    """Its row of ``ranks().table`` (the rank label is set when all ranks are back)."""
    hta_idle: pd.DataFrame
    """``ranks().hta_idle``: HTA's idle time breakdown, per stream and category."""
    key_averages: pd.DataFrame
    """``key_averages("op")``: sums and counts, which add up across ranks."""
    kernel_parts: pd.DataFrame
    device_times: pd.DataFrame
    """``name_times`` of its kernels (device time), for ``ranks().differences``."""
    cpu_times: pd.DataFrame
    """``name_times`` of its ops and labels (self CPU time), for ranks without device work."""
    steps: pd.DataFrame
    step_breakdown: pd.DataFrame
    """``step_breakdown()`` (self CPU time per op and step): the Steps tab's side-by-side table."""
    device_stats: DeviceStats
    summary: TorchSummary
    findings: pd.DataFrame
    finding_scores: list[float]
    """Each ``findings`` row's score (how much of the rank it covers): the rank whose numbers a
    folder's line of that kind shows is the one it covers most."""
    overview: pd.DataFrame
    """``overview()``: its steps' time by category, and their sum (``step == "all"``)."""
    collectives: pd.DataFrame
    """``collectives()``: per collective and process group (the Ranks tab's Cluster section)."""
    queue_length: pd.DataFrame
    """``queue_length()``: per device and stream."""
    timeline: RankTimeline
    """Its collective calls and where its events' cache is, for the timeline (its view is drawn from
    the cache when first shown: ``nbprof.cluster.timeline``)."""
    seconds: float
    """Time to read and summarize it."""
    shape_averages: pd.DataFrame | None = None
    """``key_averages("shape")``, where the rank recorded input shapes (None: its rows are its
    operators', every shape ``[]``)."""
    stack_averages: pd.DataFrame | None = None
    """``key_averages("stack")``, where the rank recorded Python stacks (None: every stack "")."""
    ranges: pd.DataFrame | None = None
    """``analysis.ranges.range_parts``: its Ranges table with each path's first start."""
    range_span_us: float = 0.0
    """The span its ranges' shares divide by."""
    range_ops: pd.DataFrame | None = None
    """``range_ops()``: the operators under each range."""
    modules: pd.DataFrame | None = None
    """``analysis.modules.module_parts``: its module tree with each module's first call."""
    lines: pd.DataFrame | None = None
    """``lines()``, where the rank has line data (``--lines``, or torch's ``with_stack`` frames);
    None where it has none. Its ``meta`` keeps the sources, not the per-op ``line_data``."""
    memory: MemorySummary | None = None
    """What its Memory tab draws (``analysis.memory.MemorySummary``: the chart's points, peaks,
    blocks held at each peak); None where it recorded no memory."""
    notes: list[str] = field(default_factory=list)
    """What was left out of this summary, and why (one line each): the folder's report shows them,
    naming the rank."""


def rank_summary(path: str, cache_root: str | None = None, limit: Any = None) -> RankSummary:
    """Read one rank's trace and summarize it (runs in a worker; a bad file: TraceError naming it,
    and so is running out of memory on it). ``cache_root``: where to write its events' cache for
    the timeline (None: none; the timeline then reads the file again); ``limit``:
    ``read_trace_file``'s ``max_bytes``."""
    try:
        return _summarize(path, cache_root, limit)
    except MemoryError:
        raise TraceError(f"{path}: out of memory reading this rank ({file_size(path)}); try fewer workers= "
                         "(0 reads one rank at a time in this process)") from None


def _summarize(path: str, cache_root: str | None, limit: Any = None) -> RankSummary:
    t0 = time.perf_counter()
    p = TorchProfile.from_trace(_read(path, limit))
    ev = p._events
    start = float(ev["start_us"].min()) if len(ev) else 0.0
    end = float((ev["start_us"] + ev["dur_us"]).max()) if len(ev) else 0.0
    lines, lines_note = _rank_lines(p)
    if lines_note:  # the line findings read the same table: they go with it
        p.meta.line_data = None
    # the line table stands for the per-op line data (an entry per op): that stays here
    trace_meta = TraceMeta(**{**p.meta.trace_fields(), "line_data": None})
    device_times = name_times(ev, device_work=True)
    # the ops' times stand in for the kernels' only where no rank ran device work: not this one's
    cpu_times = name_times(ev, device_work=False) if len(device_times) == 0 else device_times.iloc[0:0]
    # the rank's row of ``ranks().table`` and its HTA idle rows; not ``p.ranks()``, whose differences
    # between ranks (name_times again) one rank has none of: the folder's are from every rank's times
    rank_row, idle = p._rank_parts
    _, labels = process_codes(ev)
    collected = p.collected
    ranges, range_span_us = range_parts(ev, p.meta)
    return RankSummary(
        file=path, meta=trace_meta, events=len(ev), start_us=start, end_us=end,
        rank_row=rank_row, hta_idle=hta_idle_rows(idle, labels), key_averages=p.key_averages("op"),
        kernel_parts=kernel_parts(ev), device_times=device_times,
        cpu_times=cpu_times, steps=p.steps(), step_breakdown=p.step_breakdown(),
        device_stats=p.device_stats, summary=p.summary, findings=p.findings,
        finding_scores=[float(f.score) for _, f in p._finding_rows], overview=p.overview(),
        collectives=p.collectives(), queue_length=p.queue_length(),
        timeline=rank_timeline(ev, p.meta, path, cache_root=cache_root),
        shape_averages=p.key_averages("shape") if collected["shapes"] else None,
        stack_averages=p.key_averages("stack") if collected["stack"] else None,
        ranges=ranges, range_span_us=range_span_us, range_ops=p.range_ops(), modules=module_parts(ev),
        lines=lines, memory=p._memory_summary if collected["memory"] else None,
        seconds=time.perf_counter() - t0, notes=[lines_note] if lines_note else [],
    )


def _rank_lines(p: TorchProfile) -> tuple[pd.DataFrame | None, str | None]:
    """The rank's ``lines()`` with its ``attrs`` (method, notes); None without line data. Line data
    that fails (a saved file's line table that passed the reader's checks and still does not add
    up) leaves out this rank's lines, with the note that says why: never the whole folder."""
    if p.meta.line_data is None and not p.collected["stack"]:
        return None, None  # neither --lines nor Python frames: nothing to look for
    try:
        return p.lines(), None
    except OptionError:  # with_stack, but no frame of the user's code
        return None, None
    except Exception as e:
        why = " ".join(f"{type(e).__name__}: {e}".split())[:200]
        return None, f"its lines could not be computed ({why}): left out of lines() and the Source tab"


def _read(path: str, limit: Any = None) -> Any:
    from ..collect.chrome_trace import read_trace_file

    try:
        return read_trace_file(path, max_bytes=limit)
    except (TraceError, MemoryError):
        raise
    except Exception as e:  # a reader bug on an odd file: still one line naming the file
        raise TraceError(f"{path}: could not be read ({type(e).__name__}: {e})") from None


def file_size(path: str) -> str:
    try:
        size = os.path.getsize(path)
    except OSError:
        return "size unknown"
    return f"{fmt_bytes(size)} on disk" + (", gzip'd" if path.endswith(".gz") else "")
