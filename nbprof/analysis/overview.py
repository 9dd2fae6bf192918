"""The overview: where each step's time went, the TensorBoard profiler plugin's step-time breakdown.

:func:`overview` gives one row per recorded step (``step`` as in ``steps()``), then a row
``step == "all"`` (per rank in a profile merged from ranks)::

    step, [rank,] start_us, duration_us, kernel_us, memcpy_us, memset_us, runtime_us,
    dataloader_us, cpu_exec_us, other_us

Each instant of a step goes to one category, the first of this order that is happening then
anywhere in the process (on any thread or stream): a kernel running, a memcpy, a memset, a CUDA
runtime call (launches, synchronizations), the DataLoader fetching a batch
(``enumerate(DataLoader)#...__next__``, ``enumerate(DataPipe)#...``), any other operator, range
or Python function on the CPU (``cpu_exec``); what is left is ``other`` (Python between ops,
waiting on nothing the profiler saw). So the seven columns add up to ``duration_us`` exactly (in
integer nanoseconds), and a kernel that overlaps a launch counts once, as kernel time. This is
the plugin's rule (its ``OverallParser`` over the ``ProfileRole`` ranges); its unit tests'
numbers are tests/test_overview.py's oracle. The plugin's ``Communication`` role (NCCL kernels)
is ``kernel_us`` here: the collectives of a cluster are issue 14's view. With Python frames
recorded (``--stack``, ``--modules``) the Python code between ops is ``cpu_exec`` too, as the plugin
counts ``python_function`` events, so ``other`` shrinks to what no frame covers.

**The step's span** is the plugin's too, because the device work a step launched belongs to it:
a step runs from its ``ProfilerStep#N`` range's start (or the end of the previous step, if
later) to the later of the range's end and the end of the device work launched by the runtime
calls inside the range. The first step starts after device work of earlier, unprofiled steps
that ended before the first step's own device work began (the plugin's ``prev_step_end_time``).
Without device work, a step is its range. Unlike the plugin, trailing steps that launched no
kernel stay (steps() keeps them: a step that only ran on the CPU still took that time).

**Without steps** (no ``--schedule``, no ``ProfilerStep#`` ranges) the whole profile is one
step, as the plugin does: from the first CPU event (operator, range or Python function) to the
last, stretched over the device work launched inside; only the ``"all"`` row is given.

:func:`overview_advice` turns a row into the plugin's kind of advice, only where a rule applies
(its thresholds: ``DATALOADER_MIN_SHARE``, ``DEVICE_BUSY_LOW_SHARE``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, category_map, kind_mask, time_ns
from ..format import fmt_share, fmt_us
from ._intervals import launch_points, measure_each, union_segments
from .steps import _Steps

__all__ = ["overview", "overview_advice", "CATEGORIES", "OVERVIEW_COLUMNS", "DATALOADER_MIN_SHARE",
           "DEVICE_BUSY_LOW_SHARE"]

# The categories in priority order: an instant goes to the first one happening then.
CATEGORIES = ("kernel_us", "memcpy_us", "memset_us", "runtime_us", "dataloader_us", "cpu_exec_us", "other_us")
OVERVIEW_COLUMNS = ("step", "start_us", "duration_us") + CATEGORIES

# The plugin's advice thresholds: data loading above 5 % of the step time (its "high time cost on
# input data loading"), the GPU busy less than half of it (its "low utilization").
DATALOADER_MIN_SHARE = 0.05
DEVICE_BUSY_LOW_SHARE = 0.5

_DATALOADER = re.compile(r"^(enumerate\(DataLoader\)#.*\.__next__|enumerate\(DataPipe\)#.*)$")
_STEP = re.compile(r"^ProfilerStep#\d+$")


def _group_codes(events: pd.DataFrame) -> np.ndarray:
    """The process an event belongs to for the breakdown: its rank in a merged profile, else 0
    (device events included: a rank's kernels are that rank's)."""
    if "rank" not in events.columns:
        return np.zeros(len(events), dtype=np.int64)
    codes, _ = pd.factorize(events["rank"].to_numpy())
    return codes.astype(np.int64)


def _role_rows(events: pd.DataFrame) -> list[np.ndarray]:
    """The rows of each category but ``other``, in priority order."""
    kind = events["kind"].cat.codes.to_numpy()
    live = ~events["merged"].to_numpy()
    on_cpu = events["thread"].to_numpy() >= 0
    names = events["name"]
    loader = category_map(names, lambda n: bool(_DATALOADER.match(n)), dtype=bool, missing=False)
    step = category_map(names, lambda n: bool(_STEP.match(n)), dtype=bool, missing=False)
    ranges = np.isin(kind, [KIND_CODE["op"], KIND_CODE["annotation"]])
    cpu = (ranges | (kind == KIND_CODE["python"])) & on_cpu & ~loader & ~step
    return [
        np.flatnonzero(live & (kind == KIND_CODE["kernel"])),
        np.flatnonzero(live & (kind == KIND_CODE["memcpy"])),
        np.flatnonzero(live & (kind == KIND_CODE["memset"])),
        np.flatnonzero(live & (kind == KIND_CODE["runtime"]) & on_cpu),
        np.flatnonzero(live & ranges & loader & on_cpu),
        np.flatnonzero(live & cpu),
    ]


def _windows(events: pd.DataFrame, group: np.ndarray, start: np.ndarray, end: np.ndarray
             ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """The steps (labels), their groups and their host spans (ns), sorted by group then start;
    without steps one span per group over its CPU events."""
    st = _Steps(events)
    if len(st):
        rows = st.rows
        g = group[rows]
        order = np.lexsort((start[rows], g))
        labels = st.labels().iloc[order].reset_index(drop=True)
        return labels, g[order], start[rows][order], end[rows][order]
    kind = events["kind"].cat.codes.to_numpy()
    cpu = np.flatnonzero(np.isin(kind, [KIND_CODE["op"], KIND_CODE["annotation"], KIND_CODE["python"]])
                         & (events["thread"].to_numpy() >= 0) & ~events["merged"].to_numpy())
    if len(cpu) == 0:
        return pd.DataFrame({"step": []}), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    frame = pd.DataFrame({"g": group[cpu], "s": start[cpu], "e": end[cpu]}).groupby("g").agg(s=("s", "min"),
                                                                                                e=("e", "max"))
    labels = pd.DataFrame({"step": ["all"] * len(frame)})
    if "rank" in events.columns:
        first = pd.Series(events["rank"].to_numpy()[cpu], index=group[cpu]).groupby(level=0).first()
        labels.insert(1, "rank", first.loc[frame.index].to_numpy())
    return labels, frame.index.to_numpy().astype(np.int64), frame["s"].to_numpy(), frame["e"].to_numpy()


def _stretch_over_device(events: pd.DataFrame, group: np.ndarray, start: np.ndarray, end: np.ndarray,
                         w_group: np.ndarray, w_start: np.ndarray, w_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The steps' spans stretched over the device work they launched (see the module doc)."""
    n = len(w_start)
    lp = launch_points(events, np.zeros(len(events), dtype=np.int64))
    lp = lp[lp["runtime_row"].to_numpy() >= 0]
    work = lp["row"].to_numpy()
    rt = lp["runtime_row"].to_numpy()
    if n == 0 or len(work) == 0:
        return w_start, w_end
    base = int(min(w_start.min(), start[rt].min(), start[work].min()))
    stride = int(max(w_end.max(), end[rt].max(), end[work].max()) - base) + 2
    key_w = w_group * stride + (w_start - base)  # windows are sorted by group, then start
    key_rt = group[rt] * stride + (start[rt] - base)
    i = np.searchsorted(key_w, key_rt, side="right") - 1  # the last step starting at or before the call
    j = np.maximum(i, 0)
    matched = (i >= 0) & (w_group[j] == group[rt]) & (end[rt] <= w_end[j])
    dev_start = np.full(n, np.iinfo(np.int64).max)
    dev_end = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(dev_start, i[matched], start[work][matched])
    np.maximum.at(dev_end, i[matched], end[work][matched])
    has_dev = dev_end > np.iinfo(np.int64).min
    out_s, out_e = w_start.copy(), w_end.copy()
    all_work = np.flatnonzero(kind_mask(events["kind"].cat.codes.to_numpy(), DEVICE_WORK_CODES))
    matched_rows = np.zeros(len(events), dtype=bool)
    matched_rows[work[matched]] = True
    for g in np.unique(w_group):
        idx = np.flatnonzero(w_group == g)  # this group's steps, in time order
        if not has_dev[idx].any():
            continue  # the plugin stretches nothing in a process that launched no device work
        prev = int(w_start[idx[0]])
        if has_dev[idx[0]]:  # device work of earlier steps, ended before the first step's own began
            stale = all_work[(group[all_work] == g) & ~matched_rows[all_work]]
            earlier = end[stale][end[stale] < dev_start[idx[0]]]
            if len(earlier):
                prev = max(prev, int(earlier.max()))
        # each step ends at the later of its range's end and its device work's end (and never
        # before it starts); it starts where the previous one ended, or at its range's start
        reach = np.maximum(w_end[idx], np.where(has_dev[idx], dev_end[idx], w_end[idx]))
        ends = np.maximum.accumulate(np.r_[prev, reach])
        out_s[idx] = np.maximum(ends[:-1], w_start[idx])
        out_e[idx] = np.maximum(ends[1:], out_s[idx])
    return out_s, out_e


