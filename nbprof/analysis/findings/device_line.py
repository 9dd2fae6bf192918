"""With ``--lines``: the line of the user's code with the most self device time (the kernels,
copies and memsets its own operators launched) and its share of all the device time; whenever a
profile with lines ran device work. "medium" at ``DEVICE_LINE_MEDIUM_SHARE`` or more, else "low"."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ...format import fmt_us
from ..hot_lines import line_quote, line_where, lines_of, top_lines
from ._common import Finding, TorchContext, pct

DEVICE_LINE_MEDIUM_SHARE = 0.5


def find(ctx: TorchContext) -> Iterator[Finding]:
    lines = lines_of(ctx.profile)
    if not len(lines) or "self_device_us" not in lines.columns:
        return
    total = float(np.nansum(lines["self_device_us"].to_numpy(dtype=float)))  # the outside row too
    if total <= 0:
        return
    best = top_lines(lines, 1)  # by self device time, since the profile has some
    if not len(best):
        return
    row = best.iloc[0]
    device_us = float(row["self_device_us"])
    share = device_us / total
    where = line_where(row["cell"], row["file"], int(row["line"]))
    function = "" if row["function"] == "<module>" else f", in {row['function']}"
    msg = (f"The line with the most GPU time is {where}{function}{line_quote(row['source'])}, "
           f"{fmt_us(device_us)} of kernels its operators launched, {pct(share)} of all device time"
           f" (its CPU side: {fmt_us(float(row['self_cpu_us']))}). The Source tab shows it in its code; "
           "the Kernels tab what ran.")
    yield Finding("medium" if share >= DEVICE_LINE_MEDIUM_SHARE else "low", msg,
                  {"cell": row["cell"] if isinstance(row["cell"], str) else None, "file": str(row["file"]),
                   "line": int(row["line"]), "function": str(row["function"]), "source": str(row["source"]),
                   "self_device_us": device_us, "self_cpu_us": float(row["self_cpu_us"]),
                   "share_of_device": share},
                  score=share)
