"""The module view: where the time went in the ``nn.Module`` hierarchy of a model.

torch's Python tracer (on with ``--modules``, or ``--stack``) records each call of a module as a
Python event named ``nn.Module: <Type>_<n>`` (``n`` numbers the instances of a type in order of
first call), around the module's ``__call__``. Measured on torch 2.13: ``with_modules=True``
alone records none of them for an eager model (torch's doc: its module hierarchy is for
TorchScript), so ``--modules`` turns the tracer on too.

:func:`module_tree` gives one row per module path, in tree order (a module, then its children in
order of first call)::

    module, name, type, parent, depth, calls, cpu_total_us, self_cpu_us, device_total_us, self_device_us

- ``module``: the path of instance names from the outermost module, ``"Net_0.Block_1.Linear_2"``
  (torch records instances, not attribute names); ``parent`` the enclosing module's path ("" at
  the top); ``depth`` 0 at the top;
- ``calls``: how many calls of the module at that path; ``cpu_total_us``: their wall time (the
  ``nn.Module:`` events' durations, as torch's ``cpu_time_total`` of those events);
- ``device_total_us``: the device work (kernels, copies, memsets) launched inside the calls (the
  launching runtime call, or op, on the same thread within the call), as torch's
  ``device_time_total`` of the events; the backward pass runs outside any module call (on
  autograd's thread) and is not in it;
- ``self_cpu_us`` / ``self_device_us``: the totals less those of the child modules' calls.

The calls of a module nest by time on their thread (a module's parent is the innermost module
call around it), so a profile loaded from a trace file gives the same tree as a live one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import KIND_CODE, category_map, time_ns
from ._intervals import launch_points, sum_in_intervals
from ._tables import TEXT, empty_table
from .tree import _nest, lanes

__all__ = ["module_tree", "module_parts", "merge_modules", "MODULE_COLUMNS", "MODULE_PREFIX"]

MODULE_PREFIX = "nn.Module: "
MODULE_DTYPES = {"module": TEXT, "name": TEXT, "type": TEXT, "parent": TEXT, "depth": np.int64, "calls": np.int64,
                 "cpu_total_us": np.float64, "self_cpu_us": np.float64, "device_total_us": np.float64,
                 "self_device_us": np.float64}
MODULE_COLUMNS = tuple(MODULE_DTYPES)


def _instance(name: str) -> str:
    """"Linear_0" of "nn.Module: Linear_0"; "" for any other event."""
    return name[len(MODULE_PREFIX):] if name.startswith(MODULE_PREFIX) else ""


def module_rows(events: pd.DataFrame) -> np.ndarray:
    """The rows of the ``nn.Module:`` events."""
    instance = category_map(events["name"], _instance)
    kind = events["kind"].cat.codes.to_numpy()
    return np.flatnonzero((instance != "") & (kind == KIND_CODE["python"]) & (events["thread"].to_numpy() >= 0))


def module_tree(events: pd.DataFrame) -> pd.DataFrame:
    """One row per module path (see the module doc); empty without ``nn.Module:`` events."""
    return module_parts(events).drop(columns="first_us")


def module_parts(events: pd.DataFrame) -> pd.DataFrame:
    """The module tree with each path's first call (``first_us``, the profile's clock): what
    several ranks' trees are merged from (:func:`merge_modules`)."""
    rows = module_rows(events)
    if len(rows) == 0:
        return empty_table(MODULE_DTYPES | {"first_us": np.float64})
    lane, _ = lanes(events)
    lane = pd.factorize(lane)[0].astype(np.int64)  # small codes: thread ids can be large, the sweeps offset by them
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    order = np.lexsort((-(end[rows] - start[rows]), start[rows], lane[rows]))  # nesting order
    rows = rows[order]
    s, e, t = start[rows], end[rows], lane[rows]
    parent, _, depth = _nest(s, e, t)

    # each call's device work: launched on its thread within the call
    lp = launch_points(events, lane)
    device_ns, _ = sum_in_intervals(lp["process"].to_numpy(), lp["launch_ns"].to_numpy(), lp["dur_ns"].to_numpy(),
                                    t, s, e)
    cpu_ns = (e - s).astype(np.float64)
    child_cpu = np.zeros(len(rows))
    child_device = np.zeros(len(rows))
    has_parent = parent >= 0
    np.add.at(child_cpu, parent[has_parent], cpu_ns[has_parent])
    np.add.at(child_device, parent[has_parent], device_ns[has_parent])

    # paths, one depth level at a time (parents come first)
    instance = category_map(events["name"], _instance)[rows].astype(object)
    path = instance.copy()
    for d in range(1, int(depth.max()) + 1):
        at = np.flatnonzero(depth == d)
        path[at] = path[parent[at]] + "." + instance[at]

    calls = pd.DataFrame({
        "module": path, "name": instance, "depth": depth, "start": s,
        "cpu_total_us": cpu_ns / 1000.0, "self_cpu_us": (cpu_ns - child_cpu) / 1000.0,
        "device_total_us": device_ns / 1000.0, "self_device_us": (device_ns - child_device) / 1000.0,
    })
    out = calls.groupby("module", sort=False).agg(
        name=("name", "first"), depth=("depth", "first"), first=("start", "min"), calls=("start", "size"),
        cpu_total_us=("cpu_total_us", "sum"), self_cpu_us=("self_cpu_us", "sum"),
        device_total_us=("device_total_us", "sum"), self_device_us=("self_device_us", "sum"),
    ).reset_index()
    out["type"] = [n.rsplit("_", 1)[0] if n.rsplit("_", 1)[-1].isdigit() else n for n in out["name"]]
    out["parent"] = [m.rsplit(".", 1)[0] if "." in m else "" for m in out["module"]]
    out = out.iloc[_tree_order(out)].reset_index(drop=True)
    out["depth"] = out["depth"].astype(np.int64)
    out["calls"] = out["calls"].astype(np.int64)
    out["first_us"] = out["first"] / 1000.0
    return out[[*MODULE_COLUMNS, "first_us"]]


