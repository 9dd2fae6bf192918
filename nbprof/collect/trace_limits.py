"""What a trace file may make the reader do, and what it holds that cannot be right.

A trace is data, never code, and it may come from anywhere (a colleague's cluster run, a file
attached to a bug report). What it can make the reader (``collect/chrome_trace.py``) do is
bounded, and what it holds that cannot be right is said, never shown as a number:

- Size. At most ``max_bytes`` of JSON are read (default :data:`DEFAULT_MAX_BYTES`, 4 GiB: ~11 M
  events as torch's writer lays them out; ``load_trace(path, max_bytes=...)`` or the environment
  variable ``NBPROF_MAX_TRACE_BYTES`` raise it). A ``.gz`` file is decompressed as it is read, in
  slices, never whole into memory (:class:`Gunzip`); with the default limit, one that expands
  more than :data:`_BOMB_RATIO` times (real traces: 9-45x; a compression bomb: up to ~1,000x) is
  refused once :data:`_BOMB_FLOOR` has come out, in well under a second.
- Structure. JSON nested deeper than Python's recursion limit, invalid UTF-8 (read as U+FFFD,
  counted in a note), integers beyond int64 (an id: read as "none", counted; a pid/tid: an id of
  its own, counted), values of another type (``trace_schema.checked_events``): a note or one
  ``TraceError`` line naming the file, never a raw ``RecursionError``, ``UnicodeDecodeError`` or
  ``OverflowError``.
- Times and rows (:func:`plausible_rows`, :func:`rows_together`, :func:`distinct_rows`:
  vectorized, ~7 ms of a 700k-event trace's 4 s). Events without a ``ts`` or ``name``, with a
  ``ts`` out of range (not a number; beyond what int64 ns hold: ns written where µs belong), a
  negative ``dur`` or one longer than a day are left out; a few events more than a day away from
  all the others are left out; events that span more than a day are kept, with a note asking
  whether they are ns; exact duplicates (every field the reader reads equal) are counted once.
  Each is one note in ``TraceMeta.reader_notes``, with its count; the report shows them first
  among its notes. Each check returns the rows kept (None: all) and its notes. The reader counts
  the device records (kernels, memcpys, memsets) left out for a ``ts`` of 0, a ``ts`` more than a
  day away or a negative ``dur`` in ``TraceMeta.left_out_work``: a device clock gone wrong, which
  the clock_skew finding reports.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import OptionError, TraceError
from ..format import fmt_long_span, plural

__all__ = ["DEFAULT_MAX_BYTES", "MAX_BYTES_ENV", "TraceLimit", "NO_LIMIT", "max_trace_bytes", "Gunzip",
           "plausible_rows", "rows_together", "distinct_rows", "profiled_span"]

_HEAD_BYTES = 1 << 18  # what is decompressed before the start of the document is checked (a reader's slice)

# Plausible times (µs, as the file writes them; see the module docstring). ts * 1000 must be an
# int64 of ns, with room for a span between the earliest and the latest: [-73, +146) years.
_TS_MIN_US = -(2.0**61) / 1000.0
_TS_MAX_US = 2.0**62 / 1000.0
_DAY_US = 86_400e6
_DAY_NS = 86_400 * 10**9


# The bounds on reading (see the module docstring). Gzip'd traces expand 9-15x (the recorded H100
# traces), torch 1.9's 44x (tests/data/wild); deflate's most is ~1,030x, which is what bombs are made of.
DEFAULT_MAX_BYTES = 4 << 30
MAX_BYTES_ENV = "NBPROF_MAX_TRACE_BYTES"
_BOMB_RATIO = 200
_BOMB_FLOOR = 64 << 20
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class TraceLimit:
    """How much JSON one read may produce (``bytes``), and whether a compressed file's expansion
    is checked: only under the default limit (a limit the user gave says they trust the file)."""

    bytes: int
    default: bool = False

    def how_to_raise(self) -> str:
        more = size_text(max(2 * self.bytes, 8 << 30), unit="")
        return (f'if it is a trace, read it with load_trace(path, max_bytes="{more}") or the environment variable '
                f"{MAX_BYTES_ENV}={more}")


NO_LIMIT = TraceLimit(1 << 62)  # a trace nbprof itself just had torch write (a live profile)


def max_trace_bytes(max_bytes: int | str | None = None) -> TraceLimit:
    """The limit of one read: ``max_bytes`` (bytes, or text such as "8G"), else
    ``$NBPROF_MAX_TRACE_BYTES``, else :data:`DEFAULT_MAX_BYTES`. A bad value: an OptionError."""
    if max_bytes is None:
        env = os.environ.get(MAX_BYTES_ENV, "").strip()
        if not env:
            return TraceLimit(DEFAULT_MAX_BYTES, default=True)
        value: Any = env
        where = MAX_BYTES_ENV
    else:
        value, where = max_bytes, "max_bytes"
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and (m := _SIZE.fullmatch(value)):
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n is None or n <= 0:
        raise OptionError(f'{where} must be a number of bytes, such as 8000000000 or "8G"; got {value!r}')
    return TraceLimit(n)


def size_text(n: float, unit: str = "B") -> str:
    """Bytes in binary units: "4G" (unit="") or "4 GiB"."""
    for prefix in ("T", "G", "M", "K"):
        scale = _UNITS[prefix.lower()]
        if n >= scale:
            value = f"{n / scale:.3g}"
            return f"{value}{prefix}" if not unit else f"{value} {prefix}i{unit}"
    return f"{int(n)}" if not unit else f"{int(n)} {unit}"


class Gunzip:
    """``read(n)`` over a gzip file's decompressed bytes, decompressed as they are asked for (never
    the whole stream in one object) and within a :class:`TraceLimit`. Reads every member of a
    multi-member file, as ``gzip`` does; zlib checks each member's CRC and length."""

    def __init__(self, f: Any, source: str, limit: TraceLimit) -> None:
        self.f, self.source, self.limit = f, source, limit
        self.z = zlib.decompressobj(wbits=31)
        self.in_member = False  # inside a member whose end has not been read
        self.pending = b""  # compressed bytes read from the file and not decompressed yet
        self.read_in = 0  # compressed bytes read from the file
        self.out = 0  # decompressed bytes given out
        self.done = False

    def read(self, n: int) -> bytes:
        parts: list[bytes] = []
        got = 0
        while got < n and not self.done:
            if not self.pending:
                self.pending = self.f.read(1 << 16)
                self.read_in += len(self.pending)
                if not self.pending:
                    self.done = True
                    if self.in_member or self.read_in == 0:
                        raise TraceError(f"{self.source}: gzip data is truncated or corrupt (the file ends inside "
                                         "its compressed stream: was it fully written?)")
                    break
            if not self.in_member:  # between members: zero padding is let be, as gzip lets it
                self.pending = self.pending.lstrip(b"\0")
                if not self.pending:
                    continue
                self.in_member = True
            try:
                data = self.z.decompress(self.pending, n - got)
            except zlib.error as e:
                raise TraceError(f"{self.source}: gzip data is truncated or corrupt ({e})") from None
            if self.z.eof:  # this member is whole; what follows is the next one
                # (all of it in unused_data: unconsumed_tail may hold the same bytes again)
                self.pending = self.z.unused_data
                self.z = zlib.decompressobj(wbits=31)
                self.in_member = False
            else:
                self.pending = self.z.unconsumed_tail
            if data:
                parts.append(data)
                got += len(data)
                self._count(len(data))
        return b"".join(parts)

    def _count(self, more: int) -> None:
        self.out += more
        limit = self.limit
        if self.out > limit.bytes:
            raise TraceError(f"{self.source}: more than {size_text(limit.bytes)} of JSON once decompressed, the most "
                             f"nbprof reads from one file; {limit.how_to_raise()}")
        consumed = max(self.read_in - len(self.pending), 1)
        if limit.default and self.out > _BOMB_FLOOR and self.out > _BOMB_RATIO * consumed:
            raise TraceError(f"{self.source}: expands more than {_BOMB_RATIO}x ({size_text(self.out)} of JSON from "
                             f"the first {size_text(consumed)}; gzip'd traces expand 9-45x): a compression bomb? "
                             f"Not read; {limit.how_to_raise()}")

    def read_all(self) -> bytes:
        """The whole stream, for the plain path; refused at once when it does not start as a JSON
        document does (``{`` or ``[``), however long it is."""
        first = self.read(_HEAD_BYTES)
        lead = first.lstrip()[:1]
        if lead not in (b"{", b"[") and (lead or not first):  # (only blanks so far: read on, within bounds)
            raise TraceError(f"{self.source}: not a chrome trace (decompressed, it does not start with '{{' or '[')")
        parts = [first]
        while more := self.read(1 << 22):
            parts.append(more)
        return b"".join(parts)


