"""The data_bound finding and the DataLoader tables on records written by hand (issue 41).

Each record here is what ``collect.data_loading`` would have recorded for a loop whose every time
is chosen: the workers' start, each batch's wait, the loop's own work per step, when each worker
made each batch. Every expected number is worked out in the test from those numbers (none comes
from nbprof), and the thresholds are written here as numbers, so a threshold moved in the code
fails a test (tests/test_boundaries.py ties them to the module). The live recording is tested in
tests/test_data_loading.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from nbprof.collect.data_loading import DataLoadingRecord, LoaderInfo, WorkerRecord
from nbprof.meta import PythonMeta
from nbprof.model import PythonProfile

US = 1000  # ns
T0 = 1_700_000_000_000_000_000  # the run's start, time.time_ns()
MAIN_RAW = {("main.py", 1, "<module>"): (1, 1, 0.5, 0.5, {})}  # the main profile (findings need one)


def loop_record(waits_us, *, step_us=1000.0, start_us=500.0, make_us=None, ready_us=0.0, workers=2,
                epochs=1, persistent=False, iterable=False, pin_memory=False, stop=True, stats=True,
                producers=None, method="fork", prefetch=2, stop_us=5.0):
    """A DataLoader loop: per epoch, the iterator created in ``start_us``, then batch i waited
    for ``waits_us[i]`` and the loop worked ``step_us`` before asking for the next; the last
    call raises StopIteration (``stop``). Batch i is made by worker ``i % workers`` (or one of
    ``producers``), ending ``ready_us`` before its wait ends and taking ``make_us``."""
    info = LoaderInfo(number=1, name="train_loader", dataset="Images", iterable=iterable, num_workers=workers,
                      batch_size=4, prefetch_factor=prefetch if workers else None, persistent_workers=persistent,
                      pin_memory=pin_memory, start_method=method if workers else "")
    rec = DataLoadingRecord(began_ns=T0, ended_ns=0, loaders=[info])
    rows = {w: [] for w in range(max(workers, 1))}
    t = T0
    for epoch in range(epochs):
        kind = "single" if not workers else ("resume" if persistent and epoch else "start")
        rec.passes.append((1, epoch, 1 if persistent else epoch + 1, kind, t, t + (0 if not workers else
                                                                                   int(start_us * US))))
        if workers:
            t += int(start_us * US)
        for i, w in enumerate(waits_us):
            start, end = t, t + int(w * US)
            worker = (producers[i % len(producers)] if producers else i % workers) if workers else -1
            rec.waits.append((1, epoch, i, worker, start, end, "ok"))
            if workers:
                made_end = end - int(ready_us * US)
                make = make_us if make_us is not None else 10_000.0
                rows[worker].append((1, epoch, i, made_end - int(make * US), made_end, 4))
            t = end + int(step_us * US)
        if stop:
            rec.waits.append((1, epoch, -1, -1, t, t + int(stop_us * US), "stop"))
            t += int(stop_us * US)
    rec.ended_ns = t
    for w, batches in rows.items():
        if workers and batches:
            raw = {("ds.py", 5, "__getitem__"): (4 * len(batches), 4 * len(batches), 0.01, 0.05,
                                                  {("fetch.py", 50, "fetch"): (4 * len(batches), 4 * len(batches),
                                                                               0.01, 0.05)}),
                   ("fetch.py", 50, "fetch"): (len(batches), len(batches), 0.001, 0.051, {}),
                   ("~", 0, "<built-in method time.sleep>"): (4 * len(batches), 4 * len(batches), 0.04, 0.04,
                                                               {("ds.py", 5, "__getitem__"): (4 * len(batches),
                                                                                              4 * len(batches), 0.04,
                                                                                              0.04)})}
            rec.workers.append(WorkerRecord(loader=1, iterator=1, worker=w, pid=1000 + w, started_ns=T0, epoch=0,
                                            batches=np.array(batches, dtype=np.int64), stats=raw if stats else None,
                                            why="exit" if stats else "", missing="" if stats else "it was killed"))
    return rec


def profile_of(rec, wall_s=None):
    return PythonProfile(MAIN_RAW, PythonMeta(data_loading=rec, wall_s=wall_s))


def data_bound(profile):
    f = profile.findings
    return f[f["kind"] == "data_bound"].reset_index(drop=True)


def steady(profile):
    """The steady-state finding (the one that is not about the workers' start)."""
    f = data_bound(profile)
    rows = f[~f["message"].str.startswith("Starting")]
    assert len(rows) <= 1
    return None if rows.empty else rows.iloc[0]


# --------------------------------------------------------------------------------- the tables


def test_the_batches_table_joins_each_wait_to_the_worker_that_made_it():
    rec = loop_record([300.0, 100.0, 200.0, 50.0], step_us=1000.0, start_us=500.0, make_us=7000.0, ready_us=20.0)
    p = profile_of(rec)
    b = p.data_loading()
    assert b["batch"].tolist() == [0, 1, 2, 3] and b["worker"].tolist() == [0, 1, 0, 1]
    assert b["pid"].tolist() == [1000, 1001, 1000, 1001] and (b["samples"] == 4).all() and (b["status"] == "ok").all()
    # on the run's axis: the iterator took 500 µs, batch 0 waited 300 µs, then 1000 µs of work ...
    assert b["wait_start_us"].tolist() == pytest.approx([500.0, 1800.0, 2900.0, 4100.0])
    assert b["wait_us"].tolist() == pytest.approx([300.0, 100.0, 200.0, 50.0])
    assert b["end_us"].tolist() == pytest.approx([780.0, 1880.0, 3080.0, 4130.0])  # 20 µs before each wait ends
    assert b["make_us"].tolist() == pytest.approx([7000.0] * 4)
    assert (b["start_us"] == b["end_us"] - 7000.0).all()
    w = p._data_loading.workers
    assert w["worker"].tolist() == [0, 1] and w["batches"].tolist() == [2, 2] and w["samples"].tolist() == [8, 8]
    ws = p.worker_stats()
    assert set(ws["worker"]) == {0, 1}
    getitem = ws[ws["function"] == "__getitem__"]
    assert getitem["ncalls"].tolist() == [8, 8]


def test_a_batch_the_loop_waited_for_that_never_came_is_lost():
    rec = loop_record([300.0, 100.0], start_us=500.0)
    rec.waits.insert(2, (1, 0, 2, 0, T0 + 5_000_000, T0 + 6_000_000, "RuntimeError: DataLoader timed out"))
    b = profile_of(rec).data_loading()
    lost = b[b["batch"] == 2].iloc[0]
    assert lost["status"] == "lost" and lost["worker"] == 0 and math.isnan(lost["start_us"])
    assert lost["wait_us"] == pytest.approx(1000.0)


def test_without_workers_the_main_process_made_every_batch():
    rec = loop_record([2000.0, 2000.0, 2000.0, 2000.0], workers=0, step_us=500.0)
    b = profile_of(rec).data_loading()
    assert (b["worker"] == -1).all() and (b["make_us"] == b["wait_us"]).all() and (b["samples"] == 4).all()
    assert len(profile_of(rec).worker_stats()) == 0
    # no queue between a worker and the loop: no wait after a batch was made
    [s] = profile_of(rec)._data_loading.loaders
    assert (s.ready_us, s.ready_wait_us) == (0.0, 0.0)


def test_worker_stats_of_one_loader_and_an_unknown_one():
    p = profile_of(loop_record([300.0, 100.0, 200.0]))
    assert p.worker_stats("train_loader").equals(p.worker_stats())
    from nbprof.errors import OptionError

    with pytest.raises(OptionError, match="no DataLoader 'val' in this profile; its loaders: train_loader"):
        p.worker_stats("val")


def test_the_tables_dtypes_do_not_depend_on_rows():
    with_rows = profile_of(loop_record([300.0, 100.0, 200.0]))
    none = PythonProfile(MAIN_RAW, PythonMeta())
    for table in ("data_loading", "worker_stats"):
        a, b = getattr(with_rows, table)(), getattr(none, table)()
        assert len(a) and not len(b)
        assert list(a.columns) == list(b.columns)
        assert {c: str(a[c].dtype) for c in a.columns} == {c: str(b[c].dtype) for c in b.columns}, table
    stats = with_rows.stats
    assert list(with_rows.worker_stats().columns) == ["worker", *stats.columns]


# ------------------------------------------------------------------------- data_bound: shares


@pytest.mark.parametrize("wait_us,stop_us,expected", [
    # after the first batch: 5 waits of w, 5 steps of 1000 µs, the last step (1000) and the
    # StopIteration call: the steady share is 5w / (5w + 6000 + stop)
    (199.9, 3000.0, None),  # 999.5 / 9999.5: just below 10 %
    (200.0, 3000.0, "medium"),  # 1000 / 10000: 10 %
    (599.9, 1000.0, "medium"),  # 2999.5 / 9999.5: just below 30 %
    (600.0, 1000.0, "high"),  # 3000 / 10000: 30 %
])
def test_data_bound_at_its_shares(wait_us, stop_us, expected):
    rec = loop_record([400.0] + [wait_us] * 5, step_us=1000.0, make_us=3000.0, start_us=100.0, stop_us=stop_us)
    f = steady(profile_of(rec))
    if expected is None:
        assert f is None
        return
    assert f["severity"] == expected
    assert f["evidence"]["steady_share"] == pytest.approx(5 * wait_us / (5 * wait_us + 6000.0 + stop_us), rel=1e-12)


@pytest.mark.parametrize("batches,fires", [(3, False), (4, True)])
def test_data_bound_needs_three_steady_batches(batches, fires):
    """4 batches in one epoch: 3 after the first (MIN_STEADY_BATCHES = 3)."""
    rec = loop_record([400.0] + [5000.0] * (batches - 1), make_us=3000.0, start_us=100.0)
    assert (steady(profile_of(rec)) is not None) == fires


# --------------------------------------------------------------------- data_bound: the answer


def test_how_many_workers_keep_up():
    """A batch takes 9.5 ms in a worker, the loop works 2 ms per step: ceil(9.5 / 2) = 5 workers;
    it has 2 (cProfile's cost not measured here: call_cost_ns = 0)."""
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=9500.0, start_us=100.0, ready_us=0.0)
    f = steady(profile_of(rec))
    e = f["evidence"]
    assert e["make_us"] == pytest.approx(9500.0) and e["step_us"] == pytest.approx(2000.0)
    assert e["workers_needed"] == 5 and e["num_workers"] == 2
    assert "A worker takes 9.50 ms per batch; the loop asks for one every 2.00 ms of its own work, so about " \
           "5 workers would keep up; it has 2." in f["message"]
    assert "__getitem__ (ds.py:5)" in f["message"] and "time.sleep" in f["message"]


