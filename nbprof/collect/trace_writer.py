"""Write a profile as a chrome trace: the format torch writes, which Perfetto, chrome://tracing,
HTA and ``nbprof.load_trace`` read.

Written from the events table, so it works for every profile (live, loaded, merged from ranks).
Timestamps are written exactly: ``(origin_ns + start_ns) / 1000`` is the double nearest to the
three-decimal µs value, and the encoder prints the shortest text that reads back as that double,
which is that decimal. FLOPs, which torch's own writer drops, go into each op's args.

The args that are an events column each (``events.ARG_COLUMNS``: ids, allocator totals, launch
configuration, ...) are written from the schema in ``nbprof.events``, the one the reader reads
them by; the fields written here by hand are those the reader puts together itself (device,
stream, bytes, shapes, memory events' device type).

A folder's events merged (a ``rank`` column: ``ClusterProfile.save``) keep each event's rank: each
rank's processes get pids of their own, named for the rank, and the ``nbprofRanks`` key says whose
they are (``collect/trace_ranks.py``); ``load_trace`` reads the ranks back.
"""

from __future__ import annotations

import gzip
import os
from typing import Any

import msgspec
import numpy as np

from ..errors import OptionError
from ..events import (
    ARG_COLUMNS,
    COPY_KINDS,
    DEVICE_KINDS,
    DEVICE_TYPE_CODE,
    MEMORY_KINDS,
    TRACE_CATEGORY,
    EventColumn,
    category_map,
    category_mask,
    time_ns,
    values_at,
)
from .trace_cycles import CYCLES_KEY, cycle_starts
from .trace_ranks import RANKS_KEY, written_ranks

__all__ = ["write_chrome_trace"]

# The runtime category of each accelerator other than CUDA (HIP writes cuda_runtime too): the
# reader labels a trace's device events from it ("mtia:0"), so a saved profile keeps its labels.
_RUNTIME_CATEGORY = {"xpu": "xpu_runtime", "mtia": "mtia_runtime", "hpu": "hpu_op",
                     "privateuseone": "privateuse1_runtime"}


