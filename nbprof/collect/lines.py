"""``--lines``: read, from torch's in-process event tree, which line of the user's code ran each
operator and allocation, before the results are saved (the trace file does not carry it).

torch's tree (``kineto_results.experimental_event_tree()``) holds every Python call the Python
tracer saw, each with its caller frame (file, line, function), and under them the operators
(whose ``correlation_id`` is the trace's External id, the events table's ``external_id``) and
allocations. One walk gives each operator its *context*: the user's lines on the Python stack
above it, outermost first (a call's caller line, kept when that file is the user's: a cell or a
user file, ``user_code.UserCode``). Where the innermost Python event above an operator is a call
*of* a user function (no Python call between: ``x @ w``), the line inside that function is not in
the tree; the operator gets a *join* (the function's code, the call's start) that
``analysis.lines.finish_line_data`` resolves with the line recorder's record
(``collect.torch_line_recorder``), vectorized.

The result (``read_lines``' dict, plain lists: after ``finish_line_data``, ``meta.line_data``,
which travels in the saved trace) holds every operator's stack, the frames and stacks interned, and the bytes allocated per stack. Calls that
began before the profile started (the frames around the cell: the kernel, a test harness, a
script calling IPython) add no line: the profile is of the cell.

The join compares two clocks: the recorder's ``time.time_ns()`` and torch's event times, which
torch converts from its own fast clock (the TSC) with a line it fits at the start and the end of
the profile. They disagree by up to a few tenths of a microsecond, changing from run to run, and
the gaps the join reads are that small: measured on torch 2.13 (``def g2(x): y = x @ x; return y *
2`` on 4 x 4 tensors, five profiles), a function's first line starts -0.03 to +0.08 µs after
torch's record of its call, its operator 0.6 µs after that line, the operator takes 1.2 µs and the
next line starts 0.3 µs after it ends. Compared exactly, 70 of a first profile's 100 operators here
fell on the calling line. So each joined event is placed by its *bound*: the middle of its
outermost operator (where the frame surely is: its line started before the operator did, the
next one starts after it ends), at most ``CLOCK_SLACK_NS`` past its start; and the call's start is
loosened by ``CLOCK_SLACK_NS`` (``analysis.lines``): the call's earlier line events, if any, are
its previous call's, which had to finish its last line and return before this call began.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .torch_line_recorder import TorchLineRecorder
from .user_code import UserCode, current_shell

__all__ = ["read_lines", "LINE_DATA_VERSION", "CLOCK_SLACK_NS", "collect_sources", "checked_lines"]

LINE_DATA_VERSION = 1

# how far the recorder's clock and torch's may disagree (the module doc): several times what they
# were seen to, and no more than a line with an operator takes
CLOCK_SLACK_NS = 1000


def read_lines(results: Any, tracer: TorchLineRecorder, user: UserCode, entered_ns: int) -> dict[str, Any]:
    """The ``--lines`` data of a stopped profile (``results``: its kineto results; ``entered_ns``:
    ``time.time_ns()`` once the profiler had started). Returns the :data:`meta.line_data` dict."""
    from torch._C._profiler import _EventType

    began = time.perf_counter()
    roots = results.experimental_event_tree()
    PYCALL, PYCCALL, OP, ALLOC = _EventType.PyCall, _EventType.PyCCall, _EventType.TorchOp, _EventType.Allocation

    # frames: (file, line, function) of the user's lines, interned; stacks: tuples of frame ids
    frame_ids: dict[tuple[str, int, str], int] = {}
    stack_ids: dict[tuple[int, ...], int] = {(): 0}
    resolve_cache: dict[str, str | None] = {}

    def frame_of(state: Any) -> int:
        name = state.file_name
        full = resolve_cache.get(name, "")  # "": not looked up yet (a resolved name is a path or None)
        if full == "":
            full = resolve_cache[name] = user.resolve(name)
        if full is None:
            return -1
        key = (full, state.line_number, state.function_name)
        fid = frame_ids.get(key)
        if fid is None:
            fid = frame_ids[key] = len(frame_ids)
        return fid

    # user functions' own code, for the join: (file, first line, name) -> the code object's id
    code_keys: dict[tuple[str, int, str], int] = {}
    for cid, code in tracer.code_objects.items():
        code_keys[(user.canonical(code.co_filename), code.co_firstlineno, code.co_name)] = cid

    op_corr: list[int] = []
    op_ctx: list[int] = []
    op_join: list[int] = []  # the code id of the user function that ran it directly, or -1
    op_since: list[int] = []  # that call's start (ns)
    op_start: list[int] = []
    op_bound: list[int] = []  # the time by which its line had surely started (the module doc)
    alloc_ctx: list[int] = []
    alloc_join: list[int] = []
    alloc_since: list[int] = []
    alloc_start: list[int] = []
    alloc_bound: list[int] = []
    alloc_bytes: list[int] = []
    # True: no Python call above it (another thread: autograd's device threads); an int: no user
    # line above it, run by that thread (a script exec'd by nbprof's command line); False: placed
    op_orphan: list[Any] = []
    alloc_orphan: list[bool] = []
    # the calls made from the user's lines: (start, end, stack, enclosing one, thread), for orphans
    iv_start: list[int] = []
    iv_end: list[int] = []
    iv_stack: list[int] = []
    iv_parent: list[int] = []
    iv_tid: list[int] = []
    stack_tuples: list[tuple[int, ...]] = [()]
    n_events = 0

    # depth-first, iteratively: (node, context stack id, join code id, join since, enclosing call
    # from a user line, whether a Python call is above, the outermost operator's bound below that
    # call or -1)
    todo: list[tuple[Any, int, int, int, int, bool, int]] = [(r, 0, -1, 0, -1, False, -1) for r in reversed(roots)]
    pop, push = todo.pop, todo.append
    while todo:
        node, ctx, join, since, iv, py, bound = pop()
        n_events += 1
        tag = node.tag
        if tag == OP:
            op_corr.append(node.correlation_id)
            op_ctx.append(ctx)
            op_join.append(join)
            op_since.append(since)
            op_start.append(node.start_time_ns)
            if bound < 0:  # the outermost: the operators and allocations inside it share its line
                bound = node.start_time_ns + min(CLOCK_SLACK_NS, max(0, (node.end_time_ns - node.start_time_ns) // 2))
            op_bound.append(bound)
            # no user line above it: where it ran decides (the cell's thread, or another one)
            op_orphan.append(True if not py else (node.start_tid if ctx == 0 and join < 0 else False))
            children = node.children
        elif tag == PYCALL or tag == PYCCALL:
            children = node.children
            if not children:  # most calls (builtins, small helpers) run no operator: nothing to read
                continue
            fields = node.extra_fields
            start = node.start_time_ns
            py = True
            bound = -1
            if start >= entered_ns:
                fid = frame_of(fields.caller)
                if fid >= 0:
                    key = stack_tuples[ctx] + (fid,)
                    sid = stack_ids.get(key)
                    if sid is None:
                        sid = stack_ids[key] = len(stack_tuples)
                        stack_tuples.append(key)
                    ctx = sid
                    iv_start.append(start)
                    iv_end.append(node.end_time_ns)
                    iv_stack.append(sid)
                    iv_parent.append(iv)
                    iv_tid.append(node.start_tid)
                    iv = len(iv_start) - 1
            join = -1
            if tag == PYCALL:
                site = fields.callsite
                name = site.file_name
                full = resolve_cache.get(name, "")
                if full == "":
                    full = resolve_cache[name] = user.resolve(name)
                if full is not None:
                    join = code_keys.get((full, site.line_number, site.function_name), -1)
                    since = start
        elif tag == ALLOC:
            size = node.extra_fields.alloc_size
            if size > 0:
                alloc_ctx.append(ctx)
                alloc_join.append(join)
                alloc_since.append(since)
                alloc_start.append(node.start_time_ns)
                alloc_bound.append(bound if bound >= 0 else node.start_time_ns)
                alloc_bytes.append(size)
                alloc_orphan.append(not py)
            continue
        else:
            children = node.children
        if children:
            for child in reversed(children):
                push((child, ctx, join, since, iv, py, bound))

    frames = sorted(frame_ids.items(), key=lambda kv: kv[1])
    files = {k[0] for k in frame_ids} | {user.canonical(c.co_filename) for c in tracer.code_objects.values()}
    return {
        "version": LINE_DATA_VERSION,
        "method": "tracer" if tracer.refused is None else "calls",
        "frames": [[f, line, fn] for (f, line, fn), _ in frames],
        "stacks": [list(s) for s in stack_tuples],
        "ops": {"external_id": op_corr, "stack": op_ctx, "join": op_join, "since": op_since, "start": op_start,
                "bound": op_bound, "orphan": op_orphan},
        "allocs": {"stack": alloc_ctx, "join": alloc_join, "since": alloc_since, "start": alloc_start,
                   "bound": alloc_bound, "bytes": alloc_bytes, "orphan": alloc_orphan},
        "calls": {"start": iv_start, "end": iv_end, "stack": iv_stack, "parent": iv_parent, "thread": iv_tid},
        "tracer": {"time": np.frombuffer(tracer.times, dtype=np.int64) if len(tracer.times) else np.zeros(0, np.int64),
                   "code": np.frombuffer(tracer.codes, dtype=np.int64) if len(tracer.codes) else np.zeros(0, np.int64),
                   "line": np.frombuffer(tracer.lines, dtype=np.int64) if len(tracer.lines) else np.zeros(0, np.int64)},
        "codes": {cid: (user.canonical(c.co_filename), c.co_name, c.co_firstlineno)
                  for cid, c in tracer.code_objects.items()},
        "code_spans": {cid: _code_span(c) for cid, c in tracer.code_objects.items()},
        "cells": {f: user.cell_name(f) for f in files if user.cell_name(f)},
        "sources": collect_sources(files, user),
        "refused": tracer.refused,
        "replaced": tracer.replaced,
        "walk_s": time.perf_counter() - began,
        "tree_events": n_events,
    }


def _code_span(code: Any) -> tuple[int, int]:
    """(first line, last line) of a code object's own lines (nested functions excluded)."""
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return (code.co_firstlineno, max(lines) if lines else code.co_firstlineno)