@pytest.mark.parametrize("ready_us,cannot_help", [(1499.0, False), (1500.0, True)])
def test_batches_ready_before_the_wait_ended_mean_more_workers_cannot_help(ready_us, cannot_help):
    """Each wait is 3000 µs; the batch was made ``ready_us`` before the wait ended: from half of
    the waits after the workers' first round (batches 2 to 5: READY_MIN_SHARE = 0.5) the message
    says the transfer is the bottleneck."""
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=9500.0, start_us=100.0, ready_us=ready_us)
    f = steady(profile_of(rec))
    assert f["evidence"]["ready_us"] == pytest.approx(4 * ready_us)
    assert f["evidence"]["ready_wait_us"] == pytest.approx(4 * 3000.0)
    assert ("more workers cannot help" in f["message"]) == cannot_help
    if cannot_help:
        assert "50% of that wait came after the batches were made" in f["message"]


def test_pin_memory_is_named_when_the_transfer_is_slow():
    rec = loop_record([400.0] + [3000.0] * 5, make_us=9500.0, ready_us=3000.0, pin_memory=True)
    assert "and the pin_memory thread" in steady(profile_of(rec))["message"]


def test_one_worker_of_an_iterable_dataset_making_every_batch():
    rec = loop_record([400.0] + [3000.0] * 5, make_us=9500.0, iterable=True, producers=[1])
    f = steady(profile_of(rec))
    assert f["evidence"]["producing_workers"] == 1
    assert "One worker of 2 made the batches the loop used" in f["message"]
    assert "get_worker_info()" in f["message"]


