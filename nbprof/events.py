"""The events table: one row per profiler event, the single source of every torch view.

Columns written by the collectors (units in the names; -1 means "does not apply"):

    name            event name (categorical)
    kind            op, annotation, gpu_annotation, python, runtime, kernel, memcpy, memset,
                    overhead, memory, oom, other (categorical)
    device          "cpu" or "cuda:N" (categorical)
    thread          CPU thread id; -1 for device events
    stream          device stream; -1 for CPU events
    start_us        start, µs since the first event of the profile (ns resolution)
    dur_us          duration in µs
    correlation     CUPTI correlation id linking a runtime call to its kernel
    external_id     torch's op id; on a kernel, the id of the op that launched it
    input_shapes    torch's ``str(input_shapes)``, "[]" when none were recorded
    flops           FLOPs torch estimated (0 when not collected)
    bytes           memory events: signed bytes (+alloc / -free); memcpy/memset: bytes moved
    total_allocated_bytes, total_reserved_bytes
                    memory events: the allocator's totals after the event; -1 elsewhere
    addr            memory events: the address of the block allocated or freed (pairs an
                    allocation with its free); 0 elsewhere
    pid             process id (or rank) of the event
    python_id, python_parent_id
                    python function events: their ids in the Python tracer; -1 elsewhere
    grid, block     kernels: launch dimensions as written, "[128, 1, 1]"; "" elsewhere (categorical)
    registers_per_thread, shared_memory_bytes
                    kernels: registers per thread, static + dynamic shared memory per block; -1 elsewhere
    blocks_per_sm, warps_per_sm, occupancy_pct
                    kernels: CUPTI's estimates (blocks and warps per SM, est. achieved occupancy %);
                    NaN elsewhere and in traces that do not have them

Columns the analysis adds (``nbprof.analysis.tree``): ``parent``, ``depth``, ``merged``,
``self_cpu_us``, ``device_total_us``, ``self_device_us``, ``cpu_mem_bytes``,
``self_cpu_mem_bytes``, ``device_mem_bytes``, ``self_device_mem_bytes``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KINDS = (
    "op",
    "annotation",
    "gpu_annotation",
    "python",
    "runtime",
    "kernel",
    "memcpy",
    "memset",
    "overhead",
    "memory",
    "oom",
    "other",
)
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
# Named kind groups: use these, never a re-spelled tuple.
# Events that live on a device stream (lanes of the timeline, rows with a stream, no thread).
DEVICE_KINDS = ("kernel", "memcpy", "memset", "gpu_annotation")
# The kinds whose time is spent on the device (and counted as device time).
DEVICE_WORK_KINDS = ("kernel", "memcpy", "memset")
DEVICE_CODES = tuple(KIND_CODE[k] for k in DEVICE_KINDS)
DEVICE_WORK_CODES = tuple(KIND_CODE[k] for k in DEVICE_WORK_KINDS)

# torch's DeviceType codes, as written in memory events ("Device Type").
# cpu_memory_usage counts CPU, MKLDNN and IDEEP; device_memory_usage CUDA, HIP, XPU, PrivateUse1.
CPU_MEMORY_TYPES = {0: "cpu", 2: "cpu", 5: "cpu"}
DEVICE_MEMORY_TYPES = {1: "cuda", 6: "cuda", 12: "xpu", 20: "privateuseone"}

# Utility ops torch leaves out of its tables (torch.autograd.profiler_util._filter_name).
IGNORED_NAMES = frozenset(
    {
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)

EVENT_COLUMNS = (
    "name",
    "kind",
    "device",
    "thread",
    "stream",
    "start_us",
    "dur_us",
    "correlation",
    "external_id",
    "input_shapes",
    "flops",
    "bytes",
    "total_allocated_bytes",
    "total_reserved_bytes",
    "addr",
    "pid",
    "python_id",
    "python_parent_id",
    "grid",
    "block",
    "registers_per_thread",
    "shared_memory_bytes",
    "blocks_per_sm",
    "warps_per_sm",
    "occupancy_pct",
)
LAUNCH_COLUMNS = EVENT_COLUMNS[EVENT_COLUMNS.index("grid"):]


def kind_mask(codes: np.ndarray, kinds: "list[int] | tuple[int, ...] | np.ndarray") -> np.ndarray:
    """``np.isin(codes, kinds)`` for kind codes, as one table lookup (no per-kind passes)."""
    table = np.zeros(len(KINDS) + 1, dtype=bool)
    table[np.asarray(kinds, dtype=np.int64)] = True
    return table[codes]  # codes are 0..len(KINDS)-1 (-1, if ever, reads the spare last entry)


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array; one pass when they are all the same (the
    usual case for processes and threads), hashing otherwise (no full sort)."""
    if len(values) == 0:
        return values[:0]
    first = values[0]
    if (values == first).all():
        return values[:1]
    return np.sort(pd.unique(values))


