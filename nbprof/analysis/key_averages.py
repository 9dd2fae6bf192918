"""Key averages: the events table grouped by operator (and input shape, or call stack).

The rows are the ones torch's ``key_averages()`` reports, with the same numbers, except where
torch is wrong (see ``docs/differences.md``):

- a GPU user annotation is not a row of its own with its span as "self device time" (torch's
  "437 %"); its time is in the Ranges view, and the CPU annotation row has the kernels launched
  under it as device time;
- kernels are counted once, also under ops that a profiler overhead event interrupted;
- Python frames (``--stack``) are not operator rows; they make the ``stack`` grouping;
- torch.compile's ranges (``... (dynamo_timed)`` and its phases) are not operator rows: they are
  compilation (``analysis.compilation``, the Compile tab).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import (
    DEVICE_WORK_CODES,
    KINDS,
    MEMORY_CODES,
    TREE_CODES,
    category_mask,
    distinct,
    key_names,
    kind_mask,
    time_ns,
)
from ..errors import OptionError
from .compilation import compile_range_mask

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



def averaged_rows(events: pd.DataFrame) -> np.ndarray:
    """Which rows of the (tree-built) events table key averages count."""
    kind = events["kind"].cat.codes.to_numpy()
    tree = kind_mask(kind, TREE_CODES) & (events["thread"].to_numpy() >= 0) & ~events["merged"].to_numpy()
    work = kind_mask(kind, DEVICE_WORK_CODES)
    # memory events outside every CPU event are rows of their own ("[memory]"), as in torch
    loose_memory = kind_mask(kind, MEMORY_CODES) & _outside_all(events, kind)
    # torch.compile's own ranges ("... (dynamo_timed)", its phases) are compilation, not operators:
    # the Compile view holds them (torch's key_averages() lists them; docs/differences.md)
    return (tree & ~compile_range_mask(events)) | work | loose_memory


def key_averages(
    events: pd.DataFrame,
    group_by: str = "op",
    stacks: pd.Series | None = None,
    rows: np.ndarray | None = None,
) -> pd.DataFrame:
    """Group the tree-built events table into one row per key.

    ``group_by``: "op" (name), "shape" (name and input shapes) or "stack" (name and the Python
    call stack, which ``stacks`` gives per event). ``rows``: ``np.flatnonzero(averaged_rows(events))``
    when already computed (a profile keeps it for its groupings: ~20 ms at 1 M events).

    Rows come in the order their keys first appear in the events table (as pandas'
    ``groupby(sort=False)``). Grouping is integer codes and ``np.bincount``: no copy of the
    table, no per-row Python objects.
    """
    if group_by not in GROUP_BY:
        raise OptionError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
    if group_by == "stack" and stacks is None:
        raise OptionError("grouping by stack needs Python stacks: profile with --stack")
    if rows is None:
        rows = np.flatnonzero(averaged_rows(events))
    kind_all = events["kind"].cat.codes.to_numpy()
    kind = kind_all[rows]
    is_tree = kind_mask(kind, TREE_CODES)
    is_mem = kind_mask(kind, MEMORY_CODES)

    def col(name: str) -> np.ndarray:
        return events[name].to_numpy()[rows]

    dur = col("dur_us")
    cpu_mem = col("cpu_mem_bytes")
    dev_mem = col("device_mem_bytes")
    self_cpu_mem = col("self_cpu_mem_bytes")
    self_dev_mem = col("self_device_mem_bytes")
    if is_mem.any():
        # a loose memory event is its own "[memory]" row: its bytes, on its device
        nbytes = col("bytes")
        on_cpu = category_mask(events["device"], lambda d: d == "cpu", rows=rows)
        cpu_mem = np.where(is_mem, np.where(on_cpu, nbytes, 0), cpu_mem)
        dev_mem = np.where(is_mem, np.where(on_cpu, 0, nbytes), dev_mem)
        self_cpu_mem = np.where(is_mem, cpu_mem, self_cpu_mem)
        self_dev_mem = np.where(is_mem, dev_mem, self_dev_mem)
    values = {
        "self_cpu_us": np.where(is_tree, col("self_cpu_us"), 0.0),
        "cpu_total_us": np.where(is_tree, dur, 0.0),
        "self_device_us": col("self_device_us"),
        "device_total_us": col("device_total_us"),
        "self_cpu_mem_bytes": self_cpu_mem,
        "cpu_mem_bytes": cpu_mem,
        "self_device_mem_bytes": self_dev_mem,
        "device_mem_bytes": dev_mem,
        "flops": col("flops"),
    }

    # the key of each row as one integer: (name, [shape | stack], kind)
    name_codes, name_labels = key_names(events["name"])
    key = name_codes[rows].astype(np.int64)
    extra_labels: np.ndarray | None = None
    if group_by == "shape":
        shapes = events["input_shapes"]
        extra_codes = shapes.cat.codes.to_numpy()[rows].astype(np.int64)
        extra_labels = np.asarray(shapes.cat.categories, dtype=object)
    elif group_by == "stack":
        if stacks is None:
            raise OptionError("group_by='stack' needs the stacks of the ops (analysis.stacks.op_stacks)")
        extra_codes, extra_labels = pd.factorize(stacks.to_numpy(dtype=object)[rows])
        extra_labels = np.asarray(extra_labels, dtype=object)
        extra_codes = extra_codes.astype(np.int64)
    if extra_labels is not None:
        key = key * (len(extra_labels) + 1) + extra_codes
    key = key * len(KINDS) + kind
    group, first = _first_appearance_codes(key)
    k = len(first)
    count = np.bincount(group, minlength=k).astype(np.int64)

    out: dict[str, np.ndarray] = {"name": name_labels[name_codes[rows][first]]}
    if extra_labels is not None:
        column = "input_shapes" if group_by == "shape" else "stack"
        out[column] = extra_labels[extra_codes[first]]
    out["count"] = count
    sums = {c: _group_sum(group, v, k) for c, v in values.items()}
    out.update(
        self_cpu_us=sums["self_cpu_us"],
        cpu_total_us=sums["cpu_total_us"],
        cpu_avg_us=_average(sums["cpu_total_us"], count),
        self_device_us=sums["self_device_us"],
        device_total_us=sums["device_total_us"],
        device_avg_us=_average(sums["device_total_us"], count),
        self_cpu_mem_bytes=sums["self_cpu_mem_bytes"],
        cpu_mem_bytes=sums["cpu_mem_bytes"],
        self_device_mem_bytes=sums["self_device_mem_bytes"],
        device_mem_bytes=sums["device_mem_bytes"],
        flops=sums["flops"],
        kind=np.asarray(KINDS, dtype=object)[kind[first]],
    )
    columns = list(KEY_AVERAGE_COLUMNS)
    if group_by == "shape":
        columns.insert(1, "input_shapes")
    elif group_by == "stack":
        columns.insert(1, "stack")
    frame = pd.DataFrame({c: out[c] for c in columns}, columns=columns)
    frame["name"] = pd.Series(out["name"], dtype=object)  # names stay Python strings (object)
    return frame


def _first_appearance_codes(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group number of each row, groups numbered in order of first appearance; and the first row
    of each group."""
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    codes, _ = pd.factorize(key)  # hashing; codes in order of first appearance
    seen = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.r_[True, seen[1:] > seen[:-1]])  # where a new code shows up
    return codes.astype(np.int64, copy=False), first


