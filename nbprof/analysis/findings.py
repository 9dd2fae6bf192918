"""Findings: what a profile says, in a few sentences with their evidence and what to try.

:func:`torch_findings` and :func:`python_findings` return a DataFrame with the columns
``kind, severity, message, evidence``: ``severity`` is "high", "medium" or "low" (rows sorted by
it, then by how much of the profile the finding covers); ``evidence`` is a dict of the numbers
behind the message (times in µs, sizes in bytes, shares as fractions).

Kinds and when they fire (thresholds are the module constants below):

``top_op``        the operator with the most self device time (self CPU time without device
                  work) and its share; always, when the profile has operators. "medium" at
                  ``TOP_OP_MEDIUM_SHARE`` or more, else "low".
``sync``          the CPU blocked waiting for the device: ``cudaDeviceSynchronize``,
                  ``cudaStreamSynchronize``, ``cudaEventSynchronize``, synchronous ``cudaMemcpy``
                  (and HIP's) runtime calls, which ``.item()``, ``.cpu()``, ``print(tensor)``,
                  ``if tensor:`` and data-dependent shapes (``nonzero``) cause. A call after which
                  the process launches no more device work is not counted (a final synchronize
                  before reading a timer costs no overlap). Fires when the blocked time is at least
                  ``SYNC_MIN_SHARE`` of the profiled span ("high" from ``SYNC_HIGH_SHARE``).
``copy``          host<->device copies (memcpy HtoD / DtoH) take at least ``COPY_MIN_SHARE`` of
                  the device's work time ("high" from ``COPY_HIGH_SHARE``); says how many came
                  from pageable (unpinned) memory and which ops launched them.
``gpu_idle``      a device was idle (no kernel, copy or memset running) for at least
                  ``GPU_IDLE_MIN_SHARE`` of the profiled span ("high" from ``GPU_IDLE_HIGH_SHARE``);
                  gives the longest gaps and what the CPU was running during each.
``launch_bound``  stretches of at least ``LAUNCH_MIN_KERNELS`` consecutive kernels shorter than
                  ``TINY_KERNEL_US`` each, whose launch calls (``cudaLaunchKernel``...) took at
                  least as long as the kernels ran, cover at least ``LAUNCH_MIN_SHARE`` of the
                  span ("high" from ``LAUNCH_HIGH_SHARE``).
``small_grid``    at least ``SMALL_GRID_MIN_SHARE`` of a device's kernel time is in kernels launched
                  with fewer blocks than the GPU has SMs (CUPTI's "blocks per SM" below 1): part
                  of the GPU idles while they run. Names the biggest such kernels with their
                  launching ops. "medium" when the device is busy at least
                  ``SMALL_GRID_BUSY_SHARE`` of the span (then filling it is what would pay off),
                  else "low". Needs the estimates in the trace (torch's CUPTI traces have them).
``dataloader``    time inside DataLoader iteration (torch's ``enumerate(DataLoader)#...__next__``
                  ranges, or DataLoader Python frames with ``--stack``) is at least
                  ``DATALOADER_MIN_SHARE`` of the span ("high" from ``DATALOADER_HIGH_SHARE``).
``memory_peak``   the peak allocated (and reserved) memory per device and the operators that
                  allocated most before it (the outermost op, so ``aten::conv2d`` rather than the
                  ``aten::empty`` inside it); whenever memory was recorded. "low", "medium" when
                  reserved memory reaches ``MEMORY_MEDIUM_SHARE`` of the device, "high" from
                  ``MEMORY_HIGH_SHARE``.
``straggler``     (profiles of several ranks) one rank's compute time (device time without
                  collectives) exceeds the median rank's by ``STRAGGLER_MIN_IMBALANCE`` or more;
                  or the ranks' time in collectives differs by ``STRAGGLER_MIN_WAIT_SHARE`` of the
                  span or more: the ranks that spend long in collectives are waiting there for
                  the one that spends least (what shows on the CPU side, e.g. gloo, where waiting
                  can hide in compute: the slowest rank is then the one that waits least).
``top_function``  (cProfile) the function with the most own time and its share; always.
``hot_function``  (cProfile) functions called at least ``HOT_MIN_CALLS`` times, at most
                  ``HOT_MAX_PER_CALL_S`` per call (cumulative), that take at least
                  ``HOT_MIN_SHARE`` of the total time ("high" from ``HOT_HIGH_SHARE``); at most
                  ``HOT_MAX_REPORTED``.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..events import KIND_CODE, time_ns, values_at
from ..format import fmt_bytes, fmt_us, short_kernel_name
from ._intervals import assign_points, gaps, launch_points, union_segments
from .device_stats import process_codes, profiled_windows, span_ns

__all__ = ["torch_findings", "python_findings", "FINDING_COLUMNS", "KINDS", "SEVERITIES"]

FINDING_COLUMNS = ("kind", "severity", "message", "evidence")
KINDS = ("top_op", "sync", "copy", "launch_bound", "gpu_idle", "small_grid", "dataloader", "memory_peak",
         "straggler", "top_function", "hot_function")
SEVERITIES = ("high", "medium", "low")

TOP_OP_MEDIUM_SHARE = 0.5
SYNC_MIN_SHARE = 0.05
SYNC_HIGH_SHARE = 0.20
COPY_MIN_SHARE = 0.10
COPY_HIGH_SHARE = 0.30
GPU_IDLE_MIN_SHARE = 0.30
GPU_IDLE_HIGH_SHARE = 0.60
GPU_IDLE_GAPS_SHOWN = 3
TINY_KERNEL_US = 10.0
LAUNCH_MIN_KERNELS = 20
LAUNCH_MIN_SHARE = 0.05
LAUNCH_HIGH_SHARE = 0.30
SMALL_GRID_MIN_SHARE = 0.30
SMALL_GRID_BUSY_SHARE = 0.50
SMALL_GRID_SHOWN = 3
DATALOADER_MIN_SHARE = 0.10
DATALOADER_HIGH_SHARE = 0.30
MEMORY_MEDIUM_SHARE = 0.80
MEMORY_HIGH_SHARE = 0.95
MEMORY_TOP_OPS = 3
STRAGGLER_MIN_IMBALANCE = 0.10
STRAGGLER_MIN_WAIT_SHARE = 0.10
HOT_MIN_CALLS = 10_000
HOT_MAX_PER_CALL_S = 100e-6
HOT_MIN_SHARE = 0.10
HOT_HIGH_SHARE = 0.30
HOT_MAX_REPORTED = 3

SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpyFromSymbol",
        "cudaMemcpyToSymbol",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipMemcpy",
    }
)
SCALAR_READ_OPS = ("aten::_local_scalar_dense",)  # .item(), bool(tensor), float(tensor), .tolist()
_DATALOADER = re.compile(r"DataLoader|torch/utils/data/dataloader\.py")
_DATALOADER_NEXT = re.compile(r"^enumerate\(DataLoader\)#")
# what to suggest for the top operator, by its name
_COMPUTE_HINT = re.compile(r"mm|matmul|conv|linear|gemm|bmm|addmm|baddbmm|attention|einsum|lstm|gru|rnn", re.I)
_COPY_HINT = re.compile(r"copy_|::to$|_to_copy|contiguous|clone|cat$|stack$", re.I)

_SEV_ORDER = {s: i for i, s in enumerate(SEVERITIES)}
_WORK = [KIND_CODE[k] for k in ("kernel", "memcpy", "memset")]


class _Found:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, dict[str, Any], float]] = []

    def add(self, kind: str, severity: str, message: str, evidence: dict[str, Any], score: float = 0.0) -> None:
        self.rows.append((kind, severity, message.strip(), evidence, float(score)))

    def frame(self) -> pd.DataFrame:
        if not self.rows:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in FINDING_COLUMNS})
        rows = sorted(self.rows, key=lambda r: (_SEV_ORDER[r[1]], -r[4]))
        return pd.DataFrame([r[:4] for r in rows], columns=list(FINDING_COLUMNS))


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x >= 0.01 else f"{100 * x:.1f}%"


def _py(v: Any) -> Any:
    """numpy scalars -> Python numbers (evidence stays JSON-friendly)."""
    if isinstance(v, np.generic):
        return v.item()
    return v


# ------------------------------------------------------------------------------------------ torch


class _Context:
    """What several findings need, computed once."""

    def __init__(self, profile: Any) -> None:
        from .tree import lanes

        self.profile = profile
        self.events = profile.events
        self.meta = profile.meta
        ev = self.events
        self.kind = ev["kind"].cat.codes.to_numpy()
        self.names = ev["name"]
        self.start_ns = time_ns(ev["start_us"].to_numpy())
        self.dur_ns = time_ns(ev["dur_us"].to_numpy())
        self.end_ns = self.start_ns + self.dur_ns
        self.thread, self.process = lanes(ev)
        self.work = np.isin(self.kind, _WORK)
        self.has_device = bool(self.work.any())
        self.windows = profiled_windows(ev, self.meta)
        self.rank, self.rank_labels = process_codes(ev)
        self.span_ns = float(span_ns(self.windows, len(self.rank_labels)).sum())
        self._launches: pd.DataFrame | None = None

    @property
    def launches(self) -> pd.DataFrame:
        if self._launches is None:
            self._launches = launch_points(self.events, self.process)
        return self._launches

    def name_mask(self, test: Callable[[str], bool]) -> np.ndarray:
        """``test`` on each distinct name, spread to the rows."""
        cats = self.names.cat.categories
        hit = np.array([bool(test(str(c))) for c in cats], dtype=bool)
        codes = self.names.cat.codes.to_numpy()
        return np.where(codes >= 0, hit[np.maximum(codes, 0)], False) if len(hit) else np.zeros(len(codes), bool)

    def outer_op(self, rows: np.ndarray) -> np.ndarray:
        """The outermost operator (kind op) enclosing each row (itself if it is one); -1 if none."""
        parent = self.events["parent"].to_numpy()
        is_op = self.kind == KIND_CODE["op"]
        best = np.where(is_op[rows], rows, -1)
        cur = parent[rows].copy()
        while True:
            live = cur >= 0
            if not live.any():
                return best
            hit = live.copy()
            hit[live] = is_op[cur[live]]
            best[hit] = cur[hit]
            cur[live] = parent[cur[live]]

    def cpu_at(self, t_ns: np.ndarray, process: np.ndarray) -> list[str]:
        """What the CPU ran at each time: the innermost op or label open on each thread of the
        process (the main thread first), e.g. "backward (main thread); aten::fill_ (thread 429)"."""
        ev = self.events
        cpu_kinds = [KIND_CODE[k] for k in ("op", "annotation", "runtime", "other")]
        cand = np.isin(self.kind, cpu_kinds) & (self.thread >= 0)
        depth = ev["depth"].to_numpy()
        raw_thread = ev["thread"].to_numpy()
        main = self.meta.get("main_thread")
        names = self.names.to_numpy()
        out = []
        for t, p in zip(t_ns.tolist(), process.tolist()):  # a handful of gaps, not events
            rows = np.flatnonzero(cand & (self.process == p) & (self.start_ns <= t) & (self.end_ns > t))
            if len(rows) == 0:
                out.append("nothing torch records (Python code, I/O or waiting)")
                continue
            frame = pd.DataFrame({"lane": self.thread[rows], "tid": raw_thread[rows], "d": depth[rows], "r": rows})
            inner = frame.sort_values("d", kind="stable").groupby("lane", sort=False).tail(1)
            inner = inner.assign(main=inner["tid"] == main).sort_values(["main", "d"], ascending=[False, False])
            parts = [f"{names[r]} ({'main thread' if m else f'thread {tid}'})"
                     for r, m, tid in zip(inner["r"], inner["main"], inner["tid"])]
            out.append("; ".join(parts))
        return out


def torch_findings(profile: Any) -> pd.DataFrame:
    """Findings of a :class:`~nbprof.model.TorchProfile` (see the module doc)."""
    found = _Found()
    if len(profile.events) == 0:
        return found.frame()
    ctx = _Context(profile)
    for check in (_top_op, _sync, _copy, _gpu_idle, _launch_bound, _small_grid, _dataloader, _memory_peak,
                  _straggler):
        check(ctx, found)
    return found.frame()


def _top_op(ctx: _Context, found: _Found) -> None:
    p = ctx.profile
    s = p.summary
    avg = p.key_averages("op")
    ops = avg[avg["kind"].astype(str) == "op"]
    metric = "self_device_us" if ctx.has_device else "self_cpu_us"
    total = s.self_device_us if ctx.has_device else s.self_cpu_us
    if len(ops) == 0 or total <= 0:
        return
    values = ops[metric].to_numpy()
    i = int(np.argmax(values))
    if values[i] <= 0:
        return
    row = ops.iloc[i]
    name = str(row["name"])
    share = float(values[i] / total)
    count = int(row["count"])
    where = "self CUDA time" if ctx.has_device else "self CPU time"
    msg = (f"{name} takes {_pct(share)} of {where} ({fmt_us(values[i])} in {count:,} calls, "
           f"{fmt_us(values[i] / max(count, 1))} each). ")
    if _COMPUTE_HINT.search(name):
        msg += ("It is compute: check its input shapes (--shapes, --group-by shape), run it in lower "
                "precision (torch.autocast with bfloat16, TF32 matmuls) or try torch.compile.")
    elif _COPY_HINT.search(name):
        msg += ("It copies data: look for dtype or device conversions and .contiguous() inside the loop "
                "(--stack shows where they are called).")
    elif name in SCALAR_READ_OPS or name == "aten::item":
        msg += "Each .item() waits for the device: keep values on the device and read them rarely."
    else:
        msg += "See where it is called from (--stack, --group-by stack) and with which shapes (--shapes)."
    severity = "medium" if share >= TOP_OP_MEDIUM_SHARE else "low"
    found.add("top_op", severity, msg,
              {"op": name, "metric": metric, "time_us": _py(values[i]), "share": share, "count": count,
               "avg_us": _py(values[i] / max(count, 1))}, score=share)


def _sync(ctx: _Context, found: _Found) -> None:
    if not ctx.has_device:
        return
    is_sync = ctx.name_mask(lambda n: n in SYNC_CALLS) & (ctx.kind == KIND_CODE["runtime"])
    rows = np.flatnonzero(is_sync)
    if len(rows) == 0:
        return
    # calls after which the process launched nothing more cost no overlap: leave them out
    launches = ctx.launches
    last_launch = np.full(int(ctx.process.max()) + 1, np.iinfo(np.int64).min)
    if len(launches):
        np.maximum.at(last_launch, launches["process"].to_numpy(), launches["launch_ns"].to_numpy())
    rows = rows[ctx.end_ns[rows] <= last_launch[ctx.process[rows]]]
    if len(rows) == 0:
        return
    blocked_ns = float(ctx.dur_ns[rows].sum())
    share = blocked_ns / ctx.span_ns if ctx.span_ns else 0.0
    if share < SYNC_MIN_SHARE:
        return
    names = ctx.names.to_numpy()
    by_call = pd.Series(ctx.dur_ns[rows] / 1000.0).groupby(names[rows].astype(str)).agg(["size", "sum"])
    parent = ctx.events["parent"].to_numpy()
    op_rows = parent[rows]
    op_names = np.where(op_rows >= 0, names[np.maximum(op_rows, 0)].astype(str), "(no op: torch.cuda.synchronize?)")
    by_op = (pd.DataFrame({"op": op_names, "us": ctx.dur_ns[rows] / 1000.0}).groupby("op")["us"]
             .agg(["size", "sum"]).sort_values("sum", ascending=False))
    scalar_reads = int(ctx.name_mask(lambda n: n in SCALAR_READ_OPS).sum())
    top = by_op.index[0]
    msg = (f"The CPU waited for the GPU {len(rows):,} times, {fmt_us(blocked_ns / 1000)} in all "
           f"({_pct(share)} of the span), most under {top}. ")
    if scalar_reads:
        msg += f"{scalar_reads:,} scalar reads (.item(), float(t), bool(t), .tolist()) each force one. "
    msg += ("Keep values on the device (accumulate the loss as a tensor, log every N steps), avoid "
            "data-dependent shapes (nonzero, masked_select, boolean indexing) and printing tensors in the loop, "
            "and drop torch.cuda.synchronize() calls that are not needed for timing.")
    severity = "high" if share >= SYNC_HIGH_SHARE else "medium"
    found.add("sync", severity, msg,
              {"calls": len(rows), "blocked_us": blocked_ns / 1000.0, "share_of_span": share,
               "scalar_reads": scalar_reads,
               "by_call": {k: {"count": int(v["size"]), "us": float(v["sum"])} for k, v in by_call.iterrows()},
               "by_op": {k: {"count": int(v["size"]), "us": float(v["sum"])} for k, v in by_op.head(5).iterrows()}},
              score=share)


def _direction(name: str) -> str:
    for d in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP"):
        if d in name:
            return d
    return "other"


def _copy(ctx: _Context, found: _Found) -> None:
    memcpy = np.flatnonzero(ctx.kind == KIND_CODE["memcpy"])
    if len(memcpy) == 0:
        return
    names = ctx.names.to_numpy()[memcpy].astype(str)
    cats, codes = np.unique(names, return_inverse=True)
    direction = np.array([_direction(c) for c in cats], dtype=object)[codes]
    pageable = np.array(["Pageable" in c for c in cats], dtype=bool)[codes]
    host = np.isin(direction, ["HtoD", "DtoH"])
    rows = memcpy[host]
    if len(rows) == 0:
        return
    work_ns = float(ctx.dur_ns[ctx.work].sum())
    copy_ns = float(ctx.dur_ns[rows].sum())
    share = copy_ns / work_ns if work_ns else 0.0
    if share < COPY_MIN_SHARE:
        return
    nbytes = ctx.events["bytes"].to_numpy()
    by_dir = {}
    for d in ("HtoD", "DtoH"):
        m = host & (direction == d)
        if m.any():
            by_dir[d] = {"count": int(m.sum()), "us": float(ctx.dur_ns[memcpy[m]].sum() / 1000.0),
                         "bytes": int(nbytes[memcpy[m]].sum()), "pageable": int((m & pageable).sum())}
    parent = ctx.events["parent"].to_numpy()[rows]
    ev_names = ctx.names.to_numpy()
    launched_by = pd.Series(np.where(parent >= 0, ev_names[np.maximum(parent, 0)].astype(str), "(unknown)"))
    ops = launched_by.value_counts().head(5)
    n_pageable = int((host & pageable).sum())
    total_bytes = int(nbytes[rows].sum())
    parts = ", ".join(f"{v['count']:,} {k} ({fmt_us(v['us'])}, {fmt_bytes(v['bytes'])})" for k, v in by_dir.items())
    msg = (f"Host-device copies take {_pct(share)} of the GPU's work time: {parts}, mostly from "
           f"{ops.index[0]}. ")
    if n_pageable:
        msg += (f"{n_pageable:,} of them from pageable memory, which the CPU has to wait for: use "
                "DataLoader(pin_memory=True) and .to(device, non_blocking=True). ")
    msg += ("Keep tensors on the device between steps and create them there (torch.zeros(..., device='cuda')) "
            "instead of copying.")
    severity = "high" if share >= COPY_HIGH_SHARE else "medium"
    found.add("copy", severity, msg,
              {"copies": int(len(rows)), "copy_us": copy_ns / 1000.0, "bytes": total_bytes,
               "share_of_device_time": share, "pageable": n_pageable, "by_direction": by_dir,
               "launched_by": {k: int(v) for k, v in ops.items()}},
              score=share)


def _device_segments(ctx: _Context) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Busy segments per (rank, device): (key, start, end), key labels (rank code, device)."""
    rows = np.flatnonzero(ctx.work)
    device = ctx.events["device"].astype(str).to_numpy()[rows]
    dev_codes, dev_labels = pd.factorize(device, sort=True)
    key = ctx.rank[rows] * len(dev_labels) + dev_codes
    seg = union_segments(ctx.start_ns[rows], ctx.end_ns[rows], key)
    return seg[0], seg[1], seg[2], np.asarray(dev_labels, dtype=object), rows


