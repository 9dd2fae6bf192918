"""With ``--lines``: the line of the user's code with the most own time (its wall time without the
lines of the user's code it called: the line doing the work, not the cell line that called it),
its hits and its share of the run's wall time; whenever lines were followed. "medium" at
``HOT_LINE_MEDIUM_SHARE`` or more, else "low"."""

from __future__ import annotations

from typing import Iterator

from ...format import fmt_us, plural
from ..hot_lines import line_quote, line_where, lines_of, top_lines
from ._common import Finding, PythonContext, pct

HOT_LINE_MEDIUM_SHARE = 0.3


def find(ctx: PythonContext) -> Iterator[Finding]:
    lines = lines_of(ctx.profile)
    if not len(lines) or "self_time_us" not in lines.columns:
        return
    best = top_lines(lines, 1)
    if not len(best):
        return
    row = best.iloc[0]
    wall_us = (ctx.profile.meta.wall_s or 0.0) * 1e6
    own = float(row["self_time_us"])
    share = own / wall_us if wall_us > 0 else 0.0
    hits = int(row["hits"])
    where = line_where(row["cell"], row["file"], int(row["line"]))
    function = "" if row["function"] == "<module>" else f", in {row['function']}"
    msg = (f"The slowest line is {where}{function}{line_quote(row['source'])}, {fmt_us(own)} of its own "
           f"({pct(share)} of the run's wall time) over {plural(hits, 'hit')} ({fmt_us(own / max(hits, 1))} each). ")
    msg += ("Make each run of it cheaper, or run it less often (hoist it out of the loop, cache its result, work on "
            "whole arrays); the Source tab shows it in its code.")
    yield Finding("medium" if share >= HOT_LINE_MEDIUM_SHARE else "low", msg,
                  {"cell": row["cell"] if isinstance(row["cell"], str) else None, "file": str(row["file"]),
                   "line": int(row["line"]), "function": str(row["function"]), "source": str(row["source"]),
                   "hits": hits, "self_time_us": own, "time_us": float(row["time_us"]), "share_of_wall": share},
                  score=share)
