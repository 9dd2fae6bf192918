"""The contracts of the live profiler sessions (cProfile's and torch.profiler's, started and stopped
around a cell, another profiler taking over) and of the kernel, launch-queue, range and interval
analyses, pinned where issue 26's mutation samples found them loose: a fresh session's state, what
each option passes to torch.profiler, the takeover's fields, empty inputs (columns and dtypes
written out), both sides of each boundary, tie order. Every expected value is worked out by hand
in the test (small integer nanoseconds, hand-made traces) or read from torch's own objects, never
with the code under test or its helpers.

These tests call the sessions' methods directly and read what they hold (no cProfile frame, no
"where was the profiler started" is read): mutmut's trampolines, frames of their own, change
nothing here, so mutmut's selection keeps them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from .synthetic import Trace

I64 = np.int64


def a64(*values):
    return np.array(values, dtype=I64)


# ------------------------------------------------------------------------------------ _intervals


def test_gaps_of_exactly_two_segments():
    from nbprof.analysis._intervals import gaps

    # one group: the one gap between them; two groups: no gap (a group's first segment has none)
    out = gaps(a64(3, 3), a64(10, 25), a64(20, 40))
    assert out.values.tolist() == [[3, 20, 25]]
    assert all(out[c].dtype == I64 for c in ("group", "start", "end"))
    assert len(gaps(a64(0, 1), a64(10, 25), a64(20, 40))) == 0


# -------------------------------------------------------------------------------------- launches

OBJ, F64 = "object", "float64"
QUEUE_DTYPES = {"rank": OBJ, "device": OBJ, "stream": "int64", "launches": "int64", "window_us": F64,
                "mean_queue_length": F64, "max_queue_length": "int64"}


def _dtypes(frame):
    """Each column's dtype; a text column as "object" (pandas 3 stores one of Python strings as "str")."""
    return {c: OBJ if str(t) == "str" else str(t) for c, t in frame.dtypes.items()}


def _ranked(tmp_path, traces):
    from nbprof.collect.chrome_trace import read_trace_file
    from nbprof.events import concat_traces
    from nbprof.model import TorchProfile

    read = [read_trace_file(t.write(tmp_path / f"rank{i}.json")) for i, t in enumerate(traces)]
    return TorchProfile.from_trace(concat_traces(read, labels=list(range(len(traces))), label_column="rank"))


def test_queue_length_per_stream_finishes_first_at_one_instant(tmp_path):
    t = Trace()
    ext = t.op("aten::mm", 0, 200)
    # stream 7: k1 queued at 10, runs 30-70; k2 queued at 70 (the instant k1 ends), runs 80-90
    t.launch("k1", ext, cpu_ts=10, cpu_dur=5, gpu_ts=30, gpu_dur=40, stream=7)
    t.launch("k2", ext, cpu_ts=70, cpu_dur=5, gpu_ts=80, gpu_dur=10, stream=7)
    # stream 3 of device 1: three queued at 100, 101, 102; run back to back 110-140
    for i in range(3):
        t.launch(f"c{i}", ext, cpu_ts=100 + i, cpu_dur=1, gpu_ts=110 + 10 * i, gpu_dur=10, stream=3, device=1)
    q = t.load(tmp_path).queue_length()
    assert list(q.columns) == list(QUEUE_DTYPES) and _dtypes(q) == QUEUE_DTYPES
    # stream 7: 1 over [10, 70), 0 for no time at 70, 1 over [70, 90): 80 µs of one item over 80 µs
    # device 1: 1 [100,101), 2 [101,102), 3 [102,120), 2 [120,130), 1 [130,140): 1+2+54+20+10 = 87 over 40
    assert q.values.tolist() == [[None, "cuda:0", 7, 2, 80.0, 1.0, 1], [None, "cuda:1", 3, 3, 40.0, 87 / 40, 3]]


def test_queue_length_of_no_launches_is_an_empty_table_of_the_same_dtypes(tmp_path):
    t = Trace()
    ext = t.op("aten::mm", 0, 100)
    t.runtime("cudaLaunchKernel", 10, 5, ext=ext, corr=9)  # a runtime call whose kernel was not recorded
    q = t.load(tmp_path).queue_length()
    assert len(q) == 0 and list(q.columns) == list(QUEUE_DTYPES) and _dtypes(q) == QUEUE_DTYPES


