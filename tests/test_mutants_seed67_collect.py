"""What seed 67's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: line times counted by hand from a hand-made recording of a line hit twice, the file fd 2
is before and after a torch session (``os.fstat``), and the note's sentence for another torch
profiler that no name of the user's reaches."""

from __future__ import annotations

import os

import pytest

from .conftest import needs_torch

# ---------------------------------------------------------------- collect.python_lines.line_table


def _looping(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    return s


def test_a_line_hit_twice_has_its_time_shared_by_its_two_hits():
    """A recording made by hand: one activation of ``_looping`` whose ``for`` line (its second)
    starts at 1,000 ns and again at 3,000 ns, its body line at 2,000 ns, and whose return comes at
    7,000 ns. The ``for`` line ran twice, for (2,000 - 1,000) + (7,000 - 3,000) = 5,000 ns = 5 µs:
    5 / 2 = 2.5 µs a hit; the body line once, 1 µs."""
    from nbprof.collect.python_line_recorder import PythonLineRecorder
    from nbprof.collect.user_code import UserCode

    code = _looping.__code__
    first = code.co_firstlineno
    r = PythonLineRecorder(UserCode(None))
    r.codes = [code]
    r.activation_code = [0]
    r.activation_parent = [-1]
    r.events = [(0, first + 2, 1_000), (0, first + 3, 2_000), (0, first + 2, 3_000), (0, -1, 7_000)]
    r.stop_ns = 7_000
    table = r.table()
    assert list(table["line"]) == [first + 2, first + 3]
    assert list(table["hits"]) == [2, 1]
    assert list(table["time_us"]) == [5.0, 1.0]
    assert list(table["per_hit_us"]) == [2.5, 1.0]


# ---------------------------------------------------------------- collect.torch_live.TorchSession.end


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


@needs_torch
@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_a_torch_session_gives_fd_2_back_when_it_ends(capfd):
    """While it runs, a torch session puts a pipe on fd 2 (torch's C++ log lines are filtered
    there); once it has ended, fd 2 is the file it was before (``os.fstat``: same device and
    inode), and a line in glog's format written to it then reaches it as written."""
    import torch

    from nbprof.collect.torch_live import TorchSession
    from nbprof.settings import TorchOptions

    capfd.readouterr()
    before = _identity(2)
    s = TorchSession(TorchOptions())
    s.begin()
    try:
        during = _identity(2)
        torch.ones(4) + 1
    finally:
        s.end()
    after = _identity(2)
    line = b"W0101 00:00:00.000000 1 file.cpp:1] after the session\n"
    os.write(2, line)
    if s._stderr is not None:  # only so that a failure here leaves no pipe on fd 2 for the next test
        s._stderr.stop()
    assert during != before
    assert after == before
    assert capfd.readouterr().err == line.decode()


# ---------------------------------------------------------------- run.runner.takeover_note


@needs_torch
def test_a_takeover_by_a_profiler_no_name_reaches_says_how_to_read_it():
    """Another torch profiler ended nbprof's session and no name of the user's reaches it (no
    shell): the note ends by telling the user to call ``nbprof.from_profiler`` on the
    ``torch.profiler.profile`` that ran it, in those words."""
    import weakref

    import torch

    from nbprof.collect.collector import Takeover
    from nbprof.run.runner import takeover_note

    other = torch.profiler.profile()
    note = takeover_note(Takeover(by="torch.profiler.profile", at_s=0.25, other=weakref.ref(other)),
                         "torch", "cell", 1.0, None)
    assert note.startswith("another torch profiler (torch.profiler.profile) started "), note
    said = "; nbprof.from_profiler(prof) reads its results from the torch.profiler.profile that ran it"
    assert note.endswith(said), note
