"""What seed 65's sample of mutants (docs/testing.md) showed no test held in ``nbprof.analysis``,
each against an answer of its own: NCCL kernels' args written by hand, DataLoader records written
by hand (two loaders; persistent workers over two epochs), an overview row of a 1 µs step."""

from __future__ import annotations

import pandas as pd
import pytest

from nbprof.collect.data_loading import LoaderInfo

from .synthetic import Trace
from .test_data_loading_findings import T0, loop_record, profile_of


def test_a_call_of_no_elements_and_no_dtype_leaves_the_bytes_unknown(tmp_path):
    """Two all-reduce kernels of process group "0": one of 1000 elements of "Float" (4,000 bytes),
    one whose args say "In msg nelems": 0 and write no "dtype". The size of the second is not
    known (no element size), so the row's bytes are -1 ("a call does not say"), not 4,000 + 0."""
    from nbprof.analysis.collectives import collective_table

    t = Trace()
    calls = ({"Collective name": "allreduce", "In msg nelems": 1000, "dtype": "Float"},
             {"Collective name": "allreduce", "In msg nelems": 0})
    for i, args in enumerate(calls):
        ext = t.op("c10d::allreduce_", 10 * i, 5)
        t.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ext, 10 * i + 1, 2, 100 + 100 * i, 50, stream=20)
        t.events[-1]["args"].update({**args, "Process Group Name": "0", "Process Group Ranks": "[0, 1]"})
    table = collective_table(t.load(tmp_path).events)
    assert table[["name", "process_group", "count", "total_us"]].values.tolist() == [["all_reduce", "0", 2, 100.0]]
    assert table["bytes"].tolist() == [-1]


def test_a_loaders_wait_share_counts_only_its_own_workers_start():
    """"train_loader" (loader 1): its workers start in 500 µs, batch 0 waits 300 µs, 1000 µs of
    work, batch 1 waits 100 µs, 1000 µs of work, StopIteration in 5 µs: a loop of 2,905 µs of which
    500 + 300 + 100 = 900 µs waiting. A second loader, "val_loader" (2 workers), has its workers
    started afterwards (1000 µs, from 3,000 to 4,000 µs) and is never asked for a batch: its start
    is its own wait (1000 of its 1000 µs), no part of train_loader's."""
    rec = loop_record([300.0, 100.0], step_us=1000.0, start_us=500.0)
    rec.loaders.append(LoaderInfo(number=2, name="val_loader", dataset="Images", iterable=False, num_workers=2,
                                  batch_size=4, prefetch_factor=2, persistent_workers=False, pin_memory=False,
                                  start_method="fork"))
    rec.passes.append((2, 0, 2, "start", T0 + 3_000_000, T0 + 4_000_000))
    rec.ended_ns = T0 + 4_000_000
    train, other = profile_of(rec)._data_loading.loaders
    assert (train.loader, other.loader) == ("train_loader", "val_loader")
    assert train.loop_us == pytest.approx(2905.0)
    assert train.wait_share == pytest.approx(900.0 / 2905.0)
    assert other.loop_us == pytest.approx(1000.0) and other.wait_share == pytest.approx(1.0)


def test_persistent_workers_resumed_for_the_next_epoch_are_named_so_on_the_timeline():
    """Two epochs over a loader with persistent workers: epoch 0 starts the workers (500 µs from
    the run's start), epoch 1 resumes them (500 µs from 2,905 µs, where epoch 0's StopIteration
    ended: 500 + 300 + 1000 + 100 + 1000 + 5). The timeline's two "data_start" rectangles read
    "starting the workers" and "resuming the workers", and so do their hovers."""
    from nbprof.analysis.data_loading import loading_rects

    rec = loop_record([300.0, 100.0], step_us=1000.0, start_us=500.0, persistent=True, epochs=2)
    rects = loading_rects(rec, T0)
    starts = rects[rects["family"] == "data_start"]
    assert starts["name"].tolist() == ["starting the workers", "resuming the workers"]
    assert starts["x0_us"].tolist() == pytest.approx([0.0, 2905.0])
    assert starts["x1_us"].tolist() == pytest.approx([500.0, 3405.0])
    hovers = starts["hover"].tolist()
    assert hovers[0].startswith("<b>starting the workers</b><br>train_loader, epoch 0<br>")
    assert hovers[1].startswith("<b>resuming the workers</b><br>train_loader, epoch 1<br>")


def test_a_step_of_one_microsecond_still_gets_its_advice():
    """An overview row of a step 1 µs long, 0.5 µs of it in the DataLoader, on the CPU only: the
    step has a length (only a step of none has no shares), so the loading rule applies: 50 % of
    the step is data loading, above the 5 % threshold."""
    from nbprof.analysis.overview import overview_advice

    row = pd.Series(dict(duration_us=1.0, kernel_us=0.0, memcpy_us=0.0, memset_us=0.0, runtime_us=0.0,
                         dataloader_us=0.5, cpu_exec_us=0.3, other_us=0.2))
    [loading] = overview_advice(row, False)
    assert loading.startswith("50.0% of the step time is data loading")
