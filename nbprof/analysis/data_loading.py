"""The DataLoaders of a run as tables: each batch (who made it, when, how long the loop waited
for it), each worker, the workers' functions, and per loader the numbers behind the
``data_bound`` finding.

Input: the run's :class:`~nbprof.collect.data_loading.DataLoadingRecord` (``time.time_ns()``
stamps from the main process and from each worker) and the wall-clock time of the profile's
``start_us == 0`` (a torch profile: ``base_time_ns + origin_ns``, the clock Kineto stamps its
events with; a cProfile run: when the run began), so every ``*_us`` here is on the profile's own
axis, as the events' ``start_us``. Everything is vectorized over the batches.

**A loader's numbers** (:func:`loader_summaries`), per epoch then summed:

- the loop: from the iterator's creation (starting or resuming the workers) to the ``_next_data``
  call that ended the epoch (StopIteration); an epoch left early ends at its last batch's wait
  plus the loop's median time per step;
- start-up wait: creating the iterator plus the first batch's wait (the workers' start, the
  prefetch not filled yet); steady wait: every later batch's wait; the steady share is the
  steady wait over the loop without its start-up;
- ``make_us``: a worker's median time per batch (the main process's, without workers);
  ``step_us``: the loop's median time between getting a batch and asking for the next (its own
  work per step): each worker gives a batch every ``make_us``, the loop takes one every
  ``step_us``, so ``ceil(make_us / step_us)`` workers keep up;
- ``ready_us``: of the waits after the workers' first round (``ready_wait_us``; a worker's first
  batch also sets up its transfers), the part after the batch was made (its trip through the
  queue, unpickling, the pin_memory thread): more workers do not shorten it.

**The profiler's own cost** biases both sides: cProfile in the workers makes each batch slower
(calls per batch × cProfile's cost per call, measured by the run on this machine:
``record.call_cost_ns``), and the profiler in the main process makes each step slower, which
gives the workers slack (cProfile: the main profile's calls over its wall time; torch: not
measured, said in the finding). ``make_free_us`` and ``step_free_us`` take out what was measured;
``workers_needed`` uses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..collect.cprofile import merge_raw, stats_table, without_own_frames
from ._tables import TEXT, empty_table

__all__ = ["BATCH_DTYPES", "WORKER_DTYPES", "WORKER_STAT_DTYPES", "DataLoading", "LoaderSummary",
           "data_loading", "record_notes", "origin_ns"]

BATCH_DTYPES = {"loader": TEXT, "epoch": np.int64, "worker": np.int64, "pid": np.int64, "batch": np.int64,
                "samples": np.int64, "start_us": np.float64, "end_us": np.float64, "make_us": np.float64,
                "wait_start_us": np.float64, "wait_us": np.float64, "status": TEXT}
BATCH_COLUMNS = tuple(BATCH_DTYPES)
WORKER_DTYPES = {"loader": TEXT, "worker": np.int64, "pid": np.int64, "epoch": np.int64, "started_us": np.float64,
                 "batches": np.int64, "samples": np.int64, "make_us": np.float64, "make_mean_us": np.float64,
                 "functions": TEXT}
WORKER_COLUMNS = tuple(WORKER_DTYPES)
WORKER_STAT_DTYPES = {"worker": np.int64, "function": TEXT, "filename": TEXT, "lineno": np.int64, "ncalls": np.int64,
                      "primitive_calls": np.int64, "tottime_s": np.float64, "cumtime_s": np.float64,
                      "tottime_per_call_s": np.float64, "cumtime_per_call_s": np.float64}
MAIN_PROCESS = -1  # the ``worker`` of a batch made in the main process (num_workers=0)


def origin_ns(profile: Any) -> int:
    """The ``time.time_ns()`` of the profile's ``start_us == 0``."""
    meta = profile.meta
    record = meta.data_loading
    if getattr(profile, "kind", "") == "torch" and getattr(meta, "base_time_ns", 0):
        return int(meta.base_time_ns) + int(meta.origin_ns)
    return int(record.began_ns) if record is not None else 0