def test_queue_length_of_merged_ranks_is_per_rank_device_and_stream(tmp_path):
    traces = []
    for rank, (launch, start, dur) in enumerate(((0, 5, 10), (2, 2, 2))):
        t = Trace(rank=rank)
        ext = t.op("aten::mm", 0, 50)
        t.launch("k", ext, cpu_ts=launch, cpu_dur=1, gpu_ts=start, gpu_dur=dur, stream=7)
        t.launch("k", ext, cpu_ts=launch, cpu_dur=1, gpu_ts=start + dur, gpu_dur=dur, stream=9)
        traces.append(t)
    q = _ranked(tmp_path, traces).queue_length()
    assert _dtypes(q) == QUEUE_DTYPES
    # rank 0, stream 7: 1 item over [0, 15); stream 9: over [0, 25); rank 1: [2, 4) and [2, 6)
    assert q.values.tolist() == [[0, "cuda:0", 7, 1, 15.0, 1.0, 1], [0, "cuda:0", 9, 1, 25.0, 1.0, 1],
                                 [1, "cuda:0", 7, 1, 2.0, 1.0, 1], [1, "cuda:0", 9, 1, 4.0, 1.0, 1]]


def test_stream_groups_code_each_rank_device_and_stream_in_their_sorted_order():
    from nbprof.analysis.launches import stream_groups

    rank, device, stream = a64(1, 0, 0, 1, 0, 0), a64(0, 1, 0, 0, 1, 0), a64(-3, 20, 7, -3, 7, 20)
    group, (r, d, s) = stream_groups(rank, device, stream)
    # sorted: (0,0,7) (0,0,20) (0,1,7) (0,1,20) (1,0,-3)
    assert (r.tolist(), d.tolist(), s.tolist()) == ([0, 0, 0, 0, 1], [0, 0, 1, 1, 0], [7, 20, 7, 20, -3])
    assert group.tolist() == [4, 3, 0, 4, 2, 1] and group.dtype == I64
    assert r.dtype == d.dtype == s.dtype == I64
    group, (r, d, s) = stream_groups(a64(), a64(), a64())
    assert [len(x) for x in (group, r, d, s)] == [0, 0, 0, 0]
    assert all(x.dtype == I64 for x in (group, r, d, s))
    # one stream
    group, (r, d, s) = stream_groups(a64(0, 0), a64(2, 2), a64(5, 5))
    assert (group.tolist(), r.tolist(), d.tolist(), s.tolist()) == ([0, 0], [0], [2], [5])


def test_launch_table_pairs_each_kernel_with_its_runtime_call_by_correlation(tmp_path):
    t = Trace()
    ext = t.op("aten::mm", 0, 200)
    t.launch("k1", ext, cpu_ts=10, cpu_dur=5, gpu_ts=30, gpu_dur=40, stream=7)
    t.launch("m1", ext, cpu_ts=20, cpu_dur=3, gpu_ts=70.5, gpu_dur=2, runtime="cudaMemcpyAsync",
             cat="gpu_memcpy", nbytes=64, stream=9)
    t.runtime("cudaDeviceSynchronize", 80, 4, ext=ext, corr=99)  # no device work: not a launch
    # a kernel whose runtime call was not recorded: no launch row
    t.events.append({"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 90, "dur": 1,
                     "args": {"correlation": 555, "device": 0, "stream": 7}})
    launches = t.load(tmp_path).launches()
    rows = launches.drop(columns=["correlation"]).values.tolist()
    assert rows == [[None, "cuda:0", 7, "k1", "kernel", "cudaLaunchKernel", 10.0, 5.0, 40.0, 20.0],
                    [None, "cuda:0", 9, "m1", "memcpy", "cudaMemcpyAsync", 20.0, 3.0, 2.0, 50.5]]
    assert launches["correlation"].tolist() == [1, 2]
    assert _dtypes(launches)["launch_delay_us"] == F64 and _dtypes(launches)["correlation"] == "int64"


