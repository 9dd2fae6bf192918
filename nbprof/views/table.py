"""Tables of key averages and cProfile stats, as text (like torch's / pstats') and static HTML.

One list of column specs drives both renderings, so the text and the HTML always agree.
The static HTML needs no JavaScript: it reads the same in JupyterLab, nbconvert, nbviewer and
GitHub's notebook preview (which strips scripts and styles it does not know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..format import esc, fmt_bytes, fmt_count, fmt_flops, fmt_pct, fmt_s, fmt_us, shorten

__all__ = ["Column", "torch_columns", "python_columns", "render_text", "render_html", "sorted_rows"]


@dataclass(frozen=True)
class Column:
    header: str
    key: str  # the DataFrame column it shows
    fmt: Callable[[object], str]
    share_of: float | None = None  # when set: the column is a share of this total (shows a bar)
    align: str = "right"
    title: Callable[[object], str] | None = None  # hover text (full names, paths)


def torch_columns(
    averages: pd.DataFrame,
    *,
    self_cpu_total: float,
    self_device_total: float,
    has_device: bool,
    has_memory: bool,
    has_flops: bool,
    group_by: str = "op",
) -> list[Column]:
    cols = [Column("Name", "name", lambda v: shorten(v, 55), align="left", title=str)]
    if group_by == "shape" and "input_shapes" in averages:
        cols.append(Column("Input shapes", "input_shapes", lambda v: shorten(v, 60), align="left", title=str))
    if group_by == "stack" and "stack" in averages:
        cols.append(Column("Stack", "stack", lambda v: shorten(v, 60), align="left", title=str))
    cols += [
        Column("Self CPU %", "self_cpu_us", lambda v: fmt_pct(v, self_cpu_total), share_of=self_cpu_total),
        Column("Self CPU", "self_cpu_us", fmt_us),
        Column("CPU total", "cpu_total_us", fmt_us),
        Column("CPU avg", "cpu_avg_us", fmt_us),
    ]
    if has_device:
        cols += [
            Column("Self CUDA %", "self_device_us", lambda v: fmt_pct(v, self_device_total), share_of=self_device_total),
            Column("Self CUDA", "self_device_us", fmt_us),
            Column("CUDA total", "device_total_us", fmt_us),
            Column("CUDA avg", "device_avg_us", fmt_us),
        ]
    if has_memory:
        cols += [
            Column("CPU Mem", "cpu_mem_bytes", fmt_bytes),
            Column("Self CPU Mem", "self_cpu_mem_bytes", fmt_bytes),
        ]
        if has_device:
            cols += [
                Column("CUDA Mem", "device_mem_bytes", fmt_bytes),
                Column("Self CUDA Mem", "self_device_mem_bytes", fmt_bytes),
            ]
    cols.append(Column("Calls", "count", fmt_count))
    if has_flops:
        cols.append(Column("FLOPs", "flops", fmt_flops))
    return cols


def python_columns(stats: pd.DataFrame, *, total_s: float) -> list[Column]:
    """pstats' columns: ncalls tottime percall cumtime percall filename:lineno(function)."""
    return [
        Column("ncalls", "ncalls_text", str),
        Column("tottime", "tottime_s", fmt_s),
        Column("tottime %", "tottime_s", lambda v: fmt_pct(v, total_s), share_of=total_s),
        Column("percall", "tottime_per_call_s", fmt_s),
        Column("cumtime", "cumtime_s", fmt_s),
        Column("percall", "cumtime_per_call_s", fmt_s),
        Column("filename:lineno(function)", "location", lambda v: shorten(v, 70), align="left",
               title=lambda v: str(v)),
    ]


def sorted_rows(frame: pd.DataFrame, sort: str, limit: int) -> pd.DataFrame:
    """The top ``limit`` rows by ``sort`` (descending; names ascending); 0 = all."""
    if sort not in frame.columns:
        return frame.head(limit or len(frame))
    ascending = sort in ("name", "function", "filename", "lineno")
    out = frame.sort_values(sort, ascending=ascending, kind="stable")
    return out.head(limit) if limit else out


def render_text(rows: pd.DataFrame, columns: list[Column]) -> str:
    cells = [[c.fmt(v) for v in rows[c.key].tolist()] for c in columns]
    widths = [max([len(c.header)] + [len(x) for x in col]) for c, col in zip(columns, cells)]
    rule = "  ".join("-" * w for w in widths)

    def line(values: list[str]) -> str:
        return "  ".join(
            v.ljust(w) if c.align == "left" else v.rjust(w) for v, w, c in zip(values, widths, columns)
        ).rstrip()

    out = [rule, line([c.header for c in columns]), rule]
    for i in range(len(rows)):
        out.append(line([col[i] for col in cells]))
    out.append(rule)
    return "\n".join(out)


def render_html(rows: pd.DataFrame, columns: list[Column], *, caption: str = "") -> str:
    head = "".join(f'<th style="text-align:{c.align}">{esc(c.header)}</th>' for c in columns)
    body = []
    for i in range(len(rows)):
        tds = []
        for c in columns:
            v = rows[c.key].iloc[i]
            text = esc(c.fmt(v))
            title = f' title="{esc(c.title(v))}"' if c.title else ""
            if c.share_of:
                pct = 0.0 if not c.share_of else max(0.0, min(100.0, 100.0 * float(v) / c.share_of))
                bar = (
                    f'<span class="nbprof-bar" style="display:inline-block;height:0.7em;'
                    f'width:{pct * 0.6:.1f}px;background:#e8710a;margin-right:4px;vertical-align:middle"></span>'
                )
                tds.append(f'<td style="text-align:right;white-space:nowrap"{title}>{bar}{text}</td>')
            else:
                style = f"text-align:{c.align};white-space:nowrap"
                if c.align == "left":
                    style += ";font-family:monospace"
                tds.append(f'<td style="{style}"{title}>{text}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    cap = f"<caption style=\"caption-side:bottom;text-align:left\">{esc(caption)}</caption>" if caption else ""
    return (
        '<table class="nbprof-table" style="border-collapse:collapse;font-size:12px">'
        f"{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def pstats_ncalls(stats: pd.DataFrame) -> np.ndarray:
    """pstats prints "12/3" when a function recursed (ncalls/primitive calls)."""
    nc = stats["ncalls"].to_numpy()
    pc = stats["primitive_calls"].to_numpy()
    return np.asarray([f"{a}/{b}" if a != b else f"{a}" for a, b in zip(nc.tolist(), pc.tolist())], dtype=object)
