"""The Python call stack of each operator, from the Python frames a ``--stack`` profile records.

torch records Python frames as events of their own (``python_function``), each with the frame
that called it. An operator's stack is the chain of frames open when it started: the innermost
frame on its thread that contains it, then that frame's callers.

For grouping we keep the frames people can act on: their own code and ``nn.Module`` calls.
Frames inside torch, builtins, IPython and nbprof are skipped (torch's own stack grouping skipped
autograd internals for the same reason). A stack ends at the notebook cell: the frames around it
are the kernel running the cell (its event loop: ``tornado/platform/asyncio.py``, ``asyncio``,
``ipykernel``; or a test harness), never the user's code, and a cell is named "In [n]" as
``%%cprofile`` names it, not by the temporary file IPython compiled it from
(``/tmp/ipykernel_…/….py``, ``<ipython-input-n-…>``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..events import KIND_CODE, time_ns

__all__ = ["op_stacks", "innermost_frames", "STACK_DEPTH", "is_user_frame", "frame_file", "frame_label"]

STACK_DEPTH = 5
SEPARATOR = " ← "

_INTERNAL = re.compile(
    r"^(<built-in|torch/|.*/site-packages/(torch|IPython|ipykernel|nbprof|tornado|asyncio|traitlets)/|"
    r"IPython/|ipykernel/|nbprof/|asyncio/|threading\.py|contextlib\.py|runpy\.py|<frozen )"
)
# torch's frame name: "path(line): function"
_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<function>.*)$")
# a notebook cell's compiled file: IPython's "<ipython-input-5-…>", ipykernel's "/tmp/ipykernel_42/123.py"
_CELL_FILE = re.compile(r"^<ipython-input-(?P<n>\d+)-|[/\\]ipykernel_\d+[/\\]\d+\.py$|^<cell")


def is_user_frame(name: str) -> bool:
    # Windows paths are written with "\\" (torch trims the sys.path prefix, os.sep included)
    return name.startswith("nn.Module: ") or not _INTERNAL.match(name.replace("\\", "/"))


def frame_file(name: str) -> str | None:
    """The file of a frame named as torch names it ("path(line): function"); None for others
    (``nn.Module: Linear_0``)."""
    m = _FRAME.match(name)
    return m.group("file") if m else None


def frame_label(name: str, code_names: dict[str, str]) -> tuple[str, bool]:
    """(the frame as the stack shows it, whether it is a notebook cell's). A cell's file is
    replaced by "In [n]" (``code_names``, else IPython's own "<ipython-input-n-…>" name)."""
    m = _FRAME.match(name)
    if not m:
        return name, False
    file = m.group("file")
    cell = _CELL_FILE.search(file.replace("\\", "/"))
    label = code_names.get(file)
    if label is None and cell is not None and cell.group("n"):
        label = f"In [{cell.group('n')}]"
    if label is None:
        return name, cell is not None or file in code_names
    return f"{label}({m.group('line')}): {m.group('function')}", True


def innermost_frames(events: pd.DataFrame) -> np.ndarray | None:
    """For every event: the row of the innermost Python frame open on its thread when it started
    (-1: none); None when the profile has no Python frames. A frame's ``parent`` is its caller."""
    n = len(events)
    kind = events["kind"].cat.codes.to_numpy()
    is_py = kind == KIND_CODE["python"]
    if not is_py.any():
        return None
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    from .tree import lanes

    thread, _ = lanes(events)
    parent = events["parent"].to_numpy()

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
    return cand


def op_stacks(events: pd.DataFrame, depth: int = STACK_DEPTH, code_names: dict[str, str] | None = None) -> pd.Series:
    """For every event: its innermost ``depth`` user frames joined with " ← " ("" if none), up
    to the notebook cell that ran it (named "In [n]"; ``code_names`` as in the run's metadata)."""
    n = len(events)
    out = np.full(n, "", dtype=object)
    cand = innermost_frames(events)
    if cand is None:
        return pd.Series(out, index=events.index, name="stack")
    parent = events["parent"].to_numpy()
    names = events["name"].astype(str).to_numpy()

    code_names = code_names or {}
    labels: dict[str, tuple[str, bool]] = {}  # a frame name's label, parsed once (names repeat)

    def stack_of(frame: int) -> str:
        frames: list[str] = []
        f = frame
        while f >= 0 and len(frames) < depth:
            if is_user_frame(names[f]):
                name = names[f]
                if name not in labels:
                    labels[name] = frame_label(name, code_names)
                label, is_cell = labels[name]
                frames.append(label)
                if is_cell and label.endswith("): <module>"):  # what ran the cell is the kernel, not the user's code
                    break
            f = parent[f]
        return SEPARATOR.join(frames)

    has = np.flatnonzero(cand >= 0)
    # many events share a frame: build each distinct frame's stack once
    frames, inverse = np.unique(cand[has], return_inverse=True)
    texts = np.asarray([stack_of(int(f)) for f in frames], dtype=object)
    out[has] = texts[inverse.reshape(-1)]
    return pd.Series(out, index=events.index, name="stack")
