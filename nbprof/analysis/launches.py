"""Kernel launches: how far ahead of the GPU the CPU runs (HTA's kernel launch stats and queue
length).

:func:`launch_table`: one row per launch of device work (kernels, memcpys, memsets) whose runtime
call was recorded (matched by correlation id)::

    rank, device, stream, correlation, name, kind, launch, launch_start_us, cpu_dur_us, gpu_dur_us,
    launch_delay_us

``launch``: the runtime call (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...); ``cpu_dur_us``: its
duration; ``gpu_dur_us``: the work's; ``launch_delay_us``: the work's start minus the runtime
call's start (HTA's ``launch_delay`` subtracts the call's end; from the start, the delay of a
kernel that starts at once is the launch latency itself, not that minus the call). A long delay is
a kernel queued behind others (the CPU is ahead: good), unless the stream was idle meanwhile.

:func:`queue_table`: one row per (rank,) device and stream::

    rank, device, stream, launches, window_us, mean_queue_length, max_queue_length

The queue length is the number of launched work items on the stream not finished yet: +1 at each
runtime call's start, -1 at each item's end (HTA's ``get_queue_length_time_series`` takes one off
when the item starts: it counts the waiting ones, so a stream running one long kernel with none
behind it reads 0, the same as a starving one; here that reads 1 and 0 is a stream with nothing to
do). At equal instants finishes count first. ``mean_queue_length`` is the time-weighted mean over
the stream's window, its first launch to its last end (HTA describes the change points, each
counted once however long it lasted); ``max_queue_length`` the largest value reached.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..events import DEVICE_WORK_CODES, KIND_CODE, kind_mask, time_ns, values_at
from .device_stats import process_codes

__all__ = ["LAUNCH_COLUMNS", "QUEUE_COLUMNS", "launch_table", "queue_table", "stream_groups",
           "matched_launches"]

LAUNCH_COLUMNS = ("rank", "device", "stream", "correlation", "name", "kind", "launch", "launch_start_us",
                  "cpu_dur_us", "gpu_dur_us", "launch_delay_us")
QUEUE_COLUMNS = ("rank", "device", "stream", "launches", "window_us", "mean_queue_length", "max_queue_length")
_QUEUE_DTYPES = {"rank": object, "device": object, "stream": np.int64, "launches": np.int64, "window_us": np.float64,
                 "mean_queue_length": np.float64, "max_queue_length": np.int64}


def matched_launches(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(device work rows, their runtime call rows), for the work whose runtime call is recorded;
    in row order."""
    kind = events["kind"].cat.codes.to_numpy()
    corr = events["correlation"].to_numpy()
    work = np.flatnonzero(kind_mask(kind, DEVICE_WORK_CODES) & (corr > 0))
    runtime = np.flatnonzero((kind == KIND_CODE["runtime"]) & (corr > 0))
    if len(work) == 0 or len(runtime) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    order = np.argsort(corr[runtime], kind="stable")
    keys = corr[runtime][order]
    at = np.minimum(np.searchsorted(keys, corr[work]), len(keys) - 1)
    hit = keys[at] == corr[work]
    return work[hit], runtime[order][at[hit]]


def stream_groups(rank: np.ndarray, device: np.ndarray, stream: np.ndarray
                  ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A code per (rank code, device code, stream), sorted by the three, and the three for each
    code. One int64 key and ``np.unique``: a pandas MultiIndex took 0.8 s for 500k launches."""
    rank, device, stream = (np.asarray(a, dtype=np.int64) for a in (rank, device, stream))
    if len(stream) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, (z, z, z)
    s_min = int(stream.min())
    n_streams = int(stream.max()) - s_min + 1
    n_devices = int(device.max()) + 1
    key = (rank * n_devices + device) * n_streams + (stream - s_min)
    uniq, group = np.unique(key, return_inverse=True)
    return group.reshape(-1), (uniq // n_streams // n_devices, uniq // n_streams % n_devices, uniq % n_streams + s_min)


def launch_table(events: pd.DataFrame) -> pd.DataFrame:
    rank, labels = process_codes(events)
    work, call = matched_launches(events)
    start = events["start_us"].to_numpy()
    dur = events["dur_us"].to_numpy()
    delay_ns = time_ns(start[work]) - time_ns(start[call])
    return pd.DataFrame(
        {
            "rank": labels[rank[work]],
            "device": values_at(events["device"], work),
            "stream": events["stream"].to_numpy()[work],
            "correlation": events["correlation"].to_numpy()[work],
            "name": values_at(events["name"], work),
            "kind": values_at(events["kind"], work),
            "launch": values_at(events["name"], call),
            "launch_start_us": start[call],
            "cpu_dur_us": dur[call],
            "gpu_dur_us": dur[work],
            "launch_delay_us": delay_ns / 1000.0,
        },
        columns=list(LAUNCH_COLUMNS),
    )


def queue_table(events: pd.DataFrame) -> pd.DataFrame:
    rank, labels = process_codes(events)
    work, call = matched_launches(events)
    if len(work) == 0:  # the dtypes of a table with rows
        return pd.DataFrame({c: pd.Series(dtype=_QUEUE_DTYPES[c]) for c in QUEUE_COLUMNS})
    device = events["device"].cat.codes.to_numpy()[work].astype(np.int64)
    stream = events["stream"].to_numpy()[work]
    group, (stream_rank, stream_device, stream_id) = stream_groups(rank[work], device, stream)
    launch = time_ns(events["start_us"].to_numpy()[call])
    finish = time_ns(events["start_us"].to_numpy()[work]) + time_ns(events["dur_us"].to_numpy()[work])
    n = len(launch)
    g = np.r_[group, group].astype(np.int64)
    t = np.r_[launch, finish]
    step = np.r_[np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)]
    # per stream, by time; at one instant finishes (-1) first: one int64 key, one sort
    base = int(t.min())
    stride = int(t.max()) - base + 1
    order = np.argsort((g * stride + (t - base)) * 2 + (step > 0), kind="stable")
    g, t, step = g[order], t[order], step[order]
    # a stream's launches and finishes cancel out, so the running sum is 0 again where the next
    # stream begins: one cumsum serves every stream
    length = np.cumsum(step)
    # the value after each change holds until the next change of the same stream
    held = np.r_[t[1:] - t[:-1], 0]
    held[np.r_[g[1:] != g[:-1], True]] = 0
    n_streams = len(stream_id)
    area = np.bincount(g, weights=(length * held).astype(np.float64), minlength=n_streams)
    t_first = np.full(n_streams, np.iinfo(np.int64).max)
    t_last = np.full(n_streams, np.iinfo(np.int64).min)
    np.minimum.at(t_first, g, t)
    np.maximum.at(t_last, g, t)
    window = (t_last - t_first).astype(np.float64)
    peak = np.full(n_streams, np.iinfo(np.int64).min)
    np.maximum.at(peak, g, length)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(window > 0, area / window, np.nan)
    device_labels = np.asarray(events["device"].cat.categories, dtype=object)
    return pd.DataFrame(
        {
            "rank": labels[stream_rank],
            "device": device_labels[stream_device],
            "stream": stream_id,
            "launches": np.bincount(group, minlength=n_streams).astype(np.int64),
            "window_us": window / 1000.0,
            "mean_queue_length": mean,
            "max_queue_length": peak.astype(np.int64),
        },
        columns=list(QUEUE_COLUMNS),
    )
