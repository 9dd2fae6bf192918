"""Launched work that waited while its GPU idled: a kernel (memcpy, memset) starts at least
``LAUNCH_STALL_MIN_US`` (HTA's ``launch_delay_cutoff``) after both its launch call returned and
the work before it on its stream ended, and the time the whole device ran nothing during such
waits adds up to at least ``LAUNCH_STALL_MIN_SHARE`` of the span ("high" from
``LAUNCH_STALL_HIGH_SHARE``). A long launch delay behind other work on its stream is the CPU
running ahead (good); waiting on an idle stream while other streams run is a dependency doing its
job (an all-reduce waiting for its gradients); with the device idle, the work waited for
something else: an event, a synchronization, a peer."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ...events import DEVICE_WORK_CODES, kind_mask, time_ns
from ...format import fmt_us, plural, short_kernel_name
from .._intervals import measure_within, union_segments
from ..launches import matched_launches, stream_groups
from ._common import Finding, TorchContext, pct

LAUNCH_STALL_MIN_US = 100.0
LAUNCH_STALL_MIN_SHARE = 0.05
LAUNCH_STALL_HIGH_SHARE = 0.20


def waits(launches: pd.DataFrame, places: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per launch (row of ``p.launches()``): when its wait began, after its call returned and its
    stream's earlier work ended, and when it ended (the work's start), in ns; begin == end for work
    that started at once. ``places``: each launch's (rank code, device code) when known (from the
    events' codes); else from the table's text."""
    start = time_ns(launches["launch_start_us"].to_numpy()) + time_ns(launches["launch_delay_us"].to_numpy())
    end = start + time_ns(launches["gpu_dur_us"].to_numpy())
    call_end = time_ns(launches["launch_start_us"].to_numpy()) + time_ns(launches["cpu_dur_us"].to_numpy())
    if places is None:
        rank, _ = pd.factorize(launches["rank"].to_numpy(dtype=object), use_na_sentinel=False)  # None: a rank too
        device, _ = pd.factorize(launches["device"].to_numpy(dtype=object))
    else:
        rank, device = places
    stream, _ = stream_groups(rank, device, launches["stream"].to_numpy())
    prev_end = np.full(len(start), np.iinfo(np.int64).min)
    if len(start):
        order = np.lexsort((start, stream))
        s, e, g = start[order], end[order], stream[order].astype(np.int64)
        # the latest end of the stream's earlier work: a running max per stream (each stream moved
        # to its own stretch of the time axis, so one running max serves all)
        base = int(min(s.min(), e.min()))
        stride = int(max(s.max(), e.max()) - base) + 2
        run = np.maximum.accumulate(g * stride + (e - base)) - g * stride + base
        same = np.r_[False, g[1:] == g[:-1]]
        earlier = np.full(len(s), np.iinfo(np.int64).min)
        earlier[1:][same[1:]] = run[:-1][same[1:]]
        prev_end[order] = earlier
    begin = np.minimum(np.maximum(call_end, prev_end), start)
    return begin, start


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device or ctx.span_ns <= 0:
        return
    launches = ctx.profile.launches()
    if len(launches) == 0:
        return
    ev = ctx.events
    # the launches' rows of the events, in their order (launches.launch_table): their rank and
    # device codes, rather than 100 k rank labels and device strings hashed again
    rows, _ = matched_launches(ev)
    begin, start = waits(launches, (ctx.rank[rows], ev["device"].cat.codes.to_numpy()[rows]))
    long = (start - begin) >= LAUNCH_STALL_MIN_US * 1000
    if not long.any():
        return
    # the device's idle time inside those waits: the waits, merged per device, less its busy time
    work = np.flatnonzero(kind_mask(ctx.kind, DEVICE_WORK_CODES))
    devices = ev["device"].cat.categories
    n_dev = len(devices)
    # (rank code, device code) of each wait and of each work item
    rank_of_wait = pd.Index(ctx.rank_labels).get_indexer(launches["rank"].to_numpy()[long])
    w_dev = rank_of_wait * n_dev + devices.get_indexer(launches["device"].to_numpy()[long])
    b_dev = ctx.rank[work] * n_dev + ev["device"].cat.codes.to_numpy()[work]
    n = len(ctx.rank_labels) * n_dev
    waiting = union_segments(begin[long], start[long], w_dev)
    busy = union_segments(ctx.start_ns[work], ctx.end_ns[work], b_dev)
    waited = measure_within(*waiting, *waiting, n)
    covered = measure_within(*busy, *waiting, n)
    idle_ns = float((waited - covered).sum())
    share = idle_ns / ctx.span_ns
    if share < LAUNCH_STALL_MIN_SHARE:
        return
    names = launches["name"].to_numpy()[long]
    by_name = pd.Series(start[long] - begin[long]).groupby(names).sum().sort_values(ascending=False)
    top = [short_kernel_name(str(name), 50) for name in by_name.index[:3]]
    msg = (f"{plural(int(long.sum()), 'launch', 'launches')} waited {fmt_us(LAUNCH_STALL_MIN_US)} or more after their launch call returned, "
           f"with their stream free, and the GPU ran nothing for {fmt_us(idle_ns / 1000)} of those waits "
           f"({pct(share)} of the span); most before {', '.join(top)}. They waited for something other than "
           "the CPU and the GPU: an event (cudaStreamWaitEvent), a synchronization, another rank.")
    severity = "high" if share >= LAUNCH_STALL_HIGH_SHARE else "medium"
    yield Finding(severity, msg, {"launches": int(long.sum()), "idle_us": idle_ns / 1000, "share": share,
                                  "kernels": top}, score=share)
