"""The Kernels tab: one row per kernel, memcpy and memset name (``result.kernels()``), whether it
runs on the Tensor Cores and the copies' bandwidth, with the GPU's busy share, CUPTI's SM
efficiency and occupancy estimates and the Tensor Cores' share of kernel time above it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...format import esc, fmt_us
from ..datatable import datatable_html
from ..table import Column
from .base import Tab

__all__ = ["KERNELS"]


def render(report: Any) -> str:
    p = report.profile
    frame = p.kernels()
    cols = [Column("name", "Kernel", "kernel", 60), Column("kind", "Kind"), Column("count", "Calls", "count"),
            Column("share", "GPU time %", "share"), Column("device_total_us", "Total", "time_us"),
            Column("device_avg_us", "Avg", "time_us"), Column("device_min_us", "Min", "time_us"),
            Column("device_max_us", "Max", "time_us"), Column("launched_by", "Launched by", "name", 32)]
    if (frame["bytes"] > 0).any():
        # bytes moved by copies and memsets; a kernel's cell says "—" (does not apply), not "0 B"
        frame["bytes"] = frame["bytes"].where(frame["kind"] != "kernel")
        cols.append(Column("bytes", "Bytes", "bytes"))
    if (frame["launch_configs"] > 0).any():  # CUPTI's launch configuration (recorded with kernels)
        cols += [Column("grid", "Grid"), Column("block", "Block"), Column("registers_per_thread", "Regs", "count"),
                 Column("shared_memory_bytes", "Shared mem", "bytes"),
                 Column("blocks_per_sm", "Blocks/SM", "decimal"), Column("occupancy_pct", "Occupancy %", "decimal")]
    if (frame["kind"] == "kernel").any():
        # a kernel says yes / no; a copy or fill "—" (does not apply)
        frame["tensor_cores_text"] = np.where(frame["kind"] == "kernel",
                                              np.where(frame["tensor_cores"], "yes", "no"), "—")
        cols.append(Column("tensor_cores_text", "Tensor Cores"))
    if (frame["kind"] == "memcpy").any():
        cols.append(Column("bandwidth_gbps", "GB/s", "decimal"))
    cols.append(Column("streams", "Streams"))
    table = datatable_html(frame, cols, order=[("device_total_us", "desc")], page_length=report.limit or 0)
    return gpu_use_line(p) + table


def gpu_use_line(profile: Any) -> str:
    """Per device: busy share, and CUPTI's SM efficiency and occupancy estimates, over the whole
    profile and, when the profile has steps, over the profiler steps' window (the TensorBoard
    plugin's window), each labelled with its window."""
    lines = []
    for _, d in profile.device_stats.devices.iterrows():
        if not d["kernels"] and not d["memcpys"] and not d["memsets"]:
            continue
        who = f"rank {d['rank']} {d['device']}" if "rank" in d.index else str(d["device"])
        windows = [("", "whole profile")]
        if d["steps_span_us"] == d["steps_span_us"]:  # not NaN: the profile has steps
            windows.append(("steps_", "profiler steps, as the TensorBoard plugin"))
        for prefix, label in windows:
            parts = [f"GPU busy {100 * d[prefix + 'busy_fraction']:.1f}%"]
            if d[prefix + "sm_efficiency"] == d[prefix + "sm_efficiency"]:  # not NaN: the trace has the estimates
                parts.append(f"est. SM efficiency {100 * d[prefix + 'sm_efficiency']:.1f}%")
            if d[prefix + "achieved_occupancy_pct"] == d[prefix + "achieved_occupancy_pct"]:
                parts.append(f"est. achieved occupancy {d[prefix + 'achieved_occupancy_pct']:.1f}%")
            if not prefix and d["tensor_core_pct"] == d["tensor_core_pct"]:  # not NaN: kernels ran
                parts.append(f"Tensor Cores {d['tensor_core_pct']:.1f}% of kernel time")
            lines.append(f'<div class="nbprof-sub"><b>{esc(who)}</b>, {esc(label)} '
                         f'({esc(fmt_us(d[prefix + "span_us"]))}): {esc(" · ".join(parts))}</div>')
    if not lines:
        return ""
    hint = ("SM efficiency: the share of the window with SMs given work (a kernel with fewer blocks than "
            "SMs counts in part); occupancy: warps resident per SM over the maximum, weighted by kernel time "
            "(CUPTI's estimates); Tensor Cores: kernels whose names say they run on them (the "
            "TensorBoard plugin's rule, corrected for today's names). Whole profile: its first to last "
            "event; profiler steps: the first ProfilerStep's start to the last one's end")
    return "".join(lines) + f'<div class="nbprof-empty" style="padding-top:0">{esc(hint)}</div>'


def _missing(profile: Any) -> str:
    if not profile.collected["cuda"]:
        return "CUDA was not recorded: run with --cuda on a machine with a GPU."
    return "No CUDA kernels ran in this cell."


KERNELS = Tab("Kernels", render, applies=lambda p: p.summary.has_device, missing=_missing)
