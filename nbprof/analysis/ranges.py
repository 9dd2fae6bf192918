"""Named ranges: the ``record_function`` labels of a profile, like Lightning's simple profiler.

One row per label *path* (a label under its enclosing labels: "train_step › forward"), in tree
order (each label right after its parent; siblings in the order they first ran):

    label, path, depth, count, total_us, mean_us, min_us, max_us, share_of_span,
    share_of_parent, share_of_root, device_us, kernels, gpu_span_us

- ``label``: the ``record_function`` name; all ``ProfilerStep#N`` are one label, "ProfilerStep*"
  (as torch's tables); ``depth``: how many labels enclose it (the view indents by it).
- ``count``, ``total_us``, ``mean_us``, ``min_us``, ``max_us``: over the label's instances (CPU
  wall time from enter to exit); ``share_of_span``: ``total_us`` over the profiled span;
  ``share_of_parent``: over the enclosing label's ``total_us`` (NaN at the top);
  ``share_of_root``: over the outermost enclosing label's (1 at the top). A Lightning fit
  (``nbprof.lightning``) is one label, "[Trainer].fit", that its actions nest under: there
  ``share_of_root`` is each action's share of the fit, as Lightning's simple profiler reports it.
- ``device_us`` / ``kernels``: the device work (kernels, copies, memsets) *launched while the
  label was open*, by any thread of the same process, each launch counted once per row however
  many instances were open. So ``backward`` gets the kernels that autograd's own thread launched
  for it, which torch's table (kernels of the label's own-thread descendants only) leaves out;
  and no row ever exceeds the device time that exists (torch's "437 %" comes from adding a GPU
  annotation's span as if it were kernel time).
- ``gpu_span_us``: the total span of the label's GPU annotations (``gpu_user_annotation``: first
  to last kernel of the range on the device, idle gaps included); 0 when the trace has none.

``range_ops``: the operators under each path, one row per (path, operator name):

    path, label, name, count, self_cpu_us, self_device_us

the operators (``op`` events, on any thread of the process: autograd's backward ops included)
that started while the label was open, their count and self times (CPU time in the operator
itself, device time of the kernels it launched itself); so summed over the names, a path's
``self_cpu_us`` is the CPU time its operators took. Nested labels hold their operators too.
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from ..meta import TraceMeta
from ..events import KIND_CODE, key_names, time_ns
from ._intervals import launch_points, points_in_intervals, sum_in_intervals, union_segments
from ._tables import TEXT, empty_table
from .device_stats import process_codes, profiled_windows, span_ns

__all__ = ["ranges", "range_ops", "RANGE_COLUMNS", "RANGE_OP_COLUMNS", "PATH_SEP", "TRAINER_STAGE", "range_labels",
           "annotation_parents", "range_parts", "merge_ranges", "merge_range_ops"]

PATH_SEP = " › "
# The label of the range a Lightning stage spans ("[Trainer].fit", ``integrations.lightning_actions``):
# the root its actions nest under (the report opens on the Ranges tab where there is one).
TRAINER_STAGE = "[Trainer]"

RANGE_COLUMNS = (
    "label",
    "path",
    "depth",
    "count",
    "total_us",
    "mean_us",
    "min_us",
    "max_us",
    "share_of_span",
    "share_of_parent",
    "share_of_root",
    "device_us",
    "kernels",
    "gpu_span_us",
)

RANGE_OP_DTYPES = {"path": TEXT, "label": TEXT, "name": TEXT, "count": np.int64, "self_cpu_us": np.float64,
                   "self_device_us": np.float64}
RANGE_OP_COLUMNS = tuple(RANGE_OP_DTYPES)
RANGE_DTYPES = {c: np.float64 for c in RANGE_COLUMNS} | {
    "label": TEXT, "path": TEXT, "depth": np.int64, "count": np.int64, "kernels": np.int64}


def range_labels(names: pd.Series, rows: np.ndarray | None = None) -> np.ndarray:
    """Label of each event (of those at ``rows``; every one when None): its name, with every
    ``ProfilerStep#N`` as "ProfilerStep*"."""
    keys, labels = key_names(names)
    if rows is not None:
        keys = keys[rows]  # the ranges need their annotations' labels only, not a million references
    # str once per distinct label (a few hundred), then a gather of references: converting the
    # gathered array made a fixed-width string per event (9.6 s of a 1 M-event rank's summary)
    return np.asarray([str(label) for label in labels], dtype=object)[keys] if len(keys) else np.zeros(0, dtype=object)