def test_queue_length_at_nanosecond_resolution_and_streams_spanning_each_other(tmp_path):
    import warnings

    t = Trace()
    ext = t.op("aten::mm", 0, 200)
    # stream 1 holds the whole span: queued at 0, runs 50-100; stream 2 queued at 0, done at 10
    t.launch("long", ext, cpu_ts=0, cpu_dur=1, gpu_ts=50, gpu_dur=50, stream=1)
    t.launch("short", ext, cpu_ts=0, cpu_dur=1, gpu_ts=5, gpu_dur=5, stream=2)
    # stream 3: a kernel done 1 ns after the next one is queued (2 queued for 1 ns), then a window of 1 ns
    t.launch("a", ext, cpu_ts=20, cpu_dur=1, gpu_ts=20, gpu_dur=1.001, stream=3)
    t.launch("b", ext, cpu_ts=21, cpu_dur=1, gpu_ts=21.001, gpu_dur=1, stream=3)
    # stream 4: one launch whose kernel ends 1 ns after its call starts
    t.launch("c", ext, cpu_ts=30, cpu_dur=1, gpu_ts=30, gpu_dur=0.001, stream=4)
    # stream 5: a launch whose kernel takes no time at the call's instant: a window of no time
    t.launch("d", ext, cpu_ts=40, cpu_dur=1, gpu_ts=40, gpu_dur=0, stream=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0 / 0 of the empty window is no warning to the user
        q = t.load(tmp_path).queue_length()
    rows = q.drop(columns=["mean_queue_length"]).values.tolist()
    assert rows == [[None, "cuda:0", 1, 1, 100.0, 1], [None, "cuda:0", 2, 1, 10.0, 1],
                    [None, "cuda:0", 3, 2, 2.001, 2], [None, "cuda:0", 4, 1, 0.001, 1],
                    [None, "cuda:0", 5, 1, 0.0, 0]]  # its end counts first: never queued for any time
    # stream 3: 1 over [20, 21), 2 for 1 ns, 1 over [21.001, 22.001): 2002 ns of items over 2001 ns
    mean = q["mean_queue_length"].tolist()
    assert mean[:4] == [1.0, 1.0, 2002 / 2001, 1.0] and np.isnan(mean[4])


def test_kernels_without_any_runtime_call_recorded_have_no_launches(tmp_path):
    t = Trace()
    t.op("aten::mm", 0, 100)
    t.events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
                     "args": {"correlation": 3, "device": 0, "stream": 7}})
    p = t.load(tmp_path)
    assert len(p.launches()) == 0 and list(p.launches().columns)[-1] == "launch_delay_us"
    assert len(p.queue_length()) == 0


def test_a_kernel_whose_correlation_two_runtime_calls_share_goes_with_the_first(tmp_path):
    # the runtime call and the driver call inside it can carry one correlation id: the kernel's
    # launch is the runtime call (the first of them); ids that fall as time goes (numpy's default
    # sort is not stable on them)
    t = Trace()
    ext = t.op("aten::mm", 0, 10_000)
    for i in range(20):
        corr = 20 - i
        t.runtime("cudaLaunchKernel", 100 * i + 10, 10, ext=ext, corr=corr)
        t.events.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1000, "tid": 1000,
                         "ts": 100 * i + 12, "dur": 5, "args": {"External id": ext, "correlation": corr}})
        t.events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 100 * i + 50,
                         "dur": 5, "args": {"External id": ext, "correlation": corr, "device": 0, "stream": 7}})
    launches = t.load(tmp_path).launches()
    assert launches["name"].tolist() == [f"k{i}" for i in range(20)]
    assert launches["launch"].tolist() == ["cudaLaunchKernel"] * 20
    assert launches["launch_start_us"].tolist() == [100.0 * i + 10 for i in range(20)]
    assert launches["cpu_dur_us"].tolist() == [10.0] * 20 and launches["launch_delay_us"].tolist() == [40.0] * 20


# ------------------------------------------------------------------------------ torch's session


torch = pytest.importorskip("torch")


def _session(**options):
    from nbprof.collect.torch_live import TorchSession
    from nbprof.settings import TorchOptions

    return TorchSession(TorchOptions(**options))


def _run(session, work=lambda: torch.ones(4) + 1):
    session.begin()
    try:
        work()
    finally:
        session.end()
    return session


