"""A folder of ranks on one timeline, drawn without the ranks' events in this process
(``ClusterProfile.timeline()``, ``timeline_view()``, the report's Timeline tab, the live widget).

**At load, in each rank's worker** (where ``cluster.summary.rank_summary`` reads the rank, events in
hand), :func:`rank_timeline`: its collective calls, and :func:`write_cache`: the columns the
timeline, its hover texts and a selection read, one ``.npy`` file each, in a folder of its own
under this session's cache directory (``$NBPROF_CACHE_DIR``, else ``~/.cache/nbprof``: a disk, not
/tmp, which is memory on some systems); the profile removes it when it goes, a later session the
folders of sessions that died. ~45 bytes an event (1 M events: 45 MB), ~0.05 s.

**When the timeline is first shown**, the workers draw each rank's full view from its cache
(:func:`full_part`, ~0.5 s of CPU a rank of 1 M events, not paid by a load that never shows it): its
rectangles merged to pixel resolution over its own span (``analysis.timeline``) to a budget of
rectangles shared by the ranks, with each event's hover text (its start time marked: the rank's
place on the common clock is known here, not there), its launch -> kernel pairs and its
collective calls' rows; the layout (each event's row) is kept in the cache for zooms.

**Zoom, selection, find** ask the workers again: each rank's part of a window is read from its
cache, memory-mapped (only the start and duration columns are read whole, 16 bytes an event; the
window's rows are gathered), and drawn in full detail where the window holds fewer events than
the budget. The workers are the loader's kind (``cluster.workers.RankPool``): spawned processes,
started on the first zoom and kept while zooms come (``IDLE_S`` idle ends them, the next zoom
starts them again); Dask, each rank on the worker that wrote its cache; or this process, for a
folder read in this process. Measured on 8 ranks x 1 M events, 2 workers (benchmarks/RESULTS.md): a 1 ms zoom
answers in 0.09 s with the workers kept, 1.0 s where they start for it, 51 s reading the ranks'
trace files again instead of the caches.

**In this process**: :func:`~nbprof.analysis.timeline.stack_timelines` puts the ranks' parts
one under the other on one clock (as recorded: the traces' own clocks; or aligned (``align``) on
an event, the first collective or a name such as ``ProfilerStep#3``), merged again
to the figure's budget; :func:`~nbprof.analysis.collectives.match_calls` joins each collective's
calls across ranks (same process group and sequence number), and the rank whose call started
last (on the recorded clock) is marked.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.collectives import collective_calls, match_calls
from ..analysis.timeline import TimelineData, stack_timelines, timeline_rects
from ..analysis.timeline_tracks import flows
from ..analysis.timeline_window import WindowSummary, window_summary
from ..errors import OptionError
from ..events import DEVICE_CODES, KIND_CODE, TREE_CODES, kind_mask
from ..format import esc_plotly, fmt_us, plural
from ..meta import TraceMeta
from ..system import process_alive, replace_file
from ..views.live_timeline import LiveTimelineState
from .workers import RankPool

__all__ = ["RankTimeline", "rank_timeline", "write_cache", "ClusterTimeline", "ClusterTimelineView",
           "rank_budget", "selection_data"]

FULL_WIDTH_PX = 2000
MAX_RECTS = 20_000  # the stacked view's rectangles (as one profile's figure: views.timeline.DEFAULT_MAX_RECTS)
SELECTION_ROWS = 8  # names per table of a rank in a selected span

# the events' columns a window is drawn and described from (timeline_rects with a layout, hover
# texts, flows, window_summary); an absent column is left out
CACHE_COLUMNS = ("name", "kind", "device", "thread", "stream", "start_us", "dur_us", "correlation", "input_shapes",
                 "bytes", "pid", "grid", "block", "registers_per_thread", "occupancy_pct", "parent", "depth",
                 "device_total_us")


def rank_budget(ranks: int, max_rects: int = MAX_RECTS) -> int:
    """Rectangles each rank's worker draws of a view: twice its share of the stacked view's, so the
    stacked view merges once more (at least 2,000: a rank's lanes stay readable)."""
    return int(min(max(2 * max_rects // max(ranks, 1), 2000), max_rects))


# -- in the rank's worker ----------------------------------------------------------------------------


@dataclass
class RankTimeline:
    """One rank's timeline: its collective calls (``collective_calls``: ``event`` their position
    in the rank's events, ``row`` their timeline row once its layout is known, -1 before), where
    its cache is (``cache``: a folder, "" for none: the file is read again) and which Dask worker
    wrote it (``worker``: its address, "" outside Dask); ``data``: its full view once drawn (by
    :func:`full_part`, without events: rectangles with ``hover``, start times marked, see
    ``views.timeline_hover.resolve_at``; launch and work coordinates of single events). Times: the
    rank's own clock."""

    calls: pd.DataFrame
    file: str
    cache: str
    worker: str
    data: TimelineData | None = None


def rank_timeline(events: pd.DataFrame, meta: TraceMeta, file: str, *, cache_root: str | None = None) -> RankTimeline:
    """What a rank's worker keeps of its timeline at load: its collective calls and its cache."""
    calls = collective_calls(events)
    calls["row"] = np.full(len(calls), -1, dtype=np.int64)
    cache = ""
    if cache_root:
        cache = os.path.join(cache_root, os.path.basename(file))
        write_cache(Path(cache), events, meta)
    return RankTimeline(calls=calls, file=file, cache=cache, worker=_dask_worker())


def _portable(data: TimelineData) -> TimelineData:
    """The view without its events: the hover texts of single events (times marked; a merged
    rectangle's is written from the rectangle where it is drawn) and launch / work coordinates
    written in the rectangles, what a stacked view needs of them; integers in 32 bits (it travels)."""
    from ..views.timeline_hover import hover_texts

    r = data.rects
    single = r["event"].to_numpy() >= 0
    hover = np.full(len(r), None, dtype=object)
    if single.any():
        hover[single] = hover_texts(dataclasses.replace(data, rects=r[single].reset_index(drop=True)), mark_at=True)
    r["hover"] = hover
    for column, values in _flow_columns(data).items():
        r[column] = values
    for column in ("row", "lane", "level", "count", "event", "distinct", "launch_row", "work_row"):
        r[column] = r[column].to_numpy().astype(np.int32)
    return dataclasses.replace(data, events=None, event_row=None)


def _flow_columns(data: TimelineData) -> dict[str, np.ndarray]:
    """For each single-event rectangle that is a launch or device work with its partner drawn: the
    launch's and the work's start (µs) and row; NaN / -1 otherwise."""
    r = data.rects
    n = len(r)
    out = {"launch_x_us": np.full(n, np.nan), "launch_row": np.full(n, -1, dtype=np.int64),
           "work_x_us": np.full(n, np.nan), "work_row": np.full(n, -1, dtype=np.int64)}
    ev, event_row = data.events, data.event_row
    pos = r["event"].to_numpy()
    single = np.flatnonzero(pos >= 0)
    if ev is None or event_row is None or len(single) == 0:
        return out
    pairs = flows(ev)
    if len(pairs) == 0:
        return out
    m = len(ev)
    launch_of = np.full(m, -1, dtype=np.int64)
    work_of = np.full(m, -1, dtype=np.int64)
    launch_of[pairs["work"].to_numpy()] = pairs["launch"].to_numpy()
    first = pairs.drop_duplicates("launch", keep="first")  # a call that queued several: its first
    work_of[first["launch"].to_numpy()] = first["work"].to_numpy()
    e = pos[single]
    launch = np.where(launch_of[e] >= 0, launch_of[e], np.where(work_of[e] >= 0, e, -1))
    work = np.where(launch_of[e] >= 0, e, work_of[e])
    ok = (launch >= 0) & (work >= 0)
    ok[ok] = (event_row[launch[ok]] >= 0) & (event_row[work[ok]] >= 0)
    start = ev["start_us"].to_numpy()
    sel = single[ok]
    out["launch_x_us"][sel] = start[launch[ok]]
    out["work_x_us"][sel] = start[work[ok]]
    out["launch_row"][sel] = event_row[launch[ok]]
    out["work_row"][sel] = event_row[work[ok]]
    return out


def _dask_worker() -> str:
    if "distributed" not in sys.modules:
        return ""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):  # not in a Dask worker
        return ""


# -- the cache -------------------------------------------------------------------------------------


def cache_root() -> Path:
    """Where this session's rank caches go (``$NBPROF_CACHE_DIR``, else ``~/.cache/nbprof``)."""
    base = os.environ.get("NBPROF_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "nbprof")
    return Path(base)


def _prefix() -> str:
    """``ranks-<host>-<pid>-``: whose a cache folder is (a home folder may be shared by machines)."""
    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40] or "host"
    return f"ranks-{host}-{os.getpid()}-"


def new_cache_dir() -> str:
    """A fresh folder for one folder of ranks' caches, named after this machine and process; the
    folders of this machine's processes that are gone (a kernel that died) are removed first."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    mine = _prefix().rsplit("-", 2)[0] + "-"  # ranks-<host>-
    for old in root.glob(mine + "*"):
        try:
            pid = int(old.name[len(mine):].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not process_alive(pid):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.mkdtemp(prefix=_prefix(), dir=root)


def remove_cache(root: str, client: Any = None) -> None:
    """Remove a folder of rank caches (here, and on every Dask worker when they wrote it)."""
    # this process's memory maps of them first: Windows removes no file that is mapped
    for folder in [f for f in _OPEN if os.path.dirname(f) == root]:
        _OPEN.pop(folder, None)
    shutil.rmtree(root, ignore_errors=True)
    if client is not None:
        try:
            client.run(shutil.rmtree, root, True)
        except Exception:  # the cluster is gone: so are its caches
            pass


def _narrow(values: np.ndarray) -> np.ndarray:
    """Integers in 32 (16) bits where they fit: the cache's size (read back as they were)."""
    if values.dtype.kind == "i" and values.dtype.itemsize > 4 and len(values):
        lo, hi = int(values.min()), int(values.max())
        if -(1 << 15) <= lo and hi < (1 << 15):
            return values.astype(np.int16)
        if -(1 << 31) <= lo and hi < (1 << 31):
            return values.astype(np.int32)
    return values


def write_cache(folder: Path, events: pd.DataFrame, meta: TraceMeta) -> None:
    """The rank's cache (see the module doc): one ``.npy`` per column (categories by their codes),
    and per name the first start (for ``align``), the drawn events and their time (for find). Its
    timeline's layout is added when first drawn (:meth:`_RankCache.layout`)."""
    folder.mkdir(parents=True, exist_ok=True)
    dtypes: dict[str, Any] = {}
    categories: dict[str, pd.Index] = {}
    for c in CACHE_COLUMNS:
        if c not in events.columns:
            continue
        col = events[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            categories[c] = col.cat.categories
            dtypes[c] = "category"
            np.save(folder / f"{c}.npy", col.cat.codes.to_numpy())
        else:
            values = col.to_numpy()
            dtypes[c] = values.dtype
            np.save(folder / f"{c}.npy", _narrow(values))
    codes = events["name"].cat.codes.to_numpy().astype(np.int64)
    n_names = len(events["name"].cat.categories)
    start = events["start_us"].to_numpy()
    first = np.full(n_names, np.inf)
    named = codes >= 0
    mins = pd.Series(start[named]).groupby(codes[named]).min()
    first[mins.index.to_numpy()] = mins.to_numpy()
    kind = events["kind"].cat.codes.to_numpy()
    drawn = kind_mask(kind, TREE_CODES + DEVICE_CODES + (KIND_CODE["python"],)) & (codes >= 0)
    index = {
        "events": len(events), "dtypes": dtypes, "categories": categories, "meta": meta,
        "name_first_us": first,
        "name_count": np.bincount(codes[drawn], minlength=n_names),
        "name_total_us": np.bincount(codes[drawn], weights=events["dur_us"].to_numpy()[drawn], minlength=n_names),
    }
    with open(folder / "index.pkl", "wb") as f:
        pickle.dump(index, f, protocol=pickle.HIGHEST_PROTOCOL)


class _RankCache:
    """A rank's cache, opened (memory-mapped) in the process that reads it."""

    def __init__(self, folder: str) -> None:
        with open(os.path.join(folder, "index.pkl"), "rb") as f:
            self.index = pickle.load(f)
        self.folder = folder
        self._cols: dict[str, np.ndarray] = {}

    def col(self, name: str) -> np.ndarray:
        if name not in self._cols:
            self._cols[name] = np.load(os.path.join(self.folder, f"{name}.npy"), mmap_mode="r")
        return self._cols[name]

    @property
    def meta(self) -> TraceMeta:
        return self.index["meta"]

    def full_frame(self) -> pd.DataFrame:
        return self.frame(np.arange(self.index["events"], dtype=np.int64))

    def layout(self, drawn: TimelineData | None = None) -> tuple[np.ndarray, pd.DataFrame, pd.DataFrame]:
        """Its timeline's layout: each event's row (-1: not drawn), the rows, the lanes; kept in the
        cache once known (``drawn``: a full view of its events just drawn; else drawn here)."""
        path = os.path.join(self.folder, "layout.pkl")
        if not os.path.exists(path):
            if drawn is None:
                drawn = timeline_rects(self.full_frame(), self.meta, width_px=FULL_WIDTH_PX)
            assert drawn.event_row is not None
            np.save(os.path.join(self.folder, "event_row.npy"), _narrow(drawn.event_row.astype(np.int64)))
            tmp = path + f".{os.getpid()}"
            with open(tmp, "wb") as f:
                pickle.dump({"rows": drawn.rows, "lanes": drawn.lanes.drop(columns="events")}, f,
                            protocol=pickle.HIGHEST_PROTOCOL)
            replace_file(tmp, path)  # whole or absent, whoever reads it
        if "_layout" not in self._cols:
            with open(path, "rb") as f:
                self._layout = pickle.load(f)
            self._cols["_layout"] = np.zeros(0)
        return self.col("event_row"), self._layout["rows"], self._layout["lanes"]

    def window_rows(self, w0: float, w1: float) -> np.ndarray:
        start = self.col("start_us")
        return np.flatnonzero((start <= w1) & (start + self.col("dur_us") >= w0))

    def frame(self, rows: np.ndarray) -> pd.DataFrame:
        """The events at ``rows`` (sorted), with their columns' types; ``parent`` renumbered
        to positions in this frame (-1 for a parent not in it)."""
        out: dict[str, Any] = {}
        for c, dtype in self.index["dtypes"].items():
            values = np.asarray(self.col(c)[rows])
            if isinstance(dtype, str) and dtype == "category":
                out[c] = pd.Categorical.from_codes(values.astype(np.int64), categories=self.index["categories"][c])
            else:
                out[c] = values.astype(dtype, copy=False)
        frame = pd.DataFrame(out)
        if "parent" in frame.columns:
            parent = frame["parent"].to_numpy()
            at = np.searchsorted(rows, parent)
            inside = (parent >= 0) & (at < len(rows)) & (rows[np.minimum(at, len(rows) - 1)] == parent)
            frame["parent"] = np.where(inside, at, -1).astype(np.int64)
        return frame


_OPEN: dict[str, _RankCache] = {}
_OPEN_MAX = 16  # caches kept open per process (each holds a few memory maps)


def _cache(folder: str, file: str) -> _RankCache:
    """The rank's cache, opened once per process; where it is missing (a Dask worker restarted, a
    profile from ``rank_summary`` alone), built again from the trace file first."""
    if folder in _OPEN:
        return _OPEN[folder]
    if not folder or not os.path.exists(os.path.join(folder, "index.pkl")):
        folder = _rebuild(file, folder)
    if len(_OPEN) >= _OPEN_MAX:
        _OPEN.pop(next(iter(_OPEN)))
    _OPEN[folder] = _RankCache(folder)
    return _OPEN[folder]


def _rebuild(file: str, folder: str) -> str:
    from ..collect.chrome_trace import NO_LIMIT, read_trace_file
    from ..model import TorchProfile

    # the file was read once already, at load, under the user's size limit
    p = TorchProfile.from_trace(read_trace_file(file, max_bytes=NO_LIMIT))
    target = folder or tempfile.mkdtemp(prefix=_prefix(), dir=_made(cache_root()))
    write_cache(Path(target), p._events, p.meta)
    return target


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# -- what the workers answer (module-level functions: they are sent to them) ------------------------


def full_part(folder: str, file: str, max_rects: int, call_events: np.ndarray) -> tuple[TimelineData, np.ndarray]:
    """One rank's full view (see the module doc), merged at ``FULL_WIDTH_PX`` over its span to
    ``max_rects``, and the rows of its collective calls (``call_events``: their positions)."""
    c = _cache(folder, file)
    data = timeline_rects(c.full_frame(), c.meta, width_px=FULL_WIDTH_PX, max_rects=max_rects)
    event_row, _, _ = c.layout(data)
    rows = np.asarray(event_row[np.asarray(call_events, dtype=np.int64)]).astype(np.int64)
    return _portable(data), rows


def call_rows(folder: str, file: str, call_events: np.ndarray) -> np.ndarray:
    """The timeline rows of a rank's collective calls (``call_events``: their positions)."""
    event_row, _, _ = _cache(folder, file).layout()
    return np.asarray(event_row[np.asarray(call_events, dtype=np.int64)]).astype(np.int64)


def window_part(folder: str, file: str, w0: float, w1: float, width_px: int, max_rects: int) -> TimelineData:
    """One rank's part of the window [w0, w1] (its own clock), as :func:`rank_timeline`'s view:
    in full detail where it holds at most ``max_rects`` events, else merged at ``width_px``."""
    c = _cache(folder, file)
    rows = c.window_rows(w0, w1)
    parents = np.asarray(c.col("parent")[rows]) if "parent" in c.index["dtypes"] else np.zeros(0, dtype=np.int64)
    rows = np.union1d(rows, parents[parents >= 0]).astype(np.int64)  # launching ops, for hover texts
    sub = c.frame(rows)
    all_rows, layout_rows, lanes = c.layout()
    event_row = np.asarray(all_rows[rows]).astype(np.int64)
    layout = TimelineData(rects=pd.DataFrame(), lanes=lanes.assign(events=0), rows=layout_rows,
                          t0_us=w0, t1_us=w1, px_us=0.0, width_px=width_px, events_drawn=0, merged_events=0,
                          merged_rects=0, max_rects=max_rects, event_row=event_row)
    data = timeline_rects(sub, c.meta, width_px=width_px, max_rects=max_rects, window=(w0, w1), layout=layout)
    return _portable(data)


def select_part(folder: str, file: str, t0: float, t1: float) -> WindowSummary:
    """One rank's ops and kernels in [t0, t1] (its own clock): ``window_summary`` of its events."""
    c = _cache(folder, file)
    return window_summary(c.frame(c.window_rows(t0, t1)), t0, t1)


def find_part(folder: str, file: str, text: str) -> tuple[int, float, list[str]]:
    """One rank's drawn events whose name contains ``text`` (case-insensitive): how many, their
    time, the names."""
    c = _cache(folder, file)
    cats = pd.Index(c.index["categories"]["name"]).astype(str)
    hit = np.flatnonzero(np.asarray(cats.str.lower().str.contains(text.lower(), regex=False), dtype=bool))
    count = c.index["name_count"][hit]
    hit = hit[count > 0]
    return (int(c.index["name_count"][hit].sum()), float(c.index["name_total_us"][hit].sum()),
            [str(cats[i]) for i in hit.tolist()])


def first_start(folder: str, file: str, name: str) -> float | None:
    """The start (its own clock) of the rank's first event named ``name``, or None."""
    c = _cache(folder, file)
    cats = pd.Index(c.index["categories"]["name"])
    at = cats.get_indexer([name])[0]
    if at < 0 or not np.isfinite(c.index["name_first_us"][at]):
        return None
    return float(c.index["name_first_us"][at])


# -- the stacked view ------------------------------------------------------------------------------


class ClusterTimeline:
    """The ranks' timelines on one clock (see the module doc). ``ranks``: (label, RankTimeline,
    shift in µs to the common clock) per rank, in rank order; ``align``: None (as recorded),
    ``"collective"`` (each rank's first collective call at the same time) or an event's name
    (its first occurrence on each rank, e.g. ``"ProfilerStep#3"``). ``owner``: what owns the caches
    and the pool (the profile): kept alive as long as this view (a live widget) is."""

    def __init__(self, ranks: list[tuple[Any, RankTimeline, float]], pool: RankPool, *, align: str | None = None,
                 max_rects: int = MAX_RECTS, owner: Any = None) -> None:
        self.owner = owner
        self.labels = [r for r, _, _ in ranks]
        self.parts = [t for _, t, _ in ranks]
        self.recorded = np.asarray([s for _, _, s in ranks], dtype=np.float64)
        self.pool = pool
        self.max_rects = max_rects
        self.align = align
        self.shifts = self.recorded + self._alignment(align)
        self._matched: pd.DataFrame | None = None

    # ---- the clock
    def _alignment(self, align: str | None) -> np.ndarray:
        """Each rank's move from the recorded clock, so its anchor event starts where the earliest
        rank's does."""
        if align is None or align == "recorded":
            return np.zeros(len(self.parts))
        if not isinstance(align, str) or not align:
            raise OptionError(f"align must be None, 'collective' or an event's name; got {align!r}")
        if align == "collective":
            anchors: list[float | None] = [float(t.calls["start_us"].min()) if len(t.calls) else None
                                           for t in self.parts]
        else:
            anchors = self.pool.map(first_start, [(t.cache, t.file, align) for t in self.parts],
                                    [t.worker for t in self.parts])
        missing = [lab for lab, a in zip(self.labels, anchors) if a is None]
        if missing:
            what = "no collective" if align == "collective" else f"no event named {align!r}"
            raise OptionError(f"align: {what} on rank{'s' if len(missing) > 1 else ''} "
                              f"{', '.join(str(m) for m in missing)}")
        at = np.asarray(anchors, dtype=np.float64) + self.recorded
        return at.min() - at

    def local(self, k: int, t_us: float) -> float:
        return t_us - float(self.shifts[k])

    # ---- the ranks' pieces, drawn by the workers when first needed
    def _where(self) -> list[str]:
        return [t.worker for t in self.parts]

    def _ensure_full(self) -> None:
        """Each rank's full view (and its calls' rows), drawn by the workers once."""
        todo = [k for k, t in enumerate(self.parts) if t.data is None]
        if todo:
            budget = rank_budget(len(self.parts), self.max_rects)
            done = self.pool.map(full_part, [(self.parts[k].cache, self.parts[k].file, budget,
                                              self.parts[k].calls["event"].to_numpy()) for k in todo],
                                 [self.parts[k].worker for k in todo])
            for k, (data, rows) in zip(todo, done):
                self.parts[k].data = data
                self.parts[k].calls["row"] = rows
            self._matched = None

    def _ensure_rows(self) -> None:
        """The rows of each rank's collective calls (its layout: drawn by the workers if not yet)."""
        todo = [k for k, t in enumerate(self.parts) if len(t.calls) and (t.calls["row"] < 0).all()]
        if todo:
            done = self.pool.map(call_rows, [(self.parts[k].cache, self.parts[k].file,
                                              self.parts[k].calls["event"].to_numpy()) for k in todo],
                                 [self.parts[k].worker for k in todo])
            for k, rows in zip(todo, done):
                self.parts[k].calls["row"] = rows
            self._matched = None

    # ---- collectives
    @property
    def _links_all(self) -> pd.DataFrame:
        if self._matched is None:
            self._matched = self._match()
        return self._matched

    def _match(self) -> pd.DataFrame:
        """Every rank's collective calls, joined per collective; ``start_us`` on the recorded
        common clock (who arrived last is a fact of the recording, not of the view's alignment)."""
        frames = []
        for k, (label, t) in enumerate(zip(self.labels, self.parts)):
            if len(t.calls):
                frames.append(t.calls.assign(rank=[label] * len(t.calls), part=k,
                                             start_us=t.calls["start_us"].to_numpy() + self.recorded[k]))
        if not frames:
            return pd.DataFrame(columns=["rank", "process_group", "seq", "name", "start_us", "dur_us", "event", "row",
                                         "part", "ranks", "last", "wait_us", "names"])
        return match_calls(pd.concat(frames, ignore_index=True))

    def calls(self) -> pd.DataFrame:
        """One row per collective call of every rank (``match_calls``), on the recorded common clock."""
        return self._links_all.drop(columns=["event", "row", "part"]).reset_index(drop=True)

    def _links(self, t0: float, t1: float, limit: int = 2000) -> pd.DataFrame | None:
        """The links of the collectives with a call in [t0, t1] (the view's clock), at most
        ``limit`` collectives (those with the longest wait first)."""
        m = self._links_all
        if len(m) == 0:
            return None
        m = m[(m["ranks"] > 1) & (m["row"] >= 0)]
        part = m["part"].to_numpy()
        x = m["start_us"].to_numpy() - self.recorded[part] + self.shifts[part]
        end = x + m["dur_us"].to_numpy()
        key = m["process_group"].astype(str).to_numpy() + "\x00" + m["seq"].astype(str).to_numpy()
        inside = pd.Series((end >= t0) & (x <= t1)).groupby(key).transform("any").to_numpy()
        m = m.assign(x_us=x)[inside]
        if len(m) == 0:
            return None
        key = key[inside]
        groups, first = np.unique(key, return_index=True)
        if len(groups) > limit:
            worst = m.groupby(key)["wait_us"].max().sort_values(ascending=False).index[:limit]
            keep = np.isin(key, worst)
            m, key = m[keep], key[keep]
        codes, _ = pd.factorize(key)
        by = m.groupby(codes)
        waits = by["wait_us"].transform("max").to_numpy()
        texts = []  # what the marker on the last arrival says (the rows' own rank: the last one there)
        for name, pg, seq, rank, wait in zip(m["name"], m["process_group"], m["seq"], m["rank"], waits):
            group = f" (process group {esc_plotly(str(pg))})" if str(pg) else ""
            what = f"{esc_plotly(str(name))} #{int(seq)}{group}"
            texts.append(f"<b>rank {esc_plotly(str(rank))} arrived last</b> at {what}<br>"
                         f"the others waited for it, the longest {fmt_us(float(wait))}" if wait > 0 else
                         f"<b>every rank arrived at {what} together</b><br>none waited for another")
        # a collective the ranks started at the same time has no last arrival to mark
        links = pd.DataFrame({"group": codes, "part": m["part"].to_numpy(), "row": m["row"].to_numpy(),
                              "x_us": m["x_us"].to_numpy(), "last": m["last"].to_numpy(dtype=bool) & (waits > 0),
                              "text": np.asarray(texts, dtype=object)})
        # each collective's calls together, in the order of the stacked ranks (their rows)
        return links.sort_values(["group", "part"], kind="stable").reset_index(drop=True)

    # ---- views
    def _stack(self, parts: list[TimelineData], window: tuple[float, float] | None, width_px: int) -> TimelineData:
        from ..views.timeline_hover import resolve_at

        row_base = np.r_[0, np.cumsum([len(p.rows) for p in parts])[:-1]].astype(np.int64)
        ready = []
        for k, p in enumerate(parts):
            r = p.rects.copy()
            shift = float(self.shifts[k])
            if "hover" in r.columns:
                r["hover"] = resolve_at(r["hover"].to_numpy(dtype=object), shift)
            for c in ("launch_x_us", "work_x_us"):
                if c in r.columns:
                    r[c] = r[c].to_numpy() + shift
            for c in ("launch_row", "work_row"):
                if c in r.columns:
                    r[c] = np.where(r[c].to_numpy() >= 0, r[c].to_numpy() + row_base[k], -1)
            ready.append(dataclasses.replace(p, rects=r))
        t0 = window[0] if window else min((p.t0_us + s for p, s in zip(parts, self.shifts) if p.events_drawn),
                                          default=0.0)
        t1 = window[1] if window else max((p.t1_us + s for p, s in zip(parts, self.shifts) if p.events_drawn),
                                          default=0.0)
        data, _ = stack_timelines(ready, self.labels, list(self.shifts), width_px=width_px, max_rects=self.max_rects,
                                  window=window, links=self._links(t0, t1))
        return data

    def full(self) -> TimelineData:
        """Every rank's full view (drawn by the workers the first time), stacked."""
        self._ensure_full()
        return self._stack([t.data for t in self.parts if t.data is not None], None, FULL_WIDTH_PX)

    def window(self, t0_us: float, t1_us: float, width_px: int = FULL_WIDTH_PX) -> TimelineData:
        """[t0_us, t1_us] on the view's clock, each rank's part read by the workers."""
        t0, t1 = min(t0_us, t1_us), max(t0_us, t1_us)
        budget = rank_budget(len(self.parts), self.max_rects)
        jobs = [(t.cache, t.file, self.local(k, t0), self.local(k, t1), int(width_px), budget)
                for k, t in enumerate(self.parts)]
        parts = self.pool.map(window_part, jobs, self._where())
        self._ensure_rows()
        # a part is drawn on its own clock's window: the same window on the view's clock once moved
        return self._stack(parts, (t0, t1), width_px)

    def selection(self, t0_us: float, t1_us: float) -> list[tuple[Any, WindowSummary]]:
        """Per rank: what ran in [t0_us, t1_us] (the view's clock), times on the view's clock."""
        t0, t1 = min(t0_us, t1_us), max(t0_us, t1_us)
        jobs = [(t.cache, t.file, self.local(k, t0), self.local(k, t1)) for k, t in enumerate(self.parts)]
        out = self.pool.map(select_part, jobs, [t.worker for t in self.parts])
        return [(label, dataclasses.replace(s, t0_us=t0, t1_us=t1)) for label, s in zip(self.labels, out)]

    def find(self, text: str) -> list[tuple[int, float, list[str]]]:
        return self.pool.map(find_part, [(t.cache, t.file, text) for t in self.parts], [t.worker for t in self.parts])


def selection_data(t0_us: float, t1_us: float, per_rank: list[tuple[Any, WindowSummary]]) -> dict:
    """A selected span of several ranks, as the live timeline's browser draws it (names as text,
    ``views/live_timeline.js``): a table with a line per rank (device busy, its ops and kernels,
    the one of each with the most time in the span), then each rank's ops and kernels (the names
    with the most time inside it), in a section of their own per rank."""
    span = max(t1_us - t0_us, 1e-9)
    head = f"{t0_us / 1000:.3f} – {t1_us / 1000:.3f} ms · {fmt_us(span)} · {plural(len(per_rank), 'rank')}"

    def top(t: pd.DataFrame) -> list[str]:
        if len(t) == 0:
            return ["–", ""]
        return [str(t["name"].iat[0]), fmt_us(float(t["in_window_us"].iat[0]))]

    rows, labels = [], []
    for label, s in per_rank:
        busy = f"{fmt_us(s.device_busy_us)} ({100 * s.device_busy_us / span:.0f} %)" if len(s.kernels) else "–"
        ops = int(s.ops["calls"].sum()) if len(s.ops) else 0
        kernels = int(s.kernels["calls"].sum()) if len(s.kernels) else 0
        rows.append([f"rank {label}", busy, f"{ops:,}", *top(s.ops), f"{kernels:,}", *top(s.kernels)])
        labels.append(str(label))
    tables: list[dict] = [dict(title="Each rank in the span", rows=rows, ranks=labels, more=0, names=[3, 6],
                               columns=["rank", "device busy", "ops", "top op", "in span", "kernels", "top kernel",
                                        "in span"])]
    for label, s in per_rank:
        for title, t in (("Operators and ranges", s.ops), ("Kernels", s.kernels)):
            if len(t):
                tables.append(dict(title=title, rank=str(label), group=f"rank {label}: what ran",
                                   more=max(len(t) - SELECTION_ROWS, 0),
                                   rows=[[str(n), f"{c:,}", fmt_us(w), fmt_us(tt)]
                                         for n, c, w, tt in t.head(SELECTION_ROWS).itertuples(index=False, name=None)]))
    return dict(head=head, tables=tables)


# -- display ---------------------------------------------------------------------------------------


class ClusterTimelineView:
    """A folder's timeline for display, as ``TimelineView`` is one profile's: the report's overview
    (``svg()``), the plotly figure (``figure``) and, in a kernel, the live widget (``live()``),
    sharing the stacked full view."""

    def __init__(self, timeline: ClusterTimeline, *, window_us: tuple[float, float] | None = None,
                 height: int | None = None) -> None:
        self.timeline = timeline
        self.window_us = window_us
        self.height = height
        self.python = False
        self.max_rects = timeline.max_rects
        self._data: TimelineData | None = None

    @property
    def data(self) -> TimelineData:
        if self._data is None:
            from ..views.timeline import prepare_timeline

            raw = self.timeline.full() if self.window_us is None else self.timeline.window(*self.window_us)
            self._data = prepare_timeline(raw)
        return self._data

    @property
    def figure(self) -> Any:
        from ..views.timeline import timeline_figure

        return timeline_figure(self.data, height=self.height)

    def svg(self, width: int = 1000, height: int | None = None) -> str:
        from ..views.timeline import timeline_svg

        return timeline_svg(self.data, width=width, height=height)

    def live(self) -> Any:
        """The live timeline widget: zoom re-reads the window from each rank in the workers."""
        from ..views.live_timeline import live_widget
        from ..views.timeline import describe, static_html

        data = self.data
        state = ClusterTimelineState(self.timeline, data, height=self.height)
        return live_widget(state, lambda: static_html(data), describe(data))

    def display_object(self) -> Any:
        from ..views.live_timeline import live_available

        return self.live() if live_available() else self.figure

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return self.display_object()._repr_mimebundle_(include=include, exclude=exclude)

    def __repr__(self) -> str:
        from ..views.timeline import describe

        return f"<{describe(self.data)}>"


class ClusterTimelineState(LiveTimelineState):
    """The live widget's kernel side for a folder of ranks (``views.live_timeline``'s messages):
    zoom, selection and find ask the ranks' workers; hover arrows come from the rectangles."""

    def __init__(self, timeline: ClusterTimeline, full: TimelineData, *, height: int | None) -> None:
        super().__init__(None, full, python=False, max_rects=timeline.max_rects, height=height)
        self.timeline = timeline

    @property
    def events(self) -> Any:  # no events in this process
        return None

    def window(self, x0_us: float | None, x1_us: float | None, width_px: int) -> TimelineData:
        from ..views.timeline import prepare_timeline

        full = self.full
        if x0_us is None or x1_us is None or (min(x0_us, x1_us) <= full.t0_us and max(x0_us, x1_us) >= full.t1_us):
            self.current = full
        else:
            self.current = prepare_timeline(self.timeline.window(float(x0_us), float(x1_us), max(int(width_px), 100)))
        return self.current

    def find(self, text: str) -> str:
        self.query = str(text).strip()
        if not self.query:
            return ""
        found = self.timeline.find(self.query)
        events = sum(n for n, _, _ in found)
        total = sum(t for _, t, _ in found)
        names = len({name for _, _, ns in found for name in ns})
        shown = int(self._matching(self.current).sum())
        return (f"{plural(events, 'event')} match{'es' if events == 1 else ''} “{self.query}” "
                f"({plural(names, 'name')}) on {sum(1 for n, _, _ in found if n)} of {plural(len(found), 'rank')}, "
                f"total {fmt_us(total)} · {plural(shown, 'rect')} on screen")

    def select(self, x0_us: float, x1_us: float) -> dict:
        t0, t1 = min(x0_us, x1_us), max(x0_us, x1_us)
        return selection_data(t0, t1, self.timeline.selection(t0, t1))

    def flow(self, trace: int, x_ms: float) -> dict | None:
        from ..views.live_timeline import rect_at
        from ..views.timeline import _row_y

        data = self.current
        r = data.rects
        if data.empty or "launch_row" not in r.columns:
            return None
        j = rect_at(data, trace, x_ms)
        if j is None:
            return None
        lr, wr = r["launch_row"].iat[j], r["work_row"].iat[j]
        if lr is None or wr is None or not (lr >= 0 and wr >= 0):
            return None
        y = _row_y(data)
        lx, wx = float(r["launch_x_us"].iat[j]), float(r["work_x_us"].iat[j])
        return dict(x0=lx / 1000.0, y0=float(y[int(lr)]), x1=wx / 1000.0, y1=float(y[int(wr)]),
                    text=esc_plotly(str(r["name"].iat[j])[:60]), delay_us=wx - lx)
