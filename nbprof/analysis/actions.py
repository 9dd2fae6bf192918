"""A cProfile profile grouped by the framework action each call ran under (Lightning's hooks):
what Lightning's ``AdvancedProfiler`` prints per action, as tables of one report.

The collector keeps a profile per action (``collect/cprofile.py``): each call is in the profile
of the action that was innermost when it was made, and the code outside every action has a
profile of its own (``OUTSIDE_ACTIONS``). Two tables:

- ``action_stats``: the stats table (``STATS_COLUMNS``, pstats' numbers) per action, with an
  ``action`` column first; summed over the actions, each function's calls are the whole profile's.
- ``actions_table``: one row per action, in the order the actions first ran (outside first):
  ``action, count, calls, functions, tottime_s, share_of_total, top_function``. ``count``: how
  many times the action ran (1 for the code outside them); ``calls``: the function calls made
  under it; ``tottime_s``: the time spent in them (their own times: the time under the action,
  as pstats' total is the run's); ``share_of_total``: of the whole profile's; ``top_function``:
  ``file:line(function)`` of the function with the most own time under it (pstats' text,
  full path; "" if none).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..collect.cprofile import OUTSIDE_ACTIONS, stats_table
from ._tables import TEXT
from .flame import pstats_location

__all__ = ["action_stats", "actions_table", "ACTION_COLUMNS", "OUTSIDE_LABEL", "action_label"]

ACTION_COLUMNS = ("action", "count", "calls", "functions", "tottime_s", "share_of_total", "top_function")
# how the code outside every action is named in the tables
OUTSIDE_LABEL = "(outside every action)"


def action_label(action: str) -> str:
    return OUTSIDE_LABEL if action == OUTSIDE_ACTIONS else action


def action_stats(by_action: dict[str, dict[Any, Any]]) -> pd.DataFrame:
    """The stats table of each action's profile, stacked, with the action first."""
    parts = []
    for action, raw in by_action.items():
        table = stats_table(raw)
        table.insert(0, "action", action_label(action))
        parts.append(table)
    if not parts:  # the stats table of no functions, as each action's has its columns
        table = stats_table({})
        table.insert(0, "action", pd.Series(dtype=TEXT))
        return table
    return pd.concat(parts, ignore_index=True)


def actions_table(stats: pd.DataFrame, counts: dict[str, int]) -> pd.DataFrame:
    """One row per action (see the module doc): those of ``counts`` (every action that began, in
    the order they first did) and the code outside them, with ``action_stats``' numbers."""
    order = list(dict.fromkeys([OUTSIDE_LABEL] + [action_label(a) for a in counts] + list(stats["action"])))
    grouped = stats.groupby("action", sort=False)
    calls = grouped["ncalls"].sum()
    functions = grouped.size()
    tottime = grouped["tottime_s"].sum()
    top = stats.loc[grouped["tottime_s"].idxmax().to_numpy()] if len(stats) else stats
    top_name = dict(zip(top["action"], pstats_location(top, full_paths=True)))
    top_name.update({a: "" for a in order if tottime.get(a, 0.0) <= 0.0})
    total = float(stats["tottime_s"].sum())
    by_label = {action_label(a): n for a, n in counts.items()}
    return pd.DataFrame(
        {
            "action": order,
            "count": np.array([1 if a == OUTSIDE_LABEL else by_label.get(a, 0) for a in order], dtype=np.int64),
            "calls": calls.reindex(order, fill_value=0).to_numpy(dtype=np.int64),
            "functions": functions.reindex(order, fill_value=0).to_numpy(dtype=np.int64),
            "tottime_s": tottime.reindex(order, fill_value=0.0).to_numpy(dtype=np.float64),
            # a float column either way (a bare NaN made it an object column of NaN)
            "share_of_total": (tottime.reindex(order, fill_value=0.0).to_numpy(dtype=np.float64) / total
                               if total > 0 else np.full(len(order), np.nan)),
            "top_function": [top_name.get(a, "") for a in order],
        },
        columns=list(ACTION_COLUMNS),
    )
