"""Write a profile as a chrome trace: the format torch writes, which Perfetto, chrome://tracing,
HTA and ``nbprof.load_trace`` read.

Written from the events table, so it works for every profile (live, loaded, merged from ranks).
Timestamps are written exactly: ``(origin_ns + start_ns) / 1000`` is the double nearest to the
three-decimal µs value, and the encoder prints the shortest text that reads back as that double,
which is that decimal. FLOPs, which torch's own writer drops, go into each op's args.
"""

from __future__ import annotations

import gzip
import os
from typing import Any

import msgspec

from .errors import OptionError
from .events import time_ns

__all__ = ["write_chrome_trace"]

_KIND_CAT = {
    "op": "cpu_op",
    "annotation": "user_annotation",
    "gpu_annotation": "gpu_user_annotation",
    "python": "python_function",
    "runtime": "cuda_runtime",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "overhead": "overhead",
    "other": "other",
}
_DEVICE_TYPE = {"cpu": 0, "cuda": 1, "xpu": 12, "privateuseone": 20}


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
    origin = int(meta.get("origin_ns", 0))
    start = time_ns(ev["start_us"].to_numpy()) + origin
    dur = time_ns(ev["dur_us"].to_numpy())
    # Python lists, read once: indexing numpy arrays per event (a numpy scalar each, then int())
    # was most of this loop's time
    names = ev["name"].astype(str).tolist()
    kinds = ev["kind"].astype(str).tolist()
    devices = ev["device"].astype(str).tolist()
    thread_arr = ev["thread"].to_numpy()
    thread = thread_arr.tolist()
    stream = ev["stream"].to_numpy().tolist()
    pid_arr = ev["pid"].to_numpy()
    pid = pid_arr.tolist()
    ext = ev["external_id"].to_numpy().tolist()
    corr = ev["correlation"].to_numpy().tolist()
    shapes = ev["input_shapes"].astype(str).tolist()
    flops = ev["flops"].to_numpy().tolist()
    nbytes = ev["bytes"].to_numpy().tolist()
    alloc = ev["total_allocated_bytes"].to_numpy().tolist()
    reserved = ev["total_reserved_bytes"].to_numpy().tolist()
    addr = ev["addr"].to_numpy().tolist()
    py_id = ev["python_id"].to_numpy().tolist()
    py_parent = ev["python_parent_id"].to_numpy().tolist()
    grid = ev["grid"].astype(str).tolist()
    block = ev["block"].astype(str).tolist()
    registers = ev["registers_per_thread"].to_numpy().tolist()
    shared = ev["shared_memory_bytes"].to_numpy().tolist()
    blocks_sm = ev["blocks_per_sm"].to_numpy().tolist()
    warps_sm = ev["warps_per_sm"].to_numpy().tolist()
    occupancy = ev["occupancy_pct"].to_numpy().tolist()
    shapes_recorded = bool(meta.get("record_shapes"))

    ts = (start / 1000.0).tolist()
    durs = (dur / 1000.0).tolist()
    out: list[dict[str, Any]] = []
    cpu_pid = int(pid_arr[thread_arr >= 0][0]) if (thread_arr >= 0).any() else 0
    for i in range(len(ev)):
        kind = kinds[i]
        dev = devices[i]
        if kind in ("memory", "oom"):
            prefix, _, index = dev.partition(":")
            out.append(
                {
                    "ph": "i",
                    "cat": "cpu_instant_event",
                    "s": "t",
                    "name": names[i],
                    "pid": int(pid[i]),
                    "tid": int(thread[i]),
                    "ts": ts[i],
                    "args": {
                        "Total Reserved": int(reserved[i]),
                        "Total Allocated": int(alloc[i]),
                        "Bytes": int(nbytes[i]),
                        "Device Id": int(index) if index else -1,
                        "Device Type": _DEVICE_TYPE.get(prefix, 0),
                        "Addr": addr[i],
                    },
                }
            )
            continue
        args: dict[str, Any] = {}
        on_device = kind in ("kernel", "memcpy", "memset", "gpu_annotation")
        if ext[i]:
            args["External id"] = int(ext[i])
        if corr[i]:
            args["correlation"] = int(corr[i])
        if on_device:
            args["device"] = int(dev.partition(":")[2] or 0)
            args["stream"] = int(stream[i])
            if kind in ("memcpy", "memset"):
                args["bytes"] = int(nbytes[i])
            elif kind == "kernel" and grid[i]:  # CUPTI's launch configuration, as torch writes it
                args["registers per thread"] = registers[i]
                args["shared memory"] = shared[i]
                if blocks_sm[i] == blocks_sm[i]:  # not NaN
                    args["blocks per SM"] = blocks_sm[i]
                if warps_sm[i] == warps_sm[i]:
                    args["warps per SM"] = warps_sm[i]
                args["grid"] = msgspec.Raw(grid[i].encode())
                args["block"] = msgspec.Raw(block[i].encode())
                if occupancy[i] == occupancy[i]:
                    args["est. achieved occupancy %"] = occupancy[i]
        if kind == "op":
            if shapes_recorded:
                args["Input Dims"] = msgspec.Raw(shapes[i].encode())
            if flops[i]:
                args["flops"] = int(flops[i])
        if kind == "python":
            args["Python id"] = int(py_id[i])
            args["Python parent id"] = int(py_parent[i]) if py_parent[i] >= 0 else None
        event: dict[str, Any] = {
            "ph": "X",
            "cat": _KIND_CAT.get(kind, "other"),
            "name": names[i],
            "pid": int(pid[i]) if not on_device else int(dev.partition(":")[2] or 0),
            "tid": int(stream[i]) if on_device else int(thread[i]),
            "ts": ts[i],
            "dur": durs[i],
        }
        if kind == "overhead":  # where torch writes profiler overhead
            event["pid"], event["tid"] = -1, 0
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
    span_us = meta.get("span_us") or (((int(ends.max()) - origin) / 1000.0) if len(ev) else 0.0)
    out.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                "tid": "PyTorch Profiler", "ts": origin / 1000.0, "dur": span_us})
    for tid, label in (meta.get("thread_names") or {}).items():
        out.append({"ph": "M", "name": "thread_name", "pid": cpu_pid, "tid": int(tid), "args": {"name": label}})
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": meta.get("device_properties") or [],
        "record_shapes": int(bool(meta.get("record_shapes"))),
        "profile_memory": int(bool(meta.get("profile_memory"))),
        "with_stack": int(bool(meta.get("with_stack"))),
        "with_flops": int(bool(meta.get("with_flops"))),
        "baseTimeNanoseconds": int(meta.get("base_time_ns") or 0),
        "displayTimeUnit": "ms",
        "traceName": os.path.basename(str(meta.get("trace_name") or "nbprof")),
        "traceEvents": out,
    }
    if meta.get("rank") is not None:
        doc["distributedInfo"] = {"rank": meta["rank"], "world_size": meta.get("world_size")}
    return doc
