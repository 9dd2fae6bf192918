"""The flame view's call tree against independent answers: pstats for the same run, call
structures computed by hand, and plotly.js itself (which refuses a tree whose children outweigh
their parent). No timing assertions: shapes are checked with ``min_fraction=0`` (nothing merged).
"""

from __future__ import annotations

import math
import os
import pstats
import re
import shutil
import sys
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from nbprof.analysis.callgraph import other_threads_suspected, top_level_time
from nbprof.analysis.flame import TREE_COLUMNS, code_family, display_name, location_label
from nbprof.model import PythonProfile

from .conftest import run

WORKLOAD = """
def b(n):
    return sum(range(n))

def c(n):
    return sorted(range(n, 0, -1))

def a():
    b(20000)
    b(30000)
    c(5000)

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def leaf(n):
    return n * 2

def m1():
    for i in range(40):
        leaf(i)

def m2():
    for i in range(60):
        leaf(i)

def shared():
    m1()
    m2()

a()
fib(15)
shared()
"""


@pytest.fixture(scope="module")
def profiled(ip):
    result, _ = run(ip, "%%cprofile -q -o flame_cp\n" + WORKLOAD)
    assert result.error_in_exec is None
    return ip.user_ns["flame_cp"]


def _pstats_rows(profile) -> dict:
    """pstats' own view of the run (from the live profiler), without nbprof's frames."""
    st = pstats.Stats(profile.profiler)
    return {k: v for k, v in st.stats.items() if "nbprof" not in k[0] and not k[2].startswith("<method 'disable'")}


def _row(tree: pd.DataFrame, function: str, parent_function: str | None = None, **where) -> pd.Series:
    rows = tree[(tree["function"] == function) & (tree["kind"] != "recursive")]
    if parent_function is not None:
        parents = tree["function"].to_numpy()[rows["parent"].to_numpy()]
        rows = rows[parents == parent_function]
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, (function, parent_function, rows)
    return rows.iloc[0]


def check_invariants(tree: pd.DataFrame, max_nodes: int | None = None) -> None:
    """What the module promises for every tree."""
    assert list(tree.columns) == list(TREE_COLUMNS)
    assert tree["id"].tolist() == list(range(len(tree)))
    assert tree["parent"].iloc[0] == -1 and tree["kind"].iloc[0] == "root" and tree["depth"].iloc[0] == 0
    parents = tree["parent"].to_numpy()
    assert (parents[1:] >= 0).all() and (parents[1:] < tree["id"].to_numpy()[1:]).all()  # preorder
    assert (tree["depth"].to_numpy()[1:] == tree["depth"].to_numpy()[parents[1:]] + 1).all()
    values = tree["value_s"].tolist()
    assert all(v >= 0 for v in values)
    assert (tree["self_s"].to_numpy()[1:] <= tree["value_s"].to_numpy()[1:]).all()
    children: dict[int, list[float]] = {}
    for p, v in zip(parents[1:].tolist(), values[1:]):
        children.setdefault(p, []).append(v)
    for p, kids in children.items():
        assert math.fsum(kids) <= values[p], (p, math.fsum(kids), values[p])  # exactly, no tolerance
        assert tree["kind"].iloc[p] not in ("recursive", "other")  # markers are leaves
    # no function is expanded below itself: recursion stops at the marker
    funcs = tree["function"].tolist()
    files = tree["filename"].tolist()
    lines = tree["lineno"].tolist()
    kinds = tree["kind"].tolist()
    for i in range(1, len(tree)):
        if kinds[i] != "function":
            continue
        p = parents[i]
        while p > 0:
            assert (funcs[p], files[p], lines[p]) != (funcs[i], files[i], lines[i]) or kinds[p] != "function", i
            p = parents[p]
    if max_nodes is not None:
        assert len(tree) <= max_nodes


# ------------------------------------------------------------------ a real run against pstats


