"""The events table: one row per profiler event, the single source of every torch view.

Its columns are declared once, in ``COLUMNS`` below: name, dtype, the value where a column does
not apply, the chrome-trace field it is read from and written to, the kinds of events that have
it, and what it means. The reader (``collect/chrome_trace``), the writer (``export``),
``make_events_frame`` and ``concat_traces`` all work from that declaration, and the column list
at the end of this docstring is generated from it. Adding a column read from a trace argument is
one ``EventColumn`` entry here (and its test): the reader reads it for the rows of its kinds, the
table holds it (its default elsewhere), the writer writes it back, merged traces keep it.

Kinds come in named groups (``DEVICE_KINDS``, ``DEVICE_WORK_KINDS``, ``TREE_KINDS``, ...), each
also as kind codes (``..._CODES``) for ``kind_mask``: use those, never a re-spelled tuple.

Columns the analysis adds (``nbprof.analysis.tree``): ``parent``, ``depth``, ``merged``,
``self_cpu_us``, ``device_total_us``, ``self_device_us``, ``cpu_mem_bytes``,
``self_cpu_mem_bytes``, ``device_mem_bytes``, ``self_device_mem_bytes``.

Columns (units in the names; where a column does not apply, it holds the value shown):
"""

from __future__ import annotations

import collections
import os
import re
import textwrap
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from .meta import TraceMeta

# Each kind of event and the chrome-trace category (``cat``) torch files it under: the writer
# writes these, the reader reads them (and the aliases it knows, see collect/chrome_trace).
# Memory events and out-of-memory events are both instant events in "cpu_instant_event"; the
# event name tells them apart ("[memory]", "[OutOfMemory]"). ``sync``: the device side of a
# synchronization (CUPTI's "Stream Wait Event", "Event Sync", ...; MTIA's event waits): it lives
# on a stream like a kernel, but it is waiting, not work, so it is no device time.
_KIND_CATEGORIES = (
    ("op", "cpu_op"),
    ("annotation", "user_annotation"),
    ("gpu_annotation", "gpu_user_annotation"),
    ("python", "python_function"),
    ("runtime", "cuda_runtime"),
    ("kernel", "kernel"),
    ("memcpy", "gpu_memcpy"),
    ("memset", "gpu_memset"),
    ("sync", "cuda_sync"),
    ("overhead", "overhead"),
    ("memory", "cpu_instant_event"),
    ("oom", "cpu_instant_event"),
    ("other", "other"),
)
KINDS = tuple(kind for kind, _ in _KIND_CATEGORIES)
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
TRACE_CATEGORY = dict(_KIND_CATEGORIES)


