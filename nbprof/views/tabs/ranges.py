"""The Ranges tab: the ``record_function`` labels (``result.ranges()``), nested ones indented;
only in a profile that has some."""

from __future__ import annotations

from typing import Any

from ..datatable import datatable_html
from ..table import Column
from .base import Tab

__all__ = ["RANGES"]


def render(report: Any) -> str:
    frame = report.profile.ranges()
    indent = "\u2003"
    frame["label_indented"] = [indent * int(d) + str(n) for n, d in zip(frame["label"], frame["depth"])]
    cols = [Column("label_indented", "Range", "text"), Column("count", "Calls", "count"),
            Column("total_us", "Total", "time_us"), Column("mean_us", "Mean", "time_us"),
            Column("share_of_span", "Share of span", "share")]
    if "device_us" in frame.columns and (frame["device_us"] > 0).any():
        cols.append(Column("device_us", "GPU time (kernels)", "time_us"))
    return datatable_html(frame, cols, order=[], page_length=0, caption="record_function ranges, nested ranges indented")


RANGES = Tab("Ranges", render, applies=lambda p: len(p.ranges()) > 0)
