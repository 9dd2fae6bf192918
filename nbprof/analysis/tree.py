"""The event tree and every per-event number derived from it, as torch defines them.

torch (``torch.autograd.profiler``, ``EventList._build_tree``) computes:

- nesting: per CPU thread, events sorted by (start, -end); a stack of open events; an event is a
  child of the stack's top unless it starts at/after the top's end or ends after it (then the top
  is popped for good);
- same-name collapse: a child with its parent's name that is its parent's only child is merged
  into the parent (repeatedly); the parent takes over its children and kernels;
- kernels: a device event belongs to the CPU op whose External id it carries;
- memory: every CPU event gets the memory events whose time falls in [start, end] (any thread);
- self = total minus the children's totals.

We compute the same without a Python object per event:

- nesting: the parent of event i is the nearest earlier event j on its thread with
  ``end_j >= end_i`` (``>`` for zero-length i). That is a "previous greater element" query, answered
  for all events at once by a binary descent over a sparse table of range maxima of ``end``. The
  same table checks, for every event, that all events between it and its parent have ended by its
  start; where that holds, torch's stack algorithm gives the same parents (its stack would pop
  exactly those). A thread where it fails (partially overlapping events, e.g. profiler overhead
  that outlives the op it started in) runs the stack algorithm itself.
- subtree sums (device time): in nesting order a subtree is a contiguous range, so sums are
  differences of prefix sums.

Where torch double counts we do not: a profiler overhead event takes, in torch, the External id
of the op it started in, so that op's kernels are counted in both; we count each kernel once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import KIND_CODE, time_ns

__all__ = ["build_tree", "TREE_COLUMNS"]

TREE_COLUMNS = (
    "parent",
    "depth",
    "merged",
    "self_cpu_us",
    "device_total_us",
    "self_device_us",
    "cpu_mem_bytes",
    "self_cpu_mem_bytes",
    "device_mem_bytes",
    "self_device_mem_bytes",
)

# CPU events that form torch's operator tree. Python frames are left out: torch 2.11 leaves them
# out too, and torch 2.13, which puts them in, gets negative self times from their overlaps.
_TREE_KINDS = [KIND_CODE[k] for k in ("op", "annotation", "runtime", "overhead", "other")]
_FRONTEND_KINDS = [KIND_CODE[k] for k in ("op", "annotation", "other")]
_DEVICE_WORK_KINDS = [KIND_CODE[k] for k in ("kernel", "memcpy", "memset")]


def build_tree(events: pd.DataFrame) -> pd.DataFrame:
    """Return ``events`` with the columns in :data:`TREE_COLUMNS` added (same rows, same order)."""
    n = len(events)
    kind = events["kind"].cat.codes.to_numpy()
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    thread, process = lanes(events)

    in_tree = np.isin(kind, _TREE_KINDS) & (thread >= 0)
    rows = np.flatnonzero(in_tree)
    # nesting order: by thread, start, longest first; ties keep the file's order (stable sort)
    rows = rows[np.lexsort((-end[rows], start[rows], thread[rows]))]
    s, e, t = start[rows], end[rows], thread[rows]

    parent_pos, sub_end = _nest(s, e, t)

    parent = np.full(n, -1, dtype=np.int64)
    has_parent = parent_pos >= 0
    parent[rows[has_parent]] = rows[parent_pos[has_parent]]

    # depth from the nesting ranges: +1 where a range opens, -1 after it closes
    m = len(rows)
    delta = np.zeros(m + 1, dtype=np.int64)
    delta[:m] += 1
    np.add.at(delta, sub_end, -1)
    depth_pos = np.cumsum(delta)[:m] - 1
    depth = np.full(n, -1, dtype=np.int64)
    depth[rows] = depth_pos

    name_code = events["name"].cat.codes.to_numpy()
    merged = _collapse_same_name(parent, in_tree, name_code)
    live_parent = _resolve(parent, merged)  # children of merged events hang from the survivor

    # kernels -> the op that launched them (merged ops hand theirs to the op that absorbed them)
    external_id = events["external_id"].to_numpy()
    dur = end - start
    launcher = _launchers(kind, external_id, in_tree)
    launcher = np.where(launcher >= 0, _survivor(launcher, merged, parent), -1)
    is_work = np.isin(kind, _DEVICE_WORK_KINDS)
    attributed = is_work & (launcher >= 0)
    own_kernel_ns = np.bincount(launcher[attributed], weights=dur[attributed], minlength=n)

    # device time of a subtree: prefix sums of own kernel time in nesting order
    prefix = np.concatenate(([0.0], np.cumsum(own_kernel_ns[rows])))
    pos = np.arange(m)
    device_total_ns = np.zeros(n)
    device_total_ns[rows] = prefix[sub_end] - prefix[pos]

    live_child = in_tree & ~merged & (live_parent >= 0)
    children_dur = np.bincount(live_parent[live_child], weights=dur[live_child], minlength=n)
    self_cpu_ns = np.where(in_tree, dur - children_dur, 0.0)

    cpu_mem, device_mem = _memory_in_intervals(events, kind, start, end, in_tree, process)
    children_cpu_mem = np.bincount(live_parent[live_child], weights=cpu_mem[live_child], minlength=n)
    children_dev_mem = np.bincount(live_parent[live_child], weights=device_mem[live_child], minlength=n)

    device_total_us = device_total_ns / 1000.0
    self_device_us = np.where(in_tree, own_kernel_ns / 1000.0, 0.0)
    device_work_us = np.where(is_work, dur / 1000.0, 0.0)
    # a kernel's own row: all of its time is device time, and all of it "self"
    device_total_us = np.where(is_work, device_work_us, device_total_us)
    self_device_us = np.where(is_work, device_work_us, self_device_us)

    # device events hang from the op that launched them; memory events from the innermost
    # CPU event of their thread that was open when they happened
    parent = np.where(attributed, launcher, parent)
    parent = _attach_instants(parent, kind, start, thread, rows, s, e, t)
    parent = _attach_python(parent, events, kind)
    parent = np.where(in_tree & ~merged, live_parent, parent)

    out = events.copy(deep=False)
    out["parent"] = parent
    out["depth"] = depth
    out["merged"] = merged
    out["self_cpu_us"] = self_cpu_ns / 1000.0
    out["device_total_us"] = device_total_us
    out["self_device_us"] = self_device_us
    out["cpu_mem_bytes"] = cpu_mem.astype(np.int64)
    out["self_cpu_mem_bytes"] = np.where(in_tree, cpu_mem - children_cpu_mem, 0).astype(np.int64)
    out["device_mem_bytes"] = device_mem.astype(np.int64)
    out["self_device_mem_bytes"] = np.where(in_tree, device_mem - children_dev_mem, 0).astype(np.int64)
    return out


# --------------------------------------------------------------------------------------- nesting


def lanes(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(thread lane, process) of every event: the keys nesting and memory attribution use.

    In one profile the thread id is the lane. A profile merged from several ranks can repeat
    thread ids (copies of one trace, or ranks on different hosts), so there a lane is a
    (rank, pid, thread) triple; device events keep lane -1.
    """
    thread = events["thread"].to_numpy()
    if "rank" not in events.columns:
        return thread, np.zeros(len(thread), dtype=np.int64)
    rank_codes, _ = pd.factorize(events["rank"].to_numpy())
    pid_codes, pids = pd.factorize(events["pid"].to_numpy())
    process = rank_codes.astype(np.int64) * max(len(pids), 1) + pid_codes
    thread_codes, threads = pd.factorize(thread)
    lane = process * max(len(threads), 1) + thread_codes
    return np.where(thread >= 0, lane, -1), process


