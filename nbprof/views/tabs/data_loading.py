"""The Data loading tab: the DataLoaders the run iterated, inside their worker processes.

Per loader, one line of what the loop waited for; the lanes (the main process's waits, each
labelled with the batch it waited for, and one lane per worker with each batch it made: the same
lanes the Timeline tab has after its threads); per worker, the batches it made and its time per
batch; then the workers' Python functions, all workers added up, as ``%%cprofile`` shows a
profile (the same table, the same flame overview). ``p.data_loading()`` and ``p.worker_stats()``
hold the numbers. Shown in both reports, only when a DataLoader ran."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ...analysis.data_loading import add_loading_lanes
from ...analysis.timeline import TimelineData
from ...format import esc, fmt_us, plural
from ..datatable import datatable_html
from ..figure import drawing_html
from ..table import Column
from .base import Tab, empty
from .functions import function_columns

__all__ = ["DATA_LOADING", "loading_timeline"]

WORKER_COLUMNS = [
    Column("loader", "Loader", "text"), Column("worker_label", "Worker", "text"), Column("pid", "pid", "text"),
    Column("epoch", "Epoch", "count"), Column("started_us", "Started at", "time_us"),
    Column("batches", "Batches", "count"), Column("samples", "Samples", "count"),
    Column("make_us", "Per batch (median)", "time_us"), Column("make_mean_us", "Per batch (mean)", "time_us"),
    Column("functions", "Functions", "text"),
]


def _loader_line(s: Any) -> str:
    setup = (f"{plural(s.num_workers, 'worker')}, {s.start_method}" + (", persistent" if s.persistent_workers else "")
             + (f", prefetch_factor {s.prefetch_factor}" if s.prefetch_factor else "")
             if s.num_workers else "no workers: batches made in the main process")
    text = (f"<b>{esc(s.loader)}</b> ({esc(s.dataset)}; {esc(setup)}): {plural(s.batches, 'batch', 'batches')} "
            f"taken in {plural(s.epochs, 'epoch')}")
    if s.loop_us > 0:
        text += (f"; the loop waited {esc(fmt_us(s.steady_wait_us))} after each epoch's first batch "
                 f"({100 * s.steady_share:.0f}% of its steady time)")
        if s.num_workers:
            text += f" and {esc(fmt_us(s.startup_us))} for the workers' start"
    if math.isfinite(s.make_us):
        text += f"; a batch takes {esc(fmt_us(s.make_us))} to make"
    if math.isfinite(s.step_us):
        text += f", the loop works {esc(fmt_us(s.step_us))} per step between batches"
    return f'<div class="nbprof-sub">{text}.</div>'


def loading_timeline(record: Any, origin: int, width_px: int = 2000) -> Any:
    """A timeline of the DataLoaders' lanes alone (the Data loading tab's: a cProfile run has no
    other timeline)."""
    empty = TimelineData(rects=pd.DataFrame({c: [] for c in ("row", "lane", "level", "x0_us", "x1_us", "busy_us",
                                                              "count", "name", "family", "hue", "event", "names",
                                                              "distinct")}),
                         lanes=pd.DataFrame({c: [] for c in ("lane", "rank", "pid", "thread", "device", "stream",
                                                              "label", "kind", "levels", "first_row", "events")}),
                         rows=pd.DataFrame({"row": [], "lane": [], "level": []}), t0_us=0.0, t1_us=0.0, px_us=0.0,
                         width_px=width_px, events_drawn=0, merged_events=0, merged_rects=0, max_rects=20_000)
    return add_loading_lanes(empty, record, origin)


def render(report: Any) -> str:
    profile = report.profile
    loading = profile._data_loading
    out = [_loader_line(s) for s in loading.loaders]
    # what the data_bound finding says (a cProfile report shows no findings elsewhere)
    findings = profile.findings
    out += [f'<div class="nbprof-finding">• {esc(m)}</div>'
            for m in findings.loc[findings["kind"] == "data_bound", "message"]]
    try:
        from ..timeline import prepare_timeline, timeline_svg

        lanes = prepare_timeline(loading_timeline(loading.record, loading.origin_ns))
        if len(lanes.rects):
            out.append(drawing_html(timeline_svg(lanes, width=1000), "the DataLoaders' lanes", style=False))
    except Exception as e:  # a drawing problem must not hide the tables
        out.append(empty(f"The lanes could not be drawn: {type(e).__name__}: {e}"))
    workers = loading.workers.copy()
    if len(workers):
        workers["worker_label"] = ["main process" if w < 0 else str(w) for w in workers["worker"]]
        out.append('<div class="nbprof-sub" style="margin-top:10px"><b>Workers</b></div>')
        out.append(datatable_html(workers, WORKER_COLUMNS, order=[], page_length=0,
                                  caption="each worker process: the batches it made and its time per batch "
                                          "(p.data_loading() has every batch)"))
    functions = profile._workers_profile
    out.append('<div class="nbprof-sub" style="margin-top:10px"><b>Inside the workers</b>: their Python functions '
               "while they made batches, all workers added up (p.worker_stats() has them per worker)</div>")
    if len(functions.stats) == 0:
        out.append(empty("No worker handed back its functions (see the notes)." if loading.record.workers
                         else "No worker processes: the batches were made in the main process, whose functions "
                              "are in this profile's own tables."))
        return "".join(out)
    frame = functions.report().frame().sort_values("tottime_s", ascending=False, kind="stable")
    out.append(datatable_html(frame, function_columns(text=False), order=[("tottime_s", "desc")], page_length=20))
    try:
        from ...analysis.flame import call_tree
        from ..flame import flame_svg

        tree = call_tree(functions.stats, functions.edges, root_label="DataLoader workers",
                         code_names=functions.meta.code_names)
        out.append(drawing_html(flame_svg(tree), "the workers' flame view", style=False))
    except Exception as e:
        out.append(empty(f"The flame view could not be drawn: {type(e).__name__}: {e}"))
    return "".join(out)


def _applies(profile: Any) -> bool:
    record = getattr(profile.meta, "data_loading", None)
    return record is not None and bool(record.loaders)


DATA_LOADING = Tab("Data loading", render, applies=_applies)
