"""Collective communication per rank: the TensorBoard plugin's distributed view, as one table.

:func:`collective_table`: one row per rank, collective and process group::

    rank, name, process_group, process_group_ranks, count, total_us, mean_us, max_us, bytes

What a collective's time is depends on where it runs:

- with device work, the communication kernels (names matching ``COMM_PATTERN``: NCCL / RCCL):
  their GPU time, which includes the time a rank waits in them for the others;
- without (gloo on the CPU), the backend's own ranges, ``gloo:all_reduce`` and the like (torch's
  record_function around the collective's work on the backend's thread); the ``c10d::`` ops only
  enqueue it, so they count only where no backend range was recorded.

``name``: the collective, one spelling whatever the source (``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``broadcast``, ``send_recv``, ...): from the trace's
"Collective name" arg where torch wrote one (on NCCL kernels since torch 2.2), else from the
kernel's or range's name (``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` -> ``all_reduce``).
``process_group`` / ``process_group_ranks``: the trace's "Process Group Name" / "Process Group
Ranks" ("" where not written). ``bytes``: "In msg nelems" times the size of its "dtype", summed
over the calls; -1 where a call does not say (gloo on the CPU writes neither).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, TREE_CODES, category_map, kind_mask, values_at
from .breakdown import COMM, work_categories
from .device_stats import process_codes

__all__ = ["COLLECTIVE_COLUMNS", "DTYPE_BYTES", "collective_name", "collective_table"]

COLLECTIVE_COLUMNS = ("rank", "name", "process_group", "process_group_ranks", "count", "total_us", "mean_us",
                      "max_us", "bytes")

# bytes per element of torch's ScalarType names, as record_param_comms writes them ("dtype")
DTYPE_BYTES = {
    "Bool": 1, "Byte": 1, "Char": 1, "UInt8": 1, "Int8": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "Short": 2, "Half": 2, "BFloat16": 2, "UInt16": 2,
    "Int": 4, "Float": 4, "UInt32": 4, "ComplexHalf": 4, "Long": 8, "Double": 8, "UInt64": 8,
    "ComplexFloat": 8, "ComplexDouble": 16,
}

# the collectives, as they read in names with case and underscores dropped, longest match first
# ("reducescatter" before "reduce", "allreduce" before "reduce")
_COLLECTIVES = (
    ("reducescatter", "reduce_scatter"), ("allreduce", "all_reduce"), ("allgather", "all_gather"),
    ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("sendrecv", "send_recv"), ("barrier", "barrier"),
    ("reduce", "reduce"), ("gather", "gather"), ("scatter", "scatter"), ("send", "send"), ("recv", "recv"),
    ("wait", "wait"),
)
_BACKEND_RANGES = ("gloo:", "nccl:", "mpi:", "ucc:", "xccl:")


def collective_name(text: str) -> str:
    """One spelling of a collective from an arg or an event name: "allreduce",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "gloo:all_reduce", "c10d::allreduce_" -> "all_reduce";
    a name that names none stays as it is."""
    flat = text.lower().replace("_", "")
    if flat.startswith("nccl"):
        flat = flat[len("nccl"):].replace("devkernel", "").replace("kernel", "")
    for token, name in _COLLECTIVES:
        if token in flat:
            return name
    return text


def _rows(events: pd.DataFrame) -> tuple[np.ndarray, bool]:
    """The events that are the collectives' time, and whether they are device work."""
    kind = events["kind"].cat.codes.to_numpy()
    work = np.flatnonzero(kind_mask(kind, DEVICE_WORK_CODES))
    if len(work):
        return work[work_categories(events, work) == COMM], True
    cpu = kind_mask(kind, TREE_CODES) | (kind == KIND_CODE["annotation"])
    cpu &= events["thread"].to_numpy() >= 0
    backend = category_map(events["name"], lambda n: n.startswith(_BACKEND_RANGES), dtype=bool, missing=False)
    if (cpu & backend).any():
        return np.flatnonzero(cpu & backend), False
    c10d = category_map(events["name"], lambda n: n.startswith("c10d::"), dtype=bool, missing=False)
    return np.flatnonzero(cpu & c10d & (kind == KIND_CODE["op"])), False


def collective_table(events: pd.DataFrame) -> pd.DataFrame:
    rank, labels = process_codes(events)
    rows, _ = _rows(events)
    if len(rows) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("rank", "name", "process_group",
                                                                 "process_group_ranks") else np.float64)
                             for c in COLLECTIVE_COLUMNS})
    # the args' "Collective name" where written, else the event's name; each name read once
    from_arg = category_map(events["collective"], collective_name, rows=rows)
    names = np.where(from_arg != "", from_arg, category_map(events["name"], collective_name, rows=rows))
    nelems = events["msg_in_nelems"].to_numpy()[rows]
    size = category_map(events["msg_dtype"], lambda d: DTYPE_BYTES.get(d, -1), dtype=np.int64, missing=-1,
                        rows=rows)
    nbytes = np.where((nelems >= 0) & (size > 0), nelems * size, -1)
    frame = pd.DataFrame(
        {
            "rank": rank[rows],
            "name": names,
            "process_group": values_at(events["process_group"], rows),
            "process_group_ranks": values_at(events["process_group_ranks"], rows),
            "dur_us": events["dur_us"].to_numpy()[rows],
            "bytes": nbytes,
            "unknown": nbytes < 0,
        }
    )
    g = frame.groupby(["rank", "name", "process_group", "process_group_ranks"], sort=True)
    out = g.agg(count=("dur_us", "size"), total_us=("dur_us", "sum"), mean_us=("dur_us", "mean"),
                max_us=("dur_us", "max"), bytes=("bytes", "sum"), unknown=("unknown", "any")).reset_index()
    out["bytes"] = np.where(out["unknown"], -1, out["bytes"]).astype(np.int64)
    out["count"] = out["count"].astype(np.int64)
    code = out["rank"].to_numpy()
    out["rank"] = labels[code]
    order = np.lexsort((-out["total_us"].to_numpy(), code))  # by rank, the largest first
    return out.iloc[order][list(COLLECTIVE_COLUMNS)].reset_index(drop=True)