def _codes(kinds: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(KIND_CODE[k] for k in kinds)


# Named kind groups: use these, never a re-spelled tuple.
# Events that live on a device stream (lanes of the timeline, rows with a stream, no thread).
DEVICE_KINDS = ("kernel", "memcpy", "memset", "sync", "gpu_annotation")
# The kinds whose time is spent on the device (and counted as device time).
DEVICE_WORK_KINDS = ("kernel", "memcpy", "memset")
# Copies and fills: the device work that moves bytes.
COPY_KINDS = ("memcpy", "memset")
# CPU events that nest into the op tree of their thread (the CPU lanes of the timeline).
TREE_KINDS = ("op", "annotation", "runtime", "overhead", "other")
# Allocator events: an allocation or free, and an allocation that failed.
MEMORY_KINDS = ("memory", "oom")
# Events whose args carry a CUPTI correlation id (runtime calls, the device work they launched and
# the device side of a synchronization; "other" for categories we do not know).
CORRELATED_KINDS = ("runtime", "kernel", "memcpy", "memset", "sync", "gpu_annotation", "other")
DEVICE_CODES = _codes(DEVICE_KINDS)
DEVICE_WORK_CODES = _codes(DEVICE_WORK_KINDS)
COPY_CODES = _codes(COPY_KINDS)
TREE_CODES = _codes(TREE_KINDS)
MEMORY_CODES = _codes(MEMORY_KINDS)

# torch's DeviceType codes, as written in memory events ("Device Type").
# cpu_memory_usage counts CPU, MKLDNN and IDEEP; device_memory_usage CUDA, HIP, XPU, PrivateUse1.
CPU_MEMORY_TYPES = {0: "cpu", 2: "cpu", 5: "cpu"}
DEVICE_MEMORY_TYPES = {1: "cuda", 6: "cuda", 12: "xpu", 20: "privateuseone"}
# the label of every accelerator's DeviceType (device events of an MTIA or HPU trace: "mtia:0")
DEVICE_TYPES = {**DEVICE_MEMORY_TYPES, 15: "hpu", 19: "mtia"}
# the code written for a device label's type: the first code of each ("cuda" -> 1, not HIP's 6)
DEVICE_TYPE_CODE: dict[str, int] = {}
for _code, _label in {**CPU_MEMORY_TYPES, **DEVICE_TYPES}.items():
    DEVICE_TYPE_CODE.setdefault(_label, _code)
del _code, _label

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


@dataclass(frozen=True)
class EventColumn:
    """One column of the events table, declared once for the reader, the table and the writer.

    ``arg``: the key in a chrome-trace event's ``args`` the column is read from and written to,
    as it is, for the rows of ``kinds`` (other rows hold ``default``). Columns without an
    ``arg`` are put together by the reader and the writer themselves (``trace`` says from what).
    """

    name: str
    dtype: str  # a numpy dtype, or "category" (strings kept as integer codes)
    default: Any  # the value where the column does not apply
    doc: str
    arg: str | None = None
    trace: str = ""  # where a chrome trace keeps a column without ``arg`` (for the docs)
    kinds: tuple[str, ...] = KINDS  # the kinds whose events have it
    categories: tuple[str, ...] | None = None  # fixed categories; None: the values present
    json_list: bool = False  # the arg is a JSON list, kept as torch prints it: "[128, 1, 1]", '["float", "float"]'
    null_default: bool = False  # torch writes the default as null: it is written for every row of ``kinds``
    announced_by: str | None = None  # a trace-header flag: read only from traces that set it
    trace_local_id: bool = False  # an id unique within one trace only (``concat_traces`` moves it)

    @property
    def categorical(self) -> bool:
        return self.dtype == "category"

    @property
    def source(self) -> str:
        """Where a chrome trace keeps the column."""
        return f'args["{self.arg}"]' if self.arg else self.trace

    def is_default(self, values: np.ndarray) -> np.ndarray:
        """Rows holding the "does not apply" value (NaN for a NaN default)."""
        if isinstance(self.default, float) and np.isnan(self.default):
            return np.isnan(values)
        return values == self.default

    def full(self, n: int) -> Any:
        """The column for ``n`` rows where it applies to none."""
        if self.categorical:
            categories = list(self.categories or (self.default,))
            code = categories.index(self.default)
            return pd.Categorical.from_codes(np.full(n, code, dtype=np.int8), categories=categories)
        return np.full(n, self.default, dtype=self.dtype)


_NOT_MEMORY = tuple(k for k in KINDS if k not in MEMORY_KINDS)
_KERNEL = ("kernel",)
_PYTHON = ("python",)
# where torch writes a collective's args: its record_param_comms op and its NCCL kernel
_COLLECTIVE = ("op", "kernel")

COLUMNS = (
    EventColumn("name", "category", "", "event name", trace="name"),
    EventColumn("kind", "category", "other", ", ".join(KINDS), trace='cat (and name: "[OutOfMemory]")',
                categories=KINDS),
    EventColumn("device", "category", "cpu", '"cpu" or "cuda:N" (xpu:N, ...)',
                trace='args["device"]; memory events: args["Device Type"], args["Device Id"]'),
    EventColumn("thread", "int64", -1, "CPU thread id", trace="tid", kinds=tuple(k for k in KINDS if k not in DEVICE_KINDS)),
    EventColumn("stream", "int64", -1, "device stream", trace='args["stream"] (or tid)', kinds=DEVICE_KINDS),
    EventColumn("start_us", "float64", 0.0, "start, µs since the first event of the profile (ns resolution)",
                trace="ts"),
    EventColumn("dur_us", "float64", 0.0, "duration in µs", trace="dur"),
    EventColumn("correlation", "int64", 0, "CUPTI correlation id linking a runtime call to its kernel",
                arg="correlation", kinds=CORRELATED_KINDS, trace_local_id=True),
    EventColumn("external_id", "int64", 0, "torch's op id; on a kernel, the id of the op that launched it",
                arg="External id", kinds=_NOT_MEMORY, trace_local_id=True),
    EventColumn("sequence_nr", "int64", -1, "ops: autograd's sequence number, which torch writes for an op that ran with "
                "grad mode on (-1: off, or not written); an op that made an autograd node has a lower one than the "
                "next op of its thread", arg="Sequence number", kinds=("op",)),
    EventColumn("input_shapes", "category", "[]", "torch's ``str(input_shapes)``", trace='args["Input Dims"]',
                kinds=("op",)),
    EventColumn("input_types", "category", "", 'input dtypes as torch writes them, \'["float", "float"]\' (with shapes)',
                arg="Input type", kinds=("op",), json_list=True),
    EventColumn("flops", "int64", 0, "FLOPs torch estimated (torch's writer drops them; nbprof's keeps them)",
                arg="flops", announced_by="with_flops"),
    EventColumn("bytes", "int64", 0, "memory events: signed bytes (+alloc / -free); memcpy/memset: bytes moved",
                trace='args["Bytes"] (memory), args["bytes"] (memcpy, memset)', kinds=MEMORY_KINDS + COPY_KINDS),
    EventColumn("total_allocated_bytes", "int64", -1, "the allocator's total allocated after the event",
                arg="Total Allocated", kinds=MEMORY_KINDS),
    EventColumn("total_reserved_bytes", "int64", -1, "the allocator's total reserved after the event",
                arg="Total Reserved", kinds=MEMORY_KINDS),
    EventColumn("addr", "int64", 0, "the address of the block allocated or freed (pairs an allocation with "
                "its free)", arg="Addr", kinds=MEMORY_KINDS),
    EventColumn("pid", "int64", 0, "process id (or rank) of the event", trace="pid"),
    EventColumn("python_id", "int64", -1, "the function's id in the Python tracer",
                arg="Python id", kinds=_PYTHON, trace_local_id=True),
    EventColumn("python_parent_id", "int64", -1, "its caller's id (written as null for none)",
                arg="Python parent id", kinds=_PYTHON, null_default=True, trace_local_id=True),
    EventColumn("grid", "category", "", 'grid dimensions, "[128, 1, 1]"', arg="grid", kinds=_KERNEL,
                json_list=True),
    EventColumn("block", "category", "", 'block dimensions, "[128, 1, 1]"', arg="block", kinds=_KERNEL,
                json_list=True),
    EventColumn("registers_per_thread", "int32", -1, "registers per thread", arg="registers per thread",
                kinds=_KERNEL),
    EventColumn("shared_memory_bytes", "int64", -1, "static + dynamic shared memory per block",
                arg="shared memory", kinds=_KERNEL),
    EventColumn("blocks_per_sm", "float64", float("nan"), "CUPTI's estimate of blocks per SM (NaN in traces without it)",
                arg="blocks per SM", kinds=_KERNEL),
    EventColumn("warps_per_sm", "float64", float("nan"), "CUPTI's estimate of warps per SM",
                arg="warps per SM", kinds=_KERNEL),
    EventColumn("occupancy_pct", "float64", float("nan"), "CUPTI's estimated achieved occupancy, %",
                arg="est. achieved occupancy %", kinds=_KERNEL),
    EventColumn("collective", "category", "", 'collectives: their name ("allreduce", "broadcast", "wait")',
                arg="Collective name", kinds=_COLLECTIVE),
    EventColumn("msg_in_nelems", "int64", -1, "collectives: elements in the input message",
                arg="In msg nelems", kinds=_COLLECTIVE),
    EventColumn("msg_dtype", "category", "", 'collectives: the elements\' type ("Float", "BFloat16")',
                arg="dtype", kinds=_COLLECTIVE),
    EventColumn("process_group", "category", "", "collectives: the process group's name",
                arg="Process Group Name", kinds=_COLLECTIVE),
    EventColumn("process_group_ranks", "category", "", 'collectives: the process group\'s ranks, "[0, 1]"',
                arg="Process Group Ranks", kinds=_COLLECTIVE),
)
COLUMN = {c.name: c for c in COLUMNS}
EVENT_COLUMNS = tuple(COLUMN)
# the columns read from and written to one trace argument each, as they are
ARG_COLUMNS = tuple(c for c in COLUMNS if c.arg)


def describe_columns() -> str:
    """The column list of this module's docstring, from ``COLUMNS``."""
    lines = []
    for c in COLUMNS:
        # a trace field's name ("Total Allocated") is not cut across lines
        source = re.sub(r'"[^"]*"', lambda m: m.group(0).replace(" ", "\xa0"), c.source)
        if c.kinds == KINDS:
            where = f"From {source}."
        else:
            others = [k for k in KINDS if k not in c.kinds]
            kinds = ", ".join(c.kinds) if len(c.kinds) <= len(others) else "all but " + ", ".join(others)
            where = f"From {source}, on {kinds}; {c.default!r} on other events."
        head = f"    {c.name:<22} {c.dtype:<9}"
        body = textwrap.wrap(f"{c.doc}. {where}", 100 - len(head))
        lines.append(head + body[0])
        lines += [" " * len(head) + line for line in body[1:]]
        lines = [line.replace("\xa0", " ") for line in lines]
    return "\n".join(lines) + "\n"


__doc__ = (__doc__ or "") + "\n" + describe_columns()


@dataclass
class TraceData:
    """What a trace holds: the events table and what the file says about its collection."""

    events: pd.DataFrame
    meta: TraceMeta = field(default_factory=TraceMeta)


def make_events_frame(**values: Any) -> pd.DataFrame:
    """The events table from its columns, by name (``COLUMNS``); a column left out holds its
    "does not apply" value in every row.

    A value is the column as it is (an array of the column's dtype, or a ``pd.Categorical``);
    a categorical column also takes an array of strings (categories in order of first
    appearance). ``kind`` also takes codes into ``KINDS``, ``device`` device indexes (-1 for the
    CPU, N for "cuda:N").
    """
    unknown = sorted(set(values) - set(COLUMN))
    if unknown:
        raise ValueError(f"not columns of the events table: {', '.join(unknown)}")
    n = len(next(iter(values.values()))) if values else 0
    columns: dict[str, Any] = {}
    for c in COLUMNS:
        v = values.get(c.name)
        if v is None:
            columns[c.name] = c.full(n)
        elif isinstance(v, pd.Categorical):
            columns[c.name] = v
        elif c.name == "kind" and np.asarray(v).dtype.kind in "iu":
            columns[c.name] = kind_categorical(np.asarray(v))
        elif c.name == "device" and np.asarray(v).dtype.kind in "iu":
            columns[c.name] = device_labels(np.asarray(v))
        elif c.categorical:
            codes, uniques = pd.factorize(np.asarray(v, dtype=object))
            categories = pd.Index(uniques, dtype=object)
            if c.categories is not None:
                codes = pd.Index(c.categories).get_indexer(categories)[codes] if len(codes) else codes
                categories = pd.Index(c.categories, dtype=object)
            columns[c.name] = pd.Categorical.from_codes(codes, categories=categories)
        else:
            columns[c.name] = np.asarray(v).astype(c.dtype, copy=False)
    return pd.DataFrame(columns, copy=False)


def kind_categorical(codes: np.ndarray) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int8), categories=list(KINDS))


