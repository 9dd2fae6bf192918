"""The CPU blocked waiting for the device: ``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
``cudaEventSynchronize``, synchronous ``cudaMemcpy`` (and HIP's and MTIA's) runtime calls, and any
runtime call whose device side is a synchronization (a ``sync`` event with its correlation id,
other than a stream's wait for another), which ``.item()``,
``.cpu()``, ``print(tensor)``, ``if tensor:`` and data-dependent shapes (``nonzero``) cause. A call
after which the process launches no more device work is not counted (a final synchronize before
reading a timer costs no overlap). Fires when the blocked time is at least ``SYNC_MIN_SHARE`` of
the profiled span ("high" from ``SYNC_HIGH_SHARE``). On Apple's MPS device, where torch records no
device work and no runtime calls, the waits are the self CPU time of the ops that wait for the
device (``.item()``'s ``aten::_local_scalar_dense``, copies, which wait when they copy to the CPU),
with the same thresholds."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE, category_mask
from ...format import fmt_us, plural
from .._intervals import union_segments
from ._common import MPS_WAIT_OPS, SCALAR_READ_OPS, Finding, TorchContext, pct

SYNC_MIN_SHARE = 0.05
SYNC_HIGH_SHARE = 0.20

SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpyFromSymbol",
        "cudaMemcpyToSymbol",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipMemcpy",
        "synchronizeStream",  # MTIA's runtime
        "synchronize",
    }
)


def blocking_calls(ctx: TorchContext) -> np.ndarray:
    """The rows of the runtime calls that block the CPU until the device catches up (see the
    module doc), every one of them (the ``sync_line`` finding reads them too)."""
    is_call = ctx.kind == KIND_CODE["runtime"]
    is_sync = category_mask(ctx.names, lambda n: n in SYNC_CALLS) & is_call
    # the device side of a blocking synchronization names its runtime call by correlation id
    # ("Event Sync", "Stream Sync", "Context Sync"; a stream waiting for another blocks no CPU)
    correlation = ctx.events["correlation"].to_numpy()
    device_sync = ((ctx.kind == KIND_CODE["sync"]) & (correlation > 0)
                   & ~category_mask(ctx.names, lambda n: "wait" in n.lower()))
    if device_sync.any():
        is_sync |= is_call & np.isin(correlation, correlation[device_sync])
    return np.flatnonzero(is_sync)


def find(ctx: TorchContext) -> Iterator[Finding]:
    if ctx.on_mps:
        yield from _mps_waits(ctx)
        return
    if not ctx.has_device:
        return
    rows = blocking_calls(ctx)
    if len(rows) == 0:
        return
    # calls after which the process launched nothing more cost no overlap: leave them out
    launches = ctx.launches
    last_launch = np.full(int(ctx.process.max()) + 1, np.iinfo(np.int64).min)
    if len(launches):
        np.maximum.at(last_launch, launches["process"].to_numpy(), launches["launch_ns"].to_numpy())
    rows = rows[ctx.end_ns[rows] <= last_launch[ctx.process[rows]]]
    if len(rows) == 0:
        return
    blocked_ns = float(ctx.dur_ns[rows].sum())
    # the share of the span: time with at least one thread of a process waiting (threads that
    # wait at once count once: summed, MTIA's many threads made it 265 % of the span)
    _, seg_s, seg_e = union_segments(ctx.start_ns[rows], ctx.end_ns[rows], ctx.process[rows])
    waiting_ns = float((seg_e - seg_s).sum())
    share = waiting_ns / ctx.span_ns if ctx.span_ns else 0.0
    if share < SYNC_MIN_SHARE:
        return
    names = ctx.names.to_numpy()
    by_call = pd.Series(ctx.dur_ns[rows] / 1000.0).groupby(names[rows].astype(str)).agg(["size", "sum"])
    parent = ctx.events["parent"].to_numpy()
    op_rows = parent[rows]
    op_names = np.where(op_rows >= 0, names[np.maximum(op_rows, 0)].astype(str), "(no op: torch.cuda.synchronize?)")
    by_op = (pd.DataFrame({"op": op_names, "us": ctx.dur_ns[rows] / 1000.0}).groupby("op")["us"]
             .agg(["size", "sum"]).sort_values("sum", ascending=False))
    scalar_reads = int(category_mask(ctx.names, lambda n: n in SCALAR_READ_OPS).sum())
    top = by_op.index[0]
    msg = (f"The CPU waited for the GPU {'once' if len(rows) == 1 else f'{len(rows):,} times'}, {fmt_us(blocked_ns / 1000)} in all "
           + (f"({pct(share)} of the span), " if waiting_ns == blocked_ns else
              f"on several threads at once (a thread was waiting {pct(share)} of the span), ")
           + f"most under {top}. ")
    if scalar_reads:
        msg += f"{scalar_reads:,} scalar reads (.item(), float(t), bool(t), .tolist()) each force one. "
    msg += ("Keep values on the device (accumulate the loss as a tensor, log every N steps), avoid "
            "data-dependent shapes (nonzero, masked_select, boolean indexing) and printing tensors in the loop, "
            "and drop torch.cuda.synchronize() calls that are not needed for timing.")
    severity = "high" if share >= SYNC_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"calls": len(rows), "blocked_us": blocked_ns / 1000.0, "waiting_us": waiting_ns / 1000.0,
                   "share_of_span": share,
                   "scalar_reads": scalar_reads,
                   "by_call": {k: {"count": int(v["size"]), "us": float(v["sum"])} for k, v in by_call.iterrows()},
                   "by_op": {k: {"count": int(v["size"]), "us": float(v["sum"])}
                             for k, v in by_op.head(5).iterrows()}},
                  score=share)


def _mps_waits(ctx: TorchContext) -> Iterator[Finding]:
    """The waits of a run on the MPS device: the self CPU time of the ops that wait for it."""
    p = ctx.profile
    avg = p.key_averages("op")
    avg = avg[(avg["kind"].astype(str) == "op") & avg["name"].astype(str).isin(MPS_WAIT_OPS)]
    waits = avg[avg["self_cpu_us"] > 0].sort_values("self_cpu_us", ascending=False)
    blocked_us = float(waits["self_cpu_us"].sum())
    share = blocked_us * 1000.0 / ctx.span_ns if ctx.span_ns else 0.0
    if share < SYNC_MIN_SHARE:
        return
    calls = int(waits["count"].sum())
    top = str(waits["name"].iloc[0])
    scalar_reads = int(avg.loc[avg["name"].astype(str).isin(SCALAR_READ_OPS), "count"].sum())
    msg = (f"The CPU waited for the MPS device up to {fmt_us(blocked_us)} ({pct(share)} of the span), in "
           f"{plural(calls, 'call')} of ops that wait for it, most in {top}: their time is the device's work queued "
           f"before them (torch records none on MPS), not their own cost. ")
    if scalar_reads:
        msg += (f"{plural(scalar_reads, 'scalar read')} (.item(), float(t), bool(t), .tolist()) "
                f"{'waits' if scalar_reads == 1 else 'wait'} for the device. ")
    msg += ("Keep values on the device (accumulate the loss as a tensor, log every N steps) and copy to the CPU "
            "rarely; torch.mps.synchronize() before reading a timer.")
    severity = "high" if share >= SYNC_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"calls": calls, "blocked_us": blocked_us, "share_of_span": share, "scalar_reads": scalar_reads,
                   "device": "mps",
                   "by_op": {str(r["name"]): {"count": int(r["count"]), "us": float(r["self_cpu_us"])}
                             for _, r in waits.head(5).iterrows()}},
                  score=share)
