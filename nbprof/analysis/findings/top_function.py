"""The function with the most own time and its share; always. "medium" at
``TOP_FUNCTION_MEDIUM_SHARE`` or more, else "low"."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ...format import fmt_us, plural
from ._common import Finding, PythonContext, pct

TOP_FUNCTION_MEDIUM_SHARE = 0.5


def find(ctx: PythonContext) -> Iterator[Finding]:
    st = ctx.stats
    total = ctx.total_s
    tt = st["tottime_s"].to_numpy()
    i = int(np.argmax(tt))
    share = float(tt[i] / total)
    ncalls = int(st["ncalls"].iloc[i])
    msg = (f"{ctx.location[i]} spends the most time in its own code: {fmt_us(tt[i] * 1e6)}, {pct(share)} of "
           f"{fmt_us(total * 1e6)}, over {plural(ncalls, 'call')}. ")
    msg += "Sort by cumtime (-s cumtime) to see which caller is behind it; .callers(name) lists them."
    yield Finding("medium" if share >= TOP_FUNCTION_MEDIUM_SHARE else "low", msg,
                  {"function": str(st["function"].iloc[i]), "filename": str(st["filename"].iloc[i]),
                   "lineno": int(st["lineno"].iloc[i]), "tottime_s": float(tt[i]), "share": share,
                   "ncalls": ncalls},
                  score=share)
