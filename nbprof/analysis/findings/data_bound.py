"""The loop waits for data. Measured, when nbprof ran the code (the DataLoader's batches and
its workers recorded: ``analysis.data_loading``): the waits after each epoch's first batch take
at least ``DATA_BOUND_MIN_SHARE`` of the loop's steady time ("high" from
``DATA_BOUND_HIGH_SHARE``, over at least ``MIN_STEADY_BATCHES`` batches); the message says how
long a batch takes to make, how often the loop asks for one, how many workers would keep up, or
why more cannot help (at least ``READY_MIN_SHARE`` of the wait came after the batches were made;
one worker of an IterableDataset makes them all; no workers), and what takes the workers' time
(the waits after the workers' first round: their first batches also set up the transfers).
Starting the workers (each epoch's first batch) is its own "low" finding from
``STARTUP_MIN_SHARE`` of the loop, where something can be done about it: every epoch starts them
again (not persistent), or they start with spawn or forkserver (a new Python each). From a trace alone (no records): the time inside DataLoader
iteration (torch's ``enumerate(DataLoader)#...__next__`` ranges, or DataLoader Python frames
with ``--stack``) over the span, with the same two shares."""

from __future__ import annotations

import math
import re
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ...events import KIND_CODE, category_mask
from ...format import fmt_us, plural
from ...system import usable_cpus
from .._intervals import union_segments
from ._common import Finding, pct

DATA_BOUND_MIN_SHARE = 0.10
DATA_BOUND_HIGH_SHARE = 0.30
MIN_STEADY_BATCHES = 3
READY_MIN_SHARE = 0.5
STARTUP_MIN_SHARE = 0.20

_DATALOADER = re.compile(r"DataLoader|torch/utils/data/dataloader\.py")
_DATALOADER_NEXT = re.compile(r"^enumerate\(DataLoader\)#")


def find(ctx: Any) -> Iterator[Finding]:
    profile = ctx.profile
    record = getattr(profile.meta, "data_loading", None)
    if record is not None and record.loaders:
        torch_main = getattr(profile, "kind", "") == "torch"
        for summary in profile._data_loading.loaders:
            yield from _measured(summary, torch_main)
        return
    if getattr(profile, "kind", "") == "torch":
        yield from _from_trace(ctx)


# ------------------------------------------------------------------------------- measured


def _measured(s: Any, torch_main: bool) -> Iterator[Finding]:
    name = s.loader
    steady_batches = s.batches - s.epochs
    evidence = {k: _plain(v) for k, v in vars(s).items()}
    if steady_batches >= MIN_STEADY_BATCHES and s.steady_share >= DATA_BOUND_MIN_SHARE:
        severity = "high" if s.steady_share >= DATA_BOUND_HIGH_SHARE else "medium"
        msg = (f"The loop waited for {name}'s batches {pct(s.steady_share)} of its time "
               f"({fmt_us(s.steady_wait_us)} over {plural(steady_batches, 'batch', 'batches')}, not counting "
               f"{'each epoch' + chr(39) + 's' if s.epochs > 1 else 'the'} first). ")
        msg += _why(s) + " " + _bias(s, torch_main)
        yield Finding(severity, msg, evidence, score=s.steady_share)
    startup_share = s.startup_us / s.loop_us if s.loop_us > 0 else 0.0
    restarted = s.epochs > 1 and not s.persistent_workers
    if s.num_workers and startup_share >= STARTUP_MIN_SHARE and (restarted or s.start_method in ("spawn", "forkserver")):
        msg = (f"Starting {name}'s workers (until each epoch's first batch) took {fmt_us(s.startup_us)}, "
               f"{pct(startup_share)} of the loop")
        if s.start_method in ("spawn", "forkserver"):
            msg += f" ({s.start_method}: each worker starts a new Python and imports your dataset's modules)"
        msg += ". "
        if restarted:
            msg += "Every epoch starts them again: DataLoader(persistent_workers=True) starts them once."
        else:
            msg += ("Keep what the dataset's module imports light; a longer loop pays it once, and with "
                    "persistent_workers=True every epoch after the first does not pay it again.")
        yield Finding("low", msg, evidence | {"startup_share": startup_share}, score=startup_share)


