"""Line by line (``--lines``, ``TorchProfile.lines()``): every operator, kernel and allocated byte on
the line of the user's code that ran it.

Two steps, both vectorized:

- ``finish_line_data`` (at the end of a run): the collected data (``collect.lines.read_lines``)
  still has operators whose innermost line is not known from torch's tree (operator syntax:
  ``x @ w`` makes no Python call). Each is joined to the last line its function's code started
  before the operator did and after its call began (``np.searchsorted`` over the line recorder's
  record, ``collect.torch_line_recorder``, per code object), and its stack gets that line. Frames get ``function_line`` (the first
  line of their code object) and ``cell``. The result is :data:`meta.line_data`: plain lists, it
  is saved with the trace.
- ``line_table`` (on demand): the events table's per-event numbers (self CPU time, device time of
  the kernels each op launched: ``analysis.tree``) summed per line: on the innermost line of the
  op's stack (``self_*``) and on every line of it (``*_total_*``, each op once per line, however
  often a recursive stack holds the line). What has no user line (other threads, code before the
  first user line, kernels no op launched, operators torch's tree did not have) is on one row,
  ``function == OUTSIDE``, so each self column sums to the profile's total.

A trace torch wrote with ``with_stack`` (no ``line_data``) gives what it holds: its
``python_function`` events are named by each function's entry line, so ``line_data_from_frames``
puts each op on the innermost user frame's ``def`` line (``meta.line_data["method"] ==
"function_entries"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, TREE_CODES, kind_mask
from ..collect.lines import CLOCK_SLACK_NS
from .key_averages import averaged_rows
from .loops import loop_iterations

__all__ = ["finish_line_data", "line_table", "line_join", "LINE_COLUMNS", "LINE_KEYS", "OUTSIDE",
           "line_data_from_frames", "merge_lines"]

OUTSIDE = "(outside your code)"

LINE_COLUMNS = ("cell", "file", "line", "function", "function_line", "source", "ops", "self_cpu_us",
                "cpu_total_us", "self_device_us", "device_total_us", "alloc_bytes", "alive_at_end_bytes")

# what names a line (a row of ``line_table``); the rest of LINE_COLUMNS add up across profiles
LINE_KEYS = ("cell", "file", "line", "function", "function_line", "source")

_FRONTEND = [KIND_CODE[k] for k in ("op", "annotation", "other")]


# ----------------------------------------------------------------------------------- the join


def finish_line_data(raw: dict[str, Any]) -> dict[str, Any]:
    """``collect.lines.read_lines``'s data -> the saved form (see the module doc)."""
    codes: dict[int, tuple[str, str, int]] = raw["codes"]
    frames: list[list[Any]] = [list(f) for f in raw["frames"]]
    frame_ids = {tuple(f): i for i, f in enumerate(frames)}
    stacks: list[list[int]] = [list(s) for s in raw["stacks"]]
    stack_ids = {tuple(s): i for i, s in enumerate(stacks)}
    tracer = raw["tracer"]

    calls = raw.get("calls") or {}

    def joined(part: dict[str, Any]) -> np.ndarray:
        stack = np.asarray(part["stack"], dtype=np.int64)
        start = np.asarray(part["start"], dtype=np.int64)
        join = np.asarray(part["join"], dtype=np.int64).copy()
        since = np.asarray(part["since"], dtype=np.int64).copy()
        orphan = np.flatnonzero(_unplaced(part.get("orphan"), calls, len(stack)) & (stack == 0) & (join < 0))
        if len(orphan):
            # no Python call above (autograd's device threads, TorchScript's forks): the line the
            # cell's thread was running then: the innermost call made from a user line, or a line
            # of the user's code that started later, inside it (a TorchScript function's call
            # is no Python call)
            stack = stack.copy()
            stack[orphan], began = _running_then(start[orphan], calls)
            t_time, t_code = tracer["time"], tracer["code"]
            if len(t_time):
                order = np.argsort(t_time, kind="stable")
                pos = np.searchsorted(t_time[order], start[orphan], side="right") - 1
                last = order[np.maximum(pos, 0)]
                use = (pos >= 0) & (t_time[last] >= began - CLOCK_SLACK_NS)
                join[orphan[use]] = t_code[last[use]]
                since[orphan[use]] = began[use]
        # the recorder's clock against torch's (collect.lines' module doc): by the bound, not the
        # start, and the call's start loosened (an orphan's: the same, whose start is its bound)
        bound = np.asarray(part["bound"], dtype=np.int64).copy()
        bound[orphan] = start[orphan]
        line = _join_lines(join, bound, since - CLOCK_SLACK_NS, tracer["code"], tracer["time"], tracer["line"])
        hit = np.flatnonzero(line >= 0)
        if len(hit) == 0:
            return stack
        # one new frame per (code, line), one new stack per (context, frame): a loop per distinct
        # pair, never per event
        pairs, inverse = np.unique(np.stack([stack[hit], join[hit], line[hit]], axis=1), axis=0, return_inverse=True)
        new = np.empty(len(pairs), dtype=np.int64)
        for k, (ctx, cid, ln) in enumerate(pairs.tolist()):
            file, name, _ = codes[cid]
            key = (file, ln, name)
            fid = frame_ids.get(key)
            if fid is None:
                fid = frame_ids[key] = len(frames)
                frames.append([file, ln, name])
            skey = tuple(stacks[ctx]) + (fid,)
            sid = stack_ids.get(skey)
            if sid is None:
                sid = stack_ids[skey] = len(stacks)
                stacks.append(list(skey))
            new[k] = sid
        out = stack.copy()
        out[hit] = new[inverse.reshape(-1)]
        return out

    op_stack = joined(raw["ops"])
    alloc_stack = joined(raw["allocs"])
    alloc_bytes = np.bincount(alloc_stack, weights=np.asarray(raw["allocs"]["bytes"], dtype=np.float64),
                              minlength=len(stacks)) if len(alloc_stack) else np.zeros(len(stacks))
    used = np.flatnonzero(alloc_bytes)
    spans = raw.get("code_spans", {})
    return {
        "version": raw["version"],
        "method": raw["method"],
        "frames": {
            "file": [f[0] for f in frames],
            "line": [int(f[1]) for f in frames],
            "function": [f[2] for f in frames],
            "function_line": _function_lines(frames, codes, spans),
        },
        "cells": dict(raw.get("cells", {})),
        "stacks": stacks,
        "ops": {"external_id": [int(v) for v in raw["ops"]["external_id"]], "stack": op_stack.tolist()},
        "allocs": {"stack": used.tolist(), "bytes": [int(b) for b in alloc_bytes[used]]},
        "notes": _notes(raw),
        "loops": loop_iterations(raw),  # each loop's iterations: the steps of a loop (analysis.growth)
    }


