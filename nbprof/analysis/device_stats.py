"""Device statistics: how busy each GPU (and stream) was, and its peak memory.

What people read from Lightning's ``DeviceStatsMonitor``, computed from the profile itself:

- ``busy_us``: the union of the device's kernel, memcpy and memset intervals (work overlapping
  on two streams counts once); ``busy_fraction = busy_us / span_us``.
- ``span_us``: the profiled span: from the first to the last event of the profile (as the
  summary's "span"). A profile merged from ``--schedule`` cycles is recorded in windows, and only
  the windows count (the steps between cycles were not recorded); see :func:`profiled_windows`.
  A profile merged from several ranks has one span per rank.
- ``sm_efficiency``, ``achieved_occupancy_pct``: the TensorBoard plugin's "Est. SM Efficiency"
  and "Est. Achieved Occupancy", from CUPTI's per-kernel estimates in the trace: the kernel time
  weighted by ``min(blocks per SM, 1)`` over the span (a kernel with fewer blocks than SMs leaves
  SMs idle; where kernels overlap on several streams their shares add up, at most 1 at any
  moment, so it never exceeds ``busy_fraction``), and the mean est. achieved occupancy weighted
  by kernel time. NaN without estimates.
- ``steps_span_us``, ``steps_busy_fraction``, ``steps_sm_efficiency``,
  ``steps_achieved_occupancy_pct``: the same over the profiler steps' window (per rank, the first
  ``ProfilerStep#N`` start to the last one's end; device work clipped to it), NaN in a profile
  without steps. This is the TensorBoard plugin's window: its GPU utilization, est. SM efficiency
  and est. achieved occupancy divide by the steps' window when the profile has steps (by the whole
  profile otherwise); nbprof's unprefixed columns always use the whole profile. On the plugin's
  resnet50 sample the two windows give values up to 16 % apart.
- ``kernel_us``: kernels only; copies and fills are ``memcpy_us`` and ``memset_us`` (device work,
  all three, is ``device_us`` wherever a table sums it: ``steps()``, ``ranks()``).
- ``tensor_core_pct``: the share of ``kernel_us`` in kernels that run on the Tensor Cores
  (``tensor_cores`` in ``kernels()``: the TensorBoard plugin's rule, with nbprof's corrections),
  in %; the plugin's "Tensor Cores Utilization" over all kernel time. NaN without kernels, and on
  devices that are not NVIDIA GPUs (the rule reads NVIDIA's kernel names: an AMD GPU, which ROCm
  names ``cuda:N`` too, MTIA, XPU).
- ``peak_allocated_bytes`` / ``peak_reserved_bytes``: the largest "Total Allocated" and "Total
  Reserved" the allocator reported in the memory events (``--memory``); -1 when none were
  recorded. These are the allocator's totals, so memory allocated before the cell counts too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..meta import TraceMeta
from ..events import DEVICE_WORK_CODES, KIND_CODE, category_codes, category_mask, kind_mask, time_ns
from ._intervals import measure_within, union_segments
from ._tables import LABEL, TEXT, empty_table
from .kernels import uses_tensor_cores
from .memory import allocated_totals

__all__ = [
    "DeviceStats",
    "device_stats",
    "profiled_windows",
    "steps_windows",
    "span_ns",
    "process_codes",
    "DEVICE_COLUMNS",
    "STREAM_COLUMNS",
]


DEVICE_COLUMNS = (
    "device",
    "span_us",
    "busy_us",
    "busy_fraction",
    "idle_us",
    "kernel_us",
    "memcpy_us",
    "memset_us",
    "kernels",
    "memcpys",
    "memsets",
    "streams",
    "sm_efficiency",
    "achieved_occupancy_pct",
    "tensor_core_pct",
    "steps_span_us",
    "steps_busy_fraction",
    "steps_sm_efficiency",
    "steps_achieved_occupancy_pct",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "total_memory_bytes",
)
STREAM_DTYPES = {"rank": LABEL, "device": TEXT, "stream": np.int64, "busy_us": np.float64,
                 "busy_fraction": np.float64, "kernel_us": np.float64, "kernels": np.int64}
STREAM_COLUMNS = tuple(c for c in STREAM_DTYPES if c != "rank")


@dataclass(frozen=True)
class DeviceStats:
    """``devices``: one row per device (and rank); ``streams``: one row per device stream."""

    devices: pd.DataFrame
    streams: pd.DataFrame

    @property
    def busy_fraction(self) -> dict[str, float]:
        d = self.devices
        return {_key(r): float(r["busy_fraction"]) for _, r in d.iterrows()}

    @property
    def peak_allocated_bytes(self) -> dict[str, int]:
        d = self.devices
        return {_key(r): int(r["peak_allocated_bytes"]) for _, r in d.iterrows()}

    @property
    def peak_reserved_bytes(self) -> dict[str, int]:
        d = self.devices
        return {_key(r): int(r["peak_reserved_bytes"]) for _, r in d.iterrows()}


def _key(row: pd.Series) -> str:
    return f"rank {row['rank']} {row['device']}" if "rank" in row.index else str(row["device"])


def process_codes(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(rank code per event, rank labels)``: 0 everywhere for a single-process profile."""
    if "rank" not in events.columns:
        return np.zeros(len(events), dtype=np.int64), np.array([None], dtype=object)
    codes, labels = pd.factorize(events["rank"].to_numpy(), sort=True)
    return codes.astype(np.int64), np.asarray(labels, dtype=object)


