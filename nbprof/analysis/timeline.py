"""The timeline's data step: the events table -> one row per rectangle to draw (pure numbers).

Lanes: one per CPU thread (per rank and process in a merged multi-rank profile), one per device
stream, and, when asked, one per thread for Python frames. Levels inside a lane: the event tree's
``depth`` for CPU events, the caller chain for Python frames, and on a stream kernels / memcpy /
memset at level 0 with GPU annotations (``record_function`` seen from the GPU) at level 1.
Memory events are instants, not rectangles: they are left out.

Merging: a big profile has far more events than pixels. When a profile has more events than
``max_rects``, events narrower than one pixel of the full view (``span / width_px``) that follow
each other within a pixel on the same (lane, level) row are merged, one rectangle per pixel: a
dense run of tiny events becomes a strip of pixel-wide rectangles, each counting its events and
named after the one that takes most of its time, so the strip still shows which ops dominate
where. If that leaves more than ``max_rects`` rectangles, the pixel doubles until it does not.
Nothing is dropped: every event is in exactly one rectangle (``count`` adds up to the events
drawn), and ``busy_us`` keeps the time its events cover (a merged rectangle spans their gaps too).

Views (``nbprof.views.timeline``) turn the rectangles into a plotly figure or an SVG.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..meta import TraceMeta
from ..events import DEVICE_KINDS, TREE_KINDS, category_mask

__all__ = [
    "TimelineData",
    "timeline_rects",
    "remerge",
    "stack_timelines",
    "merge_groups",
    "aggregate",
    "clip_overlaps",
    "FAMILIES",
]


# What a rectangle is, for its color: a view maps (family, hue) to a color.
FAMILIES = (
    "op",
    "annotation",
    "step",
    "runtime",
    "sync",
    "overhead",
    "other",
    "python",
    "kernel",
    "memcpy",
    "memset",
    "gpu_annotation",
    "batch",  # a batch a DataLoader worker made (analysis.data_loading)
    "data_wait",  # the main process waiting for a batch
    "data_start",  # the main process starting (or resuming) a DataLoader's workers
)
_FAMILY_CODE = {f: i for i, f in enumerate(FAMILIES)}
_NF = len(FAMILIES)

LANE_CPU, LANE_PYTHON, LANE_DEVICE = "cpu", "python", "device"
_RECT_COLUMNS = ("row", "lane", "level", "x0_us", "x1_us", "busy_us", "count", "name", "family", "hue",
                 "event", "names", "distinct")


@dataclass
class TimelineData:
    """The prepared timeline: rectangles and lanes, plus what merging did.

    ``rects`` (sorted by ``row``, ``x0_us``): ``row, lane, level, x0_us, x1_us, busy_us, count,
    name, family, hue`` (a stable hash of the name), ``event`` (position in the events table of an
    unmerged rectangle's event, -1 for a merged one), ``names`` (merged: [(name, events), ...] of
    the names with the most busy time), ``distinct`` (names in the rectangle). ``lanes``: ``lane, label, kind`` (cpu / python / device), ``rank,
    pid, thread, device, stream, levels, first_row, events``. ``rows``: ``row, lane, level``.
    Several ranks' timelines stacked (:func:`stack_timelines`) have no ``events``; ``links`` joins
    the calls of each collective across them (drawn as lines, the last arrival marked).
    """

    rects: pd.DataFrame
    lanes: pd.DataFrame
    rows: pd.DataFrame
    t0_us: float
    t1_us: float
    px_us: float  # merging resolution: events narrower than this were merged (0: none were)
    width_px: int
    events_drawn: int
    merged_events: int
    merged_rects: int
    max_rects: int
    hidden: dict = field(default_factory=dict)  # kind -> events not drawn (python, memory, ...)
    events: pd.DataFrame | None = None  # the events table, for hover details of unmerged rects
    event_row: np.ndarray | None = None  # the row of each event of ``events`` (-1: not drawn)
    links: pd.DataFrame | None = None  # collectives across ranks: ``group, row, x_us, last, text`` per call

    @property
    def span_us(self) -> float:
        return max(self.t1_us - self.t0_us, 0.0)

    @property
    def empty(self) -> bool:
        return len(self.rects) == 0


# ----------------------------------------------------------------------------------------- lanes


def _python_depth(parent: np.ndarray, py_rows: np.ndarray) -> np.ndarray:
    """Depth of each Python frame (``py_rows``) in its caller chain (pointer jumping)."""
    n = len(parent)
    local = np.full(n, -1, dtype=np.int64)
    local[py_rows] = np.arange(len(py_rows))
    up = parent[py_rows]
    p = np.where(up >= 0, local[np.maximum(up, 0)], -1)  # a caller that is no frame ends the chain
    dist = (p >= 0).astype(np.int64)
    for _ in range(64):
        has = p >= 0
        if not has.any():
            break
        q = np.maximum(p, 0)
        dist = np.where(has, dist + dist[q], dist)
        p = np.where(has, p[q], -1)
    return dist


def _thread_label(thread: int, role: str | None, names: dict) -> str:
    label = f"CPU thread {thread}"
    if role:
        return f"{label} ({role})"
    name = names.get(thread) or names.get(str(thread))
    if name and not str(name).startswith("thread "):
        return f"{label} ({name})"
    return label


def _device_label(device: str, stream: int) -> str:
    kind, _, index = str(device).partition(":")
    return f"{kind.upper()} {index} stream {stream}" if index else f"{kind.upper()} stream {stream}"


# --------------------------------------------------------------------------------------- merging


def clip_overlaps(row: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Within each row (sorted by row, x0), start each rectangle at the latest end before it.

    Events of one (lane, level) do not overlap in a well-formed trace; where they do, the later one
    is drawn from where the earlier ones end, and one that ends before that is hidden (zero width,
    merged into its predecessor). Returns (x0, x1, hidden)."""
    hidden = np.zeros(len(row), dtype=bool)
    if len(row) < 2:
        return x0, x1, hidden
    same = np.r_[False, row[1:] == row[:-1]]
    if not (same & np.r_[False, x0[1:] < x1[:-1]]).any():  # fast path: nothing overlaps its predecessor
        # (sorted by start, so a later event can only overlap through its predecessor's chain)
        return x0, x1, hidden
    prev_end = pd.Series(x1).groupby(row).cummax().groupby(row).shift(1).to_numpy()
    overlap = ~np.isnan(prev_end) & (x0 < prev_end)
    hidden = overlap & (x1 <= prev_end)
    x0 = np.where(overlap, prev_end, x0)
    x1 = np.maximum(x1, x0)
    return x0, x1, hidden


