"""The Memory tab (``--memory``): the allocated-memory curve, each operator's allocations, the
blocks held at each device's peak (what to free or shrink), what the profile left allocated at
its end (by the line of the user's code that allocated it, with ``--lines``) and, for a profile
with steps, memory per step (what each step kept for good)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...format import esc, fmt_bytes
from ..datatable import datatable_html
from ..figure import drawing_html
from ..table import Column
from .base import Tab, empty

__all__ = ["MEMORY", "CLUSTER_MEMORY", "memory_html", "held_html", "held_at_peak", "alive_html", "growth_html"]


def render(report: Any) -> str:
    p = report.profile
    return memory_html(p.summary.has_device, p.key_averages("op"), p._memory_summary, report.limit or 0)


def memory_html(has_device: bool, averages: Any, memory: Any, limit: int = 0) -> str:
    """One profile's Memory panel: its chart, each operator's allocations (``averages``: its key
    averages by operator) and the blocks held at each peak, from its ``analysis.memory.MemorySummary``
    (a folder of ranks draws each rank's, sent by its worker, with the same function)."""
    from ..memory import memory_curve_svg

    frame = averages
    frame = frame[(frame["cpu_mem_bytes"] != 0) | (frame["device_mem_bytes"] != 0)
                  | (frame["self_cpu_mem_bytes"] != 0) | (frame["self_device_mem_bytes"] != 0)]
    main = "self_device_mem_bytes" if has_device and frame["self_device_mem_bytes"].abs().sum() else "self_cpu_mem_bytes"
    frame = frame.sort_values(main, ascending=False, kind="stable")
    cols = [Column("name", "Name", "name", 70), Column("count", "Calls", "count")]
    if has_device:
        cols += [Column("self_device_mem_bytes", "Self CUDA Mem", "bytes"),
                 Column("device_mem_bytes", "CUDA Mem", "bytes")]
    cols += [Column("self_cpu_mem_bytes", "Self CPU Mem", "bytes"), Column("cpu_mem_bytes", "CPU Mem", "bytes"),
             Column("kind", "Kind")]
    curve = memory_curve_svg(memory.curve, memory.end_us, peaks=memory.peaks)
    table = datatable_html(frame, cols, order=[(main, "desc")], page_length=limit,
                           caption="memory allocated (+) and freed (−) inside each operator; self = not in its children")
    return ((drawing_html(curve, "the memory chart", style=False) if curve else "") + table + held_html(memory.held)
            + alive_html(memory.alive) + growth_html(memory.growth, memory.steps_from))


def held_at_peak(profile: Any) -> str:
    """Per device, the blocks held when allocated memory peaked: what to free or shrink."""
    return held_html(profile._memory_summary.held)


def held_html(held: list[Any]) -> str:
    """The tables of ``analysis.memory.held_at_peaks``: per device, the blocks held at its peak."""
    out = []
    for h in held:
        peak, during, older = h.peak, h.blocks, h.older_bytes
        head = (f"Held on {peak.device} at its peak ({fmt_bytes(peak.peak_allocated_bytes)} at "
                f"{peak.peak_time_us / 1000:.2f} ms): {len(during):,} block{'' if len(during) == 1 else 's'} "
                f"allocated during the profile "
                f"({fmt_bytes(int(during['bytes'].sum()))})")
        if older:
            head += f" and {fmt_bytes(older)} allocated before it"
        head += _unaccounted(int(during["bytes"].sum()) + older - peak.peak_allocated_bytes)
        out.append(f'<div class="nbprof-sub" style="margin-top:10px"><b>{esc(head)}</b></div>')
        if len(during):
            cols = [Column("bytes", "Size", "bytes"), Column("op", "Allocated in", "name", 40),
                    Column("top_op", "Under", "name", 48), Column("alloc_us", "At", "time_us"),
                    Column("age_us", "Held for", "time_us"), Column("free_us", "Freed at", "time_us")]
            out.append(datatable_html(during, cols, order=[("bytes", "desc")], page_length=10,
                                      caption="blocks alive at the peak, biggest first (Freed at — : "
                                              "still held when the profile ended); p.alive_at(t, device)"))
    return "".join(out)


def alive_html(alive: Any) -> str:
    """``alive_at_end()``: what the profile left allocated, by line (with ``--lines``), then block by
    block, biggest first; one line where it left nothing."""
    from ...analysis.hot_lines import line_where
    from ...analysis.memory import group_alive

    if alive is None or "bytes" not in getattr(alive, "columns", ()):
        return ""
    style = '<div class="nbprof-sub" style="margin-top:10px"><b>{}</b></div>'
    if not len(alive):
        return style.format(esc("Left allocated at the end: nothing allocated during the profile (every block "
                                "it allocated was freed)"))
    devices = sorted(set(alive["device"].astype(str)))
    head = (f"Left allocated at the end: {len(alive):,} block{'' if len(alive) == 1 else 's'} allocated during the "
            f"profile ({fmt_bytes(int(alive['bytes'].sum()))} on {', '.join(devices)})")
    out = [style.format(esc(head))]
    has_lines = "line" in alive.columns and alive["file"].notna().any()
    if has_lines:
        by = group_alive(alive, "line")
        by["where"] = [line_where(c, f, int(n)) if isinstance(f, str) and n is not None and n is not pd.NA
                       else "(outside your code)" for c, f, n in zip(by["cell"], by["file"], by["line"])]
        by["code"] = [str(x).strip() if isinstance(x, str) else "" for x in by["source"]]
        cols = [Column("where", "Line", "text"), Column("code", "Source", "name", 60), Column("device", "Device", "text"),
                Column("blocks", "Blocks", "count"), Column("bytes", "Size", "bytes")]
        out.append(datatable_html(by, cols, order=[("bytes", "desc")], page_length=10,
                                  caption="by the line of your code that allocated them; "
                                          'p.alive_at_end(by="line")'))
    frame = alive.copy()
    cols = [Column("bytes", "Size", "bytes"), Column("device", "Device", "text"), Column("op", "Allocated in", "name", 40),
            Column("top_op", "Under", "name", 48), Column("alloc_us", "At", "time_us")]
    if has_lines:
        frame["where"] = [line_where(c, f, int(n)) if isinstance(f, str) and n is not None and n is not pd.NA else ""
                          for c, f, n in zip(frame["cell"], frame["file"], frame["line"])]
        cols.append(Column("where", "Line", "text"))
    out.append(datatable_html(frame, cols, order=[("bytes", "desc")], page_length=10,
                              caption="blocks allocated during the profile and never freed in it, biggest first; "
                                      "p.alive_at_end()"))
    return "".join(out)


def growth_html(growth: Any, steps_from: str | None) -> str:
    """``memory_growth()``: per step, what the allocator held at its end and what the step kept
    for good; nothing for a profile without steps."""
    if growth is None or not len(growth):
        return ""
    kept = int(growth["added_never_freed_bytes"].sum())
    head = f"Memory per step ({steps_from or 'steps'}): the steps kept {fmt_bytes(kept)} until the profile ended"
    cols = [Column("step", "Step", "count")]
    if "rank" in growth.columns:
        cols.append(Column("rank", "Rank", "text"))
    cols += [Column("device", "Device", "text"), Column("held_bytes", "Held at its end", "bytes"),
             Column("added_bytes", "Added", "bytes", sign=True), Column("allocated_bytes", "Allocated", "bytes"),
             Column("added_never_freed_bytes", "Kept for good", "bytes"),
             Column("never_freed_blocks", "Blocks kept", "count"), Column("end_us", "Ended at", "time_us")]
    return (f'<div class="nbprof-sub" style="margin-top:10px"><b>{esc(head)}</b></div>'
            + datatable_html(growth, cols, order=None, page_length=10,
                             caption="added: held at the step's end less at its start; kept for good: allocated in "
                                     "the step, still allocated when the profile ended; p.memory_growth()"))


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


def render_ranks(report: Any) -> str:
    """A folder's Memory (``nbprof.cluster``): tabs of its own, every rank's curve on the common
    clock with each rank's peaks first, then each rank's own Memory tab (drawn from what its worker
    sent, as that rank's file alone draws it)."""
    from ..memory import memory_curve_svg
    from ..tabbar import subtabs_html

    p = report.profile
    every = p._every_rank_memory
    chart = memory_curve_svg(every.curve, every.end_us, peaks=every.peaks)
    peaks = p.rank_memory()
    cols = [Column("rank", "Rank", "text"), Column("device", "Device", "text"),
            Column("peak_allocated_bytes", "Peak allocated", "bytes"), Column("peak_time_us", "At", "time_us"),
            Column("peak_op", "In", "name", 48), Column("peak_reserved_bytes", "Reserved up to", "bytes")]
    summaries = {r: s for r, s in zip(p.rank_labels, p.rank_summaries)}
    without = [str(r) for r, m, _ in p._memory_by_rank() if m is None]
    who = f"rank{'s' if len(without) > 1 else ''} {', '.join(without)}"
    note = f"{who} recorded no memory (run with --memory on every rank)" if without else ""
    first = ((drawing_html(chart, "every rank's memory chart", style=False) if chart else "")
             + (f'<div class="nbprof-note">⚠ {esc(note)}</div>' if note else "")
             + datatable_html(peaks, cols, order=[("peak_allocated_bytes", "desc")], page_length=0,
                              caption="each rank's peak per device, on the common clock; a rank's tab has its "
                                      "operators and the blocks held at its peak"))
    tabs = [("Every rank", first)]
    for r, m, _ in p._memory_by_rank():
        s = summaries[r]
        body = (memory_html(s.summary.has_device, s.key_averages, m, report.limit or 0) if m is not None
                else empty(f"Rank {r} recorded no memory: run with --memory."))
        tabs.append((f"Rank {r}", body))
    return subtabs_html(tabs)


CLUSTER_MEMORY = Tab("Memory", render_ranks, applies=lambda p: p.collected["memory"],
                     missing="Memory was not recorded: run with --memory.")