def profiled_windows(events: pd.DataFrame, meta: TraceMeta | None = None) -> pd.DataFrame:
    """The recorded stretches of time: ``rank_code, start_ns, end_ns`` (disjoint per rank).

    - one window per rank: first event start to last event end;
    - ``--schedule`` profiles (merged cycles): one window per cycle, from a ``cycle`` column when
      the events have one, else from each cycle's recorded span (``meta.parts``: its origin
      and the length of the profiler's "Trace" span), widened to cover the cycle's events.
    """
    meta = meta or TraceMeta()
    rank, _ = process_codes(events)
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    if len(events) == 0:
        z = np.zeros(0, dtype=np.int64)
        return pd.DataFrame({"rank_code": z, "start_ns": z, "end_ns": z})
    if "cycle" in events.columns:
        cyc, _ = pd.factorize(events["cycle"].to_numpy())
        key = rank * (int(cyc.max()) + 1) + cyc
        frame = pd.DataFrame({"key": key, "rank_code": rank, "s": start, "e": end})
        g = frame.groupby("key", sort=True).agg(rank_code=("rank_code", "first"), start_ns=("s", "min"),
                                                end_ns=("e", "max"))
        seg = union_segments(g["start_ns"].to_numpy(), g["end_ns"].to_numpy(), g["rank_code"].to_numpy())
        return pd.DataFrame({"rank_code": seg[0], "start_ns": seg[1], "end_ns": seg[2]})
    parts = meta.parts
    if parts and "rank" not in events.columns and all(p.span_us for p in parts):
        origin = meta.origin_ns
        ws = np.array([p.origin_ns - origin for p in parts], dtype=np.int64)
        we = ws + np.array([int(round(float(p.span_us or 0) * 1000)) for p in parts], dtype=np.int64)
        # every event belongs to a cycle: widen the window that holds (or precedes) its start
        order = np.argsort(ws)
        ws, we = ws[order], we[order]
        idx = np.clip(np.searchsorted(ws, start, side="right") - 1, 0, len(ws) - 1)
        lo = np.full(len(ws), np.iinfo(np.int64).max)
        hi = np.full(len(ws), np.iinfo(np.int64).min)
        np.minimum.at(lo, idx, start)
        np.maximum.at(hi, idx, end)
        ws = np.where(lo < np.iinfo(np.int64).max, np.minimum(ws, lo), ws)
        we = np.maximum(we, hi)
        seg = union_segments(ws, we)
        return pd.DataFrame({"rank_code": seg[0], "start_ns": seg[1], "end_ns": seg[2]})
    if "rank" not in events.columns:  # one process: its first start to its last end, no grouping
        return pd.DataFrame({"rank_code": np.zeros(1, dtype=np.int64), "start_ns": [int(start.min())],
                             "end_ns": [int(end.max())]})
    frame = pd.DataFrame({"rank_code": rank, "s": start, "e": end})
    g = frame.groupby("rank_code", sort=True).agg(start_ns=("s", "min"), end_ns=("e", "max")).reset_index()
    return g[["rank_code", "start_ns", "end_ns"]]