def merge_modules(parts: list[tuple[pd.DataFrame, float]]) -> pd.DataFrame:
    """Several ranks' module trees as one: ``parts`` are each rank's :func:`module_parts` and the
    shift of its clock onto the common one (µs). Calls and times summed per module path, in tree
    order (children by their first call on the common clock)."""
    frames = [t.assign(first_us=t["first_us"] + shift) for t, shift in parts if len(t)]
    if not frames:
        return empty_table(MODULE_DTYPES)
    out = pd.concat(frames, ignore_index=True).groupby("module", sort=False).agg(
        name=("name", "first"), type=("type", "first"), parent=("parent", "first"), depth=("depth", "first"),
        calls=("calls", "sum"), cpu_total_us=("cpu_total_us", "sum"), self_cpu_us=("self_cpu_us", "sum"),
        device_total_us=("device_total_us", "sum"), self_device_us=("self_device_us", "sum"),
        first=("first_us", "min"),
    ).reset_index()
    out = out.iloc[_tree_order(out)].reset_index(drop=True)
    out["depth"] = out["depth"].astype(np.int64)
    out["calls"] = out["calls"].astype(np.int64)
    return out[list(MODULE_COLUMNS)]


def _tree_order(table: pd.DataFrame) -> list[int]:
    """Positions of the paths in depth-first order, children in order of their first call (a loop
    over distinct paths, not calls)."""
    children: dict[str, list[int]] = {}
    for i, (parent, first) in enumerate(zip(table["parent"], table["first"])):
        children.setdefault(parent, []).append(i)
    firsts = table["first"].to_numpy()
    paths = table["module"].tolist()
    out: list[int] = []
    # ties (siblings first called at the same time) keep their order in the table: a merge of one
    # rank's tree, in tree order already, gives that tree back
    stack = sorted(children.get("", []), key=lambda i: (firsts[i], i), reverse=True)
    while stack:
        i = stack.pop()
        out.append(i)
        stack.extend(sorted(children.get(paths[i], []), key=lambda j: (firsts[j], j), reverse=True))
    return out
