"""The Actions tab of a cProfile report: the calls grouped by the framework action they ran
under (``result.actions()``, ``result.action_stats()``): Lightning's ``AdvancedProfiler``, one
profile per hook, in one table. The actions by own time, each followed by its functions with the
most own time, indented (for the actions worth ``FUNCTIONS_FROM_SHARE`` of the total: a Lightning
fit has dozens of hooks that do nothing but enter and leave); only in a profile whose code
reported actions (Lightning ran in it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...analysis.flame import pstats_location
from ..datatable import datatable_html
from ..table import Column
from .base import Tab

__all__ = ["ACTIONS", "TOP_FUNCTIONS"]

TOP_FUNCTIONS = 5  # functions shown under each action (result.action_stats(action) has them all)
FUNCTIONS_FROM_SHARE = 0.005  # ... under the actions with at least this share of the total own time


def rows(profile: Any, top: int = TOP_FUNCTIONS) -> pd.DataFrame:
    """Actions and, under each, its ``top`` functions by own time: ``name, depth, runs, calls,
    tottime_s, share, cumtime_s`` (runs: how many times the action ran; cumtime: functions')."""
    actions = profile.actions().sort_values("tottime_s", ascending=False, kind="stable")
    stats = profile.action_stats()
    total = float(stats["tottime_s"].sum())
    big = set(actions["action"][actions["tottime_s"] >= FUNCTIONS_FROM_SHARE * total])
    stats = stats[stats["action"].isin(big)]
    stats = stats.sort_values(["tottime_s"], ascending=False, kind="stable").groupby("action", sort=False).head(top)
    stats = stats.assign(name=pstats_location(stats, profile.meta.code_names))
    by_action = {a: g for a, g in stats.groupby("action", sort=False)}
    parts = []
    for a in actions.itertuples():
        parts.append(pd.DataFrame({"name": [a.action], "depth": [0], "runs": [a.count], "calls": [a.calls],
                                   "tottime_s": [a.tottime_s], "cumtime_s": [np.nan]}))
        f = by_action.get(a.action)
        if f is not None:
            parts.append(pd.DataFrame({"name": f["name"].to_numpy(), "depth": 1, "runs": np.nan,
                                       "calls": f["ncalls"].to_numpy(), "tottime_s": f["tottime_s"].to_numpy(),
                                       "cumtime_s": f["cumtime_s"].to_numpy()}))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["name", "depth", "runs", "calls", "tottime_s", "cumtime_s"])
    out["share"] = out["tottime_s"] / total if total > 0 else np.nan
    return out


def render(report: Any) -> str:
    frame = rows(report.profile)
    indent = "\u2003"
    frame["name_indented"] = [indent * int(d) + str(n) for n, d in zip(frame["name"], frame["depth"])]
    cols = [Column("name_indented", "Action › its functions by own time", "text"), Column("runs", "Runs", "count"),
            Column("calls", "Calls", "count"), Column("tottime_s", "Own time", "time_s"),
            Column("share", "Share of total", "share"), Column("cumtime_s", "cumtime", "time_s")]
    return datatable_html(frame, cols, order=[], page_length=0,
                          caption=f"calls grouped by the action they ran under, by own time; the top {TOP_FUNCTIONS} "
                                  "functions of the bigger ones (p.action_stats(action) has them all)")


ACTIONS = Tab("Actions", render, applies=lambda p: len(p.actions()) > 0)
