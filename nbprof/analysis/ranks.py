"""Per-rank comparison of a profile merged from several ranks (``nbprof.load_trace(folder)``).

:func:`rank_table`: one row per rank::

    rank, span_us, self_cpu_us, ops, device_us, kernels, device_busy_us, device_busy_fraction,
    comm_us, compute_us, breakdown_window_us, breakdown_compute_us, breakdown_comm_us,
    breakdown_memcpy_us, breakdown_idle_us, breakdown_exposed_comm_us, breakdown_exposed_memcpy_us,
    overlap_pct, idle_host_wait_us, idle_kernel_wait_us, idle_other_us, hta_idle_host_wait_us,
    hta_idle_kernel_wait_us, hta_idle_other_us, hta_breakdown_idle_us, hta_breakdown_compute_us,
    hta_breakdown_non_compute_us, hta_overlap_pct

- ``device_us``, ``kernels``: device work (kernels, copies, memsets), its time and how many, as in
  ``steps()`` (``device_stats``' ``kernel_us`` is kernels only);

- ``comm_us``: time in collective communication: device work whose name looks like NCCL / RCCL
  (``ncclDevKernel_AllReduce...``), or, in a profile without device work, self CPU time of c10d /
  gloo ops. In DDP the fast ranks wait inside these for the slow one, so waiting is left out of
  the next column;
- ``compute_us``: device time minus communication (self CPU time minus communication without
  device work): what each rank itself had to do. The **slowest rank** is the one with the most;
  ``imbalance = (max - median) / median`` of ``compute_us``;
- ``breakdown_*``, ``overlap_pct``, ``idle_*``: HTA's temporal breakdown, comm-compute overlap and
  idle split, exact (``nbprof.analysis.breakdown``: the definitions and where HTA differs);
- ``hta_*``: the same analyses as HTA 0.5.0 defines them, equal to its numbers (for users who
  compare): ``hta_idle_*`` its idle time breakdown (per stream, summed over the rank's streams: one
  idle moment counts once per idle stream; its 30 µs kernel-wait threshold), ``hta_breakdown_*``
  its temporal breakdown and ``hta_overlap_pct`` its comm-comp overlap (stream waits counted as
  kernels, kernels typed by name). The per-stream rows: ``RankReport.hta_idle``.

:func:`rank_differences`: the kernels (without device work: the ops and ``record_function``
labels, by self CPU time, not the ProfilerStep markers) whose count or time differs across
ranks, with each rank's numbers side by side.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..format import plural
from ..meta import TraceMeta
from ..events import DEVICE_WORK_CODES, KIND_CODE, KINDS, TREE_CODES, category_mask, kind_mask
from .breakdown import (BREAKDOWN_COLUMNS, COMM_PATTERN, HTA_BREAKDOWN_COLUMNS, HTA_IDLE_COLUMNS, breakdown_table,
                        hta_breakdown_table, hta_idle_rows, hta_idle_table, is_comm)
from .device_stats import DeviceStats, device_stats, process_codes, profiled_windows, span_ns
from ._tables import LABEL, TEXT, empty_table

__all__ = ["RankReport", "rank_report", "report_of", "rank_table", "rank_differences", "name_times",
           "differences_from_times", "RANK_TIME_SPREAD", "rank_spread", "SPREAD_COLUMNS"]

# A kernel "differs" across ranks when its count differs, or its total time's spread
# (max - min) / mean is at least this.
RANK_TIME_SPREAD = 0.10
# ... and it matters: its slowest rank spends at least this share of that rank's device (or CPU) time.
RANK_MIN_SHARE = 0.01



@dataclass(frozen=True)
class RankReport:
    """``table`` (per rank), ``slowest`` (rank label), ``imbalance``, ``differences``; ``hta_idle``:
    HTA's idle time breakdown as HTA's ``get_idle_time_breakdown`` returns it, one row per rank,
    stream and category (``rank, device, stream, idle_category, idle_time_us, idle_time_ratio``)."""

    table: pd.DataFrame
    slowest: Any
    imbalance: float
    differences: pd.DataFrame
    hta_idle: pd.DataFrame = field(default_factory=lambda: hta_idle_rows(pd.DataFrame(
        {"rank": np.zeros(0, dtype=np.int64), "device": np.zeros(0, dtype=object), "stream": np.zeros(0, dtype=np.int64),
         **{c: np.zeros(0) for c in HTA_IDLE_COLUMNS}}), np.zeros(0, dtype=object)))

    def __repr__(self) -> str:
        return (f"<RankReport {plural(len(self.table), 'rank')}, slowest {self.slowest}, imbalance {self.imbalance:.1%}, "
                f"{plural(len(self.differences), 'differing row')}>")


def rank_table(events: pd.DataFrame, meta: TraceMeta | None = None, stats: DeviceStats | None = None,
               hta_idle: pd.DataFrame | None = None, *, windows: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per rank (see the module doc); ``stats``: the events' ``device_stats`` when already
    computed (a profile caches them); ``hta_idle``: their ``hta_idle_table``, ``windows`` their
    ``profiled_windows``, when already computed."""
    rank, labels = process_codes(events)
    n = len(labels)
    kind = events["kind"].cat.codes.to_numpy()
    tree = kind_mask(kind, TREE_CODES) & (events["thread"].to_numpy() >= 0) & ~events["merged"].to_numpy()
    work = kind_mask(kind, DEVICE_WORK_CODES)
    self_cpu = events["self_cpu_us"].to_numpy()
    dur = events["dur_us"].to_numpy()
    comm = category_mask(events["name"], COMM_PATTERN.search)  # once per distinct name
    windows = profiled_windows(events, meta) if windows is None else windows
    spans = span_ns(windows, n) / 1000.0

    # weighted sums as float64 (np.bincount of no rows gives int64 zeros, whatever the weights)
    cpu_total = np.bincount(rank[tree], weights=self_cpu[tree], minlength=n).astype(np.float64)
    ops = np.bincount(rank[tree & (kind == KIND_CODE["op"])], minlength=n)
    device_us = np.bincount(rank[work], weights=dur[work], minlength=n).astype(np.float64)
    kernels = np.bincount(rank[work], minlength=n)
    has_device = bool(work.any())
    if has_device:
        comm_us = np.bincount(rank[work & comm], weights=dur[work & comm], minlength=n).astype(np.float64)
        compute = device_us - comm_us
    else:
        comm_us = np.bincount(rank[tree & comm], weights=self_cpu[tree & comm], minlength=n).astype(np.float64)
        compute = cpu_total - comm_us

    busy = np.zeros(n)
    n_devices = np.ones(n)
    devices = (stats if stats is not None else device_stats(events, meta)).devices
    if len(devices):
        key = (devices["rank"].to_numpy() if "rank" in devices.columns
               else np.full(len(devices), labels[0], dtype=object))
        idx = pd.Index(labels).get_indexer(key)
        np.add.at(busy, idx, devices["busy_us"].to_numpy())
        n_devices = np.maximum(np.bincount(idx, minlength=n), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(spans > 0, busy / (spans * n_devices), np.nan)
    table = pd.DataFrame(
        {
            "rank": labels,
            "span_us": spans,
            "self_cpu_us": cpu_total,
            "ops": ops.astype(np.int64),
            "device_us": device_us,
            "kernels": kernels.astype(np.int64),
            "device_busy_us": busy,
            "device_busy_fraction": frac if has_device else np.full(n, np.nan),
            "comm_us": comm_us,
            "compute_us": compute,
        }
    )
    breakdown = breakdown_table(events, rank, n, windows)
    for column in BREAKDOWN_COLUMNS:
        table[column] = breakdown[column].to_numpy()
    idle = hta_idle_table(events, rank) if hta_idle is None else hta_idle
    for column in HTA_IDLE_COLUMNS:
        table[column] = np.bincount(idle["rank"].to_numpy(), weights=idle[column].to_numpy(),
                                    minlength=n)[:n].astype(np.float64)
    hta = hta_breakdown_table(events, rank, n)
    for column in HTA_BREAKDOWN_COLUMNS:
        table[column] = hta[column].to_numpy()
    return table


def rank_differences(
    events: pd.DataFrame, spread: float = RANK_TIME_SPREAD, min_share: float = RANK_MIN_SHARE
) -> pd.DataFrame:
    """Kernels (ops, without device work) whose count or time differs across ranks.

    Columns: ``name, kind, comm, count_min, count_max, time_min_us, time_max_us, time_mean_us,
    spread, slowest_rank``, then ``count_rank<R>`` and ``time_us_rank<R>`` for every rank; sorted
    by ``time_max_us - time_min_us``."""
    _, labels = process_codes(events)
    has_work = bool(kind_mask(events["kind"].cat.codes.to_numpy(), DEVICE_WORK_CODES).any())
    return differences_from_times(name_times(events, device_work=has_work), labels, spread, min_share)


def name_times(events: pd.DataFrame, *, device_work: bool) -> pd.DataFrame:
    """What :func:`rank_differences` compares: ``name, kind, rank`` (the rank's code, as
    ``process_codes``), ``count, time_us``. ``device_work``: the kernels (copies, memsets) and
    their device time; else the ops and ``record_function`` labels and their self CPU time.
    Summed per name, so the times of ranks summarized apart concatenate into the same input."""
    rank, _ = process_codes(events)
    kind = events["kind"].cat.codes.to_numpy()
    if device_work:
        rows = np.flatnonzero(kind_mask(kind, DEVICE_WORK_CODES))
        value = events["dur_us"].to_numpy()[rows]
    else:
        # ops and record_function labels (a slow data loader shows as its label's own time); not
        # the ProfilerStep#N markers, whose own time is mostly waiting on the ranks that wait
        step = category_mask(events["name"], lambda n: n.startswith("ProfilerStep#"))
        rows = np.flatnonzero(np.isin(kind, [KIND_CODE["op"], KIND_CODE["annotation"]])
                              & (events["thread"].to_numpy() >= 0) & ~events["merged"].to_numpy() & ~step)
        value = events["self_cpu_us"].to_numpy()[rows]
    # grouped on integer codes (a groupby on the names as objects took 1.4 s at 1 M events)
    name_codes = events["name"].cat.codes.to_numpy()[rows].astype(np.int64)
    named = name_codes >= 0  # an event without a name is no row (as a groupby drops NaN keys)
    name_codes, value, r = name_codes[named], value[named], rank[rows][named]
    kinds = kind[rows][named].astype(np.int64)
    n_ranks = int(r.max()) + 1 if len(r) else 1
    key = (name_codes * len(KINDS) + kinds) * n_ranks + r
    uniq, group = np.unique(key, return_inverse=True)
    names = np.asarray(events["name"].cat.categories, dtype=object)
    return pd.DataFrame({
        "name": names[uniq // n_ranks // len(KINDS)] if len(uniq) else np.zeros(0, dtype=object),
        "kind": np.asarray(KINDS, dtype=object)[(uniq // n_ranks) % len(KINDS)],
        "rank": uniq % n_ranks,
        "count": np.bincount(group, minlength=len(uniq)).astype(np.int64),
        "time_us": np.bincount(group, weights=value, minlength=len(uniq)).astype(np.float64),
    })


def differences_from_times(times: pd.DataFrame, labels: np.ndarray, spread: float = RANK_TIME_SPREAD,
                           min_share: float = RANK_MIN_SHARE) -> pd.DataFrame:
    """:func:`rank_differences` from :func:`name_times` (of one profile, or concatenated over
    ranks summarized apart, with each rank's code); ``labels``: the rank labels by code."""
    n = len(labels)
    g = times.groupby(["name", "kind", "rank"], sort=True)
    count = g["count"].sum().unstack("rank", fill_value=0).reindex(columns=range(n), fill_value=0)
    time = g["time_us"].sum().unstack("rank", fill_value=0.0).reindex(columns=range(n), fill_value=0.0)
    if len(count) == 0 or n < 2:
        return _empty_differences(labels)
    c = count.to_numpy()
    t = time.to_numpy()
    mean = t.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sp = np.where(mean > 0, (t.max(axis=1) - t.min(axis=1)) / mean, 0.0)
    per_rank_total = t.sum(axis=0)
    slowest = t.argmax(axis=1)
    share = t.max(axis=1) / np.maximum(per_rank_total[slowest], 1e-12)
    counts_differ = c.min(axis=1) != c.max(axis=1)
    keep = (counts_differ | (sp >= spread)) & (share >= min_share)
    idx = count.index
    out = pd.DataFrame(
        {
            "name": idx.get_level_values("name"),
            "kind": idx.get_level_values("kind"),
            "comm": is_comm(idx.get_level_values("name").to_numpy()),
            "count_min": c.min(axis=1),
            "count_max": c.max(axis=1),
            "time_min_us": t.min(axis=1),
            "time_max_us": t.max(axis=1),
            "time_mean_us": mean,
            "spread": sp,
            "slowest_rank": labels[slowest],
        }
    )
    for j, lab in enumerate(labels.tolist()):
        out[f"count_rank{lab}"] = c[:, j]
    for j, lab in enumerate(labels.tolist()):
        out[f"time_us_rank{lab}"] = t[:, j]
    out = out[keep]
    order = np.lexsort((out["name"].astype(str).to_numpy(), -(out["time_max_us"] - out["time_min_us"]).to_numpy()))
    return out.iloc[order].reset_index(drop=True)


def _empty_differences(labels: np.ndarray) -> pd.DataFrame:
    dtypes = {"name": TEXT, "kind": TEXT, "comm": bool, "count_min": np.int64, "count_max": np.int64,
              "time_min_us": np.float64, "time_max_us": np.float64, "time_mean_us": np.float64,
              "spread": np.float64, "slowest_rank": LABEL}
    dtypes |= {f"count_rank{lab}": np.int64 for lab in labels.tolist()}
    dtypes |= {f"time_us_rank{lab}": np.float64 for lab in labels.tolist()}
    return empty_table(dtypes)


def rank_report(events: pd.DataFrame, meta: TraceMeta | None = None, stats: DeviceStats | None = None, *,
                table: pd.DataFrame | None = None, idle: pd.DataFrame | None = None) -> RankReport:
    """``stats``: the events' ``device_stats`` when already computed (see :func:`rank_table`);
    ``table`` and ``idle``: their ``rank_table`` and ``hta_idle_table`` when already computed."""
    rank, labels = process_codes(events)
    if idle is None:
        idle = hta_idle_table(events, rank)
    if table is None:
        table = rank_table(events, meta, stats, idle)
    if len(table) == 0:
        return RankReport(table, None, 0.0, _empty_differences(np.zeros(0, dtype=object)))
    return report_of(table, rank_differences(events), hta_idle_rows(idle, labels))


def report_of(table: pd.DataFrame, differences: pd.DataFrame, hta_idle: pd.DataFrame | None = None) -> RankReport:
    """The report of a rank table (one row per rank, as :func:`rank_table`) and its differences:
    the slowest rank (most ``compute_us``) and the imbalance; ``hta_idle``: see ``RankReport``."""
    compute = table["compute_us"].to_numpy()
    i = int(np.argmax(compute))
    med = float(np.median(compute))
    imbalance = (float(compute[i]) - med) / med if med > 0 else 0.0
    report = RankReport(table=table, slowest=table["rank"].iloc[i], imbalance=imbalance, differences=differences)
    return report if hta_idle is None else dataclasses.replace(report, hta_idle=hta_idle)


SPREAD_COLUMNS = ("ranks", "rank_min_us", "rank_max_us", "max_rank")


def rank_spread(per_rank: pd.DataFrame, keys: list[str], value: str, ranks: list[Any]) -> pd.DataFrame:
    """How a summed table's rows differ across ranks: ``per_rank`` holds one row per rank and key
    (a ``rank`` column, the ``keys``, ``value``); per key: ``ranks`` (how many of ``ranks`` have
    it), ``rank_min_us`` and ``rank_max_us`` of ``value`` over every rank (0 on a rank without the key:
    it spent nothing there), ``max_rank`` (the first rank with the most). One row per key, in the
    order the keys first appear."""
    if not len(per_rank):
        return empty_table({**{k: TEXT for k in keys}, "ranks": np.int64, "rank_min_us": np.float64,
                            "rank_max_us": np.float64, "max_rank": LABEL})
    by_key = per_rank.groupby(keys, sort=False, dropna=False)
    present = by_key["rank"].nunique()
    wide = per_rank.groupby([*keys, "rank"], sort=False, dropna=False)[value].sum().unstack("rank")
    wide = wide.reindex(index=present.index, columns=list(ranks)).fillna(0.0)
    values = wide.to_numpy(dtype=np.float64)
    out = present.rename("ranks").reset_index()
    out["ranks"] = out["ranks"].astype(np.int64)
    out["rank_min_us"] = values.min(axis=1)
    out["rank_max_us"] = values.max(axis=1)
    out["max_rank"] = pd.Series(np.asarray(list(ranks), dtype=object)[values.argmax(axis=1)], dtype=object)
    return out