def overview(events: pd.DataFrame) -> pd.DataFrame:
    """One row per step and a row ``step == "all"`` (see the module doc); empty without CPU events."""
    group = _group_codes(events)
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    labels, w_group, w_start, w_end = _windows(events, group, start, end)
    columns = list(OVERVIEW_COLUMNS)
    if "rank" in labels.columns:
        columns.insert(1, "rank")
    if len(labels) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("step", "rank") else np.float64) for c in columns})
    w_start, w_end = _stretch_over_device(events, group, start, end, w_group, w_start, w_end)
    covered = np.zeros((len(CATEGORIES), len(w_start)), dtype=np.int64)
    sg = ss = se = np.zeros(0, dtype=np.int64)
    for r, role in enumerate(_role_rows(events)):
        # this category and every one before it: the union so far (its few segments) with this one's
        # events, not every earlier event sorted again (0.15 -> 0.06 s at 1 M events)
        sg, ss, se = union_segments(np.r_[ss, start[role]], np.r_[se, end[role]], np.r_[sg, group[role]])
        covered[r] = measure_each(sg, ss, se, w_group, w_start, w_end).astype(np.int64)
    duration = w_end - w_start
    covered[-1] = duration
    parts = np.diff(np.vstack([np.zeros(len(w_start), dtype=np.int64), covered]), axis=0)
    out = labels.copy()
    out["start_us"] = w_start / 1000.0
    out["duration_us"] = duration / 1000.0
    for name, ns in zip(CATEGORIES, parts):
        out[name] = ns / 1000.0
    if (out["step"] == "all").all():
        return out[columns].astype({"step": object})
    return _with_totals(out, columns)


