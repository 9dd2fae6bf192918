"""What a trace handler and a Trainer callback say about themselves when a notebook shows them
(the last line of a cell): the cycles torch's schedule actually ran and the folder they were
written to, and the window the user asked for. mutmut found no test calling either ``__repr__``."""

from __future__ import annotations

import pytest
import torch

import nbprof

# torch warns (once per process) that a schedule of several cycles keeps only the last one's events:
# the point here, not a problem
pytestmark = pytest.mark.filterwarnings("ignore:Warning. Profiler clears events at the end of each cycle:UserWarning")


def _scheduled_cycles(handler, cycles: int) -> None:
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=cycles)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                on_trace_ready=handler) as prof:
        for _ in range(2 * cycles):  # a warm-up step and an active one each
            torch.ones(4).add_(1)
            prof.step()


def test_a_trace_handlers_repr_counts_the_cycles_torch_ran_and_names_its_folder(tmp_path):
    handler = nbprof.trace_handler(tmp_path / "traces", show=False)
    assert repr(handler) == f"<nbprof.trace_handler: 0 cycles, writing to {tmp_path / 'traces'}>"
    _scheduled_cycles(handler, 2)
    # torch wrote one file per finished cycle: the repr's count is the files on disk
    written = sorted((tmp_path / "traces").glob("*.pt.trace.json"))
    assert len(written) == 2
    assert repr(handler) == f"<nbprof.trace_handler: 2 cycles, writing to {tmp_path / 'traces'}>"


def test_a_trace_handler_without_a_folder_says_only_its_cycles():
    handler = nbprof.trace_handler(show=False)
    _scheduled_cycles(handler, 3)
    assert len(handler.profiles) == 1  # keep=1: the last cycle's profile; the count is of all three
    assert repr(handler) == "<nbprof.trace_handler: 3 cycles>"


def test_a_profiler_callbacks_repr_is_the_window_it_was_given():
    pytest.importorskip("transformers")
    from nbprof.huggingface import ProfilerCallback

    assert repr(ProfilerCallback(2, 3, 4, 5, show=False)) == "ProfilerCallback(wait=2, warmup=3, active=4, repeat=5)"
    assert repr(ProfilerCallback()) == "ProfilerCallback(wait=1, warmup=1, active=3, repeat=1)"