def collect_sources(files: Any, user: UserCode | None = None) -> dict[str, str]:
    """The text of each file as it was when the profile ran (a cell as typed, from the running
    shell's history and ``linecache``: ``UserCode.source``); files that cannot be read are left out."""
    user = user if user is not None else UserCode(current_shell())
    out = {}
    for f in files:
        text = user.source(f)
        if text:
            out[f] = text
    return out


# ------------------------------------------------------------------------- read from a file


def checked_lines(obj: Any) -> tuple[dict[str, Any] | None, dict[str, str], str | None]:
    """A trace's ``nbprofLines`` -> (line_data, sources, None), or (None, {}, what is wrong): a
    file's line table is used only when every index in it points where it should."""
    try:
        data, sources = obj["line_data"], obj.get("sources") or {}
        frames = data["frames"]
        n = len(frames["file"])
        columns = ("file", "line", "function", "function_line")
        if any(len(frames[c]) != n for c in columns):
            return None, {}, "frames of unequal lengths"
        if not all(isinstance(f, str) for f in frames["file"]) or not all(
                isinstance(v, int) and v > 0 for v in frames["line"]):
            return None, {}, "a frame's file or line is not one"
        stacks = data["stacks"]
        if not stacks or stacks[0] != [] or not all(
                isinstance(s, list) and all(isinstance(f, int) and 0 <= f < n for f in s) for s in stacks):
            return None, {}, "a stack names a frame that is not there"
        for part in ("ops", "allocs"):
            keys = ("external_id", "stack") if part == "ops" else ("stack", "bytes")
            a, b = data[part][keys[0]], data[part][keys[1]]
            if len(a) != len(b) or not all(isinstance(v, int) for v in a) or not all(isinstance(v, int) for v in b):
                return None, {}, f"{part} of unequal lengths or not integers"
            stack_list = b if part == "ops" else a
            if any(not 0 <= s < len(stacks) for s in stack_list):
                return None, {}, f"{part} name a stack that is not there"
        if not isinstance(sources, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in sources.items()):
            return None, {}, "sources are not text"
        cells = data.get("cells") or {}
        # a cell's name is shown as written (the Source tab, the findings' "In [3]"): text only
        if not isinstance(cells, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in cells.items()):
            return None, {}, "cells are not a table of text"
        out = {"version": data.get("version", 1), "method": str(data.get("method", "tracer")),
               "frames": {c: list(frames[c]) for c in columns}, "cells": dict(cells), "stacks": stacks,
               "ops": {"external_id": list(data["ops"]["external_id"]), "stack": list(data["ops"]["stack"])},
               "allocs": {"stack": list(data["allocs"]["stack"]), "bytes": list(data["allocs"]["bytes"])},
               "notes": [str(x) for x in data.get("notes") or []],
               "loops": _checked_loops(data.get("loops"))}
        return out, dict(sources), None
    except (KeyError, TypeError, AttributeError, IndexError):
        return None, {}, "not the shape nbprof writes"


def _checked_loops(obj: Any) -> list[dict[str, Any]]:
    """A saved trace's ``line_data["loops"]`` (``analysis.loops.loop_iterations``), each loop
    checked: text, line numbers from 1, as many ends as starts, integers. A loop that is not as
    nbprof writes it is left out (the profile has its lines, not that loop's steps)."""
    out = []
    for loop in obj if isinstance(obj, list) else []:
        try:
            file, function = loop["file"], loop["function"]
            line, end_line = loop["line"], loop["end_line"]
            start, end = list(loop["start_ns"]), list(loop["end_ns"])
        except (KeyError, TypeError):
            continue
        if not (isinstance(file, str) and isinstance(function, str) and isinstance(line, int)
                and isinstance(end_line, int) and 0 < line <= end_line and len(start) == len(end)
                and all(isinstance(v, int) and not isinstance(v, bool) for v in start + end)):
            continue
        out.append({"file": file, "line": line, "end_line": end_line, "function": function,
                    "start_ns": start, "end_ns": end})
    return out
