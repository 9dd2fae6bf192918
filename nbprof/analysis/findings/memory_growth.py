"""Memory grows step after step (``--memory`` and steps: ``ProfilerStep#N`` ranges, Lightning's
batches, or with ``--lines`` a loop of your code; ``p.memory_growth()``): on a device with at
least ``GROWTH_MIN_STEPS`` steps, at least ``GROWTH_STEADY_SHARE`` of the steps after the first
each keep ``GROWTH_MIN_STEP_BYTES`` or more allocated until the profile ends, and the allocator's
total grows over the steps by at least ``GROWTH_HELD_SHARE`` of what they keep (so frees the
profiler did not record, between ``--schedule``'s active steps, do not count as growth). Names
the line of your code (with ``--lines``; else the operator) that allocated most of what the steps
keep and its bytes per step, and the likely cause where the trace shows it: when at least
``CAUSE_GRAD_SHARE`` of the kept bytes are results of operators that made an autograd node
(torch's sequence numbers), from ``CAUSE_MIN_OPS_PER_STEP`` or more such operators a step (the
graph's saved tensors, not just one kept result), an evaluation loop without ``torch.no_grad()``
where no backward ran, else a tensor that requires grad kept across steps (``.item()`` /
``.detach()``). "low"; "medium" when the kept bytes reach ``GROWTH_MEDIUM_SHARE`` of the most the
allocator held at a step's end."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pandas as pd

from ...format import fmt_bytes
from ..growth import backward_ran, made_autograd_node, steps_of_blocks
from ..hot_lines import line_where
from ..memory import outermost_op_rows
from ._common import Finding, TorchContext, pct, to_python

GROWTH_MIN_STEPS = 4
GROWTH_STEADY_SHARE = 0.75
GROWTH_MIN_STEP_BYTES = 4096
GROWTH_HELD_SHARE = 0.5
GROWTH_MEDIUM_SHARE = 0.25
CAUSE_GRAD_SHARE = 0.9
CAUSE_MIN_OPS_PER_STEP = 2


def find(ctx: TorchContext) -> Iterator[Finding]:
    profile = ctx.profile
    growth = profile._growth
    if not len(growth):
        return
    steps = profile._step_windows
    kept = profile._alive_at_end
    kept = kept.assign(_step=steps_of_blocks(ctx.events, kept, steps))
    kept = kept[kept["_step"].to_numpy() >= 0]
    has_lines = "line" in kept.columns
    keys = (["rank"] if "rank" in growth.columns else []) + ["device"]
    nodes: np.ndarray | None = None
    for key, g in growth.groupby(keys, sort=False):
        n = len(g)
        if n < GROWTH_MIN_STEPS:
            continue
        later = g["added_never_freed_bytes"].to_numpy()[1:]
        growing = int((later >= GROWTH_MIN_STEP_BYTES).sum())
        held = g["held_bytes"].to_numpy()
        kept_later = int(later.sum())
        if growing < GROWTH_STEADY_SHARE * (n - 1) or held[-1] - held[0] < GROWTH_HELD_SHARE * kept_later:
            continue
        key = key if isinstance(key, tuple) else (key,)
        device = str(key[-1])
        mine = kept[(kept["device"] == device).to_numpy()]
        if "rank" in keys:
            mine = mine[(mine["rank"] == key[0]).to_numpy()]
        total = int(g["added_never_freed_bytes"].sum())
        # a typical step's: the last step's results (the last loss, the gradients) stay as well
        per_step = float(np.median(g["added_never_freed_bytes"].to_numpy()))
        who = f"rank {to_python(key[0])} {device}" if "rank" in keys else device
        keeping = int((g["added_never_freed_bytes"].to_numpy() >= GROWTH_MIN_STEP_BYTES).sum())
        msg = (f"Memory grows step after step on {who}: {keeping} of {n} steps ({steps.source}) each left blocks "
               f"allocated until the profile ended, {fmt_bytes(per_step)} a step ({fmt_bytes(total)} in all; the "
               f"allocator held {fmt_bytes(int(held[0]))} after the first step, {fmt_bytes(int(held[-1]))} after "
               f"the last).")
        evidence: dict[str, Any] = {"device": device, "steps": n, "steps_from": steps.source,
                                    "growing_steps": growing, "kept_bytes": total, "kept_bytes_per_step": per_step,
                                    "held_first_bytes": int(held[0]), "held_last_bytes": int(held[-1])}
        if "rank" in keys:
            evidence["rank"] = to_python(key[0])
        # the steps but the last: what the last step leaves (its results, the gradients) is no growth
        numbers = g.sort_values("start_us", kind="stable")["step"].to_numpy()[:-1]
        mine = mine.assign(_n=steps.number[mine["_step"].to_numpy()])
        typical = mine[np.isin(mine["_n"].to_numpy(), numbers)]
        top = _top_holder(typical, has_lines, numbers)
        if top is not None:
            evidence.update(top)
            if "line" in top:
                code = f" `{top['source'].strip()}`" if top["source"].strip() else ""
                msg += f" Most of it was allocated on {top['where']}{code}: {fmt_bytes(top['bytes_per_step'])} a step."
            else:
                msg += f" Most of it was allocated under {top['op']}: {fmt_bytes(top['bytes_per_step'])} a step."
        if nodes is None:
            nodes = made_autograd_node(ctx.events)
        cause = _cause(ctx, typical, nodes)
        evidence.update(cause)
        if cause["cause"] == "no_grad":
            msg += (f" Likely cause: an evaluation loop without torch.no_grad(): the steps ran with grad mode on and no "
                    f"backward ran, so each kept result holds its autograd graph and the tensors saved for it "
                    f"({cause['graph_ops_per_step']:g} operators' results a step, {pct(cause['graph_share'])} of the "
                    f"kept bytes); run it under `with torch.no_grad():`, or keep `.item()` / `.detach()` of the result.")
        elif cause["cause"] == "kept_graph":
            msg += (f" Likely cause: a tensor that requires grad is kept across steps and holds its autograd graph "
                    f"and the tensors saved for it ({cause['graph_ops_per_step']:g} operators' results a step, "
                    f"{pct(cause['graph_share'])} of the kept bytes): keep `.item()` (a number) or `.detach()` instead.")
        share = total / float(held.max()) if held.max() > 0 else 0.0
        evidence["kept_share_of_held"] = share
        yield Finding("medium" if share >= GROWTH_MEDIUM_SHARE else "low", msg, evidence, score=min(share, 1.0))


def _top_holder(kept: pd.DataFrame, has_lines: bool, numbers: np.ndarray) -> dict[str, Any] | None:
    """The line (with lines; else the outermost operator) whose blocks make most of what the steps
    ``numbers`` kept, and its bytes per step (the median over those steps)."""
    if not len(kept):
        return None
    if has_lines:
        on_line = kept[kept["file"].notna().to_numpy()]
        if len(on_line):
            by = on_line.groupby(["cell", "file", "line", "source"], dropna=False, sort=False)["bytes"].sum()
            by = by.sort_values(ascending=False, kind="stable")
            (cell, file, line, source), nbytes = by.index[0], int(by.iloc[0])
            cell = cell if isinstance(cell, str) else None
            mine = on_line[(on_line["file"] == file).to_numpy() & (on_line["line"] == line).to_numpy()]
            return {"cell": cell, "file": file, "line": int(line), "source": str(source or ""),
                    "where": line_where(cell, file, int(line)), "line_bytes": nbytes,
                    "bytes_per_step": _median_per_step(mine, numbers)}
    op = kept["top_op"].replace("", "(outside operators)")
    by = kept["bytes"].groupby(op.to_numpy()).sum().sort_values(ascending=False, kind="stable")
    mine = kept[(op == by.index[0]).to_numpy()]
    return {"op": str(by.index[0]), "op_bytes": int(by.iloc[0]), "bytes_per_step": _median_per_step(mine, numbers)}


def _median_per_step(blocks: pd.DataFrame, numbers: np.ndarray) -> float:
    """The median over the steps ``numbers`` of the bytes of ``blocks`` each kept (0 for none)."""
    per = blocks["bytes"].groupby(blocks["_n"].to_numpy()).sum().reindex(numbers, fill_value=0)
    return float(np.median(per.to_numpy())) if len(per) else 0.0


def _cause(ctx: TorchContext, kept: pd.DataFrame, nodes: np.ndarray) -> dict[str, Any]:
    """What the trace says about why the steps keep their blocks (the module doc): the share of
    the kept bytes that are results of operators that made an autograd node, how many such
    operators a step kept results of (the median over the steps), and whether a backward ran."""
    out: dict[str, Any] = {"cause": None, "graph_share": 0.0, "graph_ops_per_step": 0.0,
                           "backward_ran": backward_ran(ctx.events)}
    if not len(kept):
        return out
    top = outermost_op_rows(ctx.events, kept["row"].to_numpy())
    graph = (top >= 0) & nodes[np.maximum(top, 0)]
    nbytes = kept["bytes"].to_numpy()
    share = float(nbytes[graph].sum()) / float(nbytes.sum()) if nbytes.sum() > 0 else 0.0
    per_step = pd.Series(top[graph]).groupby(kept["_n"].to_numpy()[graph]).nunique()
    ops = float(per_step.median()) if len(per_step) else 0.0
    out.update({"graph_share": share, "graph_ops_per_step": ops})
    if share >= CAUSE_GRAD_SHARE and ops >= CAUSE_MIN_OPS_PER_STEP:
        out["cause"] = "kept_graph" if out["backward_ran"] else "no_grad"
    return out