def steps_windows(events: pd.DataFrame) -> pd.DataFrame:
    """The profiler steps' window of each rank that has steps: ``rank_code, start_ns, end_ns``, from
    the first ``ProfilerStep#N`` range's start to the last one's end (the TensorBoard plugin's
    window). Empty for a profile without steps."""
    rank, _ = process_codes(events)
    kind = events["kind"].cat.codes.to_numpy()
    is_step = category_mask(events["name"], lambda n: n.startswith("ProfilerStep#"))
    rows = np.flatnonzero(is_step & (kind == KIND_CODE["annotation"]) & ~events["merged"].to_numpy())
    start = time_ns(events["start_us"].to_numpy()[rows])
    end = start + time_ns(events["dur_us"].to_numpy()[rows])
    frame = pd.DataFrame({"rank_code": rank[rows], "s": start, "e": end})
    g = frame.groupby("rank_code", sort=True).agg(start_ns=("s", "min"), end_ns=("e", "max")).reset_index()
    return g[["rank_code", "start_ns", "end_ns"]]


def span_ns(windows: pd.DataFrame, n_ranks: int) -> np.ndarray:
    """Recorded time per rank code (sum of its windows)."""
    out = np.zeros(n_ranks, dtype=np.float64)
    np.add.at(out, windows["rank_code"].to_numpy(), (windows["end_ns"] - windows["start_ns"]).to_numpy())
    return out


