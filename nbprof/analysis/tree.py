"""The event tree and every per-event number derived from it, as torch defines them.

torch (``torch.autograd.profiler``, ``EventList._build_tree``) computes:

- nesting: per CPU thread, events sorted by (start, -end); a stack of open events; an event is a
  child of the stack's top unless it starts at/after the top's end or ends after it (then the top
  is popped for good);
- same-name collapse: a child with its parent's name that is its parent's only child is merged
  into the parent (repeatedly); the parent takes over its children and kernels;
- kernels: a device event belongs to the CPU op whose External id it carries (we do the same;
  where that id links to no op, as in the traces Meta's tooling writes, where runtime calls and
  kernels carry the correlation id there, the device event belongs to the op that encloses the
  runtime call with its correlation id, as HTA links them);
- memory: every CPU event gets the memory events whose time falls in [start, end] (any thread);
- self = total minus the children's totals (where that is negative: partially overlapping
  siblings, or rounded ties, see ``build_tree``, we differ: never below 0).

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

from ..events import DEVICE_WORK_CODES, KIND_CODE, MEMORY_CODES, TREE_CODES, category_mask, distinct, kind_mask, time_ns

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
_FRONTEND_KINDS = [KIND_CODE[k] for k in ("op", "annotation", "other")]


def build_tree(events: pd.DataFrame) -> pd.DataFrame:
    """Return ``events`` with the columns in :data:`TREE_COLUMNS` added (same rows, same order).

    Written for a low peak of memory: temporaries are dropped as soon as they are used, and
    columns that are all zeros (no device work, no memory events) cost no pages."""
    n = len(events)
    kind = events["kind"].cat.codes.to_numpy()
    start = time_ns(events["start_us"].to_numpy())
    dur = time_ns(events["dur_us"].to_numpy())
    end = start + dur
    thread, process = lanes(events)

    in_tree = kind_mask(kind, TREE_CODES) & (thread >= 0)
    rows = _nesting_order(np.flatnonzero(in_tree), thread, start, end)
    s, e, t = start[rows], end[rows], thread[rows]

    parent_pos, sub_end, depth_pos = _nest(s, e, t)
    _split_ties(parent_pos, sub_end, depth_pos, s, e, events["name"].cat.codes.to_numpy()[rows])
    m = len(rows)
    siblings_overlap = _siblings_overlap(sub_end, s, e, t)

    parent = np.full(n, -1, dtype=np.int64)
    has_parent = parent_pos >= 0
    parent[rows[has_parent]] = rows[parent_pos[has_parent]]
    del has_parent
    depth = np.full(n, -1, dtype=np.int64)
    depth[rows] = depth_pos
    del depth_pos

    name_code = events["name"].cat.codes.to_numpy()
    merged = _collapse_same_name(parent, in_tree, name_code)
    live_parent = _resolve(parent, merged)  # children of merged events hang from the survivor
    live_child = in_tree & ~merged & (live_parent >= 0)
    child_parent = live_parent[live_child]

    # CPU time: self = total minus the time its children cover. That is the sum of their totals,
    # except where torch's stack left partially overlapping events as siblings (an async range,
    # overhead outliving its op): the sum counts their overlap twice, and torch's self time goes
    # negative (parent [0, 20], children [1, 12] and [6, 18]: -3 µs). There the overlap is given back.
    # Calls that share start and end on a whole-µs clock (``_split_ties``' siblings) keep torch's
    # sum, each its own time; where their rounded times add up to more than the parent's (two
    # [2, 8] calls under [0, 10]: -2 µs), the parent's own time is none, not negative.
    covered = np.bincount(child_parent, weights=dur[live_child], minlength=n)
    if siblings_overlap:
        covered -= _sibling_overlap(child_parent, start[live_child], end[live_child], n)
    self_cpu_us = np.where(in_tree, np.maximum(dur - covered, 0), 0.0)
    del covered
    self_cpu_us /= 1000.0

    # kernels -> the op that launched them (merged ops hand theirs to the op that absorbed them)
    is_work = kind_mask(kind, DEVICE_WORK_CODES)
    if is_work.any():
        launcher = _launchers(kind, events["external_id"].to_numpy(), events["correlation"].to_numpy(),
                              in_tree, parent)
        launcher = np.where(launcher >= 0, _survivor(launcher, merged, parent), -1)
        attributed = is_work & (launcher >= 0)
        own_kernel_ns = np.bincount(launcher[attributed], weights=dur[attributed], minlength=n)
        # device time of a subtree: prefix sums of own kernel time in nesting order
        device_total_ns = np.zeros(n)
        prefix = np.concatenate(([0.0], np.cumsum(own_kernel_ns[rows])))
        device_total_ns[rows] = prefix[sub_end] - prefix[:m]
        del prefix
        # a kernel's own row: all of its time is device time, and all of it "self"
        device_total_us = np.where(is_work, dur, device_total_ns) / 1000.0
        self_device_us = np.where(is_work, dur, np.where(in_tree, own_kernel_ns, 0.0)) / 1000.0
        del device_total_ns, own_kernel_ns
        parent = np.where(attributed, launcher, parent)  # device events hang from their launcher
        del launcher, attributed
    else:
        device_total_us = np.zeros(n)  # untouched zeros: no memory until written
        self_device_us = np.zeros(n)

    # memory: bytes allocated inside each event (any thread), and self = minus the children's
    cpu_mem, device_mem = _memory_in_intervals(events, kind, start, end, rows, s, e, process)
    if cpu_mem is not None and device_mem is not None:
        self_cpu_mem = np.where(in_tree, cpu_mem - _children_sum(child_parent, cpu_mem[live_child], n), 0)
        self_dev_mem = np.where(in_tree, device_mem - _children_sum(child_parent, device_mem[live_child], n), 0)
    else:
        cpu_mem, device_mem = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        self_cpu_mem, self_dev_mem = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    del child_parent, live_child, dur, end

    # memory events hang from the innermost CPU event of their thread that was open when they
    # happened; Python frames from their caller
    parent = _attach_instants(parent, kind, start, thread, rows, s, e, t, parent_pos)
    del s, e, t, rows, parent_pos, sub_end, start
    parent = _attach_python(parent, events, kind)
    parent = np.where(in_tree & ~merged, live_parent, parent)
    del live_parent, in_tree

    # the events and the new columns side by side, without copies (pd.concat of the two frames
    # is the cheapest way to add ten columns: ~0.7 ms whatever the size)
    new = pd.DataFrame(
        {
            "parent": parent,
            "depth": depth,
            "merged": merged,
            "self_cpu_us": self_cpu_us,
            "device_total_us": device_total_us,
            "self_device_us": self_device_us,
            "cpu_mem_bytes": cpu_mem,
            "self_cpu_mem_bytes": self_cpu_mem,
            "device_mem_bytes": device_mem,
            "self_device_mem_bytes": self_dev_mem,
        },
        index=events.index,
        copy=False,
    )
    if events.index.is_unique:
        out = pd.concat([events, new], axis=1)
    else:  # concat aligns on the index: keep the rows as they are instead
        out = events.copy(deep=False)
        for c in new.columns:
            out[c] = new[c].to_numpy()
    out.attrs = dict(events.attrs)
    return out


def _siblings_overlap(sub_end: np.ndarray, s: np.ndarray, e: np.ndarray, t: np.ndarray) -> bool:
    """Whether two children of one event overlap (nesting order, as ``_nest`` returns it).

    Where events nest properly, the event after a subtree starts at or after its root's end. An
    event whose subtree ended early, at an event of its thread that starts before it ends, was
    popped by that event: the two overlap partially, and are siblings (or the later one has moved
    up further). One O(n) test; the costlier sum is only done where it is true."""
    m = len(s)
    if m < 2:
        return False
    nxt = np.minimum(sub_end, m - 1)
    return bool(((sub_end < m) & (t[nxt] == t) & (s[nxt] < e)).any())


def _sibling_overlap(parent: np.ndarray, s: np.ndarray, e: np.ndarray, n: int) -> np.ndarray:
    """Per event, the time (ns) its children's intervals overlap each other: the sum of their
    lengths minus the length of their union. Children of one parent sorted by start, each one's
    overlap with those before it is from its start to the furthest end before it (their union's
    part after that start is one piece). torch's stack makes a later event a sibling only when it
    starts after the earlier ones end or ends after them."""
    order = np.lexsort((s, parent))
    p, s, e = parent[order], s[order], e[order]
    furthest = pd.Series(e).groupby(p, sort=False).cummax().to_numpy()
    # the furthest end before each child; a parent's first child overlaps nothing before it.
    # Built whole from the children themselves, so an empty set of children gives empty arrays
    # (np.r_[True, ...] would have one row for none: the IndexError of b854553)
    first = np.ones(len(p), dtype=bool)
    first[1:] = p[1:] != p[:-1]
    before = np.where(first, s, np.roll(furthest, 1))
    # only a child that outlasts those before it overlaps them partially; one that ends with them
    # is a tie ``_split_ties`` made siblings (back-to-back calls on a whole-µs clock: each its own time)
    overlap = np.where(e > before, np.clip(before - s, 0, None), 0)
    return np.bincount(p, weights=overlap, minlength=n)


def _children_sum(child_parent: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per event, the sum of ``values`` over its children (int64: byte counts stay exact)."""
    if len(values) and np.abs(values).sum() < 2**53:
        return np.rint(np.bincount(child_parent, weights=values, minlength=n)).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, child_parent, values)
    return out


