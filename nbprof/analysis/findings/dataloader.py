"""Time inside DataLoader iteration (torch's ``enumerate(DataLoader)#...__next__`` ranges, or
DataLoader Python frames with ``--stack``) is at least ``DATALOADER_MIN_SHARE`` of the span
("high" from ``DATALOADER_HIGH_SHARE``)."""

from __future__ import annotations

import re
from typing import Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE, category_mask
from ...format import fmt_us, plural
from .._intervals import union_segments
from ._common import Finding, TorchContext, pct

DATALOADER_MIN_SHARE = 0.10
DATALOADER_HIGH_SHARE = 0.30

_DATALOADER = re.compile(r"DataLoader|torch/utils/data/dataloader\.py")
_DATALOADER_NEXT = re.compile(r"^enumerate\(DataLoader\)#")


def find(ctx: TorchContext) -> Iterator[Finding]:
    cpu_kinds = np.isin(ctx.kind, [KIND_CODE["annotation"], KIND_CODE["python"], KIND_CODE["op"]])
    is_dl = category_mask(ctx.names, lambda n: bool(_DATALOADER.search(n))) & cpu_kinds & (ctx.thread >= 0)
    rows = np.flatnonzero(is_dl)
    if len(rows) == 0:
        return
    seg = union_segments(ctx.start_ns[rows], ctx.end_ns[rows], ctx.thread[rows])
    # time on the thread that spent most in the loader (the training loop's thread)
    per_thread = pd.Series(seg[2] - seg[1]).groupby(seg[0]).sum()
    thread = int(per_thread.idxmax())
    total_ns = float(per_thread.max())
    # with ranks, compare with one rank's span
    span = ctx.span_ns / max(len(ctx.rank_labels), 1)
    share = total_ns / span if span else 0.0
    if share < DATALOADER_MIN_SHARE:
        return
    names = ctx.names.to_numpy()
    is_next = category_mask(ctx.names, lambda n: bool(_DATALOADER_NEXT.match(n)))
    nexts = rows[is_next[rows] & (ctx.thread[rows] == thread)]
    batches = int(len(nexts))
    loader_names = pd.Series(names[nexts].astype(str)).str.extract(r"#(\w+)\.__next__")[0].dropna().unique().tolist()
    multi = any("MultiProcessing" in n for n in loader_names)
    mean = total_ns / batches / 1000.0 if batches else float("nan")
    msg = f"Waiting for data takes {pct(share)} of the span ({fmt_us(total_ns / 1000)}"
    msg += f" over {plural(batches, 'batch', 'batches')}, {fmt_us(mean)} each). " if batches else "). "
    if multi:
        msg += ("The workers do not keep up: raise num_workers or prefetch_factor, use persistent_workers=True, "
                "and make __getitem__ cheaper (decode or tokenize once, cache).")
    else:
        msg += ("Batches are loaded in the training process: use DataLoader(num_workers=N, pin_memory=True, "
                "persistent_workers=True) so loading overlaps with compute.")
    severity = "high" if share >= DATALOADER_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"batches": batches, "total_us": total_ns / 1000.0, "mean_us": mean, "share_of_span": share,
                   "loaders": loader_names, "multiprocess": multi},
                  score=share)
