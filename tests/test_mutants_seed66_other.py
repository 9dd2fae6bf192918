"""What seed 66's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: numpy's own view of which memory an array uses, torch's documented no-op profiler
(``enabled=False``), the flags as the table in docs/reference/flags.md spells them, written out
by hand."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import needs_torch


# ---------------------------------------------------------------- events.make_events_frame


def test_the_events_table_holds_the_arrays_it_is_given_without_copying_them():
    """The reader hands ``make_events_frame`` arrays of millions of events already of the columns'
    dtypes: the table holds those arrays as they are (numpy: its columns are the same memory),
    not a second copy of each."""
    import pandas as pd

    from nbprof.events import make_events_frame

    start = np.array([0.0, 1.5, 4.0])
    thread = np.array([0, 0, 1], dtype=np.int64)
    name = pd.Categorical.from_codes(np.array([0, 1, 0], dtype=np.int8), categories=["aten::mm", "aten::add"])
    ev = make_events_frame(name=name, start_us=start, thread=thread)
    assert np.shares_memory(ev["start_us"].to_numpy(), start)
    assert np.shares_memory(ev["thread"].to_numpy(), thread)
    assert ev["name"].astype(str).tolist() == ["aten::mm", "aten::add", "aten::mm"]


# ---------------------------------------------------------------- integrations.profilers._read_profiler


@needs_torch
def test_a_profiler_made_with_enabled_false_is_one_line_saying_it_did_not_run():
    """``torch.autograd.profiler.profile(enabled=False)`` is torch's no-op: it never starts a
    session (torch sets neither its results nor ``entered``). ``from_profiler`` on it, after its
    ``with`` block, is the one-line "has not run yet" (it raised a raw AttributeError), not the
    TraceError that another profiler ended it: no other profiler ran here."""
    import torch

    import nbprof

    prof = torch.autograd.profiler.profile(enabled=False)
    with prof:
        torch.ones(3).sum()
    assert not torch.autograd._profiler_enabled()
    with pytest.raises(nbprof.NbprofError) as caught:
        nbprof.from_profiler(prof)
    assert type(caught.value).__name__ == "OptionError", caught.value
    assert "has not run yet" in str(caught.value) and "\n" not in str(caught.value)


# ---------------------------------------------------------------- run.flags.markdown_table


def test_each_switch_and_its_no_form_share_one_row_of_the_flags_table():
    """docs/reference/flags.md: ``--memory / --no-memory`` is one row with the positive form's
    meaning (the same for cuda, shapes, stack); ``--no-html`` has no ``--html`` switch before it
    (``--html PATH`` takes a value) and keeps its own row. Written out by hand from the table."""
    from nbprof.run.flags import markdown_table

    rows = [line.split(" | ")[0].removeprefix("| ") for line in markdown_table().splitlines() if line.startswith("| `")]
    for switch in ("cuda", "memory", "shapes", "stack"):
        assert f"`--{switch}` / `--no-{switch}`" in rows, switch
        assert f"`--no-{switch}`" not in rows, switch
    assert "`--html PATH`" in rows and "`--no-html`" in rows
    assert "| `--memory` / `--no-memory` | torch | Record allocations: memory per operator and the memory curve. |" \
        in markdown_table().splitlines()
