"""What the reader reads of a chrome trace, and as what: the fields of an event and of its
``args``, the msgspec structs and decoders built from them, the category tables (a category ->
an event kind), and how a value of the file becomes a value of the table.

Args. The struct the args are decoded into, and which of them are read for which kinds, are
generated from the events schema (``events.COLUMNS``: a column with an ``arg``) plus the few
args the reader turns into columns itself (device, stream, bytes, shapes): a new column is one
``EventColumn`` there, and :data:`FIELDS`, :data:`GROUPS` and the structs follow.

Formats. Every trace torch has written since 1.8: torch 1.8-1.9's capitalized categories
(``Operator``, ``Kernel``, ...; matched without regard to case) and its ``external id``, read
only once such a category shows up (a field more would cost every modern trace a pass); the
runtimes of other accelerators, which kineto files as runtime calls and kernels
(:data:`CAT_KIND`); categories nbprof does not know become "other", counted per category in the
trace's notes.

Tolerance. The typed decoders reject a whole document for one value of another type (ROCm writes
``"stream": "0x0"`` on runtime calls). A file that fails them is decoded again with every field
as any JSON value and checked field by field (:func:`checked_events`): a value that reads as its
type is kept ("0x0" is 0), one that cannot be read leaves out its event when the event's kind
reads that field, counted per field in ``TraceMeta.reader_notes``. Only such files pay for the
check. Invalid UTF-8 and torch 2.4-2.14's unescaped names are repaired where a file does not
decode as it is (:func:`decoded`).

Nothing here reads a file or loops over events: ``collect/chrome_trace.py`` does (one pass), and
``collect/trace_limits.py`` bounds what a file can make it do.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import msgspec
import numpy as np

from ..events import (
    ARG_COLUMNS,
    COPY_KINDS,
    CORRELATED_KINDS,
    DEVICE_KINDS,
    DEVICE_TYPE_CODE,
    KINDS,
    KIND_CODE,
    MEMORY_KINDS,
    TRACE_CATEGORY,
    EventColumn,
)

__all__ = ["ArgField", "FIELDS", "GROUPS", "ANNOUNCING", "Args", "NO_ARGS", "Event", "LooseArgs", "LooseEvent", "Trace",
           "LooseTrace", "DECODER", "LOOSE_DECODER", "LIST_DECODER", "LOOSE_LIST_DECODER", "CAT_KIND", "CAT_CODE",
           "CAT_CODE_AT_START", "category_code", "decoded", "checked_header", "checked_events", "read_as",
           "shape_text", "arg_text", "dims_text", "header_int", "device_properties"]


@dataclass(frozen=True)
class ArgField:
    """An entry of an event's ``args`` that the reader reads, for the rows of ``kinds`` only."""

    attr: str  # its attribute on the decoded args (an events column's name, for ARG_COLUMNS)
    arg: str  # its key in the trace
    type: Any  # what msgspec decodes it as
    default: Any  # what an event without it reads as
    kinds: tuple[str, ...]
    dtype: Any = np.int64  # of the values read (codes, for JSON kept as raw text)
    announced_by: str | None = None  # a trace-header flag: not read from traces that do not set it
    legacy: bool = False  # torch 1.8-1.9's spelling: read only from traces in its categories

    @property
    def raw(self) -> bool:
        return self.type is msgspec.Raw

    @property
    def nullable(self) -> bool:
        return self.type == (int | None)


def _column_field(c: EventColumn) -> ArgField:
    """How an events column with an ``arg`` is read (see ``events.EventColumn``)."""
    if c.arg is None:
        raise ValueError(f"{c.name}: not read from one trace arg")
    if c.json_list or c.categorical:  # kept as raw JSON text: one conversion per distinct text
        return ArgField(c.name, c.arg, msgspec.Raw, msgspec.Raw(b""), c.kinds, np.int32)
    kind = np.dtype(c.dtype).kind
    typ: Any = float if kind == "f" else (int | None) if c.null_default else int
    return ArgField(c.name, c.arg, typ, c.default, c.kinds, np.dtype(c.dtype), c.announced_by)


