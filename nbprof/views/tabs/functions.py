"""The Functions tab of a cProfile report: pstats' table, sortable.

Its columns are the text report's (``function_columns``), in pstats' order with our share of
the total time after tottime. Both print ncalls as pstats does, "12/3" (calls/primitive calls)
where a function recursed; the interactive table sorts that column by the total calls and shows
the full path of each function on hover, the text the short path."""

from __future__ import annotations

from typing import Any

from ..datatable import datatable_html
from ..table import Column
from .base import Tab

__all__ = ["function_columns", "FUNCTIONS"]

_BY_NAME = ("function", "filename", "lineno")  # sorted ascending


def function_columns(*, text: bool) -> list[Column]:
    """pstats' columns: ncalls tottime percall cumtime percall filename:lineno(function)."""
    return [
        Column("ncalls_text", "ncalls", "text", align="right") if text else Column("ncalls_text", "ncalls", "ncalls"),
        Column("tottime_s", "tottime", "time_s"),
        Column("tottime_share", "tottime %", "share"),
        Column("tottime_per_call_s", "percall", "time_s"),
        Column("cumtime_s", "cumtime", "time_s"),
        Column("cumtime_per_call_s", "percall", "time_s"),
        Column("location", "filename:lineno(function)", "name", 70) if text
        else Column("full_location", "filename:lineno(function)", "location"),
    ]


def render(report: Any) -> str:
    frame = report.frame()
    sort = report.sort if report.sort in frame.columns else "tottime_s"
    ascending = sort in _BY_NAME
    frame = frame.sort_values(sort, ascending=ascending, kind="stable")
    shown = "ncalls_text" if sort == "ncalls" else sort  # the column that shows it (and sorts by it)
    return datatable_html(frame, function_columns(text=False), order=[(shown, "asc" if ascending else "desc")],
                          page_length=report.limit or 0)


FUNCTIONS = Tab("Functions", render)