def _unplaced(orphan: Any, calls: dict[str, Any], n: int) -> np.ndarray:
    """Which events have no user line above them and ran where the cell's thread's line is theirs:
    with no Python call above (``True``: autograd's device threads, TorchScript's forks), or
    under Python calls outside the user's code on the cell's thread itself (its thread id: code
    ``exec``'d by the command line, whose frame torch's tracer does not record). Other threads'
    Python code (a data loader's) stays outside."""
    if not orphan:
        return np.zeros(n, dtype=bool)
    flags = np.asarray([o is True for o in orphan], dtype=bool)
    tids = np.asarray([o if (o is not True and o is not False) else -1 for o in orphan], dtype=np.int64)
    if calls and len(calls["thread"]):
        values, counts = np.unique(np.asarray(calls["thread"], dtype=np.int64), return_counts=True)
        main = values[np.argmax(counts)]
        return flags | (tids == main)
    return flags | (tids >= 0)


def _running_then(t: np.ndarray, calls: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """For each time: (the stack, the start) of the innermost call made from a user line that was
    running then on the thread that made most of them (the cell's); (0, 0) where none was."""
    none = np.zeros(len(t), dtype=np.int64)
    if not calls or not len(calls["start"]):
        return none, none.copy()
    start = np.asarray(calls["start"], dtype=np.int64)
    end = np.asarray(calls["end"], dtype=np.int64)
    stack = np.asarray(calls["stack"], dtype=np.int64)
    parent = np.asarray(calls["parent"], dtype=np.int64)
    tid = np.asarray(calls["thread"], dtype=np.int64)
    values, counts = np.unique(tid, return_counts=True)
    main = np.flatnonzero(tid == values[np.argmax(counts)])
    order = main[np.argsort(start[main], kind="stable")]
    at = np.searchsorted(start[order], t, side="right") - 1
    cur = np.where(at >= 0, order[np.maximum(at, 0)], -1)
    for _ in range(256):  # out to the enclosing call while this one had ended (a level per pass)
        ended = (cur >= 0) & (end[np.maximum(cur, 0)] < t)
        if not ended.any():
            break
        cur = np.where(ended, parent[np.maximum(cur, 0)], cur)
    found = cur >= 0
    return np.where(found, stack[np.maximum(cur, 0)], 0), np.where(found, start[np.maximum(cur, 0)], 0)


def _join_lines(join: np.ndarray, start: np.ndarray, since: np.ndarray, t_code: np.ndarray, t_time: np.ndarray,
                t_line: np.ndarray) -> np.ndarray:
    """For each event with a join (the user function's code id, else -1): the line that function
    last started at or before ``start`` and at or after ``since`` (its call's start), else -1."""
    out = np.full(len(join), -1, dtype=np.int64)
    want = np.flatnonzero(join >= 0)
    if len(want) == 0 or len(t_code) == 0:
        return out
    order = np.lexsort((t_time, t_code))  # by code, then time
    codes_sorted, times_sorted, lines_sorted = t_code[order], t_time[order], t_line[order]
    uniq, first = np.unique(codes_sorted, return_index=True)
    bounds = np.append(first, len(codes_sorted))
    which = np.searchsorted(uniq, join[want])
    known = (which < len(uniq)) & (uniq[np.minimum(which, len(uniq) - 1)] == join[want])
    for k in np.unique(which[known]).tolist():  # one searchsorted per code object
        sel = want[known & (which == k)]
        lo, hi = bounds[k], bounds[k + 1]
        pos = np.searchsorted(times_sorted[lo:hi], start[sel], side="right") - 1
        ok = pos >= 0
        at = lo + np.maximum(pos, 0)
        ok &= times_sorted[at] >= since[sel]
        out[sel[ok]] = lines_sorted[at[ok]]
    return out


def _function_lines(frames: list[list[Any]], codes: dict[int, tuple[str, str, int]],
                    spans: dict[int, tuple[int, int]]) -> list[int | None]:
    """Each frame's function's first line: the code object of that file and name whose lines
    hold the frame's line (the innermost, for nested functions of one name)."""
    by_name: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for cid, (file, name, first) in codes.items():
        lo, hi = spans.get(cid, (first, first))
        by_name.setdefault((file, name), []).append((first, max(hi, first)))
    out: list[int | None] = []
    for file, line, name in frames:
        best = None
        for lo, hi in by_name.get((file, name), ()):
            if lo <= line <= hi and (best is None or lo > best):
                best = lo
        out.append(best)
    return out


def _notes(raw: dict[str, Any]) -> list[str]:
    notes = []
    if raw.get("refused"):  # nbprof leaves another tool's tracer alone (collect.line_hook)
        notes.append(f"--lines: no line tracer ({raw['refused']}), so operator syntax (x @ w, h * 2, t[i]) "
                     "counts on the line that called its function; stop the other tracer (a debugger: turn it "
                     "off), or use Python 3.12+, where both run, to place it")
    elif raw.get("replaced"):
        notes.append("--lines: the code set a tracer of its own (sys.settrace: a debugger?), which replaced "
                     "nbprof's line tracer: from there on, operator syntax counts on the line that called its "
                     "function")
    return notes


# ------------------------------------------------------------------------------ the line table


def line_table(events: pd.DataFrame, line_data: dict[str, Any] | None, sources: dict[str, str] | None = None,
               cells: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per user line with anything in it, and one ``OUTSIDE`` row (see the module doc).
    ``sources``: {file: text} for the ``source`` column; ``cells``: {file: "In [n]"}."""
    return line_join(events, line_data, sources, cells)[0]


def line_join(events: pd.DataFrame, line_data: dict[str, Any] | None, sources: dict[str, str] | None = None,
              cells: dict[str, str] | None = None,
              alive: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """``line_table`` and, for each row of ``events``, the position in it of the user line whose
    self columns hold that row (its innermost user line; a runtime call or other row without an
    External id of its own takes its parent's), or -1: what ran outside the user's code (the
    ``OUTSIDE`` row), device work (it is on its launching operator's line through the operator's
    self device time, not by its own row) and rows no line holds. What the ``sync_line`` finding
    reads to put each blocking runtime call on its line. ``alive``: (the memory event rows, bytes) of
    the blocks still allocated at the profile's end (``analysis.memory.alive_at_end``), summed per
    line as ``alive_at_end_bytes`` (on the line that ran the operator that allocated each, the
    ``hot_lines.event_line_rows`` rule; the outside row has the rest)."""
    if not line_data:
        return _empty(), np.full(len(events), -1, dtype=np.int64)
    frames = line_data["frames"]
    stacks: list[list[int]] = line_data["stacks"]
    n_frames, n_stacks = len(frames["file"]), len(stacks)
    kind = events["kind"].cat.codes.to_numpy()
    ext = events["external_id"].to_numpy()
    front = kind_mask(kind, _FRONTEND)

    # each events row -> its stack (0: none), through the External id; rows without one of their
    # own (runtime calls, profiler overhead) take their parent's
    op_ext = np.asarray(line_data["ops"]["external_id"], dtype=np.int64)
    op_stack = np.asarray(line_data["ops"]["stack"], dtype=np.int64)
    row_stack = np.zeros(len(events), dtype=np.int64)
    parent = events["parent"].to_numpy()
    known = np.zeros(len(events), dtype=bool)
    if len(op_ext):
        order = np.argsort(op_ext, kind="stable")
        keys, vals = op_ext[order], op_stack[order]
        at = np.minimum(np.searchsorted(keys, ext), len(keys) - 1)
        known = front & (ext > 0) & (keys[at] == ext)
        row_stack[known] = vals[at[known]]
        for _ in range(64):  # a level of the tree per pass, for every row at once
            climb = np.flatnonzero(~known & (parent >= 0))
            if len(climb) == 0:
                break
            up = parent[climb]
            got = known[up]
            if not got.any():
                break
            row_stack[climb[got]] = row_stack[up[got]]
            known[climb[got]] = True

    # the rows key averages count, as they count them (merged same-name children, compile ranges
    # and other threads' unnamed rows left out), so the columns sum to the profile's totals
    cpu_rows = averaged_rows(events) & kind_mask(kind, TREE_CODES)
    self_cpu = np.where(cpu_rows, events["self_cpu_us"].to_numpy(dtype=np.float64), 0.0)
    self_dev = np.where(cpu_rows, events["self_device_us"].to_numpy(dtype=np.float64), 0.0)
    # device work no op launched: on the outside row, so the column sums to all device time
    work = kind_mask(kind, DEVICE_WORK_CODES)
    unlaunched = float(events["dur_us"].to_numpy(dtype=np.float64)[work].sum() - self_dev.sum())

    # top-level operator calls: an op whose parent is no op of the same stack
    is_op = (kind == KIND_CODE["op"]) & cpu_rows
    par = np.maximum(parent, 0)
    nested = (parent >= 0) & is_op[par] & (row_stack[par] == row_stack)
    top = is_op & ~nested

    per_stack = {
        "ops": np.bincount(row_stack, weights=top.astype(np.float64), minlength=n_stacks),
        "cpu": np.bincount(row_stack, weights=self_cpu, minlength=n_stacks),
        "dev": np.bincount(row_stack, weights=self_dev, minlength=n_stacks),
        "alloc": np.zeros(n_stacks),
    }
    alloc_stack = np.asarray(line_data["allocs"]["stack"], dtype=np.int64)
    if len(alloc_stack):
        np.add.at(per_stack["alloc"], alloc_stack, np.asarray(line_data["allocs"]["bytes"], dtype=np.float64))

    # self: the innermost frame of each stack; total: every distinct frame of it
    lengths = np.fromiter((len(s) for s in stacks), dtype=np.int64, count=n_stacks)
    flat = np.fromiter((f for s in stacks for f in s), dtype=np.int64, count=int(lengths.sum()))
    owner = np.repeat(np.arange(n_stacks), lengths)
    innermost = np.full(n_stacks, n_frames, dtype=np.int64)  # n_frames: the outside row
    has = lengths > 0
    innermost[has] = flat[np.cumsum(lengths)[has] - 1]
    pairs = np.unique(np.stack([owner, flat], axis=1), axis=0) if len(flat) else np.zeros((0, 2), np.int64)

    def self_sum(values: np.ndarray) -> np.ndarray:
        return np.bincount(innermost, weights=values, minlength=n_frames + 1)

    def total_sum(values: np.ndarray) -> np.ndarray:
        out = np.bincount(pairs[:, 1], weights=values[pairs[:, 0]], minlength=n_frames + 1) if len(pairs) else \
            np.zeros(n_frames + 1)
        out[n_frames] = values[0] if n_stacks else 0.0
        return out

    cpu_self, dev_self = self_sum(per_stack["cpu"]), self_sum(per_stack["dev"])
    dev_self[n_frames] += max(unlaunched, 0.0)
    cpu_total, dev_total = total_sum(per_stack["cpu"]), total_sum(per_stack["dev"])
    dev_total[n_frames] = dev_self[n_frames]
    table = pd.DataFrame({
        "file": pd.Series(list(frames["file"]) + [None], dtype=object),
        "line": pd.array(list(frames["line"]) + [None], dtype="Int64"),
        "function": pd.Series(list(frames["function"]) + [OUTSIDE], dtype=object),
        "function_line": pd.array(list(frames["function_line"]) + [None], dtype="Int64"),
        "ops": self_sum(per_stack["ops"]).round().astype(np.int64),
        "self_cpu_us": cpu_self,
        "cpu_total_us": cpu_total,
        "self_device_us": dev_self,
        "device_total_us": dev_total,
        "alloc_bytes": self_sum(per_stack["alloc"]).round().astype(np.int64),
    })
    cells = {**line_data.get("cells", {}), **(cells or {})}
    table.insert(0, "cell", pd.Series([cells.get(f) if f is not None else None for f in table["file"]], dtype=object))
    table.insert(5, "source", pd.Series(_sources(table, sources or {}), dtype=object))
    anything = (table[["ops", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us",
                       "alloc_bytes"]] != 0).any(axis=1)
    anything.iloc[-1] = True
    table = _in_source_order(table[anything.to_numpy()], cells)
    # each events row: its stack's innermost frame (the table's index until here), then that
    # frame's position once filtered and sorted; the outside row is no line of the user's code
    position = np.full(n_frames + 1, -1, dtype=np.int64)
    position[table.index.to_numpy()] = np.arange(len(table))
    position[n_frames] = -1
    rows = position[innermost[row_stack]] if n_stacks else np.full(len(events), -1, dtype=np.int64)
    rows[work] = -1
    table = table.reset_index(drop=True)
    left: Any = np.zeros(len(table))
    if alive is not None and len(alive[0]):
        from .hot_lines import climbed_line_rows

        at = climbed_line_rows(rows, parent)[alive[0]]
        left = np.bincount(np.where(at >= 0, at, len(table) - 1), weights=alive[1].astype(np.float64),
                           minlength=len(table))
    table["alive_at_end_bytes"] = left.round().astype(np.int64)
    return table, rows


def _sources(table: pd.DataFrame, sources: dict[str, str]) -> list[str]:
    split = {f: text.splitlines() for f, text in sources.items()}
    out = []
    for f, line in zip(table["file"].tolist(), table["line"].tolist()):
        lines = split.get(f) if f is not None else None
        out.append(lines[line - 1] if lines and line is not pd.NA and 0 < line <= len(lines) else "")
    return out


def _in_source_order(table: pd.DataFrame, cells: dict[str, str]) -> pd.DataFrame:
    """Cells by their number, then files by name, lines in order; the outside row last."""
    def cell_number(name: Any) -> float:
        try:
            return float(str(name).split("[", 1)[1].rstrip("]"))
        except (IndexError, ValueError):
            return float("inf")

    key = pd.DataFrame({
        "outside": table["file"].isna().to_numpy(),
        "not_cell": table["cell"].isna().to_numpy(),
        "cell": [cell_number(c) for c in table["cell"]],
        "file": table["file"].fillna("").to_numpy(),
        "line": table["line"].fillna(0).to_numpy(dtype=np.int64),
    })
    order = key.sort_values(["outside", "not_cell", "cell", "file", "line"], kind="stable").index.to_numpy()
    return table.iloc[order]


def merge_lines(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Several profiles' ``line_table`` (a folder's ranks) summed per line (``LINE_KEYS``): ops,
    times and bytes added, the outside rows into one; in source order, the outside row last.
    Each self column still sums to the profiles' total."""
    parts = [t for t in tables if len(t)]
    if not parts:
        return _empty()
    keys = list(LINE_KEYS)
    values = [c for c in LINE_COLUMNS if c not in LINE_KEYS]
    both = pd.concat([t[list(LINE_COLUMNS)] for t in parts], ignore_index=True)
    # None / NA keys (a file's cell, the outside row's file and line) are keys too
    table = both.groupby(keys, dropna=False, sort=False)[values].sum().reset_index()
    for c in ("ops", "alloc_bytes", "alive_at_end_bytes"):
        table[c] = table[c].astype(np.int64)
    for c in ("line", "function_line"):
        table[c] = table[c].astype("Int64")
    for c in ("cell", "file", "function", "source"):
        table[c] = table[c].astype(object).where(table[c].notna(), None)
    return _in_source_order(table[list(LINE_COLUMNS)], {}).reset_index(drop=True)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({
        "cell": pd.Series([], dtype=object), "file": pd.Series([], dtype=object),
        "line": pd.Series([], dtype="Int64"), "function": pd.Series([], dtype=object),
        "function_line": pd.Series([], dtype="Int64"), "source": pd.Series([], dtype=object),
        "ops": pd.Series([], dtype=np.int64), "self_cpu_us": pd.Series([], dtype=np.float64),
        "cpu_total_us": pd.Series([], dtype=np.float64), "self_device_us": pd.Series([], dtype=np.float64),
        "device_total_us": pd.Series([], dtype=np.float64), "alloc_bytes": pd.Series([], dtype=np.int64),
        "alive_at_end_bytes": pd.Series([], dtype=np.int64),
    })


# ---------------------------------------------------------------- torch's own with_stack traces


def line_data_from_frames(events: pd.DataFrame, code_names: dict[str, str]) -> dict[str, Any] | None:
    """``line_data`` of a trace torch wrote with ``with_stack``: each op's stack is the user frames
    (``python_function`` events, named "file(line): function" by the function's entry line)
    around it, up to the cell that ran it. None when the trace has no Python frames. A loop per
    distinct innermost frame (as ``stacks.op_stacks``), never per event."""
    from .stacks import _FRAME, innermost_frames, is_user_frame

    cand = innermost_frames(events)
    if cand is None:
        return None
    kind = events["kind"].cat.codes.to_numpy()
    names = events["name"].astype(str).to_numpy()
    parent = events["parent"].to_numpy()
    ext = events["external_id"].to_numpy()
    rows = np.flatnonzero(kind_mask(kind, _FRONTEND) & (ext > 0) & (cand >= 0))
    cells = {**_shell_cells(), **code_names}
    frame_ids: dict[tuple[str, int, str], int] = {}
    stack_ids: dict[tuple[int, ...], int] = {(): 0}

    def stack_of(f: int) -> int:
        chain: list[int] = []
        while f >= 0:
            m = _FRAME.match(names[f])
            if m is not None and is_user_frame(names[f]):
                key = (m.group("file"), int(m.group("line")), m.group("function"))
                chain.append(frame_ids.setdefault(key, len(frame_ids)))
                if key[0] in cells and key[2] == "<module>":  # what ran the cell is the kernel
                    break
            f = parent[f]
        return stack_ids.setdefault(tuple(reversed(chain)), len(stack_ids))

    uniq, inverse = np.unique(cand[rows], return_inverse=True)
    ids = np.asarray([stack_of(int(f)) for f in uniq], dtype=np.int64)
    if not frame_ids:
        return None
    frames = sorted(frame_ids, key=frame_ids.__getitem__)
    stacks = [list(s) for s in sorted(stack_ids, key=stack_ids.__getitem__)]
    files = [f[0] for f in frames]
    return {
        "version": 1,
        "method": "function_entries",
        "frames": {"file": files, "line": [f[1] for f in frames], "function": [f[2] for f in frames],
                   # a frame's line is its function's first line
                   "function_line": [f[1] for f in frames]},
        "cells": {f: cells[f] for f in files if f in cells},
        "stacks": stacks,
        "ops": {"external_id": ext[rows].tolist(), "stack": ids[inverse.reshape(-1)].tolist()},
        "allocs": {"stack": [], "bytes": []},
        "notes": ["lines from torch's Python frames: each is a function's entry line (its def), not the line "
                  "inside it that ran the operator (record with %%torchprof --lines for that); no memory per line"],
    }


def _shell_cells() -> dict[str, str]:
    """The running IPython's own table of compiled cells ("In [n]" by file name), if any."""
    from ..collect.user_code import UserCode, current_shell

    return UserCode(current_shell()).cell_names()