@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.parametrize("options, activities", [
    ({}, {"CPU"}),
    ({"cuda": True}, {"CPU", "CUDA"}),  # asked for even where torch finds no GPU (it warns, records CPU)
])
def test_the_profilers_activities_are_the_cpu_and_cuda_only_when_asked(options, activities):
    s = _session(**options)
    s.begin()
    try:
        assert {a.name for a in s.profiler.activities} == activities
    finally:
        s.end()


@pytest.mark.parametrize("options, expected", [
    ({}, dict(record_shapes=False, profile_memory=False, with_stack=False, with_flops=False, with_modules=False)),
    ({"shapes": True}, dict(record_shapes=True, profile_memory=False, with_stack=False, with_flops=False,
                            with_modules=False)),
    ({"memory": True}, dict(record_shapes=False, profile_memory=True, with_stack=False, with_flops=False,
                            with_modules=False)),
    ({"stack": True}, dict(record_shapes=False, profile_memory=False, with_stack=True, with_flops=False,
                           with_modules=False)),
    ({"flops": True}, dict(record_shapes=False, profile_memory=False, with_stack=False, with_flops=True,
                           with_modules=False)),
    # --modules: the Python tracer (torch 2.13 records eager modules only with it) and with_modules
    ({"modules": True}, dict(record_shapes=False, profile_memory=False, with_stack=True, with_flops=False,
                             with_modules=True)),
])
def test_each_option_is_passed_to_torch_profiler_as_its_own_flag(options, expected):
    s = _session(**options)
    s.begin()
    try:
        p = s.profiler
        assert {k: getattr(p, k) for k in expected} == expected
        assert getattr(p, "schedule", None) is None or p.schedule(0) is not None
    finally:
        s.end()


@pytest.mark.parametrize("version, with_modules", [
    ("2.13.0+cpu", True), ("2.14.1", True),
    ("2.15.0", False), ("2.16.0.dev20270101", False), ("3.0.0", False),  # deprecated there: not passed
    ("2.x-custom", True),  # a version nbprof cannot read: passed, as before the deprecation
])
def test_with_modules_is_passed_only_before_torch_2_15(monkeypatch, version, with_modules):
    # the release is read from torch.__version__ at begin(); this torch takes with_modules either way,
    # so the profiler object shows whether it was passed
    monkeypatch.setattr(torch, "__version__", version)
    s = _session(modules=True)
    s.begin()
    try:
        assert s.profiler.with_modules is with_modules
        assert s.profiler.with_stack is True
    finally:
        s.end()


def test_a_takeover_by_code_that_holds_no_profiler_object_has_no_reference_to_one():
    # another profiler starting is seen through torch's _prepare_profiler; called from here, no
    # frame above holds a torch profiler object: the takeover names "a torch profiler", refers to none
    s = _session()
    s.begin()
    try:
        torch.ones(3) * 2
        s._yield_to_other("_prepare_profiler")
        tk = s.takeover
        assert tk is not None and tk.by == "a torch profiler" and tk.other is None
        assert tk.read_error is None and tk.at_s is not None and tk.at_s >= 0
        # nbprof's session is over and read; its profiler is no longer enabled in torch
        assert not torch.autograd._profiler_enabled()
        names = set(s.result().events["name"])
        assert "aten::mul" in names
        # the calling code is named (this test's frame), none of torch's or nbprof's own frames
        import os

        import nbprof

        me = "test_a_takeover_by_code_that_holds_no_profiler_object_has_no_reference_to_one"
        assert me in [f for _, _, f in tk.sites]
        own = (os.path.dirname(torch.__file__), os.path.dirname(nbprof.__file__))
        assert not [s for s in tk.sites if s[0].startswith(own)]
        # a second start after it: nothing more to stop, the takeover stays the first one's
        s._yield_to_other("_prepare_profiler")
        assert s.takeover is tk
    finally:
        s.end()
    assert s.takeover is tk and tk.still_running is False


def _x():
    return torch.randn(8, 8)


def _inner_profile():
    with torch.profiler.profile() as p:
        _x() + 1
    return p


def _inner_autograd_profile():
    with torch.autograd.profiler.profile() as p:
        _x() + 1
    return p


def _inner_legacy_profile():
    with torch.autograd.profiler_legacy.profile():
        _x() + 1
    return None


