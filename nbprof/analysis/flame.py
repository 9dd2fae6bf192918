"""A call tree for the flame (icicle) view, apportioned from cProfile's call graph.

cProfile does not record stacks. It records, per function F, its calls ``N_F`` (and primitive,
i.e. non-recursive, calls ``P_F``), its own time ``T_F`` (tottime, all calls) and its cumulative
time ``C_F`` (cumtime, counted on primitive calls only, so recursion is not counted twice); and per
edge P -> F the same numbers for the calls P made: ``n(P,F)``, ``t(P,F)``, ``c(P,F)``. That is a
*graph*. A flame view needs a *tree* (one box per call path), so the time of a function reached
along several paths has to be shared out between them. We do it in the spirit of gprof and
snakeviz, with cProfile's per-edge times (gprof only has call counts):

**Top-level functions.** Profiling starts inside the cell, so the cell's own top-level code is no
function to cProfile: the functions it calls directly have calls that no edge explains,
``N_F - sum_P n(P,F) > 0``. Those are the roots. Their top-level time is
``top(F) = C_F - sum c(P,F)`` over callers P outside F's recursion cycle (strongly connected
component): calls from inside the cycle run within F's own outer calls, so they are not
subtracted. For a function only the cell calls (the usual case) ``top(F) = C_F``, pstats' cumtime.
A synthetic root node (``"cell"``) has value ``sum top(F)``.

**Path share.** A node for function F on some path, with value ``v``, stands for the share
``s = v / C_F`` of F's cumulative time. Its child for a callee G gets ``c(F,G) * s``: G's time
on behalf of F, scaled by the share of F's time that came along this path. When F is reached
along one path only, ``s = 1`` and the node shows pstats' numbers exactly; when F is reached along
several, the nodes for F add up to ``C_F`` (the approximation: each path is assumed to call G in
the same proportion). Calls follow the same rule with call counts
(``n(F,G) * calls on this path / P_F``); own time is ``T_F * s``.

**Recursion.** A callee already on the current path (F calling itself, or a cycle) is not
expanded: it becomes one leaf marked ``recursive``. Its edge time overlaps the time its siblings
already show (cProfile's edge times count every recursion level), so the non-recursive children
are placed first and the recursive leaf gets at most what remains of the parent's value:
``min(c(F,G) * s, v - sum of the other children)``.

**Fitting.** Where the children's shares add up to more than their parent, they are made to fit.
Under a function that recursed (called again, nested, from inside one of its callees: ``exec``
under ``python -m cProfile``, re-entered by every ``import`` the script runs), the overflow is the
nested calls' edges, whose time is already inside the callee they were made from: the children
are placed biggest first, each given what is left of the parent (measured on a script that
imports json: scaling in proportion gave its ``main`` 56 % of its cumtime, and the imports'
module code twice). Elsewhere (the timer's rounding, a profile mixing several threads on Python
3.12+) they are scaled down in proportion.

**Invariants** (checked by tests/test_flame.py):

- every node's value is >= the sum of its children's values (exactly, in floating point), so the
  icicle with ``branchvalues="total"`` is valid; values are never negative;
- the root's value is the sum of the top-level functions' ``top(F)`` (for functions only the cell
  calls, their pstats cumtime). That sum is the time spent inside profiled functions, which is also
  ``sum T_F`` (``PythonProfile.total_s``, pstats' "in N seconds") up to the timer's rounding,
  when cProfile saw one thread (see ``analysis.callgraph.other_threads_suspected``);
- a function reached along one path only, never recursive, has its node value equal to its
  cumtime; a non-recursive function's nodes add up to its cumtime (before merging);
- the tree is finite and has at most ``max_nodes`` rows, whatever the graph.

**Bounding.** Nodes are expanded biggest first. A child worth less than ``min_fraction`` of the
root, or one that does not fit in ``max_nodes``, is merged into one ``"other (N functions)"`` node
under its parent (a single merged function keeps its own name, unexpanded). Zero-time calls are
left out.
"""

from __future__ import annotations

import heapq
import math
import os
import re
import sysconfig
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["call_tree", "TREE_COLUMNS", "location_label", "display_name", "code_family"]

TREE_COLUMNS = (
    "id",  # row number; rows are in preorder (a parent before its children)
    "parent",  # the parent's id; -1 for the root
    "name",  # short name for the box ("leaf", "time.sleep", "other (12 functions)")
    "label",  # pstats' "file:line(function)", short path, cells as "In [n]"
    "filename",
    "lineno",
    "function",
    "value_s",  # cumulative time on this path
    "self_s",  # own time on this path (tottime share)
    "ncalls",  # calls on this path (a share: may be fractional where paths are shared)
    "depth",
    "recursive",  # a function already on the path: not expanded
    "kind",  # root, function, recursive, other
    "family",  # cell, user, stdlib, builtin, package, root, other
    "package",  # top-level module of a package or stdlib file ("numpy", "json"), else ""
)

