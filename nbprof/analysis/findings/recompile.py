"""A compiled function was compiled again because a guard of its earlier compilation failed
(an input's shape, dtype or a Python value changed): one finding per function, with how many
times, the first failed guard and what to try. "high" at ``RECOMPILE_HIGH_COUNT`` recompiles of
one function or more (each costs a full compilation), else "medium"."""

from __future__ import annotations

from typing import Iterator

from ._common import Finding, TorchContext

RECOMPILE_HIGH_COUNT = 3


def find(ctx: TorchContext) -> Iterator[Finding]:
    rec = ctx.profile.compilation().recompiles
    if not len(rec):
        return
    total = len(rec)
    for (frame, source), g in rec.groupby(["frame", "source"], sort=False):
        n = len(g)
        first = g.iloc[0]
        where = f" ({source})" if source else ""
        advice = f": {first['advice']}" if first["advice"] else ""
        msg = (f"{frame}{where} recompiled {n} time{'s' if n != 1 else ''}; the first failed guard: "
               f"{first['reason']}{advice}.")
        yield Finding("high" if n >= RECOMPILE_HIGH_COUNT else "medium", msg,
                      {"frame": frame, "source": source, "recompiles": n, "reason": first["reason"]},
                      score=n / total)