@pytest.mark.parametrize("start, by, readable", [
    (_inner_profile, "torch.profiler.profile", True),
    (_inner_autograd_profile, "torch.autograd.profiler.profile", True),
    (_inner_legacy_profile, "torch.autograd.profiler_legacy.profile", False),  # nbprof.from_profiler cannot read it
])
def test_another_torch_profiler_started_in_the_cell_takes_over_and_is_named(start, by, readable):
    s = _session()
    s.begin()
    try:
        x = _x()
        x @ x
        inner = start()
    finally:
        s.end()
    tk = s.takeover
    assert tk.by == by and tk.read_error is None and tk.still_running is False
    if readable:
        assert tk.other is not None and tk.other() is inner
    else:
        assert tk.other is None
    # what nbprof recorded before the other one started: the matmul, not the other's add
    names = set(s.result().events["name"])
    assert "aten::mm" in names and "aten::add" not in names
    assert not torch.autograd._profiler_enabled()


def test_emit_itt_started_in_the_cell_keeps_torchs_a_profiler_runs_flag():
    # emit_itt sets torch's Python-side flag, then enables through _enable_profiler: nbprof's stop
    # (in between) cleared the flag, which the takeover sets again for the one that starts
    flags = torch.autograd.profiler
    s = _session()
    s.begin()
    try:
        with torch.autograd.profiler.emit_itt():
            inside = flags._is_profiler_enabled
            _x() + 1
        after = flags._is_profiler_enabled
    finally:
        s.end()
    assert (inside, after) == (True, False)
    assert s.takeover.by == "torch.autograd.profiler.emit_itt" and s.takeover.other is None


def test_a_profiler_the_cell_leaves_running_is_said_to_be_still_running():
    s = _session()
    s.begin()
    try:
        inner = torch.profiler.profile()
        inner.start()
        _x() + 1
    finally:
        s.end()
        try:
            assert s.takeover.still_running is True and s.takeover.other() is inner
        finally:
            inner.stop()
    assert not torch.autograd._profiler_enabled()


def test_the_takeovers_time_is_seconds_since_the_session_began():
    import time

    s = _session()
    t0 = time.perf_counter()
    s.begin()
    try:
        time.sleep(0.05)
        s._yield_to_other("_prepare_profiler")
        t1 = time.perf_counter()
    finally:
        s.end()
    assert 0.05 <= s.takeover.at_s <= t1 - t0


class _FailingProgress:
    """The report's progress bar, failing when the read tells it the trace's size."""

    MESSAGE = "cannot show progress " + "x" * 250 + "\nsecond line"

    def start_if_big(self, size):
        raise RuntimeError(self.MESSAGE)

    def stage(self, text):
        pass


def test_a_takeover_whose_read_fails_says_why_in_one_line_of_200_characters():
    from nbprof.collect.torch_live import TorchSession
    from nbprof.settings import TorchOptions

    s = TorchSession(TorchOptions(), progress=_FailingProgress())
    s.begin()
    try:
        _x() + 1
        s._yield_to_other("_prepare_profiler")  # the other profiler's start must not see the error
    finally:
        s.end()
    expected = ("RuntimeError: cannot show progress " + "x" * 250)[:200]
    assert s.takeover.read_error == expected and len(expected) == 200
    assert s.takeover.by == "a torch profiler" and s.result() is None
    assert not torch.autograd._profiler_enabled()


class _InterruptedRange:
    """A framework's action range whose end is interrupted (Ctrl-C while nbprof stops its session)."""

    def __exit__(self, *exc):
        raise KeyboardInterrupt


def test_a_takeover_interrupted_while_nbprof_stops_still_says_a_torch_profiler_started():
    s = _session()
    s.begin()
    try:
        s.actions._open.append(("fit", _InterruptedRange()))
        with pytest.raises(KeyboardInterrupt):
            s._yield_to_other("_prepare_profiler")
        assert s.takeover.by == "a torch profiler" and s.takeover.at_s >= 0
    finally:
        s.end()
    assert not torch.autograd._profiler_enabled()


def test_a_fresh_torch_session_holds_nothing_and_its_calls_before_begin_do_nothing():
    s = _session(cuda=True)
    assert s.profiler is None and s.takeover is None and s.result() is None
    assert s.cycles == [] and len(s.actions) == 0 and s.native_warnings() == []
    s.step()
    s.toggle_cuda(False)
    s.end_action("fit")
    s.end()  # before begin: nothing to stop
    assert s.profiler is None and s.result() is None and not torch.autograd._profiler_enabled()


