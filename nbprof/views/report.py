"""The report shown after a profiled cell.

One ``text/html`` output, persistent: it survives saving, reopening with a fresh kernel,
nbconvert and nbviewer (a widget would not: a saved widget output reopened without its kernel
shows "Error displaying widget: model not found" in JupyterLab, measured). Inside:

- a summary line, notes (a failed cell, collection warnings), what was collected;
- tabs (plain HTML/CSS, no script): Operators, By input shape, By stack, Memory, Kernels,
  Timeline — a tab whose data was not collected says which flag collects it;
- tables that sort by clicking a header, filter by search and page (itables/DataTables, offline),
  with a static preview for places where scripts do not run (GitHub, untrusted notebooks).

``text/plain`` is a table like torch's / pstats' for terminals and diffs. The zoomable timeline
is a plotly figure of its own (``TorchProfile._ipython_display_`` shows it under the report).
"""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd

from ..settings import DEFAULT_LIMIT, resolve_python_sort, resolve_torch_sort
from .datatable import Col, datatable_html, library_html
from ..analysis.flame import pstats_location
from ..format import esc, fmt_bytes, fmt_count, fmt_s, fmt_us
from .table import (
    pstats_ncalls,
    python_columns,
    render_html,
    render_text,
    sorted_rows,
    torch_columns,
)

__all__ = ["TorchReport", "PythonReport", "tabs_html"]

_ids = itertools.count(1)
_library_sent = False

_CSS = """
.nbprof-report{font-family:var(--jp-ui-font-family,-apple-system,BlinkMacSystemFont,'Segoe UI',sans-serif);
  font-size:13px;line-height:1.45;color:var(--jp-ui-font-color1,#222);max-width:100%}
.nbprof-summary{font-size:14px;margin:2px 0 4px}
.nbprof-sub{color:var(--jp-ui-font-color2,#555);margin:0 0 6px}
.nbprof-note{color:#8a4b00;margin:2px 0}
.nbprof-finding{margin:2px 0}
.nbprof-tabs{margin-top:6px}
.nbprof-tabs>input{position:absolute;opacity:0;pointer-events:none}
.nbprof-tabs>label{display:inline-block;padding:4px 12px;margin-right:2px;cursor:pointer;
  border:1px solid var(--jp-border-color2,#ddd);border-bottom:none;border-radius:4px 4px 0 0;
  background:var(--jp-layout-color2,#f3f3f3);color:var(--jp-ui-font-color1,#333)}
.nbprof-tabs>input:checked+label{background:var(--jp-layout-color0,#fff);font-weight:600;
  box-shadow:inset 0 2px 0 #e8710a}
.nbprof-tabs>.nbprof-panel{display:none;border:1px solid var(--jp-border-color2,#ddd);padding:8px;
  background:var(--jp-layout-color0,#fff)}
.nbprof-empty{color:var(--jp-ui-font-color2,#666);padding:6px 2px}
.nbprof-tab-sep,.nbprof-panel-title{display:none}
.nbprof-report table.dataTable td.nbprof-name span{font-family:var(--jp-code-font-family,monospace)}
"""


def report_css() -> str:
    return f"<style>{_CSS}</style>"


def _panel_css(uid: int, n: int) -> str:
    rules = ",".join(f"#nbprof-{uid}-{i}:checked~.nbprof-panel-{i}" for i in range(n))
    return f"<style>{_CSS}{rules}{{display:block}}</style>"


def tabs_html(uid: int, tabs: list[tuple[str, str]], selected: int = 0) -> str:
    """Tabs from (title, body html) pairs: radio inputs + labels + panels, no script.

    Where styles are stripped (GitHub's notebook preview) every panel shows, one after the
    other: the separators between the labels and a title above each panel, hidden by the CSS,
    keep that readable."""
    out = [f'<div class="nbprof-tabs" id="nbprof-tabs-{uid}">']
    for i, (title, _) in enumerate(tabs):
        checked = " checked" if i == selected else ""
        out.append(
            f'<input type="radio" name="nbprof-tabs-{uid}" id="nbprof-{uid}-{i}"{checked}>'
            f'<label for="nbprof-{uid}-{i}">{esc(title)}</label>'
            + ('<span class="nbprof-tab-sep"> · </span>' if i < len(tabs) - 1 else "")
        )
    for i, (title, body) in enumerate(tabs):
        out.append(f'<div class="nbprof-panel nbprof-panel-{i}">'
                   f'<div class="nbprof-panel-title"><b>{esc(title)}</b></div>{body}</div>')
    out.append("</div>")
    return "".join(out)


