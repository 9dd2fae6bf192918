"""What seed 62's sample of mutants (docs/testing.md) showed no test held in ``nbprof.analysis``,
each against an answer of its own: points and loops laid out by hand, a DataLoader record written
by hand, NCCL kernel names spelled out, two ranks' traces written here."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

import nbprof

from .test_data_loading_findings import T0, loop_record, profile_of


def test_points_at_the_same_time_come_in_their_given_order():
    """``points_in_intervals`` on 32 points of one group, at times 5, 3, 5, 3, ... (index 0 at 5),
    and one interval [0, 10) holding them all: the points by time, those of one time in the order
    they were given (the odd indices, then the even ones), as range_ops' "order of first
    appearance" needs."""
    from nbprof.analysis._intervals import points_in_intervals

    t = np.array([5, 3] * 16, dtype=np.int64)
    iv, pt = points_in_intervals(np.zeros(32, np.int64), t, np.zeros(1, np.int64), np.array([0]), np.array([10]))
    assert iv.tolist() == [0] * 32
    assert pt.tolist() == list(range(1, 32, 2)) + list(range(0, 32, 2))


def test_the_kernel_word_of_an_nccl_name_is_dropped_wherever_it_stands():
    """``collective_name`` reads an NCCL name with its "DevKernel" (or "Kernel") word dropped, so
    a collective's name it splits still reads whole: "ncclAllDevKernelGather" is an all_gather
    (not a plain gather), "ncclSendDevKernel_Recv" a send_recv (not a send)."""
    from nbprof.analysis.collectives import collective_name

    assert collective_name("ncclAllDevKernelGather") == "all_gather"
    assert collective_name("ncclSendDevKernel_Recv") == "send_recv"
    assert collective_name("ncclAllKernelReduce") == "all_reduce"


def test_the_main_process_row_of_a_loader_without_workers_names_the_loader():
    """A loop over "train_loader" with num_workers=0 (three batches): the workers table has one
    row, the main process's (worker -1), and it names the loader "train_loader"."""
    rec = loop_record([300.0, 100.0, 200.0], workers=0)
    w = profile_of(rec)._data_loading.workers
    assert w["worker"].tolist() == [-1]
    assert w["loader"].astype(str).tolist() == ["train_loader"]
    assert w["batches"].tolist() == [3]


def test_a_batch_the_loop_never_took_says_so_on_its_timeline_rectangle():
    """Two workers made batches 0 and 1, which the loop waited for; worker 0 also made a batch 2
    the loop never asked for (the loop ended first). On the timeline that batch's rectangle says
    "the loop did not take it", the others how long the loop waited for them."""
    from nbprof.analysis.data_loading import loading_rects

    rec = loop_record([300.0, 100.0])
    w0 = next(w for w in rec.workers if w.worker == 0)
    end = T0 + 50_000_000
    w0.batches = np.vstack([w0.batches, np.array([[1, 0, 2, end - 10_000_000, end, 4]], dtype=np.int64)])
    rects = loading_rects(rec, T0)
    batches = rects[rects["family"] == "batch"].set_index("name")
    assert sorted(batches.index) == ["batch 0", "batch 1", "batch 2"]
    assert batches.loc["batch 2", "hover"].endswith("<br>the loop did not take it")
    assert batches.loc["batch 0", "hover"].endswith("<br>the loop waited 300.0 µs for it")
    assert batches.loc["batch 1", "hover"].endswith("<br>the loop waited 100.0 µs for it")


def test_a_loop_whose_first_iteration_starts_with_the_outer_ones_is_inside_it():
    """Epochs (3 iterations, fewer than LOOP_MIN_ITERATIONS) around batches (4 an epoch) around
    layers, the batches' first iteration starting in the very nanosecond the epoch's does (a
    coarse clock): the batches are inside the epochs all the same, so the steps are the batches
    (line 5), not the layers inside them (line 9)."""
    from nbprof.analysis.growth import LOOP_CLOCK_NS, step_windows

    from .test_loops import CELL, _events, _loop

    epochs = _loop(3, [0, 1000, 2000], [1000, 2000, 3000])
    batch_starts = [e + 200 * b for e in (0, 1000, 2000) for b in range(4)]
    batches = _loop(5, batch_starts, [s + 200 for s in batch_starts])
    layer_starts = [s + 20 + 30 * i for s in batch_starts for i in range(5)]
    layers = _loop(9, layer_starts, [s + 30 for s in layer_starts])
    meta = SimpleNamespace(line_data={"loops": [epochs, batches, layers]}, base_time_ns=0, origin_ns=0)
    steps = step_windows(_events(), meta, {CELL: "In [3]"})
    assert steps.source == "the loop at In [3] line 5"
    assert steps.start_ns.tolist() == [s + LOOP_CLOCK_NS for s in batch_starts]


def test_each_ranks_step_runs_to_the_end_of_the_kernel_launched_at_its_last_instant(tmp_path):
    """Two ranks, the same trace each: ProfilerStep#1 from 100 to 300 µs, a cudaLaunchKernel of
    no duration at 300 µs (the step's last instant) whose kernel runs from 300 to 300.001 µs.
    In the profile of both ranks merged, each rank's step runs to its kernel's end: 200.001 µs,
    of which 0.001 µs kernel (the plugin's rule: a step ends with the device work it launched)."""
    from .test_tb_plugin import kernel, op, runtime

    events = [op("ProfilerStep#1", 100, 200, 1), runtime("cudaLaunchKernel", 300, 0, 77, 1),
              kernel("void gemm_kernel", 300, 0.001, 77, 1)]
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in range(2):
        doc = {"traceEvents": events, "distributedInfo": {"rank": r, "world_size": 2}}
        (folder / f"host_{r}.pt.trace.json").write_text(json.dumps(doc))
    p = nbprof.load_trace(folder, workers=0, progress=False)
    o = p._merged.overview()
    steps = o[o["step"] != "all"]
    assert sorted(steps["rank"].tolist()) == [0, 1]
    assert [round(d * 1000) for d in steps["duration_us"]] == [200_001, 200_001]
    assert [round(k * 1000) for k in steps["kernel_us"]] == [1, 1]


def test_a_profile_longer_than_a_float_holds_in_nanoseconds_keeps_its_parts_exact():
    """No steps: the whole profile is one span, from the first operator (1 ns) to the end of the
    last (2**44 µs + 2 ns), some 204 days: more nanoseconds than a float64 holds exactly. The
    parts are integer ns all the same (the module doc): 1 + 2 = 3 ns of operators, and the rest,
    (2**44 µs + 2 ns - 1 ns) - 3 ns, is other."""
    from nbprof.events import make_events_frame
    from nbprof.model import TorchProfile

    ev = make_events_frame(name=np.array(["aten::a", "aten::b"], dtype=object),
                           kind=np.array(["op", "op"], dtype=object), start_us=np.array([0.001, 2.0**44]),
                           dur_us=np.array([0.001, 0.002]), thread=np.array([1, 1]))
    [row] = TorchProfile(ev).overview().to_dict("records")
    span_ns = 2**44 * 1000 + 2 - 1
    assert row["step"] == "all" and row["duration_us"] == span_ns / 1000
    assert row["cpu_exec_us"] == 3 / 1000
    assert row["other_us"] == (span_ns - 3) / 1000
