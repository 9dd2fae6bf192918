"""What seed 63's sample of mutants (docs/testing.md) showed no test held in ``nbprof.analysis``,
each against an answer of its own: a stats table of six same-named functions, DataLoader records
written by hand (an epoch left early, workers that just keep up, one worker's worth of main-process
loading), a function recompiled twice, and two ranks whose op and label share a name."""

from __future__ import annotations

import pandas as pd
import pytest

import nbprof

from .synthetic import Trace
from .test_boundaries import compile_log_trace, metrics
from .test_data_loading_findings import loop_record, profile_of, steady


def test_a_name_matching_many_functions_lists_the_first_five():
    """Six functions named "leaf" (lines 1 to 6 of /u/m.py): the error says all six match and
    names the first five, not the sixth."""
    from nbprof.analysis.callgraph import match_function
    from nbprof.errors import OptionError

    stats = pd.DataFrame({"filename": ["/u/m.py"] * 6, "lineno": [1, 2, 3, 4, 5, 6], "function": ["leaf"] * 6})
    with pytest.raises(OptionError) as e:
        match_function(stats, "leaf")
    assert str(e.value) == ("'leaf' matches 6 functions (/u/m.py:1(leaf), /u/m.py:2(leaf), /u/m.py:3(leaf), "
                            "/u/m.py:4(leaf), /u/m.py:5(leaf)); pass 'file:line(name)'")


def test_an_epoch_left_early_ends_one_step_after_its_last_wait():
    """One epoch, no StopIteration (left early): the iterator took 100 µs, then waits of 400 and
    5 x 3000 µs with 2000 µs of work after each. The last wait ends at 100 + 400 + 15,000 +
    5 x 2000 = 25,500 µs; the loop ends one median step (2000 µs) later: 27,500 µs, startup
    (to the first wait's end) 500 µs."""
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=3000.0, start_us=100.0, stop=False)
    [s] = profile_of(rec)._data_loading.loaders
    assert s.step_us == 2000.0
    assert s.loop_us == 27_500.0
    assert s.startup_us == 500.0


def test_workers_exactly_enough_are_told_to_prefetch_more():
    """A batch takes 3.5 ms in a worker, the loop asks every 2 ms: ceil(3.5 / 2) = 2 workers keep
    up, and the loader has 2: the answer is prefetch_factor (batches vary), not more workers."""
    rec = loop_record([400.0] + [3000.0] * 5, step_us=2000.0, make_us=3500.0, start_us=100.0)
    f = steady(profile_of(rec))
    assert f["evidence"]["workers_needed"] == 2 and f["evidence"]["num_workers"] == 2
    assert ("so about 2 workers would keep up; it has 2. The workers keep up on average, but batches vary: raise "
            "prefetch_factor (now 2) so more are made ahead.") in f["message"]
    assert "Try DataLoader(num_workers=" not in f["message"] and "CPUs" not in f["message"]


def test_main_process_loading_that_one_worker_would_take_names_one_worker():
    """num_workers=0, each batch made in 1 ms (its wait), 2 ms of the loop's own work a step:
    ceil(1 / 2) = 1 worker keeps up, so the message says num_workers=1 (N only when unknown)."""
    rec = loop_record([1000.0] * 6, workers=0, step_us=2000.0)
    f = steady(profile_of(rec))
    assert f["evidence"]["workers_needed"] == 1
    assert "With DataLoader(num_workers=1) the workers would keep up." in f["message"]


def test_two_recompiles_are_said_in_the_plural(tmp_path):
    """One function compiled, then recompiled twice: "recompiled 2 times"."""
    reason = "tensor 'x' size mismatch at index 0. expected 8, actual 16"
    p = compile_log_trace([metrics(0), metrics(1, reason), metrics(2, reason)]).load(tmp_path)
    f = p.findings
    [msg] = f.loc[f["kind"] == "recompile", "message"].tolist()
    assert f" (…/u/model.py:7) recompiled 2 times; the first failed guard: {reason}" in msg


def test_an_op_and_a_label_of_one_name_differing_alike_come_label_first(tmp_path):
    """Two ranks, each with an op "step" and a record_function label "step" (apart in time): the
    op and the label take 100 µs on rank 0 and 130 µs on rank 1. Both rows differ by 30 µs, so the
    ordering (by that difference, then name) ties; the rows come by name then kind as written,
    "annotation" before "op"."""
    for r, dur in ((0, 100.0), (1, 130.0)):
        t = Trace(rank=r)
        t.op("step", 0, dur)
        t.annotation("step", 500, dur)
        t.write(tmp_path / f"r{r}.json")
    d = nbprof.load_trace(tmp_path).ranks().differences
    assert d[["name", "kind"]].values.tolist() == [["step", "annotation"], ["step", "op"]]
    assert d["time_min_us"].tolist() == [100.0, 100.0] and d["time_max_us"].tolist() == [130.0, 130.0]