def test_root_is_the_sum_of_top_level_cumtimes_from_pstats(profiled):
    rows = _pstats_rows(profiled)
    # called by the cell only (or themselves: fib)
    roots = {k: v for k, v in rows.items() if not any(c in rows and c != k for c in v[4])}
    assert {k[2] for k in roots} >= {"a", "fib", "shared"}
    tree = profiled.call_tree(min_fraction=0)
    check_invariants(tree)
    assert tree["value_s"].iloc[0] == math.fsum(v[3] for v in roots.values())
    # and that is the time inside profiled functions: pstats' total_tt
    assert tree["value_s"].iloc[0] == pytest.approx(pstats.Stats(profiled.profiler).total_tt -
                                                    sum(v[2] for k, v in pstats.Stats(profiled.profiler).stats.items()
                                                        if k not in rows), rel=1e-9)
    assert tree["value_s"].iloc[0] == pytest.approx(profiled.total_s, rel=1e-9)
    assert top_level_time(profiled.stats, profiled.edges) == tree["value_s"].iloc[0]


def test_tree_shape_and_numbers_equal_pstats(profiled):
    rows = _pstats_rows(profiled)
    by_name = {k[2]: (k, v) for k, v in rows.items() if k[2] in ("a", "b", "c", "fib", "leaf", "m1", "m2", "shared")}
    tree = profiled.call_tree(min_fraction=0)

    a = _row(tree, "a", None, depth=1)
    assert a["value_s"] == by_name["a"][1][3]  # cumtime: a is only called by the cell
    assert a["self_s"] == pytest.approx(by_name["a"][1][2], rel=1e-12)
    assert a["ncalls"] == 1 and a["family"] == "cell" and a["label"].startswith("In [")

    kids = tree[tree["parent"] == a["id"]]
    assert set(kids["function"]) == {"b", "c"}  # a() calls b() twice and c() once
    b = _row(tree, "b", "a")
    c = _row(tree, "c", "a")
    assert b["ncalls"] == 2 and c["ncalls"] == 1
    (_, b_stats), (_, c_stats) = by_name["b"], by_name["c"]
    assert b["value_s"] == pytest.approx(b_stats[3], rel=1e-12) and b["value_s"] <= a["value_s"]
    assert c["value_s"] == pytest.approx(c_stats[3], rel=1e-12)
    assert b_stats[4][by_name["a"][0]][0] == 2  # the edge pstats reports
    builtin_sum = _row(tree, "<built-in method builtins.sum>", "b")
    assert builtin_sum["name"] == "sum" and builtin_sum["family"] == "builtin" and builtin_sum["ncalls"] == 2
    assert builtin_sum["label"] == "{built-in method builtins.sum}"  # as pstats prints it
    assert _row(tree, "<built-in method builtins.sorted>", "c")["ncalls"] == 1


def test_shared_function_is_apportioned_by_path(profiled):
    """leaf() is called from m1 (40 calls) and m2 (60 calls): one node per path, each with
    pstats' edge numbers, adding up to leaf's cumtime."""
    rows = _pstats_rows(profiled)
    leaf_key, leaf = next((k, v) for k, v in rows.items() if k[2] == "leaf")
    edges = {caller[2]: e for caller, e in leaf[4].items()}
    tree = profiled.call_tree(min_fraction=0)
    nodes = tree[tree["function"] == "leaf"]
    assert len(nodes) == 2
    for node in nodes.itertuples():
        caller = tree["function"].iloc[node.parent]
        assert node.ncalls == edges[caller][0]
        assert node.value_s == pytest.approx(edges[caller][3], rel=1e-12)
    assert sorted(nodes["ncalls"]) == [40, 60]
    assert math.fsum(nodes["value_s"]) == pytest.approx(leaf[3], rel=1e-12)


def test_recursion_gives_a_finite_tree_with_a_marker(profiled):
    rows = _pstats_rows(profiled)
    fib_key, fib = next((k, v) for k, v in rows.items() if k[2] == "fib")
    assert (fib[1], fib[0]) == (1973, 1)  # fib(15): 1973 calls, 1 primitive
    tree = profiled.call_tree(min_fraction=0)
    nodes = tree[tree["function"] == "fib"]
    assert len(nodes) == 2  # the call from the cell, and one marker for all deeper levels
    top = nodes[nodes["kind"] == "function"].iloc[0]
    marker = nodes[nodes["recursive"]].iloc[0]
    assert top["depth"] == 1 and top["value_s"] == fib[3]
    assert marker["parent"] == top["id"] and marker["kind"] == "recursive" and marker["name"] == "fib ↻"
    assert marker["ncalls"] == fib[4][fib_key][0] == 1972
    assert 0 < marker["value_s"] <= top["value_s"]
    assert (tree["parent"] == marker["id"]).sum() == 0


