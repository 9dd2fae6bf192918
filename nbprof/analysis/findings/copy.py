"""Host<->device copies (memcpy HtoD / DtoH) take at least ``COPY_MIN_SHARE`` of the device's
work time ("high" from ``COPY_HIGH_SHARE``); says how many came from pageable (unpinned) memory
and which ops launched them."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE
from ...format import fmt_bytes, fmt_us
from ._common import Finding, TorchContext, pct

COPY_MIN_SHARE = 0.10
COPY_HIGH_SHARE = 0.30


def _direction(name: str) -> str:
    for d in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP"):
        if d in name:
            return d
    return "other"


def find(ctx: TorchContext) -> Iterator[Finding]:
    memcpy = np.flatnonzero(ctx.kind == KIND_CODE["memcpy"])
    if len(memcpy) == 0:
        return
    names = ctx.names.to_numpy()[memcpy].astype(str)
    cats, codes = np.unique(names, return_inverse=True)
    direction = np.array([_direction(c) for c in cats], dtype=object)[codes]
    pageable = np.array(["Pageable" in c for c in cats], dtype=bool)[codes]
    host = np.isin(direction, ["HtoD", "DtoH"])
    rows = memcpy[host]
    if len(rows) == 0:
        return
    work_ns = float(ctx.dur_ns[ctx.work].sum())
    copy_ns = float(ctx.dur_ns[rows].sum())
    share = copy_ns / work_ns if work_ns else 0.0
    if share < COPY_MIN_SHARE:
        return
    nbytes = ctx.events["bytes"].to_numpy()
    by_dir = {}
    for d in ("HtoD", "DtoH"):
        m = host & (direction == d)
        if m.any():
            by_dir[d] = {"count": int(m.sum()), "us": float(ctx.dur_ns[memcpy[m]].sum() / 1000.0),
                         "bytes": int(nbytes[memcpy[m]].sum()), "pageable": int((m & pageable).sum())}
    parent = ctx.events["parent"].to_numpy()[rows]
    ev_names = ctx.names.to_numpy()
    launched_by = pd.Series(np.where(parent >= 0, ev_names[np.maximum(parent, 0)].astype(str), "(unknown)"))
    ops = launched_by.value_counts().head(5)
    n_pageable = int((host & pageable).sum())
    total_bytes = int(nbytes[rows].sum())
    parts = ", ".join(f"{v['count']:,} {k} ({fmt_us(v['us'])}, {fmt_bytes(v['bytes'])})" for k, v in by_dir.items())
    msg = (f"Host-device copies take {pct(share)} of the GPU's work time: {parts}, mostly from "
           f"{ops.index[0]}. ")
    if n_pageable:
        msg += (f"{n_pageable:,} of them from pageable memory, which the CPU has to wait for: use "
                "DataLoader(pin_memory=True) and .to(device, non_blocking=True). ")
    msg += ("Keep tensors on the device between steps and create them there (torch.zeros(..., device='cuda')) "
            "instead of copying.")
    severity = "high" if share >= COPY_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"copies": int(len(rows)), "copy_us": copy_ns / 1000.0, "bytes": total_bytes,
                   "share_of_device_time": share, "pageable": n_pageable, "by_direction": by_dir,
                   "launched_by": {k: int(v) for k, v in ops.items()}},
                  score=share)