_NOT_MEMORY = tuple(k for k in KINDS if k not in MEMORY_KINDS)
# The args the reader turns into columns itself (device labels, streams, bytes, shapes), then
# those events columns that are one arg each (events.ARG_COLUMNS), read as they are.
FIELDS = (
    ArgField("device", "device", int, -1, DEVICE_KINDS),
    ArgField("stream", "stream", int, -1, DEVICE_KINDS),
    ArgField("copy_bytes", "bytes", int, 0, COPY_KINDS),  # memcpy / memset size
    ArgField("dma_bytes", "size", int, 0, COPY_KINDS),  # MTIA's DMA copies ("dma_request") call it "size"
    ArgField("alloc_bytes", "Bytes", int, 0, MEMORY_KINDS),  # the signed size of an allocation event
    ArgField("device_type", "Device Type", int, -1, MEMORY_KINDS),
    ArgField("device_id", "Device Id", int, -1, MEMORY_KINDS),
    # memory events (often half of a --memory profile) have no shapes: not read for them
    ArgField("input_dims", "Input Dims", msgspec.Raw, msgspec.Raw(b""), _NOT_MEMORY, np.int32, "record_shapes"),
    # torch 1.8-1.9: the launching op's id on runtime calls and device work ("External id" on ops)
    ArgField("legacy_external_id", "external id", int, 0, CORRELATED_KINDS, legacy=True),
) + tuple(_column_field(c) for c in ARG_COLUMNS)

Args = msgspec.defstruct(
    "Args",
    [(f.attr, f.type, msgspec.field(name=f.arg, default=f.default)) for f in FIELDS]
    + [
        ("name", str, ""),  # metadata events (thread_name, process_name)
        ("labels", str, ""),  # process_labels ("CPU", "GPU 0")
    ],
    gc=False,
)
NO_ARGS = Args()


def _reads(f: ArgField) -> Callable[[list], list]:
    """``[a.<attr> for a in args]`` for one field (raw JSON as bytes, null as the default): written
    out as a comprehension (generated from the field's name), because ``map(attrgetter(attr),
    args)`` costs ~40 % more per value (~45 ns against ~33 ns), paid for every event of every
    field: reading a 200k-event trace took 3 % longer with attrgetter (measured, CPU time, 8
    alternating runs)."""
    if not f.attr.isidentifier():
        raise ValueError(f"not an attribute name: {f.attr!r}")
    value = f"a.{f.attr}"
    if f.raw:
        value = f"bytes({value})"
    elif f.nullable:  # null is the default ("Python parent id": null)
        value = f"{int(f.default)} if {value} is None else {value}"
    return eval(f"lambda args: [{value} for a in args]")  # noqa: S307 (a checked identifier)


# Fields read for the same kinds are read together, from one selection of rows.
GROUPS: list[tuple[np.ndarray, list[tuple[ArgField, Callable[[list], list]]]]] = []
for _kinds in dict.fromkeys(f.kinds for f in FIELDS):
    _table = np.zeros(len(KINDS), dtype=bool)
    _table[[KIND_CODE[k] for k in _kinds]] = True
    GROUPS.append((_table, [(f, _reads(f)) for f in FIELDS if f.kinds == _kinds]))
del _kinds, _table
# the trace-header flags that decide what is read (shapes, FLOPs)
ANNOUNCING = tuple(dict.fromkeys(f.announced_by for f in FIELDS if f.announced_by))


