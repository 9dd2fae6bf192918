"""The peak allocated (and reserved) memory per device and what was held at it: the
``MEMORY_TOP_OPS`` operators whose blocks, still alive at the peak, add up to most of it (the
outermost op, so ``aten::conv2d`` rather than the ``aten::empty`` inside it) and, with ``--lines``,
the ``MEMORY_TOP_OPS`` lines of your code that allocated most of them; whenever memory was
recorded. "low", "medium" when reserved memory reaches ``MEMORY_MEDIUM_SHARE`` of the device,
"high" from ``MEMORY_HIGH_SHARE``."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE, category_codes, category_mask
from ..hot_lines import event_line_rows, line_where
from ..memory import alive_at
from ...format import fmt_bytes, fmt_us
from ._common import Finding, TorchContext, pct, to_python

MEMORY_MEDIUM_SHARE = 0.80
MEMORY_HIGH_SHARE = 0.95
MEMORY_TOP_OPS = 3


def find(ctx: TorchContext) -> Iterator[Finding]:
    ev = ctx.events
    mem = np.flatnonzero((ctx.kind == KIND_CODE["memory"]) & (ev["total_allocated_bytes"].to_numpy() >= 0))
    if len(mem) == 0:
        return
    on_device = ~category_mask(ev["device"], lambda d: d == "cpu", rows=mem)
    if on_device.any():
        mem = mem[on_device]  # GPU memory when there is any; else the CPU's
    # each memory event's device by its category (grouping 160 k device strings cost 0.02-0.04 s)
    code, labels = category_codes(ev["device"], mem)
    total_mem = {}
    for prop in ctx.meta.device_properties:
        try:
            total_mem[f"cuda:{int(prop.get('id', 0))}"] = int(prop.get("totalGlobalMem", -1))
        except (TypeError, ValueError):
            pass
    all_allocs = ctx.profile._allocation_rows
    line_of_row, lines = _lines_of(ctx)

    def allocs_of(rank_label: object) -> pd.DataFrame:
        if "rank" in all_allocs.columns:
            return all_allocs[all_allocs["rank"] == rank_label]
        return all_allocs

    alloc = ev["total_allocated_bytes"].to_numpy()
    reserved = ev["total_reserved_bytes"].to_numpy()
    nbytes = ev["bytes"].to_numpy()
    # one group per (rank, device), in that order (devices in their labels' order)
    group_keys, group_of = np.unique(ctx.rank[mem] * len(labels) + code, return_inverse=True)
    group_of = group_of.reshape(-1)
    group_rank = group_keys // len(labels)
    group_device = labels[group_keys % len(labels)]
    group_peak = np.full(len(group_keys), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(group_peak, group_of, alloc[mem])
    peaks_of_device = {dev: {int(r): int(v) for r, v, d in zip(group_rank, group_peak, group_device) if d == dev}
                       for dev in dict.fromkeys(group_device.tolist())}
    groups = list(range(len(group_keys)))
    if "rank" in ev.columns:  # one finding per device: its rank with the highest peak (the lowest of equals)
        best = {dev: max(peaks, key=lambda r: (peaks[r], -r)) for dev, peaks in peaks_of_device.items()}
        groups = [g for g in groups if best[group_device[g]] == group_rank[g]]
    for g in groups:
        rcode, dev = int(group_rank[g]), str(group_device[g])
        rows = mem[group_of == g]
        rank_label = ctx.rank_labels[rcode]
        rows = rows[np.argsort(ctx.start_ns[rows], kind="stable")]
        ipeak = int(np.argmax(alloc[rows]))
        peak_row = rows[ipeak]
        peak = int(alloc[peak_row])
        peak_reserved = int(reserved[rows].max())
        t_peak = int(ctx.start_ns[peak_row])
        initial = int(alloc[rows[0]] - nbytes[rows[0]])
        # what was held at the peak, by operator: the blocks the Memory tab lists there (the same
        # alive_at), so each number is part of the peak; the bytes allocated on the way to the
        # peak, freed or not, summed to 282 MB next to a 55 MB peak (measured, ResNet training)
        held = alive_at(allocs_of(rank_label), float(ev["start_us"].to_numpy()[peak_row]), dev)
        held = held[held["alloc_us"].notna()]
        by_op = (held["bytes"].groupby(held["top_op"].replace("", "(outside operators)").to_numpy()).sum()
                 .sort_values(ascending=False, kind="stable"))
        top: list[dict[str, Any]] = [{"op": str(k), "bytes": int(v)} for k, v in by_op.head(MEMORY_TOP_OPS).items()]
        capacity = total_mem.get(dev, -1) if dev != "cpu" else -1
        use = peak_reserved / capacity if capacity > 0 else 0.0
        severity = "high" if use >= MEMORY_HIGH_SHARE else "medium" if use >= MEMORY_MEDIUM_SHARE else "low"
        who = f"rank {rank_label} {dev}" if "rank" in ev.columns else dev
        msg = f"Peak memory on {who}: {fmt_bytes(peak)} allocated"
        if peak_reserved > 0 and dev != "cpu":
            msg += f" ({fmt_bytes(peak_reserved)} reserved by the caching allocator"
            msg += f", {pct(use)} of the device)" if capacity > 0 and severity != "low" else ")"
        msg += f" at {fmt_us(t_peak / 1000)}"
        if initial > 0:
            msg += f", {fmt_bytes(initial)} of it allocated before the profile started"
        msg += ". "
        if top:
            msg += ("Held at the peak, by the operator that allocated it: "
                    + ", ".join(f"{t['op']} ({fmt_bytes(t['bytes'])})" for t in top) + ". ")
        top_lines = _by_line(held, line_of_row, lines) if line_of_row is not None else []
        if top_lines:
            msg += ("By the line of your code that allocated it: "
                    + ", ".join(f"{t['where']}" + (f" `{t['source'].strip()}`" if t["source"].strip() else "")
                                + f" ({fmt_bytes(t['bytes'])})" for t in top_lines) + ". ")
        if severity != "low":
            msg += ("To lower it: smaller batches, activation checkpointing, bfloat16 autocast, inference under "
                    "torch.no_grad(); if reserved is far above allocated, "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.")
        evidence = {"device": dev, "peak_allocated_bytes": peak, "peak_reserved_bytes": peak_reserved,
                    "at_us": t_peak / 1000.0, "allocated_before_profile_bytes": initial,
                    "device_memory_bytes": capacity, "top_ops": top}  # top_ops: bytes held at the peak
        if line_of_row is not None:
            evidence["top_lines"] = top_lines  # the same bytes, by the user's line that allocated them
        if "rank" in ev.columns:
            evidence["rank"] = to_python(rank_label)
            evidence["peak_allocated_by_rank"] = {str(ctx.rank_labels[r]): v for r, v in peaks_of_device[dev].items()}
        yield Finding(severity, msg, evidence, score=use)


def _lines_of(ctx: TorchContext) -> tuple[np.ndarray | None, pd.DataFrame | None]:
    """Each event's position in ``lines()`` (``hot_lines.event_line_rows``) and the lines; (None,
    None) for a profile without lines."""
    rows = event_line_rows(ctx.profile)
    if rows is None:
        return None, None
    return rows, ctx.profile.lines()


def _by_line(held: pd.DataFrame, line_of_row: np.ndarray, lines: pd.DataFrame | None) -> list[dict[str, Any]]:
    """The ``MEMORY_TOP_OPS`` lines of the user's code whose blocks make most of ``held`` (blocks
    no line of theirs allocated are left out), biggest first."""
    if lines is None or not len(held) or not len(lines):
        return []
    pos = line_of_row[held["row"].to_numpy()]
    on = pos >= 0
    if not on.any():
        return []
    per = pd.Series(held["bytes"].to_numpy()[on]).groupby(pos[on]).sum().sort_values(ascending=False, kind="stable")
    out = []
    for p, nbytes in per.head(MEMORY_TOP_OPS).items():
        row = lines.iloc[int(p)]
        cell = row["cell"] if isinstance(row["cell"], str) else None
        out.append({"cell": cell, "file": row["file"], "line": int(row["line"]), "source": str(row["source"] or ""),
                    "where": line_where(cell, row["file"], int(row["line"])), "bytes": int(nbytes)})
    return out
