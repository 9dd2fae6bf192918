"""Stretches of at least ``LAUNCH_MIN_KERNELS`` consecutive kernels shorter than
``TINY_KERNEL_US`` each, whose launch calls (``cudaLaunchKernel``...) took at least as long as the
kernels ran, cover at least ``LAUNCH_MIN_SHARE`` of the span ("high" from
``LAUNCH_HIGH_SHARE``)."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE, category_codes
from ...format import fmt_us
from ._common import Finding, TorchContext, pct

TINY_KERNEL_US = 10.0
LAUNCH_MIN_KERNELS = 20
LAUNCH_MIN_SHARE = 0.05
LAUNCH_HIGH_SHARE = 0.30


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device:
        return
    kern = np.flatnonzero(ctx.kind == KIND_CODE["kernel"])
    if len(kern) < LAUNCH_MIN_KERNELS:
        return
    # from the device column's codes: no device string made and hashed per kernel (100 k at 1 M events)
    dev_codes, dev_labels = category_codes(ctx.events["device"], kern)
    key = ctx.rank[kern] * len(dev_labels) + dev_codes
    order = np.lexsort((ctx.start_ns[kern], key))
    k = kern[order]
    key = key[order]
    tiny = ctx.dur_ns[k] < TINY_KERNEL_US * 1000
    # runs of consecutive tiny kernels on one device
    brk = np.r_[True, (key[1:] != key[:-1]) | ~tiny[1:] | ~tiny[:-1]]
    run_id = np.cumsum(brk) - 1
    run_id = np.where(tiny, run_id, -1)
    ok = run_id >= 0
    if not ok.any():
        return
    launches = ctx.launches
    rt = np.zeros(len(ctx.events))
    rt[launches["row"].to_numpy()] = launches["runtime_dur_ns"].to_numpy()
    frame = pd.DataFrame({"run": run_id[ok], "key": key[ok], "s": ctx.start_ns[k[ok]], "e": ctx.end_ns[k[ok]],
                          "d": ctx.dur_ns[k[ok]], "launch": rt[k[ok]]})
    runs = frame.groupby("run").agg(key=("key", "first"), n=("d", "size"), kernel=("d", "sum"),
                                    launch=("launch", "sum"), s=("s", "min"), e=("e", "max"))
    bound = runs[(runs["n"] >= LAUNCH_MIN_KERNELS) & (runs["launch"] >= runs["kernel"])]
    if len(bound) == 0:
        return
    wall = float((bound["e"] - bound["s"]).sum())
    share = wall / ctx.span_ns if ctx.span_ns else 0.0
    if share < LAUNCH_MIN_SHARE:
        return
    kernels = int(bound["n"].sum())
    kernel_ns = float(bound["kernel"].sum())
    launch_ns = float(bound["launch"].sum())
    in_runs = frame[frame["run"].isin(bound.index)]
    median = float(np.median(in_runs["d"])) / 1000.0
    longest = bound.assign(w=bound["e"] - bound["s"]).sort_values("w", ascending=False).iloc[0]
    msg = (f"{kernels:,} kernels in {len(bound)} stretch{'' if len(bound) == 1 else 'es'} of tiny kernels (median {fmt_us(median)}) cost more CPU "
           f"time to launch ({fmt_us(launch_ns / 1000)}) than they ran on the GPU ({fmt_us(kernel_ns / 1000)}); "
           f"{'that stretch spans' if len(bound) == 1 else 'those stretches span'} {pct(share)} of the profile. Fuse them (torch.compile), replay them as a CUDA graph "
           "(torch.compile(mode='reduce-overhead'), torch.cuda.graphs) or give each kernel more work (bigger batches).")
    severity = "high" if share >= LAUNCH_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"stretches": int(len(bound)), "kernels": kernels, "kernel_us": kernel_ns / 1000.0,
                   "launch_us": launch_ns / 1000.0, "wall_us": wall / 1000.0, "share_of_span": share,
                   "median_kernel_us": median, "tiny_kernel_us": TINY_KERNEL_US,
                   "longest": {"start_us": float(longest["s"]) / 1000.0, "kernels": int(longest["n"]),
                               "wall_us": float(longest["w"]) / 1000.0}},
                  score=share)