def write_chrome_trace(profile: Any, path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if not (path.endswith(".json") or path.endswith(".json.gz")):
        raise OptionError(f"{path}: a chrome trace is written as .json or .json.gz")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OptionError(f"{path}: the folder {folder} does not exist")
    doc = _document(profile)
    data = msgspec.json.encode(doc)
    if path.endswith(".gz"):
        with gzip.open(path, "wb", compresslevel=6) as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return path


def _document(profile: Any) -> dict[str, Any]:
    ev = profile._events
    meta = profile.meta
    origin = meta.origin_ns
    start = time_ns(ev["start_us"].to_numpy()) + origin
    dur = time_ns(ev["dur_us"].to_numpy())
    # Python lists, read once: indexing numpy arrays per event (a numpy scalar each, then int())
    # was most of this loop's time
    names = values_at(ev["name"]).tolist()
    kinds = values_at(ev["kind"]).tolist()
    devices = values_at(ev["device"]).tolist()
    thread_arr = ev["thread"].to_numpy()
    thread = thread_arr.tolist()
    stream = ev["stream"].to_numpy().tolist()
    # each event's process as its own trace has it: the pid, a device event's device index, the
    # profiler's -1 for overhead (where torch writes it); a merged folder's: each rank's its own
    on_device_rows = category_mask(ev["kind"], set(DEVICE_KINDS).__contains__)
    pid_arr = np.where(on_device_rows, category_map(ev["device"], _device_index, dtype=np.int64, missing=0),
                       ev["pid"].to_numpy())
    overhead_rows = category_mask(ev["kind"], "overhead".__eq__)
    pid_arr[overhead_rows] = -1
    ranks = written_ranks(ev, meta, pid_arr) if "rank" in ev.columns else None
    if ranks is not None:
        pid_arr = ranks.pids
    pid = pid_arr.tolist()
    corr = ev["correlation"].to_numpy().tolist()
    shapes = values_at(ev["input_shapes"]).tolist()
    nbytes = ev["bytes"].to_numpy().tolist()
    shapes_recorded = meta.record_shapes
    args_of = _arg_columns(ev)

    ts = (start / 1000.0).tolist()
    durs = (dur / 1000.0).tolist()
    out: list[dict[str, Any]] = []
    cpu_pid = int(ev["pid"].to_numpy()[thread_arr >= 0][0]) if (thread_arr >= 0).any() else 0
    if ranks is not None:  # the first CPU event's process, as the file has it
        cpu_rows = np.flatnonzero((thread_arr >= 0) & ~overhead_rows)
        cpu_pid = pid[cpu_rows[0]] if len(cpu_rows) else 0
    # runtime calls under the category of the trace's accelerator (it labels the device events)
    accelerators = {d.partition(":")[0] for d in ev["device"].cat.categories.astype(str)} - {"cpu", "cuda"}
    runtime_cat = _RUNTIME_CATEGORY.get(min(accelerators), TRACE_CATEGORY["runtime"]) if accelerators else None
    for i in range(len(ev)):
        kind = kinds[i]
        dev = devices[i]
        args: dict[str, Any] = args_of[i] or {}
        if kind in MEMORY_KINDS:
            prefix, _, index = dev.partition(":")
            args["Bytes"] = int(nbytes[i])
            args["Device Id"] = int(index) if index else -1
            args["Device Type"] = DEVICE_TYPE_CODE.get(prefix, 0)
            out.append(
                {
                    "ph": "i",
                    "cat": TRACE_CATEGORY[kind],
                    "s": "t",
                    "name": names[i],
                    "pid": pid[i],
                    "tid": int(thread[i]),
                    "ts": ts[i],
                    "args": args,
                }
            )
            continue
        on_device = kind in DEVICE_KINDS
        if on_device:
            args["device"] = int(dev.partition(":")[2] or 0)
            args["stream"] = int(stream[i])
            if kind in COPY_KINDS:
                args["bytes"] = int(nbytes[i])
        if kind == "op" and shapes_recorded:
            args["Input Dims"] = msgspec.Raw(shapes[i].encode())
        event: dict[str, Any] = {
            "ph": "X",
            "cat": runtime_cat if (kind == "runtime" and runtime_cat) else TRACE_CATEGORY.get(kind, "other"),
            "name": names[i],
            "pid": pid[i],
            "tid": int(stream[i]) if on_device else int(thread[i]),
            "ts": ts[i],
            "dur": durs[i],
        }
        if kind == "overhead":  # where torch writes profiler overhead (pid -1: see pid_arr)
            event["tid"] = 0
        if args:
            event["args"] = args
        out.append(event)
        if corr[i] and (on_device or kind == "runtime") and kind != "gpu_annotation":
            # flow arrows from the launch (runtime call) to the kernel, as torch writes them
            flow = {"id": int(corr[i]), "ts": ts[i], "cat": "ac2g", "name": "ac2g"}
            if on_device:
                out.append({"ph": "f", "bp": "e", "pid": event["pid"], "tid": event["tid"], **flow})
            else:
                out.append({"ph": "s", "pid": event["pid"], "tid": event["tid"], **flow})
    # the profiler's own span: it fixes the time origin (start_us = 0) for the reader
    ends = start + dur
    span_us = meta.span_us or (((int(ends.max()) - origin) / 1000.0) if len(ev) else 0.0)
    out.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                "tid": "PyTorch Profiler", "ts": origin / 1000.0, "dur": span_us})
    if ranks is not None:  # each rank's processes named, and its threads (what Perfetto shows)
        out += ranks.metadata
    if ranks is None or not ranks.key["parts"]:
        for tid, label in meta.thread_names.items():
            out.append({"ph": "M", "name": "thread_name", "pid": cpu_pid, "tid": int(tid), "args": {"name": label}})
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": meta.device_properties,
        "record_shapes": int(meta.record_shapes),
        "profile_memory": int(meta.profile_memory),
        "with_stack": int(meta.with_stack),
        "with_flops": int(meta.with_flops),
        "with_modules": int(meta.with_modules),
        "baseTimeNanoseconds": meta.base_time_ns,
        "displayTimeUnit": "ms",
        "traceName": os.path.basename(meta.trace_name or "nbprof"),
        "traceEvents": out,
    }
    if ranks is not None:
        # every rank's events, each event's rank and each rank's own trace: load_trace reads them back
        # (collect/trace_ranks.py); the file is no one rank's, the world's size it keeps
        if meta.world_size is not None:
            doc["distributedInfo"] = {"world_size": meta.world_size}
        doc[RANKS_KEY] = ranks.key
    elif meta.rank is not None:
        doc["distributedInfo"] = {"rank": meta.rank, "world_size": meta.world_size}
    # torch.compile's log (graph breaks, recompiles, kernels' sources), for a profile where something
    # compiled or compiled code ran: load_trace reads it back
    if meta.compile_log and not profile.compilation().empty:
        doc["nbprofCompileLog"] = meta.compile_log
    # --lines: the line table's data and the sources it shows; load_trace reads them back
    if meta.line_data:
        doc["nbprofLines"] = {"line_data": meta.line_data, "sources": meta.sources}
    # which CUDA profile of its process this was, and the device records left out for their
    # times: what the clock_skew finding says of the trace, kept when the rows are gone
    if meta.cuda_profile is not None:
        doc["nbprofCudaProfile"] = meta.cuda_profile
    if meta.left_out_work:
        doc["nbprofLeftOutWork"] = dict(meta.left_out_work)
    if getattr(meta, "data_loading", None) is not None:  # the DataLoaders' workers (collect.data_loading)
        from .data_loading import record_to_json

        doc["nbprofDataLoading"] = record_to_json(meta.data_loading)
    # --schedule: each event's cycle (the device's idle time between cycles is not counted), as
    # where each cycle starts (collect/trace_cycles.py); a folder's ranks keep theirs in each file
    if "cycle" in ev.columns and "rank" not in ev.columns:
        starts = cycle_starts(ev["cycle"], start)
        if starts is not None:
            doc[CYCLES_KEY] = {"starts_ns": starts}
    return doc


