"""The Memory snapshot tab (``%%torchprof --snapshot``, CUDA only) and the panels of a snapshot's
report (``views.snapshot``), the same in both:

- Over time: the chart (``views.snapshot_chart``);
- At the peak / At the end: the blocks alive then, biggest first, with the line that allocated
  each (grouped by line first) and its stack;
- Segments: reserved vs allocated per segment, as bars (requested, rounding, free) and a table:
  where reserved memory is not allocated memory (fragmentation);
- OOMs: each out-of-memory error, what it asked for, what CUDA had free, what the allocator held.

Left out of reports without a snapshot. Names from the file are text (``format.esc``; the tables'
cells through ``views.datatable``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...analysis.snapshot import BEFORE_HISTORY, NO_STACK
from ...format import esc, fmt_bytes, fmt_us, plural
from ..datatable import MAX_ROWS, datatable_html
from ..figure import drawing_html
from ..snapshot_chart import drawn_devices, snapshot_svg
from ..table import Column
from .base import Tab

__all__ = ["SNAPSHOT", "snapshot_panels", "segments_svg", "blocks_frame", "BLOCK_COLUMNS", "start_us"]

_WIDTH = 760


def render(report: Any) -> str:
    from ..tabbar import subtabs_html

    return subtabs_html(snapshot_panels(report.profile.snapshot()))


SNAPSHOT = Tab("Memory snapshot", render, applies=lambda p: getattr(p.meta, "snapshot", None) is not None)


BLOCK_COLUMNS = [Column("requested_bytes", "Size", "bytes"), Column("where", "Allocated by", "name", 56),
               Column("function", "In", "name", 32), Column("alloc_us", "At", "time_us"),
               Column("device", "Device", "text"), Column("stack", "Stack (innermost first)", "name", 90)]


def blocks_frame(blocks: pd.DataFrame, t0_us: float, shown: int = MAX_ROWS) -> pd.DataFrame:
    """``blocks()``' rows as the tables show them: ``where`` (the line that allocated: "In [4] line
    3", "train.py:42"; none: before the history, or no stack), ``alloc_us`` since the first entry,
    and the first ``shown`` rows' ``stack`` (innermost first, whole file names: the cell shows its
    start, its hover the whole)."""
    frame = blocks.copy(deep=False)
    has_file = frame["file"].notna().to_numpy()
    line = frame["line"].astype(str).to_numpy(dtype=object)
    cell = frame["cell"].to_numpy(dtype=object)
    in_cell = frame["cell"].notna().to_numpy()
    where = np.where(np.isnan(frame["alloc_us"].to_numpy(dtype=float)), BEFORE_HISTORY, NO_STACK).astype(object)
    where[has_file & in_cell] = cell[has_file & in_cell] + " line " + line[has_file & in_cell]
    files = frame["file"].to_numpy(dtype=object)
    plain = has_file & ~in_cell
    where[plain] = files[plain] + ":" + line[plain]
    frame["where"] = where
    frame["function"] = frame["function"].where(frame["function"].notna(), "").astype(object)
    frame["stack"] = [" ← ".join(f"{n} ({f}:{ln})" for f, ln, n in _worth_showing(fr)[:12])
                      for fr in frame["frames"].iloc[:shown]] + [""] * max(len(frame) - shown, 0)
    frame["alloc_us"] = frame["alloc_us"] - t0_us
    return frame


# C++ frames of the allocator's and the interpreter's own plumbing (stacks="all"), left out of the
# stacks shown as memory_viz leaves them out (``_frame_filter``); the data (``frames``) keeps them
_PLUMBING_NAMES = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
                   "PyEval_", "PyObject_", "PyFunction_")
_PLUMBING_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
                   "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h")


def _worth_showing(frames: tuple) -> list:
    return [f for f in frames if not any(n in f[2] for n in _PLUMBING_NAMES)
            and not any(n in f[0] for n in _PLUMBING_FILES)]


def _peak_html(profile: Any) -> str:
    from ...analysis.snapshot import alive_after, blocks_at

    out = []
    p = profile
    t0 = start_us(profile)
    for pk in p._summary["peaks"]:
        which = alive_after(p._replay, pk.device, pk.entry)
        blocks = blocks_at(p._replay, p._data, which, p._user, at_end=False)
        since = pk.time_us - t0
        # "(0 in)" read as a typo: fmt_us writes a zero as a table's bare "0"
        when = "before the history's first entry" if pk.entry < 0 else f"after entry {pk.entry:,}" + (
            "" if np.isnan(since) else f" ({fmt_us(since)} in)" if since else " (at the start)")
        head = (f"cuda:{pk.device} at its peak, {when}: {fmt_bytes(pk.active_bytes)} active in "
                f"{plural(len(blocks), 'allocation')}, {fmt_bytes(pk.reserved_bytes)} reserved")
        out.append(f'<div class="nbprof-sub" style="margin-top:8px"><b>{esc(head)}</b></div>')
        if len(blocks):
            out.append(_by_line_html(blocks))
            out.append(datatable_html(blocks_frame(blocks, t0), BLOCK_COLUMNS, order=[("requested_bytes", "desc")],
                                      page_length=10, caption="the allocations alive at the peak, biggest first "
                                      "(At: since the first entry); p.blocks(at=\"peak\")"))
    return "".join(out) or '<div class="nbprof-empty">No allocation recorded.</div>'


def _by_line_html(blocks: pd.DataFrame) -> str:
    """The bytes held per line that allocated them: the question a peak asks."""
    frame = blocks_frame(blocks, 0.0)
    g = frame.groupby("where", sort=False).agg(bytes=("requested_bytes", "sum"), blocks=("requested_bytes", "size"))
    g = g.sort_values("bytes", ascending=False).reset_index()
    cols = [Column("where", "Line", "name", 70), Column("bytes", "Held", "bytes"), Column("blocks", "Blocks", "count")]
    return datatable_html(g, cols, order=[("bytes", "desc")], page_length=10, caption="held per line that allocated it")


def _end_html(profile: Any) -> str:
    blocks = profile.blocks("end")
    if not len(blocks):
        return '<div class="nbprof-empty">No block in use at the end.</div>'
    total = int(blocks["requested_bytes"].sum())
    pending = int((blocks["state"] == "active_pending_free").sum())
    head = f"{plural(len(blocks), 'block')} in use when the snapshot was taken: {fmt_bytes(total)} requested"
    if pending:
        head += f"; {plural(pending, 'block')} freed and waiting for another stream"
    cols = BLOCK_COLUMNS[:5] + [Column("state", "State", "text"), BLOCK_COLUMNS[5]]
    return (f'<div class="nbprof-sub"><b>{esc(head)}</b></div>' + _by_line_html(blocks)
            + datatable_html(blocks_frame(blocks, start_us(profile)), cols, order=[("requested_bytes", "desc")],
                             page_length=10, caption='blocks alive at the end, biggest first; p.blocks(at="end")'))


def segments_svg(segments: pd.DataFrame, width: int = _WIDTH, limit: int = 40) -> str:
    """One bar per segment (the largest ``limit``), to one scale: requested (blue), rounding
    (orange), free (grey)."""
    if not len(segments):
        return ""
    seg = segments.head(limit)
    left, right, row = 150, 16, 14
    pw = width - left - right
    biggest = float(max(seg["total_size_bytes"].max(), 1))
    height = 28 + row * len(seg) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'style="font:11px sans-serif;background:#fff">',
             f'<text x="{left}" y="13" font-weight="bold">Reserved vs allocated, per segment</text>',
             f'<text x="{left + pw}" y="13" text-anchor="end" fill="#666">requested · rounding · free</text>']
    for i, s in enumerate(seg.itertuples(index=False)):
        y = 22 + i * row
        x = float(left)
        for value, color in ((s.requested_bytes, "#4e79a7"), (s.rounding_bytes, "#f28e2c"), (s.free_bytes, "#d9d4d0")):
            w = float(value) / biggest * pw
            if w > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 3}" fill="{color}"/>')
            x += w
        text = (f"{s.device} {fmt_bytes(s.total_size_bytes)} {s.segment_type}: {fmt_bytes(s.requested_bytes)} "
                f"requested, {fmt_bytes(s.free_bytes)} free (largest piece {fmt_bytes(s.largest_free_bytes)})")
        parts.append(f'<text x="{left - 6}" y="{y + row - 5}" text-anchor="end" fill="#555">'
                     f"{esc(fmt_bytes(s.total_size_bytes))}<title>{esc(text)}</title></text>")
    parts.append("</svg>")
    return "".join(parts)


def _segments_html(profile: Any) -> str:
    seg = profile.segments()
    if not len(seg):
        return '<div class="nbprof-empty">No segment: the allocator held no memory when the snapshot was taken.</div>'
    total, free = int(seg["total_size_bytes"].sum()), int(seg["free_bytes"].sum())
    head = (f"{fmt_bytes(total)} reserved in {plural(len(seg), 'segment')}: {fmt_bytes(int(seg['requested_bytes'].sum()))} "
            f"requested, {fmt_bytes(int(seg['rounding_bytes'].sum()))} rounding, {fmt_bytes(free)} free "
            f"({100 * free / max(total, 1):.0f} %; the largest free piece {fmt_bytes(int(seg['largest_free_bytes'].max()))})")
    cols = [Column("device", "Device", "text"), Column("total_size_bytes", "Reserved", "bytes"),
            Column("allocated_bytes", "Allocated", "bytes"), Column("requested_bytes", "Requested", "bytes"),
            Column("free_bytes", "Free", "bytes"), Column("largest_free_bytes", "Largest free", "bytes"),
            Column("blocks", "Blocks", "count"), Column("segment_type", "Pool", "text"),
            Column("stream", "Stream", "text")]
    bars = segments_svg(seg)
    return (f'<div class="nbprof-sub"><b>{esc(head)}</b></div>'
            + (drawing_html(bars, "the segments' bars", style=False) if bars else "")
            + datatable_html(seg, cols, order=[("total_size_bytes", "desc")], page_length=10,
                             caption="reserved = allocated + free; allocated = requested + rounding; p.segments()"))


def _ooms_html(profile: Any) -> str:
    ooms = profile._summary["ooms"].copy()
    if not len(ooms):
        return '<div class="nbprof-empty">No out-of-memory error in the history.</div>'
    ooms["time_us"] = ooms["time_us"] - start_us(profile)
    cols = [Column("device", "Device", "text"), Column("time_us", "At", "time_us"),
            Column("requested_bytes", "Asked for", "bytes"), Column("device_free_bytes", "CUDA free", "bytes"),
            Column("active_bytes", "Active", "bytes"), Column("reserved_bytes", "Reserved", "bytes")]
    return datatable_html(ooms, cols, page_length=10, caption="each out-of-memory error the allocator raised")


def start_us(profile: Any) -> float:
    t = profile._replay.memory["time_us"].to_numpy()
    return float(np.nanmin(t)) if len(t) and not np.isnan(t).all() else 0.0


def snapshot_panels(profile: Any) -> list[tuple[str, str]]:
    """The report's panels (title, html): Over time, At the peak, At the end, Segments, OOMs (when any)."""
    chart = snapshot_svg(drawn_devices(profile))
    over = (drawing_html(chart, "the memory chart", style=False) if chart
            else '<div class="nbprof-empty">The snapshot has no history (record it with _record_memory_history).</div>')
    panels = [("Over time", over), ("At the peak", _peak_html(profile)), ("At the end", _end_html(profile)),
              ("Segments", _segments_html(profile))]
    if len(profile._summary["ooms"]):
        panels.append(("OOMs", _ooms_html(profile)))
    return panels


