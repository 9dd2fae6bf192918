"""Key averages: the events table grouped by operator (and input shape, or call stack).

The rows are the ones torch's ``key_averages()`` reports, with the same numbers, except where
torch is wrong (see ``docs/differences.md``):

- a GPU user annotation is not a row of its own with its span as "self device time" (torch's
  "437 %"); its time is in the Ranges view, and the CPU annotation row has the kernels launched
  under it as device time;
- kernels are counted once, also under ops that a profiler overhead event interrupted;
- Python frames (``--stack``) are not operator rows; they make the ``stack`` grouping.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import KIND_CODE, time_ns
from ..errors import OptionError

__all__ = ["key_averages", "KEY_AVERAGE_COLUMNS", "GROUP_BY", "averaged_rows"]

GROUP_BY = ("op", "shape", "stack")

KEY_AVERAGE_COLUMNS = (
    "name",
    "count",
    "self_cpu_us",
    "cpu_total_us",
    "cpu_avg_us",
    "self_device_us",
    "device_total_us",
    "device_avg_us",
    "self_cpu_mem_bytes",
    "cpu_mem_bytes",
    "self_device_mem_bytes",
    "device_mem_bytes",
    "flops",
    "kind",
)

_SUMMED = (
    "self_cpu_us",
    "cpu_total_us",
    "self_device_us",
    "device_total_us",
    "self_cpu_mem_bytes",
    "cpu_mem_bytes",
    "self_device_mem_bytes",
    "device_mem_bytes",
    "flops",
)

_TREE_KINDS = [KIND_CODE[k] for k in ("op", "annotation", "runtime", "overhead", "other")]
_WORK_KINDS = [KIND_CODE[k] for k in ("kernel", "memcpy", "memset")]


def averaged_rows(events: pd.DataFrame) -> np.ndarray:
    """Which rows of the (tree-built) events table key averages count."""
    kind = events["kind"].cat.codes.to_numpy()
    tree = np.isin(kind, _TREE_KINDS) & (events["thread"].to_numpy() >= 0) & ~events["merged"].to_numpy()
    work = np.isin(kind, _WORK_KINDS)
    # memory events outside every CPU event are rows of their own ("[memory]"), as in torch
    loose_memory = ((kind == KIND_CODE["memory"]) | (kind == KIND_CODE["oom"])) & _outside_all(events, kind)
    return tree | work | loose_memory


def key_averages(
    events: pd.DataFrame,
    group_by: str = "op",
    stacks: pd.Series | None = None,
) -> pd.DataFrame:
    """Group the tree-built events table into one row per key.

    ``group_by``: "op" (name), "shape" (name and input shapes) or "stack" (name and the Python
    call stack, which ``stacks`` gives per event).
    """
    if group_by not in GROUP_BY:
        raise OptionError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
    rows = np.flatnonzero(averaged_rows(events))
    sub = events.iloc[rows]
    kind = sub["kind"]
    is_tree = np.isin(kind.cat.codes.to_numpy(), _TREE_KINDS)
    is_mem = np.isin(kind.cat.codes.to_numpy(), [KIND_CODE["memory"], KIND_CODE["oom"]])

    dur = sub["dur_us"].to_numpy()
    names = sub["name"]
    key_name = _key_names(names)
    cpu_mem = sub["cpu_mem_bytes"].to_numpy()
    dev_mem = sub["device_mem_bytes"].to_numpy()
    self_cpu_mem = sub["self_cpu_mem_bytes"].to_numpy()
    self_dev_mem = sub["self_device_mem_bytes"].to_numpy()
    if is_mem.any():
        # a loose memory event is its own "[memory]" row: its bytes, on its device
        nbytes = sub["bytes"].to_numpy()
        on_cpu = (sub["device"] == "cpu").to_numpy()
        cpu_mem = np.where(is_mem, np.where(on_cpu, nbytes, 0), cpu_mem)
        dev_mem = np.where(is_mem, np.where(on_cpu, 0, nbytes), dev_mem)
        self_cpu_mem = np.where(is_mem, cpu_mem, self_cpu_mem)
        self_dev_mem = np.where(is_mem, dev_mem, self_dev_mem)

    frame = pd.DataFrame(
        {
            "name": key_name,
            "kind": kind.to_numpy(),
            "self_cpu_us": np.where(is_tree, sub["self_cpu_us"].to_numpy(), 0.0),
            "cpu_total_us": np.where(is_tree, dur, 0.0),
            "self_device_us": sub["self_device_us"].to_numpy(),
            "device_total_us": sub["device_total_us"].to_numpy(),
            "self_cpu_mem_bytes": self_cpu_mem,
            "cpu_mem_bytes": cpu_mem,
            "self_device_mem_bytes": self_dev_mem,
            "device_mem_bytes": dev_mem,
            "flops": sub["flops"].to_numpy(),
        }
    )
    keys = ["name", "kind"]
    if group_by == "shape":
        frame["input_shapes"] = sub["input_shapes"].to_numpy()
        keys.insert(1, "input_shapes")
    elif group_by == "stack":
        if stacks is None:
            raise OptionError("grouping by stack needs Python stacks: profile with --stack")
        frame["stack"] = stacks.to_numpy()[rows]
        keys.insert(1, "stack")

    grouped = frame.groupby(keys, sort=False, observed=True, dropna=False)
    out = grouped[list(_SUMMED)].sum()
    out.insert(0, "count", grouped.size())
    out = out.reset_index()
    out["cpu_avg_us"] = out["cpu_total_us"] / out["count"]
    out["device_avg_us"] = out["device_total_us"] / out["count"]
    columns = list(KEY_AVERAGE_COLUMNS)
    if group_by == "shape":
        columns.insert(1, "input_shapes")
    elif group_by == "stack":
        columns.insert(1, "stack")
    out = out[columns]
    for c in ("self_cpu_mem_bytes", "cpu_mem_bytes", "self_device_mem_bytes", "device_mem_bytes", "flops", "count"):
        out[c] = out[c].astype(np.int64)
    out["name"] = out["name"].astype(object)
    return out


def _key_names(names: pd.Series) -> np.ndarray:
    """torch's keys: "ProfilerStep#3" and friends all count as "ProfilerStep*"."""
    cats = names.cat.categories
    renamed = np.array(
        ["ProfilerStep*" if str(c).startswith("ProfilerStep#") else c for c in cats], dtype=object
    )
    return renamed[names.cat.codes.to_numpy()]


def _outside_all(events: pd.DataFrame, kind: np.ndarray) -> np.ndarray:
    """For memory events: True where no CPU tree event's [start, end] contains the event."""
    out = np.zeros(len(kind), dtype=bool)
    is_mem = (kind == KIND_CODE["memory"]) | (kind == KIND_CODE["oom"])
    if not is_mem.any():
        return out
    from .tree import lanes

    _, process = lanes(events)
    tree = np.isin(kind, _TREE_KINDS) & (events["thread"].to_numpy() >= 0)
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    for proc in np.unique(process[is_mem]):
        in_proc = process == proc
        starts = np.sort(start[tree & in_proc])
        ends = np.sort(end[tree & in_proc])
        mem = np.flatnonzero(is_mem & in_proc)
        t = start[mem]
        open_count = np.searchsorted(starts, t, side="right") - np.searchsorted(ends, t, side="left")
        out[mem] = open_count <= 0
    return out
