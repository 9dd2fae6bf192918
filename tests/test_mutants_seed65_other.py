"""What seed 65's sample of mutants (docs/testing.md) showed no test held, each against an answer of
its own: pstats of the same DataLoader loop run without nbprof, Python's own qualified name of a
method, line times counted by hand from a hand-made recording, the frames a call chain puts above
a profiler's start, pstats of the files cProfile wrote, a real IPython shell's namespace."""

from __future__ import annotations

import cProfile
import pstats
import sys

import pytest

import nbprof

from .conftest import needs_torch
from .test_mutants_seed62_other import _profile  # a .prof of _fact's calls


# ---------------------------------------------------------------- collect.cprofile.without_own_frames


def _loop() -> list[int]:
    from torch.utils.data import DataLoader

    return [len(b) for b in DataLoader(list(range(10)), batch_size=4)]


@needs_torch
def test_a_wrapper_with_one_caller_gives_the_original_its_callers_edge_unchanged():
    """A one-process DataLoader over 10 items, 4 a batch, under cProfile with nbprof's DataLoader
    watch: ``__next__`` calls nbprof's wrapper of ``_next_data``, which calls torch's. Spliced out
    (``without_own_frames``), the edge ``__next__ -> _next_data`` has the call counts pstats gives
    the same loop run without nbprof (3 batches and the call that ends the loop: 4), and, its only
    caller, the numbers of ``_next_data``'s own row (no share of it doubled)."""
    from torch.utils.data import dataloader as dl

    from nbprof.collect.cprofile import raw_stats, without_own_frames
    from nbprof.collect.data_loading import DataLoaderWatch

    code = dl._SingleProcessDataLoaderIter._next_data.__code__
    key = (code.co_filename, code.co_firstlineno, code.co_name)
    plain = cProfile.Profile()
    plain.enable()
    assert _loop() == [4, 4, 2]
    plain.disable()
    [(caller, edge)] = pstats.Stats(plain).stats[key][4].items()
    assert caller[2] == "__next__" and edge[:2] == (4, 4)

    watch = DataLoaderWatch()
    watch.install()
    try:
        prof = cProfile.Profile()
        prof.enable()
        assert _loop() == [4, 4, 2]
        prof.disable()
    finally:
        watch.remove()
    cc, nc, tt, ct, callers = without_own_frames(raw_stats(prof))[key]
    assert list(callers) == [caller]
    assert callers[caller][:2] == edge[:2]
    assert callers[caller] == (nc, cc, tt, ct)


# ---------------------------------------------------------------- collect.python_lines


class _Model:
    def forward(self, x):
        y = x + 1
        return y * 2


@pytest.mark.skipif(sys.version_info < (3, 11), reason="code objects have a qualified name from Python 3.11 on")
def test_a_methods_lines_are_named_by_its_qualified_name():
    """``%%cprofile --lines`` follows a method of a class: its rows' function is Python's own
    qualified name of it, ``_Model.forward`` (the class in it), not the bare ``forward``."""
    from nbprof.collect.python_line_recorder import PythonLineRecorder
    from nbprof.collect.user_code import UserCode

    m = _Model()
    r = PythonLineRecorder(UserCode(None))
    r.start()
    try:
        assert m.forward(1) == 4
    finally:
        r.stop()
    table = r.table()
    rows = table[table["function_line"] == _Model.forward.__code__.co_firstlineno]
    assert len(rows) == 2
    assert set(rows["function"]) == {_Model.forward.__qualname__} == {"_Model.forward"}


def test_a_lines_time_is_from_its_event_to_the_next_one_of_its_frame():
    """A recording made by hand: one activation of ``_Model.forward`` whose line 2 of the method
    starts at 1,000 ns, line 3 at 4,000 ns, and whose return comes at 10,000 ns. Line 2 took
    4,000 - 1,000 = 3,000 ns = 3 µs, line 3 10,000 - 4,000 = 6,000 ns = 6 µs; one hit each."""
    from nbprof.collect.python_line_recorder import PythonLineRecorder
    from nbprof.collect.user_code import UserCode

    code = _Model.forward.__code__
    first = code.co_firstlineno
    r = PythonLineRecorder(UserCode(None))
    r.codes = [code]
    r.activation_code = [0]
    r.activation_parent = [-1]
    r.events = [(0, first + 1, 1_000), (0, first + 2, 4_000), (0, -1, 10_000)]
    r.stop_ns = 10_000
    table = r.table()
    assert list(table["line"]) == [first + 1, first + 2]
    assert list(table["hits"]) == [1, 1]
    assert list(table["time_us"]) == [3.0, 6.0]
    assert list(table["per_hit_us"]) == [3.0, 6.0]