def _why(s: Any) -> str:
    """How long a batch takes, how often the loop asks, so how many workers, or why more cannot help."""
    make = fmt_us(s.make_free_us if math.isfinite(s.make_free_us) else s.make_us)
    step = fmt_us(s.step_free_us if math.isfinite(s.step_free_us) else s.step_us)
    top = f" What takes the time in making them: {s.top_function} ({pct(s.top_share)})." if s.top_function else ""
    if s.num_workers == 0:
        return (f"The batches are made in the main process (num_workers=0): {make} each, while the loop's own work "
                f"takes {step} a step, so loading never overlaps with it. With DataLoader(num_workers="
                f"{_workers(s.workers_needed)}) the workers would keep up.{top}")
    ready_share = s.ready_us / s.ready_wait_us if s.ready_wait_us > 0 else 0.0
    if ready_share >= READY_MIN_SHARE:
        where = "the queue from the workers (pickling, shared memory)"
        if s.pin_memory:
            where += " and the pin_memory thread"
        return (f"{pct(ready_share)} of that wait came after the batches were made: bringing them to the main "
                f"process through {where} is what is slow, so more workers cannot help; return smaller batches "
                f"(uint8 rather than float32 images, no Python objects) or move work from the loop into "
                f"collate_fn.{top}")
    if s.iterable and s.num_workers > 1 and s.producing_workers <= 1:
        return (f"One worker of {s.num_workers} made the batches the loop used: the IterableDataset does not split "
                f"its data among workers (split it with torch.utils.data.get_worker_info()), so more workers cannot "
                f"help until it does.{top}")
    text = (f"A worker takes {make} per batch; the loop asks for one every {step} of its own work, so about "
            f"{plural(s.workers_needed, 'worker')} would keep up; it has {s.num_workers}.")
    cpus = usable_cpus()
    if s.workers_needed > s.num_workers:
        if s.workers_needed >= cpus:
            text += (f" That is more than this machine's {cpus} CPUs: make each batch cheaper (decode or resize once "
                     "and cache, simpler transforms)")
        else:
            text += f" Try DataLoader(num_workers={s.workers_needed})"
        text += "."
    else:
        text += (" The workers keep up on average, but batches vary: raise prefetch_factor"
                 f" (now {s.prefetch_factor}) so more are made ahead.")
    return text + top


def _workers(n: int) -> str:
    return str(n) if n > 0 else "N"


def _bias(s: Any, torch_main: bool) -> str:
    """How the profiler skews this, and what was taken out."""
    parts = []
    if s.calls_per_batch and s.make_free_us < s.make_us:
        parts.append(f"cProfile in the workers ({s.calls_per_batch:.0f} Python calls a batch) made each batch "
                     f"{fmt_us(s.make_us - s.make_free_us)} slower: taken out above")
    if s.main_overhead_measured and s.step_free_us < s.step_us:
        parts.append(f"cProfile in the main process made each step {fmt_us(s.step_us - s.step_free_us)} slower, "
                     "which gave the workers slack: taken out above, and without the profiler the loop waits "
                     "somewhat more")
    elif torch_main:
        parts.append("the torch profiler makes each step of the loop slower (its cost per operator is not measured "
                     "here), which gives the workers slack: without it the loop waits somewhat more")
    return ("Profiler bias: " + "; ".join(parts) + ".") if parts else ""


def _plain(v: Any) -> Any:
    if isinstance(v, (np.generic,)):
        return v.item()
    return v


# ---------------------------------------------------------------------------- from a trace


def _from_trace(ctx: Any) -> Iterator[Finding]:
    """A trace without nbprof's records: the time the training thread spent inside DataLoader
    iteration, over the span."""
    cpu_kinds = np.isin(ctx.kind, [KIND_CODE["annotation"], KIND_CODE["python"], KIND_CODE["op"]])
    is_dl = category_mask(ctx.names, lambda n: bool(_DATALOADER.search(n))) & cpu_kinds & (ctx.thread >= 0)
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
    if share < DATA_BOUND_MIN_SHARE:
        return
    names = ctx.names.to_numpy()
    is_next = category_mask(ctx.names, lambda n: bool(_DATALOADER_NEXT.match(n)))
    nexts = rows[is_next[rows] & (ctx.thread[rows] == thread)]
    batches = int(len(nexts))
    loader_names = pd.Series(names[nexts].astype(str)).str.extract(r"#(\w+)\.__next__")[0].dropna().unique().tolist()
    multi = any("MultiProcessing" in n for n in loader_names)
    mean = total_ns / batches / 1000.0 if batches else float("nan")
    msg = f"Waiting for data takes {pct(share)} of the span ({fmt_us(total_ns / 1000)}"
    msg += f" over {plural(batches, 'batch', 'batches')}, {fmt_us(mean)} each). " if batches else "). "
    if multi:
        msg += ("The workers do not keep up: raise num_workers or prefetch_factor, use persistent_workers=True, "
                "and make __getitem__ cheaper (decode or tokenize once, cache).")
    else:
        msg += ("Batches are loaded in the training process: use DataLoader(num_workers=N, pin_memory=True, "
                "persistent_workers=True) so loading overlaps with compute.")
    severity = "high" if share >= DATA_BOUND_HIGH_SHARE else "medium"
    yield Finding(severity, msg,
                  {"batches": batches, "total_us": total_ns / 1000.0, "mean_us": mean, "share_of_span": share,
                   "loaders": loader_names, "multiprocess": multi},
                  score=share)