def test_without_workers_the_answer_is_workers():
    rec = loop_record([2000.0] * 6, workers=0, step_us=500.0)
    f = steady(profile_of(rec))
    e = f["evidence"]
    assert e["make_us"] == pytest.approx(2000.0) and e["workers_needed"] == 4  # ceil(2000 / 500)
    assert "The batches are made in the main process (num_workers=0): 2.00 ms each" in f["message"]
    assert "DataLoader(num_workers=4)" in f["message"]


def test_the_profilers_cost_is_taken_out_where_measured():
    """cProfile costs 100 ns a call here; the workers make 12 calls a batch (4 __getitem__, 4
    sleeps, 1 fetch per batch, counted from their stats: 9 a batch... worked out below), and the
    main profile made 1 call over 1 s of wall time: 100 ns / 1 s of overhead in the main process."""
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=9500.0, start_us=100.0)
    rec.call_cost_ns = 100.0
    f = steady(profile_of(rec, wall_s=1.0))
    e = f["evidence"]
    calls_per_batch = (4 + 4 + 1)  # __getitem__, time.sleep and fetch, each worker's stats over its batches
    assert e["calls_per_batch"] == pytest.approx(calls_per_batch)
    assert e["make_free_us"] == pytest.approx(9500.0 - calls_per_batch * 0.1)
    assert e["step_free_us"] == pytest.approx(2000.0 * (1 - 1 * 100.0 / 1e9)) and e["main_overhead_measured"]
    assert "Profiler bias: cProfile in the workers (9 Python calls a batch)" in f["message"]
    assert "cProfile in the main process made each step" in f["message"]