def test_a_torch_session_refuses_to_start_under_another_running_profiler():
    from nbprof.errors import ProfilerBusyError

    with torch.profiler.profile() as outer:
        s = _session()
        with pytest.raises(ProfilerBusyError) as e:
            s.begin()
        assert str(e.value) == ("a torch profiler is already running in this process; stop it (or let its "
                                "`with` block end) before profiling this cell")
        assert s.profiler is None and torch.autograd._profiler_enabled()  # the other one untouched
        torch.ones(2) + 1
    assert "aten::add" in {e.key for e in outer.key_averages()}


def test_the_profilers_shadow_hasattr_lives_only_while_the_session_runs():
    import torch.profiler.profiler as module

    s = _session()
    s.begin()
    try:
        assert "hasattr" in module.__dict__
    finally:
        s.end()
    assert "hasattr" not in module.__dict__


def test_a_schedule_is_passed_to_torch_and_each_cycle_is_read_as_it_ends(monkeypatch):
    import warnings

    # torch warns of a repeating schedule once a process: as if for the first time here
    monkeypatch.setattr(torch.profiler.profiler, "_WARNINGS_SHOWN", set())
    s = _session(schedule=(1, 0, 2, 2))  # wait 1, no warmup, 2 active, twice
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.begin()
        try:
            assert s.profiler.on_trace_ready == s._cycle_ready
            actions = [s.profiler.schedule(i).name for i in range(7)]
            for i in range(7):
                torch.full((i + 1,), 1.0).sum()
                s.step()
        finally:
            s.end()
    # torch's own warnings about warmup 0 and a repeating schedule are nbprof's to tell, not the user's
    assert not [w for w in caught if "warmup" in str(w.message) or "clears events" in str(w.message)]
    assert actions == ["NONE", "RECORD", "RECORD_AND_SAVE", "NONE", "RECORD", "RECORD_AND_SAVE", "NONE"]
    assert len(s.cycles) == 2
    events = s.result().events
    assert sorted(set(events["cycle"])) == [0, 1]
    steps = sorted(n for n in set(events["name"]) if n.startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#4", "ProfilerStep#5"]


def test_steps_after_another_profiler_took_over_do_nothing():
    s = _session(schedule=(0, 1, 1, 0))
    s.begin()
    try:
        s.step()
        s._yield_to_other("_prepare_profiler")
        before = s.profiler.step_num
        s.step()
        s.step()
        assert s.profiler.step_num == before and not torch.autograd._profiler_enabled()
    finally:
        s.end()


def test_a_session_that_code_nbprof_did_not_see_ended_is_reported_as_taken_over_by_no_one_known():
    s = _session()
    s.begin()
    try:
        torch.ones(3) + 1
        torch.autograd._disable_profiler()  # what an unseen profiler's start does to nbprof's session
        torch.ones(3) * 2
    finally:
        s.end()
    assert s.takeover is not None and s.takeover.by == "" and s.takeover.at_s is None
    assert s.result() is None  # torch holds nothing for it: never saved (it would crash the process)
    assert not torch.autograd._profiler_enabled() and torch.autograd.profiler._is_profiler_enabled is False
    # the next session works
    again = _run(_session())
    assert again.takeover is None and "aten::add" in set(again.result().events["name"])


def test_a_scheduled_cycle_that_unseen_code_ended_is_not_read_and_says_so():
    s = _session(schedule=(0, 1, 2, 1))  # warmup at step 0, recording at 1 and 2, saved at the end of 2
    s.begin()
    try:
        for i in range(5):
            torch.ones(3) + i
            if i == 2:
                torch.autograd._disable_profiler()  # the cycle's session ends unseen
            s.step()
    finally:
        s.end()
    assert s.cycles == [] and s.result() is None
    assert s.takeover is not None and (s.takeover.by, s.takeover.at_s) == ("", None)
    assert not torch.autograd._profiler_enabled()


@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.parametrize("cuda", [True, False])
def test_toggling_cuda_collection_asks_torch_only_while_nbprofs_session_records_cuda(cuda):
    # on this CPU machine torch's toggle changes nothing to see: what nbprof asked torch is read
    # from a spy that records each call and then calls torch's own
    s = _session(cuda=cuda)
    calls = []
    s.toggle_cuda(False)  # before begin: no profiler to ask
    s.begin()
    try:
        own = s.profiler.toggle_collection_dynamic

        def spy(enable, activities):
            calls.append((enable, [a.name for a in activities]))
            return own(enable, activities)

        s.profiler.toggle_collection_dynamic = spy
        s.toggle_cuda(False)
        torch.ones(3) + 1
        s.toggle_cuda(True)
        s._yield_to_other("_prepare_profiler")
        s.toggle_cuda(False)  # nbprof's session is over: not its profiler's to toggle any more
    finally:
        s.end()
    s.toggle_cuda(True)
    assert calls == ([(False, ["CUDA"]), (True, ["CUDA"])] if cuda else [])


# ------------------------------------------------------------------------------ cProfile's session


def test_a_fresh_cprofile_session_holds_nothing_and_its_calls_before_begin_do_nothing():
    from nbprof.collect.cprofile import CProfileSession

    s = CProfileSession()
    assert s.profiler is None and s.takeover is None
    assert s.raw == {} and s.by_action == {} and s.action_counts == {} and s.result() == {}
    assert not s.live() and not s.owns(None)
    s.begin_action("fit")
    s.end_action("fit")
    s.end()  # before begin: nothing to stop
    assert s.profiler is None and s.action_counts == {} and s.result() == {}


# ---------------------------------------------------------------------------------------- ranges


def _two_ranks(tmp_path):
    """Label "step" open over [0, 100) on rank 0 and over [200, 300) on rank 1, merged."""
    r0, r1 = Trace(rank=0), Trace(rank=1)
    r0.annotation("step", 0, 100)
    mm = r0.op("aten::mm", 10, 30)
    r0.launch("k1", mm, cpu_ts=20, cpu_dur=5, gpu_ts=30, gpu_dur=10)  # in step, its own thread
    add = r0.op("aten::add", 55, 10, tid=2000)
    r0.launch("k2", add, cpu_ts=60, cpu_dur=2, gpu_ts=70, gpu_dur=5, tid=2000)  # in step: another thread
    sub = r1.op("aten::sub", 40, 20)
    r1.launch("k3", sub, cpu_ts=45, cpu_dur=2, gpu_ts=80, gpu_dur=7)  # rank 1, under no step of its own
    r1.annotation("step", 200, 100)
    relu = r1.op("aten::relu", 210, 50)
    r1.launch("k4", relu, cpu_ts=220, cpu_dur=2, gpu_ts=230, gpu_dur=3)  # in rank 1's step
    # label "opt" over [150, 180) on rank 0 and [400, 450) on rank 1
    r0.annotation("opt", 150, 30)
    div = r0.op("aten::div", 155, 10)
    r0.launch("k5", div, cpu_ts=160, cpu_dur=1, gpu_ts=165, gpu_dur=11)  # in rank 0's opt
    mul = r1.op("aten::mul", 165, 10)
    r1.launch("k6", mul, cpu_ts=170, cpu_dur=1, gpu_ts=175, gpu_dur=13)  # rank 1, under no opt of its own
    r1.annotation("opt", 400, 50)
    return _ranked(tmp_path, [r0, r1])


def test_a_labels_device_time_is_what_its_own_process_launched_while_it_was_open(tmp_path):
    p = _two_ranks(tmp_path)
    r = p.ranges()
    assert r[["label", "path", "depth", "count", "total_us", "device_us", "kernels"]].values.tolist() == [
        ["step", "step", 0, 2, 200.0, 18.0, 3],  # k1 + k2 + k4; k3 ran under no step of its process
        ["opt", "opt", 0, 2, 80.0, 11.0, 1]]  # k5; k6 ran under no opt of its process
    assert r["kernels"].dtype == I64 and r["device_us"].dtype == np.float64
    ops = p.range_ops()
    assert ops[["path", "name", "count"]].values.tolist() == [
        ["step", "aten::relu", 1], ["step", "aten::mm", 1], ["step", "aten::add", 1], ["opt", "aten::div", 1]]  # by self CPU time
