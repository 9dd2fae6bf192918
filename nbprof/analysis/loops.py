"""The loops of the user's code and when each iteration ran (``--lines``): the steps of a loop that
a profile without step markers still has.

A ``for`` or ``while`` statement's first line is where each iteration begins: the line tracer
(``collect.torch_line_recorder``) records that line on entering the loop and again on every jump back to
it (``sys.settrace``'s and ``sys.monitoring``'s LINE events both fire there per iteration; the
jump that finds the iterator exhausted records it once more). So a loop that ran N iterations
has N + 1 hits of its first line in one frame, and iteration k runs from hit k to hit k + 1.

A *run* of the loop ends where its frame runs a line outside the statement (the line after the
loop, a second call of the function that holds it): two hits with such a line between them are
no iteration. A loop left by ``break`` or ``return`` has no hit after its last iteration, which
is not counted. Loops are found with ``ast`` in the text of each cell and file (a cell's
IPython-only lines, ``%magic`` and ``!cmd``, are blanked first, keeping the numbering).

:func:`loop_iterations` runs at the end of a ``--lines`` run (``analysis.lines.finish_line_data``)
on the raw line record, and its result is saved with the profile (``line_data["loops"]``, checked
on reading by ``collect.lines.checked_lines``): plain lists, iteration times in the clock of torch's event tree (``time.time_ns()``). One pass per code
object that holds a loop, vectorized over its recorded lines.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

__all__ = ["loop_iterations", "loop_headers"]


def loop_headers(text: str) -> list[tuple[int, int]]:
    """(first line, last line) of every ``for`` / ``while`` statement of a cell's or file's text;
    none where it does not parse."""
    lines = text.splitlines()
    # IPython's own syntax (the %%torchprof line itself, %magics, !commands) is no Python: blanked,
    # so the rest parses with its line numbers
    plain = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
    try:
        tree = ast.parse(plain)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            out.append((int(node.lineno), int(node.end_lineno or node.lineno)))
    return sorted(out)


def loop_iterations(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Every loop of the user's code that ran an iteration in the profile: ``file``, ``line``,
    ``end_line``, ``function``, ``start_ns``, ``end_ns`` (one entry per iteration, in time order;
    the clock of ``raw["tracer"]``). ``raw``: ``collect.lines.read_lines``' record."""
    tracer, codes, sources = raw.get("tracer") or {}, raw.get("codes") or {}, raw.get("sources") or {}
    t_time = np.asarray(tracer.get("time", ()), dtype=np.int64)
    if len(t_time) == 0:
        return []
    t_code = np.asarray(tracer["code"], dtype=np.int64)
    t_line = np.asarray(tracer["line"], dtype=np.int64)
    headers = {f: loop_headers(text) for f, text in sources.items()}
    order = np.lexsort((t_time, t_code))  # by code object, then time
    code_sorted = t_code[order]
    uniq, first = np.unique(code_sorted, return_index=True)
    bounds = np.append(first, len(order))
    out = []
    for k, cid in enumerate(uniq.tolist()):
        if cid not in codes:
            continue
        file, name, _ = codes[cid]
        loops = headers.get(file)
        if not loops:
            continue
        seg = order[bounds[k]:bounds[k + 1]]
        lines, times = t_line[seg], t_time[seg]
        for lo, hi in loops:
            hit = np.flatnonzero(lines == lo)
            if len(hit) < 2:
                continue
            # a line of this code outside the statement between two hits: the loop was left
            left = np.cumsum((lines < lo) | (lines > hi))
            same_run = left[hit[1:]] == left[hit[:-1]]
            if not same_run.any():
                continue
            out.append({"file": file, "line": lo, "end_line": hi, "function": name,
                        "start_ns": times[hit[:-1][same_run]].tolist(), "end_ns": times[hit[1:][same_run]].tolist()})
    out.sort(key=lambda d: (d["start_ns"][0], d["file"], d["line"]))
    return out
