"""The Source tab: the user's code with its numbers, line by line (``--lines``: ``p.lines()``).

First the hottest line, named and quoted; then every line that ran as a sortable table (opened
on the hottest first); then the code itself as a heat map: the cell as typed, then each function
of the user's with time in it, whole (from its first line, ``function_line``, to its end), each
line with its numbers as inline bars (one scale per column over the whole profile) and the
hottest line highlighted. The code view is plain HTML with inline styles and no script, so it
reads the same in JupyterLab, nbconvert, nbviewer and GitHub. For cProfile (hits, time) and
torch (operators, CPU and device time, memory) profiles alike: the columns are the table's.

Every source text is the user's, shown as text (``format.esc``; the table's cells through its
renderers' escape): docs/architecture.md, "What reaches a page".
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np
import pandas as pd

from ...analysis.hot_lines import is_python_lines, line_metric, line_where, lines_of, metric_columns, top_lines
from ...analysis.lines import LINE_KEYS
from ...format import esc, formatter, plural
from ..datatable import datatable_html
from ..table import Column, render_text
from .base import Tab
from .spread import with_rank_spread

__all__ = ["SOURCE", "TORCH_SOURCE", "CLUSTER_SOURCE", "lines_of", "has_lines", "source_text", "TOP_LINES_TEXT", "MAX_BLOCKS",
           "function_end", "line_shares"]

MAX_BLOCKS = 12  # functions shown with their code (p.lines() has every line)
MAX_BLOCK_LINES = 150  # a longer block shows the lines that ran and CONTEXT lines around them
CONTEXT = 3
_PARSE_TRIES = 20  # a cell with that many lines that are not Python (magics) is not parsed
TOP_LINES_TEXT = 10  # lines the text report lists
BAR_PX = 48
_HOT = "#fde0c5"
_BAR = "#e8710a"


def has_lines(profile: Any) -> bool:
    """The profile has lines of the user's code with time in them."""
    lines = lines_of(profile)
    return len(lines) > 0 and len(top_lines(lines)) > 0


def _sources(profile: Any) -> dict[str, str]:
    return dict(getattr(profile.meta, "sources", None) or {})


# ------------------------------------------------------------------------------------- the table


def _table_frame(lines: pd.DataFrame) -> pd.DataFrame:
    frame = lines.copy()
    frame["where"] = [line_where(c, f, n) for c, f, n in zip(frame["cell"], frame["file"], frame["line"])]
    frame["code"] = [str(s).strip() if isinstance(s, str) else "" for s in frame["source"]]
    frame["in"] = [_function_label(f) for f in frame["function"]]
    return frame


def _function_label(function: object) -> str:
    if not isinstance(function, str) or not function:
        return ""
    return "top level" if function == "<module>" else function


def _line_keys(lines: pd.DataFrame) -> list[str]:
    """One text per line (``LINE_KEYS``), its None and NA as "": a key pandas joins on whatever
    the columns' dtypes (a folder's cells are all None outside a notebook)."""
    cols = [lines[k].astype(object).where(lines[k].notna(), "").astype(str).tolist() for k in LINE_KEYS]
    return ["\x1f".join(parts) for parts in zip(*cols)]


def _table(report: Any, lines: pd.DataFrame, per_rank: bool = False) -> str:
    metric = line_metric(lines)
    frame = _table_frame(lines).sort_values(metric, ascending=False, kind="stable")
    cols = [Column("where", "Line", "text"), Column("code", "Source", "name", 70)]
    cols += [Column(k, h, u) for k, h, u in metric_columns(lines)]
    caption = "every line that ran, hottest first; click a header to sort"
    if per_rank:  # a folder of ranks: how the ranks differ on each line
        label = next(h for k, h, _ in metric_columns(lines) if k == metric)
        per = report.profile.lines(per_rank=True)
        frame["line_key"], per["line_key"] = _line_keys(frame), _line_keys(per)
        frame, cols, spread = with_rank_spread(report.profile, frame, cols, per, ["line_key"], metric, label)
        caption += f"; {spread}" if spread else ""
    shares = line_shares(report.profile, lines, frame[metric])
    if shares is not None:
        frame["share"] = shares
        at = next(i for i, c in enumerate(cols) if c.key == metric) + 1
        cols.insert(at, Column("share", "% of wall" if is_python_lines(lines) else "Share", "share"))
    cols.append(Column("in", "Function", "name", 40))
    return datatable_html(frame, cols, order=[(metric, "desc")], page_length=report.limit or 0, caption=caption)