@dataclass
class LoaderSummary:
    """One DataLoader's numbers (see the module doc); times in µs, shares as fractions."""

    loader: str
    dataset: str
    num_workers: int
    start_method: str
    persistent_workers: bool
    iterable: bool
    pin_memory: bool
    prefetch_factor: int | None
    epochs: int
    batches: int  # batches the loop got
    loop_us: float
    startup_us: float  # creating the iterators and waiting for each epoch's first batch
    steady_wait_us: float
    steady_share: float  # steady wait / (loop - startup)
    wait_share: float  # all waiting (start-up included) / loop
    make_us: float  # median time a batch takes to make (a worker's, or the main process's)
    step_us: float  # median time the loop spends per step between batches
    ready_us: float  # of the waits after the workers' first round, the time after the batches were made
    ready_wait_us: float  # those waits
    calls_per_batch: float  # Python calls per batch in the workers (cProfile)
    make_free_us: float  # make_us without the workers' cProfile cost (measured)
    step_free_us: float  # step_us without the main process's profiler cost (where measured)
    main_overhead_measured: bool
    workers_needed: int  # to keep up with the loop (from the free times)
    producing_workers: int  # workers that made at least one batch the loop used
    top_function: str  # what takes most of a worker's time ("" without functions)
    top_share: float  # its share of the workers' batch time
    first_wait_us: float  # the first batch's wait of the first epoch


@dataclass
class DataLoading:
    """A profile's DataLoader tables, computed once (``profile._data_loading``)."""

    batches: pd.DataFrame
    workers: pd.DataFrame
    record: Any
    origin_ns: int
    loaders: list[LoaderSummary] = field(default_factory=list)

    def worker_raw(self, loader: str | None = None) -> dict[int, dict[Any, Any]]:
        """Each worker id's cProfile stats, summed over its processes (all loaders, or one)."""
        if self.record is None:
            return {}
        names = {info.number: info.name for info in self.record.loaders}
        by_worker: dict[int, list[dict[Any, Any]]] = {}
        for w in self.record.workers:
            if w.stats is None or (loader is not None and names.get(w.loader) != loader):
                continue
            # a record read at a run's end has no frame of nbprof's left (collect.data_loading); one
            # made otherwise (a saved record of another install, a hand-built one) may: taken out here
            by_worker.setdefault(w.worker, []).append(without_own_frames(w.stats))
        return {k: merge_raw(v) for k, v in sorted(by_worker.items())}

    def merged_raw(self, loader: str | None = None) -> dict[Any, Any]:
        """Every worker's stats added up: one profile of the batches the workers made."""
        return merge_raw(self.worker_raw(loader).values())

    def worker_stats(self, loader: str | None = None) -> pd.DataFrame:
        frames = []
        for worker, raw in self.worker_raw(loader).items():
            table = stats_table(raw)
            table.insert(0, "worker", np.full(len(table), worker, dtype=np.int64))
            frames.append(table)
        frames = [f for f in frames if len(f)]
        if not frames:
            return empty_table(WORKER_STAT_DTYPES)
        return pd.concat(frames, ignore_index=True)


def data_loading(profile: Any, main_calls: int | None = None) -> DataLoading:
    """The tables of ``profile``'s DataLoaders (``meta.data_loading``; empty tables without).
    ``main_calls``: the main process's Python calls (a cProfile run), for its overhead."""
    record = profile.meta.data_loading
    if record is None or not record.loaders:
        return DataLoading(empty_table(BATCH_DTYPES), empty_table(WORKER_DTYPES), None, 0)
    origin = origin_ns(profile)
    batches = _batches(record, origin)
    workers = _workers(record, batches, origin)
    out = DataLoading(batches, workers, record, origin)
    wall_s = getattr(profile.meta, "wall_s", None)
    out.loaders = loader_summaries(out, main_calls=main_calls, wall_s=wall_s)
    return out


# ---------------------------------------------------------------------------------------- batches


def _names(record: Any) -> dict[int, str]:
    return {info.number: info.name for info in record.loaders}


