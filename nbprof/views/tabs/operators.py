"""The key-averages tabs: Operators, By input shape, By stack (one table, three groupings).

Their columns are the text report's (``operator_columns``), in torch's order: the name, the
grouping, CPU (share, self, total, average), CUDA likewise, memory, calls, FLOPs; the table adds
Kind at the end to filter by. It hides kernels, memcpys and memsets (the Kernels tab has them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...events import DEVICE_WORK_KINDS
from ..datatable import datatable_html
from ..table import Column
from .base import Tab
from .spread import with_rank_spread

__all__ = ["operator_columns", "with_shares", "OPERATORS", "BY_SHAPE", "BY_STACK", "CLUSTER_OPERATORS",
           "CLUSTER_BY_SHAPE", "CLUSTER_BY_STACK"]

_DEVICE_WORK = list(DEVICE_WORK_KINDS)


def with_shares(frame: pd.DataFrame, summary: Any) -> pd.DataFrame:
    """``frame`` with ``self_cpu_share`` and ``self_device_share``: each row's part of the profile's
    self time (NaN where the total is zero: "—")."""
    frame = frame.copy()
    for share, column, total in (("self_cpu_share", "self_cpu_us", summary.self_cpu_us),
                                 ("self_device_share", "self_device_us", summary.self_device_us)):
        frame[share] = frame[column] / total if total else np.nan
    return frame


def operator_columns(summary: Any, collected: dict[str, bool], group_by: str, frame: pd.DataFrame) -> list[Column]:
    """The key-averages table's columns, for the text report and the Operators tabs alike."""
    cols = [Column("name", "Name", "name", 70, text_width=55)]
    if group_by == "shape" and "input_shapes" in frame:
        cols.append(Column("input_shapes", "Input shapes", "name", 50, text_width=60))
    if group_by == "stack" and "stack" in frame:
        cols.append(Column("stack", "Stack", "name", 80, text_width=60))
    cols += [Column("self_cpu_share", "Self CPU %", "share"), Column("self_cpu_us", "Self CPU", "time_us"),
             Column("cpu_total_us", "CPU total", "time_us"), Column("cpu_avg_us", "CPU avg", "time_us")]
    if summary.has_device:
        cols += [Column("self_device_share", "Self CUDA %", "share"), Column("self_device_us", "Self CUDA", "time_us"),
                 Column("device_total_us", "CUDA total", "time_us"), Column("device_avg_us", "CUDA avg", "time_us")]
    if collected["memory"]:
        cols += [Column("cpu_mem_bytes", "CPU Mem", "bytes"), Column("self_cpu_mem_bytes", "Self CPU Mem", "bytes")]
        if summary.has_device:
            cols += [Column("device_mem_bytes", "CUDA Mem", "bytes"),
                     Column("self_device_mem_bytes", "Self CUDA Mem", "bytes")]
    cols.append(Column("count", "Calls", "count"))
    if collected["flops"]:
        cols.append(Column("flops", "FLOPs", "flops"))
    return cols


# the times a folder's tables show per rank (the report's sort when it is one of them)
_SPREAD_LABELS = {"self_cpu_us": "Self CPU", "cpu_total_us": "CPU total", "self_device_us": "Self CUDA",
                  "device_total_us": "CUDA total"}


def _render(group_by: str, per_rank: bool = False):
    def render(report: Any) -> str:
        p = report.profile
        frame = p.key_averages(group_by)
        frame = with_shares(frame[~frame["kind"].isin(_DEVICE_WORK)], p.summary)
        cols = operator_columns(p.summary, p.collected, group_by, frame) + [Column("kind", "Kind")]
        caption = None
        if per_rank:  # a folder of ranks: how the ranks differ on each row
            value = report.sort if report.sort in _SPREAD_LABELS else p.summary.sort
            value = value if value in _SPREAD_LABELS else "self_cpu_us"
            keys = ["name", *{"shape": ["input_shapes"], "stack": ["stack"]}.get(group_by, []), "kind"]
            frame, cols, caption = with_rank_spread(p, frame, cols, p.key_averages(group_by, per_rank=True), keys,
                                                    value, _SPREAD_LABELS[value])
        sort = report.sort if report.sort in frame.columns else "self_cpu_us"
        frame = frame.sort_values(sort, ascending=sort == "name", kind="stable")
        return datatable_html(frame, cols, order=[(sort, "asc" if sort == "name" else "desc")],
                              page_length=report.limit or 0, caption=caption or None)

    return render


OPERATORS = Tab("Operators", _render("op"), group_by="op")
BY_SHAPE = Tab("By input shape", _render("shape"), applies=lambda p: p.collected["shapes"],
               missing="Input shapes were not recorded: run with --shapes.", group_by="shape")
BY_STACK = Tab("By stack", _render("stack"), applies=lambda p: p.collected["stack"], group_by="stack")
# a folder of ranks (nbprof.cluster): the same tables summed over the ranks, with how they differ
CLUSTER_OPERATORS = Tab("Operators", _render("op", per_rank=True), group_by="op")
CLUSTER_BY_SHAPE = Tab("By input shape", _render("shape", per_rank=True), applies=lambda p: p.collected["shapes"],
                       missing="Input shapes were not recorded: run with --shapes.", group_by="shape")
CLUSTER_BY_STACK = Tab("By stack", _render("stack", per_rank=True), applies=lambda p: p.collected["stack"],
                       group_by="stack")
