"""The Memory tab (``--memory``): the allocated-memory curve, each operator's allocations, and
the blocks held at each device's peak (what to free or shrink)."""

from __future__ import annotations

from typing import Any

from ...format import esc, fmt_bytes
from ..datatable import datatable_html
from ..figure import drawing_html
from ..table import Column
from .base import Tab

__all__ = ["MEMORY"]


def render(report: Any) -> str:
    from ..memory import memory_curve_svg

    p = report.profile
    s = p.summary
    frame = p.key_averages("op")
    frame = frame[(frame["cpu_mem_bytes"] != 0) | (frame["device_mem_bytes"] != 0)
                  | (frame["self_cpu_mem_bytes"] != 0) | (frame["self_device_mem_bytes"] != 0)]
    main = "self_device_mem_bytes" if s.has_device and frame["self_device_mem_bytes"].abs().sum() else "self_cpu_mem_bytes"
    frame = frame.sort_values(main, ascending=False, kind="stable")
    cols = [Column("name", "Name", "name", 70), Column("count", "Calls", "count")]
    if s.has_device:
        cols += [Column("self_device_mem_bytes", "Self CUDA Mem", "bytes"),
                 Column("device_mem_bytes", "CUDA Mem", "bytes")]
    cols += [Column("self_cpu_mem_bytes", "Self CPU Mem", "bytes"), Column("cpu_mem_bytes", "CPU Mem", "bytes"),
             Column("kind", "Kind")]
    ev = p._events
    curve = memory_curve_svg(p._memory_curve, float((ev["start_us"] + ev["dur_us"]).max()))
    table = datatable_html(frame, cols, order=[(main, "desc")], page_length=report.limit or 0,
                           caption="memory allocated (+) and freed (−) inside each operator; self = not in its children")
    return (drawing_html(curve, "the memory chart", style=False) if curve else "") + table + held_at_peak(p)


def held_at_peak(profile: Any) -> str:
    """Per device, the blocks held when allocated memory peaked: what to free or shrink."""
    from ...analysis.memory import memory_peaks

    allocs = profile.allocations()
    if not len(allocs) or "rank" in allocs.columns:
        return ""
    out = []
    peaks = memory_peaks(profile._memory_curve)
    order = sorted(peaks, key=lambda pk: (pk.device == "cpu", pk.device))  # GPUs first
    for peak in order:
        held = profile.alive_at(peak.peak_time_us, peak.device)
        if not len(held):
            continue
        during = held[held["alloc_us"].notna()].copy()
        # what the allocator held when the profile started, less what of it was freed by the peak
        freed_early = allocs[(allocs["device"] == peak.device) & allocs["alloc_us"].isna()
                             & (allocs["free_us"] <= peak.peak_time_us)]["bytes"].sum()
        older = max(peak.start_allocated_bytes - int(freed_early), 0)
        head = (f"Held on {peak.device} at its peak ({fmt_bytes(peak.peak_allocated_bytes)} at "
                f"{peak.peak_time_us / 1000:.2f} ms): {len(during):,} block{'' if len(during) == 1 else 's'} "
                f"allocated during the profile "
                f"({fmt_bytes(int(during['bytes'].sum()))})")
        if older:
            head += f" and {fmt_bytes(older)} allocated before it"
        head += _unaccounted(int(during["bytes"].sum()) + older - peak.peak_allocated_bytes)
        out.append(f'<div class="nbprof-sub" style="margin-top:10px"><b>{esc(head)}</b></div>')
        if len(during):
            during["age_us"] = peak.peak_time_us - during["alloc_us"]
            cols = [Column("bytes", "Size", "bytes"), Column("op", "Allocated in", "name", 40),
                    Column("top_op", "Under", "name", 48), Column("alloc_us", "At", "time_us"),
                    Column("age_us", "Held for", "time_us"), Column("free_us", "Freed at", "time_us")]
            out.append(datatable_html(during, cols, order=[("bytes", "desc")], page_length=10,
                                      caption="blocks alive at the peak, biggest first (Freed at — : "
                                              "still held when the profile ended); result.alive_at(t, device)"))
    return "".join(out)


def _unaccounted(extra: int) -> str:
    """Why the blocks held at the peak do not add up to it, when they do not (they add up in a
    profile that saw every allocation and free).

    More than the peak: a free the profile did not record leaves its block counted as held
    (torch drops the events of --schedule's warmup steps, the allocator's total still drops);
    less: the allocator's total includes memory no recorded block accounts for (CPU blocks
    from an earlier profile that this one never saw freed)."""
    if extra > 0:
        return (f"; these add up to {fmt_bytes(extra)} more than the peak: blocks freed where the profiler "
                "did not record the free (between --schedule's active steps) still count as held")
    if extra < 0:
        return f"; {fmt_bytes(-extra)} of the peak is in no block the profile saw allocated"
    return ""


MEMORY = Tab("Memory", render, applies=lambda p: p.collected["memory"],
             missing="Memory was not recorded: run with --memory.")