class Event(msgspec.Struct, gc=False):
    """An event whose ``args`` are always there (absent ones are the defaults) and whose fields
    have their types: what the fast decoders produce. A file that fails them (``"args": null``,
    a field of another type) is decoded into :class:`LooseEvent` and checked field by field."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = math.nan  # none: not an event the table can place (see _plausible)
    dur: float = 0.0
    args: Args = msgspec.field(default_factory=Args)  # type: ignore[valid-type]


# The same fields with any JSON value: what a file that fails the typed decoders is read as.
LooseArgs = msgspec.defstruct(
    "LooseArgs",
    [(f.attr, msgspec.Raw if f.raw else Any, msgspec.field(name=f.arg, default=f.default)) for f in FIELDS]
    + [("name", Any, ""), ("labels", Any, "")],
    gc=False,
)


class LooseEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    name: Any = ""
    cat: Any = ""
    pid: Any = 0
    tid: Any = 0
    ts: Any = None
    dur: Any = 0.0
    # args of another type than an object: that event left out (see _Reader.checked), not the file
    args: LooseArgs | list | str | int | float | bool | None = None  # type: ignore[valid-type]


class Trace(msgspec.Struct, gc=False):
    traceEvents: list[Event]
    # any JSON: device_properties keeps each GPU's object and counts what is not one (typed as a list of
    # objects, one string among them failed the whole header's check and every GPU was lost unsaid)
    deviceProperties: Any = []
    record_shapes: int = 0
    profile_memory: int = 0
    with_stack: int = 0
    with_flops: int = 0
    with_modules: int = 0
    baseTimeNanoseconds: int = 0
    traceName: str = ""
    distributedInfo: dict[str, Any] | None = None
    nbprofCompileLog: dict[str, Any] | None = None  # torch.compile's log, as nbprof's exporter writes it
    nbprofLines: Any = None  # --lines: {"line_data": ..., "sources": ...}, checked by collect.lines.checked_lines
    nbprofCudaProfile: Any = None  # TraceMeta.cuda_profile, checked by the reader's _clock_header
    nbprofLeftOutWork: Any = None  # TraceMeta.left_out_work, checked by the reader's _clock_header
    nbprofDataLoading: Any = None  # the DataLoaders' workers, checked by collect.data_loading.record_from_json
    nbprofRanks: Any = None  # a folder's ranks merged: each pid's rank, checked by collect.trace_ranks.read_ranks
    nbprofCycles: Any = None  # --schedule's cycles: where each starts, checked by collect.trace_cycles.read_cycles


class LooseTrace(msgspec.Struct, gc=False):
    traceEvents: list[LooseEvent]
    deviceProperties: Any = []
    record_shapes: Any = 0
    profile_memory: Any = 0
    with_stack: Any = 0
    with_flops: Any = 0
    with_modules: Any = 0
    baseTimeNanoseconds: Any = 0
    traceName: Any = ""
    distributedInfo: Any = None
    nbprofCompileLog: Any = None
    nbprofLines: Any = None
    nbprofCudaProfile: Any = None
    nbprofLeftOutWork: Any = None
    nbprofDataLoading: Any = None
    nbprofRanks: Any = None
    nbprofCycles: Any = None


DECODER = msgspec.json.Decoder(Trace)
LOOSE_DECODER = msgspec.json.Decoder(LooseTrace, float_hook=float)  # 1e999: inf, left out, not an error
LIST_DECODER = msgspec.json.Decoder(list[Event])
LOOSE_LIST_DECODER = msgspec.json.Decoder(list[LooseEvent], float_hook=float)


def read_as(value: Any, typ: Any) -> Any:
    """A value of another type read as ``typ`` (int, int | None, float, str, int | str) where it can
    be: "0x0" and "7" as integers (ROCm writes streams so), 7.0 as 7, "1.5" as 1.5. Raises
    ValueError where it cannot (a list, text that is no number, true/false for a number)."""
    if isinstance(value, bool):
        raise ValueError(value)
    if typ is float:
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str) and math.isfinite(number := float(value)):  # not "nan", "inf"
            return number
    elif typ is str:
        if isinstance(value, str):
            return value
    elif isinstance(value, int):
        return value
    elif isinstance(value, float) and value.is_integer():
        return int(value)
    elif isinstance(value, str):
        if typ == (int | str):
            return value
        text = value.strip()
        return int(text) if text.lstrip("+-").isdigit() else int(text, 0)
    raise ValueError(value)


EVENT_FIELDS = (("ph", str, ""), ("name", str, ""), ("cat", str, ""), ("pid", int | str, 0),
                 ("tid", int | str, 0), ("ts", float, math.nan), ("dur", float, 0.0))

# chrome-trace category -> our event kind: each kind's own category (events.TRACE_CATEGORY;
# "cpu_instant_event" is read as "memory", "oom" is decided later from the name), the calls of
# the other runtimes, and categories that are not events (None: flows between CPU and GPU, the
# profiler's own span). kineto itself folds the other accelerators' activity types into these
# (libkineto ActivityType.h: MTIA_RUNTIME, XPU_RUNTIME, HPU_OP, PRIVATEUSE1_* = RUNTIME / DRIVER;
# MTIA_CCP_EVENTS = CONCURRENT_KERNEL). Categories not here are "other", counted in a note.
CAT_KIND: dict[str, str | None] = {
    **{cat: kind for kind, cat in TRACE_CATEGORY.items() if kind != "oom"},
    "cuda_driver": "runtime",
    "hip_runtime": "runtime",
    "privateuse1_runtime": "runtime",
    "privateuse1_driver": "runtime",
    "xpu_runtime": "runtime",
    "xpu_driver": "runtime",
    "mtia_runtime": "runtime",
    "glow_runtime": "runtime",
    "hpu_op": "runtime",
    "mtia_ccp_events": "kernel",
    "xpu_sync": "sync",
    "cuda_event": "sync",  # CUPTI's event records on a stream: the markers stream waits wait for
    "ac2g": None,
    "fwdbwd": None,
    "async_cpu_to_gpu": None,
    "async": None,
    "Trace": None,
    "": None,
}
# torch ~1.8-1.9 (the TensorBoard plugin's era) wrote capitalized categories, and "external id"
# (lower case) on runtime calls and device work; matched without regard to case.
LEGACY_CAT_KIND: dict[str, str] = {
    "operator": "op",
    "runtime": "runtime",
    "kernel": "kernel",
    "memcpy": "memcpy",
    "memset": "memset",
    "python": "python",
    "memory": "memory",
    "dataloader": "annotation",
}
# The record_function ranges torch opens itself: profiler.step()'s, the DataLoader's and the
# DataPipes' iterators'. Traces that file ranges as operators (see _Reader.finish) still name them.
TORCH_RANGE_PREFIXES = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#")
# A category's prefix -> torch's DeviceType of the trace's device events (their labels: "xpu:0").
ACCELERATOR_OF = {"xpu": DEVICE_TYPE_CODE["xpu"], "mtia": DEVICE_TYPE_CODE["mtia"],
                   "hpu": DEVICE_TYPE_CODE["hpu"], "privateuse1": DEVICE_TYPE_CODE["privateuseone"]}
STREAM_TID = re.compile(r"stream\s*(\d{1,18})$", re.IGNORECASE)  # (an int64)
# MTIA's command processor writes its synchronization and its DMA copies among its kernels
# (kineto files them all as kernels): told apart by name.
KIND_BY_NAME = {"mtia_ccp_events": {"event_wait": "sync", "event_record": "sync", "dma_request": "memcpy"}}

# Kind codes while reading: the event kinds, and codes for rows that are not (yet) events.
DROP = -1  # not an event (flows, metadata, categories mapped to None)
SPAN = -2  # the profiler's own span ("Trace"): not an event, but it fixes the time origin
NO_CATEGORY = -3  # no "cat": torch 1.8-1.9's memory events (instant "[memory]"); else dropped
UNKNOWN = len(KINDS)  # a category nbprof does not know: "other", counted per category
NOT_AN_EVENT = "\x00"  # the "category" of phases other than "X" and "i"
MEMORY_NAMES = frozenset({"[memory]", "[OutOfMemory]"})
CAT_CODE: dict[str, int] = {
    cat: (SPAN if cat == "Trace" else NO_CATEGORY if cat == "" else DROP if kind is None else KIND_CODE[kind])
    for cat, kind in CAT_KIND.items()
}
CAT_CODE[NOT_AN_EVENT] = DROP
_FOLDED_CAT_CODE = {c.lower(): code for c, code in CAT_CODE.items() if code >= 0}
# the categories the reader looks at when it first meets them (what they say about the trace)
CAT_CODE_AT_START = {c: code for c, code in CAT_CODE.items()
                     if c not in KIND_BY_NAME and c.split("_")[0] not in ACCELERATOR_OF}


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def category_code(cat: str) -> tuple[int, bool]:
    """The kind code of a category this reader has not met yet, and whether it is torch 1.8-1.9's
    spelling: exact names first, then without regard to case (both spellings), else unknown."""
    code = CAT_CODE.get(cat)
    if code is not None:
        return code, False
    folded = cat.lower()
    if folded in LEGACY_CAT_KIND:
        return KIND_CODE[LEGACY_CAT_KIND[folded]], True
    return _FOLDED_CAT_CODE.get(folded, UNKNOWN), False


def decoded(decoder: Any, data: Any) -> tuple[Any, int]:
    """``decoder.decode(data)``, and how many invalid UTF-8 sequences in it were read as U+FFFD
    (msgspec refuses them in the strings it reads: the text is decoded again, repaired; only
    such files pay for it). JSON that does not decode gets one more try with torch's unescaped
    names repaired (:func:`torch_names_escaped`)."""
    try:
        try:
            return decoder.decode(data), 0
        except msgspec.DecodeError as e:
            if _invalid_utf8(e):
                raise
            repaired = torch_names_escaped(bytes(data))
            if repaired is None:
                raise
            return decoder.decode(repaired), 0
    except (UnicodeDecodeError, msgspec.DecodeError) as e:
        if not _invalid_utf8(e):
            raise
        raw = bytes(data)
        text = raw.decode("utf-8", "replace")
        fixed = torch_names_escaped(text.encode("utf-8"))
        return decoder.decode(fixed if fixed is not None else text), text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")


def _invalid_utf8(e: Exception) -> bool:
    """Whether msgspec refused a string's invalid UTF-8: up to msgspec 0.22 a UnicodeDecodeError,
    from 0.23 a DecodeError that says so (the same refusal; both are read the same way)."""
    return isinstance(e, UnicodeDecodeError) or "invalid utf-8" in str(e).lower()


# torch 2.4-2.14's trace writer writes an event's name as it is, without JSON escaping, on a line
# of its own: record_function('say "hi"') gives `    "name": "say "hi"",`, which no JSON reader
# accepts (torch 2.15 writes ' for "). Only such lines are rewritten, and only when a file does not
# decode as it is.
_TORCH_NAME_LINE = re.compile(rb'^([ \t]*"name": ")(.*)(",?)([ \t]*\r?)$', re.MULTILINE)


def torch_names_escaped(data: bytes) -> bytes | None:
    """``data`` with the names of torch's writer's lines JSON-escaped; None when no line needed it."""
    changed = 0

    def escape(m: re.Match) -> bytes:
        nonlocal changed
        inner = m.group(2)
        try:
            json.loads(b'"' + inner + b'"')
            return m.group(0)  # already a JSON string
        except ValueError:
            changed += 1
            text = json.dumps(inner.decode("utf-8", "replace"), ensure_ascii=False)[1:-1]
            return m.group(1) + text.encode("utf-8") + m.group(3) + m.group(4)

    out = _TORCH_NAME_LINE.sub(escape, data)
    return out if changed else None


def checked_header(loose: Any) -> Trace:
    """The header of a loosely decoded file, a field of the wrong type read as absent."""
    values = {}
    for f in msgspec.structs.fields(Trace):
        if f.name == "traceEvents":
            continue
        v = getattr(loose, f.name)
        try:
            values[f.name] = msgspec.convert(v, f.type)
        except msgspec.ValidationError:
            pass
    return Trace(traceEvents=[], **values)


def shape_text(text: str) -> str:
    """Raw "Input Dims" JSON as torch's ``str(input_shapes)`` (see ``_Reader._shapes``); JSON that
    is no list of shapes, as it is written."""
    if not text:
        return "[]"
    try:
        if "[[[" in text or "], [[" in text or ",[[" in text:
            dims = json.loads(text)
            if isinstance(dims, list):
                text = str([[] if (isinstance(d, list) and d and isinstance(d[0], list)) else d for d in dims])
        elif ", " not in text and "," in text:
            text = str(json.loads(text))  # compact writers: normalise to Python's spacing
    except (ValueError, RecursionError):
        pass
    return text


def arg_text(raw: str) -> str:
    """A string arg's text ("Collective name": "allreduce"); another JSON value as it reads."""
    if not raw:
        return ""
    try:
        value = json.loads(raw)
        return value if isinstance(value, str) else json.dumps(value)
    except (ValueError, RecursionError):
        return raw


