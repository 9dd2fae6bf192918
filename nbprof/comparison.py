"""``nbprof.compare(before, after)``: two profiles of the same kind, operator by operator.

    before = nbprof.load_trace("before.json.gz")       # or %%torchprof -o before
    after = nbprof.load_trace("after.json.gz")
    c = nbprof.compare(before, after)                  # renders as a report
    c.table                                            # the DataFrame underneath
    c.summary.speedup, c.summary.biggest_win

Torch profiles compare their key averages (per operator, or per operator and input shape with
``group_by="shape"``); cProfile profiles their stats (per function). The main metric is self
device time when both torch profiles have device work, else self CPU time; cProfile's is
``tottime``. Any key-averages (or stats) column, or torch's / pstats' name for it, can be chosen
with ``metric=``.

``by=`` picks the table torch profiles compare, as ``step_breakdown(by=)`` does: "op" (the key
averages above), "kernel" (``kernels()``: each kernel, memcpy and memset name's calls, device
time, mean and share; HTA's trace diff and the TensorBoard plugin's diff view; main metric
``device_total_us``) or "range" (``ranges()``: each ``record_function`` label path's calls, CPU
time, mean, share of the span and the device time launched under it; main metric ``total_us``).

    nbprof.compare(before, after, by="kernel")         # which kernels got faster, which are new

Eager vs compiled (one profile ran kernels torch.compile generated, the other none; or
``by="compiled"``): ATen op by ATen op, the eager profile's self time of each op against the
compiled code's time spent on it (a fused kernel's time split evenly among the ops it fused, an
extern call's its own; ``analysis.compilation.op_times``), with the source lines the compiled
kernels came from.

    nbprof.compare(eager, compiled)                    # what compiling won or lost, op by op
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from .errors import OptionError

__all__ = ["compare", "Comparison", "ComparisonSummary"]

_LABELS = {
    "self_cpu_us": "self CPU",
    "cpu_total_us": "CPU total",
    "cpu_avg_us": "CPU avg",
    "self_device_us": "self CUDA",
    "device_total_us": "CUDA total",
    "device_avg_us": "CUDA avg",
    "self_cpu_mem_bytes": "self CPU memory",
    "cpu_mem_bytes": "CPU memory",
    "self_device_mem_bytes": "self CUDA memory",
    "device_mem_bytes": "CUDA memory",
    "count": "calls",
    "flops": "FLOPs",
    "bytes": "bytes",
    "total_us": "total",
    "mean_us": "mean",
    "device_us": "device",
    "kernels": "kernels",
    "time_us": "time",
    "tottime_s": "tottime",
    "cumtime_s": "cumtime",
    "ncalls": "calls",
    "primitive_calls": "primitive calls",
}


# the totals of by="kernel" and by="range" comparisons (key averages total their self times instead)
_TOTAL_LABELS = {"device_total_us": "device time", "total_us": "range time", "device_us": "device time"}


@dataclass(frozen=True)
class ComparisonSummary:
    """The headline numbers: totals of the main metric before and after, and the rows that
    changed most. ``totals`` has every total computed (``self_cpu_us``, ``self_device_us``,
    ``span_us`` for torch; ``tottime_s``, ``ncalls`` for cProfile) as (before, after)."""

    kind: str
    metric: str
    total_before: float
    total_after: float
    speedup: float
    biggest_win: str | None
    biggest_win_change: float
    biggest_regression: str | None
    biggest_regression_change: float
    added: int
    removed: int
    totals: dict[str, tuple[float, float]] = field(default_factory=dict)
    total_metric: str = ""  # what the totals add up: the metric, or its self column (CPU total -> self CPU)
    kernel_names: bool = False  # the names are kernels' C++ signatures: the text shortens them

    def text(self) -> str:
        from .format import fmt_ratio, short_kernel_name

        tm = self.total_metric or self.metric
        label = _TOTAL_LABELS.get(tm, _LABELS.get(tm, tm))
        parts = [f"total {label} {_fmt(tm, self.total_before)} → {_fmt(tm, self.total_after)}, "
                 f"{fmt_ratio(self.speedup)}"]
        win, regression = self.biggest_win, self.biggest_regression
        if self.kernel_names:
            win = None if win is None else short_kernel_name(win)
            regression = None if regression is None else short_kernel_name(regression)
        if win is not None:
            parts.append(f"biggest win {win} ({_fmt(self.metric, self.biggest_win_change, sign=True)})")
        if regression is not None:
            parts.append(f"biggest regression {regression} "
                         f"({_fmt(self.metric, self.biggest_regression_change, sign=True)})")
        return "; ".join(parts)


def _fmt(metric: str, value: float, sign: bool = False) -> str:
    """A value of a metric column, in its unit (the column's name says which)."""
    from .format import formatter, unit_of

    return formatter(unit_of(metric), sign=sign)(value)


class Comparison:
    """Two profiles compared row by row. ``table`` is the DataFrame (see
    ``nbprof.analysis.compare``); ``summary`` the headline; it renders as text and HTML."""

    def __init__(self, before: Any, after: Any, table: pd.DataFrame, summary: ComparisonSummary,
                 keys: list[str], limit: int = 20, by: str = "op") -> None:
        self.before = before
        self.after = after
        self._table = table
        self.summary = summary
        self.keys = keys
        self.limit = limit
        self.by = by  # what rows are: "op" (key averages or cProfile's functions), "kernel", "range"

    @property
    def kind(self) -> str:
        return self.summary.kind

    @property
    def metric(self) -> str:
        return self.summary.metric

    @property
    def table(self) -> pd.DataFrame:
        return self._table.copy(deep=False)

    # -- rendering --------------------------------------------------------------------------------

    def _columns(self) -> list[Any]:
        """The table's columns, for the text and the HTML alike: what is compared, the metric
        before and after, the change, the speed-up, then the calls (the HTML adds Status)."""
        from .format import unit_of
        from .views.table import Column

        m = self.metric
        label = _LABELS.get(m, m)
        unit = unit_of(m)
        count = "count" if self.kind == "torch" else "ncalls"
        if self.by == "kernel":
            cols = [Column("name", "Kernel", "kernel", 60), Column("kind", "Kind")]
        elif self.by == "compiled":
            cols = [Column("op", "ATen op", "name", 40)]
        elif self.by == "range":
            cols = [Column("path", "Range", "name", 60, text_width=55)]
        elif self.kind == "torch":
            cols = [Column("name", "Name", "name", 60, text_width=55)]
            if "input_shapes" in self._table.columns:
                cols.append(Column("input_shapes", "Input shapes", "name", 40))
        else:
            cols = [Column("full_location", "Function", "location")]
        cols += [Column(f"{m}_before", f"{label} before", unit), Column(f"{m}_after", f"{label} after", unit),
                 Column(f"{m}_change", "Change", unit, sign=True), Column("speedup_sortable", "Speed-up", "ratio")]
        if m != count:
            cols += [Column(f"{count}_before", "Calls before", "count"),
                     Column(f"{count}_after", "Calls after", "count")]
        if self.by == "compiled":
            cols.append(Column("sources", "Compiled from", "text", 60))
        share = {"kernel": ("share", "GPU time %"), "range": ("share_of_span", "Span %")}.get(self.by)
        if share:
            cols += [Column(f"{share[0]}_before", f"{share[1]} before", "share"),
                     Column(f"{share[0]}_after", f"{share[1]} after", "share")]
        return cols

    def _head(self) -> str:
        """What the first line says is compared."""
        head = "torch profiles" if self.kind == "torch" else "cProfile profiles"
        if self.by == "compiled":
            return f"{head}, eager vs compiled code by ATen op"
        return head if self.by == "op" else f"{head} by {self.by}"

    def _rows(self, limit: int | None = None) -> pd.DataFrame:
        """The first ``limit`` rows (0: all), with what the columns show: the speed-up as a
        number that sorts ("gone", infinite, as 1e300) and a function's ``file:line(name)``."""
        import numpy as np

        limit = self.limit if limit is None else limit
        rows = (self._table.head(limit) if limit else self._table).copy()
        speedup = rows["speedup"].to_numpy(dtype=float)
        rows["speedup_sortable"] = np.where(np.isinf(speedup), 1e300, speedup)
        if self.kind == "python":
            from .analysis.flame import pstats_location

            names = {**self.before.meta.code_names, **self.after.meta.code_names}
            rows["full_location"] = pstats_location(rows, names, full_paths=True)
        return rows

    def text(self, limit: int | None = None) -> str:
        from .views.table import render_text

        lines = [f"compare {self._head()}: {self.summary.text()}"]
        rows = self._rows(limit)
        if len(rows):
            lines.append(render_text(rows, self._columns()))
            if len(rows) < len(self._table):
                lines.append(f"{len(rows)} of {len(self._table)} rows (sorted by the size of the change)")
        else:
            lines.append(self._empty_message)
        return "\n".join(lines)

    @property
    def _empty_message(self) -> str:
        """Why there are no rows, for what was compared: two profiles with operators but no
        device work have no kernels to compare, not nothing at all."""
        if self.by == "kernel":
            return ("Neither profile has device work (kernels, copies, memsets) to compare: CPU-only runs, or "
                    "CUDA not recorded; by='op' compares their operators.")
        if self.by == "range":
            return ("Neither profile has record_function ranges to compare; by='op' compares their operators.")
        return "Both profiles are empty."

    def html(self, limit: int | None = None, include_library: bool | None = None) -> str:
        """Like the report: the summary, then a table that sorts by clicking (all rows; the
        first ``limit`` per page), static where scripts do not run."""
        from .format import esc
        from .views.datatable import datatable_html
        from .views.report import library, report_css
        from .views.table import Column

        limit = self.limit if limit is None else limit
        rows = self._rows(0)
        summary = (f'<div class="nbprof-report">{report_css()}<div class="nbprof-summary"><b>compare {esc(self._head())}</b> · '
                   f"{esc(self.summary.text())}</div>")
        if not len(rows):
            return library(include_library) + summary + f"<div>{esc(self._empty_message)}</div></div>"
        cols = self._columns()
        if "status" in rows.columns:
            cols.append(Column("status", "Status"))
        table = datatable_html(rows, cols, order=[], page_length=limit or 0,
                               caption="sorted by the size of the change; click a header to sort")
        return library(include_library) + summary + table + "</div>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


# ------------------------------------------------------------------------------------- compare()


def _as_profile(obj: Any, side: str) -> Any:
    from .model import PythonProfile, TorchProfile

    if isinstance(obj, (TorchProfile, PythonProfile)):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        from .loading import is_prof_file, load_prof, load_trace

        return load_prof(path) if is_prof_file(path) else load_trace(path)
    import cProfile
    import pstats

    if isinstance(obj, pstats.Stats):
        return PythonProfile(dict(obj.stats))  # type: ignore[attr-defined]
    if isinstance(obj, cProfile.Profile):
        obj.create_stats()
        return PythonProfile(dict(obj.stats))
    raise OptionError(
        f"compare: {side} is of type {type(obj).__name__}; pass a TorchProfile or PythonProfile (from -o, "
        "load_trace or %%cprofile), a trace file or folder, or a .prof file"
    )


def _kind_name(p: Any) -> str:
    return "a torch profile" if p.kind == "torch" else "a cProfile profile"


def compare(before: Any, after: Any, metric: str | None = None, group_by: str = "op", limit: int = 20,
            by: str = "op") -> Comparison:
    """Compare two profiles of the same kind; see the module doc."""
    if by not in ("op", "kernel", "range", "compiled"):
        raise OptionError(f"by must be one of op, kernel, range, compiled; got {by!r}")
    if by != "op" and group_by != "op":
        what = {"kernel": "kernels by name", "range": "ranges by name", "compiled": "ATen ops"}[by]
        raise OptionError(f"group_by={group_by!r} groups the key averages (by='op'); by={by!r} compares {what}")
    b = _as_profile(before, "before")
    a = _as_profile(after, "after")
    if b.kind != a.kind:
        raise OptionError(
            f"compare needs two profiles of the same kind; got {_kind_name(b)} (before) and {_kind_name(a)} (after)"
        )
    if b.kind == "torch":
        if by == "op" and group_by == "op" and metric is None and _ran_compiled(b) != _ran_compiled(a):
            by = "compiled"  # eager vs compiled: what compiling won or lost, ATen op by ATen op
        if by == "compiled":
            return _compare_compiled(b, a, limit)
        if by != "op":
            return _compare_torch_table(b, a, metric, by, limit)
        return _compare_torch(b, a, metric, group_by, limit)
    if by != "op":
        raise OptionError(f"by={by!r} is for torch profiles; cProfile profiles compare by function")
    if group_by != "op":
        raise OptionError(f"group_by={group_by!r} is for torch profiles; cProfile profiles compare by function")
    return _compare_python(b, a, metric, limit)


def _compare_torch(b: Any, a: Any, metric: str | None, group_by: str, limit: int) -> Comparison:
    from .analysis.compare import compare_torch
    from .settings import resolve_torch_sort

    if group_by not in ("op", "shape", "stack"):
        raise OptionError(f"group_by must be one of op, shape, stack; got {group_by!r}")
    if group_by == "shape" and not (b.collected["shapes"] and a.collected["shapes"]):
        raise OptionError("group_by='shape' needs input shapes in both profiles: profile with --shapes")
    if group_by == "stack" and not (b.collected["stack"] and a.collected["stack"]):
        raise OptionError("group_by='stack' needs Python stacks in both profiles: profile with --stack")
    sb, sa = b.summary, a.summary
    if metric is None:
        metric = "self_device_us" if (sb.has_device and sa.has_device) else "self_cpu_us"
    else:
        metric = resolve_torch_sort(metric)
        if metric == "name":
            raise OptionError("metric must be a number column (self_cpu_us, self_device_us, count, ...), not name")
    table = compare_torch(b.key_averages(group_by), a.key_averages(group_by), metric, group_by)
    totals = {
        "self_cpu_us": (sb.self_cpu_us, sa.self_cpu_us),
        "self_device_us": (sb.self_device_us, sa.self_device_us),
        "span_us": (sb.span_us, sa.span_us),
    }
    # totals of non-additive columns (CPU / CUDA total include their children): the self totals
    total_of = {"cpu_total_us": "self_cpu_us", "cpu_avg_us": "self_cpu_us", "device_total_us": "self_device_us",
                "device_avg_us": "self_device_us"}
    total_metric = metric
    if metric in totals:
        tb, ta = totals[metric]
    elif metric in total_of:
        total_metric = total_of[metric]
        tb, ta = totals[total_metric]
    else:
        ops_b = b.key_averages(group_by)
        ops_a = a.key_averages(group_by)
        tb = float(ops_b.loc[ops_b["kind"].astype(str) == "op", metric].sum()) if metric in ops_b else 0.0
        ta = float(ops_a.loc[ops_a["kind"].astype(str) == "op", metric].sum()) if metric in ops_a else 0.0
    ops = table[table["kind"].astype(str) == "op"]
    summary = _summary("torch", metric, table if len(ops) == 0 else ops, table, tb, ta, totals, "name", total_metric)
    keys = ["name", "input_shapes", "kind"] if group_by == "shape" else ["name", "kind"]
    return Comparison(b, a, table, summary, keys, limit)


def _ran_compiled(p: Any) -> bool:
    """Whether a torch profile ran kernels that torch.compile generated."""
    return bool(len(p.compilation().kernels))


def _compare_compiled(b: Any, a: Any, limit: int) -> Comparison:
    """Eager vs compiled (either order), ATen op by ATen op: the eager side's self time of each op
    against the compiled code's time spent on it (``analysis.compilation.op_times``); the
    ``sources`` column says which lines' kernels fused it."""
    from .analysis.compare import compare_tables
    from .analysis.compilation import op_times

    device = b.summary.has_device and a.summary.has_device
    metric = "self_device_us" if device else "self_cpu_us"
    sides = [op_times(p.key_averages("op"), p.compilation().kernels if _ran_compiled(p) else None, metric)
             for p in (b, a)]
    sources = pd.concat(sides)[["op", "sources"]]
    sources = sources[sources["sources"] != ""].drop_duplicates("op")
    table = compare_tables(sides[0].drop(columns="sources"), sides[1].drop(columns="sources"), ["op"],
                           ["time_us", "count"], "time_us")
    table = table.merge(sources, on="op", how="left").fillna({"sources": ""})
    totals = {"time_us": (float(sides[0]["time_us"].sum()), float(sides[1]["time_us"].sum()))}
    summary = _summary("torch", "time_us", table, table, *totals["time_us"], totals, "op", "time_us")
    return Comparison(b, a, table, summary, ["op"], limit, by="compiled")


def _compare_torch_table(b: Any, a: Any, metric: str | None, by: str, limit: int) -> Comparison:
    """By kernel (``kernels()``) or by range (``ranges()``): the totals are the table's own sums
    (ranges: of the outermost labels, which hold the nested ones), the biggest changes by name."""
    from .analysis.compare import KERNEL_METRICS, RANGE_METRICS, compare_kernels, compare_ranges

    metrics: tuple[str, ...]
    if by == "kernel":
        before, after = b.kernels(), a.kernels()
        metrics, main, keys, average_of = KERNEL_METRICS, "device_total_us", ["name", "kind"], "device_avg_us"
        summed = before, after
    else:
        before, after = b.ranges(), a.ranges()
        metrics, main, keys, average_of = RANGE_METRICS, "total_us", ["path", "label", "depth"], "mean_us"
        # nested labels are inside their parents' time: the totals add the outermost ones
        summed = before[before["depth"] == 0], after[after["depth"] == 0]
    choices = [m for m in metrics if not m.startswith("share")]
    metric = metric or main
    if metric not in choices:
        raise OptionError(f"metric for by={by!r} must be one of {', '.join(choices)}; got {metric!r}")
    table = (compare_kernels if by == "kernel" else compare_ranges)(before, after, metric)
    totals = {m: (float(summed[0][m].sum()), float(summed[1][m].sum())) for m in choices if m != average_of}
    total_metric = main if metric == average_of else metric  # averages: their totals' totals
    tb, ta = totals[total_metric]
    summary = _summary("torch", metric, table, table, tb, ta, totals, keys[0], total_metric)
    if by == "kernel":
        summary = replace(summary, kernel_names=True)
    return Comparison(b, a, table, summary, keys, limit, by=by)


def _compare_python(b: Any, a: Any, metric: str | None, limit: int) -> Comparison:
    from .analysis.compare import PYTHON_METRICS, compare_python
    from .settings import resolve_python_sort

    metric = resolve_python_sort(metric) if metric else "tottime_s"
    if metric in ("tottime_per_call_s", "cumtime_per_call_s"):
        metric = metric.replace("_per_call", "")
    if metric not in PYTHON_METRICS:
        raise OptionError(f"metric must be one of {', '.join(PYTHON_METRICS)}; got {metric!r}")
    table = compare_python(b.stats, a.stats, metric, b.meta.code_names, a.meta.code_names)
    sb, sa = b.stats, a.stats
    totals = {"tottime_s": (float(b.total_s), float(a.total_s)),
              "ncalls": (float(sb["ncalls"].sum()), float(sa["ncalls"].sum()))}
    total_metric = metric
    if metric in ("tottime_s", "cumtime_s"):
        total_metric = "tottime_s"
        tb, ta = totals["tottime_s"]
    elif metric in totals:
        tb, ta = totals[metric]
    else:
        tb, ta = float(sb[metric].sum()), float(sa[metric].sum())
    summary = _summary("python", metric, table, table, tb, ta, totals, "function", total_metric,
                       {**b.meta.code_names, **a.meta.code_names})
    return Comparison(b, a, table, summary, ["function", "filename", "lineno"], limit)


def _distinct_name(rows: pd.DataFrame, i: Any, name_col: str, code_names: dict[str, str]) -> str:
    """Row ``i``'s name, told apart from the other rows of the same name: a cProfile function by
    its ``file:line(function)`` (two ``<listcomp>``s), an operator by its input shapes or stack, a
    kernel by its kind."""
    name = str(rows.loc[i, name_col])
    if int((rows[name_col].astype(str) == name).sum()) <= 1:
        return name
    if "filename" in rows.columns and "lineno" in rows.columns:
        from .analysis.flame import location_label

        return location_label(str(rows.loc[i, "filename"]), int(rows.loc[i, "lineno"]), name, code_names)
    from .format import shorten

    for col in ("input_shapes", "stack", "kind"):
        if col in rows.columns:
            return f"{name} ({col.replace('_', ' ')} {shorten(str(rows.loc[i, col]), 60)})"
    return name


def _summary(kind: str, metric: str, candidates: pd.DataFrame, table: pd.DataFrame, tb: float, ta: float,
             totals: dict[str, tuple[float, float]], name_col: str, total_metric: str,
             code_names: dict[str, str] | None = None) -> ComparisonSummary:
    change = candidates[f"{metric}_change"].astype(float)
    win = regression = None
    win_change = regression_change = 0.0
    if len(change) and change.min() < 0:
        i = change.idxmin()
        win, win_change = _distinct_name(candidates, i, name_col, code_names or {}), float(change.loc[i])
    if len(change) and change.max() > 0:
        i = change.idxmax()
        regression = _distinct_name(candidates, i, name_col, code_names or {})
        regression_change = float(change.loc[i])
    if ta != 0:
        speedup = tb / ta
    else:
        speedup = math.inf if tb != 0 else math.nan
    status = table["status"].astype(str)
    return ComparisonSummary(
        kind=kind,
        metric=metric,
        total_before=float(tb),
        total_after=float(ta),
        speedup=float(speedup),
        biggest_win=win,
        biggest_win_change=win_change,
        biggest_regression=regression,
        biggest_regression_change=regression_change,
        added=int((status == "added").sum()),
        removed=int((status == "removed").sum()),
        totals={k: (float(v[0]), float(v[1])) for k, v in totals.items()},
        total_metric=total_metric,
    )
