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


@pytest.mark.parametrize("group_by", ["op", "shape"])
def test_key_averages_equal_a_plain_groupby(group_by):
    """Key averages against tests/reference.py: torch's tree, kernels and memory rebuilt from the
    file in plain Python, one object per event (nothing of nbprof's). Grouped by shape, the rows
    of a name add up to its row, and there is a row per distinct "Input Dims" of its calls."""
    import json

    from .conftest import TRACES, trace_path
    from .reference import Model, read
    import nbprof

    for name in TRACES:
        p = nbprof.load_trace(trace_path(name))
        model = Model(read(trace_path(name)))
        expected = model.key_averages()
        ours = p.key_averages(group_by)
        sums = ours.groupby(["name", "kind"], sort=False)[["count", "cpu_total_us", "self_cpu_us", "device_total_us",
                                                           "self_device_us"]].sum()
        assert set(sums.index) == set(expected), name
        for key, ref in expected.items():
            for c in ("count", "cpu_total_us", "self_cpu_us", "device_total_us", "self_device_us"):
                assert sums.loc[key, c] == pytest.approx(ref[c], abs=1e-6), (name, key, c)
        if group_by == "shape":
            doc = read(trace_path(name))
            dims: dict = {}
            for ev in model.live():
                key = ("ProfilerStep*" if ev.name.startswith("ProfilerStep#") else ev.name, ev.kind)
                shapes = doc["traceEvents"][ev.index].get("args", {}).get("Input Dims")
                dims.setdefault(key, set()).add(json.dumps(shapes, default=str))
            tree_rows = ours[ours["kind"].isin(["op", "annotation", "runtime", "overhead"])]
            per_name = tree_rows.groupby(["name", "kind"]).size()
            assert {k: int(v) for k, v in per_name.items()} == {k: len(v) for k, v in dims.items()}, name


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
