"""In profiles of several ranks: in one collective, one rank spends at least
``COLLECTIVE_WAIT_MIN_RATIO`` times the median of the other ranks' time, and the difference is at
least ``COLLECTIVE_WAIT_MIN_SHARE`` of that rank's span ("high" from three times that share). A
collective ends on every rank together, so the extra time is that rank waiting for the others to
arrive: the ranks that spend least in it are the late ones. One finding per collective."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pandas as pd

from ...format import fmt_us
from ._common import Finding, TorchContext, pct, to_python

COLLECTIVE_WAIT_MIN_RATIO = 2.0
COLLECTIVE_WAIT_MIN_SHARE = 0.05


def find(ctx: TorchContext) -> Iterator[Finding]:
    if "rank" not in ctx.events.columns or len(ctx.rank_labels) < 2:
        return
    yield from from_tables(ctx.profile.collectives(), ctx.profile.ranks().table, list(ctx.rank_labels))


def from_tables(coll: pd.DataFrame, rank_table: pd.DataFrame, ranks: list[Any]) -> Iterator[Finding]:
    """The finding from ``collectives()`` and ``ranks().table`` (also of a folder of ranks
    summarized apart, which has no events table: ``nbprof.cluster``)."""
    if len(coll) == 0 or len(ranks) < 2:
        return
    spans = dict(zip(rank_table["rank"], rank_table["span_us"]))
    per = coll.groupby(["name", "rank"], sort=True)["total_us"].sum().unstack("rank", fill_value=0.0)
    per = per.reindex(columns=ranks, fill_value=0.0)
    for name, row in per.iterrows():
        t = row.to_numpy(dtype=np.float64)
        i = int(np.argmax(t))
        median = float(np.median(np.delete(t, i)))
        extra = float(t[i]) - median
        span = float(spans[ranks[i]])
        share = extra / span if span > 0 else 0.0
        if t[i] < COLLECTIVE_WAIT_MIN_RATIO * median or share < COLLECTIVE_WAIT_MIN_SHARE:
            continue
        late = ranks[int(np.argmin(t))]
        msg = (f"Rank {ranks[i]} waits in {name}: {fmt_us(t[i])} against a median {fmt_us(median)} on the other "
               f"ranks ({fmt_us(extra)} more, {pct(share)} of its span). It arrives first and waits for the others; "
               f"the latest is rank {late} ({fmt_us(t[int(np.argmin(t))])}): what does it do before {name}?")
        severity = "high" if share >= 3 * COLLECTIVE_WAIT_MIN_SHARE else "medium"
        yield Finding(severity, msg,
                      {"collective": str(name), "waiting_rank": to_python(ranks[i]), "late_rank": to_python(late),
                       "total_us": {str(r): float(v) for r, v in zip(ranks, t)}, "extra_us": extra, "share": share},
                      score=share)