def dims_text(raw: str) -> str:
    """A launch dimension as the writer prints it (``[128, 1, 1]``), whatever the file's spacing."""
    if not raw:
        return ""
    try:
        return str([int(v) for v in json.loads(raw)])
    except (ValueError, TypeError, OverflowError, RecursionError):
        return raw


def header_int(value: Any, bound: int) -> int | None:
    """An integer of the trace's header (a rank, a clock) in [0, bound), else None."""
    return value if type(value) is int and 0 <= value < bound else None


# deviceProperties entries the analyses read, and their JSON types (another type: the value is left out)
_DEVICE_PROPERTY_TEXT = ("name",)
_DEVICE_PROPERTY_INTS = ("id", "totalGlobalMem", "computeMajor", "computeMinor", "warpSize", "numSms",
                         "maxThreadsPerBlock", "maxThreadsPerMultiprocessor", "regsPerBlock", "regsPerMultiprocessor",
                         "sharedMemPerBlock", "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor")


def device_properties(entries: Any) -> tuple[list[dict[str, Any]], int]:
    """The trace's ``deviceProperties`` (one dict per GPU), each value the analyses read of its
    type (an int64 for numbers, text for the name); how many values were not (an entry that is
    no object, or the whole value when it is no list, counts one)."""
    if not isinstance(entries, list):
        return [], 1
    out, wrong = [], 0
    for entry in entries:
        if not isinstance(entry, dict):
            wrong += 1
            continue
        keep = {}
        for key, value in entry.items():
            if key in _DEVICE_PROPERTY_INTS:
                ok = type(value) is int and INT64_MIN <= value <= INT64_MAX
            else:
                ok = key not in _DEVICE_PROPERTY_TEXT or isinstance(value, str)
            if ok:
                keep[key] = value
            else:
                wrong += 1
        out.append(keep)
    return out, wrong