def device_stats(events: pd.DataFrame, meta: TraceMeta | None = None, *,
                 windows: pd.DataFrame | None = None) -> DeviceStats:
    """Busy time and peak memory per device (and rank), busy time per stream; ``windows``: the
    events' ``profiled_windows`` when already computed."""
    meta = meta or TraceMeta()
    rank, rank_labels = process_codes(events)
    n_ranks = len(rank_labels)
    has_rank = "rank" in events.columns
    kind = events["kind"].cat.codes.to_numpy()
    work = kind_mask(kind, DEVICE_WORK_CODES)
    # by category (1 M device strings compared cost 0.05 s)
    is_mem = (kind == KIND_CODE["memory"]) & ~category_mask(events["device"], lambda d: d == "cpu")

    windows = profiled_windows(events, meta) if windows is None else windows
    spans = span_ns(windows, n_ranks)

    # device keys: (rank, device label) of device work and device memory, the labels in order
    relevant = work | is_mem
    dev_codes, dev_labels = category_codes(events["device"], np.flatnonzero(relevant))
    n_dev = len(dev_labels)
    dev_of = np.full(len(events), -1, dtype=np.int64)
    dev_of[relevant] = dev_codes
    key_all = rank * max(n_dev, 1) + dev_of
    n_keys = n_ranks * max(n_dev, 1)

    start = time_ns(events["start_us"].to_numpy())
    dur = time_ns(events["dur_us"].to_numpy())
    end = start + dur

    rows = np.flatnonzero(work)
    kw = key_all[rows]
    seg_g, seg_s, seg_e = union_segments(start[rows], end[rows], kw)
    keys = np.arange(n_keys)
    key_rank = keys // max(n_dev, 1)
    wk = _windows_of(windows, key_rank)
    busy = measure_within(seg_g, seg_s, seg_e, wk[0], wk[1], wk[2], n_keys)

    def per_key(mask_kind: int) -> tuple[np.ndarray, np.ndarray]:
        m = rows[kind[rows] == mask_kind]
        return (np.bincount(key_all[m], weights=dur[m], minlength=n_keys),
                np.bincount(key_all[m], minlength=n_keys))

    k_us, k_n = per_key(KIND_CODE["kernel"])
    tc_us = _tensor_core_ns(events, rows[kind[rows] == KIND_CODE["kernel"]], key_all, dur, n_keys)
    sm_eff, occupancy = _launch_estimates(events, rows[kind[rows] == KIND_CODE["kernel"]], key_all, start, dur,
                                          n_keys)
    c_us, c_n = per_key(KIND_CODE["memcpy"])
    s_us, s_n = per_key(KIND_CODE["memset"])
    stream = events["stream"].to_numpy()
    n_streams = (
        pd.DataFrame({"k": kw, "s": stream[rows]}).drop_duplicates().groupby("k").size().reindex(keys, fill_value=0)
        .to_numpy()
    )

    peak_alloc = np.full(n_keys, -1, dtype=np.int64)
    peak_res = np.full(n_keys, -1, dtype=np.int64)
    mrows = np.flatnonzero(is_mem)
    if len(mrows):
        np.maximum.at(peak_alloc, key_all[mrows], allocated_totals(events, mrows))
        np.maximum.at(peak_res, key_all[mrows], events["total_reserved_bytes"].to_numpy()[mrows])

    # the same over the profiler steps' window: device work clipped to it (see the module doc)
    st_windows = steps_windows(events)
    st_span = span_ns(st_windows, n_ranks)[key_rank]
    st_wk = _windows_of(st_windows, key_rank)
    st_busy = measure_within(seg_g, seg_s, seg_e, st_wk[0], st_wk[1], st_wk[2], n_keys)
    w_start = np.zeros(n_ranks, dtype=np.int64)
    w_end = np.full(n_ranks, -1, dtype=np.int64)  # a rank without steps: nothing falls in its window
    w_start[st_windows["rank_code"].to_numpy()] = st_windows["start_ns"].to_numpy()
    w_end[st_windows["rank_code"].to_numpy()] = st_windows["end_ns"].to_numpy()
    krows = rows[kind[rows] == KIND_CODE["kernel"]]
    # the kernels clipped to their rank's window (only theirs: the other rows are never read)
    clip_start = np.zeros(len(events), dtype=np.int64)
    clip_dur = np.zeros(len(events), dtype=np.int64)
    kr = rank[krows]
    clip_start[krows] = np.clip(start[krows], w_start[kr], np.maximum(w_end[kr], w_start[kr]))
    clip_dur[krows] = np.maximum(np.minimum(end[krows], w_end[kr]) - clip_start[krows], 0)
    st_sm, st_occupancy = _launch_estimates(events, krows[clip_dur[krows] > 0], key_all, clip_start, clip_dur,
                                            n_keys)

    total_mem = _device_memory(meta)
    present = (k_n + c_n + s_n > 0) | (peak_alloc >= 0)
    span_k = spans[key_rank]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(span_k > 0, busy / span_k, np.nan)
    dev_names = np.asarray(dev_labels, dtype=object)[keys % max(n_dev, 1)] if n_dev else np.array([], dtype=object)
    devices = pd.DataFrame(
        {
            "device": dev_names if n_dev else np.zeros(n_keys, dtype=object),
            "span_us": span_k / 1000.0,
            "busy_us": busy / 1000.0,
            "busy_fraction": frac,
            "idle_us": (span_k - busy) / 1000.0,
            "kernel_us": k_us / 1000.0,
            "memcpy_us": c_us / 1000.0,
            "memset_us": s_us / 1000.0,
            "kernels": k_n.astype(np.int64),
            "memcpys": c_n.astype(np.int64),
            "memsets": s_n.astype(np.int64),
            "streams": n_streams.astype(np.int64),
            "sm_efficiency": np.minimum(sm_eff / np.where(span_k > 0, span_k, np.nan), 1.0),
            "achieved_occupancy_pct": occupancy,
            "tensor_core_pct": np.where((k_us > 0) & _nvidia(dev_names if n_dev else np.zeros(n_keys, dtype=object), meta),
                                        100.0 * tc_us / np.where(k_us > 0, k_us, 1.0), np.nan),
            "steps_span_us": np.where(st_span > 0, st_span / 1000.0, np.nan),
            "steps_busy_fraction": np.where(st_span > 0, st_busy / np.where(st_span > 0, st_span, 1), np.nan),
            "steps_sm_efficiency": np.minimum(st_sm / np.where(st_span > 0, st_span, np.nan), 1.0),
            "steps_achieved_occupancy_pct": np.where(st_span > 0, st_occupancy, np.nan),
            "peak_allocated_bytes": peak_alloc,
            "peak_reserved_bytes": peak_res,
            "total_memory_bytes": np.array([total_mem.get(str(d), -1) for d in dev_names], dtype=np.int64)
            if n_dev else np.zeros(n_keys, dtype=np.int64),
        }
    )
    columns = list(DEVICE_COLUMNS)
    if has_rank:
        devices.insert(0, "rank", rank_labels[key_rank])
        columns.insert(0, "rank")
    devices = devices[present][columns].reset_index(drop=True) if n_dev else devices.iloc[0:0][columns]
    devices = devices.astype({"device": TEXT})  # the labels are strings: "str" in pandas 3, empty or not

    # per stream: busy time of each stream alone
    streams = _stream_stats(rows, kw, kind, stream, start, end, dur, spans, key_rank, n_dev, dev_labels,
                            rank_labels, has_rank, windows)
    return DeviceStats(devices=devices, streams=streams)