def kind_categorical(codes: np.ndarray) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int8), categories=list(KINDS))


def make_events_frame(
    *,
    name: np.ndarray | pd.Categorical,
    kind: np.ndarray,
    device: np.ndarray,
    thread: np.ndarray,
    stream: np.ndarray,
    start_ns: np.ndarray,
    dur_ns: np.ndarray,
    correlation: np.ndarray,
    external_id: np.ndarray,
    input_shapes: np.ndarray | pd.Categorical | None,
    nbytes: np.ndarray,
    total_allocated: np.ndarray,
    total_reserved: np.ndarray,
    mem_device_type: np.ndarray,
    pid: np.ndarray,
    python_id: np.ndarray,
    python_parent_id: np.ndarray,
    flops: np.ndarray | None = None,
    launch: dict | None = None,
    addr: np.ndarray | None = None,
) -> pd.DataFrame:
    """Build the events table from column arrays (kind as codes into KINDS, device as an index).

    ``device`` is the device index for device events and device-memory events, -1 for the CPU.
    ``name`` and ``input_shapes`` are arrays of strings, or ``pd.Categorical`` already.
    ``launch``: the kernels' launch columns (``LAUNCH_COLUMNS``); ``grid`` and ``block`` as
    (codes, texts) with -1 where there is none. Left out: none anywhere.
    """
    n = len(name)
    if isinstance(name, pd.Categorical):
        names = name
    else:
        name_codes, name_uniques = pd.factorize(name)
        names = pd.Categorical.from_codes(name_codes, categories=pd.Index(name_uniques, dtype=object))
    device_labels = _device_labels(kind, device, mem_device_type)
    if input_shapes is None:
        shapes = pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=["[]"])
    elif isinstance(input_shapes, pd.Categorical):
        shapes = input_shapes
    else:
        shapes = pd.Categorical(input_shapes)
    columns = {
        "name": names,
        "kind": kind_categorical(kind),
        "device": device_labels,
        "thread": thread.astype(np.int64, copy=False),
        "stream": stream.astype(np.int64, copy=False),
        "start_us": start_ns / 1000.0,
        "dur_us": dur_ns / 1000.0,
        "correlation": correlation,
        "external_id": external_id,
        "input_shapes": shapes,
        "flops": np.zeros(n, dtype=np.int64) if flops is None else flops,
        "bytes": nbytes,
        "total_allocated_bytes": total_allocated,
        "total_reserved_bytes": total_reserved,
        "addr": np.zeros(n, dtype=np.int64) if addr is None else addr,
        "pid": pid,
        "python_id": python_id,
        "python_parent_id": python_parent_id,
    }
    columns.update(_launch_columns(n, launch))
    return pd.DataFrame(columns, copy=False)


def _launch_columns(n: int, launch: dict | None) -> dict:
    out: dict = {}
    for column in ("grid", "block"):
        if launch is None:
            out[column] = pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[""])
            continue
        codes, texts = launch[column]
        # "" for rows without one; raw texts that read the same share a category
        categories, text_code = np.unique(np.array([""] + list(texts), dtype=object), return_inverse=True)
        out[column] = pd.Categorical.from_codes(text_code.reshape(-1)[codes + 1].astype(np.int32),
                                                categories=pd.Index(categories, dtype=object))
    for column, dtype, default in (("registers_per_thread", np.int32, -1), ("shared_memory_bytes", np.int64, -1),
                                   ("blocks_per_sm", np.float64, np.nan), ("warps_per_sm", np.float64, np.nan),
                                   ("occupancy_pct", np.float64, np.nan)):
        out[column] = launch[column] if launch is not None else np.full(n, default, dtype=dtype)
    return out


