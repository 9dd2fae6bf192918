"""The Steps tab: the recorded steps of a ``--schedule`` loop, one row per step, then the steps
side by side (self CPU time per op, one column per step); only in a profile that has steps."""

from __future__ import annotations

from typing import Any

from ..datatable import datatable_html
from ..table import Column
from .base import Tab

__all__ = ["STEPS"]


def render(report: Any) -> str:
    p = report.profile
    steps = p.steps()
    cols = [Column("step", "Step", "count")]
    if "rank" in steps.columns:
        cols.insert(0, Column("rank", "Rank", "count"))
    cols += [Column("dur_us", "Duration", "time_us"), Column("self_cpu_us", "Self CPU", "time_us"),
             Column("ops", "Ops", "count")]
    if (steps["device_us"] > 0).any():
        cols += [Column("device_us", "GPU time", "time_us"), Column("kernels", "Kernels", "count")]
    cols += [Column("top_op", "Top op", "name", 40), Column("top_op_us", "Top op time", "time_us")]
    table = datatable_html(steps, cols, order=[], page_length=0, caption="one row per recorded step")
    side = p.step_breakdown()
    if side.empty:
        return table
    # a folder's columns are (rank, step) pairs: "rank 1 · step 3", not the tuple's "(1, 3)"
    labels = [f"rank {c[0]} · step {c[1]}" if isinstance(c, tuple) else f"step {c}" for c in side.columns]
    side = side.reset_index()
    side.columns = ["name"] + [f"step_{i}" for i in range(len(labels))]
    side_cols = [Column("name", "Name", "name", 50)] + [
        Column(key, label, "time_us") for key, label in zip(side.columns[1:], labels)
    ]
    by_total = side[side.columns[1:]].sum(axis=1).sort_values(ascending=False).index
    side = side.loc[by_total]
    return table + datatable_html(side, side_cols, order=[], page_length=report.limit or 0,
                                  caption="self CPU time per op, steps side by side")


STEPS = Tab("Steps", render, applies=lambda p: len(p.steps()) > 0)
