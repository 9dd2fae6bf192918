"""The Compile tab: what torch.compile did in the profile (``result.compilation()``).

From the top: one line of totals (compile time, graph breaks, recompiles, caches), the phases
of compile time, each compilation with its phases and caches, the graph breaks with their
reason and cell line, the recompiles with the guard that failed, the fused kernels that ran with
the ATen ops and source lines they came from, and the compiled code's time by source line.
Every text that comes from the trace or torch's log (names, reasons, code) is escaped."""

from __future__ import annotations

from typing import Any

from ...format import esc, fmt_share, fmt_us
from ..datatable import datatable_html
from ..table import Column
from .base import Tab

__all__ = ["COMPILE", "compilation_html"]


def _sub(text: str, top: int = 10) -> str:
    return f'<div class="nbprof-sub" style="margin-top:{top}px"><b>{esc(text)}</b></div>'


def _note(text: str) -> str:
    return f'<div class="nbprof-empty" style="padding-top:2px">{esc(text)}</div>'


def compilation_html(c: Any, limit: int = 0) -> str:
    """The tab's body for a :class:`~nbprof.analysis.compilation.Compilation`."""
    from ...analysis.compilation import PHASE_COLUMNS

    out = []
    frames = c.frames
    parts = []
    if len(frames):
        parts.append(f"{len(frames)} compilation{'s' if len(frames) != 1 else ''} took {fmt_us(c.compile_us)}")
    parts.append(f"{len(c.graph_breaks)} graph break{'s' if len(c.graph_breaks) != 1 else ''}")
    parts.append(f"{len(c.recompiles)} recompile{'s' if len(c.recompiles) != 1 else ''}")
    if len(c.kernels):
        parts.append(f"{len(c.kernels)} generated or extern kernel{'s' if len(c.kernels) != 1 else ''} ran "
                     f"({fmt_us(float(c.kernels['total_us'].sum()))})")
    stats = c.counters.get("stats", {})
    if stats.get("unique_graphs"):
        parts.append(f"Dynamo: {stats['unique_graphs']} graph{'s' if stats['unique_graphs'] != 1 else ''} "
                     f"of {stats.get('calls_captured', 0)} captured calls")
    out.append(f'<div class="nbprof-sub"><b>torch.compile</b>: {esc(" · ".join(parts))}</div>')
    for note in c.notes:
        out.append(_note(note))
    if len(c.phases):
        top = c.phases.sort_values("compile_us", ascending=False).iloc[0]
        out.append(_sub(f"Where compile time went (most: {top['phase']}, {fmt_share(top['share'])})"))
        out.append(datatable_html(c.phases, [Column("phase", "Phase", "text"), Column("compile_us", "Time", "time_us"),
                                             Column("share", "Share", "share")], page_length=0,
                                  caption="each compile range's own time, in the phase its name says "
                                          "(Dynamo's, AOT autograd's, Inductor's): they add up to the compile time"))
    if len(frames):
        cols = [Column("compile_id", "Id", "text"), Column("frame", "Frame", "name", 40),
                Column("source", "Source", "text"), Column("kind", "Kind", "text"),
                Column("compile_us", "Compile time", "time_us")]
        labels = {"dynamo_us": "Dynamo", "aot_autograd_us": "AOT", "inductor_us": "Lowering",
                  "codegen_us": "Codegen", "compile_code_us": "C++/Triton", "autotune_us": "Autotune",
                  "cache_us": "Caches", "other_us": "Other"}
        for col in PHASE_COLUMNS.values():
            if (frames[col] > 0).any():
                cols.append(Column(col, labels[col], "time_us"))
        cols += [Column("graph_breaks", "Graph breaks", "count"), Column("fx_graph_cache", "FX graph cache", "text"),
                 Column("aot_autograd_cache", "AOT cache", "text"), Column("guards", "Guards", "count")]
        out.append(_sub("Compilations"))
        out.append(datatable_html(frames, cols, page_length=limit or 0))
    if len(c.per_frame) and (c.per_frame["compiles"] > 1).any():
        out.append(_sub("Per compiled function"))
        out.append(datatable_html(c.per_frame, [Column("frame", "Frame", "name", 48),
                                                Column("source", "Source", "text"),
                                                Column("compiles", "Compiles", "count"),
                                                Column("recompiles", "Recompiles", "count"),
                                                Column("graph_breaks", "Graph breaks", "count"),
                                                Column("compile_us", "Compile time", "time_us")], page_length=0))
    if len(c.graph_breaks):
        out.append(_sub(f"Graph breaks ({len(c.graph_breaks)}): each splits the compiled graph in two, "
                        "with Python running between them"))
        out.append(datatable_html(c.graph_breaks, [Column("compile_id", "Id", "text"), Column("source", "Where", "text"),
                                                   Column("code", "Code", "text"), Column("reason", "Reason", "text"),
                                                   Column("explanation", "Explanation", "text")], page_length=0))
    if len(c.recompiles):
        out.append(_sub(f"Recompiles ({len(c.recompiles)}): a guard of an earlier compilation failed"))
        out.append(datatable_html(c.recompiles, [Column("compile_id", "Id", "text"), Column("frame", "Frame", "name", 40),
                                                 Column("source", "Source", "text"),
                                                 Column("reason", "Failed guard", "text"),
                                                 Column("advice", "What to try", "text")], page_length=0))
    if len(c.kernels):
        out.append(_sub("Compiled code: the kernels that ran"))
        device = (c.kernels["device"] != "cpu").any()
        out.append(datatable_html(c.kernels, [Column("name", "Kernel", "name", 60), Column("kind", "Kind", "text"),
                                              Column("count", "Calls", "count"),
                                              Column("total_us", "Device time" if device else "Time", "time_us"),
                                              Column("avg_us", "Avg", "time_us"), Column("share", "Share", "share"),
                                              Column("aten_ops", "ATen ops fused", "text"),
                                              Column("sources", "Source lines", "text")],
                                  order=[("total_us", "desc")], page_length=limit or 20,
                                  caption="cpp / triton: kernels Inductor generated; extern: library calls "
                                          "(matmuls, convolutions) the compiled code made"))
    if len(c.lines):
        out.append(_sub("By source line: the compiled code's time, line by line"))
        out.append(datatable_html(c.lines, [Column("source", "Line", "text"), Column("code", "Code", "text"),
                                            Column("kernel_us", "Time", "time_us"), Column("count", "Kernel calls", "count"),
                                            Column("kernels", "Kernels", "text")],
                                  order=[("kernel_us", "desc")], page_length=limit or 20,
                                  caption="a kernel that fused several lines counts its time evenly among them"))
    return "".join(out)


def render(report: Any) -> str:
    return compilation_html(report.profile.compilation(), report.limit or 0)


def _applies(profile: Any) -> bool:
    return not profile.compilation().empty


COMPILE = Tab("Compile", render, applies=_applies)
