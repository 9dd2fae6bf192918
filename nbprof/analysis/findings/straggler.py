"""In profiles of several ranks: one rank's compute time (device time without collectives)
exceeds the median rank's by ``STRAGGLER_MIN_IMBALANCE`` or more; or the ranks' time in collectives
differs by ``STRAGGLER_MIN_WAIT_SHARE`` of the span or more: the ranks that spend long in
collectives are waiting there for the one that spends least (what shows on the CPU side, e.g.
gloo, where waiting can hide in compute: the slowest rank is then the one that waits least).
"high" from three times either threshold, else "medium"."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ...format import fmt_us
from ..ranks import RankReport
from ._common import Finding, TorchContext, pct, to_python

STRAGGLER_MIN_IMBALANCE = 0.10
STRAGGLER_MIN_WAIT_SHARE = 0.10


def find(ctx: TorchContext) -> Iterator[Finding]:
    if "rank" not in ctx.events.columns or len(ctx.rank_labels) < 2:
        return
    # the report is cached on the profile, shared with the Ranks tab
    yield from from_ranks(ctx.profile.ranks(), has_device=ctx.has_device)


def from_ranks(report: RankReport, *, has_device: bool) -> Iterator[Finding]:
    """The finding from a per-rank report (also of a folder of ranks summarized apart, which has
    no events table: ``nbprof.cluster``)."""
    table = report.table
    if len(table) < 2:
        return
    comm = table["comm_us"].to_numpy(dtype=np.float64)
    span = float(np.median(table["span_us"]))
    wait_share = float(comm.max() - comm.min()) / span if span > 0 else 0.0
    by_compute = report.imbalance >= STRAGGLER_MIN_IMBALANCE
    by_wait = wait_share >= STRAGGLER_MIN_WAIT_SHARE
    if not (by_compute or by_wait):
        return
    what = "device time" if has_device else "CPU time"
    diffs = report.differences
    diffs = diffs[~diffs["comm"].astype(bool)] if len(diffs) else diffs
    top = diffs["name"].head(3).astype(str).tolist() if len(diffs) else []
    comm_text = ", ".join(f"rank {r}: {fmt_us(v)}" for r, v in zip(table["rank"], comm))
    if by_compute:
        slowest = report.slowest
        slow = table[table["rank"] == slowest].iloc[0]
        median = float(np.median(table["compute_us"]))
        msg = (f"Rank {slowest} is the slowest: {fmt_us(slow['compute_us'])} of {what} outside collectives, "
               f"{pct(report.imbalance)} above the median rank ({fmt_us(median)}); the other ranks wait for it in "
               "their collectives. ")
    else:
        slowest = table["rank"].to_numpy()[int(np.argmin(comm))]
        msg = (f"Rank {slowest} is the slowest: the other ranks wait for it in their collectives (time in "
               f"collectives, {comm_text}, over a {fmt_us(span)} span). ")
    if top:
        msg += "Differing most: " + ", ".join(top) + ". "
    msg += ("Check its data (uneven batch sizes or sequence lengths, a slow loader), its GPU (clocks, other processes) "
            "and its host.")
    high = report.imbalance >= 3 * STRAGGLER_MIN_IMBALANCE or wait_share >= 3 * STRAGGLER_MIN_WAIT_SHARE
    severity = "high" if high else "medium"
    yield Finding(severity, msg,
                  {"slowest_rank": to_python(slowest), "imbalance": float(report.imbalance),
                   "compute_us": {str(r): float(v) for r, v in zip(table["rank"], table["compute_us"])},
                   "comm_us": {str(r): float(v) for r, v in zip(table["rank"], comm)}, "wait_share": wait_share,
                   "differing": top},
                  score=max(report.imbalance, wait_share))