# -- what cannot be right: left out, and said ---------------------------------------------------


def plausible_rows(ts: np.ndarray, dur: np.ndarray, named: np.ndarray) -> tuple[np.ndarray | None, list[str]]:
    """The rows whose ``ts``, ``dur`` and name an event can have (None: all of them). A trace
    that passes costs four comparisons per event (NaN, a missing ``ts``, fails them all)."""
    notes: list[str] = []
    ok = (ts >= _TS_MIN_US) & (ts < _TS_MAX_US) & (dur >= 0.0) & (dur <= _DAY_US) & named
    if ok.all():
        return None, notes
    no_ts = np.isnan(ts)
    bad_ts = ~no_ts & ~((ts >= _TS_MIN_US) & (ts < _TS_MAX_US))
    no_name = ~(no_ts | bad_ts) & ~named
    rest = ~(no_ts | bad_ts | no_name)
    bad_dur = rest & ~(dur >= 0.0)
    long = rest & (dur > _DAY_US)
    if no_ts.any():
        notes.append(f"{_events(no_ts.sum())} without a `ts`: left out")
    if bad_ts.any():
        notes.append(
            f"{_events(bad_ts.sum())} with a `ts` nbprof cannot place (e.g. {ts[bad_ts][0]:g}; beyond 146 years "
            "of µs, or not a number: nanoseconds where chrome traces have µs?): left out")
    if no_name.any():
        notes.append(f"{_events(no_name.sum())} without a `name`: left out")
    if bad_dur.any():
        notes.append(f"{_events(bad_dur.sum())} with a negative `dur` (e.g. {dur[bad_dur][0]:g}): left out")
    if long.any():
        notes.append(f"{_events(long.sum())} lasting longer than a day (`dur` up to {dur[long].max():g} µs: "
                 "nanoseconds where chrome traces have µs?): left out")
    return ok, notes


