"""A device was idle (no kernel, copy or memset running) for at least ``GPU_IDLE_MIN_SHARE`` of
the profiled span ("high" from ``GPU_IDLE_HIGH_SHARE``); gives the ``GPU_IDLE_GAPS_SHOWN`` longest
gaps and what the CPU was running during each."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE, category_codes
from ...format import fmt_us
from .._intervals import assign_points, gaps, union_segments
from ._common import Finding, TorchContext, pct, to_python

GPU_IDLE_MIN_SHARE = 0.30
GPU_IDLE_HIGH_SHARE = 0.60
GPU_IDLE_GAPS_SHOWN = 3


def _device_segments(ctx: TorchContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Busy segments per (rank, device): (key, start, end), key labels (rank code, device)."""
    rows = np.flatnonzero(ctx.work)
    dev_codes, dev_labels = category_codes(ctx.events["device"], rows)
    key = ctx.rank[rows] * len(dev_labels) + dev_codes
    seg = union_segments(ctx.start_ns[rows], ctx.end_ns[rows], key)
    return seg[0], seg[1], seg[2], np.asarray(dev_labels, dtype=object)


def _cpu_at(ctx: TorchContext, t_ns: np.ndarray, process: np.ndarray) -> list[str]:
    """What the CPU ran at each time: the innermost op or label open on each thread of the
    process (the main thread first), e.g. "backward (main thread); aten::fill_ (thread 429)"."""
    ev = ctx.events
    cpu_kinds = [KIND_CODE[k] for k in ("op", "annotation", "runtime", "other")]
    cand = np.isin(ctx.kind, cpu_kinds) & (ctx.thread >= 0)
    depth = ev["depth"].to_numpy()
    raw_thread = ev["thread"].to_numpy()
    main = ctx.meta.main_thread
    names = ctx.names.to_numpy()
    out = []
    for t, p in zip(t_ns.tolist(), process.tolist()):  # a handful of gaps, not events
        rows = np.flatnonzero(cand & (ctx.process == p) & (ctx.start_ns <= t) & (ctx.end_ns > t))
        if len(rows) == 0:
            out.append("nothing torch records (Python code, I/O or waiting)")
            continue
        frame = pd.DataFrame({"lane": ctx.thread[rows], "tid": raw_thread[rows], "d": depth[rows], "r": rows})
        inner = frame.sort_values("d", kind="stable").groupby("lane", sort=False).tail(1)
        inner = inner.assign(main=inner["tid"] == main).sort_values(["main", "d"], ascending=[False, False])
        parts = [f"{names[r]} ({'main thread' if m else f'thread {tid}'})"
                 for r, m, tid in zip(inner["r"], inner["main"], inner["tid"])]
        out.append("; ".join(parts))
    return out


def find(ctx: TorchContext) -> Iterator[Finding]:
    if not ctx.has_device:
        return
    stats = ctx.profile.device_stats.devices  # computed once per profile (the report uses it too)
    stats = stats[stats["kernels"] + stats["memcpys"] + stats["memsets"] > 0]
    if len(stats) == 0:
        return
    seg_key, seg_s, seg_e, dev_labels = _device_segments(ctx)
    g = gaps(seg_key, seg_s, seg_e)
    # gaps that lie inside one recorded window (not the unrecorded time between schedule cycles)
    w = ctx.windows
    gap_rank = g["group"].to_numpy() // max(len(dev_labels), 1)
    a = assign_points(gap_rank, g["start"].to_numpy(), w["rank_code"].to_numpy(), w["start_ns"].to_numpy(),
                      w["end_ns"].to_numpy())
    b = assign_points(gap_rank, g["end"].to_numpy() - 1, w["rank_code"].to_numpy(), w["start_ns"].to_numpy(),
                      w["end_ns"].to_numpy())
    g = g[(a >= 0) & (a == b)]
    multi_rank = "rank" in stats.columns
    rank_labels = ctx.rank_labels.tolist()
    by_rank: dict[str, dict[str, float]] = {}
    if multi_rank:  # one finding per device: its most idle rank (the others in the evidence)
        for dev, grp in stats.groupby("device", sort=True):
            by_rank[str(dev)] = {str(r): float(b) for r, b in zip(grp["rank"], grp["busy_fraction"])}
        stats = stats.sort_values("busy_fraction", kind="stable").drop_duplicates("device")
    for _, row in stats.iterrows():
        idle_share = 1.0 - float(row["busy_fraction"])
        if not np.isfinite(idle_share) or idle_share < GPU_IDLE_MIN_SHARE:
            continue
        dev = str(row["device"])
        rcode = rank_labels.index(row["rank"]) if multi_rank else 0
        key = rcode * len(dev_labels) + list(dev_labels).index(dev)
        mine = g[g["group"] == key]
        mine = mine.assign(dur=mine["end"] - mine["start"]).sort_values("dur", ascending=False)
        top = mine.head(GPU_IDLE_GAPS_SHOWN)
        # the CPU's main process for this rank: the process that launched most of its work
        launches = ctx.launches
        procs = launches["process"].to_numpy()
        lrank = ctx.rank[launches["row"].to_numpy()] if len(launches) else np.zeros(0, np.int64)
        mine_procs = procs[lrank == rcode]
        proc = int(np.bincount(mine_procs).argmax()) if len(mine_procs) else 0
        mid = ((top["start"] + top["end"]) // 2).to_numpy()
        doing = _cpu_at(ctx, mid, np.full(len(mid), proc))
        largest: list[dict[str, Any]] = [
            {"start_us": float(s) / 1000.0, "dur_us": float(d) / 1000.0, "cpu": c}
            for s, d, c in zip(top["start"].tolist(), top["dur"].tolist(), doing)]
        who = f"rank {row['rank']} {dev}" if multi_rank else dev
        msg = (f"{who} was idle {pct(idle_share)} of the profiled span ({fmt_us(row['idle_us'])} of "
               f"{fmt_us(row['span_us'])}; busy {fmt_us(row['busy_us'])}). ")
        if largest:
            l0 = largest[0]
            msg += (f"The longest gap, {fmt_us(l0['dur_us'])} at {fmt_us(l0['start_us'])}, came while the CPU ran "
                    f"{l0['cpu']}. ")
        msg += ("The GPU is waiting for the CPU: load data in DataLoader workers, avoid synchronizations, give each "
                "launch more work (bigger batches) or cut the Python overhead (torch.compile, CUDA graphs).")
        severity = "high" if idle_share >= GPU_IDLE_HIGH_SHARE else "medium"
        evidence = {"device": dev, "busy_fraction": float(row["busy_fraction"]), "idle_us": float(row["idle_us"]),
                    "busy_us": float(row["busy_us"]), "span_us": float(row["span_us"]),
                    "gaps": int(len(mine)), "gaps_over_100us": int((mine["dur"] > 100_000).sum()),
                    "largest_gaps": largest}
        if multi_rank:
            evidence["rank"] = to_python(row["rank"])
            evidence["busy_fraction_by_rank"] = by_rank[dev]
            lo, hi = min(by_rank[dev].values()), max(by_rank[dev].values())
            msg = msg.replace("). ", f"; the ranks were {pct(lo)} to {pct(hi)} busy). ", 1)
        yield Finding(severity, msg, evidence, score=idle_share)