DEFAULT_MIN_FRACTION = 0.005
DEFAULT_MAX_NODES = 2000

_ROOT, _OTHER = -1, -2


def call_tree(
    stats: pd.DataFrame,
    edges: pd.DataFrame,
    *,
    min_fraction: float = DEFAULT_MIN_FRACTION,
    max_nodes: int = DEFAULT_MAX_NODES,
    root_label: str = "cell",
    code_names: dict[str, str] | None = None,
    focus: tuple[str, int, str] | None = None,
) -> pd.DataFrame:
    """The call tree of a cProfile profile (``stats`` and ``edges`` tables), one row per node.

    ``min_fraction``: children worth less than this share of the root are merged into an
    "other" node; ``max_nodes``: the most rows the tree has (at least 2). ``code_names`` maps a
    notebook cell's file name to "In [n]". ``focus``: a function's ``(file, line, name)``: the
    tree of that function alone, all its calls (its whole cumtime, from every caller) under the
    root, as snakeviz draws a function picked in its table.
    """
    if not 0 <= min_fraction < 1:
        raise ValueError(f"min_fraction must be in [0, 1); got {min_fraction!r}")
    max_nodes = max(int(max_nodes), 2)
    g = _Graph(stats, edges)
    return _Builder(g, min_fraction, max_nodes, root_label, code_names or {}, focus).build()


# ------------------------------------------------------------------------------ the graph


class _Graph:
    """The stats and edges tables as integer-indexed arrays and adjacency lists."""

    def __init__(self, stats: pd.DataFrame, edges: pd.DataFrame) -> None:
        self.filename = stats["filename"].tolist()
        self.lineno = [int(x) for x in stats["lineno"].tolist()]
        self.function = stats["function"].tolist()
        self.ncalls = stats["ncalls"].to_numpy(dtype=np.float64).tolist()
        self.primitive = stats["primitive_calls"].to_numpy(dtype=np.float64).tolist()
        self.tottime = stats["tottime_s"].to_numpy(dtype=np.float64).tolist()
        self.cumtime = stats["cumtime_s"].to_numpy(dtype=np.float64).tolist()
        n = len(self.function)
        self.n = n
        index = {k: i for i, k in enumerate(zip(self.filename, self.lineno, self.function))}
        self.callees: list[list[tuple[int, float, float]]] = [[] for _ in range(n)]  # (G, n, c)
        self.callers: list[list[tuple[int, float, float]]] = [[] for _ in range(n)]  # (P, n, c)
        if len(edges):
            src = zip(edges["caller_filename"].tolist(), edges["caller_lineno"].tolist(),
                      edges["caller_function"].tolist())
            dst = zip(edges["callee_filename"].tolist(), edges["callee_lineno"].tolist(),
                      edges["callee_function"].tolist())
            for a, b, nc, ct in zip(src, dst, edges["ncalls"].tolist(), edges["cumtime_s"].tolist()):
                i = index.get((a[0], int(a[1]), a[2]))
                j = index.get((b[0], int(b[1]), b[2]))
                if i is None or j is None:  # a caller cProfile has no row for: counts as top level
                    continue
                self.callees[i].append((j, float(nc), float(ct)))
                self.callers[j].append((i, float(nc), float(ct)))
        self.component = _strongly_connected(n, self.callees)

    def only(self, key: tuple[str, int, str]) -> list[tuple[int, float, float]]:
        """(function, cumtime, primitive calls) of the function ``key``: a tree's one top level."""
        for f, k in enumerate(zip(self.filename, self.lineno, self.function)):
            if k == key:
                return [(f, self.cumtime[f], self.primitive[f])]
        raise KeyError(key)

    def top_level(self) -> list[tuple[int, float, float]]:
        """(function, top-level time, top-level calls) of every function the cell called itself."""
        out = []
        for f in range(self.n):
            calls = self.ncalls[f] - math.fsum(nc for _, nc, _ in self.callers[f])
            if calls <= 0:
                continue
            comp = self.component[f]
            outside = math.fsum(ct for p, _, ct in self.callers[f] if self.component[p] != comp)
            value = min(max(self.cumtime[f] - outside, 0.0), self.cumtime[f])
            out.append((f, value, calls))
        return out


