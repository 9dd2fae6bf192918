"""Communication not hidden behind compute: on some rank, communication kernels run while no
compute kernel does (HTA's comm-comp overlap, the rest) for at least ``COMM_EXPOSED_MIN_SHARE``
of the GPU's window (first kernel to last; "high" from ``COMM_EXPOSED_HIGH_SHARE``). One finding
for all ranks: the rank with the most, and how many ranks are over the threshold."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ...format import fmt_us
from ._common import Finding, TorchContext, pct, to_python

COMM_EXPOSED_MIN_SHARE = 0.10
COMM_EXPOSED_HIGH_SHARE = 0.30


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device:
        return
    table = ctx.profile._rank_parts[0]  # ranks().table, cached on the profile (no differences computed)
    window = table["breakdown_window_us"].to_numpy(dtype=np.float64)
    exposed = table["breakdown_exposed_comm_us"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(window > 0, exposed / window, 0.0)
    over = share >= COMM_EXPOSED_MIN_SHARE
    if not over.any():
        return
    i = int(np.argmax(share))
    row = table.iloc[i]
    who = "C" if row["rank"] is None else f"On rank {row['rank']}, c"
    others = int(over.sum()) - 1
    msg = (f"{who}ommunication ran with no compute beside it for {fmt_us(exposed[i])}, {pct(share[i])} of the "
           f"GPU's time (only {row['overlap_pct']:.0f}% of its {fmt_us(row['breakdown_comm_us'])} of communication "
           "overlapped compute)")
    msg += f"; {others} other rank{'s' if others != 1 else ''} over {pct(COMM_EXPOSED_MIN_SHARE)}. " if others else ". "
    msg += ("Overlap it: DDP's gradient buckets (bucket_cap_mb) start all-reduces during the backward pass; FSDP "
            "prefetches (forward_prefetch, backward_prefetch); larger batches add compute to hide it behind.")
    severity = "high" if share[i] >= COMM_EXPOSED_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"rank": to_python(row["rank"]), "exposed_comm_us": float(exposed[i]),
                   "comm_us": float(row["breakdown_comm_us"]), "overlap_pct": float(row["overlap_pct"]),
                   "share": float(share[i]), "ranks_over": int(over.sum())},
                  score=float(share[i]))