# -------------------------------------------------------------------------- the workers' start


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_the_workers_start_is_its_own_low_finding(method):
    """The loop after the start: 6 x (100 + 1000) µs + 5; the start-up: the iterator plus the first
    wait. STARTUP_MIN_SHARE = 0.20 of the loop: solved for the iterator's time just below / at."""
    after = 5 * (100.0 + 1000.0) + 1000.0 + 5.0
    first = 400.0
    at = 0.20 * after / 0.80 - first  # (x + first) / (x + first + after) == 0.20
    for x, fires in ((at - 0.01, False), (at, True)):
        rec = loop_record([first] + [100.0] * 5, step_us=1000.0, start_us=x, make_us=900.0, method=method)
        f = data_bound(profile_of(rec))
        start = f[f["message"].str.startswith("Starting")]
        assert (len(start) == 1) == fires, x
        if fires:
            assert start.iloc[0]["severity"] == "low"
            assert start.iloc[0]["evidence"]["startup_share"] == pytest.approx(0.20, rel=1e-6)


def test_a_forked_workers_start_in_one_epoch_is_no_finding():
    """Nothing to do about it: one epoch, fork (the start-up is still apart from the steady share)."""
    rec = loop_record([400.0] + [100.0] * 5, step_us=1000.0, start_us=20_000.0, make_us=900.0)
    assert data_bound(profile_of(rec)).empty


def test_every_epoch_starting_its_workers_again_suggests_persistent_workers():
    rec = loop_record([4000.0, 100.0, 100.0, 100.0], start_us=20_000.0, epochs=2, method="spawn")
    start = data_bound(profile_of(rec))
    msg = start[start["message"].str.startswith("Starting")].iloc[0]["message"]
    assert "(spawn: each worker starts a new Python" in msg
    assert "Every epoch starts them again: DataLoader(persistent_workers=True) starts them once." in msg
