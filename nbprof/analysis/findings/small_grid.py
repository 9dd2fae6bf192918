"""At least ``SMALL_GRID_MIN_SHARE`` of a device's kernel time is in kernels launched with fewer
blocks than the GPU has SMs (CUPTI's "blocks per SM" below 1): part of the GPU idles while they
run. Names the ``SMALL_GRID_SHOWN`` biggest such kernels with their launching ops. "medium" when
the device is busy at least ``SMALL_GRID_BUSY_SHARE`` of the span (then filling it is what would
pay off), else "low". Needs the estimates in the trace (torch's CUPTI traces have them).
Communication kernels (NCCL / RCCL) are left out: they run one block per channel by design,
and more blocks would not make them faster."""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np

from ...events import KIND_CODE, category_codes, category_mask, values_at
from ...format import fmt_us, short_kernel_name
from ..breakdown import COMM_PATTERN
from ._common import Finding, TorchContext, pct

SMALL_GRID_MIN_SHARE = 0.30
SMALL_GRID_BUSY_SHARE = 0.50
SMALL_GRID_SHOWN = 3


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device:
        return
    ev = ctx.events
    kern = np.flatnonzero((ctx.kind == KIND_CODE["kernel"]) & ~np.isnan(ev["blocks_per_sm"].to_numpy()))
    kern = kern[~category_mask(ev["name"], COMM_PATTERN.search, rows=kern)]
    if len(kern) == 0:
        return
    bps = ev["blocks_per_sm"].to_numpy()[kern]
    # grouped by category codes, not by 100 k name and device strings (0.02 s at 1 M events)
    device_code, device_labels = category_codes(ev["device"], kern)  # (rank, device) in the labels' order
    group_keys, group_of = np.unique(ctx.rank[kern] * len(device_labels) + device_code, return_inverse=True)
    group_of = group_of.reshape(-1)
    name_code, name_labels = category_codes(ev["name"], kern)
    dur = ctx.dur_ns[kern].astype(np.float64)
    busy = ctx.profile.device_stats.devices
    sms = {int(d.get("id", -1)): d.get("numSms") for d in ctx.meta.device_properties}
    for g, key in enumerate(group_keys):
        r, dev = int(key // len(device_labels)), str(device_labels[key % len(device_labels)])
        rows = np.flatnonzero(group_of == g)
        total = float(dur[rows].sum())
        small = rows[bps[rows] < 1.0]
        small_ns = float(dur[small].sum())
        share = small_ns / total if total else 0.0
        if share < SMALL_GRID_MIN_SHARE:
            continue
        label = dev if ctx.rank_labels[r] is None else f"rank {ctx.rank_labels[r]} {dev}"
        stats = busy[busy["device"] == dev]
        if "rank" in stats.columns:
            stats = stats[stats["rank"] == ctx.rank_labels[r]]
        busy_share = float(stats["busy_fraction"].iloc[0]) if len(stats) else float("nan")
        sm_eff = float(stats["sm_efficiency"].iloc[0]) if len(stats) else float("nan")
        # per kernel name: its time and its first launch; the biggest first (equal times: the first
        # launched first)
        codes, first_launch, per_name = np.unique(name_code[small], return_index=True, return_inverse=True)
        per_name = per_name.reshape(-1)
        small_dur, small_bps = dur[small], bps[small]
        d = np.bincount(per_name, weights=small_dur, minlength=len(codes))
        in_launch_order = np.argsort(first_launch, kind="stable")
        shown = in_launch_order[np.argsort(-d[in_launch_order], kind="stable")][:SMALL_GRID_SHOWN]
        launched = ev["parent"].to_numpy()[kern[small[first_launch[shown]]]]  # the op that launched it (Kernels tab)
        op_names = values_at(ev["name"], np.maximum(launched, 0))
        # the shown kernels' blocks per SM summed exactly (fsum): a kernel launched alike every time
        # reads its one value (bincount's running sum ends a few ulps off it)
        exact_w = [math.fsum(small_dur[per_name == i] * small_bps[per_name == i]) for i in shown]
        top: list[dict[str, Any]] = [
            {"kernel": str(name_labels[c]), "kernel_us": float(dk) / 1000.0,
             "blocks_per_sm": float(wk / dk) if dk else 0.0, "launched_by": op if o >= 0 else ""}
            for c, dk, wk, o, op in zip(codes[shown], d[shown], exact_w, launched, op_names)]
        first = top[0]
        n_sms = sms.get(int(dev.partition(":")[2] or 0)) if ":" in dev else None
        sm_text = f" ({n_sms} on this GPU)" if n_sms else ""
        by = f", launched by {first['launched_by']}" if first["launched_by"] else ""
        msg = (f"{pct(share)} of {label}'s kernel time ({fmt_us(small_ns / 1000)}) is in kernels launched with "
               f"fewer blocks than the GPU has SMs{sm_text}, so part of the GPU idles while they run: e.g. "
               f"{short_kernel_name(first['kernel'], 60)} ({first['blocks_per_sm']:.2f} blocks per SM, "
               f"{fmt_us(first['kernel_us'])}{by}). Give each kernel more work (bigger batches or tensors), run "
               "independent work side by side (CUDA streams) or fuse small ops (torch.compile).")
        if sm_eff == sm_eff:
            msg += f" Est. SM efficiency over the profile: {pct(sm_eff)}."
        severity = "medium" if busy_share >= SMALL_GRID_BUSY_SHARE else "low"
        yield Finding(severity, msg,
                      {"device": label, "share_of_kernel_time": share, "small_grid_us": small_ns / 1000.0,
                       "kernel_us": total / 1000.0, "busy_fraction": busy_share, "sm_efficiency": sm_eff,
                       "sms": n_sms, "top_kernels": top},
                      score=share * (busy_share if busy_share == busy_share else 0.0))