# ---------------------------------------------------------------------------------- the code view


def function_end(text_lines: list[str], first: int) -> int | None:
    """The last line of the function whose first line (its ``def``, or its first decorator:
    ``function_line``) is line ``first`` (1-based) of ``text_lines``, from the AST: the text from
    there, less the ``def``'s indentation, parsed, and the first statement's ``end_lineno``. Not
    "until the next def": a method followed by the cell's top-level code ends at its own last line,
    and a nested function ends inside the one around it. Where the text stops being Python (a
    cell's ``%magic`` further down), what comes before it is parsed. None where no function starts
    at ``first`` (a lambda, a comprehension) or the text does not parse."""
    if not 0 < first <= len(text_lines):
        return None
    head = text_lines[first - 1]
    indent = head[: len(head) - len(head.lstrip())]
    # lines less indented than the def end it (or sit in a string): flush left, they parse as
    # statements after it
    body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in text_lines[first - 1:]]
    n = len(body)
    for _ in range(_PARSE_TRIES):
        try:
            tree = ast.parse("\n".join(body[:n]))
        except SyntaxError as e:  # parse the lines before the first one that is not Python
            if not e.lineno or e.lineno - 1 >= n or e.lineno <= 1:
                return None
            n = e.lineno - 1
            continue
        top = tree.body[0] if tree.body else None
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) and top.end_lineno is not None:
            return first - 1 + top.end_lineno
        return None
    return None


def _shown_lines(first: int, last: int, ran: set[int]) -> list[int | None]:
    """The line numbers a block shows, None for a gap ("⋯"): all of them when the block is
    short, else the lines that ran and ``CONTEXT`` lines around each."""
    if last - first + 1 <= MAX_BLOCK_LINES:
        return list(range(first, last + 1))
    keep = {first}
    for n in ran:
        keep.update(range(max(first, n - CONTEXT), min(last, n + CONTEXT) + 1))
    out: list[int | None] = []
    prev = first - 1
    for n in sorted(keep):
        if n > prev + 1:
            out.append(None)
        out.append(n)
        prev = n
    if prev < last:
        out.append(None)
    return out


def _bar(value: float, top: float, unit: str) -> str:
    text = esc(formatter(unit)(value)) if value == value and value != 0 else ""
    width = BAR_PX * float(value) / top if top > 0 and value == value and value > 0 else 0.0
    bar = (f'<span style="display:inline-block;height:0.7em;width:{width:.1f}px;background:{_BAR};'
           f'vertical-align:middle;margin-right:4px;opacity:0.85"></span>') if width >= 0.5 else ""
    return (f'<td style="padding:0 6px;white-space:nowrap;text-align:left;min-width:{BAR_PX + 60}px">'
            f"{bar}{text}</td>")