def _gpu_idle(ctx: _Context, found: _Found) -> None:
    if not ctx.has_device:
        return
    stats = ctx.profile.device_stats.devices  # computed once per profile (the report uses it too)
    stats = stats[stats["kernels"] + stats["memcpys"] + stats["memsets"] > 0]
    if len(stats) == 0:
        return
    seg_key, seg_s, seg_e, dev_labels, _ = _device_segments(ctx)
    g = gaps(seg_key, seg_s, seg_e)
    # gaps that lie inside one recorded window (not the unrecorded time between schedule cycles)
    w = ctx.windows
    gap_rank = g["group"].to_numpy() // max(len(dev_labels), 1)
    a = assign_points(gap_rank, g["start"].to_numpy(), w["rank_code"].to_numpy(), w["start_ns"].to_numpy(),
                      w["end_ns"].to_numpy())
    b = assign_points(gap_rank, g["end"].to_numpy() - 1, w["rank_code"].to_numpy(), w["start_ns"].to_numpy(),
                      w["end_ns"].to_numpy())
    g = g[(a >= 0) & (a == b)]
    multi_rank = "rank" in stats.columns
    rank_labels = ctx.rank_labels.tolist()
    by_rank: dict[str, dict[str, float]] = {}
    if multi_rank:  # one finding per device: its most idle rank (the others in the evidence)
        for dev, grp in stats.groupby("device", sort=True):
            by_rank[str(dev)] = {str(r): float(b) for r, b in zip(grp["rank"], grp["busy_fraction"])}
        stats = stats.sort_values("busy_fraction", kind="stable").drop_duplicates("device")
    for _, row in stats.iterrows():
        idle_share = 1.0 - float(row["busy_fraction"])
        if not np.isfinite(idle_share) or idle_share < GPU_IDLE_MIN_SHARE:
            continue
        dev = str(row["device"])
        rcode = rank_labels.index(row["rank"]) if multi_rank else 0
        key = rcode * len(dev_labels) + list(dev_labels).index(dev)
        mine = g[g["group"] == key]
        mine = mine.assign(dur=mine["end"] - mine["start"]).sort_values("dur", ascending=False)
        top = mine.head(GPU_IDLE_GAPS_SHOWN)
        # the CPU's main process for this rank: the process that launched most of its work
        launches = ctx.launches
        procs = launches["process"].to_numpy()
        lrank = ctx.rank[launches["row"].to_numpy()] if len(launches) else np.zeros(0, np.int64)
        mine_procs = procs[lrank == rcode]
        proc = int(np.bincount(mine_procs).argmax()) if len(mine_procs) else 0
        mid = ((top["start"] + top["end"]) // 2).to_numpy()
        doing = ctx.cpu_at(mid, np.full(len(mid), proc))
        largest = [{"start_us": float(s) / 1000.0, "dur_us": float(d) / 1000.0, "cpu": c}
                   for s, d, c in zip(top["start"].tolist(), top["dur"].tolist(), doing)]
        who = f"rank {row['rank']} {dev}" if multi_rank else dev
        msg = (f"{who} was idle {_pct(idle_share)} of the profiled span ({fmt_us(row['idle_us'])} of "
               f"{fmt_us(row['span_us'])}; busy {fmt_us(row['busy_us'])}). ")
        if largest:
            l0 = largest[0]
            msg += (f"The longest gap, {fmt_us(l0['dur_us'])} at {fmt_us(l0['start_us'])}, came while the CPU ran "
                    f"{l0['cpu']}. ")
        msg += ("The GPU is waiting for the CPU: load data in DataLoader workers, avoid synchronizations, give each "
                "launch more work (bigger batches) or cut the Python overhead (torch.compile, CUDA graphs).")
        severity = "high" if idle_share >= GPU_IDLE_HIGH_SHARE else "medium"
        evidence = {"device": dev, "busy_fraction": float(row["busy_fraction"]), "idle_us": float(row["idle_us"]),
                    "busy_us": float(row["busy_us"]), "span_us": float(row["span_us"]),
                    "gaps": int(len(mine)), "gaps_over_100us": int((mine["dur"] > 100_000).sum()),
                    "largest_gaps": largest}
        if multi_rank:
            evidence["rank"] = _py(row["rank"])
            evidence["busy_fraction_by_rank"] = by_rank[dev]
            lo, hi = min(by_rank[dev].values()), max(by_rank[dev].values())
            msg = msg.replace("). ", f"; the ranks were {_pct(lo)} to {_pct(hi)} busy). ", 1)
        found.add("gpu_idle", severity, msg, evidence, score=idle_share)


def _launch_bound(ctx: _Context, found: _Found) -> None:
    if not ctx.has_device:
        return
    kern = np.flatnonzero(ctx.kind == KIND_CODE["kernel"])
    if len(kern) < LAUNCH_MIN_KERNELS:
        return
    device = ctx.events["device"].astype(str).to_numpy()
    dev_codes, dev_labels = pd.factorize(device[kern], sort=True)
    key = ctx.rank[kern] * len(dev_labels) + dev_codes
    order = np.lexsort((ctx.start_ns[kern], key))
    k = kern[order]
    key = key[order]
    tiny = ctx.dur_ns[k] < TINY_KERNEL_US * 1000
    # runs of consecutive tiny kernels on one device
    brk = np.r_[True, (key[1:] != key[:-1]) | ~tiny[1:] | ~tiny[:-1]]
    run_id = np.cumsum(brk) - 1
    run_id = np.where(tiny, run_id, -1)
    ok = run_id >= 0
    if not ok.any():
        return
    launches = ctx.launches
    rt = np.zeros(len(ctx.events))
    rt[launches["row"].to_numpy()] = launches["runtime_dur_ns"].to_numpy()
    frame = pd.DataFrame({"run": run_id[ok], "key": key[ok], "s": ctx.start_ns[k[ok]], "e": ctx.end_ns[k[ok]],
                          "d": ctx.dur_ns[k[ok]], "launch": rt[k[ok]]})
    runs = frame.groupby("run").agg(key=("key", "first"), n=("d", "size"), kernel=("d", "sum"),
                                    launch=("launch", "sum"), s=("s", "min"), e=("e", "max"))
    bound = runs[(runs["n"] >= LAUNCH_MIN_KERNELS) & (runs["launch"] >= runs["kernel"])]
    if len(bound) == 0:
        return
    wall = float((bound["e"] - bound["s"]).sum())
    share = wall / ctx.span_ns if ctx.span_ns else 0.0
    if share < LAUNCH_MIN_SHARE:
        return
    kernels = int(bound["n"].sum())
    kernel_ns = float(bound["kernel"].sum())
    launch_ns = float(bound["launch"].sum())
    in_runs = frame[frame["run"].isin(bound.index)]
    median = float(np.median(in_runs["d"])) / 1000.0
    longest = bound.assign(w=bound["e"] - bound["s"]).sort_values("w", ascending=False).iloc[0]
    msg = (f"{kernels:,} kernels in {len(bound)} stretches of tiny kernels (median {fmt_us(median)}) cost more CPU "
           f"time to launch ({fmt_us(launch_ns / 1000)}) than they ran on the GPU ({fmt_us(kernel_ns / 1000)}); "
           f"those stretches span {_pct(share)} of the profile. Fuse them (torch.compile), replay them as a CUDA graph "
           "(torch.compile(mode='reduce-overhead'), torch.cuda.graphs) or give each kernel more work (bigger batches).")
    severity = "high" if share >= LAUNCH_HIGH_SHARE else "medium"
    found.add("launch_bound", severity, msg,
              {"stretches": int(len(bound)), "kernels": kernels, "kernel_us": kernel_ns / 1000.0,
               "launch_us": launch_ns / 1000.0, "wall_us": wall / 1000.0, "share_of_span": share,
               "median_kernel_us": median, "tiny_kernel_us": TINY_KERNEL_US,
               "longest": {"start_us": float(longest["s"]) / 1000.0, "kernels": int(longest["n"]),
                           "wall_us": float(longest["w"]) / 1000.0}},
              score=share)


def _small_grid(ctx: _Context, found: _Found) -> None:
    if not ctx.has_device:
        return
    ev = ctx.events
    kern = np.flatnonzero((ctx.kind == KIND_CODE["kernel"]) & ~np.isnan(ev["blocks_per_sm"].to_numpy()))
    if len(kern) == 0:
        return
    bps = ev["blocks_per_sm"].to_numpy()[kern]
    device = values_at(ev["device"], kern)
    rank = ctx.rank[kern]
    names = values_at(ev["name"], kern)
    dur = ctx.dur_ns[kern].astype(np.float64)
    busy = ctx.profile.device_stats.devices
    sms = {int(d.get("id", -1)): d.get("numSms") for d in ctx.meta.get("device_properties") or []}
    for (r, dev), rows in pd.Series(np.arange(len(kern))).groupby([rank, device]).groups.items():
        rows = np.asarray(rows)
        total = float(dur[rows].sum())
        small = rows[bps[rows] < 1.0]
        small_ns = float(dur[small].sum())
        share = small_ns / total if total else 0.0
        if share < SMALL_GRID_MIN_SHARE:
            continue
        label = dev if ctx.rank_labels[r] is None else f"rank {ctx.rank_labels[r]} {dev}"
        stats = busy[busy["device"] == dev]
        if "rank" in stats.columns:
            stats = stats[stats["rank"] == ctx.rank_labels[r]]
        busy_share = float(stats["busy_fraction"].iloc[0]) if len(stats) else float("nan")
        sm_eff = float(stats["sm_efficiency"].iloc[0]) if len(stats) else float("nan")
        per = (pd.DataFrame({"name": names[small], "d": dur[small], "w": dur[small] * bps[small],
                             "row": kern[small]})
               .groupby("name", sort=False).agg(d=("d", "sum"), w=("w", "sum"), row=("row", "first"))
               .sort_values("d", ascending=False).head(SMALL_GRID_SHOWN))
        launched = ev["parent"].to_numpy()[per["row"].to_numpy()]  # the op that launched it (Kernels tab)
        op_names = values_at(ev["name"], np.maximum(launched, 0))
        top = [{"kernel": n, "kernel_us": float(d) / 1000.0, "blocks_per_sm": float(w / d) if d else 0.0,
                "launched_by": op if o >= 0 else ""}
               for n, d, w, o, op in zip(per.index, per["d"], per["w"], launched, op_names)]
        first = top[0]
        n_sms = sms.get(int(dev.partition(":")[2] or 0)) if ":" in dev else None
        sm_text = f" ({n_sms} on this GPU)" if n_sms else ""
        by = f", launched by {first['launched_by']}" if first["launched_by"] else ""
        msg = (f"{_pct(share)} of {label}'s kernel time ({fmt_us(small_ns / 1000)}) is in kernels launched with "
               f"fewer blocks than the GPU has SMs{sm_text}, so part of the GPU idles while they run: e.g. "
               f"{short_kernel_name(first['kernel'], 60)} ({first['blocks_per_sm']:.2f} blocks per SM, "
               f"{fmt_us(first['kernel_us'])}{by}). Give each kernel more work (bigger batches or tensors), run "
               "independent work side by side (CUDA streams) or fuse small ops (torch.compile).")
        if sm_eff == sm_eff:
            msg += f" Est. SM efficiency over the profile: {_pct(sm_eff)}."
        severity = "medium" if busy_share >= SMALL_GRID_BUSY_SHARE else "low"
        found.add("small_grid", severity, msg,
                  {"device": label, "share_of_kernel_time": share, "small_grid_us": small_ns / 1000.0,
                   "kernel_us": total / 1000.0, "busy_fraction": busy_share, "sm_efficiency": sm_eff,
                   "sms": n_sms, "top_kernels": top},
                  score=share * (busy_share if busy_share == busy_share else 0.0))


def _dataloader(ctx: _Context, found: _Found) -> None:
    cpu_kinds = np.isin(ctx.kind, [KIND_CODE["annotation"], KIND_CODE["python"], KIND_CODE["op"]])
    is_dl = ctx.name_mask(lambda n: bool(_DATALOADER.search(n))) & cpu_kinds & (ctx.thread >= 0)
    rows = np.flatnonzero(is_dl)
    if len(rows) == 0:
        return
    seg = union_segments(ctx.start_ns[rows], ctx.end_ns[rows], ctx.thread[rows])
    # time on the thread that spent most in the loader (the training loop's thread)
    per_thread = pd.Series(seg[2] - seg[1]).groupby(seg[0]).sum()
    thread = int(per_thread.idxmax())
    total_ns = float(per_thread.max())
    # with ranks, compare with one rank's span
    span = ctx.span_ns / max(len(ctx.rank_labels), 1)
    share = total_ns / span if span else 0.0
    if share < DATALOADER_MIN_SHARE:
        return
    names = ctx.names.to_numpy()
    nexts = rows[ctx.name_mask(lambda n: bool(_DATALOADER_NEXT.match(n)))[rows] & (ctx.thread[rows] == thread)]
    batches = int(len(nexts))
    loader_names = pd.Series(names[nexts].astype(str)).str.extract(r"#(\w+)\.__next__")[0].dropna().unique().tolist()
    multi = any("MultiProcessing" in n for n in loader_names)
    mean = total_ns / batches / 1000.0 if batches else float("nan")
    msg = f"Waiting for data takes {_pct(share)} of the span ({fmt_us(total_ns / 1000)}"
    msg += f" over {batches:,} batches, {fmt_us(mean)} each). " if batches else "). "
    if multi:
        msg += ("The workers do not keep up: raise num_workers or prefetch_factor, use persistent_workers=True, "
                "and make __getitem__ cheaper (decode or tokenize once, cache).")
    else:
        msg += ("Batches are loaded in the training process: use DataLoader(num_workers=N, pin_memory=True, "
                "persistent_workers=True) so loading overlaps with compute.")
    severity = "high" if share >= DATALOADER_HIGH_SHARE else "medium"
    found.add("dataloader", severity, msg,
              {"batches": batches, "total_us": total_ns / 1000.0, "mean_us": mean, "share_of_span": share,
               "loaders": loader_names, "multiprocess": multi},
              score=share)


def _memory_peak(ctx: _Context, found: _Found) -> None:
    ev = ctx.events
    mem = np.flatnonzero((ctx.kind == KIND_CODE["memory"]) & (ev["total_allocated_bytes"].to_numpy() >= 0))
    if len(mem) == 0:
        return
    device = ev["device"].astype(str).to_numpy()
    on_device = device[mem] != "cpu"
    if on_device.any():
        mem = mem[on_device]  # GPU memory when there is any; else the CPU's
    total_mem = {}
    for prop in ctx.meta.get("device_properties") or []:
        try:
            total_mem[f"cuda:{int(prop.get('id', 0))}"] = int(prop.get("totalGlobalMem", -1))
        except (TypeError, ValueError):
            pass
    alloc = ev["total_allocated_bytes"].to_numpy()
    reserved = ev["total_reserved_bytes"].to_numpy()
    nbytes = ev["bytes"].to_numpy()
    names = ctx.names.to_numpy()
    key = pd.DataFrame({"rank": ctx.rank[mem], "device": device[mem], "alloc": alloc[mem]})
    peaks = key.groupby(["device", "rank"], sort=True)["alloc"].max()
    if "rank" in ev.columns:  # one finding per device: its rank with the highest peak
        keep = peaks.groupby(level="device").idxmax().tolist()
        key = key[pd.MultiIndex.from_arrays([key["device"], key["rank"]]).isin(keep)]
    for (rcode, dev), grp in key.groupby(["rank", "device"], sort=True):
        rows = mem[grp.index.to_numpy()]
        rows = rows[np.argsort(ctx.start_ns[rows], kind="stable")]
        ipeak = int(np.argmax(alloc[rows]))
        peak_row = rows[ipeak]
        peak = int(alloc[peak_row])
        peak_reserved = int(reserved[rows].max())
        t_peak = int(ctx.start_ns[peak_row])
        before = rows[: ipeak + 1]
        initial = int(alloc[rows[0]] - nbytes[rows[0]])
        allocs = before[nbytes[before] > 0]
        outer = ctx.outer_op(allocs)
        op_name = np.where(outer >= 0, names[np.maximum(outer, 0)].astype(str), "(outside operators)")
        by_op = pd.Series(nbytes[allocs]).groupby(op_name).sum().sort_values(ascending=False)
        top = [{"op": k, "bytes": int(v)} for k, v in by_op.head(MEMORY_TOP_OPS).items()]
        capacity = total_mem.get(dev, -1) if dev != "cpu" else -1
        use = peak_reserved / capacity if capacity > 0 else 0.0
        severity = "high" if use >= MEMORY_HIGH_SHARE else "medium" if use >= MEMORY_MEDIUM_SHARE else "low"
        rank_label = ctx.rank_labels[rcode]
        who = f"rank {rank_label} {dev}" if "rank" in ev.columns else dev
        msg = f"Peak memory on {who}: {fmt_bytes(peak)} allocated"
        if peak_reserved > 0 and dev != "cpu":
            msg += f" ({fmt_bytes(peak_reserved)} reserved by the caching allocator"
            msg += f", {_pct(use)} of the device)" if capacity > 0 and severity != "low" else ")"
        msg += f" at {fmt_us(t_peak / 1000)}"
        if initial > 0:
            msg += f", {fmt_bytes(initial)} of it allocated before the profile started"
        msg += ". "
        if top:
            msg += "Allocated most on the way to it: " + ", ".join(f"{t['op']} ({fmt_bytes(t['bytes'])})" for t in top)
            msg += ". "
        if severity != "low":
            msg += ("To lower it: smaller batches, activation checkpointing, bfloat16 autocast, inference under "
                    "torch.no_grad(); if reserved is far above allocated, "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.")
        evidence = {"device": dev, "peak_allocated_bytes": peak, "peak_reserved_bytes": peak_reserved,
                    "at_us": t_peak / 1000.0, "allocated_before_profile_bytes": initial,
                    "device_memory_bytes": capacity, "top_ops": top}
        if "rank" in ev.columns:
            evidence["rank"] = _py(rank_label)
            evidence["peak_allocated_by_rank"] = {str(ctx.rank_labels[r]): int(v) for r, v in peaks[dev].items()}
        found.add("memory_peak", severity, msg, evidence, score=use)


def _straggler(ctx: _Context, found: _Found) -> None:
    if "rank" not in ctx.events.columns or len(ctx.rank_labels) < 2:
        return
    report = ctx.profile.ranks()  # cached on the profile, shared with the Ranks tab
    table = report.table
    comm = table["comm_us"].to_numpy(dtype=np.float64)
    span = float(np.median(table["span_us"]))
    wait_share = float(comm.max() - comm.min()) / span if span > 0 else 0.0
    by_compute = report.imbalance >= STRAGGLER_MIN_IMBALANCE
    by_wait = wait_share >= STRAGGLER_MIN_WAIT_SHARE
    if not (by_compute or by_wait):
        return
    what = "device time" if ctx.has_device else "CPU time"
    diffs = report.differences
    diffs = diffs[~diffs["comm"].astype(bool)] if len(diffs) else diffs
    top = diffs["name"].head(3).astype(str).tolist() if len(diffs) else []
    comm_text = ", ".join(f"rank {r}: {fmt_us(v)}" for r, v in zip(table["rank"], comm))
    if by_compute:
        slowest = report.slowest
        slow = table[table["rank"] == slowest].iloc[0]
        median = float(np.median(table["compute_us"]))
        msg = (f"Rank {slowest} is the slowest: {fmt_us(slow['compute_us'])} of {what} outside collectives, "
               f"{_pct(report.imbalance)} above the median rank ({fmt_us(median)}); the other ranks wait for it in "
               "their collectives. ")
    else:
        slowest = table["rank"].to_numpy()[int(np.argmin(comm))]
        msg = (f"Rank {slowest} is the slowest: the other ranks wait for it in their collectives (time in "
               f"collectives, {comm_text}, over a {fmt_us(span)} span). ")
    if top:
        msg += "Differing most: " + ", ".join(top) + ". "
    msg += "Check its data (uneven batch sizes or sequence lengths, a slow loader), its GPU (clocks, other processes) and its host."
    severity = "high" if (report.imbalance >= 3 * STRAGGLER_MIN_IMBALANCE or wait_share >= 3 * STRAGGLER_MIN_WAIT_SHARE) \
        else "medium"
    found.add("straggler", severity, msg,
              {"slowest_rank": _py(slowest), "imbalance": float(report.imbalance),
               "compute_us": {str(r): float(v) for r, v in zip(table["rank"], table["compute_us"])},
               "comm_us": {str(r): float(v) for r, v in zip(table["rank"], comm)}, "wait_share": wait_share,
               "differing": top},
              score=max(report.imbalance, wait_share))


# ----------------------------------------------------------------------------------------- python


def python_findings(profile: Any) -> pd.DataFrame:
    """Findings of a :class:`~nbprof.model.PythonProfile` (see the module doc)."""
    found = _Found()
    st = profile.stats
    total = float(profile.total_s)
    if len(st) == 0 or total <= 0:
        return found.frame()
    from .flame import pstats_location

    location = pstats_location(st, profile.meta.get("code_names"))
    tt = st["tottime_s"].to_numpy()
    i = int(np.argmax(tt))
    share = float(tt[i] / total)
    ncalls = int(st["ncalls"].iloc[i])
    msg = (f"{location[i]} spends the most time in its own code: {fmt_us(tt[i] * 1e6)}, {_pct(share)} of "
           f"{fmt_us(total * 1e6)}, over {ncalls:,} calls. ")
    msg += "Sort by cumtime (-s cumtime) to see which caller is behind it; .callers(name) lists them."
    found.add("top_function", "medium" if share >= TOP_OP_MEDIUM_SHARE else "low", msg,
              {"function": str(st["function"].iloc[i]), "filename": str(st["filename"].iloc[i]),
               "lineno": int(st["lineno"].iloc[i]), "tottime_s": float(tt[i]), "share": share, "ncalls": ncalls},
              score=share)

    nc = st["ncalls"].to_numpy()
    ct = st["cumtime_s"].to_numpy()
    per_call = ct / np.maximum(nc, 1)
    cshare = ct / total
    hot = np.flatnonzero((nc >= HOT_MIN_CALLS) & (per_call <= HOT_MAX_PER_CALL_S) & (cshare >= HOT_MIN_SHARE))
    hot = hot[np.argsort(-cshare[hot], kind="stable")][:HOT_MAX_REPORTED]
    for j in hot:
        msg = (f"{location[j]} was called {int(nc[j]):,} times, {fmt_us(per_call[j] * 1e6)} per call, "
               f"{_pct(cshare[j])} of the time with what it calls: the cost is in the number of calls. "
               "Work on whole arrays (numpy, pandas, torch), hoist work out of the loop, cache results "
               "(functools.lru_cache) or batch the calls.")
        found.add("hot_function", "high" if cshare[j] >= HOT_HIGH_SHARE else "medium", msg,
                  {"function": str(st["function"].iloc[j]), "filename": str(st["filename"].iloc[j]),
                   "lineno": int(st["lineno"].iloc[j]), "ncalls": int(nc[j]), "cumtime_s": float(ct[j]),
                   "tottime_s": float(tt[j]), "per_call_s": float(per_call[j]), "share": float(cshare[j])},
                  score=float(cshare[j]))
    return found.frame()