def _with_totals(out: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The steps, then their sum as the row ``step == "all"`` (per rank)."""
    out = out.astype({"step": object})
    by = ["rank"] if "rank" in out.columns else []
    sums = ["duration_us", *CATEGORIES]
    if by:
        total = out.groupby(by, sort=False).agg({"start_us": "min", **{c: "sum" for c in sums}}).reset_index()
    else:
        total = pd.DataFrame([{"start_us": out["start_us"].min(), **{c: out[c].sum() for c in sums}}])
    total["step"] = "all"
    return pd.concat([out[columns], total[columns]], ignore_index=True)


def overview_advice(row: pd.Series, has_device: bool) -> list[str]:
    """The plugin's advice for one overview row (a step or ``"all"``), only the rules that apply."""
    duration = float(row["duration_us"])
    if duration <= 0:
        return []
    out = []
    loader = float(row["dataloader_us"]) / duration
    if loader > DATALOADER_MIN_SHARE:
        pin = " and pin_memory=True (faster copies to the GPU)" if has_device else ""
        out.append(f"{fmt_share(loader)} of the step time is data loading (the DataLoader fetching the next batch): "
                   f"set num_workers on the DataLoader so worker processes prepare batches while the model "
                   f"runs{pin}.")
    if has_device:
        busy = float(row["kernel_us"] + row["memcpy_us"] + row["memset_us"]) / duration
        if busy < DEVICE_BUSY_LOW_SHARE:
            cpu = float(row["cpu_exec_us"] + row["runtime_us"])
            loading, other = float(row["dataloader_us"]), float(row["other_us"])
            if loading >= max(cpu, other):
                why = "it waits for the next batch from the DataLoader most of the time"
            elif cpu >= other:
                why = (f"the CPU is the bound: operators and launches take {fmt_us(cpu)} of the step, so fewer, "
                       f"larger operations (a bigger batch, fused ops, torch.compile, CUDA graphs) keep the GPU fed")
            else:
                why = "try a bigger batch (it can change how the model converges)"
            out.append(f"The GPU is busy {fmt_share(busy)} of the step time: {why}.")
    return out
