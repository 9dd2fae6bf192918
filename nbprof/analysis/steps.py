"""Steps of a profiled loop: the ``ProfilerStep#N`` ranges that ``--schedule`` (torch's
``schedule`` driven by ``nbprof.step()``) records, one per active step.

:func:`steps` gives one row per recorded step::

    step, [rank,] start_us, dur_us, self_cpu_us, ops, device_us, kernels, top_op, top_op_us

- ``dur_us``: the step's wall time (its ``ProfilerStep#N`` range on the main thread);
- ``self_cpu_us``: self CPU time of the operators and runtime calls that started within the step,
  on any thread of the process (so autograd's backward thread counts); ``ops``: how many ops;
- ``device_us`` / ``kernels``: device work (kernels, copies, memsets) launched within the step;
- ``top_op``: the operator with the most self device time in the step (self CPU time when the
  profile has no device work), and that time.

:func:`step_breakdown` puts the steps side by side: one row per operator (or label, or kernel),
one column per step.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..errors import OptionError
from ..meta import TraceMeta
from ..events import KIND_CODE, category_map, time_ns
from ._intervals import assign_points, launch_points
from ._tables import LABEL, TEXT, empty_table

__all__ = ["steps", "step_breakdown", "STEP_COLUMNS", "BREAKDOWN_BY"]

STEP_DTYPES = {"step": np.int64, "rank": LABEL, "start_us": np.float64, "dur_us": np.float64,
               "self_cpu_us": np.float64, "ops": np.int64, "device_us": np.float64, "kernels": np.int64,
               "top_op": TEXT, "top_op_us": np.float64}
STEP_COLUMNS = tuple(c for c in STEP_DTYPES if c != "rank")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_CPU_KINDS = [KIND_CODE[k] for k in ("op", "runtime", "overhead", "other")]
BREAKDOWN_BY = {
    "op": ("self_cpu_us", "self_device_us", "cpu_total_us", "count"),
    "range": ("total_us", "count"),
    "kernel": ("device_us", "count"),
}


def _step_rows(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the ProfilerStep#N ranges and their step numbers."""
    num = category_map(events["name"], _step_number, dtype=np.int64, missing=-1)
    kind = events["kind"].cat.codes.to_numpy()
    rows = np.flatnonzero((num >= 0) & (kind == KIND_CODE["annotation"]) & ~events["merged"].to_numpy())
    return rows, num[rows]


def _step_number(name: str) -> int:
    """N of a "ProfilerStep#N" name, -1 for any other name."""
    m = _STEP.match(name)
    return int(m.group(1)) if m else -1


class _Steps:
    """The step ranges of a profile and a way to place events in them."""

    def __init__(self, events: pd.DataFrame) -> None:
        from .tree import lanes

        self.events = events
        rows, numbers = _step_rows(events)
        start = time_ns(events["start_us"].to_numpy())
        self.start_ns = start
        self.end_ns = start + time_ns(events["dur_us"].to_numpy())
        _, self.process = lanes(events)
        order = np.lexsort((start[rows], self.process[rows]))
        self.rows = rows[order]
        self.numbers = numbers[order]
        self.rank = events["rank"].to_numpy()[self.rows] if "rank" in events.columns else None

    def __len__(self) -> int:
        return len(self.rows)

    def of_points(self, process: np.ndarray, t: np.ndarray) -> np.ndarray:
        r = self.rows
        return assign_points(process, t, self.process[r], self.start_ns[r], self.end_ns[r])

    def of_rows(self, rows: np.ndarray) -> np.ndarray:
        return self.of_points(self.process[rows], self.start_ns[rows])

    def labels(self) -> pd.DataFrame:
        out = pd.DataFrame({"step": self.numbers})
        if self.rank is not None:
            out.insert(0, "rank", self.rank)
        return out


