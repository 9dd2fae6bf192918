"""The Ranks tab: a profile merged from several ranks (``load_trace(folder)``): time per rank,
the slowest rank and its imbalance, what differs across ranks, and the Cluster section: each
rank's GPU window as one bar (compute, communication and copies not hidden behind it, and idle
time by cause: HTA's temporal breakdown and idle split; HTA's own per-stream idle split beside
it), and the collectives per rank.

Rendered from ``profile.ranks()`` and ``profile.collectives()`` only, so a profile that keeps
per-rank summaries rather than every event renders it the same. The bar is an inline SVG (no
script: it reads in nbconvert, nbviewer and GitHub), each part's time in its tooltip."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...format import esc, fmt_us
from ..datatable import datatable_html
from ..figure import drawing_html
from ..table import Column
from .base import Tab

__all__ = ["RANKS", "CLUSTER_RANKS", "breakdown_svg", "hta_idle_html"]

# the parts of a rank's bar, which add up to its window: (column, label, colour)
BAR_PARTS = (
    ("breakdown_compute_us", "compute", "#4c78a8"),
    ("breakdown_exposed_comm_us", "communication, not overlapped", "#f58518"),
    ("breakdown_exposed_memcpy_us", "copies, alone", "#54a24b"),
    ("idle_host_wait_us", "idle: waiting for the CPU", "#e45756"),
    ("idle_kernel_wait_us", "idle: between queued kernels", "#b279a2"),
    ("idle_other_us", "idle: other", "#bab0ac"),
)


def render(report: Any) -> str:
    ranks = report.profile.ranks()
    table = ranks.table
    cols = [Column("rank", "Rank", "text"), Column("span_us", "Span", "time_us"),
            Column("self_cpu_us", "Self CPU", "time_us"), Column("ops", "Ops", "count")]
    has_device = bool((table["device_us"] > 0).any())
    if has_device:
        table = table.assign(overlap_share=table["overlap_pct"] / 100.0)
        cols += [Column("device_us", "Device time", "time_us"), Column("kernels", "Kernels", "count"),
                 Column("device_busy_fraction", "GPU busy", "share"), Column("compute_us", "Compute", "time_us"),
                 Column("comm_us", "Communication", "time_us"), Column("overlap_share", "Comm. overlapped", "share"),
                 Column("breakdown_idle_us", "GPU idle", "time_us")]
    head = (f'<div class="nbprof-sub">slowest rank: {esc(ranks.slowest)} · imbalance '
            f"{100 * ranks.imbalance:.0f}% (the slowest rank's extra time over the median)</div>")
    out = head + datatable_html(table, cols, order=[], page_length=0, caption="one row per rank")
    diff = ranks.differences
    if len(diff):
        dcols = [Column("name", "Name", "name", 70), Column("kind", "Kind"),
                 Column("count_min", "Calls (min)", "count"), Column("count_max", "Calls (max)", "count"),
                 Column("time_min_us", "Time (min rank)", "time_us"), Column("time_max_us", "Time (max rank)", "time_us"),
                 Column("spread", "Spread", "share"), Column("slowest_rank", "Slowest rank", "text")]
        out += datatable_html(diff, dcols, order=[], page_length=report.limit or 0,
                              caption="operators and kernels that differ across ranks, biggest spread first")
    return out + cluster_section(report, ranks.table if has_device else None)


def cluster_section(report: Any, table: pd.DataFrame | None) -> str:
    """The per-rank bar of the GPU's time (with device work) and the collectives per rank."""
    out = ""
    if table is not None and (table["breakdown_window_us"] > 0).any():
        out += ('<div class="nbprof-sub">Cluster: each rank\'s GPU time, from its first kernel to its last '
                "(communication and copies count where no compute runs beside them; idle time by cause)</div>")
        out += drawing_html(breakdown_svg(table), "the per-rank breakdown", style=False)
        out += hta_idle_html(report.profile.ranks().hta_idle)
    coll = report.profile.collectives()
    if len(coll):
        coll = coll.assign(bytes=coll["bytes"].where(coll["bytes"] >= 0))  # -1: the size is not known, shown "—"
        ccols = [Column("rank", "Rank", "text"), Column("name", "Collective", "text"),
                 Column("process_group", "Process group", "text"), Column("count", "Calls", "count"),
                 Column("total_us", "Total", "time_us"), Column("mean_us", "Mean", "time_us"),
                 Column("max_us", "Max", "time_us"), Column("bytes", "Bytes", "bytes")]
        out += datatable_html(coll, ccols, order=[], page_length=report.limit or 0,
                              caption="collectives per rank (a rank that spends longer in one waits there for "
                                      "the others)")
    return out