def test_tiny_branches_are_merged(profiled):
    tree = profiled.call_tree(min_fraction=0.2)
    check_invariants(tree)
    root = tree["value_s"].iloc[0]
    named = tree[tree["kind"] != "root"]
    # every box is big, or merged: an "other" box, or the only small one under its parent
    small = named[named["value_s"] < 0.2 * root]
    lone = small[small["kind"] != "other"]
    assert lone["parent"].duplicated().sum() == 0
    assert not set(lone["parent"]) & set(small.loc[small["kind"] == "other", "parent"])
    assert tree[tree["kind"] == "other"]["name"].str.match(r"^other \(\d+ functions\)$").all()


def test_hand_computed_merging():
    """main calls big (5 s) and five small functions (1 s each, one of which calls deeper)."""
    spec = {"main": (1, 1, 0.5, 10.5, {}), "big": (1, 1, 5.0, 5.0, {"main": (1, 1, 5.0, 5.0)})}
    for i in range(5):
        spec[f"s{i}"] = (1, 1, 1.0 if i else 0.5, 1.0, {"main": (1, 1, 1.0 if i else 0.5, 1.0)})
    spec["deep"] = (1, 1, 0.5, 0.5, {"s0": (1, 1, 0.5, 0.5)})
    tree = PythonProfile(_raw(spec)).call_tree(min_fraction=0.2)  # the threshold: 2.1 s
    check_invariants(tree)
    assert tree["name"].tolist() == ["cell", "main", "big", "other (5 functions)"]
    other = tree.iloc[3]
    assert (other["value_s"], other["self_s"], other["ncalls"], other["kind"]) == (5.0, 4.5, 5.0, "other")
    assert other["family"] == "other" and other["function"] == "" and not other["recursive"]
    one = PythonProfile(_raw({k: spec[k] for k in ("main", "big", "s0", "deep")})).call_tree(min_fraction=0.2)
    assert one["name"].tolist() == ["cell", "main", "big", "s0"]  # a lone small one keeps its name
    full = PythonProfile(_raw(spec)).call_tree(min_fraction=0)
    assert len(full) == 9 and "deep" in set(full["function"])


def test_call_tree_is_cached_and_handed_out_as_a_copy(profiled):
    t1 = profiled.call_tree()
    t1["value_s"] = 0.0
    assert profiled.call_tree()["value_s"].iloc[0] > 0
    with pytest.raises(ValueError):
        profiled.call_tree(min_fraction=1.5)


# ------------------------------------------------------------------ structures computed by hand


def _raw(spec: dict) -> dict:
    """{name: (primitive, ncalls, tottime, cumtime, {caller: (ncalls, primitive, tottime, cumtime)})}
    -> cProfile's raw stats with ("mod.py", line, name) keys."""
    keys = {name: ("mod.py", i + 1, name) for i, name in enumerate(spec)}
    return {keys[n]: (cc, nc, tt, ct, {keys[c]: e for c, e in callers.items()})
            for n, (cc, nc, tt, ct, callers) in spec.items()}