def merge_groups(
    row: np.ndarray,
    x0: np.ndarray,
    x1: np.ndarray,
    px: float,
    t0: float = 0.0,
    hidden: np.ndarray | None = None,
) -> np.ndarray:
    """Which rectangle joins the one before it (a bool per input; inputs sorted by row, then x0,
    not overlapping within a row).

    At resolution ``px`` (0: no merging) a rectangle joins the one before it on its row when both
    are narrower than ``px``, the gap between them is under ``px``, and both start in the same
    pixel (``floor((x0 - t0) / px)``): a run of tiny events becomes one rectangle per pixel, so
    a merged rectangle is at most about two pixels wide and keeps the run's structure when zoomed.
    A ``hidden`` rectangle (under the one before it) always joins.
    """
    n = len(row)
    same_row = np.r_[False, row[1:] == row[:-1]] if n else np.zeros(0, dtype=bool)
    join = np.zeros(n, dtype=bool) if hidden is None else hidden & same_row
    if px > 0 and n:
        small = (x1 - x0) < px
        gap = np.r_[np.inf, x0[1:] - x1[:-1]]
        pixel = np.floor((x0 - t0) / px)
        join |= same_row & np.r_[False, small[1:] & small[:-1]] & (gap < px) & np.r_[False, pixel[1:] == pixel[:-1]]
    return join