def steps(events: pd.DataFrame, meta: TraceMeta | None = None) -> pd.DataFrame:
    """One row per recorded step (see the module doc); empty without ProfilerStep ranges."""
    st = _Steps(events)
    columns = list(STEP_COLUMNS)
    if st.rank is not None:
        columns.insert(1, "rank")
    if len(st) == 0:
        return empty_table(STEP_DTYPES, columns)
    n = len(st)
    kind = events["kind"].cat.codes.to_numpy()
    cpu = np.flatnonzero(np.isin(kind, _CPU_KINDS) & (events["thread"].to_numpy() >= 0)
                         & ~events["merged"].to_numpy())
    step_of = st.of_rows(cpu)
    inside = step_of >= 0
    cpu, step_of = cpu[inside], step_of[inside]
    self_cpu = events["self_cpu_us"].to_numpy()
    # float64 even for steps without CPU events (np.bincount of no rows gives int64 zeros)
    self_cpu_us = np.bincount(step_of, weights=self_cpu[cpu], minlength=n).astype(np.float64)
    ops = np.bincount(step_of[kind[cpu] == KIND_CODE["op"]], minlength=n)

    launches = launch_points(events, st.process)
    l_step = st.of_points(launches["process"].to_numpy(), launches["launch_ns"].to_numpy())
    ok = l_step >= 0
    device_us = np.bincount(l_step[ok], weights=launches["dur_ns"].to_numpy()[ok], minlength=n) / 1000.0
    kernels = np.bincount(l_step[ok], minlength=n)

    has_device = bool(len(launches))
    metric = "self_device_us" if has_device else "self_cpu_us"
    is_op = kind[cpu] == KIND_CODE["op"]
    top = pd.DataFrame(
        {
            "i": step_of[is_op],
            "name": events["name"].to_numpy()[cpu[is_op]].astype(object),
            "v": events[metric].to_numpy()[cpu[is_op]],
        }
    ).groupby(["i", "name"], sort=False, observed=True)["v"].sum().reset_index()
    top = top.sort_values(["i", "v", "name"], ascending=[True, False, True], kind="stable").drop_duplicates("i")
    top_name = np.full(n, None, dtype=object)
    top_value = np.zeros(n)
    top_name[top["i"].to_numpy()] = top["name"].to_numpy()
    top_value[top["i"].to_numpy()] = top["v"].to_numpy()

    r = st.rows
    out = st.labels()
    out["start_us"] = events["start_us"].to_numpy()[r]
    out["dur_us"] = events["dur_us"].to_numpy()[r]
    out["self_cpu_us"] = self_cpu_us
    out["ops"] = ops.astype(np.int64)
    out["device_us"] = device_us
    out["kernels"] = kernels.astype(np.int64)
    out["top_op"] = top_name
    out["top_op_us"] = top_value
    out = out.sort_values(["step"] + (["rank"] if st.rank is not None else []), kind="stable")
    return out[columns].reset_index(drop=True)


def step_breakdown(events: pd.DataFrame, by: str = "op", metric: str | None = None) -> pd.DataFrame:
    """The steps side by side: one row per operator (``by="op"``), label (``"range"``) or kernel
    (``"kernel"``), one column per step (``(rank, step)`` in a multi-rank profile), rows sorted
    by their total over the steps. ``metric``: for ops ``self_cpu_us`` (default),
    ``self_device_us``, ``cpu_total_us`` or ``count``; for labels ``total_us`` (default) or
    ``count``; for kernels ``device_us`` (default) or ``count``."""
    if by not in BREAKDOWN_BY:
        raise OptionError(f"by must be one of {', '.join(BREAKDOWN_BY)}; got {by!r}")
    allowed = BREAKDOWN_BY[by]
    metric = metric or allowed[0]
    if metric not in allowed:
        raise OptionError(f"with by={by!r}, metric must be one of {', '.join(allowed)}; got {metric!r}")
    st = _Steps(events)
    kind = events["kind"].cat.codes.to_numpy()
    merged = events["merged"].to_numpy()
    if by == "kernel":
        launches = launch_points(events, st.process)
        rows = launches["row"].to_numpy()
        step_of = st.of_points(launches["process"].to_numpy(), launches["launch_ns"].to_numpy())
        values = launches["dur_ns"].to_numpy() / 1000.0
        names = events["name"].to_numpy()[rows]
    else:
        if by == "op":
            rows = np.flatnonzero((kind == KIND_CODE["op"]) & ~merged & (events["thread"].to_numpy() >= 0))
            column = {"self_cpu_us": "self_cpu_us", "self_device_us": "self_device_us",
                      "cpu_total_us": "dur_us"}.get(metric, "dur_us")
            names = events["name"].to_numpy()[rows]
        else:
            from .ranges import range_labels

            step_rows = set(st.rows.tolist())
            rows = np.flatnonzero((kind == KIND_CODE["annotation"]) & ~merged)
            rows = rows[~np.isin(rows, list(step_rows))]
            column = "dur_us"
            names = range_labels(events["name"], rows)
        step_of = st.of_rows(rows)
        values = events[column].to_numpy()[rows]
    if metric == "count":
        values = np.ones(len(rows))
    ok = step_of >= 0
    labels = st.labels()
    frame = pd.DataFrame({"name": np.asarray(names, dtype=object)[ok], "i": step_of[ok], "v": values[ok]})
    table = frame.pivot_table(index="name", columns="i", values="v", aggfunc="sum", fill_value=0.0)
    table = table.reindex(columns=np.arange(len(st)), fill_value=0.0)
    if st.rank is not None:
        table.columns = pd.MultiIndex.from_arrays([labels["rank"].to_numpy(), labels["step"].to_numpy()],
                                                  names=["rank", "step"])
        table = table.sort_index(axis=1)
    else:
        table.columns = pd.Index(labels["step"].to_numpy(), name="step")
        table = table.sort_index(axis=1)
    if metric == "count":
        table = table.astype(np.int64)
    total = table.sum(axis=1)
    table = table.iloc[np.lexsort((table.index.to_numpy().astype(str), -total.to_numpy()))]
    table.index.name = by if by != "op" else "name"
    return table
