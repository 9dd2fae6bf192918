"""The result objects: a torch profile and a Python (cProfile) profile.

They hold DataFrames and metadata; they never format (views do) and never profile (collectors
do). Tables are computed once and cached; accessors hand out shallow copies, so a user editing
a table cannot change what the report shows.
"""

from __future__ import annotations

import marshal
import os
import pstats
from typing import Any

import pandas as pd

from .analysis.key_averages import GROUP_BY, key_averages
from .analysis.summary import TorchSummary, summarize_torch
from .analysis.tree import build_tree
from .collect.chrome_trace import TraceData
from .collect.cprofile import stats_tables
from .errors import OptionError

__all__ = ["TorchProfile", "PythonProfile"]


class TorchProfile:
    """A torch.profiler profile (live or loaded from a trace): tables, views, exports.

    ``events``: one row per event (see ``nbprof.events``); ``key_averages(group_by)``: torch's
    key averages as a DataFrame; ``profiler``: the live ``torch.profiler.profile`` or None.
    """

    kind = "torch"

    def __init__(self, events: pd.DataFrame, meta: dict[str, Any] | None = None, *, profiler: Any = None):
        self._events = events if "parent" in events.columns else build_tree(events)
        self.meta: dict[str, Any] = dict(meta or {})
        self.profiler = profiler
        self._averages: dict[str, pd.DataFrame] = {}
        self._summary: TorchSummary | None = None

    @classmethod
    def from_trace(cls, trace: TraceData, *, profiler: Any = None, **meta: Any) -> "TorchProfile":
        return cls(trace.events, {**trace.meta, **meta}, profiler=profiler)

    # -- data -----------------------------------------------------------------------------------

    @property
    def events(self) -> pd.DataFrame:
        return self._events.copy(deep=False)

    def key_averages(self, group_by: str = "op") -> pd.DataFrame:
        """One row per operator (``"op"``), per operator and input shape (``"shape"``), or per
        operator and Python call stack (``"stack"``)."""
        if group_by not in GROUP_BY:
            raise OptionError(f"group_by must be one of {', '.join(GROUP_BY)}; got {group_by!r}")
        if group_by not in self._averages:
            stacks = None
            if group_by == "stack":
                from .analysis.stacks import op_stacks

                stacks = op_stacks(self._events)
            self._averages[group_by] = key_averages(self._events, group_by, stacks=stacks)
        return self._averages[group_by].copy(deep=False)

    @property
    def summary(self) -> TorchSummary:
        if self._summary is None:
            self._summary = summarize_torch(self._events, self.key_averages("op"), self.meta.get("sort"))
        return self._summary

    @property
    def collected(self) -> dict[str, bool]:
        """Which collection options this profile was recorded with."""
        m = self.meta
        return {
            "cuda": bool(m.get("with_cuda", self.summary.has_device)),
            "memory": bool(m.get("profile_memory")),
            "shapes": bool(m.get("record_shapes")),
            "stack": bool(m.get("with_stack")),
            "flops": bool(m.get("with_flops")),
        }

    # -- exports --------------------------------------------------------------------------------

    def to_chrome_trace(self, path: str | os.PathLike) -> str:
        """Write a chrome trace (``.json`` or ``.json.gz``) that Perfetto, chrome://tracing and
        ``nbprof.load_trace`` open."""
        from .export import write_chrome_trace

        return write_chrome_trace(self, path)

    def save(self, path: str | os.PathLike) -> str:
        """Save the profile; ``nbprof.load_trace(path)`` gives it back."""
        return self.to_chrome_trace(path)

    # -- display --------------------------------------------------------------------------------

    def report(self, **view: Any) -> Any:
        """The report with other view settings: ``sort``, ``limit``, ``group_by``."""
        from .views.report import TorchReport

        return TorchReport(self, **view)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.report()._repr_mimebundle_(include, exclude)

    def __repr__(self) -> str:
        s = self.summary
        parts = [f"{s.events:,} events", f"self CPU {s.self_cpu_us / 1e3:.3f} ms"]
        if s.has_device:
            parts.append(f"self CUDA {s.self_device_us / 1e3:.3f} ms")
        return f"<TorchProfile {', '.join(parts)}>"


class _RawStats:
    """What ``pstats.Stats`` accepts as a profile: an object with ``create_stats`` and ``stats``."""

    def __init__(self, raw: dict[Any, Any]) -> None:
        self.stats = raw

    def create_stats(self) -> None:
        pass


class PythonProfile:
    """A cProfile profile: the stats table (what pstats prints), its call graph, views, exports."""

    kind = "python"

    def __init__(self, raw: dict[Any, Any], meta: dict[str, Any] | None = None, *, profiler: Any = None):
        self._raw = raw
        self.meta: dict[str, Any] = dict(meta or {})
        self.profiler = profiler
        self._stats, self._edges = stats_tables(raw)

    @property
    def stats(self) -> pd.DataFrame:
        """``function, filename, lineno, ncalls, primitive_calls, tottime_s, cumtime_s,
        tottime_per_call_s, cumtime_per_call_s``: equal to pstats for the same run."""
        return self._stats.copy(deep=False)

    @property
    def edges(self) -> pd.DataFrame:
        """Every caller -> callee edge with its calls and times."""
        return self._edges.copy(deep=False)

    @property
    def pstats(self) -> pstats.Stats:
        return pstats.Stats(_RawStats(self._raw))

    @property
    def total_s(self) -> float:
        """Total time the profile measured (pstats' "in N seconds")."""
        return float(self._stats["tottime_s"].sum())

    def callers(self, fn: Any) -> pd.DataFrame:
        """Who called ``fn`` (a name, ``"file:line(name)"`` or a function object), with the calls
        and time of each edge."""
        from .analysis.callgraph import callers

        return callers(self._stats, self._edges, fn)

    def callees(self, fn: Any) -> pd.DataFrame:
        """What ``fn`` called, with the calls and time of each edge."""
        from .analysis.callgraph import callees

        return callees(self._stats, self._edges, fn)

    def dump(self, path: str | os.PathLike) -> str:
        """Write a ``.prof`` file (``pstats``, snakeviz and gprof2dot open it)."""
        path = os.fspath(path)
        with open(path, "wb") as f:
            marshal.dump(self._raw, f)
        return path

    def report(self, **view: Any) -> Any:
        from .views.report import PythonReport

        return PythonReport(self, **view)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.report()._repr_mimebundle_(include, exclude)

    def __repr__(self) -> str:
        calls = int(self._stats["ncalls"].sum())
        return f"<PythonProfile {calls:,} calls in {self.total_s:.3f} s, {len(self._stats):,} functions>"
