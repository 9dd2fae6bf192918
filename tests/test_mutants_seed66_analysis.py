"""What seed 66's sample of mutants (docs/testing.md) showed no test held in ``nbprof.analysis``,
each against an answer of its own: DataLoader records written by hand
(tests/test_data_loading_findings.py's ``loop_record``), the waits and batches counted here."""

from __future__ import annotations

import numpy as np

from .test_data_loading_findings import T0, loop_record, profile_of, steady


def test_the_data_lanes_rectangles_sit_on_integer_level_zero():
    """Three batches of a loop with two workers, drawn alone (the Data loading tab's timeline):
    the main process's lane (the workers' start, its three waits) and the three batches the
    workers made, seven rectangles, each on level 0 of its one-level lane: an integer, as the rows
    table's levels (int64), not 0.0."""
    from nbprof.views.tabs.data_loading import loading_timeline

    data = loading_timeline(loop_record([300.0, 100.0, 200.0]), T0)
    r = data.rects
    assert sorted(r["family"].value_counts().items()) == [("batch", 3), ("data_start", 1), ("data_wait", 3)]
    assert data.rows["level"].dtype == np.int64 and data.rows["level"].tolist() == [0, 0, 0]
    assert r["level"].dtype == np.int64
    assert r["level"].tolist() == [0] * 7


def test_a_loader_whose_every_wait_is_in_the_workers_first_round_says_how_many_workers():
    """Eight workers, five batches (each made by its own worker, so all five are in the workers'
    first round): no wait after it, so nothing says the transfer is slow (ready_wait_us 0); the
    waits of 3 ms after the first (12 ms over 4 batches, 55% of the steady loop) are a data_bound
    finding that counts workers: 9.5 ms a batch, a step every 2 ms, so 5 keep up; it has 8."""
    rec = loop_record([400.0] + [3000.0] * 4, step_us=2000.0, make_us=9500.0, start_us=100.0, workers=8)
    f = steady(profile_of(rec))
    assert f["evidence"]["ready_wait_us"] == 0.0 and f["evidence"]["ready_us"] == 0.0
    assert ("A worker takes 9.50 ms per batch; the loop asks for one every 2.00 ms of its own work, so about "
            "5 workers would keep up; it has 8. The workers keep up on average, but batches vary: raise "
            "prefetch_factor (now 2) so more are made ahead.") in f["message"]
    assert "came after the batches were made" not in f["message"]
