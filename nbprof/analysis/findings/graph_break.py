"""Dynamo broke a compiled graph (a ``print``, ``.item()``, an unsupported call in ``forward``):
one finding per place and reason (the ``GRAPH_BREAK_MAX_FINDINGS`` places with the most breaks),
with its source line (``In [4] line 12``) and Dynamo's reason. Each break splits the graph:
Python runs between the parts and fusion stops at the break. Always "medium"."""

from __future__ import annotations

from typing import Iterator

from ._common import Finding, TorchContext

GRAPH_BREAK_MAX_FINDINGS = 3


def find(ctx: TorchContext) -> Iterator[Finding]:
    breaks = ctx.profile.compilation().graph_breaks
    if not len(breaks):
        return
    total = len(breaks)
    groups = breaks.groupby(["source", "reason"], sort=False).agg(count=("compile_id", "size"),
                                                                 code=("code", "first"),
                                                                 explanation=("explanation", "first"))
    groups = groups.sort_values("count", ascending=False, kind="stable").head(GRAPH_BREAK_MAX_FINDINGS)
    for (source, reason), g in groups.iterrows():
        n = int(g["count"])
        where = f" at {source}" if source else ""
        code = f" (`{g['code']}`)" if g["code"] else ""
        why = f"{reason}" + (f": {g['explanation']}" if g["explanation"] else "")
        msg = (f"{n} graph break{'s' if n != 1 else ''}{where}{code}: {why}. Each break splits the compiled graph "
               "and runs Python between the parts: move the call out of the compiled code, or use a traceable "
               "alternative (torch._dynamo.explain(model)(x) lists every break).")
        yield Finding("medium", msg, {"source": source, "reason": reason, "count": n, "graph_breaks": total},
                      score=n / total)