def _strongly_connected(n: int, succ: list[list[tuple[int, float, float]]]) -> list[int]:
    """Tarjan's algorithm, iterative: the component number of every node."""
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    comp = [-1] * n
    stack: list[int] = []
    counter = 0
    ncomp = 0
    for start in range(n):
        if index[start] != -1:
            continue
        work = [(start, 0)]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack[start] = True
        while work:
            v, i = work[-1]
            nbrs = succ[v]
            if i < len(nbrs):
                work[-1] = (v, i + 1)
                w = nbrs[i][0]
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
    return comp


# ------------------------------------------------------------------------------ the tree


def _fill(values: list[float], cap: float) -> list[float]:
    """Give ``values`` what fits in ``cap``, biggest first (ties in order), so that their exact sum
    is <= ``cap``: a big one keeps its value and the smallest lose what does not fit."""
    if math.fsum(values) <= cap:
        return values
    out = [0.0] * len(values)
    left = max(cap, 0.0)
    for i in sorted(range(len(values)), key=lambda i: -values[i]):
        out[i] = min(values[i], left)
        left = max(left - out[i], 0.0)
    return _fit(out, cap)  # exact, whatever the rounding


def _fit(values: list[float], cap: float) -> list[float]:
    """Scale ``values`` down (never up) so that their exact sum is <= ``cap``."""
    total = math.fsum(values)
    if total <= cap:
        return values
    if cap <= 0:
        return [0.0] * len(values)
    factor = cap / total
    values = [v * factor for v in values]
    while math.fsum(values) > cap:
        factor = 1.0 - 1e-12
        values = [v * factor for v in values]
    return values


class _Node:
    __slots__ = ("id", "parent", "func", "value", "self_s", "ncalls", "depth", "kind", "children", "merged")

    def __init__(self, id: int, parent: int, func: int, value: float, self_s: float, ncalls: float, depth: int,
                 kind: str) -> None:
        self.id = id
        self.parent = parent
        self.func = func
        self.value = value
        self.self_s = self_s
        self.ncalls = ncalls
        self.depth = depth
        self.kind = kind
        self.children: list[int] = []
        self.merged: list[tuple[int, float, float, float, bool]] | None = None  # the "other" bucket


