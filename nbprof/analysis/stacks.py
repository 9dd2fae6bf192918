"""The Python call stack of each operator, from the Python frames a ``--stack`` profile records.

torch records Python frames as events of their own (``python_function``), each with the frame
that called it. An operator's stack is the chain of frames open when it started: the innermost
frame on its thread that contains it, then that frame's callers.

For grouping we keep the frames people can act on: their own code and ``nn.Module`` calls.
Frames inside torch, builtins, IPython and nbprof are skipped (torch's own stack grouping skipped
autograd internals for the same reason).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..events import KIND_CODE, time_ns

__all__ = ["op_stacks", "STACK_DEPTH", "is_user_frame"]

STACK_DEPTH = 5
SEPARATOR = " ← "

_INTERNAL = re.compile(
    r"^(<built-in|torch/|.*/site-packages/(torch|IPython|ipykernel|nbprof|tornado|asyncio|traitlets)/|"
    r"IPython/|ipykernel/|nbprof/|asyncio/|threading\.py|contextlib\.py|runpy\.py|<frozen )"
)


def is_user_frame(name: str) -> bool:
    return name.startswith("nn.Module: ") or not _INTERNAL.match(name)


def op_stacks(events: pd.DataFrame, depth: int = STACK_DEPTH) -> pd.Series:
    """For every event: its innermost ``depth`` user frames joined with " ← " ("" if none)."""
    n = len(events)
    out = np.full(n, "", dtype=object)
    kind = events["kind"].cat.codes.to_numpy()
    is_py = kind == KIND_CODE["python"]
    if not is_py.any():
        return pd.Series(out, index=events.index, name="stack")
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    from .tree import lanes

    thread, _ = lanes(events)
    parent = events["parent"].to_numpy()
    names = events["name"].astype(str).to_numpy()

    py_rows = np.flatnonzero(is_py)
    py_rows = py_rows[np.lexsort((-end[py_rows], start[py_rows], thread[py_rows]))]
    targets = np.flatnonzero(~is_py & (thread >= 0) & (kind != KIND_CODE["memory"]))
    frame_of = np.full(n, -1, dtype=np.int64)
    pt = thread[py_rows]
    for th in np.unique(thread[targets]):
        a, b = np.searchsorted(pt, th, "left"), np.searchsorted(pt, th, "right")
        if a == b:
            continue
        sel = targets[thread[targets] == th]
        j = a + np.searchsorted(start[py_rows[a:b]], start[sel], side="right") - 1
        frame_of[sel] = np.where(j >= a, py_rows[np.maximum(j, a)], -1)
    # climb to the innermost frame that is still open when the event starts
    cand = frame_of.copy()
    for _ in range(512):
        active = np.flatnonzero(cand >= 0)
        if len(active) == 0:
            break
        closed = end[cand[active]] < end[active]
        if not closed.any():
            break
        moving = active[closed]
        cand[moving] = parent[cand[moving]]

    def stack_of(frame: int) -> str:
        frames: list[str] = []
        f = frame
        while f >= 0 and len(frames) < depth:
            if is_user_frame(names[f]):
                frames.append(names[f])
            f = parent[f]
        return SEPARATOR.join(frames)

    has = np.flatnonzero(cand >= 0)
    # many events share a frame: build each distinct frame's stack once
    frames, inverse = np.unique(cand[has], return_inverse=True)
    texts = np.asarray([stack_of(int(f)) for f in frames], dtype=object)
    out[has] = texts[inverse.reshape(-1)]
    return pd.Series(out, index=events.index, name="stack")
