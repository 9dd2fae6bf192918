"""Where each rank's GPU time went: HTA's temporal breakdown, comm-compute overlap and idle split,
on exact nanoseconds.

Device work (kernels, memcpys, memsets; not the ``sync`` kind: a stream waiting on an event, which
HTA counts as a kernel, is waiting, not work) falls into three categories, as in HTA:
communication (a kernel whose name matches ``COMM_PATTERN``: NCCL / RCCL / gloo collectives),
memory (memcpy and memset) and compute (every other kernel). Per device, the union of each
category's intervals (work overlapping on two streams counts once):

- ``breakdown_window_us``: the device's window (the next item says which);
- ``breakdown_compute_us``, ``breakdown_comm_us``, ``breakdown_memcpy_us``: those unions. They
  overlap each other (communication hidden behind compute counts in both), so they do not add up;
- ``breakdown_idle_us``: the device's window minus the union of all its work. The window is HTA's:
  from the device's first work start to its last work end (not the profile's span, whose ends are
  CPU time before the first launch and after the last kernel); in a profile merged from
  ``--schedule`` cycles, each cycle's (the time between cycles was not recorded);
- ``breakdown_exposed_comm_us``: communication while no compute kernel runs; and
  ``breakdown_exposed_memcpy_us``: copies while neither compute nor communication runs. So
  ``compute + exposed_comm + exposed_memcpy + idle`` is the window exactly (the Cluster bar);
- ``overlap_pct``: HTA's comm-comp overlap, the share of communication time (its union) during
  which a compute kernel runs, in percent; NaN without communication.

The idle time is split as HTA's ``get_idle_time_breakdown`` does, per gap between work on the
device (device-wide: a gap is a time no stream runs anything, so the three add up to
``breakdown_idle_us``; HTA sums per-stream gaps, which count one idle moment once per stream):

- ``idle_host_wait_us``: the work that ends the gap was launched (its runtime call, matched by
  correlation id, started) after the gap began: the GPU waited for the CPU;
- ``idle_kernel_wait_us``: otherwise, a gap shorter than ``KERNEL_WAIT_MAX_NS``: the GPU's own
  delay between back-to-back kernels already queued;
- ``idle_other_us``: the rest (work queued but waiting: on another stream, an event, a sync).

Where HTA is wrong, this is not: HTA rounds timestamps to whole µs by default (a 0.7 µs kernel
becomes 0 or 1 µs; 41 of the 463 kernels and fills in the H100 traces here last under 1 µs),
drops the last profiler step when it reads a trace, and counts stream-wait events as kernels
(they make a waiting stream look busy). Several devices of one rank add up (each device's window and unions).

``KERNEL_WAIT_MAX_NS``: HTA's ``consecutive_kernel_delay`` defaults to 30, which its docstring
calls ns; it is compared with HTA's timestamps, which are µs: in effect 30 µs, so any gap of queued
work under 30 µs is "kernel wait" there (on ``hta_cases`` a 10 µs gap is, a 50 µs one is not).
Measured on the H100 traces here (tests/data), the gaps that are no host wait form two groups: 896
to 1152 ns (56 of 142 gaps; one more at 1535 ns), the GPU starting a kernel already queued behind
the previous one, and 2240 ns and more (85), work waiting on something else. 2 µs separates them.

HTA's own numbers, for users who compare (``hta_idle_table``, ``hta_breakdown_table``; equal to HTA
0.5.0's on its samples: tests/test_hta.py): its idle split per stream, its temporal breakdown and
comm-comp overlap with its event set (stream waits count) and its kernel types (by name).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, category_map, category_mask, kind_mask, time_ns
from ._intervals import measure_within, union_segments
from ._tables import LABEL, TEXT, empty_table
from .launches import matched_launches, stream_groups

__all__ = ["COMM_PATTERN", "BREAKDOWN_COLUMNS", "KERNEL_WAIT_MAX_NS", "is_comm", "breakdown_table",
           "work_categories", "COMPUTE", "COMM", "MEMORY", "HTA_IDLE_COLUMNS", "HTA_BREAKDOWN_COLUMNS",
           "HTA_KERNEL_DELAY_US", "hta_idle_table", "hta_idle_rows", "hta_breakdown_table"]

COMM_PATTERN = re.compile(
    r"nccl|rccl|gloo|c10d::|record_param_comms|ProcessGroup|all_?reduce|all_?gather|reduce_?scatter"
    r"|all_?to_?all|barrier|SendRecv",
    re.IGNORECASE,
)
KERNEL_WAIT_MAX_NS = 2000
HTA_KERNEL_DELAY_US = 30.0  # HTA's consecutive_kernel_delay default (30, compared with µs timestamps)
HTA_IDLE_COLUMNS = ("hta_idle_host_wait_us", "hta_idle_kernel_wait_us", "hta_idle_other_us")
HTA_IDLE_ROW_DTYPES = {"rank": LABEL, "device": TEXT, "stream": np.int64, "idle_category": TEXT,
                       "idle_time_us": np.float64, "idle_time_ratio": np.float64}
HTA_BREAKDOWN_COLUMNS = ("hta_breakdown_idle_us", "hta_breakdown_compute_us", "hta_breakdown_non_compute_us",
                         "hta_overlap_pct")
# HTA 0.5.0's kernel types, by name (hta/utils/utils.py get_kernel_type): communication, else
# memory, else computation unless its "not computation" pattern matches (then "other")
HTA_COMM_RE = re.compile(r"^nccl.*Kernel")
HTA_MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
HTA_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

COMPUTE, COMM, MEMORY = 0, 1, 2

BREAKDOWN_COLUMNS = (
    "breakdown_window_us",
    "breakdown_compute_us",
    "breakdown_comm_us",
    "breakdown_memcpy_us",
    "breakdown_idle_us",
    "breakdown_exposed_comm_us",
    "breakdown_exposed_memcpy_us",
    "overlap_pct",
    "idle_host_wait_us",
    "idle_kernel_wait_us",
    "idle_other_us",
)


def is_comm(names: np.ndarray) -> np.ndarray:
    """COMM_PATTERN on each name (evaluated once per distinct name)."""
    codes, uniq = pd.factorize(np.asarray(names, dtype=object))
    hits = np.array([bool(COMM_PATTERN.search(str(u))) for u in uniq], dtype=bool)
    return hits[codes] if len(codes) else np.zeros(0, dtype=bool)


def work_categories(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """COMPUTE, COMM or MEMORY for device work ``rows`` (memcpy / memset kinds are MEMORY)."""
    kind = events["kind"].cat.codes.to_numpy()[rows]
    comm = category_mask(events["name"], COMM_PATTERN.search, rows=rows)
    return np.where(kind == KIND_CODE["kernel"], np.where(comm, COMM, COMPUTE), MEMORY).astype(np.int64)


def _launch_ns(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For device work ``rows`` (in row order): the start (ns) of its runtime call, or the smallest
    int64 where none was recorded (never "after" anything: no host wait)."""
    out = np.full(len(rows), np.iinfo(np.int64).min, dtype=np.int64)
    work, call = matched_launches(events)
    out[np.searchsorted(rows, work)] = time_ns(events["start_us"].to_numpy()[call])
    return out


