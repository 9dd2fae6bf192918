"""torch.compile compiled during the profile for at least ``COMPILE_MIN_SHARE`` of the span or
``COMPILE_MIN_US``: the time, its two largest phases (Dynamo tracing, AOT autograd, Inductor
lowering and codegen, the C++ / Triton compile, autotuning, cache lookups) and whether the caches
hit; "high" at ``COMPILE_HIGH_SHARE`` of the span or more. The profile shows compilation, not the
compiled model's speed: profile a later call."""

from __future__ import annotations

from typing import Iterator

from ...format import fmt_us
from ._common import Finding, TorchContext, pct

COMPILE_MIN_SHARE = 0.1
COMPILE_MIN_US = 1e6
COMPILE_HIGH_SHARE = 0.5


def find(ctx: TorchContext) -> Iterator[Finding]:
    c = ctx.profile.compilation()
    total = c.compile_us
    if total <= 0:
        return
    share = min(total * 1000 / ctx.span_ns, 1.0) if ctx.span_ns else 1.0
    if share < COMPILE_MIN_SHARE and total < COMPILE_MIN_US:
        return
    phases = c.phases.sort_values("compile_us", ascending=False).head(2)
    split = ", ".join(f"{fmt_us(t)} in {p}" for p, t in zip(phases["phase"], phases["compile_us"]))
    n = len(c.frames)
    frames = c.frames[c.frames["frame"] != ""]
    what = ""
    if len(frames):
        first = frames.iloc[0]
        where = f" ({first['source']})" if first["source"] else ""
        what = f" of {first['frame']}{where}" + (f" and {n - 1} more" if n > 1 else "")
    msg = (f"torch.compile compiled for {fmt_us(total)} ({pct(share)} of the profile){what}: {split}. "
           f"{n} compilation{'s' if n != 1 else ''}")
    cache = [v for v in c.frames["fx_graph_cache"] if v]
    if cache:
        hits = sum(v == "hit" for v in cache)
        msg += f"; the FX graph cache hit {hits} of {len(cache)}"
    msg += (". This profile measures compilation: profile a later call for the compiled model's steady state "
            "(the Compile tab has each compilation's phases).")
    yield Finding("high" if share >= COMPILE_HIGH_SHARE else "medium", msg,
                  {"compile_us": total, "share": share, "compilations": n,
                   "phases_us": dict(zip(c.phases["phase"], c.phases["compile_us"].astype(float)))}, score=share)