def _nest(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parents and subtree ends (exclusive), as positions in nesting order; -1 for roots."""
    m = len(s)
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    seg_start = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    seg_len = np.diff(np.r_[seg_start, m])
    lo = np.repeat(seg_start, seg_len)  # first position of each event's thread
    hi = np.repeat(seg_start + seg_len, seg_len)

    # "ends at or after me" (strictly after for zero-length events): compare 2*end with 2*end+1
    v = 2 * e
    q = 2 * e + (e == s)
    levels = _sparse_max(v)

    pos = np.arange(m)
    upper = pos.copy()  # candidates are positions in [lo, upper)
    for k in range(len(levels) - 1, -1, -1):
        step = 1 << k
        cand = upper - step
        ok = np.flatnonzero(cand >= lo)
        if len(ok) == 0:
            continue
        skip = levels[k][cand[ok]] < q[ok]
        upper[ok[skip]] -= step
    parent = upper - 1
    parent[parent < lo] = -1

    # torch's stack gives these parents iff every event between parent and child ended by the
    # child's start (else it would have popped, or kept, something else)
    first = np.where(parent >= 0, parent + 1, lo)
    last = pos - 1
    has_between = first <= last
    ok_nesting = np.ones(m, dtype=bool)
    if has_between.any():
        idx = np.flatnonzero(has_between)
        between_max = _range_max(levels, first[idx], last[idx])
        ok_nesting[idx] = between_max <= 2 * s[idx]

    # subtree end: the first event of the thread that starts at/after my end (at least pos + 1)
    sub_end = np.empty(m, dtype=np.int64)
    for a, length in zip(seg_start, seg_len):
        b = a + length
        sub_end[a:b] = a + np.searchsorted(s[a:b], e[a:b], side="left")
    sub_end = np.maximum(sub_end, pos + 1)
    sub_end = np.minimum(sub_end, hi)

    if not ok_nesting.all():
        for a in np.unique(lo[~ok_nesting]):
            b = int(hi[a])
            p, se = _nest_with_stack(s[a:b], e[a:b])
            parent[a:b] = np.where(p >= 0, p + a, -1)
            sub_end[a:b] = se + a
    return parent, sub_end


def _nest_with_stack(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's own stack algorithm, for one thread whose events overlap partially."""
    m = len(s)
    parent = np.full(m, -1, dtype=np.int64)
    sub_end = np.full(m, m, dtype=np.int64)
    stack: list[int] = []
    s_list, e_list = s.tolist(), e.tolist()
    for i in range(m):
        si, ei = s_list[i], e_list[i]
        while stack:
            top = stack[-1]
            if si >= e_list[top] or ei > e_list[top]:
                sub_end[stack.pop()] = i
            else:
                parent[i] = top
                break
        stack.append(i)
    return parent, sub_end


def _sparse_max(v: np.ndarray) -> list[np.ndarray]:
    """levels[k][j] = max(v[j : j + 2**k])."""
    levels = [v]
    k = 1
    while (1 << k) <= len(v):
        prev = levels[-1]
        half = 1 << (k - 1)
        levels.append(np.maximum(prev[:-half], prev[half:]))
        k += 1
    return levels


def _range_max(levels: list[np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """max(v[a..b]) (inclusive) for arrays of ranges, from the sparse table."""
    length = b - a + 1
    k = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(a), dtype=levels[0].dtype)
    for level in np.unique(k):
        sel = np.flatnonzero(k == level)
        table = levels[level]
        out[sel] = np.maximum(table[a[sel]], table[b[sel] - (1 << level) + 1])
    return out


# ------------------------------------------------------------------------------ same-name collapse


def _collapse_same_name(parent: np.ndarray, in_tree: np.ndarray, name_code: np.ndarray) -> np.ndarray:
    """torch's ``_remove_dup_nodes``: merge an only child that has its parent's name."""
    n = len(parent)
    merged = np.zeros(n, dtype=bool)
    current = parent.copy()
    while True:
        live = in_tree & ~merged
        has_parent = live & (current >= 0)
        children = np.bincount(current[has_parent], minlength=n)
        p = np.where(has_parent, current, 0)
        new = has_parent & (name_code == name_code[p]) & (children[p] == 1)
        if not new.any():
            return merged
        merged |= new
        current = _resolve(parent, merged)


def _resolve(parent: np.ndarray, merged: np.ndarray) -> np.ndarray:
    """Each event's nearest ancestor that was not merged away."""
    out = parent.copy()
    while True:
        has = out >= 0
        climb = np.zeros(len(out), dtype=bool)
        climb[has] = merged[out[has]]
        if not climb.any():
            return out
        out[climb] = parent[out[climb]]


def _survivor(rows: np.ndarray, merged: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """The event that stands for each row after merging: itself, or the ancestor that absorbed it."""
    out = rows.copy()
    while True:
        climb = merged[out]
        if not climb.any():
            return out
        out[climb] = parent[out[climb]]


# ----------------------------------------------------------------------------- kernels and memory


def _launchers(kind: np.ndarray, external_id: np.ndarray, in_tree: np.ndarray) -> np.ndarray:
    """For each device event, the row of the CPU op with its External id (-1 if none)."""
    n = len(kind)
    out = np.full(n, -1, dtype=np.int64)
    work = np.flatnonzero(np.isin(kind, _DEVICE_WORK_KINDS) & (external_id > 0))
    if len(work) == 0:
        return out
    front = np.flatnonzero(np.isin(kind, _FRONTEND_KINDS) & in_tree & (external_id > 0))
    if len(front) == 0:
        return out
    ids = external_id[front]
    order = np.argsort(ids, kind="stable")  # first event wins on a (rare) duplicate id
    ids_sorted, front_sorted = ids[order], front[order]
    wanted = external_id[work]
    at = np.searchsorted(ids_sorted, wanted, side="left")
    at_clipped = np.minimum(at, len(ids_sorted) - 1)
    found = ids_sorted[at_clipped] == wanted
    out[work[found]] = front_sorted[at_clipped[found]]
    return out


def _memory_in_intervals(
    events: pd.DataFrame,
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    in_tree: np.ndarray,
    process: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes of the memory events inside [start, end] of each tree event, CPU and device apart.

    Like torch, any thread's allocations count (within the same process)."""
    n = len(kind)
    cpu_mem = np.zeros(n)
    dev_mem = np.zeros(n)
    is_mem = kind == KIND_CODE["memory"]
    if not is_mem.any():
        return cpu_mem, dev_mem
    nbytes = events["bytes"].to_numpy()
    on_cpu = (events["device"] == "cpu").to_numpy()
    for proc in np.unique(process[is_mem]):
        mem_rows = np.flatnonzero(is_mem & (process == proc))
        mem_rows = mem_rows[np.argsort(start[mem_rows], kind="stable")]
        mt = start[mem_rows]
        cpu_bytes = np.where(on_cpu[mem_rows], nbytes[mem_rows], 0)
        dev_bytes = np.where(on_cpu[mem_rows], 0, nbytes[mem_rows])
        cpu_prefix = np.concatenate(([0], np.cumsum(cpu_bytes)))
        dev_prefix = np.concatenate(([0], np.cumsum(dev_bytes)))
        tree_rows = np.flatnonzero(in_tree & (process == proc))
        a = np.searchsorted(mt, start[tree_rows], side="left")
        b = np.searchsorted(mt, end[tree_rows], side="right")
        cpu_mem[tree_rows] = cpu_prefix[b] - cpu_prefix[a]
        dev_mem[tree_rows] = dev_prefix[b] - dev_prefix[a]
    return cpu_mem, dev_mem


def _attach_instants(
    parent: np.ndarray,
    kind: np.ndarray,
    start: np.ndarray,
    thread: np.ndarray,
    rows: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    t: np.ndarray,
) -> np.ndarray:
    """Memory events: parent = the innermost tree event on their thread that contains them."""
    inst = np.flatnonzero(((kind == KIND_CODE["memory"]) | (kind == KIND_CODE["oom"])) & (thread >= 0))
    if len(inst) == 0 or len(rows) == 0:
        return parent
    out = parent.copy()
    # last event (in nesting order) of the same thread that starts at or before the instant
    key_t = np.searchsorted(t, thread[inst], side="left")
    key_t_end = np.searchsorted(t, thread[inst], side="right")
    cand = np.full(len(inst), -1, dtype=np.int64)
    for th in np.unique(thread[inst]):
        sel = np.flatnonzero(thread[inst] == th)
        a, b = key_t[sel][0], key_t_end[sel][0]
        if a >= b:
            continue
        j = a + np.searchsorted(s[a:b], start[inst[sel]], side="right") - 1
        cand[sel] = np.where(j >= a, j, -1)
    # climb (in position space) until the candidate's interval contains the instant
    inv = np.full(len(parent), -1, dtype=np.int64)
    inv[rows] = np.arange(len(rows))
    pp = parent[rows]
    pos_parent = np.where(pp >= 0, inv[np.maximum(pp, 0)], -1)
    tt = start[inst]
    for _ in range(256):
        active = cand >= 0
        if not active.any():
            break
        c = cand[active]
        inside = e[c] >= tt[active]
        if inside.all():
            break
        idx = np.flatnonzero(active)[~inside]
        cand[idx] = pos_parent[cand[idx]]
    found = cand >= 0
    out[inst[found]] = rows[cand[found]]
    return out


def _attach_python(parent: np.ndarray, events: pd.DataFrame, kind: np.ndarray) -> np.ndarray:
    """Python frames: parent = the frame that called them (the tracer records it)."""
    is_py = kind == KIND_CODE["python"]
    if not is_py.any():
        return parent
    out = parent.copy()
    py_rows = np.flatnonzero(is_py)
    py_id = events["python_id"].to_numpy()[py_rows]
    py_parent = events["python_parent_id"].to_numpy()[py_rows]
    pid = events["pid"].to_numpy()[py_rows]
    # ids are unique per process; key on (pid, id)
    key = pid.astype(np.int64) * (1 << 32) + py_id
    order = np.argsort(key, kind="stable")
    key_sorted = key[order]
    want = pid.astype(np.int64) * (1 << 32) + py_parent
    at = np.minimum(np.searchsorted(key_sorted, want), len(key_sorted) - 1)
    found = (key_sorted[at] == want) & (py_parent >= 0)
    out[py_rows[found]] = py_rows[order[at[found]]]
    return out