def _worker_rows(record: Any, origin: int) -> pd.DataFrame:
    """Every batch a worker recorded (an iterable worker's "ran out" included); times in ns from
    ``origin`` (exact in a float64 once joined, as ns since 1970 are not)."""
    parts = [w.batches for w in record.workers if len(w.batches)]
    if not parts:
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in
                             ("loader", "worker", "pid", "status", "epoch", "batch", "start_ns", "end_ns", "samples")})
    rows = np.concatenate(parts)
    reps = [len(w.batches) for w in record.workers if len(w.batches)]
    info = np.array([(w.loader, w.worker, w.pid) for w in record.workers if len(w.batches)], dtype=np.int64)
    info = np.repeat(info, reps, axis=0)
    return pd.DataFrame({"loader": info[:, 0], "worker": info[:, 1], "pid": info[:, 2], "status": rows[:, 0],
                         "epoch": rows[:, 1], "batch": rows[:, 2], "start_ns": rows[:, 3] - origin,
                         "end_ns": rows[:, 4] - origin, "samples": rows[:, 5]})


def _wait_rows(record: Any, origin: int) -> pd.DataFrame:
    cols = ("loader", "epoch", "batch", "expected", "wait_start_ns", "wait_end_ns", "outcome")
    if not record.waits:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "outcome" else np.int64) for c in cols})
    frame = pd.DataFrame(record.waits, columns=list(cols))
    frame["wait_start_ns"] -= origin
    frame["wait_end_ns"] -= origin
    return frame


def _batches(record: Any, origin: int) -> pd.DataFrame:
    """One row per batch: the workers' records joined with the loop's waits on (loader, epoch,
    batch); batches made in the main process (no workers) from the waits alone."""
    made = _worker_rows(record, origin)
    made = made[made["status"] != 3]  # an iterable worker's "ran out": no batch
    waits = _wait_rows(record, origin)
    waits = waits[waits["outcome"] != "stop"]
    single = {info.number for info in record.loaders if info.num_workers == 0}
    key = ["loader", "epoch", "batch"]
    frame = made.merge(waits, on=key, how="outer", sort=False)
    in_main = frame["loader"].isin(list(single)).to_numpy()
    status_code = frame["status"].to_numpy(dtype=np.float64)
    outcome = frame["outcome"].to_numpy(dtype=object)
    got = pd.notna(outcome) & (outcome == "ok")
    status = np.full(len(frame), "", dtype=object)
    status[status_code == 1] = "ok"
    status[status_code == 2] = "error"
    # without a worker's record: made in the main process (num_workers=0), or a batch the loop
    # waited for that never came (the worker died, the loop timed out): "lost"
    no_record = np.isnan(status_code)
    status = np.where(no_record & in_main & got, "ok", status)
    status = np.where(no_record & in_main & ~got & pd.notna(outcome), "error", status)
    status = np.where(no_record & ~in_main, "lost", status)
    wait_start = frame["wait_start_ns"].to_numpy(dtype=np.float64)
    wait_end = frame["wait_end_ns"].to_numpy(dtype=np.float64)
    start = np.where(in_main, wait_start, frame["start_ns"].to_numpy(dtype=np.float64))
    end = np.where(in_main, wait_end, frame["end_ns"].to_numpy(dtype=np.float64))
    worker = frame["worker"].to_numpy(dtype=np.float64)
    expected = frame["expected"].to_numpy(dtype=np.float64)
    worker = np.where(in_main, MAIN_PROCESS, np.where(np.isnan(worker), np.nan_to_num(expected, nan=-1), worker))
    pid = frame["pid"].to_numpy(dtype=np.float64)
    main_pid = int(getattr(record, "pid", 0) or 0)
    pid = np.where(in_main, main_pid, pid)
    for i in np.flatnonzero(np.isnan(pid)):  # a batch that never came: the process of the worker it waited for
        of = (int(frame["loader"].iat[i]), int(worker[i]))
        epoch = int(frame["epoch"].iat[i])
        started = [w for w in record.workers if (w.loader, w.worker) == of and w.epoch <= epoch]
        pid[i] = max(started, key=lambda w: w.epoch).pid if started else 0
    samples = frame["samples"].to_numpy(dtype=np.float64)
    if in_main.any():  # the main process's batches: as counted there, else the loader's batch size
        size = {info.number: info.batch_size or 1 for info in record.loaders}
        sizes = frame["loader"].map(size).to_numpy(dtype=np.float64)
        counted = {(a, b, c): n for a, b, c, n in record.main_samples}
        if counted:
            keys = zip(frame["loader"].tolist(), frame["epoch"].tolist(), frame["batch"].tolist())
            sizes = np.array([counted.get(k, s) for k, s in zip(keys, sizes.tolist())], dtype=np.float64)
        samples = np.where(in_main, sizes, samples)
    names = _names(record)
    out = pd.DataFrame({
        "loader": frame["loader"].map(names).astype(str).to_numpy(),
        "epoch": frame["epoch"].to_numpy(dtype=np.int64),
        "worker": worker.astype(np.int64),
        "pid": pid.astype(np.int64),
        "batch": frame["batch"].to_numpy(dtype=np.int64),
        "samples": np.nan_to_num(samples, nan=0).astype(np.int64),
        "start_us": start / 1000.0,
        "end_us": end / 1000.0,
        "make_us": (end - start) / 1000.0,
        "wait_start_us": wait_start / 1000.0,
        "wait_us": (wait_end - wait_start) / 1000.0,
        "status": status.astype(str),
    })
    out = out.sort_values(["loader", "epoch", "batch"], kind="stable").reset_index(drop=True)
    out["loader"] = out["loader"].astype(BATCH_DTYPES["loader"])
    out["status"] = out["status"].astype(BATCH_DTYPES["status"])
    return out


