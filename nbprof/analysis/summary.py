"""The numbers a report opens with: totals, the top row and its share, peaks."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, kind_mask
from .memory import allocated_totals

__all__ = ["TorchSummary", "summarize_torch", "default_sort", "top_row"]


@dataclass(frozen=True)
class TorchSummary:
    events: int
    span_us: float  # first event start -> last event end
    self_cpu_us: float  # torch's "Self CPU time total"
    self_device_us: float  # torch's "Self CUDA time total": kernels, copies and memsets
    has_device: bool
    has_memory: bool
    sort: str  # the key_averages column the tables sort by
    top_name: str | None
    top_value: float
    top_share: float  # of the sort column's total (self columns) or of the span
    peak_allocated_bytes: dict[str, int] = field(default_factory=dict)  # per device
    peak_reserved_bytes: dict[str, int] = field(default_factory=dict)


def default_sort(has_device: bool) -> str:
    return "self_device_us" if has_device else "self_cpu_us"


def summarize_torch(events: pd.DataFrame, averages: pd.DataFrame, sort: str | None) -> TorchSummary:
    kind = events["kind"].cat.codes.to_numpy()
    work = kind_mask(kind, DEVICE_WORK_CODES)
    has_device = bool(work.any())
    is_mem = kind == KIND_CODE["memory"]
    if len(events):
        start = events["start_us"].to_numpy()
        end = start + events["dur_us"].to_numpy()
        span = float(end.max() - start.min())
    else:
        span = 0.0
    self_cpu = float(averages["self_cpu_us"].sum()) if len(averages) else 0.0
    self_device = float(events["dur_us"].to_numpy()[work].sum()) if has_device else 0.0

    sort = sort or default_sort(has_device)
    top_name, top_value, top_share = top_row(averages, sort, self_cpu, self_device)

    peaks_alloc: dict[str, int] = {}
    peaks_reserved: dict[str, int] = {}
    if is_mem.any():
        device = events["device"]
        codes = device.cat.codes.to_numpy()[is_mem]
        allocated = allocated_totals(events, np.flatnonzero(is_mem))
        reserved = events["total_reserved_bytes"].to_numpy()[is_mem]
        labels = device.cat.categories
        for code in np.unique(codes).tolist():  # a few devices
            on = codes == code
            peaks_alloc[str(labels[code])] = int(allocated[on].max())
            peaks_reserved[str(labels[code])] = int(reserved[on].max())
    return TorchSummary(
        events=len(events),
        span_us=span,
        self_cpu_us=self_cpu,
        self_device_us=self_device,
        has_device=has_device,
        has_memory=bool(is_mem.any()),
        sort=sort,
        top_name=top_name,
        top_value=top_value,
        top_share=top_share,
        peak_allocated_bytes=peaks_alloc,
        peak_reserved_bytes=peaks_reserved,
    )


def top_row(averages: pd.DataFrame, sort: str, self_cpu_us: float, self_device_us: float) -> tuple[str | None, float, float]:
    """The row with the most of ``sort``: (name, value, share of the whole profile).

    The one definition of "the top row and its share": the report's headline (over the
    operators, whatever the table's grouping) and the ``top_op`` finding (over the rows of kind
    op) both call it, so the same operator has the same share in both.

    Shares are of what the whole profile spent, as torch's "%" columns: CPU columns of the self
    CPU total; device columns of the kernel time (the sum of a self-device column would count
    each kernel twice: on its launching op's row and on its own row); counts of all calls.
    """
    if not len(averages) or sort not in averages.columns or sort == "name":
        return None, 0.0, 0.0
    values = averages[sort].to_numpy()
    i = int(np.argmax(values))
    value = float(values[i])
    if sort in ("self_cpu_us", "cpu_total_us"):
        total = self_cpu_us
    elif sort in ("self_device_us", "device_total_us"):
        total = self_device_us
    elif sort == "count" or sort.startswith("self_"):
        total = float(averages[sort].clip(lower=0).sum())
    else:
        total = 0.0
    return str(averages["name"].iloc[i]), value, (value / total if total > 0 else 0.0)
