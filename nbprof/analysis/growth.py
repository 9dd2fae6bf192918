"""Memory per step: what each step of a loop held at its end, added, and left alive for good.

The steps, the first that applies:

1. the ``ProfilerStep#N`` ranges (``--schedule`` with ``nbprof.step()``, Hugging Face's
   callback, any ``torch.profiler`` schedule): step N;
2. Lightning's training batches (its ``run_training_batch`` action, a range under
   ``%%torchprof`` or ``nbprof.lightning.Profiler``): numbered from 0 on each process;
3. with ``--lines``, a loop of the user's code (``analysis.loops``: the iterations between the
   hits of its first line): the outermost loop that ran, or, where it ran fewer than
   ``LOOP_MIN_ITERATIONS`` iterations (epochs), the loop inside it with the most time (batches),
   and so on inwards; its iterations numbered from 0.

:func:`growth_table` gives one row per step and device::

    step, [rank,] device, start_us, end_us, held_bytes, added_bytes, allocated_bytes,
    added_never_freed_bytes, never_freed_blocks

- ``held_bytes``: the allocator's total allocated after the last memory event before the step's
  end (what the memory curve shows there);
- ``added_bytes``: ``held_bytes`` less what was held when the step began: what the step added,
  net (negative when it freed more);
- ``allocated_bytes``: the bytes of the blocks allocated within the step, freed or not;
- ``added_never_freed_bytes`` / ``never_freed_blocks``: the blocks allocated within the step
  and still allocated when the profile ended (``analysis.memory.alive_at_end``): what a step
  keeps for good. A loop that leaks keeps about the same every step.

A memory event belongs to the step whose range holds its time (start included, end excluded) on
its process; events between steps belong to none. Vectorized: one ``searchsorted`` per process
and device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..collect.lines import CLOCK_SLACK_NS
from ..events import KIND_CODE, category_codes, category_map, time_ns
from ._intervals import assign_points
from ._tables import LABEL, TEXT, empty_table
from .memory import allocated_totals

__all__ = ["StepWindows", "step_windows", "growth_table", "steps_of_blocks", "made_autograd_node", "backward_ran",
           "GROWTH_COLUMNS", "GROWTH_DTYPES", "LOOP_MIN_ITERATIONS", "LIGHTNING_BATCH", "BACKWARD"]

LOOP_MIN_ITERATIONS = 4  # a loop with fewer iterations (epochs) steps by the loop inside it, if any
LIGHTNING_BATCH = "run_training_batch"  # Lightning's action around one training batch
# A loop's iterations are timed by the line recorder's clock, its memory events by torch's: they
# disagree by a few tenths of a µs, changing from profile to profile (collect.lines' doc). An
# iteration ends with its last line's frees (an assignment dropping the old value), measured 0.05-0.5
# µs before the header's next hit; the next one's first event comes after that hit and the body's
# first line event, at least 1.0 µs later (torch 2.13: for, while with an operator in its test, a
# DataLoader). So each boundary is taken half the join's slack after the hit, inside that gap.
LOOP_CLOCK_NS = CLOCK_SLACK_NS // 2

GROWTH_DTYPES = {"step": np.int64, "rank": LABEL, "device": TEXT, "start_us": np.float64, "end_us": np.float64,
                 "held_bytes": np.int64, "added_bytes": np.int64, "allocated_bytes": np.int64,
                 "added_never_freed_bytes": np.int64, "never_freed_blocks": np.int64}
GROWTH_COLUMNS = tuple(c for c in GROWTH_DTYPES if c != "rank")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class StepWindows:
    """The steps of a profile: ``start_ns`` / ``end_ns`` on the events' clock (ns since
    ``start_us == 0``), the process (``tree.lanes``' code) each ran on, its number, and what they
    are (``source``: "ProfilerStep#N ranges", "Lightning's training batches", "the loop at In [3]
    line 2"); ``loop``: the loop's ``file, line, function`` for steps of a loop."""

    source: str
    number: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    process: np.ndarray
    rank: np.ndarray | None = None
    loop: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.number)


def step_windows(events: pd.DataFrame, meta: Any = None, code_names: dict[str, str] | None = None) -> StepWindows | None:
    """The steps of a profile (the module doc's order), or None where it has none. ``meta``: the
    profile's metadata (its ``line_data`` loops and clock); ``code_names``: cells' names."""
    from .tree import lanes

    if not len(events):
        return None
    _, process = lanes(events)
    kind = events["kind"].cat.codes.to_numpy()
    annotation = (kind == KIND_CODE["annotation"]) & ~events["merged"].to_numpy()
    number = category_map(events["name"], _step_number, dtype=np.int64, missing=-1)
    rows = np.flatnonzero(annotation & (number >= 0))
    source = "ProfilerStep#N ranges"
    if len(rows) == 0:
        rows = np.flatnonzero(annotation & category_map(events["name"], lambda n: n == LIGHTNING_BATCH, dtype=bool,
                                                        missing=False))
        source = "Lightning's training batches"
        number = np.zeros(len(events), dtype=np.int64)
        if len(rows):  # numbered from 0 in time order on each process
            start = events["start_us"].to_numpy()[rows]
            rows = rows[np.lexsort((start, process[rows]))]
            first = np.r_[True, process[rows][1:] != process[rows][:-1]]
            group_start = np.maximum.accumulate(np.where(first, np.arange(len(rows)), 0))
            number[rows] = np.arange(len(rows)) - group_start
    if len(rows):
        start_ns = time_ns(events["start_us"].to_numpy()[rows])
        end_ns = start_ns + time_ns(events["dur_us"].to_numpy()[rows])
        order = np.lexsort((start_ns, process[rows]))
        rows = rows[order]
        rank = events["rank"].to_numpy()[rows] if "rank" in events.columns else None
        return StepWindows(source, number[rows], start_ns[order], end_ns[order], np.asarray(process[rows]), rank)
    return _loop_steps(events, meta, code_names or {})


def _step_number(name: str) -> int:
    m = _STEP.match(name)
    return int(m.group(1)) if m else -1


def _loop_steps(events: pd.DataFrame, meta: Any, code_names: dict[str, str]) -> StepWindows | None:
    """The iterations of the loop that makes the steps (the module doc), on the events' clock."""
    data = getattr(meta, "line_data", None) or {}
    loops = [lp for lp in data.get("loops") or [] if len(lp["start_ns"]) >= 2]
    if not loops or "rank" in events.columns:
        return None
    # the tree's clock (time.time_ns) -> the events' ns: the trace's zero is base_time_ns on the wall
    # clock, and start_us == 0 is origin_ns on the trace's
    # less LOOP_CLOCK_NS: each boundary a little after the header's hit (the constant's comment)
    shift = int(getattr(meta, "base_time_ns", 0)) + int(getattr(meta, "origin_ns", 0)) - LOOP_CLOCK_NS
    spans = [(np.asarray(lp["start_ns"], dtype=np.int64) - shift, np.asarray(lp["end_ns"], dtype=np.int64) - shift)
             for lp in loops]
    covered = [float((e - s).sum()) for s, e in spans]

    def inside(inner: int, outer: int) -> bool:
        """The inner loop's first iteration began within an iteration of the outer one."""
        s, e = spans[outer]
        t = spans[inner][0][0]
        i = int(np.searchsorted(s, t, side="right")) - 1
        return inner != outer and i >= 0 and t < e[i]

    def widest(candidates: list[int]) -> int:
        return max(candidates, key=lambda k: (covered[k], len(spans[k][0]), -k))

    everything = list(range(len(loops)))
    pick = widest([k for k in everything if not any(inside(k, o) for o in everything)] or everything)
    while len(spans[pick][0]) < LOOP_MIN_ITERATIONS:
        nested = [k for k in everything if inside(k, pick)]
        if not nested:
            break
        pick = widest([k for k in nested if not any(inside(k, o) for o in nested)] or nested)
    loop = loops[pick]
    s, e = spans[pick]
    where = _where(code_names.get(loop["file"]), loop["file"], int(loop["line"]))
    return StepWindows(f"the loop at {where}", np.arange(len(s), dtype=np.int64), s, e,
                       np.zeros(len(s), dtype=np.int64),
                       loop={"file": loop["file"], "line": int(loop["line"]), "function": loop["function"]})


def _where(cell: str | None, file: str, line: int) -> str:
    from .hot_lines import line_where

    return line_where(cell, file, line)


def steps_of_blocks(events: pd.DataFrame, blocks: pd.DataFrame, steps: StepWindows) -> np.ndarray:
    """For each block (``analysis.memory.allocations(with_rows=True)``' rows), the position in
    ``steps`` of the step it was allocated in, or -1."""
    from .tree import lanes

    if not len(blocks) or not len(steps):
        return np.full(len(blocks), -1, dtype=np.int64)
    _, process = lanes(events)
    rows = blocks["row"].to_numpy()
    t = time_ns(blocks["alloc_us"].fillna(-1.0).to_numpy())
    out = assign_points(np.asarray(process[rows]), t, steps.process, steps.start_ns, steps.end_ns)
    return out


def growth_table(events: pd.DataFrame, blocks: pd.DataFrame, alive: pd.DataFrame, steps: StepWindows | None) -> pd.DataFrame:
    """One row per step and device (the module doc). ``blocks``: ``allocations(with_rows=True)``;
    ``alive``: ``alive_at_end`` of them."""
    from .tree import lanes

    columns = list(GROWTH_COLUMNS)
    has_rank = steps is not None and steps.rank is not None
    if has_rank:
        columns.insert(1, "rank")
    kind = events["kind"].cat.codes.to_numpy()
    mem = np.flatnonzero(kind == KIND_CODE["memory"])
    if steps is None or not len(steps) or not len(mem):
        return empty_table(GROWTH_DTYPES, columns)
    _, process = lanes(events)
    t = time_ns(events["start_us"].to_numpy()[mem])
    order = np.argsort(t, kind="stable")  # time order; file order at equal times
    mem, t = mem[order], t[order]
    total = allocated_totals(events, mem)
    nbytes = events["bytes"].to_numpy()[mem]
    dev_code, dev_labels = category_codes(events["device"], mem)
    proc = np.asarray(process[mem])
    kept_step = steps_of_blocks(events, alive, steps)
    alive_rows = alive["row"].to_numpy()
    alive_dev, alive_labels = category_codes(events["device"], alive_rows) if len(alive) else (np.zeros(0, np.int64),
                                                                                              np.zeros(0, object))
    alive_bytes = alive["bytes"].to_numpy()
    parts = []
    # the records by (process, device), each group in time order: one stable sort, none where all
    # the records are one group (most profiles: 1 M records cost 40 ms of copies per pass)
    key = proc * max(len(dev_labels), 1) + dev_code
    groups: list[tuple[int, Any]]
    if len(key) and (key == key[0]).all():
        groups = [(int(key[0]), slice(None))]
    else:
        by_key = np.argsort(key, kind="stable")
        firsts = np.r_[0, np.flatnonzero(np.diff(key[by_key])) + 1, len(key)]
        groups = [(int(key[by_key[a]]), by_key[a:z]) for a, z in zip(firsts[:-1], firsts[1:])]
    for k, sel in groups:
        p, d = divmod(k, max(len(dev_labels), 1))
        in_proc = np.flatnonzero(steps.process == p)
        if not len(in_proc):
            continue
        s, e = steps.start_ns[in_proc], steps.end_ns[in_proc]
        tt, tot, b = t[sel], total[sel], nbytes[sel]
        before = int(tot[0] - b[0])  # held when the profile's first event of this device came
        at_end = np.searchsorted(tt, e, side="left") - 1  # the last event before the step's end
        at_start = np.searchsorted(tt, s, side="left") - 1
        held = np.where(at_end >= 0, tot[np.maximum(at_end, 0)], before)
        held_start = np.where(at_start >= 0, tot[np.maximum(at_start, 0)], before)
        pos = np.cumsum(np.where(b > 0, b, 0))
        upto = np.r_[0, pos]
        allocated = upto[at_end + 1] - upto[at_start + 1]
        device = str(dev_labels[d])
        kept = np.zeros(len(in_proc), dtype=np.int64)
        kept_n = np.zeros(len(in_proc), dtype=np.int64)
        if len(alive):
            mine = (kept_step >= 0) & (alive_labels[alive_dev] == device)
            where = np.searchsorted(in_proc, kept_step[mine])
            ok = (where < len(in_proc)) & (in_proc[np.minimum(where, len(in_proc) - 1)] == kept_step[mine])
            np.add.at(kept, where[ok], alive_bytes[mine][ok])
            np.add.at(kept_n, where[ok], 1)
        part = pd.DataFrame({
            "step": steps.number[in_proc], "device": device,
            "start_us": s / 1000.0, "end_us": e / 1000.0,
            "held_bytes": held.astype(np.int64), "added_bytes": (held - held_start).astype(np.int64),
            "allocated_bytes": allocated.astype(np.int64),
            "added_never_freed_bytes": kept, "never_freed_blocks": kept_n,
        })
        if has_rank:
            part.insert(1, "rank", pd.Series(steps.rank[in_proc], dtype=object))  # type: ignore[index]
        parts.append(part)
    if not parts:
        return empty_table(GROWTH_DTYPES, columns)
    out = pd.concat(parts, ignore_index=True)
    keys = (["rank"] if has_rank else []) + ["start_us", "device"]
    return out.sort_values(keys, kind="stable")[columns].reset_index(drop=True)


BACKWARD = "autograd::engine::evaluate_function"  # the range torch records around each backward node


def made_autograd_node(events: pd.DataFrame) -> np.ndarray:
    """For each event: an operator that made an autograd node (so its result requires grad and
    holds its graph), as torch's sequence numbers show it. torch writes an op's ``Sequence number``
    only when grad mode was on: the thread's counter, which moves on by one for each node made. So
    among a thread's outermost numbered forward ops in time order, one made a node (itself or an
    op inside it) where the next one's number is higher; the last one of a thread is not known
    (False). Backward ops (``autograd::engine::evaluate_function``) are left out."""
    from .tree import lanes

    n = len(events)
    out = np.zeros(n, dtype=bool)
    if "sequence_nr" not in events.columns or not n:
        return out
    seq = events["sequence_nr"].to_numpy()
    kind = events["kind"].cat.codes.to_numpy()
    numbered = (kind == KIND_CODE["op"]) & (seq >= 0)
    if not numbered.any():
        return out
    parent = events["parent"].to_numpy()
    nested = (parent >= 0) & numbered[np.maximum(parent, 0)]
    backward = category_map(events["name"], lambda v: v.startswith(BACKWARD), dtype=bool, missing=False)
    rows = np.flatnonzero(numbered & ~nested & ~backward)
    thread, _ = lanes(events)
    lane = np.asarray(thread)[rows]
    rows = rows[np.lexsort((events["start_us"].to_numpy()[rows], lane))]
    lane = np.asarray(thread)[rows]
    same = np.r_[lane[1:] == lane[:-1], False]
    nxt = np.r_[seq[rows][1:], -1]
    out[rows] = same & (nxt > seq[rows])
    return out


def backward_ran(events: pd.DataFrame) -> bool:
    """A backward pass ran in the profile (torch recorded a backward node's range)."""
    return bool(category_map(events["name"], lambda v: v.startswith(BACKWARD), dtype=bool, missing=False).any())
