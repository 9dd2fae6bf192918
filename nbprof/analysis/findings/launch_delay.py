"""Launched work that waited on an idle stream: a kernel (memcpy, memset) starts at least
``LAUNCH_STALL_MIN_US`` (HTA's ``launch_delay_cutoff``) after both its launch call returned and
the work before it on its stream ended, and such waits add up to at least
``LAUNCH_STALL_MIN_SHARE`` of the span ("high" from ``LAUNCH_STALL_HIGH_SHARE``). A long launch
delay behind other work on the stream is the CPU running ahead (good); on an idle stream the
work waited for something else: an event another stream records, a synchronization."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ...format import fmt_us, short_kernel_name
from ._common import Finding, TorchContext, pct

LAUNCH_STALL_MIN_US = 100.0
LAUNCH_STALL_MIN_SHARE = 0.05
LAUNCH_STALL_HIGH_SHARE = 0.20


def stalls(launches: pd.DataFrame) -> np.ndarray:
    """Per launch (row of ``p.launches()``): how long the work waited after its call returned and
    its stream's earlier work ended (µs, 0 where it started at once)."""
    if len(launches) == 0:
        return np.zeros(0)
    start = (launches["launch_start_us"] + launches["launch_delay_us"]).to_numpy(dtype=np.float64)
    end = start + launches["gpu_dur_us"].to_numpy(dtype=np.float64)
    call_end = (launches["launch_start_us"] + launches["cpu_dur_us"]).to_numpy(dtype=np.float64)
    stream, _ = pd.factorize(pd.MultiIndex.from_arrays([launches["rank"].astype(str), launches["device"],
                                                        launches["stream"]]))
    order = np.lexsort((start, stream))
    s, e, g = start[order], end[order], stream[order]
    prev_end = np.full(len(s), -np.inf)
    # the latest end of the stream's earlier work (a running max that restarts at each stream)
    offset = g.astype(np.float64) * (float(np.nanmax(e) - np.nanmin(s)) + 1.0) * 2
    run = np.maximum.accumulate(e + offset) - offset
    same = np.r_[False, g[1:] == g[:-1]]
    prev_end[1:][same[1:]] = run[:-1][same[1:]]
    out = np.empty(len(s))
    out[order] = np.maximum(s - np.maximum(call_end[order], prev_end), 0.0)
    return out


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device or ctx.span_ns <= 0:
        return
    launches = ctx.profile.launches()
    wait = stalls(launches)
    long = wait >= LAUNCH_STALL_MIN_US
    total = float(wait[long].sum())
    share = total * 1000.0 / ctx.span_ns
    if share < LAUNCH_STALL_MIN_SHARE:
        return
    names = launches["name"].to_numpy()[long]
    by_name = pd.Series(wait[long]).groupby(names).sum().sort_values(ascending=False)
    top = [short_kernel_name(str(n), 50) for n in by_name.index[:3]]
    msg = (f"{int(long.sum())} launches waited {fmt_us(LAUNCH_STALL_MIN_US)} or more on an idle stream after their "
           f"launch call returned ({fmt_us(total)} in all, {pct(share)} of the span), most before "
           f"{', '.join(top)}. They waited for another stream's event or a synchronization: see the timeline's "
           "flow arrows and the sync events on their stream.")
    severity = "high" if share >= LAUNCH_STALL_HIGH_SHARE else "medium"
    yield Finding(severity, msg, {"launches": int(long.sum()), "waited_us": total, "share": share, "kernels": top},
                  score=share)
