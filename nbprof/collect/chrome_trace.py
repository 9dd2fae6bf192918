"""Read a chrome trace (as written by torch.profiler) into the events table.

This is the one reader of torch profiles: a live profile is written by torch's own C++ trace
writer (``kineto_results.save``) into memory and read back here, so a live profile and a file
loaded from disk become the same table by construction.

Why JSON and not the pybind event objects: ``kineto_results.events()`` alone costs ~4.6 µs per
event and every attribute read another 0.3-3.8 µs (measured on this machine with torch 2.13),
which is more than torch's whole ``__exit__``. torch's C++ writer costs ~2.5 µs per event and
``msgspec`` decodes the result into GC-free structs at ~1.6-3 µs per event, reading only the
fields we use.

Times: the writer prints ``ts``/``dur`` in µs with exactly three decimals (ns resolution). A float64
near 4.5e12 µs is only exact to ~1 ns, so naive ``ts * 1000`` can be off by a nanosecond; we split
``ts`` into its integer and fractional parts, which recovers the exact integer nanoseconds.
"""

from __future__ import annotations

import gzip
import json
import mmap
import os
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceError
from ..events import (
    DEVICE_MEMORY_TYPES,
    CPU_MEMORY_TYPES,
    KINDS,
    KIND_CODE,
    IGNORED_NAMES,
    make_events_frame,
)

__all__ = ["TraceData", "read_trace_file", "parse_trace_bytes"]


class _Args(msgspec.Struct, gc=False):
    external_id: int = msgspec.field(name="External id", default=0)
    correlation: int = 0
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    device: int = -1
    stream: int = -1
    # memcpy / memset size ("bytes") and the signed size of an allocation event ("Bytes")
    copy_bytes: int = msgspec.field(name="bytes", default=0)
    alloc_bytes: int = msgspec.field(name="Bytes", default=0)
    total_allocated: int = msgspec.field(name="Total Allocated", default=-1)
    total_reserved: int = msgspec.field(name="Total Reserved", default=-1)
    device_type: int = msgspec.field(name="Device Type", default=-1)
    device_id: int = msgspec.field(name="Device Id", default=-1)
    python_id: int = msgspec.field(name="Python id", default=-1)
    python_parent_id: int | None = msgspec.field(name="Python parent id", default=-1)
    flops: int = 0  # written by nbprof's exporter (torch's writer drops FLOPs)
    name: str = ""  # metadata events (thread_name, process_name)
    labels: str = ""  # process_labels ("CPU", "GPU 0")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: _Args | None = None


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event]
    deviceProperties: list[dict[str, Any]] = []
    record_shapes: int = 0
    profile_memory: int = 0
    with_stack: int = 0
    with_flops: int = 0
    with_modules: int = 0
    baseTimeNanoseconds: int = 0
    traceName: str = ""
    distributedInfo: dict[str, Any] | None = None


_DECODER = msgspec.json.Decoder(_Trace)

# chrome-trace category -> our event kind; categories mapped to None are not events
# (flows between CPU and GPU, the profiler's own span).
_CAT_KIND: dict[str, str | None] = {
    "cpu_op": "op",
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "hip_runtime": "runtime",
    "privateuse1_runtime": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "overhead": "overhead",
    "cpu_instant_event": "memory",  # "[memory]"; "[OutOfMemory]" becomes "oom" below
    "ac2g": None,
    "fwdbwd": None,
    "async_cpu_to_gpu": None,
    "Trace": None,
    "": None,
}
_DEVICE_KINDS = {"kernel", "memcpy", "memset", "gpu_annotation"}


@dataclass
class TraceData:
    """What a trace holds: the events table and what the file says about its collection."""

    events: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)


def read_trace_file(path: str | os.PathLike) -> TraceData:
    """Read one ``.json`` or ``.json.gz`` chrome trace file."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TraceError(f"{path}: is a folder; pass a trace file (.json or .json.gz)")
    size = os.path.getsize(path)
    if size == 0:
        raise TraceError(f"{path}: the file is empty, not a chrome trace")
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            try:
                buf: Any = gzip.decompress(f.read())
            except (OSError, EOFError) as e:
                raise TraceError(f"{path}: gzip data is truncated or corrupt ({e})") from None
            return parse_trace_bytes(buf, source=path)
        # mmap avoids a second copy of a large file in memory.
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return parse_trace_bytes(buf, source=path)


def parse_trace_bytes(buf: Any, source: str = "<trace>") -> TraceData:
    """Parse chrome-trace JSON (bytes, bytearray or mmap) into a :class:`TraceData`."""
    if bytes(buf[:256]).lstrip().startswith(b"["):
        # a bare list of events is a chrome trace too (the "JSON Array Format")
        try:
            return _build(_Trace(traceEvents=msgspec.json.decode(buf, type=list[_Event])), source)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise _decode_error(source, e) from None
    try:
        trace = _DECODER.decode(buf)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise _decode_error(source, e) from None
    return _build(trace, source)


def _decode_error(source: str, error: Exception) -> TraceError:
    msg = str(error)
    if "truncated" in msg.lower():
        return TraceError(f"{source}: the JSON is truncated (was the file fully written?)")
    return TraceError(f"{source}: not a chrome trace ({msg})")


def _exact_ns(us: np.ndarray) -> np.ndarray:
    """µs floats with three decimals -> exact integer nanoseconds (see the module docstring)."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