# ---------------------------------------------------------------- collect.torch_live._starting_profiler


def _down(n: int):
    from nbprof.collect.torch_live import _starting_profiler

    return _starting_profiler() if n == 0 else _down(n - 1)


def _hold(self, n: int):
    """A frame whose ``self`` is the profiler, ``n + 1`` frames above the caller of
    ``_starting_profiler`` (``_down(0)``, ..., ``_down(n)`` between them)."""
    return _down(n)


@needs_torch
def test_the_profiler_starting_is_looked_for_in_the_16_frames_above_the_start():
    """The profiler object is read from the 16 frames that called the start (the caller of
    ``_starting_profiler`` and 15 above it), no further: a ``torch.profiler.profile`` held as
    ``self`` in the 16th frame is named and returned; one in the 17th is not looked at (the
    takeover then says "a torch profiler" and refers to none)."""
    import torch

    prof = torch.profiler.profile()
    assert _hold(prof, 14) == ("torch.profiler.profile", prof)  # the 16th frame
    assert _hold(prof, 15) == ("a torch profiler", None)  # the 17th


# ---------------------------------------------------------------- comparison._compare_python


@pytest.mark.parametrize("metric, compared", [("tottime_per_call_s", "tottime_s"), ("cumtime_per_call_s", "cumtime_s")])
def test_comparing_python_profiles_per_call_compares_their_times(tmp_path, metric, compared):
    """Before: _fact(6) twice; after: _fact(3) once. A per-call time asked for compares the times
    themselves (a per-call number of two runs of different call counts is no total): the summary's
    metric is the time, its totals pstats' total time of each file, and _fact's row its pstats
    times and calls (12 -> 3)."""
    _profile(tmp_path / "b.prof", [6, 6])
    _profile(tmp_path / "a.prof", [3])
    stats = [pstats.Stats(str(tmp_path / f)) for f in ("b.prof", "a.prof")]
    c = nbprof.compare(tmp_path / "b.prof", tmp_path / "a.prof", metric=metric)
    assert c.summary.metric == compared
    assert c.summary.total_before == pytest.approx(stats[0].total_tt)
    assert c.summary.total_after == pytest.approx(stats[1].total_tt)
    row = c.table.set_index("function").loc["_fact"]
    fact = [next(v for k, v in s.stats.items() if k[2] == "_fact") for s in stats]
    column = 2 if compared == "tottime_s" else 3
    assert row[f"{compared}_before"] == pytest.approx(fact[0][column])
    assert row[f"{compared}_after"] == pytest.approx(fact[1][column])
    assert (row["ncalls_before"], row["ncalls_after"]) == (12, 3)


# ---------------------------------------------------------------- run.runner.takeover_note


@needs_torch
def test_a_takeover_by_a_profiler_an_object_holds_names_the_path_to_it(shell):
    """Another torch profiler ended nbprof's session; the user's namespace reaches it only as
    ``trainer.profiler`` (an object of the user's class, not the profiler itself, under a name):
    the note tells the user to read it with ``nbprof.from_profiler(trainer.profiler)``."""
    import weakref

    import torch

    from nbprof.collect.collector import Takeover
    from nbprof.run.runner import takeover_note

    class Trainer:
        pass

    trainer = Trainer()
    trainer.profiler = torch.profiler.profile()
    shell.user_ns["trainer"] = trainer
    try:
        note = takeover_note(Takeover(by="torch.profiler.profile", at_s=0.25, other=weakref.ref(trainer.profiler)),
                             "torch", "cell", 1.0, shell)
    finally:
        del shell.user_ns["trainer"]
    assert note.endswith("; its own results: nbprof.from_profiler(trainer.profiler)"), note

