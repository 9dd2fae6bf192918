"""The report shown after a profiled cell: the shell around the tabs.

One ``text/html`` output, persistent: it survives saving, reopening with a fresh kernel,
nbconvert and nbviewer (a widget would not: a saved widget output reopened without its kernel
shows "Error displaying widget: model not found" in JupyterLab, measured). Inside:

- a summary line, notes (a failed cell, collection warnings), what was collected, findings;
- with steps, the step-time breakdown (``views.overview``): a stacked bar per step, the advice;
- tabs (plain HTML/CSS, no script), one module each in ``views.tabs``, listed there in order;
  a tab whose data was not collected says which flag collects it;
- tables that sort by clicking a header, filter by search and page (itables/DataTables, offline),
  with a static preview for places where scripts do not run (GitHub, untrusted notebooks).

``text/plain`` is a table like torch's / pstats' for terminals and diffs, with the same columns
in the same order as the first tab's table. The zoomable timeline is a plotly figure of its own
(``TorchProfile._ipython_display_`` shows it under the report).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis.findings.clock_skew import note as clock_note
from ..analysis.flame import pstats_location
from ..format import esc, fmt_bytes, fmt_s, fmt_share, fmt_us, plural
from ..settings import DEFAULT_LIMIT, resolve_python_sort, resolve_torch_sort
from .datatable import library_html
from .figure import DRAWING_CSS, in_colab
from .overview import overview_html, overview_text
from .table import pstats_ncalls, render_text, sorted_rows
from .tabbar import next_uid, panel_rules, tabs_html
from .tabs import CLUSTER_TABS, PYTHON_TABS, TORCH_TABS, Tab
from .tabs.base import empty
from .tabs.functions import function_columns
from .tabs.operators import operator_columns, with_shares
from .tabs.source import has_lines, source_text

__all__ = ["TorchReport", "ClusterReport", "PythonReport", "report_css", "tabs_html"]

_library_sent = False

# Wide tables: headers wrap (cells do not), so the Operators table with shapes and FLOPs fits in
# JupyterLab at 1400 px with its file browser open (its Kind column was cut off, reachable only by
# a scrollbar under the table: measured, tests/test_frontends.py); narrower still, the first
# column (the name) stays while the numbers scroll under it.
_CSS = """
.nbprof-report{font-family:var(--jp-ui-font-family,-apple-system,BlinkMacSystemFont,'Segoe UI',sans-serif);
  font-size:13px;line-height:1.45;color:var(--jp-ui-font-color1,#222);max-width:100%}
.nbprof-summary{font-size:14px;margin:2px 0 4px}
.nbprof-sub{color:var(--jp-ui-font-color2,#555);margin:0 0 6px}
.nbprof-note{color:#8a4b00;margin:2px 0}
.nbprof-finding{margin:2px 0}
.nbprof-tabs{margin-top:6px}
.nbprof-tabs>input{display:inline-block;position:absolute;opacity:0;pointer-events:none}
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
.nbprof-report table.dataTable.nowrap thead th{white-space:normal;vertical-align:bottom}
.nbprof-report .nbprof-table table.dataTable tr>:first-child{position:sticky;left:0;z-index:1;
  background:var(--jp-layout-color0,#fff)}
""" + DRAWING_CSS


def report_css(uid: int | None = None, panels: int = 0) -> str:
    """The report's style; with ``uid``, the rules that show each of its ``panels`` panels when
    its tab is checked (one rule per panel, so every tab of the list works)."""
    rules = panel_rules(uid, panels) if uid is not None else ""
    return f"<style>{_CSS}{rules}{{display:block}}</style>" if rules else f"<style>{_CSS}</style>"


def library(include: bool | None = None) -> str:
    """itables' bundle: ``True`` always, ``False`` never, ``None`` in the first report of this
    kernel session only (in every report in Colab: each output runs in a frame of its own, where
    the first output's library is not)."""
    global _library_sent
    if include is None and in_colab():
        return library_html()
    if include is False or (include is None and _library_sent):
        return ""
    if include is None:
        _library_sent = True
    return library_html()


def mps_parts(mps: Any) -> list[str]:
    """The summary's MPS parts (``meta.MpsRun``): the device time measured around the run, the
    tensors' memory and the driver's pools, before -> after."""
    time = (f"MPS device time {fmt_us(mps.device_time_us)}" if mps.device_time_us is not None
            else "MPS device time not measured (the first MPS use in this process: run it again)")
    return [time, f"MPS memory {fmt_bytes(mps.allocated_before_bytes)} → {fmt_bytes(mps.allocated_after_bytes)} "
                  f"(driver {fmt_bytes(mps.driver_before_bytes)} → {fmt_bytes(mps.driver_after_bytes)})"]


def _notes_html(notes: list[str]) -> str:
    return "".join(f'<div class="nbprof-note">⚠ {esc(n)}</div>' for n in notes)


def _report_html(report: Any, registry: list[Tab], head: list[str], include_library: bool | None,
                 panels: dict[str, str] | None, selected_group: str | None = None) -> str:
    """The report's HTML: its head lines, then the tabs of ``registry`` the profile shows, with
    one CSS rule per panel. ``panels``: bodies to use instead of drawing a tab (by title; the
    standalone page puts the interactive figure there)."""
    report.uid = uid = next_uid()
    tabs = [t for t in registry if t.shown(report.profile)]
    parts = [library(include_library), report_css(uid, len(tabs)), '<div class="nbprof-report">', *head]
    if report.empty_message:
        parts.append(empty(report.empty_message))
    else:
        panels = panels or {}
        bodies = [(t.title, panels[t.title] if t.title in panels else t.html(report)) for t in tabs]
        # the tab it opens on: a grouping's table (group_by), or a tab by its title ("Ranges")
        selected = next((i for i, t in enumerate(tabs) if selected_group and selected_group in (t.group_by, t.title)), 0)
        parts.append(tabs_html(uid, bodies, selected=selected))
    parts.append("</div>")
    return "".join(parts)


def _limit(asked: int | None, profile_default: int | None) -> int:
    """Rows shown: the view's setting, else the run's, else the built-in default."""
    for limit in (asked, profile_default):
        if limit is not None:
            return int(limit)
    return DEFAULT_LIMIT


def _is_lightning_stage(profile: Any) -> bool:
    """The profile holds a Lightning stage (``nbprof.lightning``'s "[Trainer].fit" range)."""
    from ..analysis.ranges import TRAINER_STAGE

    labels = profile.ranges()["label"]
    return bool(labels.astype(str).str.startswith(TRAINER_STAGE).any()) if len(labels) else False


class TorchReport:
    """The report of a :class:`~nbprof.model.TorchProfile` with given view settings."""

    tabs: list[Tab] = TORCH_TABS

    def __init__(self, profile: Any, sort: str | None = None, limit: int | None = None, group_by: str | None = None):
        self.profile = profile
        meta = profile.meta
        self.notes: list[str] = list(meta.notes)
        skew = clock_note(profile.findings, meta)
        if skew:  # the device times below are wrong: said before anything else
            self.notes.insert(0, skew)
        s = profile.summary
        requested = sort or meta.sort
        self.sort = resolve_torch_sort(requested) if requested else s.sort
        self.limit = _limit(limit, meta.limit)
        group_by = group_by or meta.group_by or "op"
        collected = profile.collected
        if group_by == "shape" and not collected["shapes"]:
            self.notes.append("input shapes were not recorded: run with --shapes to group by shape")
            group_by = "op"
        if group_by == "stack" and not collected["stack"]:
            self.notes.append("Python stacks were not recorded: run with --stack to group by stack")
            group_by = "op"
        self.group_by = group_by
        # the tab it opens on: the operators table of the grouping asked for; a Lightning fit's
        # actions (the stage's range, "[Trainer].fit") where no grouping was asked for
        self.opens_on: str | None = group_by
        if group_by == "op" and any(t.title == "Ranges" for t in self.tabs) and _is_lightning_stage(profile):
            self.opens_on = "Ranges"
        elif group_by == "op" and any(t.title == "Source" for t in self.tabs) and has_lines(profile):
            self.opens_on = "Source"  # --lines: the question it answers is "which line?"
        self.uid = 0  # set by html(): the id of its tabs (the call graph's script finds its panel by it)
        if self.sort not in profile.key_averages(group_by).columns:
            raise ValueError(f"cannot sort by {self.sort!r}")

    # -- pieces -------------------------------------------------------------------------------

    def summary_parts(self) -> list[str]:
        s = self.profile.summary
        parts = [plural(s.events, "event"), f"span {fmt_us(s.span_us)}", f"self CPU {fmt_us(s.self_cpu_us)}"]
        if s.has_device:
            parts.append(f"self CUDA {fmt_us(s.self_device_us)}")
            for device, busy in sorted(self.profile.device_stats.busy_fraction.items()):
                parts.append(f"{device} busy {100 * busy:.0f}%")
        held = {d: p for d, p in s.peak_allocated_bytes.items() if d != "cpu"}
        on_rank: dict[str, Any] = {}
        stats = self.profile.device_stats.devices if held else None
        if stats is not None and "rank" in stats.columns:
            # ranks (a folder, or its merged save read back) each have a "cuda:0": the highest
            # peak of each device is on a rank, named, with that rank's reserved (not another's)
            stats = stats[stats["device"].isin(list(held))]
            for _, row in stats.sort_values("peak_allocated_bytes", ascending=False, kind="stable").iterrows():
                on_rank.setdefault(str(row["device"]), row)
        for device, peak in sorted(held.items()):
            reserved = s.peak_reserved_bytes.get(device, -1)
            where = ""
            if device in on_rank:
                row = on_rank[device]
                peak, reserved = int(row["peak_allocated_bytes"]), int(row["peak_reserved_bytes"])
                where = f"rank {row['rank']} "
            extra = f" (reserved {fmt_bytes(reserved)})" if reserved >= 0 else ""
            parts.append(f"peak {where}{device} {fmt_bytes(peak)}{extra}")
        mps = getattr(self.profile.meta, "mps", None)
        if mps is not None:
            parts += mps_parts(mps)
        return parts

    def top_line(self) -> str | None:
        """The first row of the operators table (sorted by this report's sort) and its share.

        Always of the operators (``group_by="op"``), whatever this report's grouping: grouped by
        shape or stack an operator is split over several rows, and the headline would give a
        different share for the same operator than the ``top_op`` finding beside it (measured:
        "aten::mm (32.0%)" next to "aten::mm takes 48%"). When the table below splits the top
        operator, the headline says that its share is summed over them."""
        from ..analysis.summary import top_row

        s = self.profile.summary
        name, _, share = top_row(self.profile.key_averages("op"), self.sort, s.self_cpu_us, s.self_device_us)
        if not name:
            return None
        label = self.sort.replace("_us", "").replace("_bytes", "").replace("_", " ")
        label = label.replace("device", "CUDA").replace("cpu", "CPU").replace("mem", "memory")
        text = f"top by {label}: {name}"
        if share:
            text += f" ({fmt_share(share)}"
            groups = self.profile.key_averages(self.group_by)["name"] if self.group_by != "op" else None
            if groups is not None and int((groups == name).sum()) > 1:
                text += ", all its input shapes" if self.group_by == "shape" else ", all its stacks"
            text += ")"
        return text

    def collected_line(self) -> str:
        c = self.profile.collected
        names = ["CPU"] + [label for key, label in (("cuda", "CUDA"), ("memory", "memory"), ("shapes", "shapes"),
                                                    ("stack", "stacks"), ("flops", "FLOPs"),
                                                    ("modules", "modules")) if c[key]]
        if getattr(self.profile.meta, "snapshot", None) is not None:  # --snapshot: its own tab
            names.append("CUDA memory snapshot")
        return "collected: " + ", ".join(names)

    @property
    def empty_message(self) -> str | None:
        """Why there is nothing to show, as true as the profile can tell: what the run knows
        (a --schedule that never reached an active step), else a live run's code ran no torch
        operator, else the trace file holds no event nbprof reads (its note says what it holds)."""
        if self.profile.summary.events:
            return None
        meta = self.profile.meta
        if meta.empty_reason:
            return f"The profile recorded no events: {meta.empty_reason}."
        if meta.source == "live":
            return f"The profile recorded no events: the {'script' if meta.script else 'cell'} ran no torch operators."
        return "The trace holds no events nbprof reads."

    def _findings(self) -> list[str]:
        findings = self.profile.findings
        if len(findings) == 0:
            return []
        return [str(m) for m in findings["message"].head(5)]

    # -- renderings -----------------------------------------------------------------------------

    def text(self) -> str:
        lines = ["torch profile: " + " · ".join(self.summary_parts())]
        if self.empty_message:
            lines.append(self.empty_message)
        else:
            top = self.top_line()
            if top:
                lines.append(top)
            lines.append(self.collected_line())
            lines += overview_text(self.profile)
            p = self.profile
            averages = p.key_averages(self.group_by)
            rows = with_shares(sorted_rows(averages, self.sort, self.limit), p.summary)
            lines.append(render_text(rows, operator_columns(p.summary, p.collected, self.group_by, averages)))
            if len(rows) < len(averages):
                lines.append(f"{len(rows)} of {len(averages)} rows (--limit 0 shows all)")
            lines += source_text(p)
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self, include_library: bool | None = None, panels: dict[str, str] | None = None) -> str:
        """The interactive report (static where scripts do not run). ``include_library``: itables'
        bundle always (True), never (False), or in the session's first report (None)."""
        head = " · ".join(esc(x) for x in self.summary_parts())
        sub = [x for x in (self.top_line(), self.collected_line()) if x]
        lines = [f'<div class="nbprof-summary"><b>torch profile</b> · {head}</div>',
                 f'<div class="nbprof-sub">{esc(" · ".join(sub))}</div>', _notes_html(self.notes)]
        lines += [f'<div class="nbprof-finding">• {esc(f)}</div>' for f in self._findings()]
        if not self.empty_message:
            lines.append(overview_html(self.profile))  # the step-time breakdown, above the tabs
        return _report_html(self, self.tabs, lines, include_library, panels, self.opens_on)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


class ClusterReport(TorchReport):
    """The report of a folder of ranks summarized apart (:class:`~nbprof.cluster.ClusterProfile`):
    the Ranks tab first, then every tab its ranks have, summed over the ranks (or each rank's: Memory)
    from their summaries, and the timeline stacked from the ranks' views (no events here)."""

    tabs = CLUSTER_TABS

    def __init__(self, profile: Any, sort: str | None = None, limit: int | None = None, group_by: str | None = None):
        super().__init__(profile, sort, limit, group_by)
        if self.group_by == "op":  # the Ranks tab, first, unless a grouping was asked for
            self.opens_on = None
        self.notes.append(f"{len(profile.rank_labels)} ranks summarized apart: p.rank(r) is one rank's full profile "
                          "(its events, timeline with Python frames, every block of memory); p.events merges every "
                          "rank's events into this process")


class PythonReport:
    """The report of a :class:`~nbprof.model.PythonProfile`."""

    def __init__(self, profile: Any, sort: str | None = None, limit: int | None = None):
        self.profile = profile
        meta = profile.meta
        self.notes: list[str] = list(meta.notes)
        self.sort = resolve_python_sort(sort) if sort else (meta.sort or "tottime_s")
        self.limit = _limit(limit, meta.limit)
        self.uid = 0  # set by html()
        self._frame: pd.DataFrame | None = None

    def frame(self) -> pd.DataFrame:
        """The stats with what the tables show: the short and the full ``file:line(function)``,
        pstats' "12/3" calls, each function's share of the total time."""
        if self._frame is None:
            stats = self.profile.stats
            names = self.profile.meta.code_names
            stats["location"] = pstats_location(stats, names)
            stats["full_location"] = pstats_location(stats, names, full_paths=True)
            stats["ncalls_text"] = pstats_ncalls(stats)
            total = self.profile.total_s
            stats["tottime_share"] = stats["tottime_s"] / total if total else float("nan")
            self._frame = stats
        return self._frame

    def summary_text(self) -> str:
        st = self.profile.stats
        calls = int(st["ncalls"].sum())
        prim = int(st["primitive_calls"].sum())
        text = plural(calls, "function call")
        if prim != calls:
            text += f" ({prim:,} primitive calls)"
        text += f" in {fmt_s(self.profile.total_s)}"
        wall = self.profile.meta.wall_s
        if wall:
            # pstats' total is the functions' own times summed: the cell's top-level code between
            # calls and cProfile's overhead are in no function's tottime, so a cumtime can be
            # close to it or above it; the wall time beside it says how long the run took
            text += f" of own time ({fmt_s(wall)} wall)"
        return text

    def top_line(self) -> str | None:
        frame = self.frame()
        if not len(frame):
            return None
        i = int(frame["tottime_s"].to_numpy().argmax())
        total = self.profile.total_s
        share = f" ({100 * frame['tottime_s'].iloc[i] / total:.1f}%)" if total else ""
        return f"most own time: {frame['location'].iloc[i]}{share}"

    @property
    def empty_message(self) -> str | None:
        return None if len(self.frame()) else "The profile recorded no Python function calls."

    def source_line(self) -> str | None:
        """Where a profile read from a file came from (None: a run)."""
        source = self.profile.meta.source
        return f"from {source}" if source else None

    def text(self) -> str:
        lines = ["cProfile: " + self.summary_text()]
        if self.source_line():
            lines.append(str(self.source_line()))
        frame = self.frame()
        if self.empty_message:
            lines.append(self.empty_message)
        else:
            top = self.top_line()
            if top:
                lines.append(top)
            rows = sorted_rows(frame, self.sort, self.limit)
            lines.append(render_text(rows, function_columns(text=True)))
            if len(rows) < len(frame):
                lines.append(f"{len(rows)} of {len(frame)} functions (-l 0 shows all)")
            lines += source_text(self.profile)
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def html(self, include_library: bool | None = None, panels: dict[str, str] | None = None) -> str:
        lines = [f'<div class="nbprof-summary"><b>cProfile</b> · {esc(self.summary_text())}</div>']
        sub = [x for x in (self.source_line(), self.top_line()) if x]
        if sub:
            lines.append(f'<div class="nbprof-sub">{esc(" · ".join(sub))}</div>')
        lines.append(_notes_html(self.notes))
        # --lines: open on the Source tab (the question it answers is "which line?")
        return _report_html(self, PYTHON_TABS, lines, include_library, panels,
                            "Source" if has_lines(self.profile) else None)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()