def _library(force: bool = False) -> str:
    """itables' bundle, in the first report of this kernel session only (or when forced)."""
    global _library_sent
    if _library_sent and not force:
        return ""
    _library_sent = True
    return library_html()


def _empty(message: str) -> str:
    return f'<div class="nbprof-empty">{esc(message)}</div>'


def _notes_html(notes: list[str]) -> str:
    return "".join(f'<div class="nbprof-note">⚠ {esc(n)}</div>' for n in notes)


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
        if self.sort not in profile.key_averages(group_by).columns:
            raise ValueError(f"cannot sort by {self.sort!r}")

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
            for device, busy in sorted(self.profile.device_stats.busy_fraction.items()):
                parts.append(f"{device} busy {100 * busy:.0f}%")
        for device, peak in sorted(s.peak_allocated_bytes.items()):
            if device != "cpu":
                reserved = s.peak_reserved_bytes.get(device, -1)
                extra = f" (reserved {fmt_bytes(reserved)})" if reserved >= 0 else ""
                parts.append(f"peak {device} {fmt_bytes(peak)}{extra}")
        return parts

    def top_line(self) -> str | None:
        """The first row of the table (sorted by this report's sort) and its share."""
        from ..analysis.summary import top_row

        s = self.profile.summary
        averages = self.profile.key_averages(self.group_by)
        name, _, share = top_row(averages, self.sort, s.self_cpu_us, s.self_device_us)
        if not name:
            return None
        label = self.sort.replace("_us", "").replace("_bytes", "").replace("_", " ")
        label = label.replace("device", "CUDA").replace("cpu", "CPU").replace("mem", "memory")
        return f"top by {label}: {name}" + (f" ({100 * share:.1f}%)" if share else "")

    def collected_line(self) -> str:
        c = self.profile.collected
        names = ["CPU"] + [label for key, label in (("cuda", "CUDA"), ("memory", "memory"), ("shapes", "shapes"),
                                                    ("stack", "stacks"), ("flops", "FLOPs")) if c[key]]
        return "collected: " + ", ".join(names)

    def _is_empty(self) -> bool:
        return self.profile.summary.events == 0

    def _findings(self) -> list[str]:
        findings = getattr(self.profile, "findings", None)
        if findings is None or len(findings) == 0:
            return []
        return [str(m) for m in findings["message"].head(5)]

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

    def static_html(self) -> str:
        """The report without scripts: the summary and the top rows of the table."""
        head = " · ".join(esc(x) for x in self.summary_parts())
        parts = ['<div class="nbprof-report">', f'<div class="nbprof-summary"><b>torch profile</b> · {head}</div>',
                 _notes_html(self.notes)]
        if self._is_empty():
            parts.append(_empty("The profile recorded no events: the cell ran no torch operators."))
        else:
            rows, cols = self._table()
            total = len(self.profile.key_averages(self.group_by))
            caption = f"{len(rows)} of {total} rows" if len(rows) < total else ""
            parts.append(render_html(rows, cols, caption=caption))
        parts.append("</div>")
        return "".join(parts)

    def html(self, include_library: bool | None = None, timeline: str | None = None) -> str:
        """The interactive report (static where scripts do not run)."""
        uid = next(_ids)
        head = " · ".join(esc(x) for x in self.summary_parts())
        library = library_html() if include_library else ("" if include_library is False else _library())
        parts = [library, _panel_css(uid, 8), '<div class="nbprof-report">',
                 f'<div class="nbprof-summary"><b>torch profile</b> · {head}</div>']
        sub = [x for x in (self.top_line(), self.collected_line()) if x]
        parts.append(f'<div class="nbprof-sub">{esc(" · ".join(sub))}</div>')
        parts.append(_notes_html(self.notes))
        for f in self._findings():
            parts.append(f'<div class="nbprof-finding">• {esc(f)}</div>')
        if self._is_empty():
            parts.append(_empty("The profile recorded no events: the cell ran no torch operators."))
            parts.append("</div>")
            return "".join(parts)
        tabs = [
            ("Operators", self._operators_panel("op")),
            ("By input shape", self._operators_panel("shape") if self.profile.collected["shapes"]
             else _empty("Input shapes were not recorded: run with --shapes.")),
        ]
        if self.profile.collected["stack"]:
            tabs.append(("By stack", self._operators_panel("stack")))
        tabs.append(("Memory", self._memory_panel()))
        tabs.append(("Kernels", self._kernels_panel()))
        ranges = self._ranges_panel()
        if ranges:
            tabs.append(("Ranges", ranges))
        steps = self._steps_panel()
        if steps:
            tabs.append(("Steps", steps))
        if "rank" in self.profile._events.columns:
            tabs.append(("Ranks", self._ranks_panel()))
        tabs.append(("Timeline", timeline if timeline is not None else self._timeline_panel()))
        first = {"op": 0, "shape": 1, "stack": 2}.get(self.group_by, 0)
        parts.append(tabs_html(uid, tabs, selected=first if first < len(tabs) else 0))
        parts.append("</div>")
        return "".join(parts)

    def _operators_panel(self, group_by: str) -> str:
        p = self.profile
        s = p.summary
        frame = p.key_averages(group_by)
        frame = frame[~frame["kind"].isin(["kernel", "memcpy", "memset"])].copy()
        frame["self_cpu_share"] = frame["self_cpu_us"] / s.self_cpu_us if s.self_cpu_us else 0.0
        cols = [Col("name", "Name", "name", 70)]
        if group_by == "shape":
            cols.append(Col("input_shapes", "Input shapes", "name", 50))
        if group_by == "stack":
            cols.append(Col("stack", "Stack", "name", 80))
        cols.append(Col("count", "Calls", "count"))
        cols += [Col("self_cpu_share", "Self CPU %", "share"), Col("self_cpu_us", "Self CPU", "time_us"),
                 Col("cpu_total_us", "CPU total", "time_us"), Col("cpu_avg_us", "CPU avg", "time_us")]
        if s.has_device:
            frame["self_device_share"] = frame["self_device_us"] / s.self_device_us if s.self_device_us else 0.0
            cols += [Col("self_device_share", "Self CUDA %", "share"), Col("self_device_us", "Self CUDA", "time_us"),
                     Col("device_total_us", "CUDA total", "time_us"), Col("device_avg_us", "CUDA avg", "time_us")]
        if p.collected["memory"]:
            cols += [Col("self_cpu_mem_bytes", "Self CPU Mem", "bytes"), Col("cpu_mem_bytes", "CPU Mem", "bytes")]
            if s.has_device:
                cols += [Col("self_device_mem_bytes", "Self CUDA Mem", "bytes"),
                         Col("device_mem_bytes", "CUDA Mem", "bytes")]
        if p.collected["flops"]:
            cols.append(Col("flops", "FLOPs", "flops"))
        cols.append(Col("kind", "Kind"))
        sort = self.sort if self.sort in frame.columns else "self_cpu_us"
        frame = frame.sort_values(sort, ascending=sort == "name", kind="stable")
        return datatable_html(frame, cols, order=[(sort, "asc" if sort == "name" else "desc")],
                              page_length=self.limit or 0)

    def _memory_panel(self) -> str:
        p = self.profile
        if not p.collected["memory"]:
            return _empty("Memory was not recorded: run with --memory.")
        from .memory import memory_curve_svg

        s = p.summary
        frame = p.key_averages("op")
        frame = frame[(frame["cpu_mem_bytes"] != 0) | (frame["device_mem_bytes"] != 0)
                      | (frame["self_cpu_mem_bytes"] != 0) | (frame["self_device_mem_bytes"] != 0)]
        main = "self_device_mem_bytes" if s.has_device and frame["self_device_mem_bytes"].abs().sum() else "self_cpu_mem_bytes"
        frame = frame.sort_values(main, ascending=False, kind="stable")
        cols = [Col("name", "Name", "name", 70), Col("count", "Calls", "count")]
        if s.has_device:
            cols += [Col("self_device_mem_bytes", "Self CUDA Mem", "bytes"), Col("device_mem_bytes", "CUDA Mem", "bytes")]
        cols += [Col("self_cpu_mem_bytes", "Self CPU Mem", "bytes"), Col("cpu_mem_bytes", "CPU Mem", "bytes"),
                 Col("kind", "Kind")]
        ev = p._events
        curve = memory_curve_svg(p._memory_curve(), float((ev["start_us"] + ev["dur_us"]).max()))
        table = datatable_html(frame, cols, order=[(main, "desc")], page_length=self.limit or 0,
                               caption="memory allocated (+) and freed (−) inside each operator; self = not in its children")
        return curve + table + self._held_at_peak()

    def _held_at_peak(self) -> str:
        """Per device, the blocks held when allocated memory peaked: what to free or shrink."""
        from ..analysis.memory import memory_peaks

        allocs = self.profile.allocations()
        if not len(allocs) or "rank" in allocs.columns:
            return ""
        out = []
        peaks = memory_peaks(self.profile._memory_curve())
        order = sorted(peaks, key=lambda pk: (pk.device == "cpu", pk.device))  # GPUs first
        for peak in order:
            held = self.profile.alive_at(peak.peak_time_us, peak.device)
            if not len(held):
                continue
            during = held[held["alloc_us"].notna()].copy()
            # what the allocator held when the profile started, less what of it was freed by the peak
            freed_early = allocs[(allocs["device"] == peak.device) & allocs["alloc_us"].isna()
                                 & (allocs["free_us"] <= peak.peak_time_us)]["bytes"].sum()
            older = max(peak.start_allocated_bytes - int(freed_early), 0)
            head = (f"Held on {peak.device} at its peak ({fmt_bytes(peak.peak_allocated_bytes)} at "
                    f"{peak.peak_time_us / 1000:.2f} ms): {len(during):,} block{'' if len(during) == 1 else 's'} "
                    f"allocated during the profile "
                    f"({fmt_bytes(int(during['bytes'].sum()))})")
            if older:
                head += f" and {fmt_bytes(older)} allocated before it"
            out.append(f'<div class="nbprof-sub" style="margin-top:10px"><b>{esc(head)}</b></div>')
            if len(during):
                during["age_us"] = peak.peak_time_us - during["alloc_us"]
                cols = [Col("bytes", "Size", "bytes"), Col("op", "Allocated in", "name", 40),
                        Col("top_op", "Under", "name", 48), Col("alloc_us", "At", "time_us"),
                        Col("age_us", "Held for", "time_us"), Col("free_us", "Freed at", "time_us")]
                out.append(datatable_html(during, cols, order=[("bytes", "desc")], page_length=10,
                                          caption="blocks alive at the peak, biggest first (Freed at — : "
                                                  "still held when the profile ended); result.alive_at(t, device)"))
        return "".join(out)

    def _kernels_panel(self) -> str:
        p = self.profile
        if not p.summary.has_device:
            reason = ("CUDA was not recorded: run with --cuda on a machine with a GPU."
                      if not p.collected["cuda"] else "No CUDA kernels ran in this cell.")
            return _empty(reason)
        frame = p.kernels()
        cols = [Col("name", "Kernel", "kernel", 60), Col("kind", "Kind"), Col("count", "Calls", "count"),
                Col("share", "GPU time %", "share"), Col("device_total_us", "Total", "time_us"),
                Col("device_avg_us", "Avg", "time_us"), Col("device_min_us", "Min", "time_us"),
                Col("device_max_us", "Max", "time_us"), Col("launched_by", "Launched by", "name", 32)]
        if (frame["bytes"] > 0).any():
            # bytes moved by copies and memsets; a kernel's cell says "—" (does not apply), not "0 B"
            frame["bytes"] = frame["bytes"].where(frame["kind"] != "kernel")
            cols.append(Col("bytes", "Bytes", "bytes"))
        if (frame["launch_configs"] > 0).any():  # CUPTI's launch configuration (recorded with kernels)
            cols += [Col("grid", "Grid"), Col("block", "Block"), Col("registers_per_thread", "Regs", "count"),
                     Col("shared_memory_bytes", "Shared mem", "bytes"), Col("blocks_per_sm", "Blocks/SM", "decimal"),
                     Col("occupancy_pct", "Occupancy %", "decimal")]
        cols.append(Col("streams", "Streams"))
        table = datatable_html(frame, cols, order=[("device_total_us", "desc")], page_length=self.limit or 0)
        return self._gpu_use_line() + table

    def _gpu_use_line(self) -> str:
        """Per device: busy share of the span, and CUPTI's SM efficiency and occupancy estimates."""
        lines = []
        for _, d in self.profile.device_stats.devices.iterrows():
            if not d["kernels"] and not d["memcpys"] and not d["memsets"]:
                continue
            who = f"rank {d['rank']} {d['device']}" if "rank" in d.index else str(d["device"])
            parts = [f"GPU busy {100 * d['busy_fraction']:.1f}% of the span"]
            if d["sm_efficiency"] == d["sm_efficiency"]:  # not NaN: the trace has the estimates
                parts.append(f"est. SM efficiency {100 * d['sm_efficiency']:.1f}%")
            if d["achieved_occupancy_pct"] == d["achieved_occupancy_pct"]:
                parts.append(f"est. achieved occupancy {d['achieved_occupancy_pct']:.1f}%")
            lines.append(f'<div class="nbprof-sub"><b>{esc(who)}</b>: {esc(" · ".join(parts))}</div>')
        if not lines:
            return ""
        hint = ("SM efficiency: the share of the span with SMs given work (a kernel with fewer blocks than "
                "SMs counts in part); occupancy: warps resident per SM over the maximum, weighted by kernel time "
                "(CUPTI's estimates)")
        return "".join(lines) + f'<div class="nbprof-empty" style="padding-top:0">{esc(hint)}</div>'

    def _ranges_panel(self) -> str:
        ranges = getattr(self.profile, "ranges", None)
        if ranges is None:
            return ""
        frame = ranges() if callable(ranges) else ranges
        if frame is None or len(frame) == 0:
            return ""
        frame = frame.copy()
        indent = "\u2003"
        frame["label_indented"] = [indent * int(d) + str(n) for n, d in zip(frame["label"], frame["depth"])]
        cols = [Col("label_indented", "Range", "text"), Col("count", "Calls", "count"),
                Col("total_us", "Total", "time_us"), Col("mean_us", "Mean", "time_us"),
                Col("share_of_span", "Share of span", "share")]
        if "device_us" in frame.columns and (frame["device_us"] > 0).any():
            cols.append(Col("device_us", "GPU time (kernels)", "time_us"))
        return datatable_html(frame, cols, order=[], page_length=0,
                              caption="record_function ranges, nested ranges indented")

    def _steps_panel(self) -> str:
        """The recorded steps of a --schedule loop: one row per step, then the steps side by
        side (self CPU time per op, one column per step)."""
        steps = self.profile.steps()
        if steps is None or len(steps) == 0:
            return ""
        cols = [Col("step", "Step", "count")]
        if "rank" in steps.columns:
            cols.insert(0, Col("rank", "Rank", "count"))
        cols += [Col("dur_us", "Duration", "time_us"), Col("self_cpu_us", "Self CPU", "time_us"),
                 Col("ops", "Ops", "count")]
        if (steps["device_us"] > 0).any():
            cols += [Col("device_us", "GPU time", "time_us"), Col("kernels", "Kernels", "count")]
        cols += [Col("top_op", "Top op", "name", 40), Col("top_op_us", "Top op time", "time_us")]
        table = datatable_html(steps, cols, order=[], page_length=0, caption="one row per recorded step")
        side = self.profile.step_breakdown()
        if side.empty:
            return table
        side = side.reset_index()
        side.columns = [str(c) for c in side.columns]
        side_cols = [Col(side.columns[0], "Name", "name", 50)] + [
            Col(c, f"step {c}", "time_us") for c in side.columns[1:]
        ]
        by_total = side[side.columns[1:]].sum(axis=1).sort_values(ascending=False).index
        side = side.loc[by_total]
        return table + datatable_html(side, side_cols, order=[], page_length=self.limit or 0,
                                      caption="self CPU time per op, steps side by side")

    def _ranks_panel(self) -> str:
        """A profile merged from several ranks: time per rank, the slowest rank, what differs."""
        ranks = self.profile.ranks()
        table = ranks.table
        cols = [Col("rank", "Rank", "text"), Col("span_us", "Span", "time_us"), Col("self_cpu_us", "Self CPU", "time_us"),
                Col("ops", "Ops", "count")]
        if (table["kernel_us"] > 0).any():
            cols += [Col("kernel_us", "Kernel time", "time_us"), Col("kernels", "Kernels", "count"),
                     Col("device_busy_fraction", "GPU busy", "share"), Col("compute_us", "Compute", "time_us"),
                     Col("comm_us", "Communication", "time_us")]
        head = (f'<div class="nbprof-sub">slowest rank: {esc(ranks.slowest)} · imbalance '
                f"{100 * ranks.imbalance:.0f}% (the slowest rank's extra time over the median)</div>")
        out = head + datatable_html(table, cols, order=[], page_length=0, caption="one row per rank")
        diff = ranks.differences
        if len(diff):
            dcols = [Col("name", "Name", "name", 70), Col("kind", "Kind"), Col("count_min", "Calls (min)", "count"),
                     Col("count_max", "Calls (max)", "count"), Col("time_min_us", "Time (min rank)", "time_us"),
                     Col("time_max_us", "Time (max rank)", "time_us"), Col("spread", "Spread", "share"),
                     Col("slowest_rank", "Slowest rank", "text")]
            out += datatable_html(diff, dcols, order=[], page_length=self.limit or 0,
                                  caption="operators and kernels that differ across ranks, biggest spread first")
        return out

    def _timeline_panel(self) -> str:
        try:
            svg = self.profile.timeline_view().svg()
        except Exception as e:  # a timeline problem must not hide the tables
            return _empty(f"The timeline could not be drawn: {type(e).__name__}: {e}")
        return svg + _empty("An overview; the zoomable timeline is shown under this report (result.timeline()).")


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

    def static_html(self) -> str:
        parts = ['<div class="nbprof-report">',
                 f'<div class="nbprof-summary"><b>cProfile</b> · {esc(self.summary_text())}</div>',
                 _notes_html(self.notes)]
        frame = self._frame()
        if not len(frame):
            parts.append(_empty("The profile recorded no Python function calls."))
        else:
            rows = sorted_rows(frame, self.sort, self.limit)
            caption = f"{len(rows)} of {len(frame)} functions" if len(rows) < len(frame) else ""
            parts.append(render_html(rows, python_columns(frame, total_s=self.profile.total_s), caption=caption))
        parts.append("</div>")
        return "".join(parts)

    def html(self, include_library: bool | None = None, flame: str | None = None) -> str:
        uid = next(_ids)
        library = library_html() if include_library else ("" if include_library is False else _library())
        parts = [library, _panel_css(uid, 4), '<div class="nbprof-report">',
                 f'<div class="nbprof-summary"><b>cProfile</b> · {esc(self.summary_text())}</div>']
        top = self.top_line()
        if top:
            parts.append(f'<div class="nbprof-sub">{esc(top)}</div>')
        parts.append(_notes_html(self.notes))
        frame = self._frame()
        if not len(frame):
            parts.append(_empty("The profile recorded no Python function calls."))
            parts.append("</div>")
            return "".join(parts)
        total = self.profile.total_s
        frame["tottime_share"] = frame["tottime_s"] / total if total else 0.0
        # the full file:line(function): the table shows it shortened, the hover in full
        frame["full_location"] = pstats_location(frame, self.profile.meta.get("code_names"), full_paths=True)
        cols = [Col("ncalls", "ncalls", "count"), Col("tottime_share", "tottime %", "share"),
                Col("tottime_s", "tottime", "time_s"), Col("tottime_per_call_s", "percall", "time_s"),
                Col("cumtime_s", "cumtime", "time_s"), Col("cumtime_per_call_s", "percall (cum)", "time_s"),
                Col("full_location", "filename:lineno(function)", "location")]
        sort = self.sort if self.sort in frame.columns else "tottime_s"
        frame = frame.sort_values(sort, ascending=sort in ("function", "filename", "lineno"), kind="stable")
        table = datatable_html(frame, cols, order=[(sort, "asc" if sort in ("function", "filename", "lineno") else "desc")],
                               page_length=self.limit or 0)
        tabs = [("Functions", table), ("Callers & callees", self._callgraph_panel(frame, uid))]
        tabs.append(("Flame", flame if flame is not None else self._flame_panel()))
        parts.append(tabs_html(uid, tabs))
        parts.append("</div>")
        return "".join(parts)

    def _callgraph_panel(self, frame: pd.DataFrame, uid: int, top: int = 40) -> str:
        """Pick a function (the most expensive by cumtime) to see its callers and callees, with
        the calls and time on each edge. Without scripts every function's panel shows."""
        from ..analysis.callgraph import EdgeIndex, function_key

        names = self.profile.meta.get("code_names")
        ranked = frame.sort_values("cumtime_s", ascending=False, kind="stable").head(top)
        edges = EdgeIndex(self.profile.edges)  # one grouping, not a filter per function
        options, panels = [], []
        for i, (row, location) in enumerate(zip(ranked.index, ranked["location"])):
            key = function_key(frame, frame.index.get_loc(row))
            callers = edges.callers(key)
            callees = edges.callees(key)  # row numbers into edges' columns
            label = f"{location} · cumtime {fmt_s(frame.at[row, 'cumtime_s'])}"
            options.append(f'<option value="{i}">{esc(label)}</option>')
            panels.append(
                f'<div class="nbprof-cg" data-i="{i}"><div style="margin:6px 0 2px"><b>{esc(location)}</b>: '
                f'{esc(frame.at[row, "ncalls_text"])} calls, tottime {fmt_s(frame.at[row, "tottime_s"])}, '
                f'cumtime {fmt_s(frame.at[row, "cumtime_s"])}</div>'
                + _edges_html("called by", edges, callers, edges.caller, names)
                + _edges_html("calls", edges, callees, edges.callee, names) + "</div>"
            )
        script = (
            "<script>(function(){var root=document.getElementById('nbprof-cg-%d');if(!root)return;"
            "var sel=root.querySelector('select');function show(){root.querySelectorAll('.nbprof-cg')"
            ".forEach(function(p){p.style.display=p.dataset.i===sel.value?'':'none';});}"
            "sel.style.display='';sel.addEventListener('change',show);show();})();</script>" % uid
        )
        return (
            f'<div id="nbprof-cg-{uid}"><select style="display:none;max-width:100%;margin:4px 0">'
            f'{"".join(options)}</select>{"".join(panels)}</div>{script}'
        )

    def _flame_panel(self) -> str:
        try:
            from .flame import flame_svg

            svg = flame_svg(self.profile.call_tree())
        except Exception as e:  # a flame problem must not hide the tables
            return _empty(f"The flame view could not be drawn: {type(e).__name__}: {e}")
        return svg + _empty("An overview; the zoomable flame view is shown under this report (result.flame()).")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