def test_hand_computed_diamond():
    """main -> p -> u (2 calls, 3 s), main -> q -> u (1 call, 4 s), u -> w (7 calls, 2 s):
    w's 2 s are shared between the two paths in proportion to u's time on each (3/7, 4/7)."""
    raw = _raw({
        "main": (1, 1, 1.0, 10.0, {}),
        "p": (1, 1, 1.0, 4.0, {"main": (1, 1, 1.0, 4.0)}),
        "q": (1, 1, 1.0, 5.0, {"main": (1, 1, 1.0, 5.0)}),
        "u": (3, 3, 5.0, 7.0, {"p": (2, 2, 2.0, 3.0), "q": (1, 1, 3.0, 4.0)}),
        "w": (7, 7, 2.0, 2.0, {"u": (7, 7, 2.0, 2.0)}),
    })
    tree = PythonProfile(raw).call_tree(min_fraction=0)
    check_invariants(tree)
    got = {(tree["function"].iloc[r.parent] if r.parent > 0 else None, r.function): (r.value_s, r.ncalls, r.self_s)
           for r in tree.iloc[1:].itertuples()}
    assert tree["value_s"].iloc[0] == 10.0
    assert got[(None, "main")][:2] == (10.0, 1)
    assert got[("main", "q")][:2] == (5.0, 1) and got[("main", "p")][:2] == (4.0, 1)
    u_q = tree[(tree["function"] == "u") & (tree["parent"] == _row(tree, "q")["id"])].iloc[0]
    u_p = tree[(tree["function"] == "u") & (tree["parent"] == _row(tree, "p")["id"])].iloc[0]
    assert (u_q["value_s"], u_q["ncalls"]) == (4.0, 1) and (u_p["value_s"], u_p["ncalls"]) == (3.0, 2)
    assert u_q["self_s"] == pytest.approx(5.0 * 4 / 7) and u_p["self_s"] == pytest.approx(5.0 * 3 / 7)
    w = tree[tree["function"] == "w"]
    w_under = {int(tree["id"].iloc[p]): (v, n) for p, v, n in zip(w["parent"], w["value_s"], w["ncalls"])}
    assert w_under[int(u_p["id"])][0] == pytest.approx(2.0 * 3 / 7)
    assert w_under[int(u_q["id"])][0] == pytest.approx(2.0 * 4 / 7)
    assert w_under[int(u_p["id"])][1] == pytest.approx(7 * 2 / 3)  # u's calls on this path: 2 of 3
    assert math.fsum(w["value_s"]) == pytest.approx(2.0)
    assert [tree["function"].iloc[i] for i in tree.index[tree["parent"] == 1]] == ["q", "p"]  # biggest first


def test_hand_computed_reentered_exec():
    """python -m cProfile's exec runs the script, and again, nested, each module the script imports:
    exec (10 s) -> script (own 6 s) -> imp -> exec (nested) -> mod (4 s). The edge exec -> mod's
    4 s are inside exec -> script's 10: the children of exec are placed biggest first, so the
    script keeps its whole cumtime (scaled in proportion it had 10 * 10 / 14)."""
    raw = _raw({
        "exec": (1, 2, 0.0, 10.0, {"imp": (1, 1, 0.0, 4.0)}),
        "script": (1, 1, 6.0, 10.0, {"exec": (1, 1, 6.0, 10.0)}),
        "imp": (1, 1, 0.0, 4.0, {"script": (1, 1, 0.0, 4.0)}),
        "mod": (1, 1, 4.0, 4.0, {"exec": (1, 1, 4.0, 4.0)}),
    })
    tree = PythonProfile(raw).call_tree(min_fraction=0)
    check_invariants(tree)
    assert [(r.name, r.depth, r.value_s) for r in tree.itertuples()] == [
        ("cell", 0, 10.0), ("exec", 1, 10.0), ("script", 2, 10.0), ("imp", 3, 4.0), ("exec ↻", 4, 4.0)]


def test_hand_computed_mutual_recursion_and_top_level_shares():
    """a <-> b recurse (a called once by the cell); f is called by the cell and by g."""
    # the run: a1 (own 1 s) -> b1 (2 s) -> a2 (2 s) -> b2 (3 s); g (2 s) -> f (2 s); f (3 s)
    raw = _raw({
        "a": (1, 2, 3.0, 8.0, {"b": (1, 1, 2.0, 5.0)}),
        "b": (1, 2, 5.0, 7.0, {"a": (2, 1, 5.0, 7.0)}),
        "g": (1, 1, 2.0, 4.0, {}),
        "f": (2, 2, 5.0, 5.0, {"g": (1, 1, 2.0, 2.0)}),
    })
    profile = PythonProfile(raw)
    tree = profile.call_tree(min_fraction=0)
    check_invariants(tree)
    top = {r.function: r.value_s for r in tree[tree["depth"] == 1].itertuples()}
    # a: the call from b runs inside a's own outer call, so a's whole cumtime is top level;
    # f: 2 of its 5 s were spent on behalf of g, so 3 s are the cell's
    assert top == {"a": 8.0, "g": 4.0, "f": 3.0}
    assert tree["value_s"].iloc[0] == 15.0 == profile.total_s  # = 1 + 2 + 2 + 3 + 2 + 2 + 3
    b = _row(tree, "b", "a")
    assert b["value_s"] == 7.0
    marker = tree[tree["recursive"]]
    assert len(marker) == 1 and marker["function"].iloc[0] == "a" and marker["parent"].iloc[0] == b["id"]
    assert marker["value_s"].iloc[0] == 5.0 and marker["name"].iloc[0] == "a ↻"
    assert _row(tree, "f", "g")["value_s"] == 2.0
    assert _row(tree, "f", None, depth=1)["ncalls"] == 1


