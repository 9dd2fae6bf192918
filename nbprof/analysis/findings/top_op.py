"""The operator with the most self device time (self CPU time without device work) and its
share; always, when the profile has operators. "medium" at ``TOP_OP_MEDIUM_SHARE`` or more, else
"low". On Apple's MPS device (where torch records no device work) an op whose CPU time is a wait
for the device (``.item()``, copies: the ``sync`` finding) is never named: the top op is the one
with the most self CPU time among the others, and their share is said from ``MPS_WAIT_NOTE_SHARE``."""

from __future__ import annotations

import re
from typing import Iterator

from ...format import fmt_share, fmt_us, plural
from ..breakdown import COMM_PATTERN
from ..summary import top_row
from ._common import MPS_WAIT_OPS, SCALAR_READ_OPS, Finding, TorchContext, pct, to_python

TOP_OP_MEDIUM_SHARE = 0.5
MPS_WAIT_NOTE_SHARE = 0.01  # on MPS, the waits left out are said from this share of the self CPU time

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
    waits = ops["name"].astype(str).isin(MPS_WAIT_OPS) if ctx.on_mps else None
    if waits is not None:
        wait_us = float(ops.loc[waits, metric].sum())
        ops = ops[~waits]
    # the headline's definition of the top row and its share (summary.top_row), over the ops
    name, value, share = top_row(ops, metric, s.self_cpu_us, s.self_device_us)
    if name is None or value <= 0:
        return
    row = ops[ops["name"] == name].iloc[0]
    count = int(row["count"])
    where = "self CUDA time" if ctx.has_device else "self CPU time"
    msg = (f"{name} takes {fmt_share(share)} of {where} ({fmt_us(value)} in {plural(count, 'call')}, "
           f"{fmt_us(value / max(count, 1))} each). ")
    if waits is not None and wait_us >= MPS_WAIT_NOTE_SHARE * total:
        msg += (f"Ops that wait for the MPS device (.item(), copies: {pct(wait_us / total)} of it) are not named "
                "here: their time is the device's work. ")
    msg += _advice(ctx, name)
    severity = "medium" if share >= TOP_OP_MEDIUM_SHARE else "low"
    yield Finding(severity, msg,
                  {"op": name, "metric": metric, "time_us": to_python(value), "share": share, "count": count,
                   "avg_us": to_python(value / max(count, 1))}, score=share)


def _advice(ctx: TorchContext, name: str) -> str:
    """What to try for the top operator, only what applies to this profile: a flag that was on
    is not suggested again (its tab is named instead), GPU-only remedies (TF32) only when the
    profile has device work."""
    collected = ctx.profile.collected
    shapes = ("see its input shapes in the By input shape tab" if collected["shapes"]
              else "record its input shapes (--shapes --group-by shape)")
    stacks = ("see where it is called from in the By stack tab" if collected["stack"]
              else "see where it is called from (--stack --group-by stack)")
    if ctx.on_mps:  # the device's work is in no op: an op's CPU time is its host side
        return (f"On MPS an op's CPU time is its host side (dispatching and encoding the device's work), not the "
                f"work itself: fewer, larger ops (batches, torch.compile) cut it; {shapes}.")
    # before the compute hint: "record_param_comms" contains "mm"
    if COMM_PATTERN.search(name):
        return ("It is communication: its time includes waiting for the other ranks. See how much of it "
                "compute hides (ranks().table's overlap_pct, the Ranks tab) and which rank the others wait "
                "for; overlap it with compute (DDP buckets, FSDP prefetching) or send less.")
    if _COMPUTE_HINT.search(name):
        lower = ("torch.autocast with bfloat16, TF32 matmuls" if ctx.has_device
                 else "torch.autocast('cpu', dtype=torch.bfloat16)")
        return f"It is compute: {shapes}, run it in lower precision ({lower}) or try torch.compile."
    if _COPY_HINT.search(name):
        return ("It copies data: look for dtype or device conversions and .contiguous() inside the loop; "
                f"{stacks}.")
    if name in SCALAR_READ_OPS or name == "aten::item":
        if ctx.has_device:
            return "Each .item() waits for the device: keep values on the device and read them rarely."
        return "Each .item() turns a tensor into a Python number: keep values in tensors and read them rarely."
    return f"{stacks[0].upper()}{stacks[1:]}; {shapes}."
