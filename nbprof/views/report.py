"""The report shown after a profiled cell: a summary line, the table, and notes.

Every report renders itself for every front end through ``_repr_mimebundle_``:
``text/plain`` (terminal IPython, GitHub diffs: a table like torch's / pstats'), ``text/html`` (a
static report for nbconvert, nbviewer and GitHub) and, in a live kernel, the interactive report.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..settings import DEFAULT_LIMIT, resolve_python_sort, resolve_torch_sort
from .format import esc, fmt_count, fmt_s, fmt_us
from .table import (
    pstats_location,
    pstats_ncalls,
    python_columns,
    render_html,
    render_text,
    sorted_rows,
    torch_columns,
)

__all__ = ["TorchReport", "PythonReport"]

_STYLE = "font-family:var(--jp-ui-font-family, sans-serif);font-size:13px;line-height:1.4"
_NOTE_STYLE = "color:#8a4b00;margin:2px 0"


def _notes_html(notes: list[str]) -> str:
    return "".join(f'<div class="nbprof-note" style="{_NOTE_STYLE}">⚠ {esc(n)}</div>' for n in notes)


class TorchReport:
    """The report of a :class:`~nbprof.model.TorchProfile` with given view settings."""

    def __init__(self, profile: Any, sort: str | None = None, limit: int | None = None, group_by: str | None = None):
        self.profile = profile
        meta = profile.meta
        self.notes: list[str] = list(meta.get("notes", []))
        s = profile.summary
        requested = sort or meta.get("sort")
        self.sort = resolve_torch_sort(requested) if requested else s.sort
        self.limit = int(limit if limit is not None else meta.get("limit", DEFAULT_LIMIT))
        group_by = group_by or meta.get("group_by") or "op"
        collected = profile.collected
        if group_by == "shape" and not collected["shapes"]:
            self.notes.append("input shapes were not recorded: run with --shapes to group by shape")
            group_by = "op"
        if group_by == "stack" and not collected["stack"]:
            self.notes.append("Python stacks were not recorded: run with --stack to group by stack")
            group_by = "op"
        self.group_by = group_by

    # -- pieces -------------------------------------------------------------------------------

    def _table(self) -> tuple[pd.DataFrame, list[Any]]:
        p = self.profile
        s = p.summary
        averages = p.key_averages(self.group_by)
        cols = torch_columns(
            averages,
            self_cpu_total=s.self_cpu_us,
            self_device_total=s.self_device_us,
            has_device=s.has_device,
            has_memory=p.collected["memory"],
            has_flops=p.collected["flops"],
            group_by=self.group_by,
        )
        return sorted_rows(averages, self.sort, self.limit), cols

    def summary_parts(self) -> list[str]:
        s = self.profile.summary
        parts = [f"{fmt_count(s.events)} events", f"span {fmt_us(s.span_us)}", f"self CPU {fmt_us(s.self_cpu_us)}"]
        if s.has_device:
            parts.append(f"self CUDA {fmt_us(s.self_device_us)}")
        return parts

    def top_line(self) -> str | None:
        s = self.profile.summary
        if not s.top_name:
            return None
        label = self.sort.replace("_us", "").replace("_", " ").replace("device", "CUDA").replace("cpu", "CPU")
        share = f" ({100 * s.top_share:.1f}%)" if s.top_share else ""
        return f"top by {label}: {s.top_name}{share}"

    def collected_line(self) -> str:
        c = self.profile.collected
        names = ["CPU"] + [label for key, label in (("cuda", "CUDA"), ("memory", "memory"), ("shapes", "shapes"),
                                                    ("stack", "stacks"), ("flops", "FLOPs")) if c[key]]
        return "collected: " + ", ".join(names)

    def _is_empty(self) -> bool:
        return self.profile.summary.events == 0

    # -- renderings -----------------------------------------------------------------------------

    def text(self) -> str:
        lines = ["torch profile: " + " · ".join(self.summary_parts())]
        if self._is_empty():
            lines.append("The profile recorded no events: the cell ran no torch operators.")
        else:
            top = self.top_line()
            if top:
                lines.append(top)
            lines.append(self.collected_line())
            rows, cols = self._table()
            lines.append(render_text(rows, cols))
            shown = len(rows)
            total = len(self.profile.key_averages(self.group_by))
            if shown < total:
                lines.append(f"{shown} of {total} rows (--limit 0 shows all)")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self) -> str:
        head = " · ".join(esc(x) for x in self.summary_parts())
        parts = [f'<div class="nbprof-report" style="{_STYLE}">',
                 f'<div class="nbprof-summary"><b>torch profile</b> · {head}</div>']
        parts.append(_notes_html(self.notes))
        if self._is_empty():
            parts.append("<div>The profile recorded no events: the cell ran no torch operators.</div>")
        else:
            top = self.top_line()
            meta_line = " · ".join(x for x in (top, self.collected_line()) if x)
            parts.append(f'<div class="nbprof-top" style="color:#555">{esc(meta_line)}</div>')
            rows, cols = self._table()
            total = len(self.profile.key_averages(self.group_by))
            caption = f"{len(rows)} of {total} rows" if len(rows) < total else ""
            parts.append(render_html(rows, cols, caption=caption))
        parts.append("</div>")
        return "".join(parts)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


class PythonReport:
    """The report of a :class:`~nbprof.model.PythonProfile`."""

    def __init__(self, profile: Any, sort: str | None = None, limit: int | None = None):
        self.profile = profile
        meta = profile.meta
        self.notes: list[str] = list(meta.get("notes", []))
        self.sort = resolve_python_sort(sort) if sort else meta.get("sort", "tottime_s")
        self.limit = int(limit if limit is not None else meta.get("limit", DEFAULT_LIMIT))

    def _frame(self) -> pd.DataFrame:
        stats = self.profile.stats
        stats["location"] = pstats_location(stats, self.profile.meta.get("code_names"))
        stats["ncalls_text"] = pstats_ncalls(stats)
        return stats

    def summary_text(self) -> str:
        st = self.profile.stats
        calls = int(st["ncalls"].sum())
        prim = int(st["primitive_calls"].sum())
        text = f"{calls:,} function calls"
        if prim != calls:
            text += f" ({prim:,} primitive calls)"
        return text + f" in {fmt_s(self.profile.total_s)}"

    def top_line(self) -> str | None:
        frame = self._frame()
        if not len(frame):
            return None
        i = int(frame["tottime_s"].to_numpy().argmax())
        total = self.profile.total_s
        share = f" ({100 * frame['tottime_s'].iloc[i] / total:.1f}%)" if total else ""
        return f"most own time: {frame['location'].iloc[i]}{share}"

    def text(self) -> str:
        lines = ["cProfile: " + self.summary_text()]
        frame = self._frame()
        if not len(frame):
            lines.append("The profile recorded no Python function calls.")
        else:
            top = self.top_line()
            if top:
                lines.append(top)
            rows = sorted_rows(frame, self.sort, self.limit)
            lines.append(render_text(rows, python_columns(frame, total_s=self.profile.total_s)))
            if len(rows) < len(frame):
                lines.append(f"{len(rows)} of {len(frame)} functions (-l 0 shows all)")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self) -> str:
        parts = [f'<div class="nbprof-report" style="{_STYLE}">',
                 f'<div class="nbprof-summary"><b>cProfile</b> · {esc(self.summary_text())}</div>',
                 _notes_html(self.notes)]
        frame = self._frame()
        if not len(frame):
            parts.append("<div>The profile recorded no Python function calls.</div>")
        else:
            top = self.top_line()
            if top:
                parts.append(f'<div class="nbprof-top" style="color:#555">{esc(top)}</div>')
            rows = sorted_rows(frame, self.sort, self.limit)
            caption = f"{len(rows)} of {len(frame)} functions" if len(rows) < len(frame) else ""
            parts.append(render_html(rows, python_columns(frame, total_s=self.profile.total_s), caption=caption))
        parts.append("</div>")
        return "".join(parts)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()
