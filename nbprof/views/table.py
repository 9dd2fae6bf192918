"""One column spec for every table, and the two renderings that need no JavaScript.

A :class:`Column` names a DataFrame column (``key``), its header and its ``unit``; the unit picks
the formatter (``nbprof.format.formatter``) for the text table, the static HTML table and the
interactive table's script (``views.datatable``), so the three always show a value the same way.
A table is a list of columns, and each table has one list: the text rendering and the HTML
rendering show the same columns in the same order (HTML may add columns at the end that help to
filter, such as Kind or Status).

- ``render_text``: a table like torch's / pstats' for terminals and diffs.
- ``static_html``: a plain HTML table with the units, bars and hover names of the interactive
  one: it reads the same in JupyterLab, nbconvert, nbviewer and GitHub's notebook preview (which
  strips scripts and styles it does not know). The interactive table shows it until its script runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..format import esc, formatter

__all__ = ["Column", "render_text", "static_html", "sorted_rows", "pstats_ncalls"]

_LEFT_UNITS = ("text", "name", "kernel", "location")
_NAME_UNITS = ("name", "kernel", "location")  # monospace, cut to ``width``, the full text on hover


@dataclass(frozen=True)
class Column:
    """One column of a table: the frame column it shows, its header and its unit.

    ``unit``: one of ``nbprof.format.UNITS`` (text, name, kernel, location, time_us, time_s, bytes,
    count, decimal, flops, share, ratio, ncalls). ``width``: where names are cut (characters);
    ``text_width``: the text table's cut where it is narrower (torch's text table cuts names at 55).
    ``sign``: a change, shown with "+" / "−". ``align``: "left" / "right" when not the unit's."""

    key: str
    header: str
    unit: str = "text"
    width: int = 60
    text_width: int | None = None
    sign: bool = False
    align: str = ""

    @property
    def alignment(self) -> str:
        return self.align or ("left" if self.unit in _LEFT_UNITS else "right")

    def formatter(self, *, text: bool = False) -> Callable[[object], str]:
        width = self.text_width if text and self.text_width else self.width
        return formatter(self.unit, width, sign=self.sign)


def sorted_rows(frame: pd.DataFrame, sort: str, limit: int) -> pd.DataFrame:
    """The top ``limit`` rows by ``sort`` (descending; names ascending); 0 = all."""
    if sort not in frame.columns:
        return frame.head(limit or len(frame))
    ascending = sort in ("name", "function", "filename", "lineno")
    out = frame.sort_values(sort, ascending=ascending, kind="stable")
    return out.head(limit) if limit else out


def render_text(rows: pd.DataFrame, columns: list[Column]) -> str:
    cells = [[fmt(v) for v in rows[c.key].tolist()] for c, fmt in zip(columns, (c.formatter(text=True) for c in columns))]
    widths = [max([len(c.header)] + [len(x) for x in col]) for c, col in zip(columns, cells)]
    rule = "  ".join("-" * w for w in widths)

    def line(values: list[str]) -> str:
        return "  ".join(
            v.ljust(w) if c.alignment == "left" else v.rjust(w) for v, w, c in zip(values, widths, columns)
        ).rstrip()

    out = [rule, line([c.header for c in columns]), rule]
    for i in range(len(rows)):
        out.append(line([col[i] for col in cells]))
    out.append(rule)
    return "\n".join(out)


def static_html(rows: pd.DataFrame, columns: list[Column], *, total: int | None = None) -> str:
    """``rows`` as a plain HTML table: humanized units, a bar for shares, names cut with the full
    name on hover. ``total``: how many rows the whole table has (a note says how many more)."""
    head = "".join(f'<th style="text-align:{c.alignment};padding:1px 6px">{esc(c.header)}</th>' for c in columns)
    body = []
    formats = [c.formatter() for c in columns]
    values = [rows[c.key].tolist() for c in columns]
    for i in range(len(rows)):
        tds = []
        for c, fmt, vals in zip(columns, formats, values):
            v = vals[i]
            text = esc(fmt(v))
            style = f"text-align:{c.alignment};white-space:nowrap;padding:1px 6px"
            if c.unit == "share":
                w = max(0.0, min(100.0, 100 * float(v))) * 0.6 if v == v else 0.0
                tds.append(f'<td style="{style}"><span class="nbprof-bar" style="display:inline-block;'
                           f'height:0.75em;width:{w:.1f}px;background:#e8710a;margin-right:4px"></span>{text}</td>')
            elif c.unit in _NAME_UNITS:
                tds.append(f'<td style="{style};font-family:monospace" title="{esc(v)}">{text}</td>')
            else:
                tds.append(f'<td style="{style}">{text}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    more = (total or 0) - len(rows)
    note = f'<div style="color:#666">… {more:,} more rows (the DataFrame has all)</div>' if more > 0 else ""
    return (f'<table class="nbprof-static" style="border-collapse:collapse;font-size:12px"><thead><tr>{head}'
            f"</tr></thead><tbody>{''.join(body)}</tbody></table>{note}")


def pstats_ncalls(stats: pd.DataFrame) -> np.ndarray:
    """pstats prints "12/3" when a function recursed (ncalls/primitive calls)."""
    nc = stats["ncalls"].to_numpy()
    pc = stats["primitive_calls"].to_numpy()
    return np.asarray([f"{a}/{b}" if a != b else f"{a}" for a, b in zip(nc.tolist(), pc.tolist())], dtype=object)