def _edges_html(title: str, edges: Any, rows: list[int], other: list[tuple], names: dict[str, str] | None) -> str:
    """A small table of the edges to or from a function (pstats' print_callers / print_callees):
    ``rows`` index the columns of an ``EdgeIndex``; ``other`` is the function on the other end."""
    from ..analysis.flame import location_label

    if not rows:
        nothing = ("the cell's own top-level code (cProfile does not see the cell as a function)"
                   if title == "called by" else "no other function")
        return f'<div style="color:#666;margin:2px 0 6px">{esc(title)}: {nothing}</div>'
    pad = "padding:2px 10px"
    out = []
    for r in rows:
        nc, pc = int(edges.ncalls[r]), int(edges.primitive_calls[r])
        filename, lineno, function = other[r]
        out.append(
            f"<tr><td style='text-align:right;{pad}'>{nc:,}{'' if nc == pc else f'/{pc:,}'}</td>"
            f"<td style='text-align:right;{pad}'>{esc(fmt_s(float(edges.tottime_s[r])))}</td>"
            f"<td style='text-align:right;{pad}'>{esc(fmt_s(float(edges.cumtime_s[r])))}</td>"
            f"<td style='font-family:monospace;{pad}' title='{esc(filename)}'>"
            f"{esc(location_label(filename, lineno, function, names))}</td></tr>"
        )
    return (
        f'<div style="margin:4px 0 2px;color:#555">{esc(title)}</div>'
        '<table style="border-collapse:collapse;font-size:12px;margin-bottom:8px"><thead><tr>'
        f"<th style='text-align:right;{pad}'>ncalls</th><th style='text-align:right;{pad}'>tottime</th>"
        f"<th style='text-align:right;{pad}'>cumtime</th><th style='text-align:left;{pad}'>function</th>"
        f"</tr></thead><tbody>{''.join(out)}</tbody></table>"
    )
