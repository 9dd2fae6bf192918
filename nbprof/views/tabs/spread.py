"""The per-rank columns of a folder's summed tables (Operators, By input shape, By stack, Ranges,
Modules): a sum over the ranks hides a rank that spends more than the others, so each row also
says, where the ranks differ, the least and the most one rank spent on it, which rank that was,
and on how many ranks the row exists (``analysis.ranks.rank_spread``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...analysis.ranks import rank_spread
from ..table import Column

__all__ = ["with_rank_spread"]


def with_rank_spread(profile: Any, frame: pd.DataFrame, cols: list[Column], per_rank: pd.DataFrame,
                     keys: list[str], value: str, label: str) -> tuple[pd.DataFrame, list[Column], str]:
    """``frame`` (the summed table, in its order) with the spread of ``value`` over the ranks;
    ``cols`` with the spread's columns right after ``value``'s (none where every row is the same
    on every rank: "On ranks" only where some row is missing on some rank, min / max / the rank
    with the most where the ranks' values differ); a caption's part saying what they are ("" when
    none)."""
    out, spread_cols, caption = _spread(profile, frame, per_rank, keys, value, label)
    return out, _insert_after(cols, value, spread_cols), caption


def _spread(profile: Any, frame: pd.DataFrame, per_rank: pd.DataFrame, keys: list[str], value: str,
            label: str) -> tuple[pd.DataFrame, list[Column], str]:
    ranks = sorted(profile.rank_labels)
    spread = rank_spread(per_rank, keys, value, ranks)
    out = frame.reset_index(drop=True).merge(spread, on=keys, how="left", sort=False)
    out["ranks"] = out["ranks"].fillna(0).astype("int64")
    cols: list[Column] = []
    if (out["ranks"] < len(ranks)).any():
        cols.append(Column("ranks", "On ranks", "count"))
    if (out["rank_min_us"] != out["rank_max_us"]).any():
        cols += [Column("rank_min_us", f"{label}, least rank", "time_us"), Column("rank_max_us", f"{label}, most rank", "time_us"),
                 Column("max_rank", "Most on rank", "text")]
    if not cols:
        return out, cols, ""
    return out, cols, (f"summed over {len(ranks)} ranks; {label}, least / most rank: what one rank spent "
                       "(0 on a rank without the row), and the rank that spent the most")


def _insert_after(cols: list[Column], key: str, extra: list[Column]) -> list[Column]:
    """``cols`` with ``extra`` right after the column of ``key`` (at the end without one): the
    ranks' spread beside the sum it spreads."""
    at = next((i + 1 for i, c in enumerate(cols) if c.key == key), len(cols))
    return cols[:at] + extra + cols[at:]
