"""The Ranges tab: the ``record_function`` labels (``result.ranges()``), nested ones indented,
with the operators that ran under each (``result.range_ops()``); only in a profile that has some.

For a Lightning fit (``nbprof.lightning``, or ``%%torchprof`` around ``trainer.fit()``) this is
Lightning's simple profiler, nested: each action, its calls, mean and total time, its share of
the fit (the outermost range, "[Trainer].fit") and what it spent its time on."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...format import fmt_share
from ..datatable import datatable_html
from ..table import Column, render_text
from .base import Tab
from .spread import with_rank_spread

__all__ = ["RANGES", "CLUSTER_RANGES", "top_ops_text", "ranges_text"]

TOP_OPS = 3  # operators named per range


def top_ops_text(ops: pd.DataFrame, paths: pd.Series, n: int = TOP_OPS) -> list[str]:
    """Per path: its ``n`` operators with the most self CPU time and their share of the
    operators' time under it ("aten::addmm 41% · aten::mm 22%"); "" where none ran."""
    if not len(ops):
        return [""] * len(paths)
    total = ops.groupby("path", sort=False)["self_cpu_us"].sum()
    top = ops.groupby("path", sort=False).head(n)  # range_ops: each path's ops by self CPU time
    share = top["self_cpu_us"].to_numpy() / np.maximum(total.reindex(top["path"]).to_numpy(), 1e-12)
    parts = [f"{name} {fmt_share(s)}" for name, s in zip(top["name"], share)]
    text = pd.Series(parts, index=top["path"].to_numpy()).groupby(level=0, sort=False).agg(" · ".join)
    return [str(text.get(p, "")) for p in paths]


def render(report: Any, per_rank: bool = False) -> str:
    frame = report.profile.ranges()
    indent = "\u2003"
    frame["label_indented"] = [indent * int(d) + str(n) for n, d in zip(frame["label"], frame["depth"])]
    frame["top_ops"] = top_ops_text(report.profile.range_ops(), frame["path"])
    cols = [Column("label_indented", "Range", "text"), Column("count", "Calls", "count"),
            Column("total_us", "Total", "time_us"), Column("mean_us", "Mean", "time_us"),
            Column("share_of_span", "Share of span", "share")]
    if (frame["depth"] > 0).any():
        cols.append(Column("share_of_root", "Share of outermost range", "share"))
    if "device_us" in frame.columns and (frame["device_us"] > 0).any():
        cols.append(Column("device_us", "GPU time (kernels)", "time_us"))
    caption = "record_function ranges (Lightning's actions among them), nested ranges indented"
    if per_rank:  # a folder of ranks: how the ranks differ on each range
        frame, cols, spread = with_rank_spread(report.profile, frame, cols, report.profile.ranges(per_rank=True),
                                               ["path"], "total_us", "Total")
        caption += f"; {spread}" if spread else ""
    cols.append(Column("top_ops", "Top operators (self CPU)", "text"))
    return datatable_html(frame, cols, order=[], page_length=0, caption=caption)


def render_ranks(report: Any) -> str:
    """A folder's Ranges: summed over the ranks, with how they differ."""
    return render(report, per_rank=True)


def ranges_text(profile: Any) -> str:
    """The ranges as a text table, nested ones indented (Lightning's simple profiler's table, for
    a script's log: ``nbprof.lightning.Profiler``'s summary); "" without ranges."""
    frame = profile.ranges()
    if not len(frame):
        return ""
    frame["label_indented"] = ["  " * int(d) + str(n) for n, d in zip(frame["label"], frame["depth"])]
    frame["top_ops"] = top_ops_text(profile.range_ops(), frame["path"], n=1)
    cols = [Column("label_indented", "Range", "text", width=90), Column("count", "Calls", "count"),
            Column("mean_us", "Mean", "time_us"), Column("total_us", "Total", "time_us"),
            Column("share_of_root", "Share of outermost", "share"), Column("top_ops", "Top operator", "text")]
    return render_text(frame, cols)


RANGES = Tab("Ranges", render, applies=lambda p: len(p.ranges()) > 0)
CLUSTER_RANGES = Tab("Ranges", render_ranks, applies=lambda p: len(p.ranges()) > 0)