def _launch_estimates(events: pd.DataFrame, krows: np.ndarray, key_all: np.ndarray, start: np.ndarray,
                      dur: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Per device key: the integral over time of the SMs in use (each running kernel adds
    min(blocks per SM, 1), at most 1 at any moment), in ns; and the kernel-time-weighted mean
    est. achieved occupancy (NaN where no kernel has the estimates)."""
    bps = events["blocks_per_sm"].to_numpy()[krows]
    occ = events["occupancy_pct"].to_numpy()[krows]
    k, d = key_all[krows], dur[krows].astype(np.float64)
    has_bps, has_occ = ~np.isnan(bps), ~np.isnan(occ)
    # sweep the starts (+share) and ends (-share) of the kernels in time order, per device
    kb = k[has_bps]
    # min(blocks per SM, 1), and at least 0: a negative estimate (a broken writer's; -1e400 reads
    # as -inf) would otherwise cancel other kernels' shares, or, infinite, make the sum NaN from
    # there on, later devices included
    share = np.clip(bps[has_bps], 0.0, 1.0)
    t0 = start[krows][has_bps]
    t1 = t0 + dur[krows][has_bps]
    key = np.concatenate([kb, kb])
    at = np.concatenate([t0, t1])
    delta = np.concatenate([share, -share])
    order = np.lexsort((at, key))
    key, at, delta = key[order], at[order], delta[order]
    # the SMs in use after each boundary; every device's starts and ends cancel out, so the running
    # sum is back at 0 (rounding aside: clipped below) when the next device begins
    level = np.cumsum(delta)
    nxt = np.r_[at[1:], at[-1:]] if len(at) else at
    same_key = np.r_[key[1:] == key[:-1], False] if len(key) else np.zeros(0, dtype=bool)
    area = np.where(same_key, np.clip(level, 0.0, 1.0) * (nxt - at), 0.0)
    sm = np.bincount(key, weights=area, minlength=n_keys)
    sm = np.where(np.bincount(kb, minlength=n_keys) > 0, sm, np.nan)
    w = np.bincount(k[has_occ], weights=d[has_occ] * occ[has_occ], minlength=n_keys)
    t = np.bincount(k[has_occ], weights=d[has_occ], minlength=n_keys)
    with np.errstate(divide="ignore", invalid="ignore"):
        occupancy = np.where(t > 0, w / t, np.nan)
    return sm, occupancy


def _tensor_core_ns(events: pd.DataFrame, krows: np.ndarray, key_all: np.ndarray, dur: np.ndarray,
                    n_keys: int) -> np.ndarray:
    """Per device key: the time of kernels on the Tensor Cores, in ns (the rule is applied once
    per distinct kernel name)."""
    categories = events["name"].cat.categories
    used, inverse = np.unique(events["name"].cat.codes.to_numpy()[krows], return_inverse=True)
    on_tc = np.array([uses_tensor_cores(str(categories[c])) for c in used], dtype=bool)
    tc = krows[on_tc[inverse.reshape(-1)]]
    return np.bincount(key_all[tc], weights=dur[tc], minlength=n_keys).astype(np.float64)


def _stream_stats(rows, kw, kind, stream, start, end, dur, spans, key_rank, n_dev, dev_labels, rank_labels,
                  has_rank, windows) -> pd.DataFrame:
    columns = list(STREAM_COLUMNS)
    if has_rank:
        columns.insert(0, "rank")
    if len(rows) == 0:
        return empty_table(STREAM_DTYPES, columns)
    s_codes, s_labels = pd.factorize(stream[rows], sort=True)
    sk = kw * len(s_labels) + s_codes
    uk, inv = np.unique(sk, return_inverse=True)
    seg_g, seg_s, seg_e = union_segments(start[rows], end[rows], inv)
    dev_key = uk // len(s_labels)
    r_of = key_rank[dev_key]
    wk = _windows_of(windows, r_of)
    busy = measure_within(seg_g, seg_s, seg_e, wk[0], wk[1], wk[2], len(uk))
    is_kernel = kind[rows] == KIND_CODE["kernel"]
    k_us = np.bincount(inv, weights=np.where(is_kernel, dur[rows], 0), minlength=len(uk))
    k_n = np.bincount(inv, weights=is_kernel.astype(np.int64), minlength=len(uk))
    span = spans[r_of]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(span > 0, busy / span, np.nan)
    out = pd.DataFrame(
        {
            "device": np.asarray(dev_labels, dtype=object)[dev_key % max(n_dev, 1)],
            "stream": np.asarray(s_labels)[uk % len(s_labels)].astype(np.int64),
            "busy_us": busy / 1000.0,
            "busy_fraction": frac,
            "kernel_us": k_us / 1000.0,
            "kernels": k_n.astype(np.int64),
        }
    )
    if has_rank:
        out.insert(0, "rank", rank_labels[r_of])
    return out[columns]


def _windows_of(windows: pd.DataFrame, group_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The windows of each group (a device or stream key): those of the group's rank."""
    groups = pd.DataFrame({"group": np.arange(len(group_rank)), "rank_code": group_rank})
    m = groups.merge(windows, on="rank_code", how="inner")
    return (m["group"].to_numpy(np.int64), m["start_ns"].to_numpy(np.int64), m["end_ns"].to_numpy(np.int64))


def _nvidia(devices: np.ndarray, meta: TraceMeta) -> np.ndarray:
    """Which ``devices`` are NVIDIA GPUs: ``cuda:N``, unless the trace's ``deviceProperties`` say
    it is an AMD GPU (ROCm writes them under "cuda:N" too, with 64-thread wavefronts)."""
    amd = {f"cuda:{p.get('id', 0)}" for p in meta.device_properties
           if "AMD" in str(p.get("name", "")) or p.get("warpSize") == 64}
    return np.array([str(d).startswith("cuda:") and str(d) not in amd for d in devices], dtype=bool)


def _device_memory(meta: TraceMeta) -> dict[str, int]:
    """Total memory per device from the trace's ``deviceProperties``."""
    out = {}
    for p in meta.device_properties:
        try:
            out[f"cuda:{int(p.get('id', 0))}"] = int(p.get("totalGlobalMem", -1))
        except (TypeError, ValueError):
            continue
    return out