def aggregate(join: np.ndarray, x0, x1, count, busy, key, top: int = 3) -> tuple[np.ndarray, dict]:
    """Merge the groups ``join`` defines. Returns (group of each input, per group: ``x0, x1, count,
    busy``, ``key`` (the key with the most busy time), ``first`` (its first input), ``size``
    (inputs), and for merged groups ``top_keys`` / ``top_counts`` (the ``top`` keys with the most
    busy time and their event counts, -1 padded) and ``distinct`` (keys in the group))."""
    n = len(join)
    starts = np.flatnonzero(~join)
    group = np.cumsum(~join) - 1
    size = np.diff(np.r_[starts, n])
    ng = len(starts)
    out = {
        "x0": x0[starts],
        "x1": np.maximum.reduceat(x1, starts) if n else np.zeros(0),
        "count": np.add.reduceat(count, starts) if n else np.zeros(0, dtype=np.int64),
        "busy": np.add.reduceat(busy, starts) if n else np.zeros(0),
        "first": starts,
        "size": size,
        "key": key[starts].copy(),
        "top_keys": np.full((ng, top), -1, dtype=np.int64),
        "top_counts": np.zeros((ng, top), dtype=np.int64),
        "distinct": np.ones(ng, dtype=np.int64),
    }
    multi = np.flatnonzero(size[group] > 1) if n else np.zeros(0, dtype=np.int64)
    if len(multi):
        # busy time and events of each (group, key) pair
        pg, pk, pair_busy, pair_count = _pair_sums(group[multi], key[multi], busy[multi], count[multi])
        order = np.lexsort((-pair_busy, pg))
        pg, pk, pair_count = pg[order], pk[order], pair_count[order]
        boundary = np.r_[True, pg[1:] != pg[:-1]]
        idx = np.arange(len(pg))
        rank_in_group = idx - np.maximum.accumulate(np.where(boundary, idx, 0))
        out["key"][pg[boundary]] = pk[boundary]
        keep = rank_in_group < top
        out["top_keys"][pg[keep], rank_in_group[keep]] = pk[keep]
        out["top_counts"][pg[keep], rank_in_group[keep]] = pair_count[keep]
        out["distinct"] = np.maximum(np.bincount(pg, minlength=ng), 1)
    return group, out