def annotation_parents(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``: the nearest enclosing (live) annotation row, or -1."""
    kind = events["kind"].cat.codes.to_numpy()
    parent = events["parent"].to_numpy()
    is_ann = (kind == KIND_CODE["annotation"]) & ~events["merged"].to_numpy()
    cur = parent[rows].copy()
    while True:
        climb = cur >= 0
        climb[climb] = ~is_ann[cur[climb]]
        if not climb.any():
            return cur
        cur[climb] = parent[cur[climb]]


def _survivors(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Rows merged into a same-name parent stand for that parent."""
    merged = events["merged"].to_numpy()
    parent = events["parent"].to_numpy()
    cur = rows.copy()
    while True:
        climb = merged[cur] & (parent[cur] >= 0)
        if not climb.any():
            return cur
        cur[climb] = parent[cur[climb]]


def _paths(events: pd.DataFrame, ann: np.ndarray, ann_labels: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    """Path id of every annotation row (``ann``, whose labels are ``ann_labels``), and a table of
    paths (parent path, label, depth)."""
    n = len(events)
    ann_parent = np.full(n, -1, dtype=np.int64)
    ann_parent[ann] = annotation_parents(events, ann)
    depth = np.zeros(n, dtype=np.int64)
    cur = ann_parent[ann].copy()
    d = np.zeros(len(ann), dtype=np.int64)
    while (cur >= 0).any():
        has = cur >= 0
        d[has] += 1
        cur[has] = ann_parent[cur[has]]
    depth[ann] = d

    label_codes, label_uniques = pd.factorize(ann_labels)
    label_of = np.full(n, -1, dtype=np.int64)
    label_of[ann] = label_codes
    path_of = np.full(n, -1, dtype=np.int64)
    parents: list[np.ndarray] = []
    path_labels: list[np.ndarray] = []
    depths: list[np.ndarray] = []
    next_id = 0
    for level in range(int(d.max()) + 1 if len(d) else 0):
        rows = ann[d == level]
        pp = np.where(ann_parent[rows] >= 0, path_of[np.maximum(ann_parent[rows], 0)], -1)
        key = (pp + 1) * (len(label_uniques) + 1) + label_of[rows]
        codes, uniq = pd.factorize(key)
        path_of[rows] = codes + next_id
        parents.append(uniq // (len(label_uniques) + 1) - 1)
        path_labels.append(np.asarray(label_uniques, dtype=object)[uniq % (len(label_uniques) + 1)])
        depths.append(np.full(len(uniq), level, dtype=np.int64))
        next_id += len(uniq)
    table = pd.DataFrame(
        {
            "parent_path": np.concatenate(parents) if parents else np.zeros(0, np.int64),
            "label": np.concatenate(path_labels) if path_labels else np.zeros(0, object),
            "depth": np.concatenate(depths) if depths else np.zeros(0, np.int64),
        }
    )
    return path_of, table


def ranges(events: pd.DataFrame, meta: TraceMeta | None = None) -> pd.DataFrame:
    """The Ranges table (see the module doc) of a tree-built events table."""
    return range_parts(events, meta)[0].drop(columns="first_us")


def range_parts(events: pd.DataFrame, meta: TraceMeta | None = None) -> tuple[pd.DataFrame, float]:
    """What ranks' Ranges tables are merged from (:func:`merge_ranges`): the table with each path's
    first start (``first_us``, the profile's clock: the merged table's sibling order), and the span
    its ``share_of_span`` divides by (µs: the profiled windows of each process, summed)."""
    kind = events["kind"].cat.codes.to_numpy()
    ann = np.flatnonzero((kind == KIND_CODE["annotation"]) & ~events["merged"].to_numpy())
    windows = profiled_windows(events, meta)
    rank_codes, rank_labels = process_codes(events)
    span = float(span_ns(windows, len(rank_labels)).sum())
    if len(ann) == 0:
        return empty_table(RANGE_DTYPES | {"first_us": np.float64}), span / 1000.0
    path_of, paths = _paths(events, ann, range_labels(events["name"], ann))
    n_paths = len(paths)
    pid = path_of[ann]

    start = time_ns(events["start_us"].to_numpy())
    dur = time_ns(events["dur_us"].to_numpy())
    end = start + dur
    _, process = _lanes(events)

    total = np.bincount(pid, weights=dur[ann], minlength=n_paths)
    count = np.bincount(pid, minlength=n_paths)
    mins = np.full(n_paths, np.inf)
    maxs = np.full(n_paths, -np.inf)
    firsts = np.full(n_paths, np.iinfo(np.int64).max)
    np.minimum.at(mins, pid, dur[ann].astype(float))
    np.maximum.at(maxs, pid, dur[ann].astype(float))
    np.minimum.at(firsts, pid, start[ann])

    # device work launched while the label was open: union the instances of each (path,
    # process), then sum the launches inside by prefix sums
    launches = launch_points(events, process)
    n_proc = int(process.max()) + 1 if len(process) else 1
    group = pid * n_proc + process[ann]
    seg_g, seg_s, seg_e = union_segments(start[ann], end[ann], group)
    dev_sum, dev_n = sum_in_intervals(
        launches["process"].to_numpy(), launches["launch_ns"].to_numpy(), launches["dur_ns"].to_numpy(),
        seg_g % n_proc, seg_s, seg_e,
    )
    # a launch belongs to a label open at its start: start <= launch < end
    device_ns = np.bincount(seg_g // n_proc, weights=dev_sum, minlength=n_paths)
    kernels = np.bincount(seg_g // n_proc, weights=dev_n, minlength=n_paths).astype(np.int64)

    gpu_span = np.zeros(n_paths)
    gpu = np.flatnonzero(kind == KIND_CODE["gpu_annotation"])
    if len(gpu):
        ext = events["external_id"].to_numpy()
        ids = ext[ann]
        order = np.argsort(ids, kind="stable")
        at = np.minimum(np.searchsorted(ids[order], ext[gpu]), len(ann) - 1)
        hit = (ids[order][at] == ext[gpu]) & (ext[gpu] > 0)
        np.add.at(gpu_span, pid[order][at[hit]], dur[gpu[hit]].astype(float))
        # GPU annotations of merged (same-name) CPU annotations stand for their survivor
        merged_rows = np.flatnonzero((kind == KIND_CODE["annotation"]) & events["merged"].to_numpy())
        if len(merged_rows) and (~hit).any():
            miss = gpu[~hit]
            mids = ext[merged_rows]
            mo = np.argsort(mids, kind="stable")
            at2 = np.minimum(np.searchsorted(mids[mo], ext[miss]), len(merged_rows) - 1)
            hit2 = (mids[mo][at2] == ext[miss]) & (ext[miss] > 0)
            surv = _survivors(events, merged_rows[mo][at2[hit2]])
            ok = path_of[surv] >= 0
            np.add.at(gpu_span, path_of[surv[ok]], dur[miss[hit2][ok]].astype(float))

    path_text = _path_text(paths)
    parent_path = paths["parent_path"].to_numpy()
    has_parent = parent_path >= 0
    parent_total = np.where(has_parent, total[np.maximum(parent_path, 0)], np.nan)
    root = _roots(parent_path)
    with np.errstate(divide="ignore", invalid="ignore"):
        share_of_parent = np.where(has_parent & (parent_total > 0), total / parent_total, np.nan)
        share_of_root = np.where(total[root] > 0, total / total[root], np.nan)
    out = pd.DataFrame(
        {
            "label": paths["label"].to_numpy(),
            "path": path_text,
            "depth": paths["depth"].to_numpy(),
            "count": count.astype(np.int64),
            "total_us": total / 1000.0,
            "mean_us": total / np.maximum(count, 1) / 1000.0,
            "min_us": mins / 1000.0,
            "max_us": maxs / 1000.0,
            "share_of_span": total / span if span > 0 else np.nan,
            "share_of_parent": share_of_parent,
            "share_of_root": share_of_root,
            "device_us": device_ns / 1000.0,
            "kernels": kernels,
            "gpu_span_us": gpu_span / 1000.0,
            "first_us": firsts / 1000.0,
        }
    )
    order = _tree_order(paths["parent_path"].to_numpy(), paths["depth"].to_numpy(), firsts)
    return out.iloc[order].reset_index(drop=True), span / 1000.0


def merge_ranges(parts: list[tuple[pd.DataFrame, float, float]]) -> pd.DataFrame:
    """Several profiles' Ranges tables as one (a folder of ranks): ``parts`` are each profile's
    :func:`range_parts` and the shift of its clock onto the common one (µs). Counts, times, device
    work summed per path; min and max over all instances; shares recomputed from the sums (of the
    span: every profile's, as the merged events' table divides by); paths in tree order, siblings
    by their first start on the common clock."""
    frames = [t.assign(first_us=t["first_us"] + shift) for t, _, shift in parts if len(t)]
    if not frames:
        return _empty()
    span_us = sum(span for _, span, _ in parts)
    out = pd.concat(frames, ignore_index=True).groupby("path", sort=False).agg(
        label=("label", "first"), depth=("depth", "first"), count=("count", "sum"), total_us=("total_us", "sum"),
        min_us=("min_us", "min"), max_us=("max_us", "max"), device_us=("device_us", "sum"),
        kernels=("kernels", "sum"), gpu_span_us=("gpu_span_us", "sum"), first_us=("first_us", "min"),
    ).reset_index()
    paths = out["path"].tolist()
    index = {p: i for i, p in enumerate(paths)}
    depth = out["depth"].to_numpy(dtype=np.int64)
    # a path's parent: itself less its last label
    parent = np.array([index[p[: len(p) - len(PATH_SEP) - len(lb)]] if d > 0 else -1
                       for p, lb, d in zip(paths, out["label"], depth)], dtype=np.int64)
    total = out["total_us"].to_numpy(dtype=np.float64)
    count = out["count"].to_numpy(dtype=np.int64)
    has_parent = parent >= 0
    parent_total = np.where(has_parent, total[np.maximum(parent, 0)], np.nan)
    root = _roots(parent)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["share_of_parent"] = np.where(has_parent & (parent_total > 0), total / parent_total, np.nan)
        out["share_of_root"] = np.where(total[root] > 0, total / total[root], np.nan)
    out["mean_us"] = total / np.maximum(count, 1)
    out["share_of_span"] = total / span_us if span_us > 0 else np.nan
    out["count"] = count
    out["kernels"] = out["kernels"].astype(np.int64)
    out["depth"] = depth
    order = _tree_order(parent, depth, out["first_us"].to_numpy())
    return out.iloc[order][list(RANGE_COLUMNS)].reset_index(drop=True)


def merge_range_ops(frames: list[pd.DataFrame], paths: pd.Series) -> pd.DataFrame:
    """Several profiles' ``range_ops`` as one: counts and self times summed per (path, operator),
    the paths in the order of ``paths`` (the merged Ranges table's), each path's operators by self
    CPU time."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_table(RANGE_OP_DTYPES)
    out = pd.concat(frames, ignore_index=True).groupby(["path", "label", "name"], sort=False).agg(
        count=("count", "sum"), self_cpu_us=("self_cpu_us", "sum"), self_device_us=("self_device_us", "sum"),
    ).reset_index()
    position = {p: i for i, p in enumerate(paths)}
    out["_at"] = [position.get(p, len(position)) for p in out["path"]]
    out = out.sort_values(["_at", "self_cpu_us"], ascending=[True, False], kind="stable")
    out["count"] = out["count"].astype(np.int64)
    return out[list(RANGE_OP_COLUMNS)].reset_index(drop=True)


def range_ops(events: pd.DataFrame) -> pd.DataFrame:
    """The operators under each label path (see the module doc), paths in ``ranges``' order and
    each path's operators by self CPU time."""
    kind = events["kind"].cat.codes.to_numpy()
    merged = events["merged"].to_numpy()
    ann = np.flatnonzero((kind == KIND_CODE["annotation"]) & ~merged)
    ops = np.flatnonzero((kind == KIND_CODE["op"]) & ~merged & (events["thread"].to_numpy() >= 0))
    if len(ann) == 0:
        return empty_table(RANGE_OP_DTYPES)
    path_of, paths = _paths(events, ann, range_labels(events["name"], ann))
    start = time_ns(events["start_us"].to_numpy())
    end = start + time_ns(events["dur_us"].to_numpy())
    _, process = _lanes(events)
    n_proc = int(process.max()) + 1 if len(process) else 1
    seg_g, seg_s, seg_e = union_segments(start[ann], end[ann], path_of[ann] * n_proc + process[ann])
    seg_index, op_index = points_in_intervals(process[ops], start[ops], seg_g % n_proc, seg_s, seg_e)
    path = seg_g[seg_index] // n_proc
    op = ops[op_index]
    # one int64 key per (path, name) and bincount: pandas' groupby().agg() of the same took ~50 ms
    # of a 1 M-event rank's summary. The reader leaves out events without a name; a code -1 all the
    # same is its own key (named ""), never the next path's
    categories = events["name"].cat.categories
    n_names = len(categories) + 1
    key = path.astype(np.int64) * n_names + (events["name"].cat.codes.to_numpy()[op].astype(np.int64) + 1)
    group, keys = pd.factorize(key)  # groups in order of first appearance, as groupby(sort=False)
    out = pd.DataFrame({
        "path_id": keys // n_names,
        "name_code": keys % n_names - 1,
        "count": np.bincount(group, minlength=len(keys)),
        "self_cpu_us": np.bincount(group, weights=events["self_cpu_us"].to_numpy()[op], minlength=len(keys)),
        "self_device_us": np.bincount(group, weights=events["self_device_us"].to_numpy()[op], minlength=len(keys)),
    })
    # paths in ranges' (tree) order, then each path's operators by self CPU time
    firsts = np.full(len(paths), np.iinfo(np.int64).max)
    np.minimum.at(firsts, path_of[ann], start[ann])
    tree_rank = np.empty(len(paths), dtype=np.int64)
    tree_rank[_tree_order(paths["parent_path"].to_numpy(), paths["depth"].to_numpy(), firsts)] = np.arange(len(paths))
    out["rank"] = tree_rank[out["path_id"].to_numpy()]
    out = out.sort_values(["rank", "self_cpu_us"], ascending=[True, False], kind="stable")
    path_text = _path_text(paths)
    names = np.append(np.asarray(categories, dtype=object), "")  # code -1: the "" at the end
    return pd.DataFrame(
        {
            "path": path_text[out["path_id"].to_numpy()],
            "label": paths["label"].to_numpy()[out["path_id"].to_numpy()],
            "name": names[out["name_code"].to_numpy()],
            "count": out["count"].to_numpy(dtype=np.int64),
            "self_cpu_us": out["self_cpu_us"].to_numpy(dtype=np.float64),
            "self_device_us": out["self_device_us"].to_numpy(dtype=np.float64),
        },
        columns=list(RANGE_OP_COLUMNS),
    )


def _roots(parent: np.ndarray) -> np.ndarray:
    """The outermost ancestor of each path (itself at the top)."""
    root = np.arange(len(parent))
    up = parent.copy()
    while (up >= 0).any():
        climb = up >= 0
        root[climb] = up[climb]
        up[climb] = parent[up[climb]]
    return root


def _lanes(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    from .tree import lanes

    return lanes(events)


def _path_text(paths: pd.DataFrame) -> np.ndarray:
    parent = paths["parent_path"].to_numpy()
    label = paths["label"].to_numpy()
    text = label.astype(object).copy()
    depth = paths["depth"].to_numpy()
    for level in range(1, int(depth.max()) + 1 if len(depth) else 0):
        rows = np.flatnonzero(depth == level)
        text[rows] = text[parent[rows]] + PATH_SEP + label[rows]
    return text


def _tree_order(parent: np.ndarray, depth: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Depth-first order: parents before children, siblings by first start."""
    n = len(parent)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((np.arange(n), first))] = np.arange(n)  # unique: ties by path id
    max_depth = int(depth.max())
    keys = np.full((max_depth + 1, n), -1, dtype=np.int64)
    cur = np.arange(n)
    for level in range(max_depth, -1, -1):
        deeper = depth[cur] > level
        cur[deeper] = parent[cur[deeper]]
        at = depth >= level  # for these rows, cur is now their ancestor at this level
        keys[level, at] = rank[cur[at]]
    # np.lexsort: the last key is the primary one
    return np.lexsort(tuple(keys[level] for level in range(max_depth, -1, -1)))


def _empty() -> pd.DataFrame:
    return empty_table(RANGE_DTYPES)