def checked_events(events: list, code_of: Callable[[str], int], unreadable: Counter) -> list:
    """Loosely decoded events (:class:`LooseEvent`) as typed ones, field by field; ``code_of``: a
    category's kind code (the reader's, which notes what each new category says about the trace),
    ``unreadable``: events left out, per field (counted here).

    A value of another type is read where it can be (:func:`read_as`); null reads as absent.
    A value that cannot be read leaves its event out when the event's kind reads that field
    (counted per field: the report's notes say how many), and is let be otherwise (it would
    not be read). One bad field never rejects the file."""
    out = []
    for e in events:
        bad = None
        values: dict[str, Any] = {}
        for attr, typ, default in EVENT_FIELDS:
            v = getattr(e, attr)
            try:
                values[attr] = default if v is None else read_as(v, typ)
            except ValueError:
                bad = bad or attr
                values[attr] = default
        code = code_of(values["cat"])  # (every category is looked at, as the typed path does)
        if values["ph"] not in ("X", "i"):
            code = DROP
        if code == NO_CATEGORY and values["ph"] == "i":
            code = KIND_CODE["memory"]
        kind = KINDS[code] if 0 <= code < len(KINDS) else "other" if code == UNKNOWN else None
        a = e.args
        if a is None:
            values["args"] = NO_ARGS
        elif not isinstance(a, LooseArgs):
            values["args"] = NO_ARGS
            bad = bad or "args"
        else:
            args = {}
            for f in FIELDS:
                v = getattr(a, f.attr)
                if f.raw or v is None:
                    args[f.attr] = f.default if v is None else v
                    continue
                try:
                    args[f.attr] = read_as(v, f.type)
                except ValueError:
                    args[f.attr] = f.default
                    if kind in f.kinds:
                        bad = bad or f"args.{f.arg}"
            for attr in ("name", "labels"):
                v = getattr(a, attr)
                args[attr] = v if isinstance(v, str) else ""
            values["args"] = Args(**args)
        if bad is not None and (kind is not None or bad in ("ph", "cat")):
            unreadable[bad] += 1
            continue
        out.append(Event(**values))
    return out
