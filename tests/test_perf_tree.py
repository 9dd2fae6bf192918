"""The vectorized event tree and key averages against plain reference implementations.

The fast paths (``nbprof.analysis.tree._nest``: nesting from subtree ends, checked against the
stack algorithm's conditions; ``key_averages``: bincount grouping) are compared here with
straightforward Python written from torch's own description, on random intervals that nest,
overlap partially, have zero length and tie.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nbprof.analysis.tree import _nest


def torch_stack_parents(s: list[int], e: list[int], t: list[int]) -> list[int]:
    """torch's ``EventList._build_tree`` nesting, one thread at a time, events in nesting order."""
    parent = [-1] * len(s)
    stacks: dict[int, list[int]] = {}
    for i in range(len(s)):
        stack = stacks.setdefault(t[i], [])
        while stack:
            top = stack[-1]
            if s[i] >= e[top] or e[i] > e[top]:
                stack.pop()
            else:
                parent[i] = top
                break
        stack.append(i)
    return parent


def reference_depth(parent: list[int]) -> list[int]:
    depth = []
    for i, p in enumerate(parent):
        depth.append(0 if p < 0 else depth[p] + 1)
    return depth


def reference_sub_end(parent: list[int], t: list[int]) -> list[int]:
    """Exclusive end of each subtree: the first later event of the thread that is not a descendant."""
    m = len(parent)
    out = []
    for i in range(m):
        j = i + 1
        while j < m and t[j] == t[i]:
            a = parent[j]
            while a >= 0 and a != i:
                a = parent[a]
            if a != i:
                break
            j += 1
        out.append(j)
    return out


def random_events(rng: np.random.Generator, n: int, overlap: bool, threads: int):
    """Nested intervals (a random forest laid out in time), plus optional partial overlaps."""
    s, e, t = [], [], []
    for th in range(threads):
        clock = 0

        def emit(depth: int) -> None:
            nonlocal clock
            start = clock
            clock += int(rng.integers(0, 3))
            children = int(rng.integers(0, 4)) if depth < 5 and rng.random() > 0.15 else 0
            for _ in range(children):
                if len(s) >= n:
                    break
                emit(depth + 1)
                clock += int(rng.integers(0, 2))  # siblings may touch (end == next start)
            end = clock
            if children == 0 and rng.random() < 0.3:  # zero-length leaves, also at a parent's edge
                end = clock = start
            s.append(start)
            e.append(end)
            t.append(th)
            clock = max(clock, end)

        while len(s) < n * (th + 1) // threads:
            emit(0)
            clock += int(rng.integers(0, 2))
    s, e, t = np.array(s), np.array(e), np.array(t)
    if overlap:  # a few events that outlive their parent (profiler overhead does this)
        k = max(1, len(s) // 50)
        idx = rng.choice(len(s), size=k, replace=False)
        e[idx] = e[idx] + rng.integers(1, 20, size=k)
    order = np.lexsort((-e, s, t))
    return s[order], e[order], t[order]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("overlap", [False, True])
def test_nesting_equals_torchs_stack(seed, overlap):
    rng = np.random.default_rng(seed)
    s, e, t = random_events(rng, int(rng.integers(1, 400)), overlap, threads=int(rng.integers(1, 4)))
    parent, sub_end, depth = _nest(s, e, t)
    expected = torch_stack_parents(s.tolist(), e.tolist(), t.tolist())
    assert parent.tolist() == expected
    assert depth.tolist() == reference_depth(expected)
    assert sub_end.tolist() == reference_sub_end(expected, t.tolist())


def test_nesting_of_ties_and_zero_length_events():
    # same start, same end (file order decides), zero-length at a parent's start and end
    s = np.array([0, 0, 0, 0, 5, 10, 10])
    e = np.array([10, 10, 4, 0, 5, 10, 12])
    t = np.zeros(7, dtype=np.int64)
    parent, _, _ = _nest(s, e, t)
    assert parent.tolist() == torch_stack_parents(s.tolist(), e.tolist(), t.tolist())


def reference_key_averages(events: pd.DataFrame, group_by: str) -> dict:
    from nbprof.analysis.key_averages import averaged_rows

    sub = events[averaged_rows(events)]
    out: dict = {}
    for _, r in sub.iterrows():
        name = "ProfilerStep*" if str(r["name"]).startswith("ProfilerStep#") else str(r["name"])
        key = (name, str(r["input_shapes"]) if group_by == "shape" else "", str(r["kind"]))
        acc = out.setdefault(key, {"count": 0, "cpu_total_us": 0.0, "self_cpu_us": 0.0,
                                   "device_total_us": 0.0, "self_device_us": 0.0})
        tree = r["kind"] not in ("kernel", "memcpy", "memset", "memory", "oom")
        acc["count"] += 1
        acc["cpu_total_us"] += r["dur_us"] if tree else 0.0
        acc["self_cpu_us"] += r["self_cpu_us"] if tree else 0.0
        acc["device_total_us"] += r["device_total_us"]
        acc["self_device_us"] += r["self_device_us"]
    return out


@pytest.mark.parametrize("group_by", ["op", "shape"])
def test_key_averages_equal_a_plain_groupby(group_by):
    from .conftest import TRACES, trace_path
    import nbprof

    for name in TRACES:
        p = nbprof.load_trace(trace_path(name))
        expected = reference_key_averages(p.events, group_by)
        ours = p.key_averages(group_by)
        assert len(ours) == len(expected)
        for r in ours.to_dict("records"):
            key = (r["name"], str(r.get("input_shapes", "")) if group_by == "shape" else "", r["kind"])
            ref = expected[key]
            assert r["count"] == ref["count"]
            for c in ("cpu_total_us", "self_cpu_us", "device_total_us", "self_device_us"):
                assert r[c] == pytest.approx(ref[c], abs=1e-6), (key, c)


@pytest.mark.parametrize("seed", range(10))
def test_nesting_order_equals_a_three_key_lexsort(seed):
    from nbprof.analysis.tree import _nesting_order

    rng = np.random.default_rng(seed)
    n = 2000
    thread = rng.choice([7, 123456, 140234567890123, 3], size=n)  # OS thread ids of any size
    start = rng.integers(0, 50, size=n)  # many ties
    end = start + rng.integers(0, 5, size=n)
    rows = np.sort(rng.choice(n, size=n // 2, replace=False))
    expected = rows[np.lexsort((-end[rows], start[rows], thread[rows]))]
    assert _nesting_order(rows, thread, start, end).tolist() == expected.tolist()