def _block_html(title: str, text_lines: list[str], shown: list[int | None], rows: pd.DataFrame,
                metrics: list[tuple[str, str, str]], tops: dict[str, float], hot: tuple[str, int] | None,
                file: str, uid: int) -> str:
    by_line = {int(n): r for n, r in zip(rows["line"], rows.to_dict("records"))}
    head = "".join(f'<th style="padding:0 6px;text-align:left;font-weight:600">{esc(h)}</th>' for _, h, _ in metrics)
    out = [f'<div style="margin:10px 0 2px;font-weight:600">{esc(title)}</div>',
           '<div style="overflow-x:auto;max-width:100%"><table class="nbprof-src" style="border-collapse:collapse;font-size:12px;margin:0;width:auto">'
           f'<thead><tr><th style="padding:0 6px;text-align:right">#</th>{head}<th></th></tr></thead><tbody>']
    for n in shown:
        if n is None:
            out.append(f'<tr><td style="padding:0 6px;text-align:right;color:#999">⋯</td>'
                       f'<td colspan="{len(metrics) + 1}"></td></tr>')
            continue
        code = text_lines[n - 1].rstrip("\r\n") if 0 < n <= len(text_lines) else ""
        row = by_line.get(n)
        is_hot = hot == (file, n)
        style = f' style="background:{_HOT};outline:1px solid {_BAR}"' if is_hot else ""
        anchor = f' id="nbprof-{uid}-hot" class="nbprof-src-hot"' if is_hot else ""
        cells = "".join(_bar(float(row[k]) if row is not None else float("nan"), tops[k], u) for k, _, u in metrics)
        mark = ' <span style="color:#b25400;font-family:sans-serif">◀ hottest</span>' if is_hot else ""
        out.append(f"<tr{anchor}{style}>"
                   f'<td style="padding:0 6px;text-align:right;color:#888">{n}</td>{cells}'
                   f'<td style="padding:0 6px;white-space:pre;text-align:left;'
                   f'font-family:var(--jp-code-font-family,monospace)">'
                   f"{esc(code)}{mark}</td></tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _blocks(lines: pd.DataFrame, sources: dict[str, str]) -> list[tuple[str, str, int, pd.DataFrame, float]]:
    """(title, file, first line, its rows, its time) per block: each cell's or file's top level,
    then the functions by their time, largest first."""
    metric = line_metric(lines)
    rows = lines[[f in sources for f in lines["file"]]]
    groups = []
    for (file, first, function), g in rows.groupby(["file", "function_line", "function"], sort=False):
        where = g["cell"].iloc[0]
        place = where if isinstance(where, str) and where else str(file)
        if function == "<module>":
            title = f"{place} (the code as typed)" if isinstance(where, str) and where else f"{place} (top level)"
        else:
            title = f"{function} · {line_where(where, file, int(first))}"
        groups.append((title, str(file), int(first), g, float(g[metric].sum()), function == "<module>"))
    tops = [x for x in groups if x[5]]
    funcs = sorted((x for x in groups if not x[5]), key=lambda x: -x[4])
    return [x[:5] for x in tops + funcs]


def render(report: Any, per_rank: bool = False) -> str:
    lines = lines_of(report.profile)
    sources = _sources(report.profile)
    metric = line_metric(lines)
    metrics = metric_columns(lines)
    tops = {k: float(np.nanmax(lines[k].to_numpy(dtype=float))) if len(lines) else 0.0 for k, _, _ in metrics}
    best = top_lines(lines, 1)
    hot = None
    parts = []
    if len(best):
        b = best.iloc[0]
        hot = (str(b["file"]), int(b["line"]))
        fmt = formatter(next(u for k, _, u in metrics if k == metric))
        parts.append(f'<div class="nbprof-sub">hottest line: <b>{esc(line_where(b["cell"], b["file"], b["line"]))}</b> '
                     f'<code>{esc(str(b["source"]).strip())}</code> · {esc(_metric_label(metric))} '
                     f"{esc(fmt(b[metric]))}{esc(_share_text(report.profile, lines, b))}</div>")
    uid = getattr(report, "uid", 0)
    blocks = _blocks(lines, sources)
    for title, file, first, rows, _ in blocks[:MAX_BLOCKS]:
        text_lines = sources[file].splitlines()
        top_level = rows["function"].iloc[0] == "<module>"  # a cell or a file: all of it
        ran = int(rows["line"].max())
        start = 1 if top_level else first
        # a function's text that does not parse (or a lambda's): to its last line that ran
        end = len(text_lines) if top_level else (function_end(text_lines, first) or ran)
        shown = _shown_lines(start, max(end, ran), set(rows["line"].tolist()))
        parts.append(_block_html(title, text_lines, shown, rows, metrics, tops, hot, file, uid))
    if len(blocks) > MAX_BLOCKS:
        parts.append(f'<div class="nbprof-empty">{esc(plural(len(blocks) - MAX_BLOCKS, "more function"))} ran: '
                     "p.lines() has every line</div>")
    parts.append('<div style="margin-top:12px"></div>' + _table(report, lines, per_rank))
    return "".join(parts)


def render_ranks(report: Any) -> str:
    """A folder's Source: its ranks' lines summed, the table with how the ranks differ."""
    return render(report, per_rank=True)


def _metric_label(metric: str) -> str:
    return {"self_time_us": "own time", "self_device_us": "self device time",
            "self_cpu_us": "self CPU time"}.get(metric, metric)


def _share_text(profile: Any, lines: pd.DataFrame, row: Any) -> str:
    shares = line_shares(profile, lines, pd.Series([row[line_metric(lines)]]))
    return "" if shares is None else f" ({100 * float(shares[0]):.1f}% of {_share_of(lines)})"


def _share_of(lines: pd.DataFrame) -> str:
    return "the run's wall time" if is_python_lines(lines) else "the profile's total"


def line_shares(profile: Any, lines: pd.DataFrame, values: pd.Series) -> np.ndarray | None:
    """The shares of ``values`` (lines' ``line_metric``, of any rows of ``lines``), in one pass:
    of the run's wall time (cProfile: a line's own time, whose sum over the lines is the wall time
    but for nbprof's start and end), or of the metric's total over ``lines`` (torch: each operator
    on one line). None where there is nothing to share (no wall time, a zero total)."""
    v = values.to_numpy(dtype=float)
    if is_python_lines(lines):
        wall = getattr(profile.meta, "wall_s", None)
        return v / (wall * 1e6) if wall else None
    total = float(np.nansum(lines[line_metric(lines)].to_numpy(dtype=float)))
    return v / total if total > 0 else None


# ------------------------------------------------------------------------------------- the text


def source_text(profile: Any, n: int = TOP_LINES_TEXT) -> list[str]:
    """The text report's lines: the ``n`` hottest lines with their numbers and source; none
    without lines."""
    lines = lines_of(profile)
    if not len(lines):
        return []
    rows = top_lines(lines, n)
    if not len(rows):
        return []
    metric = line_metric(lines)
    frame = _table_frame(rows)
    shares = line_shares(profile, lines, rows[metric])
    cols = [Column(k, h, u) for k, h, u in metric_columns(lines)]
    if shares is not None:
        frame["share"] = shares
        cols.insert(next(i for i, c in enumerate(cols) if c.key == metric) + 1,
                    Column("share", "Share", "share"))
    cols += [Column("where", "Line", "text", align="left"), Column("code", "Source", "name", 60)]
    title = f"top lines by {_metric_label(metric)}" + (f" (share of {_share_of(lines)})" if shares is not None else "")
    more = len(top_lines(lines)) - len(rows)
    return [title + ":", render_text(frame, cols)] + ([f"{plural(more, 'more line')}: p.lines() has every line"]
                                                       if more > 0 else [])


def _python_missing(profile: Any) -> str | None:
    """Why a cProfile profile's Source tab is empty; None (no tab) for a profile read from a
    ``.prof`` file, which cannot hold lines (``--lines`` would not have collected them there)."""
    meta = profile.meta
    if getattr(meta, "source", ""):
        return None
    if getattr(meta, "with_lines", False):  # followed, but nothing to show: the line table says why
        notes = lines_of(profile).attrs.get("notes") or []
        return notes[0] if notes else "No line of your code ran (only library code, or nothing at all)."
    return ("Lines were not followed: run %%cprofile --lines (or nbprof cprofile --lines) for hits and time "
            "per line of your code.")


SOURCE = Tab("Source", render, applies=has_lines, missing=_python_missing)
# torch profiles: only where the profile has lines
TORCH_SOURCE = Tab("Source", render, applies=has_lines)
# a folder of ranks: the lines its ranks had, summed in the workers' summaries (ClusterProfile.lines)
CLUSTER_SOURCE = Tab("Source", render_ranks, applies=has_lines)