class _Builder:
    def __init__(self, g: _Graph, min_fraction: float, max_nodes: int, root_label: str,
                 code_names: dict[str, str], focus: tuple[str, int, str] | None = None) -> None:
        self.g = g
        self.focus = focus
        self.min_fraction = min_fraction
        self.max_nodes = max_nodes
        self.root_label = root_label
        self.code_names = code_names
        self.nodes: list[_Node] = []
        self.used = 0  # rows emitted or reserved (one "other" slot per expanded node)
        self.heap: list[tuple[float, int, int, int, float, float, bool]] = []
        self.seq = 0

    # -- expansion ---------------------------------------------------------------------------

    def _new(self, parent: int, func: int, value: float, self_s: float, ncalls: float, kind: str) -> _Node:
        depth = self.nodes[parent].depth + 1 if parent >= 0 else 0
        node = _Node(len(self.nodes), parent, func, value, self_s, ncalls, depth, kind)
        self.nodes.append(node)
        if parent >= 0:
            self.nodes[parent].children.append(node.id)
        self.used += 1
        return node

    def _push(self, parent: int, func: int, value: float, ncalls: float, recursive: bool) -> None:
        if value <= 0:
            return
        if value < self.threshold:
            self._merge(parent, func, value, ncalls, recursive)
            return
        self.seq += 1
        heapq.heappush(self.heap, (-value, self.seq, parent, func, value, ncalls, recursive))

    def _merge(self, parent: int, func: int, value: float, ncalls: float, recursive: bool) -> None:
        node = self.nodes[parent]
        if node.merged is None:
            node.merged = []
        g = self.g
        share = value / g.cumtime[func] if g.cumtime[func] > 0 else 0.0
        node.merged.append((func, value, min(g.tottime[func] * share, value), ncalls, recursive))

    def _path(self, node: _Node) -> set[int]:
        out = set()
        i = node.id
        while i >= 0:
            n = self.nodes[i]
            if n.func >= 0:
                out.add(n.func)
            i = n.parent
        return out

    def _expand(self, node: _Node) -> None:
        """Share out ``node``'s value among its callees (see the module docstring)."""
        g = self.g
        f = node.func
        calls = g.callees[f]
        if not calls:
            return
        self.used += 1  # the reserved "other" slot
        share = node.value / g.cumtime[f] if g.cumtime[f] > 0 else 0.0
        call_share = min(node.ncalls / g.primitive[f], 1.0) if g.primitive[f] > 0 else 0.0
        path = self._path(node)
        plain = [(j, nc * call_share, ct * share) for j, nc, ct in calls if j not in path]
        loops = [(j, nc * call_share, ct * share) for j, nc, ct in calls if j in path]
        recursed = g.ncalls[f] > g.primitive[f]  # nested calls of f: their edges overlap the others'
        plain_values = (_fill if recursed else _fit)([v for _, _, v in plain], node.value)
        room = max(node.value - math.fsum(plain_values), 0.0)
        loop_values = _fit([v for _, _, v in loops], room)
        values = _fit(plain_values + loop_values, node.value)  # exact, whatever the rounding
        for (j, nc, _), v, rec in zip(plain + loops, values, [False] * len(plain) + [True] * len(loops)):
            self._push(node.id, j, v, nc, rec)

    def build(self) -> pd.DataFrame:
        g = self.g
        tops = g.top_level() if self.focus is None else g.only(self.focus)
        total = math.fsum(v for _, v, _ in tops)
        self.threshold = self.min_fraction * total
        root = self._new(-1, _ROOT, total, 0.0, float("nan"), "root")
        self.used += 1  # the root's "other" slot
        for f, v, calls in tops:
            self._push(root.id, f, v, calls, False)
        while self.heap:
            _, _, parent, func, value, ncalls, recursive = heapq.heappop(self.heap)
            expands = not recursive and bool(g.callees[func])
            if self.used + 1 + expands > self.max_nodes:
                self._merge(parent, func, value, ncalls, recursive)
                continue
            share = value / g.cumtime[func] if g.cumtime[func] > 0 else 0.0
            self_s = min(g.tottime[func] * share, value)
            node = self._new(parent, func, value, self_s, ncalls, "recursive" if recursive else "function")
            if expands:
                self._expand(node)
        return self._frame()

    # -- output ------------------------------------------------------------------------------

    def _frame(self) -> pd.DataFrame:
        g = self.g
        nodes = self.nodes
        rows: list[tuple[Any, ...]] = []
        families: dict[str, tuple[str, str]] = {}

        def family(filename: str) -> tuple[str, str]:
            if filename not in families:
                families[filename] = code_family(filename, self.code_names)
            return families[filename]

        def emit(parent_row: int, depth: int, kind: str, func: int, value: float, self_s: float, ncalls: float,
                 name: str | None = None) -> int:
            row = len(rows)
            if func >= 0:
                fn, line, func_name = g.filename[func], g.lineno[func], g.function[func]
                fam, pkg = family(fn)
                label = location_label(fn, line, func_name, self.code_names)
                nm = name or display_name(func_name)
                if not name and func_name.startswith("<") and fn != "~":  # "<listcomp>:7": which one
                    nm = f"{func_name}:{line}"
                if kind == "recursive":
                    nm = f"{nm} ↻"
            elif func == _ROOT:
                fn, line, func_name, fam, pkg, label, nm = "", 0, "", "root", "", self.root_label, self.root_label
            else:
                fn, line, func_name, fam, pkg = "", 0, "", "other", ""
                nm = label = name or "other"
            rows.append((row, parent_row, nm, label, fn, line, func_name, value, self_s, ncalls, depth,
                         kind == "recursive", kind, fam, pkg))
            return row

        def merged_row(node: _Node, row: int, placed: list[float]) -> None:
            merged = node.merged or []
            if not merged:
                return
            if len(merged) == 1:
                func, value, self_s, ncalls, rec = merged[0]
                kind, name, funcs = ("recursive" if rec else "function"), None, 1
            else:
                func, kind = _OTHER, "other"
                value = math.fsum(m[1] for m in merged)
                self_s, ncalls = math.fsum(m[2] for m in merged), math.fsum(m[3] for m in merged)
                funcs = len({m[0] for m in merged})
                name = f"other ({funcs} function{'s' if funcs != 1 else ''})"
            # the merged values fit in the node with the placed ones (by construction); summing
            # them into one number may round up by an ulp: take it back so the invariant is exact
            while value > 0 and math.fsum(placed + [value]) > node.value:
                value = math.nextafter(value, 0.0)
            emit(row, node.depth + 1, kind, func, value, min(self_s, value), ncalls, name=name)

        # preorder, biggest child first, a node's merged children after its placed ones
        stack: list[tuple[bool, _Node, int, list[float]]] = [(False, nodes[0], -1, [])]
        while stack:
            is_merged, node, parent_row, placed = stack.pop()
            if is_merged:
                merged_row(node, parent_row, placed)
                continue
            row = emit(parent_row, node.depth, node.kind, node.func, node.value, node.self_s, node.ncalls)
            kids = sorted((nodes[c] for c in node.children), key=lambda n: (-n.value, n.id))
            if node.merged:
                stack.append((True, node, row, [k.value for k in kids]))
            stack.extend((False, kid, row, []) for kid in reversed(kids))
        frame = pd.DataFrame(rows, columns=list(TREE_COLUMNS))
        return frame.astype({"id": np.int64, "parent": np.int64, "lineno": np.int64, "value_s": np.float64,
                             "self_s": np.float64, "ncalls": np.float64, "depth": np.int64, "recursive": bool})


