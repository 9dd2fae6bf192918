"""The operator with the most self device time (self CPU time without device work) and its
share; always, when the profile has operators. "medium" at ``TOP_OP_MEDIUM_SHARE`` or more, else
"low"."""

from __future__ import annotations

import re
from typing import Iterator

import numpy as np

from ...format import fmt_us
from ._common import SCALAR_READ_OPS, Finding, TorchContext, pct, to_python

TOP_OP_MEDIUM_SHARE = 0.5

# what to suggest for the top operator, by its name
_COMPUTE_HINT = re.compile(r"mm|matmul|conv|linear|gemm|bmm|addmm|baddbmm|attention|einsum|lstm|gru|rnn", re.I)
_COPY_HINT = re.compile(r"copy_|::to$|_to_copy|contiguous|clone|cat$|stack$", re.I)


def find(ctx: TorchContext) -> Iterator[Finding]:
    p = ctx.profile
    s = p.summary
    avg = p.key_averages("op")
    ops = avg[avg["kind"].astype(str) == "op"]
    metric = "self_device_us" if ctx.has_device else "self_cpu_us"
    total = s.self_device_us if ctx.has_device else s.self_cpu_us
    if len(ops) == 0 or total <= 0:
        return
    values = ops[metric].to_numpy()
    i = int(np.argmax(values))
    if values[i] <= 0:
        return
    row = ops.iloc[i]
    name = str(row["name"])
    share = float(values[i] / total)
    count = int(row["count"])
    where = "self CUDA time" if ctx.has_device else "self CPU time"
    msg = (f"{name} takes {pct(share)} of {where} ({fmt_us(values[i])} in {count:,} calls, "
           f"{fmt_us(values[i] / max(count, 1))} each). ")
    if _COMPUTE_HINT.search(name):
        msg += ("It is compute: check its input shapes (--shapes, --group-by shape), run it in lower "
                "precision (torch.autocast with bfloat16, TF32 matmuls) or try torch.compile.")
    elif _COPY_HINT.search(name):
        msg += ("It copies data: look for dtype or device conversions and .contiguous() inside the loop "
                "(--stack shows where they are called).")
    elif name in SCALAR_READ_OPS or name == "aten::item":
        msg += "Each .item() waits for the device: keep values on the device and read them rarely."
    else:
        msg += "See where it is called from (--stack, --group-by stack) and with which shapes (--shapes)."
    severity = "medium" if share >= TOP_OP_MEDIUM_SHARE else "low"
    yield Finding(severity, msg,
                  {"op": name, "metric": metric, "time_us": to_python(values[i]), "share": share, "count": count,
                   "avg_us": to_python(values[i] / max(count, 1))}, score=share)