def rows_together(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray | None, list[str]]:
    """When the events span more than a day: the largest group of them with no gap of more
    than a day, if it holds most of them (a few strays, e.g. a ``ts`` of 0 among real ones, are
    left out); else all, and a note asking whether the times are ns. None: keep every row."""
    notes: list[str] = []
    n = len(start_ns)
    if n == 0 or int(end_ns.max()) - int(start_ns.min()) <= _DAY_NS:
        return None, notes
    order = np.argsort(start_ns, kind="stable")
    reach = np.maximum.accumulate(end_ns[order])
    group = np.zeros(n, dtype=np.int64)
    group[1:] = np.cumsum(start_ns[order][1:] - reach[:-1] > _DAY_NS)
    counts = np.bincount(group)
    largest = int(counts.argmax())
    keep: np.ndarray | None = None
    if len(counts) > 1 and 2 * counts[largest] > n:
        keep = np.empty(n, dtype=bool)
        keep[order] = group == largest
        away = ~keep
        notes.append(
            f"{_events(away.sum())} more than a day away from the other {int(counts[largest]):,} (e.g. at `ts` "
            f"{start_ns[away][0] / 1000:g} µs, the others from {start_ns[keep].min() / 1000:g}): left out")
        start_ns, end_ns = start_ns[keep], end_ns[keep]
    span_us = (int(end_ns.max()) - int(start_ns.min())) / 1000
    if span_us > _DAY_US:
        notes.append(f"the events span {fmt_long_span(span_us)}, more than a profile runs: are `ts` and `dur` "
                 "nanoseconds? Chrome traces are in µs (shown as written)")
    return keep, notes


