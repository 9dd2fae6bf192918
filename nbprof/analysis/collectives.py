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

:func:`collective_calls`: one row per call (the same events), numbered per rank and process
group in the order they start (``seq``: c10d numbers a process group's collectives in the order
each rank issues them, the same on every rank; the trace does not write the number, so the
order of the calls' starts stands for it). :func:`match_calls` joins the ranks' calls of the
same process group and number: one collective, and the rank whose call started last is the one
the others waited for (``last``; ``wait_us``: how long each rank's call started before it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, TREE_CODES, category_map, kind_mask, values_at
from ._tables import LABEL, TEXT, empty_table
from .breakdown import COMM, work_categories
from .device_stats import process_codes

__all__ = ["COLLECTIVE_COLUMNS", "CALL_COLUMNS", "DTYPE_BYTES", "collective_name", "collective_table",
           "collective_calls", "match_calls"]

COLLECTIVE_DTYPES = {"rank": LABEL, "name": TEXT, "process_group": TEXT, "process_group_ranks": TEXT,
                     "count": np.int64, "total_us": np.float64, "mean_us": np.float64, "max_us": np.float64,
                     "bytes": np.int64}
COLLECTIVE_COLUMNS = tuple(COLLECTIVE_DTYPES)

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
        return empty_table(COLLECTIVE_DTYPES)
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


CALL_DTYPES = {"rank": LABEL, "process_group": TEXT, "seq": np.int64, "name": TEXT, "start_us": np.float64,
               "dur_us": np.float64, "event": np.int64}
CALL_COLUMNS = tuple(CALL_DTYPES)


def collective_calls(events: pd.DataFrame) -> pd.DataFrame:
    """One row per collective call (the events :func:`collective_table` sums): ``rank, process_group,
    seq, name, start_us, dur_us, event`` (its position in ``events``), ``seq`` numbering the calls
    of each rank and process group from 0 in the order they start (see the module doc)."""
    rank, labels = process_codes(events)
    rows, _ = _rows(events)
    if len(rows) == 0:
        return empty_table(CALL_DTYPES)
    from_arg = category_map(events["collective"], collective_name, rows=rows)
    names = np.where(from_arg != "", from_arg, category_map(events["name"], collective_name, rows=rows))
    group = values_at(events["process_group"], rows)
    start = events["start_us"].to_numpy()[rows]
    r = rank[rows]
    group_codes, _ = pd.factorize(group)
    order = np.lexsort((rows, start, group_codes, r))  # by rank, group, start (then the file's order)
    r, group_codes, rows = r[order], group_codes[order], rows[order]
    first = np.r_[True, (r[1:] != r[:-1]) | (group_codes[1:] != group_codes[:-1])]
    idx = np.arange(len(rows))
    seq = idx - np.maximum.accumulate(np.where(first, idx, 0))
    out = pd.DataFrame({"rank": labels[r], "process_group": group[order], "seq": seq.astype(np.int64),
                        "name": names[order], "start_us": start[order],
                        "dur_us": events["dur_us"].to_numpy()[rows], "event": rows.astype(np.int64)})
    return out.sort_values(["start_us", "event"], kind="stable").reset_index(drop=True)[list(CALL_COLUMNS)]


def match_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls of several ranks (``collective_calls`` of each, ``start_us`` on one clock) joined
    per collective (process group and ``seq``): ``calls``' columns and ``ranks`` (how many ranks
    made that call), ``last`` (this rank's call started last: the one the others waited for),
    ``wait_us`` (the last start minus this one's), ``names`` (the distinct names the ranks gave it;
    ranks that disagree on a collective's name have lost step). Sorted by the collective's first
    start, then rank."""
    if len(calls) == 0:
        return calls.assign(ranks=np.zeros(0, dtype=np.int64), last=np.zeros(0, dtype=bool),
                            wait_us=np.zeros(0), names=np.zeros(0, dtype=object))
    key = calls["process_group"].astype(str) + "\x00" + calls["seq"].astype(str)
    codes, _ = pd.factorize(key.to_numpy())
    start = calls["start_us"].to_numpy(dtype=np.float64)
    n = int(codes.max()) + 1
    last_start = np.full(n, -np.inf)
    np.maximum.at(last_start, codes, start)
    first_start = np.full(n, np.inf)
    np.minimum.at(first_start, codes, start)
    count = np.bincount(codes, minlength=n)
    names = calls.groupby(codes, sort=False)["name"].agg(lambda s: sorted(set(s)))
    out = calls.copy()
    out["ranks"] = count[codes].astype(np.int64)
    # one "last" per collective: the latest start, the first such row where several tie
    is_max = start == last_start[codes]
    first_max = pd.Series(is_max).groupby(codes).cumsum().to_numpy() == 1
    out["last"] = is_max & first_max & (count[codes] > 1)
    out["wait_us"] = last_start[codes] - start
    out["names"] = names.reindex(codes).to_numpy()
    order = np.lexsort((calls["rank"].astype(str).to_numpy(), codes, first_start[codes]))
    return out.iloc[order].reset_index(drop=True)
