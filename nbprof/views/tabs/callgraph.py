"""The Callers & callees tab of a cProfile report: pick a function (the most expensive by
cumtime) to see its callers and callees, with the calls and time on each edge (pstats'
print_callers / print_callees). Without scripts every function's panel shows."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...format import esc, fmt_s
from ..assets import script_open
from ..table import Column, static_html
from .base import Tab

__all__ = ["CALLGRAPH"]

_EDGE_COLUMNS = [Column("ncalls_text", "ncalls", "text", align="right"), Column("tottime_s", "tottime", "time_s"),
                 Column("cumtime_s", "cumtime", "time_s"), Column("location", "function", "location")]


def render(report: Any, top: int = 40) -> str:
    from ...analysis.callgraph import EdgeIndex, function_key

    frame = report.frame()
    uid = report.uid
    names = report.profile.meta.code_names
    ranked = frame.sort_values("cumtime_s", ascending=False, kind="stable").head(top)
    edges = EdgeIndex(report.profile.edges)  # one grouping, not a filter per function
    options, panels = [], []
    for i, (row, location) in enumerate(zip(ranked.index, ranked["location"])):
        key = function_key(frame, frame.index.get_loc(row))
        label = f"{location} · cumtime {fmt_s(frame.at[row, 'cumtime_s'])}"
        options.append(f'<option value="{i}">{esc(label)}</option>')
        panels.append(
            f'<div class="nbprof-cg" data-i="{i}"><div style="margin:6px 0 2px"><b>{esc(location)}</b>: '
            f'{esc(frame.at[row, "ncalls_text"])} call{"" if frame.at[row, "ncalls_text"] == "1" else "s"}, tottime {fmt_s(frame.at[row, "tottime_s"])}, '
            f'cumtime {fmt_s(frame.at[row, "cumtime_s"])}</div>'
            + _edges_html("called by", edges, edges.callers(key), edges.caller, names, bool(report.profile.meta.source))
            + _edges_html("calls", edges, edges.callees(key), edges.callee, names) + "</div>"
        )
    script = (
        script_open() + "(function(){var root=document.getElementById('nbprof-cg-%d');if(!root)return;"
        "var sel=root.querySelector('select');function show(){root.querySelectorAll('.nbprof-cg')"
        ".forEach(function(p){p.style.display=p.dataset.i===sel.value?'':'none';});}"
        "sel.style.display='';sel.addEventListener('change',show);show();})();</script>" % uid
    )
    return (
        f'<div id="nbprof-cg-{uid}"><select style="display:none;max-width:100%;margin:4px 0">'
        f'{"".join(options)}</select>{"".join(panels)}</div>{script}'
    )


def _edges_html(title: str, edges: Any, rows: list[int], other: list[tuple], names: dict[str, str] | None,
                from_file: bool = False) -> str:
    """The edges to or from a function: ``rows`` index the columns of an ``EdgeIndex``; ``other``
    is the function on the other end; ``from_file``: a profile read from a .prof file (no cell)."""
    from ...analysis.flame import location_label

    if not rows:
        if title != "called by":
            nothing = "no other function"
        elif from_file:
            nothing = "no profiled function (a top-level call of the profile)"
        else:
            nothing = "the cell's own top-level code (cProfile does not see the cell as a function)"
        return f'<div style="color:#666;margin:2px 0 6px">{esc(title)}: {nothing}</div>'
    table = pd.DataFrame({
        "ncalls_text": [f"{int(edges.ncalls[r]):,}" + ("" if edges.ncalls[r] == edges.primitive_calls[r]
                                                        else f"/{int(edges.primitive_calls[r]):,}") for r in rows],
        "tottime_s": [float(edges.tottime_s[r]) for r in rows],
        "cumtime_s": [float(edges.cumtime_s[r]) for r in rows],
        "location": [location_label(other[r][0], other[r][1], other[r][2], names, full_path=True) for r in rows],
    })
    return (f'<div style="margin:4px 0 2px;color:#555">{esc(title)}</div>'
            f'<div style="margin-bottom:8px">{static_html(table, _EDGE_COLUMNS)}</div>')


CALLGRAPH = Tab("Callers & callees", render)