def _device_labels(kind: np.ndarray, device: np.ndarray, mem_device_type: np.ndarray) -> pd.Categorical:
    """"cpu" for CPU events and CPU memory, "cuda:N" (or xpu/…) for device events and memory."""
    codes = np.zeros(len(kind), dtype=np.int32)
    categories = ["cpu"]
    on_device = device >= 0
    if on_device.any():
        # device type of each row: memory events say theirs, every other device event is CUDA
        type_code = np.where(
            (kind == KIND_CODE["memory"]) | (kind == KIND_CODE["oom"]), mem_device_type, 1
        )
        # few distinct (type, index) pairs: label each pair once, not each row
        pair = type_code.astype(np.int64) * 1_000_000 + device
        uniq, inverse = np.unique(pair[on_device], return_inverse=True)
        pair_code = np.empty(len(uniq), dtype=np.int32)
        for i, p in enumerate(uniq):
            prefix = DEVICE_MEMORY_TYPES.get(int(p // 1_000_000), "cuda")
            label = f"{prefix}:{int(p % 1_000_000)}"
            if label not in categories:  # HIP memory and CUDA kernels share "cuda:N"
                categories.append(label)
            pair_code[i] = categories.index(label)
        codes[on_device] = pair_code[inverse.reshape(-1)]
    return pd.Categorical.from_codes(codes, categories=categories)


def key_names(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """torch's keys for event names: "ProfilerStep#3" and friends all count as "ProfilerStep*".

    Returns each row's key code (-1 for a missing name) and the key names the codes index."""
    cats = names.cat.categories
    renamed = np.array(["ProfilerStep*" if str(c).startswith("ProfilerStep#") else c for c in cats], dtype=object)
    key_of_cat, labels = pd.factorize(renamed) if len(renamed) else (np.zeros(0, np.int64), renamed)
    labels = np.asarray(labels, dtype=object)
    codes = names.cat.codes.to_numpy()
    if (codes < 0).any():  # a missing name is the key "" (never -1: that would index the last label)
        labels = np.append(labels, "")
        key_of_cat = np.append(key_of_cat, len(labels) - 1)
        codes = np.where(codes < 0, len(key_of_cat) - 1, codes)
    return key_of_cat[codes] if len(codes) else codes.astype(np.int64), labels


def values_at(column: pd.Series, rows: np.ndarray | None = None) -> np.ndarray:
    """A column's values as ``str`` objects at ``rows`` (every row when None). A categorical column
    (names, kinds, devices, shapes) is read through its categories: one conversion per distinct
    value, not per event (a missing value is "")."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        cats = np.append(np.asarray(column.cat.categories.astype(str), dtype=object), "")
        codes = column.cat.codes.to_numpy()
        return cats[codes if rows is None else codes[rows]]
    values = column.astype(str).to_numpy()
    return values if rows is None else values[rows]


def category_mask(column: pd.Series, test) -> np.ndarray:
    """``test(value)`` for each row of a categorical column, evaluated once per category."""
    cats = column.cat.categories
    hit = np.append(np.array([bool(test(str(c))) for c in cats], dtype=bool), False)
    return hit[column.cat.codes.to_numpy()]


def time_ns(us: pd.Series | np.ndarray) -> np.ndarray:
    """µs floats (relative, ns resolution) -> exact int64 nanoseconds."""
    return np.rint(np.asarray(us, dtype=np.float64) * 1000.0).astype(np.int64)


_ID_COLUMNS = ("external_id", "correlation", "python_id", "python_parent_id")
_CATEGORY_COLUMNS = ("name", "kind", "device", "input_shapes", "grid", "block")


def concat_traces(traces: list, labels: list | None = None, label_column: str | None = None):
    """Join several traces (schedule cycles, ranks) into one, on a common clock.

    Ids are only unique within one trace, so each trace's ids move to their own range.
    ``label_column`` (e.g. "rank", "cycle") records which trace each event came from.
    """
    from .collect.chrome_trace import TraceData

    origin = min(t.meta.get("origin_ns", 0) for t in traces)
    frames = []
    for i, t in enumerate(traces):
        f = t.events.copy()
        shift_us = (t.meta.get("origin_ns", 0) - origin) / 1000.0
        if shift_us:
            f["start_us"] = f["start_us"] + shift_us
        if i:
            for c in _ID_COLUMNS:
                v = f[c].to_numpy()
                f[c] = np.where(v > 0, v + (i << 40), v)
        for c in _CATEGORY_COLUMNS:
            f[c] = f[c].astype(object)
        if label_column:
            f[label_column] = labels[i] if labels is not None else i
        frames.append(f)
    events = pd.concat(frames, ignore_index=True)
    for c in _CATEGORY_COLUMNS:
        events[c] = events[c].astype("category")
    events["kind"] = events["kind"].cat.set_categories(list(KINDS))
    meta = dict(traces[0].meta)
    meta["origin_ns"] = origin
    for key in ("record_shapes", "profile_memory", "with_stack", "with_flops"):
        meta[key] = any(t.meta.get(key) for t in traces)
    meta["parts"] = [t.meta for t in traces]
    return TraceData(events=events, meta=meta)