def _lengths(seg_group: np.ndarray, seg_start: np.ndarray, seg_end: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(seg_group, weights=(seg_end - seg_start).astype(np.float64), minlength=n)[:n]


def breakdown_table(events: pd.DataFrame, rank: np.ndarray, n_ranks: int, windows: pd.DataFrame) -> pd.DataFrame:
    """One row per rank code (``rank``: each event's, from ``device_stats.process_codes``), the
    columns ``BREAKDOWN_COLUMNS``; zeros (and NaN overlap) for a rank without device work.

    ``windows``: the recorded stretches of time (``device_stats.profiled_windows``): a profile
    merged from ``--schedule`` cycles has one per cycle, and each gets HTA's window of its own
    (the time between cycles was not recorded: no idle time)."""
    kind = events["kind"].cat.codes.to_numpy()
    rows = np.flatnonzero(kind_mask(kind, DEVICE_WORK_CODES))
    start = time_ns(events["start_us"].to_numpy()[rows])
    end = start + time_ns(events["dur_us"].to_numpy()[rows])
    dev_codes = events["device"].cat.codes.to_numpy()[rows].astype(np.int64)
    n_dev = int(dev_codes.max()) + 1 if len(rows) else 1
    window_of = _window_of(rank[rows], start, windows)
    n_windows = max(len(windows), 1)
    group = window_of * n_dev + dev_codes  # one group per (recorded window, device)
    n_groups = n_windows * n_dev
    group_rank = np.repeat(windows["rank_code"].to_numpy(), n_dev) if len(windows) else np.zeros(n_dev, np.int64)
    cat = work_categories(events, rows)

    # the union of each category, and of all work, per device
    per_cat = union_segments(start, end, group * 3 + cat)
    cat_len = _lengths(per_cat[0], per_cat[1], per_cat[2], n_groups * 3).reshape(n_groups, 3)
    busy_g, busy_s, busy_e = union_segments(start, end, group)
    busy = _lengths(busy_g, busy_s, busy_e, n_groups)
    window = np.zeros(n_groups)
    if len(busy_g):
        first = np.r_[True, busy_g[1:] != busy_g[:-1]]
        last = np.r_[busy_g[1:] != busy_g[:-1], True]
        window[busy_g[first]] = (busy_e[last] - busy_s[first]).astype(np.float64)
    sel = cat != MEMORY
    cc = union_segments(start[sel], end[sel], group[sel])
    compute_or_comm = _lengths(cc[0], cc[1], cc[2], n_groups)
    comm_seg = per_cat[0] % 3 == COMM
    comp_seg = per_cat[0] % 3 == COMPUTE
    overlap = measure_within(per_cat[0][comm_seg] // 3, per_cat[1][comm_seg], per_cat[2][comm_seg],
                             per_cat[0][comp_seg] // 3, per_cat[1][comp_seg], per_cat[2][comp_seg], n_groups)
    host, kwait, other = _idle_split(events, rows, group, start, busy_g, busy_s, busy_e, n_groups)

    def per_rank(v: np.ndarray) -> np.ndarray:  # one value per rank (none for a table of no ranks)
        return np.bincount(group_rank, weights=np.asarray(v, dtype=np.float64), minlength=n_ranks)[:n_ranks] / 1000.0

    comm_us = per_rank(cat_len[:, COMM])
    overlap_us = per_rank(overlap)
    with np.errstate(divide="ignore", invalid="ignore"):
        overlap_pct = np.where(comm_us > 0, 100.0 * overlap_us / comm_us, np.nan)
    return pd.DataFrame(
        {
            "breakdown_window_us": per_rank(window),
            "breakdown_compute_us": per_rank(cat_len[:, COMPUTE]),
            "breakdown_comm_us": comm_us,
            "breakdown_memcpy_us": per_rank(cat_len[:, MEMORY]),
            "breakdown_idle_us": per_rank(window - busy),
            "breakdown_exposed_comm_us": comm_us - overlap_us,
            "breakdown_exposed_memcpy_us": per_rank(busy - compute_or_comm),
            "overlap_pct": overlap_pct,
            "idle_host_wait_us": per_rank(host),
            "idle_kernel_wait_us": per_rank(kwait),
            "idle_other_us": per_rank(other),
        }
    )


def _window_of(rank: np.ndarray, t: np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    """The index (in ``windows``) of the recorded window of each time ``t`` of rank code ``rank``:
    the last of its rank's windows that starts at or before it (they cover every event)."""
    if len(windows) == 0 or len(t) == 0:
        return np.zeros(len(t), dtype=np.int64)
    w_rank = windows["rank_code"].to_numpy().astype(np.int64)
    w_start = windows["start_ns"].to_numpy().astype(np.int64)
    base = int(min(w_start.min(), t.min()))
    stride = int(max(windows["end_ns"].max(), t.max()) - base) + 1
    keys = w_rank * stride + (w_start - base)
    order = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys[order], rank * stride + (t - base), side="right") - 1
    return order[np.maximum(at, 0)]


def _idle_split(
    events: pd.DataFrame,
    rows: np.ndarray,
    group: np.ndarray,
    start: np.ndarray,
    seg_g: np.ndarray,
    seg_s: np.ndarray,
    seg_e: np.ndarray,
    n_groups: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each gap between a device's busy segments, as host wait, kernel wait or other (ns per group)."""
    zeros = (np.zeros(n_groups), np.zeros(n_groups), np.zeros(n_groups))
    if len(seg_s) < 2:
        return zeros
    same = seg_g[1:] == seg_g[:-1]
    gap_g = seg_g[1:][same]
    gap_start = seg_e[:-1][same]
    gap_end = seg_s[1:][same]
    # the work that ends each gap starts at the next segment's start; of several starting then,
    # the one launched first decides (unknown launches sort first: they are no host wait)
    launch = _launch_ns(events, rows)
    base = int(start.min())
    stride = int(start.max() - base) + 1
    key = group * stride + (start - base)
    order = np.lexsort((launch, key))
    at = np.searchsorted(key[order], gap_g * stride + (gap_end - base), side="left")
    first_launch = launch[order][at]
    length = (gap_end - gap_start).astype(np.float64)
    host = first_launch > gap_start
    kernel_wait = ~host & (gap_end - gap_start < KERNEL_WAIT_MAX_NS)
    other = ~host & ~kernel_wait

    def total(mask: np.ndarray) -> np.ndarray:
        return np.bincount(gap_g[mask], weights=length[mask], minlength=n_groups)[:n_groups]

    return total(host), total(kernel_wait), total(other)


# -- HTA's own definitions, where nbprof's differ -------------------------------------------------


def _hta_rows(events: pd.DataFrame, *, idle: bool) -> tuple[np.ndarray, np.ndarray]:
    """The device events HTA 0.5.0 analyses (as ``TraceAnalysis(include_last_profiler_step=True)``
    reads a trace), each as many times as HTA holds it, and the start (ns) of each one's runtime
    call (HTA's ``index_correlation``: the last CPU event with its correlation id; the smallest
    int64 where none is recorded).

    ``idle`` (``get_idle_time_breakdown``): the categories kernel, gpu_memcpy, gpu_memset and
    mtia_ccp_events (all of them: MTIA's event waits and records, nbprof's ``sync`` there), not
    cuda_sync; else (``get_temporal_breakdown``, ``get_comm_comp_overlap``): every event on a
    stream, CUDA's stream waits and syncs too (not GPU annotations, which HTA puts on no stream).

    In a trace with two or more ``ProfilerStep`` names HTA keeps only the device events whose
    correlation id a CPU event has, once per such CPU event (a launch recorded as a runtime call
    and a driver call counts twice), and, meant to drop the work after the last step, compares
    the steps' ends before its clock's shift with times after it: nothing is dropped by time."""
    kind = events["kind"].cat.codes.to_numpy()
    stream = events["stream"].to_numpy()
    corr = events["correlation"].to_numpy()
    sync = kind == KIND_CODE["sync"]
    if idle:
        sync &= category_map(events["device"], lambda d: d.startswith("mtia"), dtype=bool, missing=False)
    rows = np.flatnonzero((kind_mask(kind, DEVICE_WORK_CODES) | sync) & (stream >= 0))
    launch = _runtime_start_ns(events, rows)
    names = pd.Index(events["name"].cat.categories.astype(str))
    if int(names.str.contains("ProfilerStep", regex=False).sum()) >= 2:
        cpu = np.flatnonzero((stream < 0) & (corr > 0))
        ids, counts = np.unique(corr[cpu], return_counts=True)
        times = np.zeros(len(rows), dtype=np.int64)
        if len(ids):
            at = np.minimum(np.searchsorted(ids, corr[rows]), len(ids) - 1)
            times = np.where((corr[rows] > 0) & (ids[at] == corr[rows]), counts[at], 0)
        rows, launch = np.repeat(rows, times), np.repeat(launch, times)
    return rows, launch


def _runtime_start_ns(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For device events ``rows``: the start (ns) of the last CPU event (in the table's order) with
    the same correlation id (HTA's ``index_correlation``), or the smallest int64."""
    out = np.full(len(rows), np.iinfo(np.int64).min, dtype=np.int64)
    corr = events["correlation"].to_numpy()
    cpu = np.flatnonzero((events["stream"].to_numpy() < 0) & (corr > 0))
    if len(rows) == 0 or len(cpu) == 0:
        return out
    order = np.lexsort((cpu, corr[cpu]))  # by id, then table order: the last of an id last
    keys, calls = corr[cpu][order], cpu[order]
    at = np.searchsorted(keys, corr[rows], side="right") - 1
    hit = (at >= 0) & (corr[rows] > 0)
    hit[hit] = keys[at[hit]] == corr[rows][hit]
    out[hit] = time_ns(events["start_us"].to_numpy()[calls[at[hit]]])
    return out


def hta_idle_table(events: pd.DataFrame, rank: np.ndarray) -> pd.DataFrame:
    """HTA's ``get_idle_time_breakdown`` (0.5.0, run with ``HTA_DISABLE_NS_ROUNDING=1`` and
    ``include_last_profiler_step=True``; equal to it on HTA's sample traces and the recorded ones
    here, tests/test_hta.py), per stream: ``rank`` (code, ``rank`` being each event's), ``device,
    stream`` and ``HTA_IDLE_COLUMNS``.

    On each stream, its events (:func:`_hta_rows`) in order of start; each one's gap is its start
    minus the end of the one before it on the stream (the first has none): host wait when its
    runtime call started after that end, else kernel wait when the gap is under
    ``HTA_KERNEL_DELAY_US`` (HTA's ``consecutive_kernel_delay=30``, compared with timestamps in µs:
    30 µs, though HTA's docstring says ns; a gap of overlapping events is negative and counts
    there), else other.

    Summed over a device's streams, one idle moment counts once per stream that idles then: this is
    HTA's number, not the device's idle time (``idle_*`` of :func:`breakdown_table`)."""
    rows, launch = _hta_rows(events, idle=True)
    known = launch != np.iinfo(np.int64).min
    start = time_ns(events["start_us"].to_numpy()[rows])
    end = start + time_ns(events["dur_us"].to_numpy()[rows])
    dev = events["device"].cat.codes.to_numpy()[rows].astype(np.int64)
    stream = events["stream"].to_numpy()[rows].astype(np.int64)
    group, (g_rank, g_dev, g_stream) = stream_groups(rank[rows].astype(np.int64), dev, stream)
    order = np.lexsort((start, group))
    group, start, end, launch, known = group[order], start[order], end[order], launch[order], known[order]
    same = np.r_[False, group[1:] == group[:-1]]
    prev_end = np.r_[0, end[:-1]]
    gap = (start - prev_end).astype(np.float64)
    host = same & known & (launch > prev_end)
    kernel_wait = same & ~host & (gap < HTA_KERNEL_DELAY_US * 1000.0)
    other = same & ~host & ~kernel_wait
    n = len(g_stream)

    def total(mask: np.ndarray) -> np.ndarray:
        return np.bincount(group[mask], weights=gap[mask], minlength=n)[:n] / 1000.0

    devices = np.asarray(events["device"].cat.categories.astype(str), dtype=object)
    return pd.DataFrame({"rank": g_rank, "device": devices[g_dev] if n else np.zeros(0, dtype=object),
                         "stream": g_stream, "hta_idle_host_wait_us": total(host),
                         "hta_idle_kernel_wait_us": total(kernel_wait), "hta_idle_other_us": total(other)})


def hta_breakdown_table(events: pd.DataFrame, rank: np.ndarray, n_ranks: int) -> pd.DataFrame:
    """HTA's ``get_temporal_breakdown`` and ``get_comm_comp_overlap`` (0.5.0, as
    :func:`hta_idle_table` runs it), one row per rank code: ``HTA_BREAKDOWN_COLUMNS``.

    Its events (:func:`_hta_rows`, stream waits included) typed by name as HTA types them
    (``HTA_COMM_RE``, ``HTA_MEMORY_RE``; computation: neither, and not ``HTA_NOT_COMPUTE_RE``, so a
    stream wait named "Stream Wait Event" computes, MTIA's event waits too); its window: the first event's start to the
    last one's end, all devices of the rank together. Idle: the window minus the union of its
    events; compute: the union of the computation events; non-compute: the rest of the window;
    overlap: the share of the communication events' union during which computation runs, in %.
    Without stream waits and with NCCL's and torch's names, these are ``breakdown_idle_us``,
    ``breakdown_compute_us``, ``breakdown_exposed_comm_us + breakdown_exposed_memcpy_us`` and
    ``overlap_pct`` (measured on HTA's samples: tests/test_hta.py)."""
    rows, _ = _hta_rows(events, idle=False)
    r = rank[rows].astype(np.int64)
    start = time_ns(events["start_us"].to_numpy()[rows])
    end = start + time_ns(events["dur_us"].to_numpy()[rows])
    comm = category_mask(events["name"], lambda n: HTA_COMM_RE.match(n) is not None, rows=rows)
    compute = category_mask(events["name"], lambda n: not (HTA_COMM_RE.match(n) or HTA_MEMORY_RE.match(n)
                                                           or HTA_NOT_COMPUTE_RE.match(n)), rows=rows)
    busy = _lengths(*union_segments(start, end, r), n_ranks)
    window = np.zeros(n_ranks)
    if len(rows):
        lo = np.full(n_ranks, np.iinfo(np.int64).max)
        hi = np.full(n_ranks, np.iinfo(np.int64).min)
        np.minimum.at(lo, r, start)
        np.maximum.at(hi, r, end)
        window = np.where(hi >= lo, hi - lo, 0).astype(np.float64)
    comp = union_segments(start[compute], end[compute], r[compute])
    comp_us = _lengths(*comp, n_ranks)
    cm = union_segments(start[comm], end[comm], r[comm])
    comm_us = _lengths(*cm, n_ranks)
    both = measure_within(cm[0], cm[1], cm[2], comp[0], comp[1], comp[2], n_ranks)
    idle = window - busy
    with np.errstate(divide="ignore", invalid="ignore"):
        overlap = np.where(comm_us > 0, 100.0 * both / comm_us, np.nan)
    return pd.DataFrame({"hta_breakdown_idle_us": idle / 1000.0, "hta_breakdown_compute_us": comp_us / 1000.0,
                         "hta_breakdown_non_compute_us": (window - comp_us - idle) / 1000.0,
                         "hta_overlap_pct": overlap})


def hta_idle_rows(table: pd.DataFrame, labels: np.ndarray) -> pd.DataFrame:
    """:func:`hta_idle_table` in the layout of HTA's ``get_idle_time_breakdown`` result: one row per
    rank, stream and category (``host_wait``, ``kernel_wait``, ``other``): ``rank`` (its label from
    ``labels``), ``device, stream, idle_category, idle_time_us`` and ``idle_time_ratio`` (of the
    stream's idle time; NaN where it has none)."""
    cats = ("host_wait", "kernel_wait", "other")
    n = len(table)
    if n == 0:
        return empty_table(HTA_IDLE_ROW_DTYPES)
    values = np.stack([table[f"hta_idle_{c}_us"].to_numpy(dtype=np.float64) for c in cats], axis=1)
    total = values.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(total != 0, values / np.where(total != 0, total, 1.0), np.nan)
    return pd.DataFrame({
        "rank": np.repeat(np.asarray(labels, dtype=object)[table["rank"].to_numpy()], 3),
        "device": np.repeat(table["device"].to_numpy(dtype=object), 3),
        "stream": np.repeat(table["stream"].to_numpy(dtype=np.int64), 3),
        "idle_category": np.tile(np.asarray(cats, dtype=object), n),
        "idle_time_us": values.reshape(-1),
        "idle_time_ratio": ratio.reshape(-1),
    })