def distinct_rows(columns: list[np.ndarray]) -> tuple[np.ndarray | None, list[str]]:
    """Rows that do not repeat an earlier row in every column read (exact duplicates, e.g. a
    trace joined to itself, counted once), or None when no row does. Duplicates share their
    start: one stable argsort of the starts (timsort, on a file mostly in time order: ~5 ms
    at 700k events) finds the rows that share theirs, usually none at ns resolution (at whole
    µs, ~6 %: ~55 ms); those are hashed on every column, grouped by hash, and each compared in
    every column with the first of its group (a trace joined to itself, 1.4 M rows: ~2 s)."""
    notes: list[str] = []
    n = len(columns[0])
    if n < 2:
        return None, notes
    start = columns[2]
    order = np.argsort(start, kind="stable")
    sorted_start = start[order]
    same = sorted_start[1:] == sorted_start[:-1]
    del sorted_start
    if not same.any():
        return None, notes
    shared = np.zeros(n, dtype=bool)
    shared[1:] = same
    shared[:-1] |= same
    rows = np.sort(order[shared])  # the rows that share their start with another row
    del order, shared, same
    values = [c[rows].view(np.int64) if c.dtype.kind == "f" else c[rows].astype(np.int64) for c in columns]
    h = np.zeros(len(rows), dtype=np.uint64)
    for i, v in enumerate(values):  # rotate, then mix in the column (wrapping products)
        h = (h << np.uint64(7)) | (h >> np.uint64(57))
        h ^= v.view(np.uint64) * np.uint64(_HASH_FACTORS[i % len(_HASH_FACTORS)])
    # group by hash (file order within a group); a row equal in every column to its group's
    # first row repeats it (a row that only shares the hash is kept)
    by_hash = np.argsort(h, kind="stable")
    grouped = h[by_hash]
    leads = np.ones(len(rows), dtype=bool)
    leads[1:] = grouped[1:] != grouped[:-1]
    del grouped, h
    if leads.all():
        return None, notes
    lead = by_hash[np.maximum.accumulate(np.where(leads, np.arange(len(rows)), 0))]
    repeats = ~leads
    for v in values:
        repeats &= v[by_hash] == v[lead]
    if not repeats.any():
        return None, notes
    keep = np.ones(n, dtype=bool)
    keep[rows[by_hash[repeats]]] = False
    k = n - int(keep.sum())
    notes.append(f"{k:,} exact duplicate{'s' if k != 1 else ''} (an event repeated, every field nbprof reads "
                 "equal): counted once")
    return keep, notes


def profiled_span(span: list[tuple[float, float]], start_ns: np.ndarray,
                  end_ns: np.ndarray) -> tuple[tuple[float, float] | None, list[str]]:
    """The profiler's own span (its "Trace" event: ts, dur in µs), when it is one a profile can
    have (it moves the time origin: a stray one would move every time)."""
    notes: list[str] = []
    if not span:
        return None, notes
    ts, dur = span[0]
    if (_TS_MIN_US <= ts < _TS_MAX_US) and (0.0 <= dur <= _DAY_US):
        if len(start_ns) == 0 or (int(start_ns.min()) - ts * 1000 <= _DAY_NS
                                  and (ts + dur) * 1000 - int(end_ns.max()) <= _DAY_NS):
            return (ts, dur), notes
    notes.append(f"the profiler's span (its \"Trace\" event: `ts` {ts:g}, `dur` {dur:g}) is not one a "
                 "profile can have: not used")
    return None, notes


def _events(count: Any) -> str:
    return plural(int(count), "event")


# odd 64-bit constants (splitmix64's and xxhash's): each column's factor in the duplicate hash
_HASH_FACTORS = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xC2B2AE3D27D4EB4F,
                 0x165667B19E3779F9, 0x27D4EB2F165667C5)