def _workers(record: Any, batches: pd.DataFrame, origin: int) -> pd.DataFrame:
    """One row per worker process (and one for the main process where it made batches)."""
    names = _names(record)
    rows = []
    made = batches[(batches["status"] != "lost") & (batches["worker"] >= 0)]
    per_pid = made.groupby("pid").agg(batches=("batch", "size"), samples=("samples", "sum"),
                                      make_us=("make_us", "median"), make_mean_us=("make_us", "mean"))
    for w in record.workers:
        stats = per_pid.loc[w.pid] if w.pid in per_pid.index else None
        functions = "recorded" if w.stats is not None else f"missing: {w.missing}"
        rows.append((names.get(w.loader, str(w.loader)), w.worker, w.pid, w.epoch, (w.started_ns - origin) / 1000.0,
                     int(stats["batches"]) if stats is not None else 0,
                     int(stats["samples"]) if stats is not None else 0,
                     float(stats["make_us"]) if stats is not None else math.nan,
                     float(stats["make_mean_us"]) if stats is not None else math.nan, functions))
    main = batches[batches["worker"] == MAIN_PROCESS]
    for loader, part in main.groupby("loader", sort=False):
        rows.append((str(loader), MAIN_PROCESS, int(part["pid"].iloc[0]), int(part["epoch"].min()),
                     float(part["start_us"].min()), len(part), int(part["samples"].sum()),
                     float(part["make_us"].median()), float(part["make_us"].mean()), "in the main profile"))
    if not rows:
        return empty_table(WORKER_DTYPES)
    out = pd.DataFrame(rows, columns=list(WORKER_COLUMNS))
    return out.astype({c: WORKER_DTYPES[c] for c in WORKER_COLUMNS}).sort_values(
        ["loader", "worker", "epoch", "pid"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------- numbers


def _epoch_spans(record: Any, loader: int, step_us: float) -> list[tuple[int, float, float, float]]:
    """(epoch, 0, the loop's ns, its start-up's ns) of each of the loader's epochs."""
    waits = [w for w in record.waits if w[0] == loader]
    passes = {(p[1]): p for p in record.passes if p[0] == loader}
    out = []
    for epoch in sorted({w[1] for w in waits} | set(passes)):
        ws = [w for w in waits if w[1] == epoch]
        p = passes.get(epoch)
        got = [w for w in ws if w[6] != "stop"]
        stop = [w for w in ws if w[6] == "stop"]
        # ns since 1970 as Python ints: exact (a float64 is not, at ns)
        if p is not None and p[3] != "single":
            start = int(p[4])
        elif ws:
            start = int(min(w[4] for w in ws))
        else:
            continue
        if stop:
            end = int(stop[-1][5])
        elif got:
            end = int(max(w[5] for w in got)) + (round(step_us * 1000.0) if math.isfinite(step_us) else 0)
        else:
            end = int(p[5]) if p is not None else start
        first = min(got, key=lambda w: w[4]) if got else None
        startup = (int(first[5]) - start) if first is not None else (end - start)
        out.append((epoch, 0.0, float(end - start), float(max(startup, 0))))
    return out


def loader_summaries(data: DataLoading, main_calls: int | None = None, wall_s: float | None = None) -> list[LoaderSummary]:
    record = data.record
    out = []
    call_ns = float(getattr(record, "call_cost_ns", 0.0) or 0.0)
    for info in record.loaders:
        b = data.batches[data.batches["loader"] == info.name]
        used = b[b["wait_us"].notna() & (b["status"] != "lost")]
        used = used.sort_values(["epoch", "wait_start_us"], kind="stable")
        # the loop's own time per step: from getting a batch to asking for the next, same epoch
        w0 = used["wait_start_us"].to_numpy()
        w1 = w0 + used["wait_us"].to_numpy()
        ep = used["epoch"].to_numpy()
        same = ep[1:] == ep[:-1]
        gaps = (w0[1:] - w1[:-1])[same]
        step = float(np.median(gaps)) if len(gaps) else math.nan
        spans = _epoch_spans(record, info.number, step)
        loop_ns = sum(e - s for _, s, e, _ in spans)
        startup_ns = sum(u for _, _, _, u in spans)
        first_batch = used.groupby("epoch")["wait_start_us"].transform("min") == used["wait_start_us"]
        steady = used[~first_batch.to_numpy()]
        steady_wait = float(steady["wait_us"].sum())
        steady_loop_us = (loop_ns - startup_ns) / 1000.0
        made = b[(b["status"] == "ok") & b["make_us"].notna()]
        make = float(made["make_us"].median()) if len(made) else math.nan
        # of each wait after the workers' first round (a worker's first batch also sets up its
        # transfers), the part after the batch was made (the end of the worker's record)
        later = used[used.groupby("epoch").cumcount().to_numpy() >= max(info.num_workers, 1)]
        ready_from = np.maximum(later["end_us"].to_numpy(), later["wait_start_us"].to_numpy())
        ready = np.clip(later["wait_start_us"].to_numpy() + later["wait_us"].to_numpy() - ready_from, 0.0, None)
        ready_us = float(np.nansum(ready)) if info.num_workers else 0.0
        ready_wait_us = float(later["wait_us"].sum()) if info.num_workers else 0.0
        raw = data.merged_raw(info.name) if info.num_workers else {}
        calls = float(sum(v[1] for v in raw.values()))
        made_by_workers = int(((b["worker"] >= 0) & (b["status"] != "lost")).sum())
        per_batch = calls / made_by_workers if made_by_workers else 0.0
        make_free = make - per_batch * call_ns / 1000.0 if info.num_workers and call_ns else make
        step_free, measured = step, False
        if main_calls and wall_s and call_ns and math.isfinite(step):
            # cProfile in the main process: its calls spread over the run's wall time
            overhead_share = min(main_calls * call_ns / (wall_s * 1e9), 0.9)
            step_free, measured = step * (1.0 - overhead_share), True
        needed = 0
        if math.isfinite(make_free) and math.isfinite(step_free):
            needed = max(1, math.ceil(make_free / max(step_free, 1e-3)))
        producing = int(used.loc[used["worker"] >= 0, "worker"].nunique())
        top, top_share = _top_function(raw)
        first_wait = float(used["wait_us"].iloc[0]) if len(used) else math.nan
        all_wait = float(used["wait_us"].sum()) + sum(
            (p[5] - p[4]) / 1000.0 for p in record.passes if p[0] == info.number and p[3] != "single")
        out.append(LoaderSummary(
            loader=info.name, dataset=info.dataset, num_workers=info.num_workers, start_method=info.start_method,
            persistent_workers=info.persistent_workers, iterable=info.iterable, pin_memory=info.pin_memory,
            prefetch_factor=info.prefetch_factor, epochs=len(spans), batches=len(used), loop_us=loop_ns / 1000.0,
            startup_us=startup_ns / 1000.0, steady_wait_us=steady_wait,
            steady_share=steady_wait / steady_loop_us if steady_loop_us > 0 else 0.0,
            wait_share=min(all_wait / (loop_ns / 1000.0), 1.0) if loop_ns > 0 else 0.0,
            make_us=make, step_us=step, ready_us=ready_us, ready_wait_us=ready_wait_us, calls_per_batch=per_batch,
            make_free_us=make_free, step_free_us=step_free, main_overhead_measured=measured,
            workers_needed=needed, producing_workers=producing, top_function=top, top_share=top_share,
            first_wait_us=first_wait))
    return out


def _top_function(raw: dict[Any, Any]) -> tuple[str, float]:
    """The function with the most own time in the workers' batches, as pstats names it; a builtin
    ("time.sleep") with the function that called it most."""
    if not raw:
        return "", 0.0
    total = sum(v[2] for v in raw.values())
    key, value = max(raw.items(), key=lambda kv: kv[1][2])
    name = _label(key)
    if key[0] == "~" and value[4]:
        caller = max(value[4].items(), key=lambda kv: kv[1][2] if isinstance(kv[1], tuple) else 0)[0]
        name += f", called from {_label(caller)}"
    return name, (value[2] / total if total else 0.0)


def _label(key: tuple[str, int, str]) -> str:
    import os

    filename, line, function = key
    if filename == "~":
        return function
    return f"{function} ({os.path.basename(filename)}:{line})"


# ------------------------------------------------------------------------------------------ notes


def record_notes(record: Any, what: str = "cell") -> list[str]:
    """The report's lines about the workers' records: each worker whose functions are missing,
    and why (the rest of what it recorded stands)."""
    names = _names(record)
    notes = [f"{name}'s persistent workers were started before this {what}, so nbprof did not record them: create "
             f"the DataLoader (or its first iterator) in the profiled {what} to see inside them"
             for name in getattr(record, "unwatched", [])]
    for w in record.workers:
        if w.stats is None:
            made = int(np.count_nonzero(w.batches[:, 0] != 3)) if len(w.batches) else 0
            made_text = (f"its {made} batch{'es' if made != 1 else ''} until then are in the Data loading tab "
                         "(p.data_loading())" if made else "it had finished no batch")
            notes.append(f"DataLoader {names.get(w.loader, w.loader)!s}: worker {w.worker} (pid {w.pid}) did not hand "
                         f"back its functions: {w.missing}; {made_text}")
    return notes


# --------------------------------------------------------------------------------------- timeline


def loading_rects(record: Any, origin: int, window: tuple[float, float] | None = None) -> pd.DataFrame:
    """The timeline's rectangles of the DataLoaders (``analysis.timeline`` appends them as lanes):
    per loader, one lane of the main process's waits (each labelled with the batch it waited for,
    and the workers' start), then one lane per worker id with each batch it made. Columns: ``lane_key``
    (the lane's label), ``order`` (the lanes' order), ``x0_us, x1_us, name, family, hue, hover``."""
    from ..format import esc_plotly, fmt_us

    b = _batches(record, origin)
    parts = []
    loaders = {info.name: i for i, info in enumerate(record.loaders)}
    # the main process's waits
    waited = b[b["wait_us"].notna()]
    if len(waited):
        worker = waited["worker"].to_numpy()
        batch = waited["batch"].to_numpy()
        made_in_main = worker == MAIN_PROCESS
        who = np.where(made_in_main, "made in the main process",
                       np.char.add("from worker ", worker.astype(str)))
        verb = np.where(made_in_main, "making batch ", "waiting for batch ")
        names = np.char.add(verb.astype(str), batch.astype(str))
        lost = waited["status"].to_numpy() != "ok"
        names = np.where(lost, np.char.add(names, " (" + waited["status"].astype(str).to_numpy() + ")"), names)
        hover = [f"<b>{esc_plotly(str(n))}</b><br>{esc_plotly(str(loader))}, epoch {e} · {w}<br>"
                 f"{fmt_us(d)} · at {fmt_us(x)}"
                 for n, loader, e, w, d, x in zip(names, waited["loader"], waited["epoch"], who, waited["wait_us"],
                                                   waited["wait_start_us"])]
        parts.append(pd.DataFrame({
            "lane_key": (waited["loader"].astype(str) + ": main process").to_numpy(),
            "order": waited["loader"].map(loaders).to_numpy(dtype=np.int64) * 1000,
            "x0_us": waited["wait_start_us"].to_numpy(), "x1_us": (waited["wait_start_us"] + waited["wait_us"]).to_numpy(),
            "name": names.astype(object), "family": "data_wait", "hue": 0, "hover": hover}))
    # the workers' start (creating the iterator) and a persistent iterator's next epoch
    names_of = {info.number: info.name for info in record.loaders}
    starts = [p for p in record.passes if p[3] != "single"]
    if starts:
        s = pd.DataFrame(starts, columns=["loader", "epoch", "iterator", "kind", "start_ns", "end_ns"])
        label = s["loader"].map(names_of).astype(str)
        what = np.where(s["kind"] == "start", "starting the workers", "resuming the workers")
        x0 = (s["start_ns"].to_numpy(dtype=np.int64) - origin) / 1000.0
        x1 = (s["end_ns"].to_numpy(dtype=np.int64) - origin) / 1000.0
        hover = [f"<b>{w}</b><br>{esc_plotly(str(n))}, epoch {e}<br>{fmt_us(b1 - a1)} · at {fmt_us(a1)}"
                 for w, n, e, a1, b1 in zip(what, label, s["epoch"], x0, x1)]
        parts.append(pd.DataFrame({
            "lane_key": (label + ": main process").to_numpy(), "order": s["loader"].map(
                {info.number: i for i, info in enumerate(record.loaders)}).to_numpy(dtype=np.int64) * 1000,
            "x0_us": x0, "x1_us": x1, "name": what.astype(object), "family": "data_start", "hue": 0, "hover": hover}))
    # each batch a worker made
    made = b[(b["worker"] >= 0) & b["start_us"].notna()]
    if len(made):
        batch = made["batch"].to_numpy()
        status = made["status"].to_numpy().astype(str)
        names = np.char.add("batch ", batch.astype(str))
        names = np.where(status == "error", np.char.add(names, " (raised)"), names)
        used = made["wait_us"].notna().to_numpy()
        hover = [f"<b>{esc_plotly(str(n))}</b><br>{esc_plotly(str(loader))}, epoch {e} · worker {w} (pid {pid}) · "
                 f"{k} samples<br>made in {fmt_us(m)} · at {fmt_us(x)}<br>"
                 + (f"the loop waited {fmt_us(wt)} for it" if u else "the loop did not take it")
                 for n, loader, e, w, pid, k, m, x, wt, u in zip(
                     names, made["loader"], made["epoch"], made["worker"], made["pid"], made["samples"],
                     made["make_us"], made["start_us"], made["wait_us"], used)]
        parts.append(pd.DataFrame({
            "lane_key": (made["loader"].astype(str) + ": worker " + made["worker"].astype(str)).to_numpy(),
            "order": made["loader"].map(loaders).to_numpy(dtype=np.int64) * 1000 + 1
            + made["worker"].to_numpy(dtype=np.int64),
            "x0_us": made["start_us"].to_numpy(), "x1_us": made["end_us"].to_numpy(), "name": names.astype(object),
            "family": "batch", "hue": batch.astype(np.int64), "hover": hover}))
    if not parts:
        return pd.DataFrame({"lane_key": [], "order": [], "x0_us": [], "x1_us": [], "name": [], "family": [],
                             "hue": [], "hover": []})
    rects = pd.concat(parts, ignore_index=True)
    if window is not None:
        w0, w1 = window
        rects = rects[(rects["x1_us"] >= w0) & (rects["x0_us"] <= w1)].copy()
        rects["x0_us"] = rects["x0_us"].clip(lower=w0)
        rects["x1_us"] = rects["x1_us"].clip(upper=w1)
    return rects.sort_values(["order", "x0_us"], kind="stable").reset_index(drop=True)


def add_loading_lanes(data: Any, record: Any, origin: int, window: tuple[float, float] | None = None,
                      keep_layout: bool = False) -> Any:
    """``data`` (a ``TimelineData``) with the DataLoaders' lanes after its own (see
    :func:`loading_rects`). ``keep_layout``: its lanes already hold them (a zoom of a timeline
    drawn with them): only the window's rectangles are added."""
    import dataclasses

    rects = loading_rects(record, origin, window)
    lanes, rows = data.lanes, data.rows
    if keep_layout and "kind" in lanes.columns and (lanes["kind"] == "data").any():
        mine = lanes[lanes["kind"] == "data"]
        lane_of = dict(zip(mine["label"], mine["lane"]))
        row_of = dict(zip(mine["label"], mine["first_row"]))
    else:
        every = rects if window is None else loading_rects(record, origin)
        keys = list(dict.fromkeys(every["lane_key"]))
        counts = every["lane_key"].value_counts()
        first_lane = int(lanes["lane"].max()) + 1 if len(lanes) else 0
        first_row = int(rows["row"].max()) + 1 if len(rows) else 0
        new_lanes = pd.DataFrame({
            "lane": np.arange(first_lane, first_lane + len(keys), dtype=np.int64),
            "rank": None, "pid": -1, "thread": -1, "device": "cpu", "stream": -1,
            "label": keys, "kind": "data", "levels": 1,
            "first_row": np.arange(first_row, first_row + len(keys), dtype=np.int64),
            "events": [int(counts.get(k, 0)) for k in keys]})
        new_lanes = new_lanes[[c for c in lanes.columns if c in new_lanes.columns]] if len(lanes.columns) else new_lanes
        new_rows = pd.DataFrame({"row": new_lanes["first_row"].to_numpy(), "lane": new_lanes["lane"].to_numpy(),
                                 "level": np.zeros(len(keys), dtype=np.int64)})
        lanes = pd.concat([lanes, new_lanes], ignore_index=True) if len(lanes) else new_lanes
        rows = pd.concat([rows, new_rows], ignore_index=True) if len(rows) else new_rows
        lane_of = dict(zip(keys, new_lanes["lane"]))
        row_of = dict(zip(keys, new_lanes["first_row"]))
    if len(rects) == 0:
        return dataclasses.replace(data, lanes=lanes, rows=rows)
    n = len(rects)
    span = (rects["x1_us"] - rects["x0_us"]).to_numpy(dtype=np.float64)
    added = pd.DataFrame({
        "row": rects["lane_key"].map(row_of).to_numpy(dtype=np.int64),
        "lane": rects["lane_key"].map(lane_of).to_numpy(dtype=np.int64),
        "level": np.zeros(n, dtype=np.int64),
        "x0_us": rects["x0_us"].to_numpy(dtype=np.float64), "x1_us": rects["x1_us"].to_numpy(dtype=np.float64),
        "busy_us": span, "count": np.ones(n, dtype=np.int64), "name": rects["name"].to_numpy(dtype=object),
        "family": rects["family"].to_numpy(dtype=object), "hue": rects["hue"].to_numpy(dtype=np.int64),
        "event": np.full(n, -1, dtype=np.int64), "names": np.full(n, None, dtype=object),
        "distinct": np.ones(n, dtype=np.int64), "hover": rects["hover"].to_numpy(dtype=object)})
    old = data.rects
    if "hover" not in old.columns:
        old = old.assign(hover=np.full(len(old), None, dtype=object))
    merged = pd.concat([old, added], ignore_index=True) if len(old) else added
    t0, t1 = data.t0_us, data.t1_us
    if window is None:
        t0 = min(t0, float(added["x0_us"].min())) if len(old) else float(added["x0_us"].min())
        t1 = max(t1, float(added["x1_us"].max())) if len(old) else float(added["x1_us"].max())
    return dataclasses.replace(data, rects=merged, lanes=lanes, rows=rows, t0_us=t0, t1_us=t1,
                               events_drawn=data.events_drawn + n)