def _int_ids(values: list) -> np.ndarray:
    """pid/tid values are ints, or strings in hand-made traces: strings get stable negative ids."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError):
        out = np.empty(len(values), dtype=np.int64)
        names: dict[str, int] = {}
        for i, v in enumerate(values):
            if isinstance(v, int):
                out[i] = v
            else:
                out[i] = names.setdefault(v, -(len(names) + 2))
        return out


def _shape_strings(raws: list) -> np.ndarray:
    """Raw "Input Dims" JSON -> torch's ``str(event.input_shapes)`` for each event.

    The writer prints the same ``[[8, 16], [16]]`` text Python would, so the raw bytes are the
    key as they are. A TensorList argument is written as a list of shapes; torch's
    ``input_shapes`` shows it as ``[]``, and so do we.
    """
    codes, uniques = pd.factorize(np.array([bytes(r) for r in raws], dtype=object))
    texts = []
    for raw in uniques:
        if not raw:
            texts.append("[]")
            continue
        text = raw.decode()
        if "[[[" in text or "], [[" in text or ",[[" in text:
            dims = json.loads(text)
            text = str([[] if (d and isinstance(d[0], list)) else d for d in dims])
        elif ", " not in text and "," in text:
            text = str(json.loads(text))  # compact writers: normalise to Python's spacing
        texts.append(text)
    return np.asarray(texts, dtype=object)[codes]


def _build(trace: _Trace, source: str) -> TraceData:
    all_events = trace.traceEvents
    thread_names: dict[int, str] = {}
    process_labels: dict[int, str] = {}
    for e in all_events:
        if e.ph == "M" and e.args is not None:
            if e.name == "thread_name" and isinstance(e.tid, int):
                thread_names[e.tid] = e.args.name.strip()
            elif e.name == "process_labels" and isinstance(e.pid, int):
                process_labels[e.pid] = e.args.labels

    span = [e for e in all_events if e.cat == "Trace" and e.ph == "X"]
    cat_kind = _CAT_KIND
    keep = [
        e
        for e in all_events
        if (e.ph == "X" or e.ph == "i") and cat_kind.get(e.cat, "other") is not None
        and e.name not in IGNORED_NAMES
    ]
    n = len(keep)
    if n == 0 and not span and not all_events:
        raise TraceError(f"{source}: the trace has no events (traceEvents is empty)")

    # kinds from categories (factorize: one hash per event, then a lookup per category)
    cat_codes, cats = pd.factorize(np.array([e.cat for e in keep], dtype=object))
    kind_of_cat = np.array([KIND_CODE[cat_kind.get(c, "other") or "other"] for c in cats], dtype=np.int8)
    kind = kind_of_cat[cat_codes] if n else np.zeros(0, dtype=np.int8)
    names = np.array([e.name for e in keep], dtype=object)
    if n:
        mem_mask = kind == KIND_CODE["memory"]
        if mem_mask.any():
            oom = mem_mask & (names == "[OutOfMemory]")
            kind[oom] = KIND_CODE["oom"]
            other_instant = mem_mask & (names != "[memory]") & (names != "[OutOfMemory]")
            kind[other_instant] = KIND_CODE["other"]

    ts = np.fromiter((e.ts for e in keep), dtype=np.float64, count=n)
    dur = np.fromiter((e.dur for e in keep), dtype=np.float64, count=n)
    start_ns = _exact_ns(ts)
    dur_ns = np.rint(dur * 1000.0).astype(np.int64)
    pid = _int_ids([e.pid for e in keep])
    tid = _int_ids([e.tid for e in keep])

    args = [e.args or _NO_ARGS for e in keep]
    external_id = np.fromiter((a.external_id for a in args), dtype=np.int64, count=n)
    correlation = np.fromiter((a.correlation for a in args), dtype=np.int64, count=n)
    device_arg = np.fromiter((a.device for a in args), dtype=np.int64, count=n)
    stream = np.fromiter((a.stream for a in args), dtype=np.int64, count=n)

    is_device = np.isin(kind, [KIND_CODE[k] for k in _DEVICE_KINDS])
    is_memory = (kind == KIND_CODE["memory"]) | (kind == KIND_CODE["oom"])
    nbytes = np.zeros(n, dtype=np.int64)
    total_allocated = np.full(n, -1, dtype=np.int64)
    total_reserved = np.full(n, -1, dtype=np.int64)
    mem_device_type = np.full(n, -1, dtype=np.int64)
    mem_device_id = np.full(n, -1, dtype=np.int64)
    if is_memory.any():
        idx = np.flatnonzero(is_memory)
        sub = [args[i] for i in idx]
        nbytes[idx] = [a.alloc_bytes for a in sub]
        total_allocated[idx] = [a.total_allocated for a in sub]
        total_reserved[idx] = [a.total_reserved for a in sub]
        mem_device_type[idx] = [a.device_type for a in sub]
        mem_device_id[idx] = [a.device_id for a in sub]
    copies = np.flatnonzero((kind == KIND_CODE["memcpy"]) | (kind == KIND_CODE["memset"]))
    if len(copies):
        nbytes[copies] = [args[i].copy_bytes for i in copies]

    python_mask = kind == KIND_CODE["python"]
    python_id = np.full(n, -1, dtype=np.int64)
    python_parent_id = np.full(n, -1, dtype=np.int64)
    if python_mask.any():
        idx = np.flatnonzero(python_mask)
        python_id[idx] = [args[i].python_id for i in idx]
        python_parent_id[idx] = [
            -1 if args[i].python_parent_id is None else args[i].python_parent_id for i in idx
        ]

    flops = np.fromiter((a.flops for a in args), dtype=np.int64, count=n)
    has_flops = bool(flops.any())

    shapes_recorded = bool(trace.record_shapes) or any(a.input_dims for a in args[: min(n, 5000)])
    if shapes_recorded:
        input_shapes = _shape_strings([a.input_dims for a in args])
    else:
        input_shapes = None

    # Devices: device events carry their GPU index; memory events their device type and index.
    device = np.where(is_device, np.where(device_arg >= 0, device_arg, 0), -1)
    mem_on_device = is_memory & np.isin(mem_device_type, list(DEVICE_MEMORY_TYPES))
    device = np.where(mem_on_device, np.maximum(mem_device_id, 0), device)

    # Overhead events (pid -1, tid 0 in the file) happen in the profiler's own code on the main
    # thread; torch files them there, under the op open at their start, and so do we.
    main_tid = _main_thread(kind, pid, tid)
    overhead = kind == KIND_CODE["overhead"]
    if overhead.any() and main_tid is not None:
        main_pid = int(pid[np.flatnonzero((tid == main_tid) & ~overhead)[0]])
        tid = np.where(overhead, main_tid, tid)
        pid = np.where(overhead, main_pid, pid)

    thread = np.where(is_device, -1, tid)
    stream = np.where(is_device, np.where(stream >= 0, stream, tid), -1)

    origin_ns = int(start_ns.min()) if n else 0
    if span:
        origin_ns = min(origin_ns, int(_exact_ns(np.array([span[0].ts]))[0])) if n else int(
            _exact_ns(np.array([span[0].ts]))[0]
        )

    events = make_events_frame(
        name=names,
        kind=kind,
        device=device,
        thread=thread,
        stream=stream,
        start_ns=start_ns - origin_ns,
        dur_ns=dur_ns,
        correlation=correlation,
        external_id=external_id,
        input_shapes=input_shapes,
        nbytes=nbytes,
        total_allocated=total_allocated,
        total_reserved=total_reserved,
        mem_device_type=mem_device_type,
        pid=pid,
        python_id=python_id,
        python_parent_id=python_parent_id,
        flops=flops,
    )
    dist = trace.distributedInfo or {}
    meta: dict[str, Any] = {
        "source": source,
        "origin_ns": origin_ns,
        "base_time_ns": trace.baseTimeNanoseconds,
        "record_shapes": bool(trace.record_shapes) or shapes_recorded,
        "profile_memory": bool(trace.profile_memory) or bool(is_memory.any()),
        "with_stack": bool(trace.with_stack) or bool(python_mask.any()),
        # torch's writer drops FLOPs; nbprof's exporter keeps them
        "with_flops": bool(trace.with_flops) and has_flops,
        "with_modules": bool(trace.with_modules),
        "device_properties": list(trace.deviceProperties or []),
        "thread_names": thread_names,
        "trace_name": trace.traceName,
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
        "main_thread": main_tid,
        "span_us": (span[0].dur if span else None),
    }
    return TraceData(events=events, meta=meta)


def _main_thread(kind: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> int | None:
    """The main thread of the profiled process: the CPU thread whose id is the process id.

    Falls back to the thread of the earliest CPU operator when no thread id equals a pid.
    """
    cpu = (kind == KIND_CODE["op"]) | (kind == KIND_CODE["annotation"])
    if not cpu.any():
        return None
    same = cpu & (pid == tid) & (pid >= 0)
    if same.any():
        return int(tid[np.flatnonzero(same)[0]])
    return int(tid[np.flatnonzero(cpu)[0]])


def empty_trace() -> TraceData:
    """A trace with no events (a cell that ran no torch operators)."""
    e = np.zeros(0, dtype=np.int64)
    events = make_events_frame(
        name=np.zeros(0, dtype=object), kind=np.zeros(0, dtype=np.int8), device=e, thread=e, stream=e,
        start_ns=e, dur_ns=e, correlation=e, external_id=e, input_shapes=None, nbytes=e,
        total_allocated=e, total_reserved=e, mem_device_type=e, pid=e, python_id=e, python_parent_id=e,
    )
    return TraceData(events=events, meta={"source": "empty", "origin_ns": 0})
