"""With ``--lines``: the line of the user's code where the CPU waits longest for the device: the
blocking runtime calls of the ``sync`` finding (``cudaStreamSynchronize`` under ``.item()``,
``.cpu()``, ``print(loss)``, ``if tensor:``; ``cudaDeviceSynchronize``, synchronous copies), each on
the line that ran its operator, summed per line, with that line's share of the profiled span.
Unlike ``sync`` it counts a wait after the last launch too: the line is where the time goes
either way. Fires when the line waits at least ``SYNC_LINE_MIN_SHARE`` of the span ("high" from
``SYNC_LINE_HIGH_SHARE``). Quiet on a profile without device work: on the CPU a ``.item()`` reads
memory the CPU already holds; on Apple's MPS device torch records no device work, and the ``sync``
finding names the waits, without their lines."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ...format import fmt_us, plural
from ..hot_lines import line_quote, event_line_rows, line_where, lines_of
from ._common import Finding, TorchContext, pct
from .sync import blocking_calls

SYNC_LINE_MIN_SHARE = 0.05
SYNC_LINE_HIGH_SHARE = 0.2


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device:
        return
    lines = lines_of(ctx.profile)
    if not len(lines):
        return
    line_of = event_line_rows(ctx.profile)
    if line_of is None:
        return
    calls = blocking_calls(ctx)
    calls = calls[(line_of[calls] >= 0) & (line_of[calls] < len(lines))]
    if len(calls) == 0 or not ctx.span_ns:
        return
    waited = pd.Series(ctx.dur_ns[calls] / 1000.0).groupby(line_of[calls]).agg(["size", "sum"])
    waited = waited.sort_values("sum", ascending=False, kind="stable")
    at = int(waited.index[0])
    count, waited_us = int(waited["size"].iloc[0]), float(waited["sum"].iloc[0])
    share = waited_us * 1000.0 / ctx.span_ns
    if share < SYNC_LINE_MIN_SHARE:
        return
    row = lines.iloc[at]
    mine = calls[line_of[calls] == at]
    names = ctx.names.to_numpy()
    parent = ctx.events["parent"].to_numpy()
    ops = [str(names[p]) if p >= 0 else "no operator" for p in parent[mine]]
    by_op = pd.Series(ctx.dur_ns[mine] / 1000.0).groupby(np.asarray(ops)).sum().sort_values(ascending=False)
    call_names = sorted(set(str(n) for n in names[mine]))
    where = line_where(row["cell"], row["file"], int(row["line"]))
    function = "" if row["function"] == "<module>" else f", in {row['function']}"
    msg = (f"The CPU waits for the GPU on {where}{function}{line_quote(row['source'])}, "
           f"{plural(count, 'wait')}, {fmt_us(waited_us)} in all, {pct(share)} of the span "
           f"({', '.join(call_names)} under {by_op.index[0]}). Each wait lets the GPU run dry while Python catches up: "
           "keep the value on the device (accumulate the loss as a tensor, read or print it every N steps) or move "
           "the line out of the loop.")
    yield Finding("high" if share >= SYNC_LINE_HIGH_SHARE else "medium", msg,
                  {"cell": row["cell"] if isinstance(row["cell"], str) else None, "file": str(row["file"]),
                   "line": int(row["line"]), "function": str(row["function"]), "source": str(row["source"]),
                   "waits": count, "waited_us": waited_us, "share_of_span": share,
                   "by_op": {str(k): float(v) for k, v in by_op.items()}},
                  score=share)