def _nesting_order(rows: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``rows`` sorted by thread, start, longest first; ties keep the file's order.

    One stable sort of a (thread rank, start) integer: rows come nearly sorted from the file,
    which timsort takes in about one pass; the rare (thread, start) ties are then ordered by
    end. Falls back to a three-key lexsort when the key would not fit in 63 bits."""
    if len(rows) == 0:
        return rows
    t, st = thread[rows], start[rows]
    threads, t_code = _factorize_sorted(t)
    lo, hi = int(st.min()), int(st.max())
    span = hi - lo + 1
    if len(threads) * span >= (1 << 62):
        return rows[np.lexsort((-end[rows], st, t))]
    key = t_code.reshape(-1).astype(np.int64) * span + (st - lo)
    order = np.argsort(key, kind="stable")
    key = key[order]
    out = rows[order]
    tie = np.flatnonzero(key[1:] == key[:-1])
    if len(tie):
        # runs of equal (thread, start): longest first, file order among equals
        tied = np.unique(np.concatenate((tie, tie + 1)))
        run = np.cumsum(np.r_[True, np.diff(tied) > 1] | np.r_[True, key[tied[1:]] != key[tied[:-1]]])
        sub = np.lexsort((-end[out[tied]], run))
        out[tied] = out[tied][sub]
    return out


def _factorize_sorted(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique values, code of each value in them); hashing, then sorting the few uniques."""
    codes, uniques = pd.factorize(values)
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[np.argsort(uniques, kind="stable")] = np.arange(len(uniques))
    return np.sort(uniques), rank[codes]


# --------------------------------------------------------------------------------------- nesting


def lanes(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(thread lane, process) of every event: the keys nesting and memory attribution use.

    In one profile the thread id is the lane. A profile merged from several ranks can repeat
    thread ids (copies of one trace, or ranks on different hosts), so there a lane is a
    (rank, pid, thread) triple; device events keep lane -1. Both arrays are read-only.
    """
    thread = events["thread"].to_numpy()
    if "rank" not in events.columns:
        return thread, np.broadcast_to(np.int64(0), len(thread))  # one process (a view: no memory)
    rank_codes, _ = pd.factorize(events["rank"].to_numpy())
    pid_codes, pids = pd.factorize(events["pid"].to_numpy())
    process = rank_codes.astype(np.int64) * max(len(pids), 1) + pid_codes
    thread_codes, threads = pd.factorize(thread)
    lane = process * max(len(threads), 1) + thread_codes
    return np.where(thread >= 0, lane, -1), process


def _nest(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parents, subtree ends (exclusive) and depths, as positions in nesting order; -1 for roots.

    Events are in nesting order: by thread, start, longest first. For a thread whose events nest
    properly (any two are disjoint or one contains the other):

    - the subtree of i is the run of events after it that start before it ends;
    - its depth is the number of subtrees that cover it, and its parent the last event before it
      one level up.

    Then the result is checked against torch's stack algorithm, which makes ``p`` the parent of
    ``i`` iff (a) ``s_i < e_p`` and ``e_i <= e_p`` (else it pops ``p``) and (b) the event before ``i``
    at its own depth, if it is under ``p`` too, ended by ``s_i`` (else the stack would still hold
    it or one of its descendants). Together these make the stack hold exactly ``i``'s ancestors
    when ``i`` comes. A thread that fails the check (partially overlapping events, e.g. profiler
    overhead that outlives the op it started in) runs the stack algorithm itself.
    """
    m = len(s)
    if m == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    seg_start = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    seg_len = np.diff(np.r_[seg_start, m])
    pos = np.arange(m)
    lo = np.repeat(seg_start, seg_len)  # first position of each event's thread

    # subtree end: the first event of the thread that starts at/after my end (at least pos + 1)
    sub_end = np.empty(m, dtype=np.int64)
    for a, length in zip(seg_start.tolist(), seg_len.tolist()):
        b = a + length
        np.add(np.searchsorted(s[a:b], e[a:b], side="left"), a, out=sub_end[a:b])
        np.clip(sub_end[a:b], pos[a:b] + 1, b, out=sub_end[a:b])

    # depth: subtrees [j, sub_end_j) that cover i, i itself excluded (every earlier thread's
    # subtrees have closed by the thread's first event)
    closes = np.cumsum(np.bincount(sub_end, minlength=m + 1)[:m])
    depth = pos - closes

    # parent: the last event before i at depth - 1; previous sibling: the last one at depth.
    # In (depth, position) order both are searches with increasing keys, which numpy's
    # searchsorted answers from where the previous search ended.
    stride = m + 1
    small = depth.max() < np.iinfo(np.int16).max
    order = np.argsort(depth.astype(np.int16) if small else depth, kind="stable")  # radix sort
    keys = depth[order] * stride + order  # increasing: by depth, then position
    up = np.searchsorted(keys, keys - stride, side="left") - 1
    parent = np.empty(m, dtype=np.int64)
    parent[order] = np.where(depth[order] > 0, order[np.maximum(up, 0)], -1)
    prev = np.r_[-1, order[:-1]]  # the event before, in (depth, position) order
    same_depth = np.r_[False, depth[order][1:] == depth[order][:-1]]
    sibling = np.empty(m, dtype=np.int64)
    sibling[order] = np.where(same_depth, prev, -1)
    sibling = np.where((sibling >= lo) & (sibling > parent), sibling, -1)

    has_parent = parent >= 0
    p = np.maximum(parent, 0)
    ok = ~has_parent | ((s < e[p]) & (e <= e[p]) & (depth[p] == depth - 1))
    ok &= (sibling < 0) | (e[np.maximum(sibling, 0)] <= s)

    if not ok.all():
        for a in np.unique(lo[~ok]).tolist():
            b = a + int(seg_len[np.searchsorted(seg_start, a)])
            p_, se = _nest_with_stack(s[a:b], e[a:b])
            parent[a:b] = np.where(p_ >= 0, p_ + a, -1)
            sub_end[a:b] = se + a
            depth[a:b] = _depth_from_parents(p_)
    return parent, sub_end, depth


def _split_ties(parent: np.ndarray, sub_end: np.ndarray, depth: np.ndarray, s: np.ndarray, e: np.ndarray,
                names: np.ndarray) -> None:
    """Events with the same name, start and end as their parent become its next siblings (in place).

    On a coarse clock (whole µs: torch 1.8-1.9, Meta's format) back-to-back calls of one op can
    share both timestamps; nested, they would be one call with a same-name only child, which the
    same-name collapse merges (22 ``aten::result_type`` calls sharing a timestamp read as fewer
    calls). A real nested call of the same op that starts and ends at the same instant as its
    caller cannot be told apart from them; at ns resolution it does not happen. A run of such
    events (in nesting order each directly follows its parent) hangs from the run's first event's
    parent, at its depth; what was nested in the run stays under the run's last event."""
    p = np.maximum(parent, 0)
    tie = (parent >= 0) & (s == s[p]) & (e == e[p]) & (names == names[p])
    if not tie.any():
        return
    at = np.flatnonzero(tie)
    # runs of consecutive ties: the event before each run is its first event
    run_start = at[np.r_[True, np.diff(at) > 1]]
    run_end = at[np.r_[np.diff(at) > 1, True]]  # the run's last event
    first = run_start - 1
    run_of = np.repeat(np.arange(len(run_start)), run_end - run_start + 1)
    members = at  # the runs, in order: consecutive positions
    shift = depth[run_end] - depth[first]  # how much higher the run's last event (and its subtree) moves
    parent[members] = parent[first[run_of]]
    depth[members] = depth[first[run_of]]
    sub_end[first] = first + 1
    sub_end[members[:-1][np.diff(members) == 1]] = members[:-1][np.diff(members) == 1] + 1
    # what was nested in each run's last event moves up with it
    lift = np.zeros(len(depth) + 1, dtype=np.int64)
    np.add.at(lift, run_end + 1, -shift)
    np.add.at(lift, sub_end[run_end], shift)
    depth += np.cumsum(lift[:-1])


def _depth_from_parents(parent: np.ndarray) -> np.ndarray:
    """Depth of each event, from parents that come before their children."""
    depth = np.zeros(len(parent), dtype=np.int64)
    has = parent >= 0
    # parents precede children: resolve level by level
    current = np.where(has, parent, -1)
    while True:
        more = current >= 0
        if not more.any():
            return depth
        depth[more] += 1
        current[more] = parent[current[more]]


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


def _launchers(kind: np.ndarray, external_id: np.ndarray, correlation: np.ndarray, in_tree: np.ndarray,
               parent: np.ndarray) -> np.ndarray:
    """For each device event, the row of the CPU op that launched it (-1 if none): the op with its
    External id, else the op enclosing the runtime call with its correlation id (``parent``: the
    tree's parents, which runtime calls already have)."""
    n = len(kind)
    out = np.full(n, -1, dtype=np.int64)
    is_work = kind_mask(kind, DEVICE_WORK_CODES)
    work = np.flatnonzero(is_work & (external_id > 0))
    front_mask = kind_mask(kind, _FRONTEND_KINDS) & in_tree
    front = np.flatnonzero(front_mask & (external_id > 0))
    if len(work) and len(front):
        out[work] = _lookup(external_id[front], front, external_id[work])
    # not linked by External id: correlation -> the runtime call -> the op that encloses it
    rest = np.flatnonzero(is_work & (out < 0) & (correlation > 0))
    if len(rest) == 0:
        return out
    calls = np.flatnonzero((kind == KIND_CODE["runtime"]) & in_tree & (correlation > 0))
    if len(calls) == 0:
        return out
    call = _lookup(correlation[calls], calls, correlation[rest])
    op = np.where(call >= 0, parent[np.maximum(call, 0)], -1)
    for _ in range(64):  # a runtime call under profiler overhead: climb to the op around it
        climb = (op >= 0) & ~front_mask[np.maximum(op, 0)]
        if not climb.any():
            break
        op[climb] = parent[op[climb]]
    out[rest] = np.where((op >= 0) & front_mask[np.maximum(op, 0)], op, -1)
    return out


def _lookup(keys: np.ndarray, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The row whose key equals each wanted value (the first row on a rare duplicate key), or -1."""
    order = np.argsort(keys, kind="stable")
    keys_sorted, rows_sorted = keys[order], rows[order]
    at = np.minimum(np.searchsorted(keys_sorted, wanted, side="left"), len(keys_sorted) - 1)
    return np.where(keys_sorted[at] == wanted, rows_sorted[at], -1)


def _memory_in_intervals(
    events: pd.DataFrame,
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    rows: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    process: np.ndarray,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Bytes of the memory events inside [start, end] of each tree event, CPU and device apart
    (None, None when the profile has no memory events).

    Like torch, any thread's allocations count (within the same process). ``rows``, ``s``, ``e``:
    the tree events in nesting order, so the searches come with (mostly) increasing keys."""
    is_mem = kind == KIND_CODE["memory"]
    if not is_mem.any():
        return None, None
    n = len(kind)
    cpu_mem = np.zeros(n, dtype=np.int64)
    dev_mem = np.zeros(n, dtype=np.int64)
    nbytes = events["bytes"].to_numpy()
    on_cpu = category_mask(events["device"], lambda d: d == "cpu")
    mem_all = np.flatnonzero(is_mem)
    procs = distinct(process[mem_all])
    tree_proc = process[rows]
    for proc in procs.tolist():
        mem_rows = mem_all if len(procs) == 1 else mem_all[process[mem_all] == proc]
        mem_rows = mem_rows[np.argsort(start[mem_rows], kind="stable")]  # nearly sorted already
        mt = start[mem_rows]
        cpu_bytes = np.where(on_cpu[mem_rows], nbytes[mem_rows], 0)
        dev_bytes = np.where(on_cpu[mem_rows], 0, nbytes[mem_rows])
        cpu_prefix = np.concatenate(([0], np.cumsum(cpu_bytes)))
        dev_prefix = np.concatenate(([0], np.cumsum(dev_bytes)))
        sel = tree_proc == proc
        if sel.all():
            tree_rows, ts, te = rows, s, e
        else:
            tree_rows, ts, te = rows[sel], s[sel], e[sel]
        a = np.searchsorted(mt, ts, side="left")
        b = np.searchsorted(mt, te, side="right")
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
    pos_parent: np.ndarray,
) -> np.ndarray:
    """Memory events: parent = the innermost tree event on their thread that contains them.

    ``rows``, ``s``, ``e``, ``t``, ``pos_parent``: the tree events in nesting order, their starts,
    ends, threads and parents (as positions)."""
    inst = np.flatnonzero(kind_mask(kind, MEMORY_CODES) & (thread >= 0))
    if len(inst) == 0 or len(rows) == 0:
        return parent
    out = parent.copy()
    # last event (in nesting order) of the same thread that starts at or before the instant
    cand = np.full(len(inst), -1, dtype=np.int64)
    inst_thread = thread[inst]
    threads = distinct(inst_thread)
    for th in threads.tolist():
        a, b = np.searchsorted(t, th, side="left"), np.searchsorted(t, th, side="right")
        if a >= b:
            continue
        sel = slice(None) if len(threads) == 1 else np.flatnonzero(inst_thread == th)
        j = a + np.searchsorted(s[a:b], start[inst[sel]], side="right") - 1
        cand[sel] = np.where(j >= a, j, -1)
    # climb (in position space) until the candidate's interval contains the instant
    tt = start[inst]
    todo = np.flatnonzero(cand >= 0)
    for _ in range(256):
        # instants whose candidate ended before them climb to the candidate's parent
        todo = todo[e[cand[todo]] < tt[todo]]
        if len(todo) == 0:
            break
        cand[todo] = pos_parent[cand[todo]]
        todo = todo[cand[todo] >= 0]
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