def _group_sum(group: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Per-group sums: float columns as float64; integer columns exactly as int64."""
    if values.dtype.kind == "f":
        return np.bincount(group, weights=values, minlength=k)
    values = values.astype(np.int64, copy=False)
    total = np.abs(values).sum() if len(values) else 0
    if total < 2**53:  # every partial sum is an integer a float64 holds exactly
        return np.rint(np.bincount(group, weights=values, minlength=k)).astype(np.int64)
    out = np.zeros(k, dtype=np.int64)
    np.add.at(out, group, values)
    return out


def _average(total: np.ndarray, count: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return total / count


def _outside_all(events: pd.DataFrame, kind: np.ndarray) -> np.ndarray:
    """For memory events: True where no CPU tree event's [start, end] contains the event."""
    out = np.zeros(len(kind), dtype=bool)
    is_mem = kind_mask(kind, MEMORY_CODES)
    if not is_mem.any():
        return out
    from .tree import lanes

    _, process = lanes(events)
    thread = events["thread"].to_numpy()
    tree = kind_mask(kind, TREE_CODES) & (thread >= 0)
    start_us = events["start_us"].to_numpy()
    dur_us = events["dur_us"].to_numpy()
    mem = np.flatnonzero(is_mem)
    t = time_ns(start_us[mem])
    undecided = np.ones(len(mem), dtype=bool)
    if "parent" in events.columns:
        # the tree hung most memory events from a CPU event of their thread that contains them
        p = events["parent"].to_numpy()[mem]
        has = np.flatnonzero(p >= 0)
        ph = p[has]
        p_start = time_ns(start_us[ph])
        inside = tree[ph] & (p_start <= t[has]) & (t[has] <= p_start + time_ns(dur_us[ph]))
        undecided[has[inside]] = False
    rest = np.flatnonzero(undecided)
    if len(rest) == 0:
        return out
    # the others: count the tree events of their process open at their time
    start = time_ns(start_us)
    end = start + time_ns(dur_us)
    for proc in distinct(process[mem[rest]]).tolist():
        in_proc = process == proc
        # nearly sorted already (file order): a stable sort (timsort) takes them in about one pass
        starts = np.sort(start[tree & in_proc], kind="stable")
        ends = np.sort(end[tree & in_proc], kind="stable")
        sel = rest[process[mem[rest]] == proc]
        tq = t[sel]
        open_count = np.searchsorted(starts, tq, side="right") - np.searchsorted(ends, tq, side="left")
        out[mem[sel]] = open_count <= 0
    return out
