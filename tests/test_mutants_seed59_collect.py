"""What seed 59's sample of mutants (docs/testing.md) showed no test held, each against an answer
of its own: IPython's own traceback and debugger, the real gzip'd trace repeated, Lightning's own
profiler state, the operating system's affinity mask."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import os
import re
import sys

import pytest

from .conftest import needs_torch, run, trace_path

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_in_xmode_verbose_a_profiled_cells_traceback_still_shows_the_variables(shell):
    """``%xmode Verbose`` shows each line's variables below it: it parses the cell's cached source,
    so nbprof leaves the marker line there (a magic line is not Python, and the variables would
    vanish). The failing line of a profiled cell shows ``x = 1`` as the same cell unprofiled does."""
    before = shell.InteractiveTB.mode
    shell.run_line_magic("xmode", "Verbose")
    try:
        texts = []
        for head in ("", "%%cprofile -q -o vb\n"):
            result, captured = run(shell, f"{head}x = 1\ny = x + undefined_name\n")
            assert isinstance(result.error_in_exec, NameError)
            texts.append(ANSI.sub("", captured.stdout + captured.stderr))
    finally:
        shell.run_line_magic("xmode", before)
    plain, profiled = texts
    assert re.search(r"^-+> 2 y = x \+ undefined_name\n\s+x = 1$", plain, re.M), plain  # IPython's answer
    assert re.search(r"^-+> 3 y = x \+ undefined_name\n\s+x = 1$", profiled, re.M), profiled


STOPS = """
import io, sys
from IPython.core.debugger import Pdb
from torch.utils.data import DataLoader, Dataset

class Stops(Dataset):
    \"\"\"One sample, whose __getitem__ stops in IPython's debugger and asks it ``where``.\"\"\"
    def __len__(self):
        return 1
    def __getitem__(self, i):
        out = io.StringIO()
        Pdb(stdin=io.StringIO("where\\ncontinue\\n"), stdout=out).set_trace(sys._getframe())
        wheres.append(out.getvalue())
        return i

wheres = []
stops_loader = DataLoader(Stops(), batch_size=1)
"""
FRAME = re.compile(r"^[> ] (\S.*)\((\d+)\)(\S+)\(\)$")


def _frames_below_the_cell(where: str) -> list[tuple[str, str, str]]:
    """The frames IPython's debugger lists, from the DataLoader's ``__next__`` inward."""
    frames = [m.groups() for m in map(FRAME.match, ANSI.sub("", where).splitlines()) if m]
    first = next(i for i, (file, _, _) in enumerate(frames) if file.endswith("dataloader.py"))
    return frames[first:]


@needs_torch
def test_a_debugger_stopped_in_getitem_without_workers_shows_no_frame_of_nbprof(shell):
    """``breakpoint()`` in ``__getitem__`` of a loader without workers, in a profiled cell: the
    debugger's ``where`` lists the frames it lists in the same loop unprofiled (torch's, the
    dataset's); nbprof's wrapper of ``_next_data`` is one of the frames it hides."""
    result, _ = run(shell, STOPS)
    assert result.error_in_exec is None, result.error_in_exec
    try:
        for head in ("", "%%cprofile -q -o dbg\n"):
            result, _ = run(shell, f"{head}seen = [b for b in stops_loader]\n")
            assert result.error_in_exec is None, result.error_in_exec
        plain, profiled = (_frames_below_the_cell(w) for w in shell.user_ns["wheres"])
    finally:
        for name in ("Stops", "stops_loader", "wheres", "seen", "dbg"):
            shell.user_ns.pop(name, None)
    assert [f for _, _, f in plain][-1] == "__getitem__" and any(f == "fetch" for _, _, f in plain)
    assert profiled == plain
    assert sys.gettrace() is None  # the debugger let go at "continue"
    assert not any("nbprof" in file for file, _, _ in profiled)


def test_a_gzip_stream_past_the_bomb_floor_at_a_real_traces_ratio_is_read_whole(monkeypatch):
    """A real torch trace gz'd (15x), as 90 members one after another (as ``cat`` joins files):
    68 MB of JSON, past the size from which a stream expanding more than 200x is refused as a
    compression bomb; this one expands as the real file does, and is read whole, byte for byte."""
    from nbprof.collect.trace_limits import _BOMB_FLOOR, Gunzip, max_trace_bytes

    monkeypatch.delenv("NBPROF_MAX_TRACE_BYTES", raising=False)  # the default limit: bombs are checked
    member = trace_path("cnn_train_cuda").read_bytes()
    raw = gzip.decompress(member)
    copies = _BOMB_FLOOR // len(raw) + 2
    assert len(raw) * copies > _BOMB_FLOOR and len(raw) < 50 * len(member)
    expected = hashlib.sha256()
    for _ in range(copies):
        expected.update(raw)
    limit = max_trace_bytes()
    assert limit.default
    stream = Gunzip(io.BytesIO(member * copies), "cat.json.gz", limit)
    got, size = hashlib.sha256(), 0
    while piece := stream.read(4 << 20):
        got.update(piece)
        size += len(piece)
    assert size == len(raw) * copies and got.digest() == expected.digest()


@pytest.mark.skipif(not importlib.util.find_spec("pytorch_lightning"), reason="needs pytorch-lightning")
def test_a_lightning_profiler_on_local_rank_1_profiles_nothing(tmp_path):
    """Lightning's Trainer gives each process's profiler its local rank in ``setup`` (with more
    than one process); the profile is rank 0's: on rank 1 the stage starts none, and Lightning's
    own ``local_rank`` says 1."""
    import nbprof
    from nbprof.run import runner

    from .lightning_fit import PACKAGES, lightning

    lightning(PACKAGES[0])
    prof = nbprof.lightning.Profiler(quiet=True)
    try:
        prof.setup("fit", local_rank=1, log_dir=str(tmp_path))
        prof.start("run_training_batch")
        started = runner.active()
        prof.stop("run_training_batch")
        assert started is None  # no profile of its own on rank 1
        assert prof.local_rank == 1  # Lightning's Profiler.local_rank
    finally:
        prof.describe()
    assert prof.result is None and prof.results == []


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's affinity mask")
def test_a_thread_pinned_to_one_cpu_may_use_one():
    """``taskset -c N``: the OS says one CPU (``os.sched_getaffinity``), and so does nbprof."""
    from nbprof.system import usable_cpus

    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mask)})
    try:
        assert len(os.sched_getaffinity(0)) == 1
        assert usable_cpus() == 1
    finally:
        os.sched_setaffinity(0, mask)
