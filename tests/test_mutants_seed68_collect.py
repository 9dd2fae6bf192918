"""What seed 68's sample of mutants (docs/testing.md) showed no fast-tier test in the pytest process
held: a line recorder that ran undisturbed says nothing replaced it (only the pyenv subprocess test,
which mutmut's runs leave out, said so), an instant event of a known non-memory category with an
unreadable memory field is read as the typed path reads it, and the controls panel on a machine
whose torch says CUDA is available offers CUDA (no CPU-only machine reached that branch)."""

from __future__ import annotations

import sys

import pytest

from .conftest import needs_torch
from .synthetic import PID, TID, Trace
from .test_mutants_untested import panel  # noqa: F401  (the fixture: a fresh panel, put back after)

# ------------------------------------------------------------------------------ --lines


@pytest.mark.skipif(sys.gettrace() is not None, reason="another tracer (coverage, a debugger) runs: refused")
def test_a_line_recorder_no_tracer_took_over_from_says_nothing_replaced_it():
    """The recorder follows this test's lines and the code sets no trace function of its own: after
    ``stop`` nothing replaced it (``sys.gettrace()`` is None again, as before ``start``), and the line
    table has no note."""
    from nbprof.collect.python_line_recorder import PythonLineRecorder
    from nbprof.collect.user_code import UserCode

    r = PythonLineRecorder(UserCode(None))
    r.start()
    try:
        total = sum(range(3))
    finally:
        r.stop()
    assert total == 3 and sys.gettrace() is None
    assert r.refused is None
    assert r.replaced is False
    assert r.table().attrs["notes"] == []


# ------------------------------------------------------------------------------ the loose reader


def test_an_instant_op_with_an_unreadable_bytes_arg_is_read_as_without_it(tmp_path):
    """An instant ("i") event of category ``cpu_op`` whose ``Bytes`` is text ("many"): the file then
    fails the typed decoder and is checked field by field; ``Bytes`` is read for memory events only,
    so the event is kept as the same trace without that arg reads it (typed path): the ops
    aten::mm and aten::mark, and no note of an unreadable field."""

    def load(args, name):
        t = Trace()
        t.op("aten::mm", 0, 20)
        t.events.append({"ph": "i", "s": "t", "cat": "cpu_op", "name": "aten::mark", "pid": PID, "tid": TID,
                         "ts": 5, "args": args})
        return t.load(tmp_path, name)

    typed = load({}, "typed.json")
    loose = load({"Bytes": "many"}, "loose.json")
    assert typed.events[["name", "kind", "start_us"]].values.tolist() == [["aten::mm", "op", 0.0],
                                                                          ["aten::mark", "op", 5.0]]
    assert loose.events[["name", "kind", "start_us"]].values.tolist() == [["aten::mm", "op", 0.0],
                                                                          ["aten::mark", "op", 5.0]]
    assert typed.meta.reader_notes == [] and loose.meta.reader_notes == []


# ------------------------------------------------------------------------------ the controls panel


def test_where_torch_says_cuda_is_available_the_panel_offers_cuda(panel, monkeypatch):  # noqa: F811
    """torch's ``cuda.is_available()`` answering True (as on a CUDA machine; this one has none): the
    panel's CUDA toggle, read back through ipywidgets, is enabled and on by default, no reason is
    shown, and the next run records CPU and CUDA."""
    import torch

    import nbprof

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    c = nbprof.controls()
    cuda = c.widget.children[1].children[0]
    assert (cuda.description, cuda.disabled, cuda.value) == ("CUDA", False, True)
    assert c.widget.children[2].value == ""
    assert c.describe() == "next %%torchprof records: CPU, CUDA"
