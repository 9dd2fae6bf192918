"""What seed 68's mutation sample showed no fast test held (cluster reading and its timeline cache, the
snapshot reader): a rank summary's own reading time, the timeline cache's integers kept in 32 bits,
find answered from a rank's cache after its trace file is gone, the job a dead worker had started
when it was not the first, and a pickle with a persistent id refused by name. Expected values are
counted by hand from hand-made traces and pickles, or measured around the call by the test."""

from __future__ import annotations

import io
import operator
import os
import pickle
import time

import numpy as np
import pytest

from .synthetic import Trace


def copy_trace() -> Trace:
    """An op that copies 1,000,000 bytes to the device: its runtime call (5 µs) and the copy (30 µs)
    linked by correlation 100,000 (over 16 bits, under 32), and an allocation (not drawn)."""
    t = Trace()
    t._corr = 99_999  # the next launch's correlation: 100,000
    e = t.op("aten::copy_", 0.0, 50.0)
    t.launch("Memcpy HtoD", e, 10.0, 5.0, 20.0, 30.0, runtime="cudaMemcpyAsync", cat="gpu_memcpy", nbytes=1_000_000)
    t.memory(12.0, 1_000_000, 1_000_000, 2_000_000)
    return t


# ---------------------------------------------------------------- cluster.summary: the time it took


def test_a_rank_summary_says_how_long_reading_it_took(tmp_path):
    """``RankSummary.seconds`` ("time to read and summarize it"): a positive float, no more than the
    time the test measured around the whole ``rank_summary`` call."""
    from nbprof.cluster.summary import rank_summary

    path = copy_trace().write(tmp_path / "rank.json")
    t0 = time.perf_counter()
    s = rank_summary(str(path))
    outer = time.perf_counter() - t0
    assert isinstance(s.seconds, float)
    assert 0.0 < s.seconds <= outer


# ---------------------------------------------------------------- cluster.timeline: the rank's cache


def test_the_timeline_cache_keeps_integers_that_fit_in_32_bits_in_32_bits(tmp_path):
    """The cache's size (~45 bytes an event): correlation ids 0 and 100,000 and copy sizes up to
    1,000,000 (over 16 bits, under 32) are written 4 bytes each; pids 1000 and 0 (under 16 bits) 2
    bytes each; every value read back from the ``.npy`` files as written in the hand-made trace."""
    from nbprof.cluster.timeline import write_cache

    p = copy_trace().load(tmp_path)
    folder = tmp_path / "cache"
    write_cache(folder, p._events, p.meta)
    names = p._events["name"].astype(str).tolist()
    corr = np.load(folder / "correlation.npy")
    nbytes = np.load(folder / "bytes.npy")
    pid = np.load(folder / "pid.npy")
    assert (corr.dtype, nbytes.dtype, pid.dtype) == (np.dtype(np.int32), np.dtype(np.int32), np.dtype(np.int16))
    by_name = {n: (int(c), int(b), int(q)) for n, c, b, q in zip(names, corr, nbytes, pid)}
    assert by_name == {"aten::copy_": (0, 0, 1000), "cudaMemcpyAsync": (100_000, 0, 1000),
                       "Memcpy HtoD": (100_000, 1_000_000, 0), "[memory]": (0, 1_000_000, 1000)}


def test_find_reads_the_ranks_cache_where_its_trace_file_is_gone(tmp_path, monkeypatch):
    """A rank's cache written at load, its trace file removed since (a temporary folder, moved):
    find answers from the cache it is given, writing nothing new under the cache directory. "mem"
    (any case) names the drawn runtime call (5 µs) and copy (30 µs); the allocation
    ("[memory]", not drawn) is not counted."""
    from nbprof.cluster import timeline as ct

    monkeypatch.setenv("NBPROF_CACHE_DIR", str(tmp_path / "cache_dir"))
    p = copy_trace().load(tmp_path)
    folder = tmp_path / "rank_cache"
    ct.write_cache(folder, p._events, p.meta)
    file = tmp_path / "trace.json"
    file.unlink()
    try:
        count, total, names = ct.find_part(str(folder), str(file), "MEM")
    finally:
        for f in [f for f in ct._OPEN if f.startswith(str(tmp_path))]:
            ct._OPEN.pop(f)
    assert (count, total, sorted(names)) == (2, 35.0, ["Memcpy HtoD", "cudaMemcpyAsync"])
    assert not (tmp_path / "cache_dir").exists()


# ---------------------------------------------------------------- cluster.workers: a worker that died


def test_a_dead_worker_names_the_second_job_it_had_started():
    """One worker, two jobs run in order: ``abs(-3)`` finishes, then the worker exits
    (``os._exit(3)``) in the second. The Death given to ``died`` names job 1 (the second, the one
    it was running), as the worker told it when it started it; not job 0, not None."""
    from nbprof.cluster.workers import RankPool
    from nbprof.errors import TraceError

    deaths = []

    def died(death, left):
        deaths.append(death)
        return "died"

    pool = RankPool(1, idle_s=None)
    try:
        with pytest.raises(TraceError, match="^died$"):
            list(pool.as_completed(operator.call, [(abs, -3), (os._exit, 3)], died=died))
    finally:
        pool.close()
    [death] = deaths
    assert (death.code, death.job) == (3, 1)


# ---------------------------------------------------------------- collect.snapshot: a persistent id


class _WithPersistentIds(pickle.Pickler):
    """Writes every bytes object as a persistent id (as torch.save writes its storages)."""

    def persistent_id(self, obj):
        return ("storage", len(obj)) if isinstance(obj, bytes) else None


def test_a_pickle_with_a_persistent_id_is_refused_naming_it(tmp_path):
    """A pickle whose data refers to a persistent id (an object kept outside the pickle, which a
    memory snapshot never has): one line naming "a persistent id", nothing loaded from it."""
    from nbprof.collect.snapshot import read_snapshot_file
    from nbprof.errors import TraceError

    buf = io.BytesIO()
    _WithPersistentIds(buf, protocol=4).dump({"segments": [], "device_traces": [b"outside"]})
    path = tmp_path / "snap.pickle"
    path.write_bytes(buf.getvalue())
    with pytest.raises(TraceError) as e:
        read_snapshot_file(path)
    assert str(e.value) == (f"{path}: not a memory snapshot: the pickle names a persistent id (code, which a "
                            "snapshot never holds); nothing in it was run")


def test_the_persistent_id_pickle_is_what_pickle_itself_reads_with_a_loader(tmp_path):
    """The hand-made pickle above does hold a persistent id: pickle's own Unpickler, given a loader,
    gets ``("storage", 7)`` for it (so the refusal is of that id, not of a damaged file)."""
    buf = io.BytesIO()
    _WithPersistentIds(buf, protocol=4).dump({"device_traces": [b"outside"]})

    class Loader(pickle.Unpickler):
        def persistent_load(self, pid):
            return pid

    assert Loader(io.BytesIO(buf.getvalue())).load() == {"device_traces": [("storage", 7)]}