def device_labels(device: np.ndarray, device_type: np.ndarray | None = None) -> pd.Categorical:
    """Device labels from device indexes (-1: the CPU) and torch DeviceType codes (memory events
    say theirs; None: every device row is CUDA): "cpu", "cuda:0", "xpu:1", ..."""
    codes = np.zeros(len(device), dtype=np.int32)
    categories = ["cpu"]
    on_device = device >= 0
    if on_device.any():
        type_code = np.ones(len(device), dtype=np.int64) if device_type is None else device_type.astype(np.int64)
        # few distinct (type, index) pairs: label each pair once, not each row
        pair = type_code * 1_000_000 + device
        uniq, inverse = np.unique(pair[on_device], return_inverse=True)
        pair_code = np.empty(len(uniq), dtype=np.int32)
        for i, p in enumerate(uniq):
            prefix = DEVICE_TYPES.get(int(p // 1_000_000), "cuda")
            label = f"{prefix}:{int(p % 1_000_000)}"
            if label not in categories:  # HIP memory and CUDA kernels share "cuda:N"
                categories.append(label)
            pair_code[i] = categories.index(label)
        codes[on_device] = pair_code[inverse.reshape(-1)]
    return pd.Categorical.from_codes(codes, categories=categories)


def kind_mask(codes: np.ndarray, kinds: "list[int] | tuple[int, ...] | np.ndarray") -> np.ndarray:
    """``np.isin(codes, kinds)`` for kind codes: a comparison per kind where they are few (each a
    fast pass over the small int codes), else one table lookup. Called some 40 times for a rank's
    summary: at 1 M events the lookup (an index array made from the codes, then a gather) cost
    ~1.5 ms a call, three comparisons ~0.2 ms."""
    wanted = np.unique(np.asarray(kinds, dtype=np.int64))
    codes = np.asarray(codes)
    if len(wanted) <= _KIND_COMPARISONS:
        out = np.zeros(codes.shape, dtype=bool)
        for k in wanted.tolist():
            out |= codes == k
        return out
    table = np.zeros(len(KINDS) + 1, dtype=bool)
    table[wanted] = True
    return np.take(table, codes)  # codes are 0..len(KINDS)-1 (-1, if ever, reads the spare last entry)


# Up to this many kinds, kind_mask compares the codes with each one instead of a table lookup.
_KIND_COMPARISONS = 4


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array; one pass when they are all the same (the
    usual case for processes and threads), hashing otherwise (no full sort)."""
    if len(values) == 0:
        return values[:0]
    first = values[0]
    if (values == first).all():
        return values[:1]
    return np.sort(pd.unique(values))


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


def category_map(column: pd.Series, fn: Callable[[str], Any], dtype: Any = object, missing: Any = "",
                 rows: np.ndarray | None = None) -> np.ndarray:
    """``fn(value)`` for each row of a categorical column (at ``rows``; every row when None),
    evaluated once per category, not per event; ``missing`` for a row without a value."""
    cats = column.cat.categories
    per_category = np.array([fn(str(c)) for c in cats] + [missing], dtype=dtype)
    codes = column.cat.codes.to_numpy()  # -1 (missing) reads the last entry
    if rows is not None:
        codes = codes[rows]
    # np.take gathers numbers and booleans from the small codes without first making an index
    # array of them (1.5 -> 0.9 ms at 1 M rows); object references gather faster by indexing
    return per_category[codes] if per_category.dtype == object else np.take(per_category, codes)


def category_codes(column: pd.Series, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values_at(column, rows), sort=True)`` of a categorical column, from its codes:
    each row's code among the labels that occur (numbered in the labels' sorted order) and those
    labels (``str``; a missing value is ""). No string is made or hashed per row (grouping 100 k
    device strings cost 10-20 ms at 1 M events)."""
    labels = np.append(np.asarray(column.cat.categories.astype(str), dtype=object), "")
    codes = column.cat.codes.to_numpy()
    codes = (codes if rows is None else codes[rows]).astype(np.int64)
    codes[codes < 0] = len(labels) - 1
    used = np.flatnonzero(np.bincount(codes, minlength=len(labels)))  # np.unique hashed 1 M codes: 40 ms
    distinct, code_of_used = np.unique(labels[used].astype(str), return_inverse=True)  # "" and missing: one
    code_of = np.full(len(labels), -1, dtype=np.int64)
    code_of[used] = code_of_used.reshape(-1)
    return code_of[codes], np.asarray(distinct, dtype=object)


def category_mask(column: pd.Series, test: Callable[[str], Any], rows: np.ndarray | None = None) -> np.ndarray:
    """``test(value)`` for each row of a categorical column, evaluated once per category."""
    return category_map(column, lambda v: bool(test(v)), dtype=bool, missing=False, rows=rows)


def values_at(column: pd.Series, rows: np.ndarray | None = None) -> np.ndarray:
    """A column's values as ``str`` objects at ``rows`` (every row when None). A categorical column
    (names, kinds, devices, shapes) is read through its categories: one conversion per distinct
    value, not per event (a missing value is "")."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return category_map(column, str, rows=rows)
    values = column.astype(str).to_numpy()
    return values if rows is None else values[rows]


def time_ns(us: pd.Series | np.ndarray) -> np.ndarray:
    """µs floats (relative, ns resolution) -> exact int64 nanoseconds."""
    us = np.asarray(us, dtype=np.float64)
    ns = np.multiply(us, 1000.0, out=np.empty_like(us))
    np.rint(ns, out=ns)  # in place: one temporary, not two (~60 calls per 1 M-event rank)
    return ns.astype(np.int64)


def concat_traces(traces: list[TraceData], labels: list | None = None, label_column: str | None = None,
                  shifts_us: list[float] | None = None) -> TraceData:
    """Join several traces (schedule cycles, ranks) into one, on a common clock.

    Ids are only unique within one trace, so each trace's ids move to their own range.
    ``label_column`` (e.g. "rank", "cycle") records which trace each event came from.
    ``shifts_us``: how far each trace's times move (µs); by default its time origin's distance
    from the earliest (one clock). A folder whose ranks were not recorded on one clock gives its
    own (``cluster.profile.rank_clocks``), so its events are where its views draw them.
    """
    ids = [c.name for c in COLUMNS if c.trace_local_id]
    categorical = [c for c in COLUMNS if c.categorical]
    origin = min(t.meta.origin_ns for t in traces)
    frames = []
    for i, t in enumerate(traces):
        f = t.events.copy()
        shift_us = (t.meta.origin_ns - origin) / 1000.0 if shifts_us is None else shifts_us[i]
        if shift_us:
            f["start_us"] = f["start_us"] + shift_us
        if i:
            for name in ids:
                v = f[name].to_numpy()
                f[name] = np.where(v > 0, v + (i << 40), v)
        for c in categorical:
            f[c.name] = f[c.name].astype(object)
        if label_column:
            f[label_column] = labels[i] if labels is not None else i
        frames.append(f)
    events = pd.concat(frames, ignore_index=True)
    for c in categorical:
        events[c.name] = events[c.name].astype("category")
        if c.categories is not None:
            events[c.name] = events[c.name].cat.set_categories(list(c.categories))
    first = traces[0].meta
    meta = dataclasses.replace(
        first,
        origin_ns=origin,
        record_shapes=any(t.meta.record_shapes for t in traces),
        profile_memory=any(t.meta.profile_memory for t in traces),
        with_stack=any(t.meta.with_stack for t in traces),
        with_flops=any(t.meta.with_flops for t in traces),
        parts=[t.meta for t in traces],
        # one trace's External ids join its line table; merged traces' ids collide
        line_data=first.line_data if len(traces) == 1 else None,
        sources=first.sources if len(traces) == 1 else {},
        reader_notes=[f"{os.path.basename(t.meta.source)}: {note}" if len(traces) > 1 else note
                      for t in traces for note in t.meta.reader_notes],
        left_out_work=dict(sum((collections.Counter(t.meta.left_out_work) for t in traces), collections.Counter())),
    )
    return TraceData(events=events, meta=meta)