def _device_index(device: str) -> int:
    """The index of a device label ("cuda:1" -> 1; "cpu" -> 0)."""
    return int(device.partition(":")[2] or 0)


def _arg_columns(ev: Any) -> list[dict[str, Any] | None]:
    """Each row's args from the events columns that are one arg each (``events.ARG_COLUMNS``):
    written for the rows of the column's kinds where it holds a value (not its "does not apply"
    default; a column torch writes as null there is written as null). None for a row without any.

    Column by column, so the per-event Python work is only for the values that are written."""
    out: list[dict[str, Any] | None] = [None] * len(ev)
    for c in ARG_COLUMNS:
        applies = category_mask(ev["kind"], set(c.kinds).__contains__)
        rows, values = _written(c, ev[c.name], applies)
        arg = str(c.arg)  # ARG_COLUMNS all have one
        for i, v in zip(rows.tolist(), values):
            args = out[i]
            if args is None:
                out[i] = {arg: v}
            else:
                args[arg] = v
    return out


def _written(c: EventColumn, column: Any, applies: Any) -> tuple[Any, list]:
    """The rows where a column is written and what is written there."""
    if c.json_list:  # as raw JSON, the text as it is: "[128, 1, 1]"
        text = values_at(column)
        rows = (applies & (text != c.default)).nonzero()[0]
        return rows, [msgspec.Raw(t.encode()) for t in text[rows].tolist()]
    if c.categorical:  # a string arg, as read
        text = values_at(column)
        rows = (applies & (text != c.default)).nonzero()[0]
        return rows, text[rows].tolist()
    values = column.to_numpy()
    if c.null_default:
        rows = applies.nonzero()[0]
        return rows, [None if v == c.default else v for v in values[rows].tolist()]
    rows = (applies & ~c.is_default(values)).nonzero()[0]
    return rows, values[rows].tolist()
