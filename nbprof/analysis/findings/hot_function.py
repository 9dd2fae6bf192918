"""Functions called at least ``HOT_MIN_CALLS`` times, at most ``HOT_MAX_PER_CALL_S``
per call (cumulative), that take at least ``HOT_MIN_SHARE`` of the total time ("high" from
``HOT_HIGH_SHARE``); at most ``HOT_MAX_REPORTED``."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ...format import fmt_us
from ._common import Finding, PythonContext, pct

HOT_MIN_CALLS = 10_000
HOT_MAX_PER_CALL_S = 100e-6
HOT_MIN_SHARE = 0.10
HOT_HIGH_SHARE = 0.30
HOT_MAX_REPORTED = 3


def find(ctx: PythonContext) -> Iterator[Finding]:
    st = ctx.stats
    total = ctx.total_s
    nc = st["ncalls"].to_numpy()
    ct = st["cumtime_s"].to_numpy()
    tt = st["tottime_s"].to_numpy()
    per_call = ct / np.maximum(nc, 1)
    cshare = ct / total
    hot = np.flatnonzero((nc >= HOT_MIN_CALLS) & (per_call <= HOT_MAX_PER_CALL_S) & (cshare >= HOT_MIN_SHARE))
    hot = hot[np.argsort(-cshare[hot], kind="stable")][:HOT_MAX_REPORTED]
    for j in hot:
        msg = (f"{ctx.location[j]} was called {int(nc[j]):,} times, {fmt_us(per_call[j] * 1e6)} per call, "
               f"{pct(cshare[j])} of the time with what it calls: the cost is in the number of calls. "
               "Work on whole arrays (numpy, pandas, torch), hoist work out of the loop, cache results "
               "(functools.lru_cache) or batch the calls.")
        yield Finding("high" if cshare[j] >= HOT_HIGH_SHARE else "medium", msg,
                      {"function": str(st["function"].iloc[j]), "filename": str(st["filename"].iloc[j]),
                       "lineno": int(st["lineno"].iloc[j]), "ncalls": int(nc[j]), "cumtime_s": float(ct[j]),
                       "tottime_s": float(tt[j]), "per_call_s": float(per_call[j]), "share": float(cshare[j])},
                      score=float(cshare[j]))