def hta_idle_html(rows: pd.DataFrame) -> str:
    """HTA's idle time breakdown beside the bar's (per stream, as HTA 0.5.0 computes it)."""
    if len(rows) == 0:
        return ""
    # a row per (rank, device, stream) that has rows: pivot_table(dropna=False) would take the product of
    # the three (rank 0 . cuda:1 when only rank 1 ran there), and dropna=True would drop the rank None
    # of a profile without ranks; a category a stream lacks is 0
    wide = (rows.groupby(["rank", "device", "stream", "idle_category"], dropna=False, observed=True)["idle_time_us"]
            .sum().unstack("idle_category", fill_value=0.0).reset_index())
    wide.columns = [str(c) for c in wide.columns]
    for c in ("host_wait", "kernel_wait", "other"):
        if c not in wide.columns:
            wide[c] = 0.0
    cols = [Column("rank", "Rank", "text"), Column("device", "Device", "text"), Column("stream", "Stream", "text"),
            Column("host_wait", "Host wait", "time_us"), Column("kernel_wait", "Kernel wait", "time_us"),
            Column("other", "Other", "time_us")]
    return datatable_html(wide, cols, order=[], page_length=0,
                          caption="HTA's idle time breakdown (get_idle_time_breakdown, HTA 0.5.0's numbers): per "
                                  "stream, so summed it counts a moment every idle stream shares once per stream; "
                                  "kernel wait is a gap under 30 µs. The bar above splits the device's idle time")


def breakdown_svg(table: pd.DataFrame, width: int = 760) -> str:
    """One bar per rank in the parts ``BAR_PARTS``, on one time scale (the longest window at full
    width: a slower rank's bar is longer); the rank's label with its comm-compute overlap on the
    left, its window on the right, a legend below."""
    label_w, row_h, gap = 150, 18 if len(table) <= 16 else 12, 4
    bar_w = width - label_w - 70
    longest = float(table["breakdown_window_us"].max())
    rows = []
    for i, row in enumerate(table.to_dict("records")):
        y = 4 + i * (row_h + gap)
        window = float(row["breakdown_window_us"])
        overlap = row["overlap_pct"]
        name = f"rank {row['rank']}" if row["rank"] is not None else "this profile"
        label = name
        if overlap == overlap:  # not NaN: the rank has communication
            label += f" · overlap {overlap:.0f}%"
        rows.append(f'<text x="{label_w - 6}" y="{y + row_h - 5}" text-anchor="end" font-size="11">{esc(label)}</text>')
        x = float(label_w)
        for column, what, colour in BAR_PARTS:
            us = float(row[column])
            w = bar_w * us / longest
            if w <= 0:
                continue
            share = us / window
            rows.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row_h}" fill="{colour}">'
                        f"<title>{esc(name)}: {esc(what)} {esc(fmt_us(us))} ({share:.1%} of "
                        f"{esc(fmt_us(window))})</title></rect>")
            x += w
        rows.append(f'<text x="{x + 4:.2f}" y="{y + row_h - 5}" font-size="10" fill="#555">'
                    f"{esc(fmt_us(window))}</text>")
    legend_y = 4 + len(table) * (row_h + gap) + 6
    items, x = [], float(label_w)
    for _, what, colour in BAR_PARTS:
        item_w = 14 + 5.6 * len(what) + 14  # the swatch, the text at ~5.6 px a character, a space
        if x + item_w > width:
            legend_y += 14
            x = float(label_w)
        items.append(f'<rect x="{x:.0f}" y="{legend_y}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14:.0f}" y="{legend_y + 9}" font-size="10">{esc(what)}</text>')
        x += item_w
    height = legend_y + 18
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif" role="img" aria-label="GPU time per rank">{"".join(rows)}{"".join(items)}</svg>')


RANKS = Tab("Ranks", render, applies=lambda p: "rank" in p._events.columns)
# a folder of ranks summarized apart (nbprof.cluster) always has ranks, and no events table to look in
CLUSTER_RANKS = Tab("Ranks", render)
