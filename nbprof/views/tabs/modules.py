"""The Modules tab: the ``nn.Module`` hierarchy of a ``--modules`` profile as an indented tree
(a module, then its children in order of first call), with each module's calls and its total and
self CPU and device time; only in a profile with ``nn.Module:`` events."""

from __future__ import annotations

from typing import Any

from ..datatable import datatable_html
from ..table import Column
from .base import Tab
from .spread import with_rank_spread

__all__ = ["MODULES", "CLUSTER_MODULES"]

# the tree's indent per level: non-breaking spaces survive HTML and the static preview
_INDENT = "\u00a0\u00a0\u00a0"


def render(report: Any, per_rank: bool = False) -> str:
    tree = report.profile.modules()
    tree["tree"] = [_INDENT * int(d) + str(n) for d, n in zip(tree["depth"], tree["name"])]
    cols = [Column("tree", "Module", "text", 80), Column("type", "Type", "name", 40), Column("calls", "Calls", "count"),
            Column("cpu_total_us", "CPU total", "time_us"), Column("self_cpu_us", "Self CPU", "time_us")]
    if (tree["device_total_us"] > 0).any():
        cols += [Column("device_total_us", "GPU total", "time_us"), Column("self_device_us", "Self GPU", "time_us")]
    caption = "nn.Module calls as a tree: self = total less the child modules' calls"
    if per_rank:  # a folder of ranks: how the ranks differ on each module
        tree, cols, spread = with_rank_spread(report.profile, tree, cols, report.profile.modules(per_rank=True),
                                              ["module"], "cpu_total_us", "CPU total")
        caption += f"; {spread}" if spread else ""
    cols.append(Column("module", "Path", "name", 100))
    return datatable_html(tree, cols, order=[], page_length=report.limit or 0, caption=caption)


def render_ranks(report: Any) -> str:
    """A folder's Modules: summed over the ranks, with how they differ."""
    return render(report, per_rank=True)


MODULES = Tab("Modules", render, applies=lambda p: len(p.modules()) > 0)
CLUSTER_MODULES = Tab("Modules", render_ranks, applies=lambda p: len(p.modules()) > 0)
