"""Host<->device copies (memcpy HtoD / DtoH) take at least ``COPY_MIN_SHARE`` of the device's
work time ("high" from ``COPY_HIGH_SHARE``); says how many came from pageable (unpinned) memory,
which ops launched them, and the bandwidth they achieved (bytes over their device time) per
direction and host memory, next to what such a link typically reaches (``LINK_TYPICAL_GBPS``).

``LINK_TYPICAL_GBPS`` is approximate, for a PCIe 4.0 x16 host link (A100 PCIe, most current
servers): 31.5 GB/s per direction is its raw rate (PCI-SIG), and CUDA's ``bandwidthTest`` sample
measures about 25 GB/s from pinned memory on such links; from pageable memory the driver first
copies the data into a pinned staging buffer on the CPU, which NVIDIA's "How to Optimize Data
Transfers in CUDA C/C++" (Harris, NVIDIA developer blog) measures at roughly half the pinned rate
or less. PCIe 5.0 (H100) doubles the raw rate; NVLink-C2C (Grace Hopper) is far above both. The
trace names the host memory of each copy ("Memcpy HtoD (Pinned -> Device)"); copies whose host
memory it does not name (ROCm writes "Host") are compared with no link."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE
from ...format import fmt_bytes, fmt_us
from ._common import Finding, TorchContext, pct

COPY_MIN_SHARE = 0.10
COPY_HIGH_SHARE = 0.30
# host memory kind -> GB/s a PCIe 4.0 x16 link typically reaches (approximate: the module doc)
LINK_TYPICAL_GBPS = {"pinned": 25.0, "pageable": 12.0}


def _direction(name: str) -> str:
    for d in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP"):
        if d in name:
            return d
    return "other"


def _host_memory(name: str) -> str:
    """The host side of a copy as the trace names it: "pinned", "pageable", or "" (not named)."""
    for kind in ("Pinned", "Pageable"):
        if kind in name:
            return kind.lower()
    return ""


def _gbps(nbytes: float, us: float) -> float:
    """Bytes over µs in 1e9 B/s (NaN without a duration)."""
    return nbytes / us / 1e3 if us > 0 else float("nan")


def find(ctx: TorchContext) -> Iterator[Finding]:
    memcpy = np.flatnonzero(ctx.kind == KIND_CODE["memcpy"])
    if len(memcpy) == 0:
        return
    names = ctx.names.to_numpy()[memcpy].astype(str)
    cats, codes = np.unique(names, return_inverse=True)
    direction = np.array([_direction(c) for c in cats], dtype=object)[codes]
    host_memory = np.array([_host_memory(c) for c in cats], dtype=object)[codes]
    pageable = host_memory == "pageable"
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
            us = float(ctx.dur_ns[memcpy[m]].sum() / 1000.0)
            moved = int(nbytes[memcpy[m]].sum())
            by_dir[d] = {"count": int(m.sum()), "us": us, "bytes": moved, "pageable": int((m & pageable).sum()),
                         "bandwidth_gbps": _gbps(float(moved), us)}
    # achieved bandwidth per direction and host memory (pinned / pageable), against the link's
    links = []
    for d in by_dir:
        for memory in ("pinned", "pageable"):
            m = host & (direction == d) & (host_memory == memory)
            if m.any():
                us = float(ctx.dur_ns[memcpy[m]].sum() / 1000.0)
                gbps = _gbps(float(nbytes[memcpy[m]].sum()), us)
                links.append({"direction": d, "host_memory": memory, "count": int(m.sum()), "bandwidth_gbps": gbps,
                              "typical_gbps": LINK_TYPICAL_GBPS[memory]})
    parent = ctx.events["parent"].to_numpy()[rows]
    ev_names = ctx.names.to_numpy()
    launched_by = pd.Series(np.where(parent >= 0, ev_names[np.maximum(parent, 0)].astype(str), "(unknown)"))
    ops = launched_by.value_counts().head(5)
    n_pageable = int((host & pageable).sum())
    total_bytes = int(nbytes[rows].sum())
    parts = ", ".join(f"{v['count']:,} {k} ({fmt_us(v['us'])}, {fmt_bytes(v['bytes'])})" for k, v in by_dir.items())
    msg = (f"Host-device copies take {pct(share)} of the GPU's work time: {parts}, mostly from "
           f"{ops.index[0]}. ")
    if links:
        msg += "Achieved " + "; ".join(
            f"{link['bandwidth_gbps']:.1f} GB/s {link['direction']} from {link['host_memory']} memory"
            if link["direction"] == "HtoD" else
            f"{link['bandwidth_gbps']:.1f} GB/s {link['direction']} to {link['host_memory']} memory"
            for link in links)
        msg += (" (a PCIe 4.0 x16 link typically reaches ~"
                + ", ".join(f"{v:g} GB/s {k}" for k, v in LINK_TYPICAL_GBPS.items()) + "). ")
    if n_pageable:
        msg += (f"{n_pageable:,} of them from pageable memory, which the CPU has to wait for: use "
                "DataLoader(pin_memory=True) and .to(device, non_blocking=True). ")
    msg += ("Keep tensors on the device between steps and create them there (torch.zeros(..., device='cuda')) "
            "instead of copying.")
    severity = "high" if share >= COPY_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"copies": int(len(rows)), "copy_us": copy_ns / 1000.0, "bytes": total_bytes,
                   "share_of_device_time": share, "pageable": n_pageable, "by_direction": by_dir,
                   "launched_by": {k: int(v) for k, v in ops.items()}, "links": links},
                  score=share)