def test_recursive_marker_gets_only_the_time_its_siblings_do_not_show():
    """fib -> fib and fib -> h: cProfile's fib->fib edge covers the deeper h calls too."""
    raw = _raw({
        "fib": (1, 9, 3.0, 10.0, {"fib": (8, 2, 2.7, 9.0)}),
        "h": (5, 5, 7.0, 7.0, {"fib": (5, 5, 7.0, 7.0)}),
    })
    tree = PythonProfile(raw).call_tree(min_fraction=0)
    check_invariants(tree)
    fib = _row(tree, "fib", None, depth=1)
    h = _row(tree, "h", "fib")
    marker = tree[tree["recursive"]].iloc[0]
    assert (fib["value_s"], h["value_s"]) == (10.0, 7.0)
    assert marker["value_s"] == 3.0  # min(9, 10 - 7)
    assert marker["ncalls"] == 8


def test_exponential_call_graph_stays_bounded():
    """40 layers of 3 functions, each calling all 3 of the next layer: 3**40 paths."""
    layers, width = 40, 3
    spec: dict = {"L0_0": (1, 1, 1.0, float(layers + 1), {})}
    prev = ["L0_0"]
    for k in range(1, layers + 1):
        layer = [f"L{k}_{j}" for j in range(width)]
        ct = float(layers - k + 1)
        for name in layer:
            spec[name] = (len(prev), len(prev), 1.0, ct, {c: (1, 1, 1.0 / len(prev), ct / len(prev)) for c in prev})
        prev = layer
    profile = PythonProfile(_raw(spec))
    for max_nodes in (50, 2000):
        tree = profile.call_tree(min_fraction=0, max_nodes=max_nodes)
        check_invariants(tree, max_nodes)
        assert len(tree) > max_nodes // 2  # each expanded box may hold back one row for its "other"
        assert (tree["kind"] == "other").any()
    default = profile.call_tree()
    check_invariants(default, 2000)


def test_empty_profile():
    profile = PythonProfile({})
    tree = profile.call_tree()
    check_invariants(tree)
    assert len(tree) == 1 and tree["value_s"].iloc[0] == 0
    fig = profile.flame()
    assert fig.data[0].type == "icicle"


def test_big_generated_profile_stays_under_the_node_bound(ip):
    """5,000 generated functions (a binary call tree) from a real run."""
    n = 5000
    src = "\n".join(
        f"def g{i}():\n" + "".join(f"    g{j}()\n" for j in (2 * i + 1, 2 * i + 2) if j < n) + "    return 0"
        for i in range(n)
    )
    ip.user_ns["_flame_src"] = src
    run(ip, "exec(_flame_src, globals())")
    result, _ = run(ip, "%%cprofile -q -o flame_big\ng0()")
    assert result.error_in_exec is None
    big = ip.user_ns["flame_big"]
    assert len(big.stats) >= n
    for kw, bound in (({}, 2000), ({"max_nodes": 300, "min_fraction": 0}, 300), ({"min_fraction": 0}, 2000)):
        tree = big.call_tree(**kw)
        check_invariants(tree, bound)
        assert tree["value_s"].iloc[0] == pytest.approx(big.total_s, rel=1e-9)
    fig = big.flame()
    assert len(fig.data[0].ids) <= 2000


# ------------------------------------------------------------------ names and families


