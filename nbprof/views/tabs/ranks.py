"""The Ranks tab: a profile merged from several ranks (``load_trace(folder)``): time per rank,
the slowest rank and its imbalance, and what differs across ranks."""

from __future__ import annotations

from typing import Any

from ...format import esc
from ..datatable import datatable_html
from ..table import Column
from .base import Tab

__all__ = ["RANKS", "CLUSTER_RANKS"]


def render(report: Any) -> str:
    ranks = report.profile.ranks()
    table = ranks.table
    cols = [Column("rank", "Rank", "text"), Column("span_us", "Span", "time_us"),
            Column("self_cpu_us", "Self CPU", "time_us"), Column("ops", "Ops", "count")]
    if (table["device_us"] > 0).any():
        cols += [Column("device_us", "Device time", "time_us"), Column("kernels", "Kernels", "count"),
                 Column("device_busy_fraction", "GPU busy", "share"), Column("compute_us", "Compute", "time_us"),
                 Column("comm_us", "Communication", "time_us")]
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
    return out


RANKS = Tab("Ranks", render, applies=lambda p: "rank" in p._events.columns)
# a folder of ranks summarized apart (nbprof.cluster) always has ranks, and no events table to look in
CLUSTER_RANKS = Tab("Ranks", render)