# ------------------------------------------------------------------------------ names


_BUILTIN = re.compile(r"^<built-in method (?P<name>.+)>$")
_METHOD = re.compile(r"^<method '(?P<name>.+)' of '(?P<owner>.+)' objects>$")
_FUNCTION = re.compile(r"^<function (?P<name>.+) at 0x[0-9a-f]+>$")


def display_name(function: str) -> str:
    """A short name for a box: ``"<built-in method time.sleep>"`` -> ``"time.sleep"``,
    ``"<method 'append' of 'list' objects>"`` -> ``"list.append"``, ``"builtins.sum"`` -> ``"sum"``."""
    m = _BUILTIN.match(function)
    if m:
        name = m["name"]
        return name[len("builtins."):] if name.startswith("builtins.") else name
    m = _METHOD.match(function)
    if m:
        return f"{m['owner']}.{m['name']}"
    m = _FUNCTION.match(function)
    if m:
        return m["name"]
    return function


def _short_path(path: str, keep: int = 2) -> str:
    parts = path.replace("\\", "/").split("/")
    if path.startswith("<") or len(parts) <= keep + 1:
        return path
    return "…/" + "/".join(parts[-keep:])


def pstats_location(stats: pd.DataFrame, names: dict[str, str] | None = None, full_paths: bool = False) -> np.ndarray:
    """pstats' "filename:lineno(function)" text, with notebook cells shown as "In [n]"."""
    names = names or {}
    out = [
        location_label(f, line, fn, names, full_path=full_paths)
        for f, line, fn in zip(stats["filename"].tolist(), stats["lineno"].tolist(), stats["function"].tolist())
    ]
    return np.asarray(out, dtype=object)


def location_label(filename: str, lineno: int, function: str, code_names: dict[str, str] | None = None,
                   full_path: bool = False) -> str:
    """pstats' ``file:line(function)`` (``{built-in method time.sleep}`` for builtins), with a
    short path (or the full one) and notebook cells named "In [n]"."""
    if filename == "~" and lineno == 0:  # pstats.func_std_string
        if function.startswith("<") and function.endswith(">"):
            return "{%s}" % function[1:-1]
        return function
    names = code_names or {}
    path = filename if full_path else _short_path(filename)
    return f"{names.get(filename) or path}:{lineno}({function})"


_STDLIB_DIRS = tuple(
    os.path.normcase(os.path.abspath(p)) + os.sep
    for p in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")}
    if p
)
_PACKAGE_DIRS = ("site-packages", "dist-packages")
_CELL_FILE = re.compile(r"^<ipython-input-\d+-|/ipykernel_\d+/\d+\.py$|^<cell")


def code_family(filename: str, code_names: dict[str, str] | None = None) -> tuple[str, str]:
    """(family, package) of a file: the notebook's cells, builtins, the standard library, an
    installed package (and its top-level module), or the user's own files."""
    if code_names and filename in code_names or _CELL_FILE.search(filename.replace("\\", "/")):
        return "cell", ""
    if filename == "~":
        return "builtin", ""
    if filename.startswith("<frozen "):
        return "stdlib", filename[len("<frozen "):-1].split(".")[0]
    if filename.startswith("<"):
        return "user", ""
    parts = filename.replace("\\", "/").split("/")
    for marker in _PACKAGE_DIRS:
        if marker in parts:
            i = len(parts) - 1 - parts[::-1].index(marker)
            if i + 1 < len(parts):
                top = parts[i + 1]
                return "package", top[:-3] if top.endswith(".py") else top
    norm = os.path.normcase(os.path.abspath(filename))
    for d in _STDLIB_DIRS:
        if norm.startswith(d):
            rest = norm[len(d):].replace("\\", "/").split("/")
            return "stdlib", rest[0][:-3] if rest[0].endswith(".py") else rest[0]
    return "user", ""