def _pair_sums(g, k, busy, count, dense_cells: int = 4_000_000):
    """Sums of ``busy`` and ``count`` per distinct (g, k) pair: (g, k, busy, count) of each pair.

    Few keys per group: a dense (group x key) table of sums (two bincounts) is much faster than
    hashing a million pairs; the hash path stays for tables too big to hold."""
    gc, gu = pd.factorize(g, sort=True)
    kc, ku = pd.factorize(k)
    ng, nk = len(gu), len(ku)
    if ng * nk <= dense_cells:
        cell = gc.astype(np.int64) * nk + kc
        b = np.bincount(cell, weights=busy, minlength=ng * nk)
        c = np.bincount(cell, weights=count, minlength=ng * nk)
        present = np.flatnonzero(c > 0)
        return gu[present // nk], ku[present % nk], b[present], c[present].astype(np.int64)
    stride = int(k.max()) + 1
    codes, pairs = pd.factorize(g * stride + k)
    pair_busy = np.bincount(codes, weights=busy, minlength=len(pairs))
    pair_count = np.bincount(codes, weights=count, minlength=len(pairs)).astype(np.int64)
    return pairs // stride, pairs % stride, pair_busy, pair_count


def _names_lists(agg: dict, categories: np.ndarray) -> np.ndarray:
    """Per merged group: [(name, events), ...] of its main names (by busy time); None for others."""
    out = np.empty(len(agg["size"]), dtype=object)
    out[:] = None
    multi = np.flatnonzero(agg["size"] > 1)
    tk = agg["top_keys"][multi]
    names = np.asarray(np.where(tk >= 0, categories[np.maximum(tk, 0) // _NF], None), dtype=object).tolist()
    counts = agg["top_counts"][multi].tolist()
    for gi, nr, cr in zip(multi.tolist(), names, counts):
        out[gi] = [(n, c) for n, c in zip(nr, cr) if n is not None]
    return out


def _run_merge(row, x0, x1, count, busy, key, hidden, t0, span, width_px, max_rects, merge):
    """Merge at ``span / width_px``; double the pixel until at most ``max_rects`` remain."""
    px = span / max(int(width_px), 1) if merge else 0.0
    join = merge_groups(row, x0, x1, px, t0, hidden)
    while merge and int((~join).sum()) > max_rects and px < span:
        px *= 2
        join = merge_groups(row, x0, x1, px, t0, hidden)
    group, agg = aggregate(join, x0, x1, count, busy, key)
    return px, group, agg


# ----------------------------------------------------------------------------------------- main


def timeline_rects(
    events: pd.DataFrame,
    meta: TraceMeta | None = None,
    *,
    python: bool = False,
    width_px: int = 2000,
    max_rects: int = 20_000,
    window: tuple[float, float] | None = None,
    merge: bool | None = None,
    layout: TimelineData | None = None,
) -> TimelineData:
    """The rectangles of the timeline of ``events`` (an events table with the tree columns).

    ``window``: (start, end) in µs: only that part of the profile, at full resolution for it.
    ``merge``: None merges only if there are more than ``max_rects`` events; True always merges
    at ``width_px`` resolution (static renderings); False never does.
    ``layout``: a timeline of the same events (and ``python``) whose lanes and rows to keep: a
    zoomed live view keeps its layout while its rectangles change, and reading each event's row
    from it skips the layout work (about 0.3 s at 1 M events).
    """
    meta = meta or TraceMeta()
    n = len(events)
    kinds = [str(k) for k in events["kind"].cat.categories]
    kind_codes = events["kind"].cat.codes.to_numpy().astype(np.int64)
    code = {k: i for i, k in enumerate(kinds)}
    thread = events["thread"].to_numpy()
    stream = events["stream"].to_numpy()
    depth = events["depth"].to_numpy() if "depth" in events.columns else np.full(n, -1)

    def isin(names):
        return np.isin(kind_codes, [code[k] for k in names if k in code])

    is_cpu = isin(TREE_KINDS) & (thread >= 0) & (depth >= 0)
    is_dev = isin(DEVICE_KINDS) & (stream >= 0)
    is_py = isin(("python",)) & (thread >= 0)
    drawn = is_cpu | is_dev | (is_py if python else False)

    hidden_kinds: dict = {}
    if (~drawn).any():
        counts = np.bincount(kind_codes[~drawn], minlength=len(kinds))
        hidden_kinds = {kinds[i]: int(c) for i, c in enumerate(counts) if c}

    start = events["start_us"].to_numpy(dtype=np.float64)
    end = start + events["dur_us"].to_numpy(dtype=np.float64)
    if layout is not None and layout.event_row is not None:
        drawn = layout.event_row >= 0
    if window is not None:
        w0, w1 = float(window[0]), float(window[1])
        drawn = drawn & (end >= w0) & (start <= w1)
    idx = np.flatnonzero(drawn)
    m = len(idx)
    event_row = np.full(n, -1, dtype=np.int32)
    if layout is not None and layout.event_row is not None:
        event_row = layout.event_row
        row = event_row[idx].astype(np.int64)
        lane_of = layout.rows["lane"].to_numpy()[row]
        level = layout.rows["level"].to_numpy()[row]
        rows_table, lanes = layout.rows, layout.lanes.drop(columns="events")
    else:
        lane_of, level, row, rows_table, lanes = _lane_rows(events, meta, idx, is_dev, is_py, kind_codes, code)
        event_row[idx] = row

    # --- span, window clipping
    s, e = start[idx], end[idx]
    if window is not None:
        s, e = np.clip(s, w0, w1), np.clip(e, w0, w1)
        t0, t1 = w0, w1
    elif m:
        t0, t1 = float(s.min()), float(e.max())
    else:
        t0 = t1 = 0.0

    # --- sort, clip, merge
    order = _row_start_order(row, s, e)
    pos = idx[order]
    row_s, s, e = row[order], s[order], e[order]
    s, e, hid = clip_overlaps(row_s, s, e)
    name_codes = events["name"].cat.codes.to_numpy()[pos].astype(np.int64)
    categories = np.asarray(events["name"].cat.categories, dtype=object)
    family = _families(kinds, kind_codes[pos], name_codes, categories)
    key = name_codes * _NF + family
    if merge is None:
        merge = m > max_rects
    px, group, agg = _run_merge(row_s, s, e, np.ones(m, dtype=np.int64), e - s, key, hid,
                                t0, max(t1 - t0, 1e-9), width_px, max_rects, merge)

    first = agg["first"]
    single = agg["size"] == 1
    rect_names = agg["key"] // _NF
    rects = pd.DataFrame({
        "row": row_s[first],
        "lane": lane_of[order][first],
        "level": level[order][first],
        "x0_us": agg["x0"],
        "x1_us": agg["x1"],
        "busy_us": agg["busy"],
        "count": agg["count"],
        "name": categories[rect_names] if len(first) else np.zeros(0, dtype=object),
        "family": np.asarray(FAMILIES, dtype=object)[agg["key"] % _NF] if len(first) else np.zeros(0, dtype=object),
        "hue": _hues(categories)[rect_names] if len(first) else np.zeros(0, dtype=np.int64),
        "event": np.where(single, pos[first], -1),
        "names": _names_lists(agg, categories),
        "distinct": agg["distinct"],
    })
    merged = agg["size"] > 1

    lanes["events"] = np.bincount(lane_of, minlength=len(lanes)) if len(lanes) else np.zeros(0, dtype=np.int64)

    data = TimelineData(
        rects=rects,
        lanes=lanes,
        rows=rows_table,
        t0_us=t0,
        t1_us=t1,
        px_us=px,
        width_px=int(width_px),
        events_drawn=m,
        merged_events=int(agg["size"][merged].sum()),
        merged_rects=int(merged.sum()),
        max_rects=int(max_rects),
        hidden=hidden_kinds,
        events=events,
        event_row=event_row,
    )
    loading = getattr(meta, "data_loading", None)
    if loading is not None:  # the DataLoaders' waits and workers (recorded beside the profile): lanes after these
        from .data_loading import add_loading_lanes

        origin = int(getattr(meta, "base_time_ns", 0) or 0) + int(meta.origin_ns)
        data = add_loading_lanes(data, loading, origin, window, keep_layout=layout is not None)
    return data


def _lane_rows(events: pd.DataFrame, meta: TraceMeta, idx: np.ndarray, is_dev: np.ndarray, is_py: np.ndarray,
               kind_codes: np.ndarray, code: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.DataFrame, pd.DataFrame]:
    """The layout of the drawn events ``idx``: each one's lane, level and row, the rows table
    (``row, lane, level``) and the lanes table (without its ``events`` count)."""
    n = len(events)
    m = len(idx)
    thread = events["thread"].to_numpy()
    stream = events["stream"].to_numpy()
    depth = events["depth"].to_numpy() if "depth" in events.columns else np.full(n, -1)
    # --- lanes: an integer key per drawn event, then one row per distinct key
    lane_kind = np.where(is_dev[idx], 2, np.where(is_py[idx], 1, 0))  # 0 cpu, 1 python, 2 device
    on_dev = lane_kind == 2
    if "rank" in events.columns:
        rank_codes, rank_values = pd.factorize(events["rank"].to_numpy()[idx], sort=True)
    else:
        rank_codes, rank_values = np.zeros(m, dtype=np.int64), np.array([None], dtype=object)
    pid = events["pid"].to_numpy()[idx]
    dev_codes = events["device"].cat.codes.to_numpy()[idx].astype(np.int64)
    dev_names = [str(c) for c in events["device"].cat.categories]
    key_frame = pd.DataFrame({
        "rank": rank_codes.astype(np.int64),
        "group": on_dev.astype(np.int64),
        "pid": np.where(on_dev, -1, pid),
        "thread": np.where(on_dev, -1, thread[idx]),
        "py": np.where(lane_kind == 1, 0, 1),  # a thread's Python lane sits above its op lane
        "device": np.where(on_dev, dev_codes, -1),
        "stream": np.where(on_dev, stream[idx], -1),
    })
    cols = list(key_frame.columns)
    lane_codes, lane_keys = _factorize_rows(key_frame)
    uniq = pd.DataFrame(lane_keys, columns=cols)
    mains = _main_threads(meta)
    autograd = _autograd_threads(events, thread, depth)
    uniq["not_main"] = ~uniq["thread"].isin(list(mains))
    uniq["old"] = np.arange(len(uniq))
    uniq = uniq.sort_values(["rank", "group", "not_main", "thread", "pid", "py", "device", "stream"],
                            kind="stable").reset_index(drop=True)
    remap = np.empty(len(uniq), dtype=np.int64)
    remap[uniq["old"].to_numpy()] = np.arange(len(uniq))
    lane_of = remap[lane_codes] if m else np.zeros(0, dtype=np.int64)

    names = meta.thread_names
    multi_rank = "rank" in events.columns
    cpu_lanes = uniq[uniq["group"] == 0]
    multi_pid = bool(len(cpu_lanes)) and bool((cpu_lanes.groupby("rank")["pid"].nunique() > 1).any())
    labels, lane_kinds = [], []
    for rec in uniq.itertuples(index=False):
        if rec.group == 1:
            label, lk = _device_label(dev_names[rec.device], int(rec.stream)), LANE_DEVICE
        else:
            th = int(rec.thread)
            rank_key = rank_values[rec.rank] if multi_rank else None
            role = "main" if th in mains else ("autograd" if (rank_key, th) in autograd else None)
            label = _thread_label(th, role, names)
            if multi_pid:
                label = f"pid {int(rec.pid)} · {label}"
            lk = LANE_CPU
            if rec.py == 0:
                label = label.replace("CPU thread", "Python thread", 1)
                lk = LANE_PYTHON
        if multi_rank:
            label = f"rank {rank_values[rec.rank]} · {label}"
        labels.append(label)
        lane_kinds.append(lk)

    # --- levels, then rows (lane, level) numbered top to bottom
    level = np.zeros(m, dtype=np.int64)
    cpu_sel = lane_kind == 0
    level[cpu_sel] = depth[idx[cpu_sel]]
    py_sel = lane_kind == 1
    if py_sel.any():
        parent = events["parent"].to_numpy() if "parent" in events.columns else np.full(n, -1)
        py_all = np.flatnonzero(is_py)
        level[py_sel] = _python_depth(parent, py_all)[np.searchsorted(py_all, idx[py_sel])]
    if on_dev.any() and "gpu_annotation" in code:
        level[on_dev] = (kind_codes[idx[on_dev]] == code["gpu_annotation"]).astype(np.int64)
    # levels present in each lane, numbered from 0 (a stream with only annotations has level 0)
    stride = int(level.max()) + 1 if m else 1
    pair_uniq, row = np.unique(lane_of * stride + level, return_inverse=True)
    row = row.reshape(-1)
    row_lane = pair_uniq // stride
    lane_first = np.r_[True, row_lane[1:] != row_lane[:-1]] if len(row_lane) else np.zeros(0, dtype=bool)
    first_pos = np.maximum.accumulate(np.where(lane_first, np.arange(len(row_lane)), 0)) if len(row_lane) else \
        np.zeros(0, dtype=np.int64)
    compact = np.arange(len(row_lane)) - first_pos
    rows_table = pd.DataFrame({"row": np.arange(len(row_lane)), "lane": row_lane, "level": compact})
    level = compact[row] if m else level

    lanes = uniq[["rank", "pid", "thread", "device", "stream"]].copy()
    lanes.insert(0, "lane", np.arange(len(uniq)))
    lanes["rank"] = [rank_values[r] for r in uniq["rank"]] if multi_rank else None
    lanes["device"] = [dev_names[d] if d >= 0 else "cpu" for d in uniq["device"]]
    lanes["label"] = labels
    lanes["kind"] = lane_kinds
    lanes["levels"] = np.bincount(row_lane, minlength=len(uniq)) if len(uniq) else np.zeros(0, dtype=np.int64)
    first_row = np.zeros(len(uniq), dtype=np.int64)
    if len(row_lane):
        first_row[row_lane[lane_first]] = np.flatnonzero(lane_first)
    lanes["first_row"] = first_row
    return lane_of, level, row, rows_table, lanes


def remerge(data: TimelineData, width_px: int, max_rects: int | None = None) -> TimelineData:
    """The same timeline merged again at a coarser resolution (e.g. for a static image).

    Works on the rectangles, so it is cheap: counts and busy times add up; a group's name is the
    one with the most busy time. Its names list is approximate: a merged rectangle's events all
    count under its main name."""
    r = data.rects
    if len(r) == 0:
        return data
    max_rects = data.max_rects if max_rects is None else max_rects
    name_codes, categories = pd.factorize(r["name"].to_numpy(dtype=object))
    fam = r["family"].map(_FAMILY_CODE).to_numpy().astype(np.int64)
    key = name_codes.astype(np.int64) * _NF + fam
    row = r["row"].to_numpy()
    count = r["count"].to_numpy()
    px, group, agg = _run_merge(row, r["x0_us"].to_numpy(), r["x1_us"].to_numpy(), count,
                                r["busy_us"].to_numpy(), key, None, data.t0_us, max(data.span_us, 1e-9), width_px,
                                max_rects, True)
    if px <= data.px_us and len(agg["x0"]) == len(r):
        return data
    first = agg["first"]
    size = agg["size"]
    rect_names = agg["key"] // _NF
    names = _names_lists(agg, np.asarray(categories, dtype=object))
    distinct = agg["distinct"]
    # a group of one keeps its rectangle as it was (an event, or an earlier merge)
    names = np.where(size == 1, r["names"].to_numpy()[first], names)
    distinct = np.where(size == 1, r["distinct"].to_numpy()[first], distinct)
    event = np.where(size == 1, r["event"].to_numpy()[first], -1)
    rects = pd.DataFrame({
        "row": row[first],
        "lane": r["lane"].to_numpy()[first],
        "level": r["level"].to_numpy()[first],
        "x0_us": agg["x0"],
        "x1_us": agg["x1"],
        "busy_us": agg["busy"],
        "count": agg["count"],
        "name": np.asarray(categories, dtype=object)[rect_names],
        "family": np.asarray(FAMILIES, dtype=object)[agg["key"] % _NF],
        "hue": _hues(np.asarray(categories, dtype=object))[rect_names],
        "event": event,
        "names": names,
        "distinct": distinct,
    })
    # other columns (a rank's hover texts, written in its worker): a group of one keeps its value,
    # a merged rectangle has none (the view writes its own)
    for column in r.columns:
        if column in rects.columns or column == "color":
            continue
        kept = r[column].to_numpy()[first]
        if kept.dtype.kind == "f":
            rects[column] = np.where(size == 1, kept, np.nan)
        else:
            rects[column] = np.where(size == 1, kept.astype(object), None)
    merged = agg["count"] > 1
    return TimelineData(
        rects=rects,
        lanes=data.lanes,
        rows=data.rows,
        t0_us=data.t0_us,
        t1_us=data.t1_us,
        px_us=max(px, data.px_us),
        width_px=int(width_px),
        events_drawn=data.events_drawn,
        merged_events=int(agg["count"][merged].sum()),
        merged_rects=int(merged.sum()),
        max_rects=int(max_rects),
        hidden=data.hidden,
        events=data.events,
        event_row=data.event_row,
        links=data.links,
    )


def stack_timelines(parts: list[TimelineData], labels: list, shifts_us: list[float], *, width_px: int,
                    max_rects: int, window: tuple[float, float] | None = None,
                    links: pd.DataFrame | None = None) -> tuple[TimelineData, np.ndarray]:
    """Several ranks' timelines on one clock, one lane group per rank: each part's lanes (labelled
    ``rank <label> · ...``, ``rank`` set) under the previous part's, its times moved by its shift
    (the rank's clock to the common one), then merged again over the common span to ``max_rects``
    (:func:`remerge`). ``window``: the span on the common clock (default: the parts' span).
    ``links``: collective calls (``row`` in its part's rows, see ``TimelineData.links``, and a
    ``part`` column) placed on the stacked rows. Returns the stacked timeline and each part's first
    row. The parts have no events: their rectangles carry what the view needs (``hover``, ...)."""
    rects, lanes, rows = [], [], []
    row_base, lane_base = 0, 0
    first_rows = np.zeros(len(parts), dtype=np.int64)
    for k, (part, label, shift) in enumerate(zip(parts, labels, shifts_us)):
        first_rows[k] = row_base
        r = part.rects.copy()
        r["row"] = r["row"].to_numpy() + row_base
        r["lane"] = r["lane"].to_numpy() + lane_base
        r["x0_us"] = r["x0_us"].to_numpy() + shift
        r["x1_us"] = r["x1_us"].to_numpy() + shift
        rects.append(r)
        ln = part.lanes.copy()
        ln["lane"] = ln["lane"].to_numpy() + lane_base
        ln["first_row"] = ln["first_row"].to_numpy() + row_base
        ln["rank"] = [label] * len(ln)
        ln["label"] = [f"rank {label} · {x}" for x in ln["label"].tolist()]
        ln["band"] = k
        lanes.append(ln)
        rw = part.rows.copy()
        rw["row"] = rw["row"].to_numpy() + row_base
        rw["lane"] = rw["lane"].to_numpy() + lane_base
        rows.append(rw)
        row_base += len(part.rows)
        lane_base += len(part.lanes)
    drawn = [p for p, s in zip(parts, shifts_us) if p.events_drawn]
    if window is not None:
        t0, t1 = float(window[0]), float(window[1])
    elif drawn:
        t0 = min(p.t0_us + s for p, s in zip(parts, shifts_us) if p.events_drawn)
        t1 = max(p.t1_us + s for p, s in zip(parts, shifts_us) if p.events_drawn)
    else:
        t0 = t1 = 0.0
    hidden: dict = {}
    for p in parts:
        for kind, n in p.hidden.items():
            hidden[kind] = hidden.get(kind, 0) + n
    all_rects = pd.concat(rects, ignore_index=True) if rects else pd.DataFrame(columns=list(_RECT_COLUMNS))
    if links is not None and len(links):
        links = links.assign(row=links["row"].to_numpy() + first_rows[links["part"].to_numpy()])
    stacked = TimelineData(
        rects=all_rects,
        lanes=pd.concat(lanes, ignore_index=True) if lanes else pd.DataFrame(),
        rows=pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["row", "lane", "level"]),
        t0_us=t0, t1_us=t1, px_us=max((p.px_us for p in parts), default=0.0), width_px=int(width_px),
        events_drawn=sum(p.events_drawn for p in parts),
        merged_events=sum(p.merged_events for p in parts), merged_rects=sum(p.merged_rects for p in parts),
        max_rects=int(max_rects), hidden=hidden, links=links,
    )
    if len(all_rects) > max_rects:
        stacked = remerge(stacked, width_px, max_rects)
    return stacked, first_rows


# --------------------------------------------------------------------------------------- helpers


def _factorize_rows(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Integer code of each row's combination of (integer) columns, and the distinct rows.

    Columns with a small range of values combine arithmetically (no hashing of each column), so
    this costs about one ``factorize`` of a million keys."""
    if len(frame) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, frame.shape[1]), dtype=np.int64)
    arr = frame.to_numpy(dtype=np.int64)
    codes = np.zeros(len(arr), dtype=np.int64)
    total = 1
    for j in range(arr.shape[1]):
        col = arr[:, j]
        lo, hi = int(col.min()), int(col.max())
        if hi - lo < (1 << 22):
            c, size = col - lo, hi - lo + 1
        else:
            c, u = pd.factorize(col)
            size = len(u)
        if total * size >= (1 << 62):  # re-number the combination so far before it overflows
            codes, u = pd.factorize(codes)
            total = len(u)
        codes = codes * size + c
        total *= size
    lane_codes, _ = pd.factorize(codes)
    _, first_rows = np.unique(lane_codes, return_index=True)  # codes number first appearances
    return lane_codes.astype(np.int64), arr[first_rows]


def _row_start_order(row: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Order by row, then start (then the longest first): one sort of an exact int64 key (row,
    start in ns) where it fits, else a lexsort."""
    if len(row) == 0:
        return np.zeros(0, dtype=np.int64)
    start_ns = np.rint((s - s.min()) * 1000.0).astype(np.int64)
    bits = max(int(start_ns.max()).bit_length(), 1)
    if int(row.max()).bit_length() + bits <= 62:
        key = (row.astype(np.int64) << bits) | start_ns
        order = np.argsort(key, kind="stable")
        # ties (same row and start): the longest first, as the tree orders them
        k = key[order]
        tie = np.flatnonzero(k[1:] == k[:-1])
        if len(tie) == 0:
            return order
    return np.lexsort((-e, s, row))


def _main_threads(meta: TraceMeta) -> set:
    return {int(m.main_thread) for m in (meta, *meta.parts) if m.main_thread is not None}


def _autograd_threads(events: pd.DataFrame, thread: np.ndarray, depth: np.ndarray) -> set:
    """(rank, thread) of threads whose top-level events are mostly autograd's engine (rank None
    in a single-process profile)."""
    top = np.flatnonzero((depth == 0) & (thread >= 0))
    if len(top) == 0:
        return set()
    is_engine = category_mask(events["name"], lambda name: name.startswith("autograd::engine"), rows=top)
    has_rank = "rank" in events.columns
    rank = events["rank"].to_numpy()[top] if has_rank else np.zeros(len(top), dtype=np.int64)
    frame = pd.DataFrame({"rank": rank, "thread": thread[top], "engine": is_engine})
    share = frame.groupby(["rank", "thread"])["engine"].mean()
    return {(r if has_rank else None, int(t)) for (r, t), s in share.items() if s > 0.5}


def _families(kinds: list, kind_codes: np.ndarray, name_codes: np.ndarray, categories: np.ndarray) -> np.ndarray:
    """Family of each event: its kind, with ProfilerStep#N and synchronizing calls set apart."""
    table = np.array([_FAMILY_CODE.get(k, _FAMILY_CODE["other"]) for k in kinds], dtype=np.int64)
    fam = table[kind_codes] if len(kind_codes) else np.zeros(0, dtype=np.int64)
    cats = pd.Index(categories).astype(str)
    is_step = np.asarray(cats.str.startswith("ProfilerStep#"), dtype=bool)[name_codes]
    is_sync = np.asarray(cats.str.contains("Synchronize", regex=False), dtype=bool)[name_codes]
    step_able = (fam == _FAMILY_CODE["annotation"]) | (fam == _FAMILY_CODE["op"])
    fam = np.where(is_step & step_able, _FAMILY_CODE["step"], fam)
    fam = np.where(is_sync & (fam == _FAMILY_CODE["runtime"]), _FAMILY_CODE["sync"], fam)
    return fam


def _hues(categories) -> np.ndarray:
    """A stable hash of each name: the same name gets the same color in every run and process."""
    return np.array([zlib.crc32(str(c).encode("utf-8")) for c in categories], dtype=np.int64)