def test_names_and_families():
    assert display_name("<built-in method time.sleep>") == "time.sleep"
    assert display_name("<built-in method builtins.sum>") == "sum"
    assert display_name("<method 'append' of 'list' objects>") == "list.append"
    assert display_name("leaf") == "leaf"
    assert location_label("~", 0, "<built-in method time.sleep>") == pstats.func_std_string(
        ("~", 0, "<built-in method time.sleep>"))
    assert location_label("/tmp/x/ipykernel_1/123.py", 4, "f", {"/tmp/x/ipykernel_1/123.py": "In [3]"}) == "In [3]:4(f)"
    assert location_label("/usr/lib/python3/site-packages/numpy/core/fromnumeric.py", 5, "sum") == \
        "…/core/fromnumeric.py:5(sum)"
    import json

    assert code_family(json.__file__) == ("stdlib", "json")
    assert code_family("/x/lib/python3.11/site-packages/numpy/core/_methods.py") == ("package", "numpy")
    assert code_family("/x/lib/python3.11/site-packages/six.py") == ("package", "six")
    assert code_family("~") == ("builtin", "")
    assert code_family("/tmp/ipykernel_12/3456.py") == ("cell", "")
    assert code_family("<ipython-input-3-abc>") == ("cell", "")
    assert code_family("/home/me/project/train.py") == ("user", "")


# ------------------------------------------------------------------ views


def test_flame_figure(profiled):
    import plotly.graph_objects as go

    tree = profiled.call_tree()
    fig = profiled.flame()
    assert isinstance(fig, go.Figure)
    (trace,) = fig.data
    assert trace.type == "icicle" and trace.branchvalues == "total" and trace.maxdepth == 6
    assert list(trace.ids) == [str(i) for i in tree["id"]]
    assert list(trace.parents) == [""] + [str(p) for p in tree["parent"].iloc[1:]]
    assert list(trace.values) == tree["value_s"].tolist()
    # each box reads its name (bold) over its time, the time as the tree's value in seconds
    assert trace.texttemplate == "<b>%{label}</b><br>%{text}"
    assert all(t.endswith(" s") or t.endswith("ms") or t.endswith("µs") for t in trace.text), list(trace.text)[:5]
    a = int(_row(tree, "a", None, depth=1)["id"])
    hover = trace.hovertext[a]
    assert "cumtime" in hover and "tottime" in hover and "ncalls 1" in hover and "% of the cell" in hover
    colors = list(trace.marker.colors)
    assert colors[a] != colors[int(_row(tree, "<built-in method builtins.sum>", "b")["id"])]
    assert profiled.flame(maxdepth=3).data[0].maxdepth == 3
    # built without plotly's validation: the same figure must pass it
    checked = go.Figure(fig.to_dict())
    assert checked.data[0].type == "icicle" and checked.layout.height == fig.layout.height
    titled = profiled.flame(title="cell <3>", height=400)
    assert go.Figure(titled.to_dict()).layout.title.text == "cell &lt;3&gt;" and titled.layout.height == 400
    assert (titled.layout.title.x, titled.layout.title.y) == (0.01, 0.98)  # top left, over the boxes
    # nothing recorded: the empty figure says so
    from nbprof.model import PythonProfile
    from nbprof.views.flame import flame_figure

    empty = flame_figure(PythonProfile({}).call_tree())
    assert [a.text for a in empty.layout.annotations] == ["no Python function calls were recorded"]


def test_figure_renders_without_the_global_plotly_renderer(profiled, ip):
    import plotly.io as pio
    from IPython.display import display
    from IPython.utils.capture import capture_output
    from plotly.io._base_renderers import MimetypeRenderer

    class Boom(MimetypeRenderer):
        def to_mimebundle(self, fig_dict):
            raise AssertionError("the global plotly renderer was used")

    pio.renderers["nbprof_boom"] = Boom()
    saved = pio.renderers.default
    pio.renderers.default = "nbprof_boom"
    try:
        fig = profiled.flame()
        data, _ = ip.display_formatter.format(fig)
        with capture_output() as captured:
            display(fig)
    finally:
        pio.renderers.default = saved
    assert captured.outputs[0].data.keys() == data.keys()
    assert "application/vnd.plotly.v1+json" in data
    spec = data["application/vnd.plotly.v1+json"]
    assert spec["data"][0]["type"] == "icicle" and spec["config"]["displaylogo"] is False
    # the SVG, as a drawing that hides cleanly where outputs are sanitized (views.figure.drawing_html)
    drawing = re.fullmatch(r'<style>[^<]*</style><div class="nbprof-drawing"[^>]* hidden="hidden">(<svg.*</svg>)</div>'
                           r'<div class="nbprof-unstyled"[^>]*>[^<]*</div>', data["text/html"], re.S)
    assert drawing and "cumtime" in drawing.group(1)
    assert data["text/plain"].startswith("<flame graph: ")


def test_flame_svg(profiled):
    from nbprof.views.flame import flame_svg

    tree = profiled.call_tree(min_fraction=0)
    svg = flame_svg(tree, width=800)
    root = ET.fromstring(svg)  # well-formed XML, no script
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and "<script" not in svg
    groups = list(root.iter(f"{ns}g"))
    assert 3 <= len(groups) <= len(tree)
    titles = [g.find(f"{ns}title").text for g in groups]
    assert any(t.startswith("In [") and "cumtime" in t and "ncalls" in t for t in titles)
    widths = [float(g.find(f"{ns}rect").get("width")) for g in groups]
    assert max(widths) <= 800
    assert len(svg) < 200_000
    small = flame_svg(tree, width=400, height=60)
    assert 'height="60"' in small
    assert "no Python function calls" in flame_svg(PythonProfile({}).call_tree())


def test_figure_draws_in_chromium_without_plotly_warnings(profiled, tmp_path):
    """plotly.js checks that no node's children outweigh it ("branchvalues: total")."""
    pytest.importorskip("playwright")
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(chromium):
        pytest.skip("chromium is not installed")
    from playwright.sync_api import sync_playwright

    tree = profiled.call_tree(min_fraction=0)
    path = tmp_path / "flame.html"
    profiled.flame(min_fraction=0, maxdepth=20).write_html(str(path), include_plotlyjs=True)
    messages: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            page.on("console", lambda m: messages.append(m.text))
            page.goto(path.as_uri())
            page.wait_for_selector("g.slice", timeout=20_000)
            drawn = page.locator("g.slice").count()
        finally:
            browser.close()
    assert not [m for m in messages if "smaller than the sum" in m or "Failed to build" in m]
    assert 0 < drawn <= len(tree)


# ------------------------------------------------------------------ threads


def test_other_threads_check_is_quiet_on_one_thread(profiled):
    assert not other_threads_suspected(profiled.stats, profiled.edges, profiled.meta.wall_s)
    raw = _raw({"x": (1, 1, 5.0, 3.0, {})})  # more own time than cumulative: not one stack
    p = PythonProfile(raw)
    assert other_threads_suspected(p.stats, p.edges, None)


# a cell's function that keeps a thread in Python (also tests/test_mutants_seed63_other.py)
SPIN = """
def spin(n):
    s = 0
    for i in range(n):
        s += i
    return s
"""

THREADED = "import threading" + SPIN + """def worker(stop):
    while not stop.is_set():
        spin(20_000)
_stop = threading.Event()
_t = threading.Thread(target=worker, args=(_stop,))
"""


def test_threads_started_by_the_cell(ip):
    """What cProfile sees of a thread the cell runs: nothing before 3.12; from 3.12 on, its
    calls, mixed into the cell's (and the check says so)."""
    run(ip, THREADED)
    result, _ = run(ip, "%%cprofile -q -o flame_thr\n_t.start()\nfor _ in range(40):\n    spin(20_000)\n"
                        "_stop.set()\n_t.join()")
    assert result.error_in_exec is None
    prof = ip.user_ns["flame_thr"]
    seen = set(prof.stats["function"])
    if sys.version_info < (3, 12):
        assert "worker" not in seen
        assert not other_threads_suspected(prof.stats, prof.edges, prof.meta.wall_s)
    else:
        assert "worker" in seen
    tree = prof.call_tree()
    check_invariants(tree, 2000)
